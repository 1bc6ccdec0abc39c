// sampling.cpp - the sampler chain (see sampling.h).
#include "sampling.h"

#include "ggml.h"
#include "grammar.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
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

llm_sampler::~llm_sampler()                                  = default;
llm_sampler::llm_sampler(llm_sampler &&) noexcept            = default;
llm_sampler & llm_sampler::operator=(llm_sampler &&) noexcept = default;

void llm_sampler::reset() {
    last_.clear();
    rng_.seed(seed_);
    if (grammar_) grammar_->reset();
    last_error_.clear();
}

bool llm_sampler::set_grammar(const std::string & gbnf, const llm_vocab & vocab, std::string * err) {
    std::shared_ptr<const llm_grammar> g = llm_grammar_parse(gbnf, err);
    if (!g) return false;
    grammar_tokens_ = llm_grammar_tokens_get(vocab);
    grammar_        = std::make_unique<llm_grammar_matcher>(std::move(g));
    last_error_.clear();
    return true;
}

bool llm_sampler::set_json_schema(const std::string & schema, const llm_vocab & vocab, std::string * err) {
    std::string gbnf;
    if (!llm_json_schema_to_gbnf(schema, gbnf, err)) return false;
    return set_grammar(gbnf, vocab, err);
}

void llm_sampler::clear_grammar() {
    grammar_.reset();
    grammar_tokens_.reset();
    last_error_.clear();
}

// printable rendering of the end of the text, for messages
static std::string quote_tail(const std::string & t) {
    size_t i = 0;
    while (i < t.size() && ((unsigned char) t[i] & 0xC0) == 0x80) ++i;  // begin on a character
    std::string out;
    llm_grammar_escape_bytes(out, std::string_view(t).substr(i));
    return out;
}

void llm_sampler::accept(int32_t id, bool advance_grammar) {
    if (grammar_ && advance_grammar && !grammar_->accept_token(*grammar_tokens_, id)) {
        last_error_ = "grammar: token " + std::to_string(id) + " does not continue the parse at byte " +
                      std::to_string(grammar_->n_bytes()) + " (\"" + quote_tail(grammar_->tail()) + "\")";
    }
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

void llm_sampler::fill(const float * logits, const int32_t * ids, int32_t n) {
    cand_.resize(n);
    if (ids) {
        for (int32_t i = 0; i < n; ++i) cand_[i] = {ids[i], logits[ids[i]], 0.0f};
    } else {
        for (int32_t i = 0; i < n; ++i) cand_[i] = {i, logits[i], 0.0f};
    }
    apply_repeat_penalty(cand_, last_, params_.repeat_penalty);
}

int32_t llm_sampler::sample(const float * logits, int32_t n_vocab) {
    GGML_ASSERT(n_vocab > 0 && "llm_sampler::sample: empty vocabulary");
    fill(logits, nullptr, n_vocab);
    const int32_t id = pick();
    if (!grammar_) return id;
    GGML_ASSERT(n_vocab <= grammar_tokens_->n_vocab && "llm_sampler::sample: logits wider than the grammar's vocab");
    if (grammar_->token_valid(*grammar_tokens_, id)) return id;
    // the pick breaks the grammar: keep only the candidates that continue the parse and pick again
    grammar_->valid_tokens(*grammar_tokens_, valid_);
    valid_.erase(std::remove_if(valid_.begin(), valid_.end(), [&](int32_t v) { return v >= n_vocab; }), valid_.end());
    if (valid_.empty()) {
        last_error_ = "grammar: no token can continue the parse at byte " + std::to_string(grammar_->n_bytes()) +
                      " (\"" + quote_tail(grammar_->tail()) + "\")";
        return -1;
    }
    fill(logits, valid_.data(), (int32_t) valid_.size());
    return pick();
}

int32_t llm_sampler::pick() {
    if (params_.temp <= 0.0f) {
        size_t best = 0;  // the first maximum: the smallest id among equal logits
        for (size_t i = 1; i < cand_.size(); ++i) {
            if (cand_[i].logit > cand_[best].logit || (cand_[i].logit == cand_[best].logit && cand_[i].id < cand_[best].id)) {
                best = i;
            }
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
