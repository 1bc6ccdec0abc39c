// test_llm_gpu.cpp - whole-model logits with layers offloaded to the GPU (-ngl 0 .. n_layer + 1)
// against the pure CPU path, for Llama 2 (MHA) and Llama 3 (GQA, theta 500000, rope_freqs) shapes in
// f32, q8_0, Q4_0 and Q4_K_M (the last two made by the quantize tool: llama.cpp's per-tensor mix, so q4_K with
// q6_K attn_v / ffn_down / output), at prompt and at decode positions. The scheduler splits the graph between
// the backends and copies activations across; every split point is exercised. Also: a -c too large for the
// GPU fails the load with one line, before any upload.
// Without a GPU (or a build without CUDA) it prints SKIPPED and exits 77 (CTest SKIP_RETURN_CODE).
#include "cuda_test_util.h" // first: exits 77 (skip) without a GPU
#include "gguf.h"
#include "llm.h"
#include "llm_batch_util.h"
#include "llm_test_util.h"
#include "test_util.h"

#include <cstdio>
#include <cstdlib>
#include "doctest_cstr.h"
#include <sys/wait.h>

#ifdef GGML_USE_CUDA

namespace {

// the model at path with ngl layers on the GPU (*m) and a context of 256 cells on it; one GPU (CUDA0) unless a split
// mode and tensor split say otherwise
llm_context * open_ctx(const std::string & path, int ngl, bool flash, ggml_type kv, llm_model ** m,
                       llm_split_mode sm = LLM_SPLIT_NONE, const std::vector<float> & ts = {}) {
    std::string err;
    llm_model_params mp;
    mp.n_gpu_layers = ngl;
    mp.split_mode = sm;
    mp.tensor_split = ts;
    *m = llm_model_load(path.c_str(), mp, &err);
    REQUIRE_MESSAGE(*m != nullptr, err);
    llm_context_params cp;
    cp.n_ctx = 256;
    cp.n_threads = 2;
    cp.type_k = cp.type_v = kv;
    cp.flash_attn = flash;
    llm_context * c = llm_context_new(*m, cp, &err);
    REQUIRE_MESSAGE(c != nullptr, err);
    return c;
}

// logits of a prompt (last token) and of n_decode single steps after it
std::vector<std::vector<float>> run(const std::string & path, int ngl, bool flash, const std::vector<int32_t> & toks,
                                    int n_prompt, ggml_type kv = GGML_TYPE_F32, llm_split_mode sm = LLM_SPLIT_NONE,
                                    const std::vector<float> & ts = {}, int * n_devices = nullptr) {
    std::string err;
    llm_model * m = nullptr;
    llm_context * c = open_ctx(path, ngl, flash, kv, &m, sm, ts);
    if (n_devices) {
        *n_devices = 0;
        for (const auto & b : llm_model_buffer_sizes(m)) *n_devices += b.first.rfind("CUDA", 0) == 0;
    }
    const int n_vocab = llm_model_hparams(m).n_vocab;
    std::vector<std::vector<float>> out;
    REQUIRE_MESSAGE(llm_decode(c, toks.data(), n_prompt, &err), err);
    out.emplace_back(llm_get_logits(c), llm_get_logits(c) + n_vocab);
    for (size_t i = n_prompt; i < toks.size(); ++i) {
        REQUIRE_MESSAGE(llm_decode(c, &toks[i], 1, &err), err);
        out.emplace_back(llm_get_logits(c), llm_get_logits(c) + n_vocab);
    }
    llm_context_free(c);
    llm_model_free(m);
    return out;
}

// the largest relative error of a row of got against the same row of ref (as many rows)
double worst_rel_err(const std::vector<std::vector<float>> & got, const std::vector<std::vector<float>> & ref,
                     int n_vocab) {
    REQUIRE(got.size() == ref.size());
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, rel_err(got[i].data(), ref[i].data(), n_vocab));
    return worst;
}

void check_all_ngl(const std::string & path, int n_layer, double tol) {
    const int n_vocab = 300;
    const std::vector<int32_t> toks = random_tokens(40, n_vocab, 7);
    for (bool flash : {false, true}) {
        const auto ref = run(path, 0, flash, toks, 24);
        for (int ngl = 1; ngl <= n_layer + 1; ++ngl) {
            const auto got = run(path, ngl, flash, toks, 24);
            const double worst = worst_rel_err(got, ref, n_vocab);
            INFO(path << " ngl " << ngl << " flash " << flash << ": max rel err " << worst);
            CHECK(worst < tol);
            MESSAGE(path << " ngl " << ngl << std::string(flash ? " fa" : "") << ": " << worst);
        }
    }
}


