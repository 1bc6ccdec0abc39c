// test_llm_logits.cpp - the Llama forward pass against an independent float64 numpy reference
// (gguf-py/scripts/reference_forward.py) on small random GGUFs written by gguf-py/scripts/gen_random_llama.py;
// the KV cache (prompt, split batches, decode deep into the cache, context shift), q8_0 / f16-cache /
// flash-attention tolerances, q8_0/q4_0 KV caches; the real stories260K model; loader errors on bad files.
#include "doctest_cstr.h"
#include "gguf.h"
#include "llm.h"
#include "llm_test_util.h"
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

const char * k_llama2_args = "--n-embd 64 --n-ff 172 --n-layer 2 --n-head 4 --n-vocab 256 --vocab none --ctx 512";
const char * k_llama3_args =
    "--n-embd 128 --n-ff 320 --n-layer 2 --n-head 8 --n-head-kv 2 --n-vocab 300 --vocab none --theta 500000 --ctx 512";

// prompt in one batch, prompt split over batches, one token at a time: all against the reference
void check_against_reference(const std::string & path, int n_prompt, uint32_t seed) {
    model_ptr m(path);
    const int n_vocab = llm_model_hparams(m.m).n_vocab;
    const auto toks = random_tokens(n_prompt, n_vocab, seed);
    const auto ref = ref_logits(path, toks, n_vocab);
    int worst = -1;

    const auto one = cpp_logits(m.m, toks, f32_params(256, 512, true));
    const double e1 = max_rel_err(one, ref, n_vocab, &worst);
    INFO("one batch: worst row " << worst);
    CHECK(e1 < 1e-4);

    const auto split = cpp_logits(m.m, toks, f32_params(256, 3, true));  // n_batch 3: 4 graphs
    CHECK(max_rel_err(split, ref, n_vocab) < 1e-4);

    const auto stepped = cpp_logits(m.m, toks, f32_params(256, 512, true), 1);
    CHECK(max_rel_err(stepped, ref, n_vocab) < 1e-4);
    MESSAGE(path << ": rel err one batch " << e1);
}

// Every row's logits of toks[0 .. n_prompt) decoded in one call (batches of the context's n_batch), then of the
// single steps toks[n_prompt .. n_total)
std::vector<float> prompt_then_steps(llm_context * c, const std::vector<int32_t> & toks, int n_prompt, int n_total,
                                     int n_vocab) {
    std::vector<float> out;
    std::string err;
    REQUIRE_MESSAGE(llm_decode(c, toks.data(), n_prompt, &err), err);
    for (int i = 0; i < n_prompt; ++i) out.insert(out.end(), llm_get_logits_ith(c, i), llm_get_logits_ith(c, i) + n_vocab);
    for (int i = n_prompt; i < n_total; ++i) {
        REQUIRE_MESSAGE(llm_decode(c, toks.data() + i, 1, &err), err);
        out.insert(out.end(), llm_get_logits(c), llm_get_logits(c) + n_vocab);
    }
    return out;
}

// Context shift on c: decode toks[0 .. 20), remove cells [4, 9), decode toks[20]; the relative error of that last
// step's logits against ref (the reference logits of the shortened sequence, shift_shortened(toks))
std::vector<int32_t> shift_shortened(const std::vector<int32_t> & toks) {
    std::vector<int32_t> s(toks.begin(), toks.begin() + 4);
    s.insert(s.end(), toks.begin() + 9, toks.begin() + 21);
    return s;
}
double shift_rel_err(llm_context * c, const std::vector<int32_t> & toks, const std::vector<float> & ref, int n_vocab) {
    std::string err;
    REQUIRE_MESSAGE(llm_decode(c, toks.data(), 20, &err), err);
    llm_kv_remove(c, 4, 9);
    CHECK(llm_n_past(c) == 15);
    REQUIRE_MESSAGE(llm_decode(c, toks.data() + 20, 1, &err), err);
    return rel_err(llm_get_logits(c), ref.data() + (shift_shortened(toks).size() - 1) * n_vocab, n_vocab);
}

}  // namespace

TEST_CASE("llama2 shape (MHA): prompt, split batches, single steps match the numpy reference") {
    const std::string p = gen_model("l2_f32", std::string(k_llama2_args) + " --outtype f32 --seed 1");
    check_against_reference(p, 10, 1);
}

