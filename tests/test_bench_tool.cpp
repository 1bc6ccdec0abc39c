// test_bench_tool.cpp - the bench tool end to end on the CPU (shared stories260K, -ngl 0): beside each tg
// figure the bandwidth roofline and the percent of it reached, in the markdown table ("-" for pp rows) and
// in the JSON fields (per repetition, consistent with t/s and the model size); --no-roofline skips them.
// SKIPPED when the tool is not built or the shared model is missing.
#include "llm_test_util.h"
#include "test_util.h"

#include "doctest_cstr.h"
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace {

const std::string k_tool = std::string(LLM_BINARY_DIR) + "/bin/bench";

bool have_tool_and_model() {
    if (access(k_tool.c_str(), X_OK) != 0) {
        MESSAGE("SKIP: " << k_tool << " not built (cmake --build <build dir> --target bench)");
        return false;
    }
    if (access(llm_shared_path("models/stories260K.gguf").c_str(), R_OK) != 0) {
        MESSAGE("SKIP: " << llm_shared_path("models/stories260K.gguf") << " not found (set LLM_SHARED)");
        return false;
    }
    return true;
}

struct bench_run {
    int rc = -1;
    std::string out, err; // stdout, stderr
};

// bench on the shared model, on the CPU, 2 threads, 2 repetitions of pp8 and tg8, plus `args`; a 64 MiB
// probe buffer (the default, 3x the L3, costs seconds of page faults on a VM)
bench_run bench(const std::string & args) {
    const std::string out_path = tmp().path + "/bench.out";
    bench_run r;
    int status = 0;
    // run_cmd appends 2>&1: stdout goes to the file inside the braces, stderr to run_cmd's pipe
    r.err = run_cmd("{ '" + k_tool + "' -m '" + llm_shared_path("models/stories260K.gguf") +
                        "' -p 8 -n 8 -r 2 -t 2 -ngl 0 --probe-mib 64 " + args + " > '" + out_path + "'; }",
                    &status);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream f(out_path);
    r.out.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    return r;
}

// the cells of the markdown table's rows (trimmed), header first
std::vector<std::vector<std::string>> table_rows(const std::string & md) {
    std::vector<std::vector<std::string>> rows;
    std::istringstream in(md);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] != '|' || line.find("---") != std::string::npos) continue;
        std::vector<std::string> cells;
        std::string cell;
        std::istringstream ls(line.substr(1));
        while (std::getline(ls, cell, '|')) {
            const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
            cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
        }
        rows.push_back(cells);
    }
    return rows;
}

size_t column(const std::vector<std::string> & header, const std::string & name) {
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE_MESSAGE(it != header.end(), "no column '" << name << "'");
    return it - header.begin();
}

const std::regex k_mean_sd(R"(([0-9]+\.[0-9]+)( ± [0-9]+\.[0-9]+)?)");

// a 0|1 flag given 2 or x: a one-line error naming the value and the flag, and a non-zero exit
void check_not_0_or_1(const std::string & flag) {
    for (const char * v : {"2", "x"}) {
        const bench_run bad = bench(flag + " " + v);
        INFO(flag, " ", v);
        CHECK(bad.rc != 0);
        CHECK(bad.err == "error: invalid value '" + std::string(v) + "' for " + flag + "\n");
    }
}
} // namespace