const char * k_l2 = "--n-embd 128 --n-ff 344 --n-layer 3 --n-head 4 --n-vocab 300 --vocab none --ctx 512";
const char * k_l3 =
    "--n-embd 128 --n-ff 320 --n-layer 3 --n-head 8 --n-head-kv 2 --n-vocab 300 --vocab none --theta 500000 "
    "--rope-freqs --ctx 512";

// K-quants need rows of 256: wider shapes for the 4-bit models
const char * k_l2_256 = "--n-embd 256 --n-ff 768 --n-layer 3 --n-head 4 --n-vocab 300 --vocab none --ctx 512";
const char * k_l3_256 =
    "--n-embd 256 --n-ff 512 --n-layer 3 --n-head 8 --n-head-kv 2 --n-vocab 300 --vocab none --theta 500000 "
    "--rope-freqs --ctx 512";

} // namespace

// f32: the GPU uses f32 math (cuBLAS sgemm / f32 mat-vec), so 1e-3 relative is loose
TEST_CASE("llama2 shape f32: every -ngl matches the CPU within 1e-3") {
    check_all_ngl(gen_model("gpu_l2_f32", std::string(k_l2) + " --outtype f32 --seed 11"), 3, 1e-3);
}
TEST_CASE("llama3 shape f32 (GQA, rope_freqs): every -ngl matches the CPU within 1e-3") {
    check_all_ngl(gen_model("gpu_l3_f32", std::string(k_l3) + " --outtype f32 --seed 12"), 3, 1e-3);
}
// q8_0: both sides quantize activations to q8_1 for decode, but prompts multiply f16 activations on the GPU (the
// MMQ kernels) against activations rounded to q8_0 on the CPU: 3e-2 of the largest logit, the q8_0-vs-f32 bound of
// test_llm_logits (H100: 1.9e-2 with the tiled GEMM at ngl 1, 2.05e-2 with the streamed one, which equals the tiled
// one on these very shapes within nmse 1e-10, test_backend_cuda: the rest is which q8 roundings flip downstream)
TEST_CASE("llama2 and llama3 shapes q8_0: every -ngl matches the CPU within 3e-2") {
    check_all_ngl(gen_model("gpu_l2_q8", std::string(k_l2) + " --outtype q8_0 --seed 13"), 3, 3e-2);
    check_all_ngl(gen_model("gpu_l3_q8", std::string(k_l3) + " --outtype q8_0 --seed 14"), 3, 3e-2);
}
// 4-bit models (Q4_0: q4_0 with a q6_K output; Q4_K_M: q4_K with q6_K attn_v / ffn_down / output): both sides
// read the same weight bytes; the GPU decodes with q8 activations (blocks of 32) and runs prompts through f16
// cuBLAS, the CPU quantizes activations to q8_0 / q8_K. 3e-2 of the largest logit (a wrong kernel is off by O(1)).
TEST_CASE("llama2 and llama3 shapes Q4_0: every -ngl matches the CPU within 3e-2") {
    const std::string l2 = gen_quantized("gpu_l2_q4_0", std::string(k_l2_256) + " --seed 15", "q4_0");
    if (l2.empty()) return;
    check_all_ngl(l2, 3, 3e-2);
    check_all_ngl(gen_quantized("gpu_l3_q4_0", std::string(k_l3_256) + " --seed 16", "q4_0"), 3, 3e-2);
}
// Q4_K_M: 4e-2 (measured 2.2-3.1e-2 over H200 runs of the same files: MMQ's split-K partial sums are added by
// atomics, so the GPU side moves between runs; a wrong kernel is off by O(1))
TEST_CASE("llama2 and llama3 shapes Q4_K_M: every -ngl matches the CPU within 4e-2") {
    const std::string l2 = gen_quantized("gpu_l2_q4km", std::string(k_l2_256) + " --seed 17", "q4_K_M");
    if (l2.empty()) return;
    check_all_ngl(l2, 3, 4e-2);
    check_all_ngl(gen_quantized("gpu_l3_q4km", std::string(k_l3_256) + " --seed 18", "q4_K_M"), 3, 4e-2);
}

