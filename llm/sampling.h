// sampling.h - pick the next token from logits: greedy, or the llama.cpp chain
// repetition penalty -> top-k -> top-p -> min-p -> temperature -> random draw.
//
//   llm_sampler_params sp;  sp.temp = 0.8f; sp.top_k = 40; sp.seed = 42;
//   llm_sampler smp(sp);
//   int32_t id = smp.sample(logits, n_vocab);   // logits: [n_vocab]
//   smp.accept(id);                             // remember for the repetition penalty
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

struct llm_sampler_params {
    float    temp = 0.8f;            // <= 0: greedy
    int32_t  top_k = 40;             // <= 0: off
    float    top_p = 0.95f;          // >= 1: off
    float    min_p = 0.05f;          // <= 0: off
    float    repeat_penalty = 1.0f;  // 1: off
    int32_t  repeat_last_n = 64;     // tokens considered by the penalty (0: off, -1: n_ctx)
    uint32_t seed = 0xFFFFFFFF;      // 0xFFFFFFFF: random seed
};

struct llm_token_prob {
    int32_t id;
    float   logit;
    float   p;
};

class llm_sampler {
public:
    explicit llm_sampler(const llm_sampler_params & params);
    int32_t sample(const float * logits, int32_t n_vocab);
    void    accept(int32_t id);
    void    reset();
    uint32_t seed() const { return seed_; }
    const llm_sampler_params & params() const { return params_; }

    // the individual stages, on a candidate list (exposed for tests)
    static void apply_repeat_penalty(std::vector<llm_token_prob> & cand, const std::deque<int32_t> & last, float penalty);
    static void apply_top_k(std::vector<llm_token_prob> & cand, int32_t k);     // sorts by logit desc
    static void apply_softmax(std::vector<llm_token_prob> & cand);              // sorts, fills p
    static void apply_top_p(std::vector<llm_token_prob> & cand, float p);       // needs softmax
    static void apply_min_p(std::vector<llm_token_prob> & cand, float min_p);   // needs softmax
    static void apply_temp(std::vector<llm_token_prob> & cand, float temp);

private:
    llm_sampler_params params_;
    uint32_t seed_;
    std::mt19937 rng_;
    std::deque<int32_t> last_;
    std::vector<llm_token_prob> cand_;
};

int32_t llm_argmax(const float * logits, int32_t n);  // first max wins
