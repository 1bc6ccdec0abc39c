// test_llm_split.cpp - the model over several devices, on simulated ones (llm_model_params::sim_devices: CPU backends
// with buffer types of their own), so that it runs on any machine: the layer split (-sm layer) and the row split (-sm
// row: tensor parallelism, the devices' graphs run at once and meet at host all-reduces) give the logits of the CPU
// alone; bad split parameters are one-line load errors. test_llm_gpu runs the same splits on real GPUs where there
// are two.
#include "doctest_cstr.h"
#include "llm.h"
#include "llm_test_util.h"

#include <string>
#include <vector>

static const char * const k_row_args =  // GQA 8/4: a KV head for each of up to 4 devices; head size 32; 10 FFN blocks
    "--n-embd 256 --n-ff 320 --n-layer 3 --n-head 8 --n-head-kv 4 --n-vocab 300 --vocab none --theta 500000 "
    "--rope-freqs --ctx 512";

// all layers up to ngl over n_sim simulated devices, by split mode sm, shares ts, main device mg
static llm_model_params sim_params(int ngl, int n_sim, llm_split_mode sm, const std::vector<float> & ts = {},
                                   int mg = 0) {
    llm_model_params mp;
    mp.n_gpu_layers = ngl;
    mp.sim_devices = n_sim;
    mp.split_mode = sm;
    mp.tensor_split = ts;
    mp.main_gpu = mg;
    return mp;
}

// the devices (simulated "CPU1", "CPU2", ...) that hold weights of m
static int n_sim_buffers(const llm_model * m) {
    int n = 0;
    for (const auto & b : llm_model_buffer_sizes(m)) n += b.first.rfind("CPU", 0) == 0 && b.first.size() == 4;
    return n;
}

// The always-runnable check of the layer split (llm_model_params::sim_devices): the offloaded layers on two simulated
// devices (CPU backends with buffer types of their own) by every split point (ngl 1..4 of 3 layers, then the output)
// and share (1:1, 1:2, 2:1, 0:1), each device's weights and KV cache in its own buffers, a step's graph split between
// three backends and its activations copied across: the logits of a prompt (in two batches) and of single steps equal
// the CPU alone (the same kernels) within 1e-6 relative, for f32 and q8_0 weights (GQA, rope_freqs) and f32 / q8_0
// KV caches.
// the simulated split's model: 3 layers, GQA 4/2, head size 32 (a q8_0 cache needs a multiple of 32), rope_freqs
static const char * const k_split_args =
    "--n-embd 128 --n-ff 320 --n-layer 3 --n-head 4 --n-head-kv 2 --n-vocab 300 --vocab none --theta 500000 "
    "--rope-freqs --ctx 512";

TEST_CASE("layer split over two simulated devices: the logits of the CPU alone at every split point") {
    const std::string args = k_split_args;
    const std::vector<int32_t> toks = random_tokens(20, 300, 31);
    for (const char * outtype : {"f32", "q8_0"}) {
        const std::string path =
            gen_model(std::string("split_sim_") + outtype, args + " --outtype " + outtype + " --seed 5");
        for (ggml_type kv : {GGML_TYPE_F32, GGML_TYPE_Q8_0}) {
            llm_context_params cp = f32_params(64, 8, true);
            cp.type_k = cp.type_v = kv;
            cp.flash_attn = kv != GGML_TYPE_F32;
            model_ptr ref_m(path);
            const std::vector<float> ref = cpp_logits(ref_m.m, toks, cp, 0); // 20 tokens: batches of 8, 8, 4
            const std::vector<float> ref_steps = cpp_logits(ref_m.m, toks, cp, 1);
            for (int ngl = 1; ngl <= 4; ++ngl) {
                for (const std::vector<float> & ts : {std::vector<float>{1, 1}, {1, 2}, {2, 1}, {0, 1}}) {
                    std::string err;
                    llm_model * m = llm_model_load(path.c_str(), sim_params(ngl, 2, LLM_SPLIT_LAYER, ts), &err);
                    REQUIRE_MESSAGE(m != nullptr, err);
                    const int n_dev = n_sim_buffers(m);
                    const std::vector<float> got = cpp_logits(m, toks, cp, 0);
                    const std::vector<float> got_steps = cpp_logits(m, toks, cp, 1);
                    llm_model_free(m);
                    const double e = std::max(max_rel_err(got, ref, 300), max_rel_err(got_steps, ref_steps, 300));
                    INFO(outtype << " kv " << ggml_type_name(kv) << " ngl " << ngl << " -ts " << ts[0] << "," << ts[1]);
                    CHECK(n_dev == (ts[0] == 0 || (ngl == 1) || (ngl == 2 && ts[0] == 2) ? 1 : 2));
                    CHECK(e < 1e-6);
                }
            }
        }
    }
}