// -ngl above n_layer puts the token embedding on the GPU too (get_rows there): a step is one GPU split, and its logits
// equal those with the embedding kept on the CPU (LLM_EMBD_CPU=1: a CPU split for get_rows, its rows copied over)
// within 1e-6 (the same rows: f32 copied, q8_0 d x q in f32 on both sides). A tied output shares that GPU copy.
TEST_CASE("full offload: token_embd on the GPU, one split per step; the same logits as with it on the CPU") {
    struct model_case {
        std::string path;
        double tol_cpu; // against the pure CPU path
    };
    const std::vector<model_case> models = {
        {gen_model("gpu_l3_f32", std::string(k_l3) + " --outtype f32 --seed 12"), 1e-3},
        {gen_model("gpu_l2_q8_tied", std::string(k_l2) + " --outtype q8_0 --tied --seed 23"), 3e-2}};
    const std::vector<int32_t> toks = random_tokens(30, 300, 5);
    for (const auto & mc : models) {
        auto splits_and_logits = [&](int ngl, bool embd_cpu, int * n_splits) {
            if (embd_cpu) setenv("LLM_EMBD_CPU", "1", 1);
            llm_model * m = nullptr;
            llm_context * c = open_ctx(mc.path, ngl, true, GGML_TYPE_F16, &m);
            unsetenv("LLM_EMBD_CPU");
            std::string err;
            std::vector<float> out;
            REQUIRE_MESSAGE(llm_decode(c, toks.data(), 24, &err), err);
            for (size_t i = 24; i < toks.size(); ++i)
                REQUIRE_MESSAGE(llm_decode(c, &toks[i], 1, &err), err);
            *n_splits = ggml_backend_sched_get_n_splits(llm_get_sched(c)); // of the last step's graph
            out.assign(llm_get_logits(c), llm_get_logits(c) + 300);
            llm_context_free(c);
            llm_model_free(m);
            return out;
        };
        int s_gpu = 0, s_cpu = 0, s_part = 0, s_ref = 0;
        const auto gpu = splits_and_logits(4, false, &s_gpu);
        const auto cpu = splits_and_logits(4, true, &s_cpu);
        splits_and_logits(3, false, &s_part);
        const auto ref = splits_and_logits(0, false, &s_ref);
        INFO(mc.path);
        CHECK(s_gpu == 1);
        CHECK(s_cpu >= 2); // get_rows on the CPU, then the GPU
        CHECK(s_part >= 2); // the output on the CPU: the embedding too
        const double e_embd = rel_err(gpu.data(), cpu.data(), 300), e_ref = rel_err(gpu.data(), ref.data(), 300);
        MESSAGE(mc.path << ": embedding on the GPU vs on the CPU " << e_embd << ", vs the CPU path " << e_ref);
        CHECK(e_embd < 1e-6);
        CHECK(e_ref < mc.tol_cpu);
    }
}

// Many sequences in one batch on the GPU (every layer offloaded) against each sequence alone on the CPU: the
// scenario of test_llm_batch.cpp (prompts split across graphs, a shared prefix, an id reused). f32 weights and
// A q8_0 KV cache with flash attention, head size 128 and GQA 4 (the decode path of Llama-3-8B: decode attention on
// the tensor-core kernel with K int8 against the query rounded to int8 per 32 dims and V widened to f16): every -ngl
// against the CPU with the same cache type (5e-3 of the largest logit; measured 7.1-7.3e-4 on an H200; a wrong block
// is off by O(1)), and the GPU's q8_0 cache against its f16 cache within the stated tolerance of a q8_0 cache
// (2e-2, test_llm_logits; measured 1.03e-2).
TEST_CASE("q8_0 KV cache, flash attention, D 128, GQA 4: GPU equals the CPU, and the f16 cache") {
    const std::string path =
        gen_model("gpu_l3_d128_f32", "--n-embd 512 --n-ff 768 --n-layer 2 --n-head 4 --n-head-kv 1 "
                                     "--n-vocab 300 --vocab none --theta 500000 --rope-freqs "
                                     "--ctx 512 --outtype f32 --seed 21");
    const std::vector<int32_t> toks = random_tokens(56, 300, 9);
    const auto ref = run(path, 0, true, toks, 24, GGML_TYPE_Q8_0);
    const auto f16 = run(path, 99, true, toks, 24, GGML_TYPE_F16);
    for (int ngl : {1, 2, 3}) {
        const auto got = run(path, ngl, true, toks, 24, GGML_TYPE_Q8_0);
        REQUIRE(got.size() == ref.size());
        double worst = 0, vs_f16 = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            worst = std::max(worst, rel_err(got[i].data(), ref[i].data(), 300));
            if (ngl == 3) vs_f16 = std::max(vs_f16, rel_err(got[i].data(), f16[i].data(), 300));
        }
        MESSAGE("q8_0 cache ngl " << ngl << ": max rel err GPU vs CPU " << worst
                                  << (ngl == 3 ? ", GPU q8_0 vs GPU f16 cache " + std::to_string(vs_f16) : ""));
        CHECK(worst < 5e-3);
        if (ngl == 3) CHECK(vs_f16 < 2e-2);
    }
}

