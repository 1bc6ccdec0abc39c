// The `main` flag parser: values, ranges, and one-line errors naming the flag.
#include "args.h"

#include <doctest/doctest.h>

static bool parse(std::vector<const char *> a, llm_cli_params & p, std::string & err) {
    a.insert(a.begin(), "main");
    return llm_cli_parse((int) a.size(), a.data(), p, &err);
}

TEST_CASE("llama.cpp-compatible flags parse") {
    llm_cli_params p;
    std::string err;
    REQUIRE(parse({"-m", "x.gguf", "-p", "hi", "-n", "12", "-c", "256", "-b", "32", "-t", "2", "-s", "7", "--temp",
                   "0", "--top-k", "5", "--top-p", "0.5", "--min-p", "0.1", "--repeat-penalty", "1.1",
                   "--repeat-last-n", "16", "-cnv", "-sys", "be nice", "--special", "--verbose-prompt", "-ngl", "99"},
                  p, err));
    CHECK(p.model == "x.gguf");
    CHECK(p.prompt == "hi");
    CHECK(p.n_predict == 12);
    CHECK(p.n_ctx == 256);
    CHECK(p.n_batch == 32);
    CHECK(p.n_threads == 2);
    CHECK(p.sampling.seed == 7u);
    CHECK(p.sampling.temp == 0.0f);
    CHECK(p.sampling.top_k == 5);
    CHECK(p.sampling.top_p == doctest::Approx(0.5f));
    CHECK(p.sampling.min_p == doctest::Approx(0.1f));
    CHECK(p.sampling.repeat_penalty == doctest::Approx(1.1f));
    CHECK(p.sampling.repeat_last_n == 16);
    CHECK(p.conversation);
    CHECK(p.system_prompt == "be nice");
    CHECK(p.special);
    CHECK(p.verbose_prompt);
    CHECK(p.n_gpu_layers == 99);
}

TEST_CASE("bad flag values give an error naming the flag") {
    struct bad { std::vector<const char *> argv; const char * expect; };
    const bad cases[] = {
        {{"-n"}, "missing value for -n"},
        {{"-c", "abc"}, "invalid integer 'abc' for -c"},
        {{"-t", "0"}, "out of range"},
        {{"--temp", "-1"}, "out of range"},
        {{"--top-p", "1.5"}, "out of range"},
        {{"--temp", "nan"}, "invalid number"},
        {{"-b", "99999999999999999999"}, "invalid integer"},
        {{"--bogus"}, "unknown argument '--bogus'"},
        {{"--cache-type", "q4"}, "unknown cache type"},
        {{"-ctk", "q5_1"}, "unknown cache type 'q5_1' for -ctk (f32, f16, q8_0, q4_0)"},
        {{"-ctv", "q8_0"}, "a quantized V cache (-ctv q8_0) needs flash attention (-fa)"},
        {{"--chat-template", "chatml"}, "unknown chat template"},
        {{"-f", "/nonexistent/prompt.txt"}, "cannot read prompt file"},
        {{"-s", "x"}, "invalid seed"},
        {{"--repeat-penalty", "0"}, "must be > 0"},
    };
    for (const auto & c : cases) {
        llm_cli_params p;
        std::string err;
        CHECK_FALSE(parse(c.argv, p, err));
        CHECK_MESSAGE(err.find(c.expect) != std::string::npos, err);
        CHECK(err.find('\n') == std::string::npos);
    }
}

TEST_CASE("KV cache types: -ctk / -ctv (any case), --cache-type sets both, a quantized V with -fa") {
    llm_cli_params p;
    std::string err;
    CHECK(p.cache_type_k == GGML_TYPE_F16);
    CHECK(p.cache_type_v == GGML_TYPE_F16);
    REQUIRE(parse({"-ctk", "Q8_0", "-ctv", "q4_0", "-fa"}, p, err));
    CHECK(p.cache_type_k == GGML_TYPE_Q8_0);
    CHECK(p.cache_type_v == GGML_TYPE_Q4_0);
    llm_cli_params p2;
    REQUIRE(parse({"--cache-type", "f32"}, p2, err));
    CHECK(p2.cache_type_k == GGML_TYPE_F32);
    CHECK(p2.cache_type_v == GGML_TYPE_F32);
    llm_cli_params p3;
    REQUIRE(parse({"--cache-type-k", "q4_0"}, p3, err));  // a quantized K alone needs no -fa
    CHECK(p3.cache_type_k == GGML_TYPE_Q4_0);
    CHECK(p3.cache_type_v == GGML_TYPE_F16);
}

TEST_CASE("UTF-8 validation finds the first bad byte") {
    CHECK(llm_utf8_invalid_at("plain ascii") == -1);
    CHECK(llm_utf8_invalid_at("h\xC3\xA9llo \xF0\x9F\x98\x80") == -1);
    CHECK(llm_utf8_invalid_at("ab\xFFz") == 2);
    CHECK(llm_utf8_invalid_at("ab\xC3") == 2);             // truncated
    CHECK(llm_utf8_invalid_at("\xC0\xAF") == 0);           // overlong
    CHECK(llm_utf8_invalid_at("x\xED\xA0\x80") == 1);      // surrogate
}