TEST_CASE("use_mmap = 0 (weights read into a CPU buffer) gives the same logits as the mmap path (use_mmap = 1)") {
    const std::string p = gen_model("l2_f32", std::string(k_llama2_args) + " --outtype f32 --seed 1");
    model_ptr m(p, 1);
    std::string err;
    llm_model_params mp;
    mp.use_mmap = 0;
    int n_progress = 0;
    float last_progress = 0;
    mp.progress = [&](float f) { ++n_progress; last_progress = f; return true; };
    llm_model * mc = llm_model_load(p.c_str(), mp, &err);
    REQUIRE_MESSAGE(mc != nullptr, err);
    CHECK(n_progress > 0);
    CHECK(last_progress == 1.0f);
    const int n_vocab = llm_model_hparams(m.m).n_vocab;
    const auto toks = random_tokens(12, n_vocab, 21);
    const auto a = cpp_logits(m.m, toks, f32_params(64, 5, true));
    const auto b = cpp_logits(mc, toks, f32_params(64, 5, true));
    CHECK(a == b);
    CHECK(llm_model_n_params(mc) == llm_model_n_params(m.m));
    CHECK(llm_model_desc(mc).find("llama") == 0);
    llm_model_free(mc);

    mp.progress = [](float) { return false; };  // cancelled load: a clean error
    CHECK(llm_model_load(p.c_str(), mp, &err) == nullptr);
    CHECK(err.find("cancelled") != std::string::npos);
}

TEST_CASE("repacked CPU weights (q4_0, Q4_K_M: 8-row groups) give the logits of the plain layout") {
    // llama.cpp's quantized files of the shared vectors; GGML_CPU_REPACK=1 repacks on any build (on AVX2 builds the
    // default), use_repack = false keeps the file's layout. Prompts in 5-token ubatches (the N > 1 path unpacks row
    // blocks) and then one token at a time (the group mat-vecs).
    for (const char * name : {"kq-Q4_0.gguf", "kq-Q4_K_M.gguf"}) {
        const std::string path = llm_shared_path(std::string("models/quant-vectors/") + name);
        if (access(path.c_str(), R_OK) != 0) {
            MESSAGE("SKIP: " << path << " not found");
            continue;
        }
        CAPTURE(name);
        const char * old_env = std::getenv("GGML_CPU_REPACK");
        const std::string saved = old_env ? old_env : "";
        setenv("GGML_CPU_REPACK", "1", 1);
        std::string err;
        llm_model_params mp;
        llm_model * rep = llm_model_load(path.c_str(), mp, &err);
        mp.use_repack = false;
        llm_model * plain = llm_model_load(path.c_str(), mp, &err);
        if (old_env) {
            setenv("GGML_CPU_REPACK", saved.c_str(), 1);
        } else {
            unsetenv("GGML_CPU_REPACK");
        }
        REQUIRE_MESSAGE(rep != nullptr, err);
        REQUIRE_MESSAGE(plain != nullptr, err);
        auto has_repack = [](const llm_model * m) {
            for (const auto & [bname, bytes] : llm_model_buffer_sizes(m))
                if (bname == "CPU_REPACK" && bytes > 0) return true;
            return false;
        };
        CHECK(has_repack(rep));
        CHECK_FALSE(has_repack(plain));
        const int n_vocab = llm_model_hparams(plain).n_vocab;
        const auto toks = random_tokens(12, n_vocab, 5);
        llm_context_params cp = f32_params(64, 5, true);
        cp.n_threads = 2;
        const auto a = cpp_logits(plain, toks, cp), b = cpp_logits(rep, toks, cp);
        CHECK(max_rel_err(a, b, n_vocab) < 1e-5);
        const auto c = cpp_logits(plain, toks, cp, 1), d = cpp_logits(rep, toks, cp, 1);
        CHECK(max_rel_err(c, d, n_vocab) < 1e-5);
        CHECK(max_rel_err(a, d, n_vocab) < 1e-3); // prompt and single steps: the same model
        llm_model_free(rep);
        llm_model_free(plain);
    }
}

TEST_CASE("llama3 shape (GQA 8/2, theta 500000), untied, tied, rope_freqs match the numpy reference") {
    check_against_reference(gen_model("l3_f32", std::string(k_llama3_args) + " --outtype f32 --seed 2"), 10, 2);
    check_against_reference(gen_model("l3_tied", std::string(k_llama3_args) + " --outtype f32 --tied --seed 3"), 10,
                            3);
    check_against_reference(gen_model("l3_rf", std::string(k_llama3_args) + " --outtype f32 --rope-freqs --seed 4"),
                            10, 4);
}