TEST_CASE("q8_0 weights with a q8_0 / q4_0 KV cache: the q/k/v mat-vecs store the K/V blocks; GPU equals the CPU") {
    // quantized weights: the decode step's q/k/v group also ropes k and quantizes k and v into their cache cells
    // (fusion codes 13 / 14 with a block cache); the prompt's rows go through SET_ROWS. Against the same GPU run
    // without that fusion (GGML_CUDA_NO_MMV_ROPE: rope kernels, SET_ROWS quantizing): the same cache bytes (the same
    // rows, ggml's quantizer), so the logits agree to f32 rounding (measured: equal to 1e-7). Against the CPU: a q8_0
    // cache 4e-2, a q4_0 cache 1e-1: a k or v value on a rounding edge lands one quantization step from the CPU's, and
    // this 2-layer random model amplifies it (H200: q8_0 2.5e-2, q4_0 7.8e-2 in the seventeenth session; 3.15e-2,
    // 7.4e-2 with the prompt GEMMs of the twenty-first, the fusion on or off, the kernels of the twenty-second too).
    const std::string path = gen_model("gpu_l3_d128_q8", "--n-embd 512 --n-ff 768 --n-layer 2 --n-head 4 --n-head-kv 1 "
                                                         "--n-vocab 300 --vocab none --theta 500000 --rope-freqs "
                                                         "--ctx 512 --outtype q8_0 --seed 22");
    const std::vector<int32_t> toks = random_tokens(40, 300, 10);
    // The prompt's GEMMs without a K split: split 3+ ways, their partial sums are added in the order the blocks
    // finish, and a KV value on a q4_0 rounding edge may then differ between two GPU runs (measured once: 9.4e-3)
    setenv("GGML_CUDA_MMQ_KS", "1", 1);
    for (ggml_type ct : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        const auto ref = run(path, 0, true, toks, 24, ct);
        setenv("GGML_CUDA_NO_MMV_ROPE", "1", 1); // read when the backend is created
        const auto unfused = run(path, 99, true, toks, 24, ct);
        unsetenv("GGML_CUDA_NO_MMV_ROPE");
        const auto got = run(path, 99, true, toks, 24, ct);
        REQUIRE(got.size() == ref.size());
        REQUIRE(unfused.size() == ref.size());
        double worst = 0, vs_unfused = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            worst = std::max(worst, rel_err(got[i].data(), ref[i].data(), 300));
            vs_unfused = std::max(vs_unfused, rel_err(got[i].data(), unfused[i].data(), 300));
        }
        MESSAGE(std::string(ggml_type_name(ct)) << " cache, q8_0 weights, full offload: max rel err GPU vs CPU "
                                                << worst << ", vs the GPU without the fusion " << vs_unfused);
        CHECK(vs_unfused < 1e-5);
        CHECK(worst < (ct == GGML_TYPE_Q8_0 ? 4e-2 : 1e-1));
    }
    unsetenv("GGML_CUDA_MMQ_KS");
}

