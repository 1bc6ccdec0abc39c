// llm_batch_util.h - many sequences decoded together against each decoded alone: the scenario shared by the
// CPU test (test_llm_batch.cpp) and the GPU test (test_llm_gpu.cpp).
//
// Sequences of different prompt lengths start at different steps; every step is ONE llm_decode_batch with a
// token of every generating sequence plus the prompts that start there (split by n_batch across sequences);
// one sequence shares the first tokens of another's prompt through llm_kv_seq_cp (stored once), one finishes
// early and its sequence id is reused by a later request (whose cells then interleave with the others').
// Each token's logits must equal those of the same token list decoded alone in a fresh context.
#pragma once

#include "llm.h"
#include "llm_test_util.h"

#include "doctest_cstr.h"

#include <string>
#include <vector>

struct batch_seq_plan {
    int id;         // sequence id in the batched context
    int start;      // step at which its prompt is evaluated
    int n_prompt;   // prompt tokens (incl. a shared prefix)
    int n_total;    // prompt + tokens fed one per step after it
    int share_src = -1;  // plan index whose prompt prefix it shares (already cached), -1: none
    int share_len = 0;
    std::vector<int32_t> toks;  // [n_total]
};

inline std::vector<batch_seq_plan> batch_scenario(int n_vocab, uint32_t seed) {
    std::vector<batch_seq_plan> p = {
        {0, 0, 13, 33},      // a prompt, then 20 steps
        {1, 0, 1, 9},        // one token, 8 steps, then done: id 1 is freed
        {2, 0, 24, 39},      // longer than n_batch: split across graphs
        {3, 1, 22, 34, 2, 16},  // shares seq 2's first 16 prompt tokens, adds 6 of its own
        {1, 11, 7, 17},      // a new request on the freed id 1, in cells between the others'
    };
    for (size_t i = 0; i < p.size(); ++i) p[i].toks = random_tokens(p[i].n_total, n_vocab, seed + 7 * (uint32_t) i);
    for (auto & s : p) {
        if (s.share_src >= 0) std::copy_n(p[s.share_src].toks.begin(), s.share_len, s.toks.begin());
    }
    return p;
}

// Reference: each plan's tokens alone in a fresh context (all logits). Returns [plan][token][n_vocab].
inline std::vector<std::vector<float>> batch_reference(llm_model * m, llm_context_params cp,
                                                       const std::vector<batch_seq_plan> & plans) {
    const int n_vocab = llm_model_hparams(m).n_vocab;
    cp.all_logits = true;
    cp.n_seq_max = 1;
    std::vector<std::vector<float>> ref;
    for (const auto & s : plans) {
        std::string err;
        llm_context * c = llm_context_new(m, cp, &err);
        REQUIRE_MESSAGE(c != nullptr, err);
        REQUIRE_MESSAGE(llm_decode(c, s.toks.data(), (int) s.toks.size(), &err), err);
        std::vector<float> r((size_t) s.n_total * n_vocab);
        for (int t = 0; t < s.n_total; ++t) std::copy_n(llm_get_logits_ith(c, t), n_vocab, r.begin() + (size_t) t * n_vocab);
        ref.push_back(std::move(r));
        llm_context_free(c);
    }
    return ref;
}

// Runs the scenario batched (cp.n_seq_max = 4) and returns the largest relative error of any compared row.
inline double batch_max_err(llm_model * m, llm_context_params cp, const std::vector<batch_seq_plan> & plans,
                            const std::vector<std::vector<float>> & ref, int * n_compared) {
    const int n_vocab = llm_model_hparams(m).n_vocab;
    cp.all_logits = false;
    cp.n_seq_max = 4;
    std::string err;
    llm_context * c = llm_context_new(m, cp, &err);
    REQUIRE_MESSAGE(c != nullptr, err);
    std::vector<int> next(plans.size(), 0);  // next token index of each plan
    double worst = 0;
    *n_compared = 0;
    llm_batch b;
    for (int step = 0;; ++step) {
        b.clear();
        std::vector<std::pair<int, int>> want;  // (plan, token index) of each logits row asked for
        bool any_left = false;
        for (size_t i = 0; i < plans.size(); ++i) {
            const batch_seq_plan & s = plans[i];
            if (step == s.start) {
                int t0 = 0;
                if (s.share_src >= 0) {
                    llm_kv_seq_cp(c, plans[s.share_src].id, s.id, 0, s.share_len);
                    t0 = s.share_len;
                }
                for (int t = t0; t < s.n_prompt; ++t) b.add(s.toks[t], t, s.id, t == s.n_prompt - 1);
                want.push_back({(int) i, s.n_prompt - 1});
                next[i] = s.n_prompt;
            } else if (step > s.start && next[i] < s.n_total) {
                b.add(s.toks[next[i]], next[i], s.id, true);
                want.push_back({(int) i, next[i]});
                ++next[i];
            }
            any_left = any_left || step < s.start || next[i] < s.n_total;
        }
        if (b.size() > 0) {
            REQUIRE_MESSAGE(llm_decode_batch(c, b, &err), "step " << step << ": " << err);
            int row = 0;
            for (int j = 0; j < b.size(); ++j) {
                if (!b.logits[j]) continue;
                const auto [pi, t] = want[row++];
                const float * got = llm_get_logits_batch(c, j);
                REQUIRE(got != nullptr);
                const double e = rel_err(got, ref[pi].data() + (size_t) t * n_vocab, n_vocab);
                if (e > worst) worst = e;
                ++*n_compared;
            }
        }
        // finished sequences leave: their cells are freed for the next request
        for (size_t i = 0; i < plans.size(); ++i) {
            if (next[i] == plans[i].n_total && step > plans[i].start && step == plans[i].start + (plans[i].n_total - plans[i].n_prompt)) {
                llm_kv_seq_rm(c, plans[i].id, 0, -1);
                CHECK(llm_kv_seq_pos_max(c, plans[i].id) == -1);
            }
        }
        if (!any_left) break;
    }
    llm_context_free(c);
    return worst;
}