TEST_CASE("decode one token at a time deep into the cache (300 tokens, across the 256-cell KV padding step, reused graphs) matches the reference") {
    for (const char * name : {"l2_f32", "l3_rf"}) {
        const std::string p = std::string(name) == "l2_f32"
                                  ? gen_model("l2_f32", std::string(k_llama2_args) + " --outtype f32 --seed 1")
                                  : gen_model("l3_rf", std::string(k_llama3_args) + " --outtype f32 --rope-freqs --seed 4");
        model_ptr m(p);
        const int n_vocab = llm_model_hparams(m.m).n_vocab;
        const int n = 300;
        const auto toks = random_tokens(n, n_vocab, 7);
        const auto ref = ref_logits(p, toks, n_vocab);
        ctx_ptr c(m.m, f32_params(320, 64, false));  // attention reads 256 cells, then all 320
        std::string err;
        double worst = 0;
        // a prompt of 10, then single tokens; compare every position from 10 on
        REQUIRE_MESSAGE(llm_decode(c.c, toks.data(), 10, &err), err);
        worst = rel_err(llm_get_logits(c.c), ref.data() + 9 * n_vocab, n_vocab);
        for (int i = 10; i < n; ++i) {
            REQUIRE_MESSAGE(llm_decode(c.c, toks.data() + i, 1, &err), err);
            const float * l = llm_get_logits(c.c);
            worst = std::max(worst, rel_err(l, ref.data() + (size_t) i * n_vocab, n_vocab));
            // the in-graph argmax agrees with the host logits
            const int32_t am = llm_argmax_last(c.c);
            REQUIRE(am >= 0);
            CHECK(l[am] == *std::max_element(l, l + n_vocab));
        }
        CHECK(llm_n_past(c.c) == n);
        MESSAGE(std::string(name) << ": decode to 300, worst rel err " << worst);
        CHECK(worst < 1e-4);
    }
}

TEST_CASE("flash attention equals the mul_mat path; f16 cache and q8_0 weights within tolerance") {
    const std::string p = gen_model("l3_f32", std::string(k_llama3_args) + " --outtype f32 --seed 2");
    model_ptr m(p);
    const int n_vocab = llm_model_hparams(m.m).n_vocab;
    const auto toks = random_tokens(40, n_vocab, 11);
    // 30 tokens in batches of 8, then 10 single steps
    auto run = [&](llm_model * mm, llm_context_params cp) {
        cp.all_logits = true;
        ctx_ptr c(mm, cp);
        return prompt_then_steps(c.c, toks, 30, 40, n_vocab);
    };
    llm_context_params cp = f32_params(64, 8, true);
    const auto base = run(m.m, cp);
    cp.flash_attn = true;
    const auto fa = run(m.m, cp);
    const double e_fa = max_rel_err(fa, base, n_vocab);
    CHECK(e_fa < 1e-5);

    cp.flash_attn = false;
    cp.type_k = cp.type_v = GGML_TYPE_F16;
    const auto f16 = run(m.m, cp);
    const double e_f16 = max_rel_err(f16, base, n_vocab);
    CHECK(e_f16 < 2e-3);  // K/V rounded to 11 bits
    cp.flash_attn = true;
    const auto f16_fa = run(m.m, cp);
    const double e_f16_fa = max_rel_err(f16_fa, f16, n_vocab);
    CHECK(e_f16_fa < 1e-3);  // the two paths round different intermediates to f16

    // q8_0 weights (same seed: the same f32 weights, quantized) vs the f32 model, and vs the reference of the
    // q8_0 file itself (dequantized weights in float64; the C++ side also quantizes activations to q8_1)
    const std::string pq = gen_model("l3_q8", std::string(k_llama3_args) + " --outtype q8_0 --seed 2");
    model_ptr mq(pq);
    const auto q8 = run(mq.m, f32_params(64, 8, true));
    const double e_q8 = max_rel_err(q8, base, n_vocab);
    CHECK(e_q8 < 3e-2);
    const auto ref_q8 = ref_logits(pq, toks, n_vocab);
    const double e_q8_ref = max_rel_err(q8, ref_q8, n_vocab);
    CHECK(e_q8_ref < 2e-2);
    MESSAGE("flash vs mul_mat " << e_fa << ", f16 cache vs f32 " << e_f16 << ", f16 flash vs f16 mul_mat " << e_f16_fa
                                << ", q8_0 vs f32 " << e_q8
                                << ", q8_0 vs its reference " << e_q8_ref);
}