// batch_scenario decoded together on the GPU (every layer offloaded) against each sequence alone on the CPU, for each
// configuration (flash attention, KV cache type, bound on the largest relative logit error)
struct batched_cfg {
    bool fa;
    ggml_type cache;
    double tol;
};
static void check_batched_vs_alone(const std::string & path, std::initializer_list<batched_cfg> cfgs) {
    std::string err;
    llm_model_params mp;
    llm_model * cpu = llm_model_load(path.c_str(), mp, &err);
    REQUIRE_MESSAGE(cpu != nullptr, err);
    mp.n_gpu_layers = 99;
    llm_model * gpu = llm_model_load(path.c_str(), mp, &err);
    REQUIRE_MESSAGE(gpu != nullptr, err);
    const auto plans = batch_scenario(llm_model_hparams(cpu).n_vocab, 9);
    for (const batched_cfg & c : cfgs) {
        llm_context_params cp;
        cp.n_ctx = 256;
        cp.n_batch = 16;
        cp.n_threads = 2;
        cp.type_k = cp.type_v = c.cache;
        cp.flash_attn = c.fa;
        const auto ref = batch_reference(cpu, cp, plans);
        int n = 0;
        const double e = batch_max_err(gpu, cp, plans, ref, &n);
        MESSAGE((c.fa ? "flash attention, " : "mul_mat attention, ")
                << ggml_type_name(c.cache) << " cache: " << n << " rows, max rel err GPU batched vs CPU alone " << e);
        CHECK(n == 70);
        CHECK(e < c.tol);
    }
    llm_model_free(gpu);
    llm_model_free(cpu);
}

// an f32 cache (mul_mat attention) or an f16 cache (flash attention): 2e-3 of the largest logit, the f32 bound
// above plus f16 rounding.
TEST_CASE("batched sequences on the GPU equal each sequence alone on the CPU") {
    check_batched_vs_alone(gen_model("gpu_l3_256_f32", std::string(k_l3_256) + " --outtype f32 --seed 19"),
                           {{false, GGML_TYPE_F32, 2e-3}, {true, GGML_TYPE_F16, 2e-3}});
}

// The same scenario on q8_0 and q4_0 KV caches (flash attention, head size 128, GQA 4: 4 sequences x 4 query rows per
// kv head): the batched decode steps run one decode block per token reading the quantized cells in place
// (fattn-vecq.cuh, per_token), against each sequence alone on the CPU with the same cache type. The GPU dots K in
// int8 against the query rounded per 32 dims where the CPU rounds it to q8_0 rows: 5e-3 of the largest logit for
// q8_0 (the single-sequence q8_0 cache test's bound; measured 2.6e-3 on an H200), 2e-2 for q4_0 (measured 8.7e-3: the
// 4-bit keys leave the same query roundings a larger share of each score); a block reading another sequence's cells
// or a wrong block is off by O(1).
TEST_CASE("batched sequences on q8_0 / q4_0 KV caches: the GPU equals each sequence alone on the CPU") {
    check_batched_vs_alone(gen_model("gpu_l3_d128_f32", "--n-embd 512 --n-ff 768 --n-layer 2 --n-head 4 --n-head-kv 1 "
                                                        "--n-vocab 300 --vocab none --theta 500000 --rope-freqs "
                                                        "--ctx 512 --outtype f32 --seed 21"),
                           {{true, GGML_TYPE_Q8_0, 5e-3}, {true, GGML_TYPE_Q4_0, 2e-2}});
}

