// test_quant_ppl.cpp - end to end against llama.cpp on the shared quantization vectors: the
// perplexity tool on each kq-*.gguf (written by llama.cpp's quantize in ten types, one f16) lands
// within 1% of llama.cpp's llama-perplexity on the same file and text (reference.json: ppl, with
// ppl_args "-c 128 -b 128"). Covers loading, the CPU mat-mul kernels of every type (mixed per
// tensor in the _M files) and get_rows of the quantized token embeddings. SKIPs without the vectors.
#include "llm_test_util.h"
#include "test_util.h"

#include "doctest_cstr.h"
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

// "Final estimate: PPL = 123.4 +/- 5.6" -> 123.4; -1 when missing
double final_ppl(const std::string & out) {
    const std::string key = "Final estimate: PPL = ";
    const size_t at = out.rfind(key);
    if (at == std::string::npos) return -1.0;
    return std::strtod(out.c_str() + at + key.size(), nullptr);
}

} // namespace

TEST_CASE("perplexity of llama.cpp's quantized files within 1% of llama.cpp's, every type") {
    const std::string dir = llm_shared_path("models/quant-vectors");
    std::ifstream jf(dir + "/reference.json");
    if (!jf) {
        MESSAGE("SKIP: " << dir << "/reference.json not found");
        return;
    }
    const nlohmann::json ref = nlohmann::json::parse(jf);
    const std::string text = dir + "/" + ref.at("text").get<std::string>();
    const std::string args = ref.at("ppl_args").get<std::string>();
    const std::string tool = std::string(LLM_BINARY_DIR) + "/bin/perplexity";
    if (access(tool.c_str(), X_OK) != 0) { // e.g. the sanitizer build, which builds no examples
        MESSAGE("SKIP: " << tool << " not built");
        return;
    }
    int n_files = 0;
    for (const auto & [name, m] : ref.at("model").items()) {
        const std::string file = dir + "/" + m.at("file").get<std::string>();
        const double want = m.at("ppl").get<double>();
        int rc = 0;
        const std::string out = run_cmd("'" + tool + "' -m '" + file + "' -f '" + text + "' " + args + " -t 2", &rc);
        const double got = final_ppl(out);
        INFO(name << ": ours " << got << ", llama.cpp " << want);
        REQUIRE(rc == 0);
        CHECK(got > 0);
        CHECK(std::abs(got / want - 1.0) < 0.01);
        MESSAGE(name << ": PPL " << got << " vs llama.cpp " << want << " (" << 100.0 * (got / want - 1.0) << "%)");
        ++n_files;
    }
    CHECK(n_files == 11);
}

TEST_CASE("the perplexity check can fail: a different file's figure is more than 1% off") {
    const std::string dir = llm_shared_path("models/quant-vectors");
    std::ifstream jf(dir + "/reference.json");
    if (!jf) return;
    const nlohmann::json ref = nlohmann::json::parse(jf);
    // the types' perplexities differ by more than the tolerance, so a wrong dequantizer would show
    const double q4_0 = ref.at("model").at("Q4_0").at("ppl").get<double>();
    const double q8_0 = ref.at("model").at("Q8_0").at("ppl").get<double>();
    CHECK(std::abs(q4_0 / q8_0 - 1.0) > 0.05);
    CHECK(final_ppl("x\nFinal estimate: PPL = 12.5 +/- 1.0\n") == doctest::Approx(12.5));
    CHECK(final_ppl("no estimate") < 0);
}
