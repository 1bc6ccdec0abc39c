// test_quant_numpy.cpp - the C++ reference quantizers and dequantizers against the independent numpy
// implementation in gguf-py (gguf/quants.py, written from the format description; its own tests
// check it against llama.cpp's files). The shared quant vectors hold N(0, 0.3) weights only; this
// test covers the blocks that exercise the edge paths of the scale searches: all-zero, constant,
// one spike, one sign only, tiny and huge magnitudes, exact ties, zero sub-blocks.
#include "llm_test_util.h"

#include "ggml.h"

#include <cstring>
#include "doctest_cstr.h"
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int64_t k_row = 512; // two K-quant super-blocks, sixteen 32-blocks

// One row per pattern; each pattern fills the row in 32-value pieces so that every sub-block
// size sees it.
std::vector<float> edge_rows(int n_random) {
    std::mt19937 rng(1234);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    std::vector<float> v;
    auto row = [&](auto gen) {
        for (int64_t i = 0; i < k_row; ++i)
            v.push_back(gen(i));
    };
    row([](int64_t) { return 0.0f; });
    row([](int64_t) { return 0.75f; });
    row([](int64_t) { return -3.5f; });
    row([&](int64_t i) { return i % 37 == 5 ? 100.0f : 0.01f * nd(rng); });       // spikes
    row([&](int64_t) { return std::fabs(nd(rng)); });                            // positive only
    row([&](int64_t) { return -std::fabs(nd(rng)) - 2.0f; });                    // negative, offset
    row([&](int64_t) { return 1e-6f * nd(rng); });                               // tiny
    row([&](int64_t) { return 3e4f * nd(rng); });                                // huge
    row([&](int64_t i) { return (float)((int)(i % 7) - 3) * 0.5f; });            // exact ties
    row([&](int64_t i) { return (i / 16) % 2 ? 0.0f : nd(rng); });               // zero sub-blocks
    row([&](int64_t i) { return (i / 32) % 3 == 0 ? 0.0f : ud(rng) * (1 + i); }); // growing range
    for (int r = 0; r < n_random; ++r)
        row([&](int64_t) { return nd(rng); });
    return v;
}

std::vector<char> read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

} // namespace

TEST_CASE("reference quantize / dequantize equal the numpy implementation on edge-case blocks, every type") {
    require_python();
    const ggml_type types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
                               GGML_TYPE_Q8_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
                               GGML_TYPE_Q6_K, GGML_TYPE_Q8_K};
    const std::vector<float> x = edge_rows(8);
    const int64_t n_rows = (int64_t)x.size() / k_row;
    const std::string in = tmp().path + "/edge.f32", prefix = tmp().path + "/edge";
    {
        std::ofstream f(in, std::ios::binary);
        f.write((const char *)x.data(), (std::streamsize)(x.size() * sizeof(float)));
    }
    std::string names;
    for (ggml_type t : types)
        names += std::string(" ") + ggml_type_name(t);
    int rc = 0;
    const std::string cmd = std::string(k_python) + " " LLM_SOURCE_DIR "/gguf-py/scripts/quant_golden.py " + in + " " +
                            std::to_string(k_row) + " " + prefix + names;
    const std::string out = run_cmd(cmd, &rc);
    REQUIRE_MESSAGE(rc == 0, cmd << "\n" << out);

    for (ggml_type t : types) {
        INFO("type " << ggml_type_name(t));
        const ggml_type_traits * tt = ggml_get_type_traits(t);
        const size_t row_bytes = ggml_row_size(t, k_row);
        std::vector<char> q(row_bytes * n_rows);
        for (int64_t r = 0; r < n_rows; ++r)
            tt->from_float_ref(x.data() + r * k_row, q.data() + r * row_bytes, k_row);
        const std::vector<char> want_q = read_file(prefix + "." + ggml_type_name(t) + ".q");
        REQUIRE(want_q.size() == q.size());
        for (int64_t r = 0; r < n_rows; ++r) {
            CAPTURE(r);
            CHECK(std::memcmp(q.data() + r * row_bytes, want_q.data() + r * row_bytes, row_bytes) == 0);
        }
        // dequantize numpy's bytes (equal to ours where the check above passed) and compare bit for bit
        const std::vector<char> want_f = read_file(prefix + "." + ggml_type_name(t) + ".f32");
        REQUIRE(want_f.size() == x.size() * sizeof(float));
        std::vector<float> y(x.size());
        for (int64_t r = 0; r < n_rows; ++r)
            tt->to_float(want_q.data() + r * row_bytes, y.data() + r * k_row, k_row);
        CHECK(std::memcmp(y.data(), want_f.data(), want_f.size()) == 0);
    }
}