// Decode steps replay their CUDA graph: consecutive single-token steps differ only in their inputs' contents
// (graph.cpp), so after the first steps of a KV-length bucket the backend launches the executable it captured,
// with no capture or update on the host, and without comparing the graph again (the scheduler's plan_id; here
// GGML_CUDA_GRAPH_VERIFY=1 compares it all the same and aborts on a difference). 40 steps from position 24 (one
// bucket of 256 cells), q8_0 weights (the fused mat-vec paths), with and without flash attention;
// GGML_CUDA_GRAPH_DEBUG=1 logs why a step missed.
TEST_CASE("decode steps replay the captured CUDA graph") {
    if (std::getenv("GGML_CUDA_DISABLE_GRAPHS") || std::getenv("GGML_CUDA_PROFILE")) return;
    const std::string path = gen_model("gpu_l3_q8", std::string(k_l3) + " --outtype q8_0 --seed 23");
    for (const bool fa : {false, true}) {
        std::string err;
        llm_model * m = nullptr;
        setenv("GGML_CUDA_GRAPH_VERIFY", "1", 1); // read by the context's CUDA backend at its init
        llm_context * c = open_ctx(path, 99, fa, GGML_TYPE_F16, &m);
        unsetenv("GGML_CUDA_GRAPH_VERIFY");
        const std::vector<int32_t> toks = random_tokens(64, 300, 5);
        REQUIRE_MESSAGE(llm_decode(c, toks.data(), 24, &err), err);
        ggml_cgraph * gf = llm_last_graph(c);
        REQUIRE(gf != nullptr);
        ggml_backend_t gpu = ggml_backend_sched_get_tensor_backend(llm_get_sched(c), ggml_graph_node(gf, -1));
        REQUIRE((gpu != nullptr && ggml_backend_is_cuda(gpu)));
        int r0 = 0, u0 = 0, i0 = 0;
        ggml_backend_cuda_get_graph_stats(gpu, &r0, &u0, &i0);
        // each step's argmax (read behind the graph into page-locked memory: llm queue_argmax) is its logits' max
        const int n_vocab = llm_model_hparams(m).n_vocab;
        int n_bad_argmax = 0;
        for (int i = 24; i < 64; ++i) {
            REQUIRE_MESSAGE(llm_decode(c, &toks[i], 1, &err), err);
            const int32_t am = llm_argmax_last(c);
            const float * lg = llm_get_logits(c);
            REQUIRE(lg != nullptr);
            n_bad_argmax += am < 0 || am >= n_vocab || lg[am] != *std::max_element(lg, lg + n_vocab);
        }
        CHECK(n_bad_argmax == 0);
        int r1 = 0, u1 = 0, i1 = 0;
        ggml_backend_cuda_get_graph_stats(gpu, &r1, &u1, &i1);
        MESSAGE(std::string(fa ? "flash attention" : "mul_mat attention") << ", 40 decode steps: " << r1 - r0 << " replays, "
                                                                << u1 - u0 << " updates, " << i1 - i0
                                                                << " instantiations");
        CHECK(r1 - r0 >= 37);
        CHECK(u1 - u0 + i1 - i0 <= 2);
        llm_context_free(c);
        llm_model_free(m);
    }
}

// Two GPUs, split mode layer (llama.cpp's -sm layer): consecutive layers on consecutive devices in proportion to the
// tensor split, the output with the last, activations copied between the devices by the scheduler. The logits of
// every split point (ngl 2..4 of 3 layers, shares 1:1, 1:2, 2:1) equal those of one GPU within 1e-5 relative (the same
// kernels on the same architecture), for f32 weights with GQA and rope_freqs (a copy of it on each device) and q8_0
// weights with a tied output, f16 and q8_0 KV caches; a share of 0 keeps a device out. SKIPs with fewer than two
// CUDA devices.
TEST_CASE("layer split over two GPUs: the logits of one GPU at every split point") {
    if (ggml_backend_cuda_get_device_count() < 2) {
        MESSAGE("SKIP: " << ggml_backend_cuda_get_device_count() << " CUDA device(s)");
        return;
    }
    const std::vector<int32_t> toks = random_tokens(30, 300, 9);
    // head sizes 32 and 64: a q8_0 cache needs a multiple of 32
    const std::string l3 = gen_model("gpu_l3_256_f32", std::string(k_l3_256) + " --outtype f32 --seed 12");
    const std::string l2 = gen_model("gpu_l2_q8_tied", std::string(k_l2) + " --outtype q8_0 --tied --seed 23");
    for (const std::string & path : {l3, l2}) {
        for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
            for (int ngl = 2; ngl <= 4; ++ngl) {
                const auto ref = run(path, ngl, true, toks, 24, kv);
                for (const std::vector<float> & ts : {std::vector<float>{1, 1}, {1, 2}, {2, 1}}) {
                    int n_dev = 0;
                    const auto got = run(path, ngl, true, toks, 24, kv, LLM_SPLIT_LAYER, ts, &n_dev);
                    const double worst = worst_rel_err(got, ref, 300);
                    INFO(path << " kv " << ggml_type_name(kv) << " ngl " << ngl << " -ts " << ts[0] << "," << ts[1]);
                    CHECK(n_dev == (ngl == 2 && ts[0] == 2 ? 1 : 2)); // 2 layers at 2:1: both on CUDA0
                    CHECK(worst < 1e-5);
                    MESSAGE(path << " kv " << ggml_type_name(kv) << " ngl " << ngl << " -ts " << ts[0] << "," << ts[1]
                                 << ": " << worst);
                }
            }
        }
        int n_dev = 0;
        run(path, 4, true, toks, 24, GGML_TYPE_F16, LLM_SPLIT_LAYER, {0, 1}, &n_dev);
        CHECK(n_dev == 1);
    }
}

