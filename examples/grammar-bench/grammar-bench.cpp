// grammar-bench - the cost of grammar-constrained sampling per token, on a real vocab with random logits.
//
//   grammar-bench [-m VOCAB.gguf] [-g GRAMMAR.gbnf] [-n STEPS] [-s SEED]
//
// Drives the grammar along a JSON document (tokenized with the vocab; each step accepts the document's next
// token, so the parse stays valid) and times, per step:
//   check      the fast path: is the token the unconstrained chain picked allowed? (one walk of its bytes)
//   mask       the full mask: every token of the vocab that can continue the parse (one trie walk)
//   sample     llm_sampler::sample with and without the grammar (the difference is the grammar's share:
//              the check, and when the pick is refused, the mask and the chain run again on what is left)
// over two passes: "cold" (a fresh matcher: transitions computed on first use) and "warm" (after reset()).
// Times are the thread's CPU time (on a shared machine the wall clock also counts other processes' time
// slices); the wall-clock median is printed beside it.
// Defaults: ../shared/models/ggml-vocab-llama-bpe.gguf (LLM_SHARED overrides ../shared), grammars/json.gbnf.
#include "gguf.h"
#include "grammar.h"
#include "sampling.h"
#include "vocab.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace {

// a JSON object with what a model writes: keys, short and long strings, escapes, numbers, nesting, non-ASCII
const char * DOC =
    R"({"id": 4182, "name": "Ada Lovelace", "active": true, "score": -12.75e-3, "tags": ["math", "poetry", "engines"],)"
    R"( "address": {"street": "12 St James's Square", "city": "London", "zip": null},)"
    R"( "notes": "Première programmeuse — « la note G » 🧮, 日本語のテキスト, 한국어 텍스트",)"
    R"( "history": [{"year": 1842, "event": "Translated Menabrea's article on the Analytical Engine\nand added notes A to G"},)"
    R"( {"year": 1843, "event": "Published in Taylor's Scientific Memoirs, volume 3"}],)"
    R"( "metrics": {"views": 1048576, "ratio": 0.618, "flags": [false, true, null], "nested": {"a": {"b": {"c": [1, [2, [3]]]}}}},)"
    R"( "escaped": "quote \" backslash \\ tab \t unicode \u00e9 end", "description": "She is often regarded as the first )"
    R"(computer programmer, having published the first algorithm intended to be carried out by such a machine."})";

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, (size_t)(q * (double)(v.size() - 1) + 0.5));
    return v[i];
}

struct timing {
    std::vector<double> cpu, wall; // us
};

void report(const char * what, const timing & t) {
    double sum = 0;
    for (double x : t.cpu)
        sum += x;
    printf("  %-30s median %7.1f us  p99 %7.1f us  mean %7.1f us  max %7.1f us  (wall median %7.1f us)\n", what,
           percentile(t.cpu, 0.5), percentile(t.cpu, 0.99), t.cpu.empty() ? 0.0 : sum / (double)t.cpu.size(),
           percentile(t.cpu, 1.0), percentile(t.wall, 0.5));
}

std::string read_file(const std::string & path, bool & ok) {
    std::ifstream f(path, std::ios::binary);
    ok = f.good();
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

using clock_type = std::chrono::steady_clock;
double us_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

double thread_cpu_us() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

// times f() into t
template <typename F> auto timed(timing & t, F && f) {
    const double c0 = thread_cpu_us();
    const auto w0 = clock_type::now();
    auto r = f();
    t.wall.push_back(us_since(w0));
    t.cpu.push_back(thread_cpu_us() - c0);
    return r;
}

} // namespace