// Bad split parameters fail the load with one line, before any buffer is made.
TEST_CASE("layer and row split: bad parameters are one-line load errors") {
    const std::string path = gen_model("split_sim_f32", std::string(k_split_args) + " --outtype f32 --seed 5");
    struct bad {
        llm_split_mode sm;
        std::vector<float> ts;
        int main_gpu;
        const char * expect;
        int ngl = 99, sim = 2;
    };
    const bad cases[] = {
        {LLM_SPLIT_LAYER, {1, 1, 1}, 0, "--tensor-split has 3 values for 2 simulated devices"},
        {LLM_SPLIT_LAYER, {0, 0}, 0, "--tensor-split gives no device a share"},
        {LLM_SPLIT_NONE, {}, 2, "simulated device 2 is not available (2 found)"},
        // 2 KV heads over 3 devices
        {LLM_SPLIT_ROW, {}, 0, "split mode row: 3 devices by these shares leave device 1 no KV head (of 2)", 99, 3},
        {LLM_SPLIT_ROW, {0, 0}, 0, "--tensor-split gives no device a share"},
    };
    for (const auto & c : cases) {
        std::string err;
        llm_model * m = llm_model_load(path.c_str(), sim_params(c.ngl, c.sim, c.sm, c.ts, c.main_gpu), &err);
        CHECK(m == nullptr);
        if (m) llm_model_free(m);
        CHECK_MESSAGE(err.find(c.expect) != std::string::npos, err);
        CHECK(err.find('\n') == std::string::npos);
    }
    // q4_K attn_output (blocks of 256 columns) with 64-column KV heads: device 1 would start at column 128
    const std::string q4k = gen_quantized("row_sim_q4km", std::string(k_row_args) + " --seed 6", "q4_K_M");
    if (q4k.empty()) return;
    std::string err;
    llm_model * m = llm_model_load(q4k.c_str(), sim_params(99, 2, LLM_SPLIT_ROW), &err);
    CHECK(m == nullptr);
    if (m) llm_model_free(m);
    CHECK_MESSAGE(err.find("split mode row: device 1's columns of attn_output start at 128, inside a block of 256") !=
                      std::string::npos, err);
}

// logits of 16 prompt tokens (batches of n_batch), 4 single steps, then after removing cells [4, 9) one more step
static std::vector<float> row_run(llm_model * m, const std::vector<int32_t> & toks, llm_context_params cp) {
    cp.all_logits = true;
    ctx_ptr c(m, cp);
    std::string err;
    std::vector<float> out;
    auto keep = [&](int n) {
        for (int i = 0; i < n; ++i) out.insert(out.end(), llm_get_logits_ith(c.c, i), llm_get_logits_ith(c.c, i) + 300);
    };
    REQUIRE_MESSAGE(llm_decode(c.c, toks.data(), 16, &err), err);
    keep(16);
    for (int i = 16; i < 20; ++i) {
        REQUIRE_MESSAGE(llm_decode(c.c, toks.data() + i, 1, &err), err);
        keep(1);
    }
    llm_kv_remove(c.c, 4, 9);
    REQUIRE(llm_n_past(c.c) == 15);
    REQUIRE_MESSAGE(llm_decode(c.c, toks.data() + 20, 1, &err), err);
    keep(1);
    return out;
}

