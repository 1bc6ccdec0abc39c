// test_llm_batch.cpp - many sequences in one context (llm_decode_batch): batched decoding gives the logits of
// each sequence decoded alone (f32 and f16/q8_0 caches, mul_mat and flash attention, prompts split across
// graphs, a shared prefix, a sequence that finishes early and a request that reuses its id); the per-sequence
// cache edits; bad batches are refused with nothing written.
#include "llm-impl.h"
#include "llm.h"
#include "llm_batch_util.h"
#include "llm_test_util.h"
#include "test_util.h"

#include "doctest_cstr.h"
#include <string>
#include <unistd.h>

namespace {

const char * k_gqa64 =  // head size 64 (quantized caches need a multiple of 32), GQA 4/2, Llama 3 rope
    "--n-embd 256 --n-ff 512 --n-layer 2 --n-head 4 --n-head-kv 2 --n-vocab 300 --vocab none --theta 500000 "
    "--rope-freqs --ctx 512 --outtype f32 --seed 21";

struct model_holder {
    llm_model * m = nullptr;
    explicit model_holder(const std::string & path) {
        std::string err;
        llm_model_params mp;
        m = llm_model_load(path.c_str(), mp, &err);
        REQUIRE_MESSAGE(m != nullptr, err);
    }
    ~model_holder() { llm_model_free(m); }
};

llm_context_params params(ggml_type kv, bool fa) {
    llm_context_params cp;
    cp.n_ctx = 256;
    cp.n_batch = 16;
    cp.n_threads = 2;
    cp.type_k = cp.type_v = kv;
    cp.flash_attn = fa;
    return cp;
}

void check_scenario(llm_model * m, llm_context_params cp, double tol, const char * what) {
    const auto plans = batch_scenario(llm_model_hparams(m).n_vocab, 5);
    const auto ref = batch_reference(m, cp, plans);
    int n = 0;
    const double err = batch_max_err(m, cp, plans, ref, &n);
    MESSAGE(std::string(what) << ": " << n << " logits rows, max rel err batched vs alone " << err);
    CHECK(n == 5 + 20 + 8 + 15 + 12 + 10);  // every prompt's last token and every fed token
    CHECK(err < tol);
}

// a context of 3 sequences (f16 cache) that holds seq 0 at positions 0..9 and seq 2 at 0..3 (batch rows 0..13,
// logits of row 13 only)
llm_context * three_seqs(llm_model * m) {
    llm_context_params cp = params(GGML_TYPE_F16, false);
    cp.n_seq_max = 3;
    std::string err;
    llm_context * c = llm_context_new(m, cp, &err);
    REQUIRE_MESSAGE(c != nullptr, err);
    llm_batch b;
    for (int i = 0; i < 10; ++i)
        b.add(i + 1, i, 0, false);
    for (int i = 0; i < 4; ++i)
        b.add(i + 50, i, 2, i == 3);
    REQUIRE_MESSAGE(llm_decode_batch(c, b, &err), err);
    return c;
}

}  // namespace

TEST_CASE("batched sequences equal each sequence alone: f32 cache, mul_mat and flash attention") {
    model_holder mh(gen_model("batch_gqa64", k_gqa64));
    check_scenario(mh.m, params(GGML_TYPE_F32, false), 1e-4, "f32 cache, mul_mat attention");
    check_scenario(mh.m, params(GGML_TYPE_F32, true), 1e-4, "f32 cache, flash attention");
}

TEST_CASE("batched sequences equal each sequence alone: f16 and q8_0 caches") {
    // the same tokens either way; only the summation order differs (one GEMM over the batch vs mat-vecs), and
    // a q8_0 cache can round a key element to the neighbouring step because of it
    model_holder mh(gen_model("batch_gqa64", k_gqa64));
    check_scenario(mh.m, params(GGML_TYPE_F16, true), 1e-3, "f16 cache, flash attention");
    check_scenario(mh.m, params(GGML_TYPE_Q8_0, true), 3e-3, "q8_0 cache, flash attention");
}

TEST_CASE("batched sequences on the real stories260K") {
    const std::string path = llm_shared_path("models/stories260K.gguf");
    if (access(path.c_str(), R_OK) != 0) {
        MESSAGE("SKIPPED: stories260K.gguf not found (LLM_SHARED)");
        return;
    }
    model_holder mh(path);
    check_scenario(mh.m, params(GGML_TYPE_F32, false), 1e-4, "stories260K, f32 cache");
}