// one layer, GQA 8/2, llama3 rope_freqs
const char * k_l3_1layer_args = "--n-embd 128 --n-ff 320 --n-layer 1 --n-head 8 --n-head-kv 2 --n-vocab 300 "
                                "--vocab none --theta 10000 --rope-freqs --ctx 512 --outtype f32 --seed 5";

TEST_CASE("context shift: removing cells re-rotates the moved keys (1 layer: exact vs the reference)") {
    // With one layer, the cached K/V of a token depend only on the token and its position, so after
    // removing [p0, p1) the cache equals the cache of the shortened sequence.
    const std::string p = gen_model("l3_1layer", k_l3_1layer_args);
    model_ptr m(p);
    const int n_vocab = llm_model_hparams(m.m).n_vocab;
    const auto toks = random_tokens(21, n_vocab, 13);
    const auto ref = ref_logits(p, shift_shortened(toks), n_vocab);
    for (int variant = 0; variant < 4; ++variant) {
        const bool fa = variant & 1, f16 = variant & 2;
        llm_context_params cp = f32_params(64, 16, false);
        cp.flash_attn = fa;
        if (f16) cp.type_k = cp.type_v = GGML_TYPE_F16;
        ctx_ptr c(m.m, cp);
        const double e = shift_rel_err(c.c, toks, ref, n_vocab);
        MESSAGE("context shift (flash_attn " << fa << ", cache " << (f16 ? "f16" : "f32") << "): rel err " << e);
        CHECK(e < (f16 ? 2e-3 : 1e-4));
        // removing the tail only truncates; clearing empties
        llm_kv_remove(c.c, 10, 1000);
        CHECK(llm_n_past(c.c) == 10);
        llm_kv_clear(c.c);
        CHECK(llm_n_past(c.c) == 0);
    }
}

TEST_CASE("removing a sequence's tail keeps the step graph; a removal that shifts cells drops it") {
    const std::string p = gen_model("l3_1layer", k_l3_1layer_args);
    model_ptr m(p);
    const int n_vocab = llm_model_hparams(m.m).n_vocab;
    const auto toks = random_tokens(16, n_vocab, 21);
    ctx_ptr c(m.m, f32_params(64, 16, false));
    std::string err;
    REQUIRE_MESSAGE(llm_decode(c.c, toks.data(), 16, &err), err);
    const std::vector<float> first(llm_get_logits(c.c), llm_get_logits(c.c) + n_vocab);
    const int builds = llm_get_perf(c.c).n_graph_builds;
    CHECK(builds == 1);
    // as bench does between runs: the tail goes, nothing is left to shift, the same prompt reuses the graph
    llm_kv_remove(c.c, 0, 16);
    CHECK(llm_n_past(c.c) == 0);
    REQUIRE_MESSAGE(llm_decode(c.c, toks.data(), 16, &err), err);
    CHECK(llm_get_perf(c.c).n_graph_builds == builds);
    CHECK(rel_err(llm_get_logits(c.c), first.data(), n_vocab) < 1e-6);
    // cells after the removed range move (a context shift runs its own graph): the step graph is built again
    llm_kv_remove(c.c, 4, 9);
    CHECK(llm_n_past(c.c) == 11);
    llm_kv_remove(c.c, 0, 11);
    REQUIRE_MESSAGE(llm_decode(c.c, toks.data(), 16, &err), err);
    CHECK(llm_get_perf(c.c).n_graph_builds == builds + 1);
    CHECK(rel_err(llm_get_logits(c.c), first.data(), n_vocab) < 1e-6);
}

// head_dim 64 (a multiple of the q8_0/q4_0 block), GQA 4/2, llama3 rope_freqs
const char * k_kvq_args = "--n-embd 256 --n-ff 512 --n-layer 2 --n-head 4 --n-head-kv 2 --n-vocab 300 --vocab none "
                          "--theta 500000 --rope-freqs --ctx 512 --outtype f32 --seed 6";