// The row split on two GPUs: every layer's KV heads and FFN columns halved (or 1:3), the GPUs' graphs run at once from
// a thread each and add their partial wo / ffn_down products with ncclAllReduce (captured into the decode steps' CUDA
// graphs). The logits of a prompt (a GEMM step) and of single steps equal one GPU's: f32 weights within 1e-4 relative
// (the split sums add in another order), q8_0 weights (tied output) within this suite's q8_0 tolerance of 3e-2 (the
// shards' mat-muls have other shapes, so other kernels: a prompt GEMM of K = 128 dequantizes to f16 where the whole
// one multiplies q8_1 activations in int8; measured 7.1e-3); f16 and q8_0 KV caches; the output on CUDA0 (ngl 4) or
// the CPU (ngl 3; ngl 2 also runs the last layer whole on the CPU).
TEST_CASE("row split over two GPUs: the logits of one GPU") {
    if (ggml_backend_cuda_get_device_count() < 2) {
        MESSAGE("SKIP: " << ggml_backend_cuda_get_device_count() << " CUDA device(s)");
        return;
    }
    const std::vector<int32_t> toks = random_tokens(30, 300, 19);
    // GQA 8/2, head size 32, n_ff 512 (16 q8_0 blocks)
    const std::string f32 = gen_model("gpu_l3_256_f32", std::string(k_l3_256) + " --outtype f32 --seed 12");
    const std::string q8 = gen_model("gpu_l3_256_q8_tied", std::string(k_l3_256) + " --outtype q8_0 --tied --seed 13");
    double worst_f32 = 0, worst_q8 = 0;
    for (const std::string & path : {f32, q8}) {
        const double tol = path == f32 ? 1e-4 : 3e-2;
        for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
            for (int ngl : {2, 3, 4}) {
                const auto ref = run(path, ngl, true, toks, 24, kv);
                for (const std::vector<float> & ts : {std::vector<float>{}, {1, 3}}) {
                    int n_dev = 0;
                    const auto got = run(path, ngl, true, toks, 24, kv, LLM_SPLIT_ROW, ts, &n_dev);
                    const double worst = worst_rel_err(got, ref, 300);
                    INFO(path << " kv " << ggml_type_name(kv) << " ngl " << ngl << " -ts " << ts.size());
                    CHECK(n_dev == 2);
                    CHECK(worst < tol);
                    double & w = path == f32 ? worst_f32 : worst_q8;
                    w = std::max(w, worst);
                }
            }
        }
    }
    MESSAGE("row split over two GPUs: worst relative error against one GPU: f32 " << worst_f32 << ", q8_0 "
                                                                                 << worst_q8);
}

// -c too large for the GPU (llm-main/llm-server pass n_ctx as n_ctx_hint): the load fails with one line that
// names n_ctx, the KV cache and the free memory, before any weight is uploaded (the progress callback, called as
// the upload goes, never runs); it does not abort. A context that fits loads as usual.
TEST_CASE("an n_ctx whose KV cache cannot fit on the GPU fails the load before any upload") {
    const std::string path = gen_model("gpu_l2_f32", std::string(k_l2) + " --outtype f32 --seed 11");
    std::string err;
    int n_progress = 0;
    llm_model_params mp;
    mp.n_gpu_layers = 99;
    mp.split_mode = LLM_SPLIT_NONE; // CUDA0 alone, also on a machine with several
    mp.progress = [&n_progress](float) {
        ++n_progress;
        return true;
    };
    mp.n_ctx_hint = 1 << 30; // 3 layers x 2^30 cells x 512 bytes of f16 K+V: 1.5 TiB
    llm_model * m = llm_model_load(path.c_str(), mp, &err);
    CHECK(m == nullptr);
    if (m) llm_model_free(m);
    MESSAGE("error: " << err);
    CHECK(err.find("out of device memory: n_ctx 1073741824 needs") != std::string::npos);
    CHECK(err.find("MiB of KV cache (f16 K, f16 V)") != std::string::npos);
    CHECK(err.find("CUDA0 has") != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
    CHECK(n_progress == 0);

    mp.n_ctx_hint = 256;
    err.clear();
    m = llm_model_load(path.c_str(), mp, &err);
    REQUIRE_MESSAGE(m != nullptr, err);
    CHECK(n_progress > 0);
    llm_model_free(m);
}
#endif
