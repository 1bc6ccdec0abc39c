// sampling.cpp - the sampler chain (see sampling.h).
#include "sampling.h"

#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

int32_t llm_argmax(const float * logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) {
        if (logits[i] > logits[best]) best = i;
    }
    return best;
}

llm_sampler::llm_sampler(const llm_sampler_params & params) : params_(params) {
    seed_ = params.seed == 0xFFFFFFFFu ? std::random_device{}() : params.seed;
    rng_.seed(seed_);
}

void llm_sampler::reset() {
    last_.clear();
    rng_.seed(seed_);
}

void llm_sampler::accept(int32_t id) {
    if (params_.repeat_last_n == 0) return;
    last_.push_back(id);
    if (params_.repeat_last_n > 0) {
        while ((int32_t) last_.size() > params_.repeat_last_n) last_.pop_front();
    }
}

// llama.cpp's penalty: divide positive logits, multiply negative ones, once per distinct token
void llm_sampler::apply_repeat_penalty(std::vector<llm_token_prob> & cand, const std::deque<int32_t> & last,
                                       float penalty) {
    if (penalty == 1.0f || last.empty()) return;
    std::unordered_map<int32_t, int> seen;
    for (int32_t id : last) seen[id]++;
    for (auto & c : cand) {
        if (seen.count(c.id)) c.logit = c.logit > 0 ? c.logit / penalty : c.logit * penalty;
    }
}

static void sort_desc(std::vector<llm_token_prob> & cand) {
    std::sort(cand.begin(), cand.end(), [](const llm_token_prob & a, const llm_token_prob & b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    });
}

void llm_sampler::apply_top_k(std::vector<llm_token_prob> & cand, int32_t k) {
    if (k <= 0 || k >= (int32_t) cand.size()) {
        sort_desc(cand);
        return;
    }
    std::partial_sort(cand.begin(), cand.begin() + k, cand.end(), [](const llm_token_prob & a, const llm_token_prob & b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    });
    cand.resize(k);
}

void llm_sampler::apply_softmax(std::vector<llm_token_prob> & cand) {
    if (cand.empty()) return;
    sort_desc(cand);
    const float mx = cand[0].logit;
    double sum = 0;
    for (auto & c : cand) {
        c.p = std::exp(c.logit - mx);
        sum += c.p;
    }
    for (auto & c : cand) c.p = (float) (c.p / sum);
}

void llm_sampler::apply_top_p(std::vector<llm_token_prob> & cand, float p) {
    if (p >= 1.0f || cand.empty()) return;
    double cum = 0;
    size_t keep = cand.size();
    for (size_t i = 0; i < cand.size(); ++i) {
        cum += cand[i].p;
        if (cum >= p) {
            keep = i + 1;
            break;
        }
    }
    cand.resize(keep);
}

void llm_sampler::apply_min_p(std::vector<llm_token_prob> & cand, float min_p) {
    if (min_p <= 0.0f || cand.empty()) return;
    const float thr = cand[0].p * min_p;  // cand sorted by softmax
    size_t keep = 1;
    while (keep < cand.size() && cand[keep].p >= thr) ++keep;
    cand.resize(keep);
}

void llm_sampler::apply_temp(std::vector<llm_token_prob> & cand, float temp) {
    for (auto & c : cand) c.logit /= temp;
}

int32_t llm_sampler::sample(const float * logits, int32_t n_vocab) {
    GGML_ASSERT(n_vocab > 0 && "llm_sampler::sample: empty vocabulary");
    cand_.resize(n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) cand_[i] = {i, logits[i], 0.0f};
    apply_repeat_penalty(cand_, last_, params_.repeat_penalty);
    if (params_.temp <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n_vocab; ++i) {
            if (cand_[i].logit > cand_[best].logit) best = i;
        }
        return cand_[best].id;
    }
    apply_top_k(cand_, params_.top_k);
    apply_softmax(cand_);
    apply_top_p(cand_, params_.top_p);
    apply_min_p(cand_, params_.min_p);
    apply_temp(cand_, params_.temp);
    apply_softmax(cand_);
    // inverse CDF draw with the seeded generator (reproducible for a given --seed)
    const double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    double cum = 0;
    for (const auto & c : cand_) {
        cum += c.p;
        if (r < cum) return c.id;
    }
    return cand_.back().id;
}