TEST_CASE("quantized KV cache (q8_0, q4_0; K and V apart): logits within tolerance of the f16 cache and the reference") {
    const std::string p = gen_model("kvq", k_kvq_args);
    model_ptr m(p);
    const int n_vocab = llm_model_hparams(m.m).n_vocab;
    const auto toks = random_tokens(60, n_vocab, 17);
    const auto ref = ref_logits(p, toks, n_vocab);
    // 40 prompt tokens in batches of 16, then 20 single steps: every row's logits
    auto run = [&](ggml_type tk, ggml_type tv, bool fa) {
        llm_context_params cp = f32_params(64, 16, true);
        cp.type_k = tk;
        cp.type_v = tv;
        cp.flash_attn = fa;
        ctx_ptr c(m.m, cp);
        const llm_perf perf = llm_get_perf(c.c);
        // 2 layers x 64 cells x 128 values (2 KV heads x 64) per tensor
        CHECK(perf.kv_k_bytes == 2 * ggml_row_size(tk, 128) * 64);
        CHECK(perf.kv_v_bytes == 2 * ggml_row_size(tv, 128) * 64);
        return prompt_then_steps(c.c, toks, 40, 60, n_vocab);
    };
    const auto f16 = run(GGML_TYPE_F16, GGML_TYPE_F16, true);
    const auto q8 = run(GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, true);
    const auto q4 = run(GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, true);
    const auto q8k = run(GGML_TYPE_Q8_0, GGML_TYPE_F16, false);  // quantized K through the mul_mat path
    const auto q8k_fa = run(GGML_TYPE_Q8_0, GGML_TYPE_F16, true);
    const auto q4v = run(GGML_TYPE_F16, GGML_TYPE_Q4_0, true);
    const double e_f16 = max_rel_err(f16, ref, n_vocab);
    const double e_q8 = max_rel_err(q8, f16, n_vocab), e_q8_ref = max_rel_err(q8, ref, n_vocab);
    const double e_q4 = max_rel_err(q4, f16, n_vocab), e_q4_ref = max_rel_err(q4, ref, n_vocab);
    const double e_q8k = max_rel_err(q8k, q8k_fa, n_vocab), e_q8k_ref = max_rel_err(q8k_fa, ref, n_vocab);
    const double e_q4v = max_rel_err(q4v, f16, n_vocab);
    MESSAGE("max rel err of the logits: f16 cache vs reference " << e_f16 << "; q8_0 K+V vs f16 " << e_q8
                                                               << " (vs reference " << e_q8_ref << "); q4_0 K+V vs f16 "
                                                               << e_q4 << " (vs reference " << e_q4_ref
                                                               << "); q8_0 K: mul_mat vs flash " << e_q8k
                                                               << ", vs reference " << e_q8k_ref << "; q4_0 V vs f16 "
                                                               << e_q4v);
    CHECK(e_f16 < 2e-3);
    CHECK(e_q8 < 2e-2);  // stated tolerance of a q8_0 cache: 2% of the largest logit
    CHECK(e_q8_ref < 2e-2);
    CHECK(e_q4 < 2e-1);  // q4_0: 20%
    CHECK(e_q4_ref < 2e-1);
    CHECK(e_q8k < 2e-3);  // the same q8_0 keys through the two attention paths
    CHECK(e_q8k_ref < 2e-2);
    CHECK(e_q4v < 2e-1);
    CHECK(e_q8 > 0);  // the cache really is quantized
}

TEST_CASE("quantized KV cache: context shift re-rotates and requantizes the moved keys (1 layer: vs the reference)") {
    // one layer: the cached K/V of a token depend only on the token and its position (see the f32/f16 case above)
    const std::string p = gen_model("kvq_1layer",
                                    "--n-embd 256 --n-ff 512 --n-layer 1 --n-head 4 --n-head-kv 2 --n-vocab 300 --vocab "
                                    "none --theta 500000 --rope-freqs --ctx 512 --outtype f32 --seed 7");
    model_ptr m(p);
    const int n_vocab = llm_model_hparams(m.m).n_vocab;
    const auto toks = random_tokens(21, n_vocab, 13);
    const auto ref = ref_logits(p, shift_shortened(toks), n_vocab);
    for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        llm_context_params cp = f32_params(64, 16, false);
        cp.flash_attn = true;
        cp.type_k = cp.type_v = t;
        ctx_ptr c(m.m, cp);
        const double e = shift_rel_err(c.c, toks, ref, n_vocab);
        MESSAGE("context shift, " << std::string(ggml_type_name(t)) << " cache: rel err " << e);
        CHECK(e < (t == GGML_TYPE_Q8_0 ? 2e-2 : 2e-1));
    }
}

