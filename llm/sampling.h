// sampling.h - pick the next token from logits: greedy, or the llama.cpp chain
// repetition penalty -> top-k -> top-p -> min-p -> temperature -> random draw.
//
//   llm_sampler_params sp;  sp.temp = 0.8f; sp.top_k = 40; sp.seed = 42;
//   llm_sampler smp(sp);
//   int32_t id = smp.sample(logits, n_vocab);   // logits: [n_vocab]
//   smp.accept(id);                             // remember for the repetition penalty
//
// With a grammar (GBNF, or a JSON schema turned into one; see grammar.h) sample() only returns tokens that
// continue a valid parse, and an end-of-generation token only once the text is a complete sentence:
//
//   std::string err;
//   if (!smp.set_grammar(gbnf_text, vocab, &err)) { fprintf(stderr, "%s\n", err.c_str()); return 1; }
//   int32_t id = smp.sample(logits, n_vocab);
//   if (id < 0) { fprintf(stderr, "%s\n", smp.last_error().c_str()); return 1; }  // nothing can continue
//   smp.accept(id);                             // also advances the grammar
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

class llm_grammar_matcher;
struct llm_grammar_tokens;
struct llm_vocab;

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
    ~llm_sampler();
    llm_sampler(llm_sampler &&) noexcept;
    llm_sampler & operator=(llm_sampler &&) noexcept;

    // The next token. Without a grammar: the chain above. With one (as llama.cpp does): the chain runs first
    // and its pick stands if the grammar allows it; else every candidate the grammar rejects is removed and
    // the chain runs again on the rest. Greedy gives exactly the best allowed token; sampling draws from the
    // masked distribution up to the chain's cut-offs (top-k/p, min-p see the unmasked list first).
    // Returns -1 when no token can continue the parse (the grammar admits nothing the vocab can write);
    // last_error() then says where: `grammar: no token can continue the parse at byte 12 ("...")`.
    int32_t sample(const float * logits, int32_t n_vocab);
    // Remembers id for the repetition penalty and (advance_grammar) advances the grammar. A token the grammar
    // rejects leaves the grammar where it was and sets last_error(). Tokens the model did not write (the prompt,
    // the user's input) go in with advance_grammar = false: the penalty sees them, the grammar does not.
    void    accept(int32_t id, bool advance_grammar = true);
    void    reset();  // also restarts the grammar

    // Constrain sampling to a GBNF grammar over the output bytes of vocab's tokens (vocab is read here, not
    // kept). false with a one-line *err (the parser's "grammar: line L, col C: ...") leaves the sampler as
    // it was.
    bool set_grammar(const std::string & gbnf, const llm_vocab & vocab, std::string * err);
    // The same from a JSON schema (text), through llm_json_schema_to_gbnf.
    bool set_json_schema(const std::string & schema, const llm_vocab & vocab, std::string * err);
    void clear_grammar();
    bool has_grammar() const { return grammar_ != nullptr; }
    llm_grammar_matcher * grammar() { return grammar_.get(); }  // nullptr without one
    const std::string & last_error() const { return last_error_; }
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

    std::unique_ptr<llm_grammar_matcher>      grammar_;
    std::shared_ptr<const llm_grammar_tokens> grammar_tokens_;
    std::vector<int32_t>                      valid_;
    std::string                               last_error_;

    void    fill(const float * logits, const int32_t * ids, int32_t n);  // cand_ from logits (ids: nullptr = all)
    int32_t pick();                                                     // the chain on cand_
};

int32_t llm_argmax(const float * logits, int32_t n);  // first max wins