int main(int argc, char ** argv) {
    const char * shared = getenv("LLM_SHARED");
    std::string model = std::string(shared && *shared ? shared : "../shared") + "/models/ggml-vocab-llama-bpe.gguf";
    std::string gfile = "grammars/json.gbnf";
    int steps = 200;
    uint32_t seed = 42;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "usage: %s [-m VOCAB.gguf] [-g GRAMMAR.gbnf] [-n STEPS] [-s SEED]\n", argv[0]);
            return 1;
        }
        if (a == "-m") {
            model = argv[++i];
        } else if (a == "-g") {
            gfile = argv[++i];
        } else if (a == "-n") {
            steps = atoi(argv[++i]);
        } else if (a == "-s") {
            seed = (uint32_t)strtoul(argv[++i], nullptr, 10);
        } else {
            fprintf(stderr, "error: unknown argument %s\n", a.c_str());
            return 1;
        }
    }

    std::string err;
    gguf_context * g = gguf_init_from_file(model.c_str(), {/*no_alloc=*/true, nullptr}, &err);
    llm_vocab vocab;
    if (!g || !llm_vocab_load(vocab, g, &err)) {
        fprintf(stderr, "error: %s: %s\n", model.c_str(), err.c_str());
        if (g) gguf_free(g);
        return 1;
    }
    gguf_free(g);
    bool ok = false;
    const std::string gbnf = read_file(gfile, ok);
    if (!ok) {
        fprintf(stderr, "error: cannot read %s\n", gfile.c_str());
        return 1;
    }
    auto grammar = llm_grammar_parse(gbnf, &err);
    if (!grammar) {
        fprintf(stderr, "error: %s: %s\n", gfile.c_str(), err.c_str());
        return 1;
    }

    auto t0 = clock_type::now();
    const auto tokens = llm_grammar_tokens_get(vocab);
    const double t_build = us_since(t0);
    const std::vector<int32_t> doc = llm_tokenize(vocab, DOC, /*add_special=*/false, /*parse_special=*/false);
    const int n = std::min<int>(steps, (int)doc.size());
    printf("vocab %s: %d tokens (%s), trie of %zu nodes built in %.1f ms; grammar %s: %zu rules\n", model.c_str(),
           vocab.n_vocab(), vocab.type_name(), tokens->nodes.size(), t_build / 1000.0, gfile.c_str(),
           grammar->rules.size());
    printf("driving along a %zu-token JSON document: %d steps, random logits (seed %u)\n", doc.size(), n, seed);

    const int32_t nv = vocab.n_vocab();
    std::vector<float> logits(nv);
    std::mt19937 rng(seed);
    llm_sampler_params sp;
    sp.seed = seed;
    llm_sampler plain(sp), constrained(sp);
    if (!constrained.set_grammar(gbnf, vocab, &err)) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    llm_grammar_matcher m(grammar);
    std::vector<int32_t> valid;

    for (int pass = 0; pass < 2; ++pass) {
        timing t_check, t_mask, t_plain, t_constrained, t_over;
        size_t n_valid = 0, n_pick_ok = 0;
        for (int i = 0; i < n; ++i) {
            for (float & l : logits)
                l = std::normal_distribution<float>(0.0f, 2.0f)(rng);

            const int32_t pick = timed(t_plain, [&] { return plain.sample(logits.data(), nv); });
            n_pick_ok += timed(t_check, [&] { return m.token_valid(*tokens, pick); });
            n_valid += timed(t_mask, [&] {
                m.valid_tokens(*tokens, valid);
                return valid.size();
            });
            const int32_t id = timed(t_constrained, [&] { return constrained.sample(logits.data(), nv); });
            t_over.cpu.push_back(t_constrained.cpu.back() - t_plain.cpu.back());
            t_over.wall.push_back(t_constrained.wall.back() - t_plain.wall.back());
            if (id < 0 || !m.token_valid(*tokens, id)) {
                fprintf(stderr, "error: step %d: the constrained sampler returned %d (%s)\n", i, id,
                        constrained.last_error().c_str());
                return 1;
            }
            if (!m.accept_token(*tokens, doc[i])) {
                fprintf(stderr, "error: step %d: the document's token %d is refused\n", i, doc[i]);
                return 1;
            }
            constrained.accept(doc[i]);
            plain.accept(doc[i]);
        }
        printf("%s pass: %zu tokens valid per step on average, the unconstrained pick allowed at %zu of %d steps\n",
               pass == 0 ? "cold" : "warm", n_valid / (size_t)n, n_pick_ok, n);
        report("fast path (check the pick)", t_check);
        report("full mask (all tokens)", t_mask);
        report("sample() without grammar", t_plain);
        report("sample() with grammar", t_constrained);
        report("grammar share of sample()", t_over);
        m.reset();
        constrained.reset();
        plain.reset();
    }
    return 0;
}