TEST_CASE("quantized KV cache: bad combinations are one-line errors") {
    const std::string p = gen_model("kvq", k_kvq_args);
    model_ptr m(p);
    std::string err;
    llm_context_params cp = f32_params(64, 16, false);
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = GGML_TYPE_Q8_0;  // without flash attention
    CHECK(llm_context_new(m.m, cp, &err) == nullptr);
    CHECK(err == "a quantized V cache (q8_0) needs flash attention (-fa)");
    cp.type_v = GGML_TYPE_Q4_1;  // not a cache type
    cp.flash_attn = true;
    CHECK(llm_context_new(m.m, cp, &err) == nullptr);
    CHECK(err == "KV cache type q4_1 is not supported (f32, f16, q8_0, q4_0)");
    ggml_type t;
    CHECK(llm_kv_type_from_name("Q8_0", &t));
    CHECK(t == GGML_TYPE_Q8_0);
    CHECK(llm_kv_type_from_name("f32", &t));
    CHECK(t == GGML_TYPE_F32);
    CHECK_FALSE(llm_kv_type_from_name("q8", &t));
    CHECK_FALSE(llm_kv_type_from_name("q4_1", &t));
    // a head size of 16 (llama3 test shape) is no multiple of the 32-block
    const std::string p3 = gen_model("l3_f32", std::string(k_llama3_args) + " --outtype f32 --seed 2");
    model_ptr m3(p3);
    cp.type_k = GGML_TYPE_Q8_0;
    cp.type_v = GGML_TYPE_F16;
    CHECK(llm_context_new(m3.m, cp, &err) == nullptr);
    CHECK(err == "KV cache type q8_0 needs a head size that is a multiple of 32 (this model's is 16)");
}

TEST_CASE("decode errors: context overflow and bad token ids are clean errors") {
    const std::string p = gen_model("l2_f32", std::string(k_llama2_args) + " --outtype f32 --seed 1");
    model_ptr m(p);
    ctx_ptr c(m.m, f32_params(16, 8, false));
    std::string err;
    std::vector<int32_t> toks(17, 5);
    CHECK_FALSE(llm_decode(c.c, toks.data(), 17, &err));
    CHECK(err.find("context full") != std::string::npos);
    CHECK(llm_n_past(c.c) == 0);
    toks[3] = 256;
    CHECK_FALSE(llm_decode(c.c, toks.data(), 4, &err));
    CHECK(err.find("256") != std::string::npos);
    CHECK(llm_n_past(c.c) == 0);
    REQUIRE_MESSAGE(llm_decode(c.c, toks.data(), 3, &err), err);
    CHECK(llm_n_past(c.c) == 3);
}

TEST_CASE("stories260K: greedy decode reproduces the published sample") {
    const std::string path = llm_shared_path("models/stories260K.gguf");
    if (access(path.c_str(), R_OK) != 0) {
        MESSAGE("SKIPPED: " << path << " not found");
        return;
    }
    model_ptr m(path);
    const llm_vocab & vocab = llm_model_get_vocab(m.m);
    std::vector<int32_t> ids = llm_tokenize(vocab, "Once upon a time", true, false);
    REQUIRE(!ids.empty());
    CHECK(ids[0] == vocab.bos);
    llm_context_params cp;
    cp.n_ctx = 128;
    cp.n_threads = 2;
    ctx_ptr c(m.m, cp);
    std::string err;
    REQUIRE_MESSAGE(llm_decode(c.c, ids.data(), (int) ids.size(), &err), err);
    for (int i = 0; i < 40; ++i) {
        const int32_t next = llm_argmax_last(c.c);
        CHECK(next == std::max_element(llm_get_logits(c.c), llm_get_logits(c.c) + vocab.n_vocab()) -
                          llm_get_logits(c.c));
        ids.push_back(next);
        REQUIRE_MESSAGE(llm_decode(c.c, &next, 1, &err), err);
    }
    // without the BOS, the first piece loses the SentencePiece space prefix (as llama.cpp detokenizes)
    const std::string text = llm_detokenize(vocab, std::vector<int32_t>(ids.begin() + 1, ids.end()));
    const std::string want = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
    INFO("generated: " << text);
    CHECK(text.rfind(want, 0) == 0);
}