TEST_CASE("per-sequence cache edits: rm, cp, keep, positions and cells used") {
    model_holder mh(gen_model("batch_gqa64", k_gqa64));
    llm_context * c = three_seqs(mh.m);
    CHECK(llm_n_seq_max(c) == 3);
    CHECK(llm_get_logits_batch(c, 13) != nullptr);
    CHECK(llm_get_logits_batch(c, 12) == nullptr);  // no logits asked
    CHECK(llm_get_logits_batch(c, 14) == nullptr);  // outside the batch
    CHECK(llm_kv_cells_used(c) == 14);
    CHECK(llm_kv_seq_pos_max(c, 0) == 9);
    CHECK(llm_kv_seq_pos_max(c, 1) == -1);
    CHECK(llm_kv_seq_pos_max(c, 2) == 3);
    llm_kv_seq_cp(c, 0, 1, 0, 6);  // seq 1 sees seq 0's first 6 cells: stored once
    CHECK(llm_kv_cells_used(c) == 14);
    CHECK(llm_kv_seq_pos_max(c, 1) == 5);
    llm_kv_seq_rm(c, 0, 3, -1);  // seq 0 keeps 0..2; cells 3..5 stay for seq 1, 6..9 are freed
    CHECK(llm_kv_seq_pos_max(c, 0) == 2);
    CHECK(llm_kv_cells_used(c) == 10);
    llm_kv_seq_keep(c, 1);
    CHECK(llm_kv_seq_pos_max(c, 0) == -1);
    CHECK(llm_kv_seq_pos_max(c, 2) == -1);
    CHECK(llm_kv_cells_used(c) == 6);
    llm_kv_seq_rm(c, -1, 0, -1);
    CHECK(llm_kv_cells_used(c) == 0);
    llm_context_free(c);
}

TEST_CASE("context shift (llm_kv_seq_add) keeps the cache counters equal to a full recount") {
    model_holder mh(gen_model("batch_gqa64", k_gqa64));
    llm_context * c = three_seqs(mh.m);
    std::string err;
    auto check_counters = [&](const char * what) {
        llm_kv_cache ref = c->kv;
        llm_kv_recount(ref);
        CHECK_MESSAGE(c->kv.used == ref.used, what);
        CHECK_MESSAGE(c->kv.used_end == ref.used_end, what);
        CHECK_MESSAGE(c->kv.seq_pos_max == ref.seq_pos_max, what);
    };
    llm_kv_seq_cp(c, 0, 1, 0, 6);
    llm_kv_seq_rm(c, 0, 1, 3); // positions 1, 2 of seq 0 go; their cells stay for seq 1
    check_counters("rm");
    REQUIRE_MESSAGE(llm_kv_seq_add(c, 0, 3, -1, -2, &err), err); // 3..9 -> 1..7, and seq 1's 3..5 -> 1..3
    check_counters("shift back");
    CHECK(llm_kv_seq_pos_max(c, 0) == 7);
    CHECK(llm_kv_seq_pos_max(c, 1) == 3);
    REQUIRE_MESSAGE(llm_kv_seq_add(c, 2, 0, -1, 5, &err), err);
    check_counters("shift forward");
    CHECK(llm_kv_seq_pos_max(c, 2) == 8);
    CHECK(llm_kv_cells_used(c) == 14);
    llm_context_free(c);
}

TEST_CASE("bad batches are refused and write nothing") {
    model_holder mh(gen_model("batch_gqa64", k_gqa64));
    llm_context_params cp = params(GGML_TYPE_F16, false);
    cp.n_ctx = 32;
    cp.n_seq_max = 2;
    std::string err;
    llm_context * c = llm_context_new(mh.m, cp, &err);
    REQUIRE_MESSAGE(c != nullptr, err);
    llm_batch b;
    b.add(1, 0, 2, true);  // sequence 2 of 2
    CHECK_FALSE(llm_decode_batch(c, b, &err));
    CHECK(err.find("sequence id 2") != std::string::npos);
    b.clear();
    b.add(1, 3, 0, false);
    b.add(2, 3, 0, true);  // same position twice
    CHECK_FALSE(llm_decode_batch(c, b, &err));
    CHECK(err.find("not after the previous") != std::string::npos);
    b.clear();
    b.add(1, 0, 0, true);
    b.add(300, 1, 0, true);  // outside the vocabulary
    CHECK_FALSE(llm_decode_batch(c, b, &err));
    CHECK(err.find("vocabulary") != std::string::npos);
    b.clear();
    for (int i = 0; i < 33; ++i) b.add(1, i, i % 2, false);  // 33 tokens, 32 cells
    CHECK_FALSE(llm_decode_batch(c, b, &err));
    CHECK(err.find("context full") != std::string::npos);
    CHECK(llm_kv_cells_used(c) == 0);
    b.clear();
    for (int i = 0; i < 32; ++i) b.add(1, i / 2, i % 2, i >= 30);  // exactly full
    REQUIRE_MESSAGE(llm_decode_batch(c, b, &err), err);
    CHECK(llm_kv_cells_used(c) == 32);
    llm_context_free(c);
}