// The row split: every layer sliced over 2, 3 or 4 simulated devices by KV heads (with their query heads and KV cache)
// and FFN columns (whole q8_0 blocks), shares equal or 1:3, the output on the first device (ngl 4) or the CPU (ngl
// 1-3: the layers past -ngl run whole on the CPU, in the first device's graph).
// The devices' graphs run at once, from a thread each, and add their partial attention-output and FFN-down products
// with a host all-reduce (rank order). A prompt in batches, single steps and a context shift (its keys re-rotated on
// every device) give the logits of the CPU alone within 1e-5 relative (the sums are split, so their order differs),
// for f32 and q8_0 weights and f32 (mul_mat attention) and q8_0 (flash attention) KV caches.
TEST_CASE("row split over 2, 3 and 4 simulated devices: the logits of the CPU alone") {
    const std::vector<int32_t> toks = random_tokens(21, 300, 41);
    double worst = 0;
    for (const char * outtype : {"f32", "q8_0"}) {
        const std::string path = gen_model(std::string("row_sim_") + outtype,
                                           std::string(k_row_args) + " --outtype " + outtype + " --seed 6");
        for (ggml_type kv : {GGML_TYPE_F32, GGML_TYPE_Q8_0}) {
            llm_context_params cp = f32_params(64, 8, true);
            cp.type_k = cp.type_v = kv;
            cp.flash_attn = kv != GGML_TYPE_F32;
            model_ptr ref_m(path);
            const std::vector<float> ref = row_run(ref_m.m, toks, cp);
            struct split {
                int n_dev;
                std::vector<float> ts;
            };
            for (const split & sp : {split{2, {}}, split{2, {1, 3}}, split{3, {}}, split{4, {}}}) {
                for (int ngl : {1, 2, 3, 4}) {
                    std::string err;
                    llm_model * m =
                        llm_model_load(path.c_str(), sim_params(ngl, sp.n_dev, LLM_SPLIT_ROW, sp.ts), &err);
                    REQUIRE_MESSAGE(m != nullptr, err);
                    const int n_dev = n_sim_buffers(m);
                    const std::vector<float> got = row_run(m, toks, cp);
                    llm_model_free(m);
                    const double e = max_rel_err(got, ref, 300);
                    INFO(outtype << " kv " << ggml_type_name(kv) << " devices " << sp.n_dev << " ngl " << ngl);
                    CHECK(n_dev == sp.n_dev);
                    CHECK(e < 1e-5);
                    worst = std::max(worst, e);
                }
            }
        }
    }
    MESSAGE("row split: worst relative error against the CPU alone " << worst);
}

// A batch of two sequences with logits of some tokens only (the graph keeps those rows: inp_out_ids) over a partial
// offload (ngl 2 of 3: the last layer, which picks the rows, runs only in the first device's graph)
TEST_CASE("row split: a batch of two sequences with some logits kept, partial offload") {
    const std::string path = gen_model("row_sim_f32", std::string(k_row_args) + " --outtype f32 --seed 6");
    const std::vector<int32_t> toks = random_tokens(24, 300, 43);
    llm_batch b;
    for (int i = 0; i < 24; ++i) b.add(toks[i], i / 2, i % 2, i == 5 || i == 16 || i == 23);
    auto run = [&](llm_model * m) {
        llm_context_params cp = f32_params(64, 16, false);
        cp.n_seq_max = 2;
        ctx_ptr c(m, cp);
        std::string err;
        REQUIRE_MESSAGE(llm_decode_batch(c.c, b, &err), err);  // graphs of 16 and 8 tokens
        std::vector<float> out;
        for (int i : {5, 16, 23}) {
            const float * l = llm_get_logits_batch(c.c, i);
            REQUIRE(l != nullptr);
            out.insert(out.end(), l, l + 300);
        }
        return out;
    };
    model_ptr ref_m(path);
    const std::vector<float> ref = run(ref_m.m);
    for (int ngl : {2, 4}) {
        std::string err;
        llm_model * m = llm_model_load(path.c_str(), sim_params(ngl, 2, LLM_SPLIT_ROW), &err);
        REQUIRE_MESSAGE(m != nullptr, err);
        const std::vector<float> got = run(m);
        llm_model_free(m);
        INFO("ngl " << ngl);
        CHECK(max_rel_err(got, ref, 300) < 1e-5);
    }
}

// -mg picks the row split's first device, which holds the output: the slices then start there
TEST_CASE("row split: -mg is the first device of the split and holds the output") {
    const std::string path = gen_model("row_sim_f32", std::string(k_row_args) + " --outtype f32 --seed 6");
    const std::vector<int32_t> toks = random_tokens(21, 300, 41);
    const llm_context_params cp = f32_params(64, 8, true);
    model_ptr ref_m(path);
    const std::vector<float> ref = row_run(ref_m.m, toks, cp);
    std::string err;
    llm_model * m = llm_model_load(path.c_str(), sim_params(4, 3, LLM_SPLIT_ROW, {}, 2), &err);
    REQUIRE_MESSAGE(m != nullptr, err);
    const auto sizes = llm_model_buffer_sizes(m);
    REQUIRE(sizes.size() >= 3);
    CHECK(sizes[0].first == "CPU3");  // the output's device, first
    CHECK(sizes[0].second > sizes[2].second);  // the output besides slices of the size of CPU2's
    const std::vector<float> got = row_run(m, toks, cp);
    llm_model_free(m);
    CHECK(max_rel_err(got, ref, 300) < 1e-5);
}