// ---- bad input ------------------------------------------------------------------------------------------

namespace {

std::string load_error(const std::string & path) {
    std::string err;
    llm_model_params mp;
    llm_model * m = llm_model_load(path.c_str(), mp, &err);
    llm_model_free(m);
    CHECK(m == nullptr);
    CHECK(!err.empty());
    CHECK(err.find('\n') == std::string::npos);  // one line
    return err;
}

// Copy src (a small model) to dst, dropping tensor `drop` and replacing tensor `replace` by `repl`.
void rewrite_model(const std::string & src, const std::string & dst, const char * drop, ggml_tensor * repl,
                   const char * arch = nullptr) {
    ggml_context * meta = nullptr;
    std::string err;
    gguf_context * g = gguf_init_from_file(src.c_str(), {false, &meta}, &err);
    REQUIRE_MESSAGE(g, err);
    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, g);
    if (arch) gguf_set_val_str(out, "general.architecture", arch);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const char * name = gguf_get_tensor_name(g, i);
        if (drop && std::string(name) == drop) continue;
        if (repl && std::string(name) == repl->name) {
            gguf_add_tensor(out, repl);
        } else {
            gguf_add_tensor(out, ggml_get_tensor(meta, name));
        }
    }
    REQUIRE_MESSAGE(gguf_write_to_file(out, dst.c_str(), false, &err), err);
    gguf_free(out);
    ggml_free(meta);
    gguf_free(g);
}

}  // namespace

TEST_CASE("loader errors: missing file, not a GGUF, unknown architecture, missing tensor, wrong shape, bad type") {
    const std::string base = gen_model("l2_f32", std::string(k_llama2_args) + " --outtype f32 --seed 1");
    const std::string dir = tmp().path;

    CHECK(load_error(dir + "/does-not-exist.gguf").find("does-not-exist.gguf") != std::string::npos);

    {
        std::ofstream(dir + "/text.gguf") << "this is not a gguf file, just some text\n";
        load_error(dir + "/text.gguf");
    }
    {
        rewrite_model(base, dir + "/arch.gguf", nullptr, nullptr, "gpt2");
        const std::string e = load_error(dir + "/arch.gguf");
        CHECK_MESSAGE(e.find("unknown architecture 'gpt2'") != std::string::npos, e);
    }
    {
        rewrite_model(base, dir + "/missing.gguf", "blk.1.ffn_up.weight", nullptr);
        const std::string e = load_error(dir + "/missing.gguf");
        CHECK_MESSAGE(e.find("missing tensor 'blk.1.ffn_up.weight'") != std::string::npos, e);
    }
    ggml_context * ctx = ggml_init({4 * 1024 * 1024, nullptr, false});
    {
        ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 32);
        for (int64_t i = 0; i < ggml_nelements(t); ++i) ((float *) t->data)[i] = 0.01f * (i % 7);
        ggml_set_name(t, "blk.0.attn_k.weight");
        rewrite_model(base, dir + "/shape.gguf", nullptr, t);
        const std::string e = load_error(dir + "/shape.gguf");
        CHECK_MESSAGE(e.find("blk.0.attn_k.weight") != std::string::npos, e);
        CHECK_MESSAGE(e.find("[64, 32]") != std::string::npos, e);
        CHECK_MESSAGE(e.find("[64, 64]") != std::string::npos, e);
    }
    {
        ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_1, 64, 64);
        memset(t->data, 0, ggml_nbytes(t));
        ggml_set_name(t, "blk.1.attn_q.weight");
        rewrite_model(base, dir + "/type.gguf", nullptr, t);
        const std::string e = load_error(dir + "/type.gguf");
        CHECK_MESSAGE(e.find("blk.1.attn_q.weight") != std::string::npos, e);
        CHECK_MESSAGE(e.find("q8_1") != std::string::npos, e);
    }
    {
        ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 64);
        memset(t->data, 0, ggml_nbytes(t));
        ggml_set_name(t, "output_norm.weight");
        rewrite_model(base, dir + "/norm_type.gguf", nullptr, t);
        const std::string e = load_error(dir + "/norm_type.gguf");
        CHECK_MESSAGE(e.find("output_norm.weight") != std::string::npos, e);
    }
    ggml_free(ctx);
}