TEST_CASE("bench: roofline t/s and % roofline beside the tg figure, '-' beside pp") {
    if (!have_tool_and_model()) return;
    const bench_run r = bench("");
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(
        r.out.find("roofline of CPU tg rows: model size / read bandwidth (4 streams + prefetch, 2 threads, 64 MiB)") !=
        std::string::npos);
    const auto rows = table_rows(r.out);
    REQUIRE(rows.size() == 3); // header, pp8, tg8
    const size_t c_test = column(rows[0], "test"), c_ts = column(rows[0], "t/s");
    CHECK(column(rows[0], "roofline t/s") == c_ts + 1); // t/s stays where it was, the new columns after it
    CHECK(column(rows[0], "% roofline") == c_ts + 2);
    CHECK(rows[1][c_test] == "pp8");
    CHECK(rows[1][c_ts + 1] == "-");
    CHECK(rows[1][c_ts + 2] == "-");
    CHECK(rows[2][c_test] == "tg8");
    std::smatch m;
    for (size_t c : {c_ts, c_ts + 1, c_ts + 2}) {
        REQUIRE_MESSAGE(std::regex_match(rows[2][c], m, k_mean_sd), "tg8 cell '" << rows[2][c] << "'");
        CHECK(std::stod(m[1]) > 0);
    }
    // the probes: one before the first repetition and one after each
    const std::regex probes_line("tg8: read bandwidth before the first run and after each:(( [0-9.]+)+) GB/s");
    REQUIRE_MESSAGE(std::regex_search(r.err, m, probes_line), r.err);
    std::istringstream probes(m[1].str());
    int n = 0;
    for (double gbs; probes >> gbs; ++n)
        CHECK(gbs > 0);
    CHECK(n == 3);
}

TEST_CASE("bench -o json: per-repetition bandwidth, roofline and percent, consistent with t/s and size") {
    if (!have_tool_and_model()) return;
    const bench_run r = bench("-o json");
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    const nlohmann::json j = nlohmann::json::parse(r.out); // stdout is pure JSON
    REQUIRE(j.size() == 2);
    const nlohmann::json &pp = j[0], &tg = j[1];
    CHECK(pp["test"] == "pp8");
    for (const char * key :
         {"bw_kind", "samples_bw_gbs", "avg_roofline_ts", "avg_roofline_pct", "samples_roofline_pct"}) {
        CHECK_MESSAGE(pp.contains(key), key);
        CHECK_MESSAGE(pp[key].is_null(), key);
    }
    CHECK(tg["test"] == "tg8");
    CHECK(tg["bw_kind"] == "cpu_read_4streams");
    const double size = tg["model_size"];
    REQUIRE(tg["samples_bw_gbs"].size() == 2);
    REQUIRE(tg["samples_roofline_ts"].size() == 2);
    REQUIRE(tg["samples_roofline_pct"].size() == 2);
    double sum = 0;
    for (int i = 0; i < 2; ++i) {
        const double bw = tg["samples_bw_gbs"][i], roof = tg["samples_roofline_ts"][i];
        const double ts = tg["samples_ts"][i], pct = tg["samples_roofline_pct"][i];
        CHECK(bw > 0);
        CHECK(roof == doctest::Approx(bw * 1e9 / size));
        CHECK(pct == doctest::Approx(100.0 * ts / roof));
        sum += pct;
    }
    CHECK(tg["avg_roofline_pct"].get<double>() == doctest::Approx(sum / 2));
    CHECK(tg["stddev_roofline_pct"].get<double>() >= 0);
}

TEST_CASE("bench --no-roofline: no measurement, '-' in the roofline columns") {
    if (!have_tool_and_model()) return;
    const bench_run r = bench("--no-roofline");
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(r.out.find("roofline of") == std::string::npos);
    CHECK(r.err.find("read bandwidth") == std::string::npos);
    const auto rows = table_rows(r.out);
    REQUIRE(rows.size() == 3);
    const size_t c_ts = column(rows[0], "t/s");
    CHECK(rows[2][c_ts + 1] == "-");
    CHECK(rows[2][c_ts + 2] == "-");
}

TEST_CASE("bench -nr: 1 runs with the file's layout, a bad value is a one-line error and a non-zero exit") {
    if (!have_tool_and_model()) return;
    const bench_run ok = bench("--no-roofline -nr 1");
    REQUIRE_MESSAGE(ok.rc == 0, ok.err);
    CHECK(table_rows(ok.out).size() == 3);
    check_not_0_or_1("-nr");
}

TEST_CASE("bench -mmp: 0 (read into memory) and 1 (mapped) run, a bad value is a one-line error and a non-zero exit") {
    if (!have_tool_and_model()) return;
    for (const char * v : {"0", "1"}) {
        const bench_run ok = bench(std::string("--no-roofline -mmp ") + v);
        REQUIRE_MESSAGE(ok.rc == 0, ok.err);
        CHECK(table_rows(ok.out).size() == 3);
    }
    check_not_0_or_1("-mmp");
}
