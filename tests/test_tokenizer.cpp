// test_tokenizer.cpp - the Llama tokenizers against published vectors and independent references:
// llama.cpp's ggml-vocab-llama-{spm,bpe}.gguf.inp/.out (made by HF tokenizers), llama2.c's encode() run
// on tok512.bin / tokenizer.bin (an independent O(n^2) implementation of the SPM merge), llama.cpp's
// test-tokenizer-1 round trips, special tokens, streaming, invalid input, loader errors and speed.
#include "gguf.h"
#include "test_util.h"
#include "unicode.h"
#include "vocab.h"
#include "vocab_test_util.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "doctest_cstr.h"
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct vocab_case {
    std::string          text;
    std::vector<int32_t> ids;
};

// llama.cpp's format: inputs joined by "\n__ggml_vocab_test__\n" (and one after the last), one line of ids each
std::vector<vocab_case> read_cases(const std::string & base) {
    const std::string inp = read_file(llm_shared_path(base + ".inp"));
    const std::string out = read_file(llm_shared_path(base + ".out"));
    std::vector<vocab_case> cases;
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < inp.size();) {
        size_t e = inp.find(sep, pos);
        if (e == std::string::npos) {
            e = inp.size();
        }
        cases.push_back({ inp.substr(pos, e - pos), {} });
        pos = e + sep.size();
    }
    std::istringstream lines(out);
    std::string line;
    for (vocab_case & c : cases) {
        std::getline(lines, line);
        std::istringstream ids(line);
        for (int32_t id; ids >> id;) {
            c.ids.push_back(id);
        }
    }
    return cases;
}

std::string ids_str(const std::vector<int32_t> & ids) {
    std::string s;
    for (int32_t id : ids) {
        s += std::to_string(id) + " ";
    }
    return s;
}

void check_vectors(const llm_vocab & v, const std::string & base, size_t expect_n) {
    const std::vector<vocab_case> cases = read_cases(base);
    CHECK(cases.size() == expect_n);
    for (const vocab_case & c : cases) {
        const std::vector<int32_t> got = llm_tokenize(v, c.text, false, false);
        CHECK_MESSAGE(got == c.ids, "input '" << c.text << "'\n  got:      " << ids_str(got)
                                              << "\n  expected: " << ids_str(c.ids));
    }
}

// ---- llama2.c's tokenizer (karpathy/llama2.c run.c encode), an independent reference for SPM ----
struct llama2c_tokenizer {
    std::vector<std::string> vocab;
    std::vector<float>       scores;
    std::map<std::string, int> index;

    bool load(const std::string & path) {
        const std::string b = read_file(path);
        if (b.size() < 4) {
            return false;
        }
        size_t o = 4;
        while (o + 8 <= b.size()) {
            float score;
            int32_t len;
            memcpy(&score, b.data() + o, 4);
            memcpy(&len, b.data() + o + 4, 4);
            o += 8;
            vocab.push_back(b.substr(o, len));
            scores.push_back(score);
            o += len;
        }
        for (size_t i = 0; i < vocab.size(); ++i) {
            index.emplace(vocab[i], (int) i);
        }
        return true;
    }
    int lookup(const std::string & s) const {
        auto it = index.find(s);
        return it == index.end() ? -1 : it->second;
    }
    // encode(text, bos=0, eos=0): dummy prefix, utf-8 chars or bytes+3, then greedy best-score pair merges
    std::vector<int> encode(const std::string & text) const {
        std::vector<int> t;
        if (text.empty()) {
            return t;
        }
        t.push_back(lookup(" "));
        std::string buf;
        for (size_t i = 0; i < text.size(); ++i) {
            const char c = text[i];
            if ((c & 0xC0) != 0x80) {
                buf.clear();
            }
            buf += c;
            if (i + 1 < text.size() && (text[i + 1] & 0xC0) == 0x80 && buf.size() < 4) {
                continue;
            }
            const int id = lookup(buf);
            if (id != -1) {
                t.push_back(id);
            } else {
                for (unsigned char b : buf) {
                    t.push_back(b + 3);
                }
            }
            buf.clear();
        }
        while (true) {
            float best = -1e10f;
            int best_id = -1, best_idx = -1;
            for (size_t i = 0; i + 1 < t.size(); ++i) {
                const int id = lookup(vocab[t[i]] + vocab[t[i + 1]]);
                if (id != -1 && scores[id] > best) {
                    best = scores[id], best_id = id, best_idx = (int) i;
                }
            }
            if (best_idx == -1) {
                break;
            }
            t[best_idx] = best_id;
            t.erase(t.begin() + best_idx + 1);
        }
        return t;
    }
};

}  // namespace

// ---- published vectors ----------------------------------------------------------------------

TEST_CASE("spm: llama.cpp ggml-vocab-llama-spm vectors") {
    const llm_vocab * v = shared_vocab("models/ggml-vocab-llama-spm.gguf");
    if (!v) return;
    CHECK(v->type == LLM_VOCAB_TYPE_SPM);
    CHECK(v->n_vocab() == 32000);
    CHECK(v->bos == 1);
    CHECK(v->eos == 2);
    CHECK(v->unk == 0);
    CHECK(v->add_bos);
    CHECK(v->add_space_prefix);
    check_vectors(*v, "models/ggml-vocab-llama-spm.gguf", 46);
}

TEST_CASE("bpe: llama.cpp ggml-vocab-llama-bpe vectors") {
    const llm_vocab * v = shared_vocab("models/ggml-vocab-llama-bpe.gguf");
    if (!v) return;
    CHECK(v->type == LLM_VOCAB_TYPE_BPE);
    CHECK(v->pre == LLM_VOCAB_PRE_LLAMA3);
    CHECK(v->n_vocab() == 128256);
    CHECK(v->bos == 128000);
    CHECK(v->eos == 128009);
    CHECK(v->eot == 128009);  // detected from "<|eot_id|>"
    CHECK(v->merge_rank.size() == 280147);
    check_vectors(*v, "models/ggml-vocab-llama-bpe.gguf", 46);
}

TEST_CASE("bpe: our convert_hf_to_gguf.py --vocab-only of llama3-tokenizer passes the same vectors") {
    const std::string tok_dir = llm_shared_path("models/llama3-tokenizer");
    if (access((tok_dir + "/tokenizer.json").c_str(), R_OK) != 0) { // as the vector cases: no shared data, no test
        MESSAGE("skipping: " << tok_dir << "/tokenizer.json not found");
        return;
    }
    char dir[] = "/tmp/test_vocab_convert.XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string out = std::string(dir) + "/llama3-vocab.gguf";
    const std::string cmd = "/usr/bin/python3 " LLM_SOURCE_DIR "/gguf-py/scripts/convert_hf_to_gguf.py --vocab-only '" +
                            tok_dir + "' --out '" + out + "' > /dev/null";
    REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
    std::string err;
    gguf_context * g = gguf_init_from_file(out.c_str(), {true, nullptr}, &err);
    REQUIRE_MESSAGE(g != nullptr, err);
    llm_vocab v;
    REQUIRE_MESSAGE(llm_vocab_load(v, g, &err), err);
    gguf_free(g);
    std::remove(out.c_str());
    rmdir(dir);
    CHECK(v.type == LLM_VOCAB_TYPE_BPE);
    CHECK(v.n_vocab() == 128256);
    CHECK(v.bos == 128000);
    CHECK(v.eot == 128009);
    check_vectors(v, "models/ggml-vocab-llama-bpe.gguf", 46);
}

TEST_CASE("spm: matches llama2.c encode on tok512 (stories260K) and the Llama 2 tokenizer.bin") {
    const llm_vocab * v260 = shared_vocab("models/stories260K.gguf");
    const llm_vocab * v32k = shared_vocab("models/ggml-vocab-llama-spm.gguf");
    if (!v260 || !v32k) return;
    llama2c_tokenizer ref512, ref32k;
    REQUIRE(ref512.load(llm_shared_path("models/tok512.bin")));
    REQUIRE(ref32k.load(llm_shared_path("models/llama2-tokenizer/tokenizer.bin")));
    REQUIRE(ref512.vocab.size() == 512);
    REQUIRE(ref32k.vocab.size() == 32000);

    const std::vector<int32_t> once = llm_tokenize(*v260, "Once upon a time", true, false);
    CHECK(once.front() == 1);
    CHECK(std::vector<int>(once.begin() + 1, once.end()) == ref512.encode("Once upon a time"));
    CHECK(llm_detokenize(*v260, once, true) == " Once upon a time");  // the space after a removed BOS stays
    CHECK(llm_detokenize(*v260, once, false) == " Once upon a time");  // BOS renders "" but takes the strip
    CHECK(llm_detokenize(*v260, llm_tokenize(*v260, "Once upon a time", false, false)) == "Once upon a time");

    std::vector<std::string> texts = {
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
        "Tom and Sue were friends!  They liked to eat cake\n\nat 3:45 pm.", "a", "  ", "Z\tq",
        "naïve café — ümlaut 日本語 🦙",
    };
    for (const vocab_case & c : read_cases("models/ggml-vocab-llama-spm.gguf")) {
        texts.push_back(c.text);
    }
    for (const std::string & t : texts) {
        if (t.empty()) continue;
        const std::vector<int32_t> a = llm_tokenize(*v260, t, false, false);
        CHECK_MESSAGE(std::vector<int>(a.begin(), a.end()) == ref512.encode(t), "tok512: '" << t << "'");
        const std::vector<int32_t> b = llm_tokenize(*v32k, t, false, false);
        CHECK_MESSAGE(std::vector<int>(b.begin(), b.end()) == ref32k.encode(t), "tokenizer.bin: '" << t << "'");
    }
}

// ---- round trips (llama.cpp test-tokenizer-0/1) -------------------------------------------------

TEST_CASE("round trip: detokenize(tokenize(x)) == x for the test inputs") {
    for (const char * name : { "models/ggml-vocab-llama-spm.gguf", "models/ggml-vocab-llama-bpe.gguf" }) {
        const llm_vocab * pv = shared_vocab(name);
        if (!pv) return;
        llm_vocab v = *pv;
        v.clean_spaces = false;  // HF's clean_up_tokenization (" ?" -> "?") is lossy by design
        for (const vocab_case & c : read_cases(name)) {
            CHECK_MESSAGE(llm_detokenize(v, llm_tokenize(v, c.text, false, false)) == c.text, std::string(name) << ": " << c.text);
            // with BOS first, the BOS takes the one-space strip (llama.cpp): SPM keeps its prefix space
            const std::string prefix = v.add_space_prefix && !c.text.empty() ? " " : "";
            CHECK(llm_detokenize(v, llm_tokenize(v, c.text, true, false), false) == prefix + c.text);
        }
        // with clean_spaces on (the default for BPE), inputs without " ?" etc. still round trip
        CHECK(llm_detokenize(*pv, llm_tokenize(*pv, "Hello, world! It's 3.14", false, false)) ==
              "Hello, world! It's 3.14");
    }
    const llm_vocab * bpe = shared_vocab("models/ggml-vocab-llama-bpe.gguf");
    if (!bpe) return;
    CHECK(llm_detokenize(*bpe, llm_tokenize(*bpe, "How are you 😁 ? I 'm ok .", false, false)) ==
          "How are you 😁? I'm ok.");
}

TEST_CASE("round trip: every BPE token alone, and every code point (test-tokenizer-1-bpe)") {
    const llm_vocab * pv = shared_vocab("models/ggml-vocab-llama-bpe.gguf");
    if (!pv) return;
    llm_vocab nv = *pv;
    nv.clean_spaces = false;  // else token " !$" comes back as "!$", which is two tokens
    const llm_vocab * v = &nv;
    int bad = 0;
    for (int32_t id = 0; id < v->n_vocab(); ++id) {
        const std::string s = llm_detokenize(*v, { id }, false, true);
        std::string valid, rest = s;
        llm_utf8_take_complete(rest, valid);
        if (valid != s) {
            continue;  // a partial UTF-8 sequence (tokenize would see U+FFFD), as llama.cpp's test skips
        }
        const std::vector<int32_t> t = llm_tokenize(*v, s, false, true);
        if (t.size() != 1 || llm_detokenize(*v, t, false, true) != s) {  // ignore_merges: one token back
            if (bad++ < 5) {
                MESSAGE("token " << id << " '" << s << "' -> " << ids_str(t));
            }
        }
    }
    CHECK(bad == 0);
    bad = 0;
    for (uint32_t cp = 1; cp < 0x110000; ++cp) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x11000 && cp < 0xE0000)) {
            continue;  // surrogates; and skip the sparse middle planes to keep the test fast
        }
        const std::string s = unicode_cpt_to_utf8(cp);
        if (llm_detokenize(*v, llm_tokenize(*v, s, false, false)) != s && bad++ < 5) {
            MESSAGE("code point " << cp);
        }
    }
    CHECK(bad == 0);
}

TEST_CASE("round trip: every code point through SPM (test-tokenizer-1-spm)") {
    const llm_vocab * v = shared_vocab("models/ggml-vocab-llama-spm.gguf");
    if (!v) return;
    int bad = 0;
    for (uint32_t cp = 1; cp < 0x110000; cp += (cp < 0x11000 ? 1 : 7)) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        const std::string s = unicode_cpt_to_utf8(cp);
        if (cp != 0x2581 && llm_detokenize(*v, llm_tokenize(*v, s, false, false)) != s && bad++ < 5) {
            MESSAGE("code point " << cp);  // U+2581 is SPM's space: it comes back as ' ' (llama.cpp skips it too)
        }
    }
    CHECK(bad == 0);
}

// ---- special tokens ---------------------------------------------------------------------------

TEST_CASE("special tokens are parsed only with parse_special") {
    const llm_vocab * v = shared_vocab("models/ggml-vocab-llama-bpe.gguf");
    if (!v) return;
    const std::string text = "<|begin_of_text|>Hi<|eot_id|>";
    const int32_t hi = v->find_token("Hi");
    REQUIRE(hi >= 0);
    CHECK(llm_tokenize(*v, text, false, true) == std::vector<int32_t>{ 128000, hi, 128009 });
    CHECK(llm_tokenize(*v, text, true, true) == std::vector<int32_t>{ 128000, 128000, hi, 128009 });
    const std::vector<int32_t> plain = llm_tokenize(*v, text, false, false);
    CHECK(plain.size() > 6);
    for (int32_t id : plain) {
        CHECK(!v->is_control(id));
    }
    CHECK(llm_detokenize(*v, plain) == text);                    // spelled out as text
    CHECK(llm_detokenize(*v, { 128000, hi, 128009 }) == "Hi");  // control tokens render as nothing ...
    CHECK(llm_detokenize(*v, { 128000, hi, 128009 }, false, true) == text);  // ... unless asked
    CHECK(llm_token_to_piece(*v, 128009, false).empty());
    CHECK(llm_token_to_piece(*v, 128009, true) == "<|eot_id|>");

    CHECK(v->is_eog(128009));
    CHECK(v->is_eog(128001));  // <|end_of_text|>
    CHECK(!v->is_eog(128000));
    CHECK(!v->is_eog(hi));
    CHECK(v->find_token("<|eot_id|>") == 128009);
    CHECK(v->find_token("no such token") == -1);

    const llm_vocab * s = shared_vocab("models/ggml-vocab-llama-spm.gguf");
    if (!s) return;
    // SPM: a space prefix is added again after each special token
    const std::vector<int32_t> sp = llm_tokenize(*s, "<s>Hello</s>", false, true);
    CHECK(sp == std::vector<int32_t>{ 1, 15043, 2 });
    CHECK(llm_tokenize(*s, "<s>", false, false).size() > 1);
    CHECK(s->is_eog(2));
    CHECK(s->is_control(1));
}

// ---- detokenization -----------------------------------------------------------------------------

TEST_CASE("streaming detokenizer holds back split UTF-8") {
    const llm_vocab * v = shared_vocab("models/ggml-vocab-llama-spm.gguf");
    if (!v) return;
    // 🦙 = F0 9F A6 99 has no token in Llama 2: four byte-fallback tokens (see the .out file: 243 162 169 156)
    const std::vector<int32_t> ids = llm_tokenize(*v, "🦙", false, false);
    REQUIRE(ids == std::vector<int32_t>{ 29871, 243, 162, 169, 156 });
    llm_detok_stream st(*v);
    CHECK(st.push(ids[0]) == " ");
    CHECK(st.push(ids[1]) == "");
    CHECK(st.push(ids[2]) == "");
    CHECK(st.push(ids[3]) == "");
    CHECK(st.push(ids[4]) == "🦙");
    CHECK(st.flush() == "");
    // an incomplete tail at the end becomes U+FFFD; a byte that cannot start a sequence is replaced at once
    CHECK(st.push(243) == "");
    CHECK(st.push(162) == "");
    CHECK(st.flush() == "\xEF\xBF\xBD");
    CHECK(st.push(v->byte_ids[0xFF]) == "\xEF\xBF\xBD");
    CHECK(st.push(243) == "");
    CHECK(st.push(v->find_token("▁a")) == "\xEF\xBF\xBD a");  // broken sequence, then the text
    // valid multi-token text streams to the same bytes as detokenize
    const std::string text = "naïve 日本語 🦙🚀 done";
    std::string streamed;
    llm_detok_stream st2(*v);
    const std::vector<int32_t> t2 = llm_tokenize(*v, text, false, false);
    for (int32_t id : t2) streamed += st2.push(id);
    streamed += st2.flush();
    CHECK(streamed == " " + text);
}

TEST_CASE("utf8 take-complete rules") {
    const auto run = [](std::string buf) {
        std::string out;
        llm_utf8_take_complete(buf, out);
        return out + "|" + buf;
    };
    CHECK(run("abc") == "abc|");
    CHECK(run("a\xC3") == "a|\xC3");
    CHECK(run("a\xC3\xA9") == "a\xC3\xA9|");
    CHECK(run("\xE0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD|");  // overlong lead + stray continuation
    CHECK(run("\xF4\x90\x80\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|");  // > U+10FFFF
    CHECK(run("\xF0\x9F\xA6") == "|\xF0\x9F\xA6");
}

// ---- robustness ---------------------------------------------------------------------------------

TEST_CASE("empty and invalid UTF-8 input") {
    const llm_vocab * s = shared_vocab("models/ggml-vocab-llama-spm.gguf");
    const llm_vocab * b = shared_vocab("models/ggml-vocab-llama-bpe.gguf");
    if (!s || !b) return;
    CHECK(llm_tokenize(*s, "", false, false).empty());
    CHECK(llm_tokenize(*s, "", true, false) == std::vector<int32_t>{ 1 });
    CHECK(llm_tokenize(*b, "", false, true).empty());
    CHECK(llm_tokenize(*b, "", true, true) == std::vector<int32_t>{ 128000 });
    CHECK(llm_detokenize(*s, {}) == "");
    CHECK(llm_detokenize(*s, { -1, 1000000 }) == "");  // invalid ids render as nothing

    const std::string bad = "ok\xFF\xFE,\xC3z \xE2\x82y \xF7\xBF\xBF\xBF\x80 end\xF0";
    const std::vector<int32_t> ts = llm_tokenize(*s, bad, false, false);
    CHECK(llm_detokenize(*s, ts) == bad);  // SPM: bytes pass through <0xXX> fallback unchanged
    // ... except (as llama.cpp) a lead byte swallows the next bytes even when they are an escaped space
    CHECK(llm_detokenize(*s, llm_tokenize(*s, "\xC3 a", false, false)) == "\xC3\xE2\x96\x81" "a");
    const std::vector<int32_t> tb = llm_tokenize(*b, bad, false, false);
    // BPE (as llama.cpp): each invalid byte becomes U+FFFD before the byte-level mapping
    llm_vocab nb = *b;
    nb.clean_spaces = false;
    std::string expect;
    for (uint32_t c : unicode_cpts_from_utf8(bad)) expect += unicode_cpt_to_utf8(c);
    CHECK(llm_detokenize(nb, tb) == expect);
    for (const std::string & t : { std::string("\0\0a\0", 4), std::string(1000, '\xFF'), std::string("\r\n\r\n ") }) {
        CHECK(llm_detokenize(*s, llm_tokenize(*s, t, false, true)) == t);
        CHECK(!llm_tokenize(*b, t, false, true).empty());
    }
}

TEST_CASE("performance: 100 KB of text well under a second") {
    for (const char * name : { "models/ggml-vocab-llama-spm.gguf", "models/ggml-vocab-llama-bpe.gguf" }) {
        const llm_vocab * v = shared_vocab(name);
        if (!v) return;
        std::string text;
        const std::vector<vocab_case> cases = read_cases(name);
        for (size_t i = 0; text.size() < 100 * 1024; ++i) {
            text += cases[i % cases.size()].text + " Once upon a time, the quick brown fox jumped. ";
        }
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<int32_t> ids = llm_tokenize(*v, text, true, true);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        MESSAGE(std::string(name) << ": " << text.size() << " bytes -> " << ids.size() << " tokens in " << sec * 1e3 << " ms");
        CHECK(sec < 0.5);
    }
}

// ---- loader validation --------------------------------------------------------------------------

namespace {

struct tiny_vocab {
    gguf_context * g = gguf_init_empty();
    std::vector<std::string> toks = { "<unk>", "<s>", "</s>", "a", "b", "ab", "\xe2\x96\x81" };
    tiny_vocab(const char * model = "llama") {
        gguf_set_val_str(g, "tokenizer.ggml.model", model);
        set_tokens(toks);
        const float scores[7] = { 0, 0, 0, -1, -2, -0.5f, -3 };
        gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 7);
        const int32_t types[7] = { 2, 3, 3, 1, 1, 1, 1 };
        gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 7);
    }
    ~tiny_vocab() { gguf_free(g); }
    void set_tokens(const std::vector<std::string> & t) {
        std::vector<const char *> p;
        for (const std::string & s : t) p.push_back(s.c_str());
        gguf_set_arr_str(g, "tokenizer.ggml.tokens", p.data(), p.size());
    }
    std::string load_err() {
        llm_vocab v;
        std::string err;
        return llm_vocab_load(v, g, &err) ? std::string("ok") : err;
    }
};

}  // namespace

TEST_CASE("loader: a hand-made SPM vocab works") {
    tiny_vocab t;
    llm_vocab v;
    std::string err;
    REQUIRE_MESSAGE(llm_vocab_load(v, t.g, &err), err);
    // "▁ab" is not a token: ▁ + ab (ab outscores a/b); no byte tokens, so 'c' falls back to <unk>
    CHECK(llm_tokenize(v, "ab", true, false) == std::vector<int32_t>{ 1, 6, 5 });
    CHECK(llm_tokenize(v, "c", false, false) == std::vector<int32_t>{ 6, 0 });
    CHECK(llm_detokenize(v, { 1, 6, 5 }, true) == " ab");
}

TEST_CASE("loader: every problem is a one-line error") {
    { tiny_vocab t("bert"); CHECK(t.load_err() == "unknown tokenizer model 'bert' (tokenizer.ggml.model; supported: llama, gpt2)"); }
    { tiny_vocab t; gguf_remove_key(t.g, "tokenizer.ggml.model"); CHECK(t.load_err() == "tokenizer.ggml.model is missing"); }
    { tiny_vocab t; gguf_set_val_u32(t.g, "tokenizer.ggml.model", 3);
      CHECK(t.load_err().find("tokenizer.ggml.model has type") == 0); }
    { tiny_vocab t; gguf_remove_key(t.g, "tokenizer.ggml.tokens"); CHECK(t.load_err() == "tokenizer.ggml.tokens is missing"); }
    { tiny_vocab t; const float s[3] = { 0, 0, 0 };
      gguf_set_arr_data(t.g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, s, 3);
      CHECK(t.load_err() == "tokenizer.ggml.scores has 3 elements, expected 7 (one per token)"); }
    { tiny_vocab t; const int64_t s[7] = {};
      gguf_set_arr_data(t.g, "tokenizer.ggml.token_type", GGUF_TYPE_INT64, s, 7);
      CHECK(t.load_err().find("tokenizer.ggml.token_type is an array of") == 0); }
    { tiny_vocab t; gguf_set_val_u32(t.g, "tokenizer.ggml.bos_token_id", 7);
      CHECK(t.load_err() == "tokenizer.ggml.bos_token_id = 7 is out of range (n_vocab = 7)"); }
    { tiny_vocab t; gguf_set_val_i32(t.g, "tokenizer.ggml.eos_token_id", -5);
      CHECK(t.load_err() == "tokenizer.ggml.eos_token_id = -5 is out of range (n_vocab = 7)"); }
    { tiny_vocab t; gguf_set_val_u32(t.g, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
      CHECK(t.load_err() == "ok"); }  // as stories260K.gguf: an unset pad id is only a warning
    { tiny_vocab t; gguf_set_val_str(t.g, "tokenizer.ggml.bos_token_id", "1");
      CHECK(t.load_err().find("tokenizer.ggml.bos_token_id has type") == 0); }
    { tiny_vocab t; t.set_tokens({ "<unk>", "<s>", "</s>", "a", "b", "a", "c" });
      CHECK(t.load_err() == "tokenizer.ggml.tokens: token 5 'a' duplicates token 3"); }
    { tiny_vocab t("gpt2"); CHECK(t.load_err() == "tokenizer.ggml.merges is missing (required for a gpt2 tokenizer)"); }
    { tiny_vocab t("gpt2"); const char * m[2] = { "a b", "a zz" };
      gguf_set_arr_str(t.g, "tokenizer.ggml.merges", m, 2);
      CHECK(t.load_err() == "tokenizer.ggml.merges[1] 'a zz' refers to unknown token 'zz'"); }
    { tiny_vocab t("gpt2"); const char * m[1] = { "ab" };
      gguf_set_arr_str(t.g, "tokenizer.ggml.merges", m, 1);
      CHECK(t.load_err() == "tokenizer.ggml.merges[0] 'ab' is not two tokens separated by a space"); }
    { tiny_vocab t("gpt2"); const char * m[1] = { "a b" };
      gguf_set_arr_str(t.g, "tokenizer.ggml.merges", m, 1);
      gguf_set_val_str(t.g, "tokenizer.ggml.pre", "qwen9");
      CHECK(t.load_err().find("unknown pre-tokenizer 'qwen9'") == 0);
      gguf_set_val_str(t.g, "tokenizer.ggml.pre", "llama-bpe");
      gguf_set_val_u32(t.g, "tokenizer.ggml.bos_token_id", 1);
      gguf_set_val_u32(t.g, "tokenizer.ggml.eos_token_id", 2);
      llm_vocab v;
      std::string err;
      REQUIRE_MESSAGE(llm_vocab_load(v, t.g, &err), err);
      CHECK(llm_tokenize(v, "ab", false, false) == std::vector<int32_t>{ 5 });
      CHECK(llm_tokenize(v, "ba", false, false) == std::vector<int32_t>{ 4, 3 }); }
}

TEST_CASE("pre-tokenizer splits") {
    const auto join = [](const std::vector<std::string> & w) {
        std::string s;
        for (const std::string & x : w) s += "[" + x + "]";
        return s;
    };
    // byte-level: ' ' -> Ġ, '\n' -> Ċ
    CHECK(join(unicode_split_llama3("Hello world's 12345 !!\n\n  x")) ==
          "[Hello][Ġworld]['s][Ġ][123][45][Ġ!!ĊĊ][Ġ][Ġx]");
    CHECK(join(unicode_split_gpt2("Hello world's 12345 !!  x")) == "[Hello][Ġworld]['s][Ġ12345][Ġ!!][Ġ][Ġx]");
    CHECK(join(unicode_split_default("a+b=12345")) == "[a][+][b][=][123][45]");
    CHECK(unicode_cpt_class('a') == UNICODE_CLASS_LETTER);
    CHECK(unicode_cpt_class(0x4E00) == UNICODE_CLASS_LETTER);
    CHECK(unicode_cpt_class(0x0661) == UNICODE_CLASS_NUMBER);
    CHECK(unicode_cpt_class(0x0378) == UNICODE_CLASS_UNDEFINED);
    CHECK(unicode_cpt_is_whitespace(0x3000));
    CHECK(!unicode_cpt_is_whitespace(0x200B));
}

TEST_CASE("random bytes: no crash, valid ids, SPM bytes come back") {
    const llm_vocab * s = shared_vocab("models/ggml-vocab-llama-spm.gguf");
    const llm_vocab * b = shared_vocab("models/ggml-vocab-llama-bpe.gguf");
    if (!s || !b) return;
    std::mt19937 rng(42);
    for (int iter = 0; iter < 200; ++iter) {
        std::string t(rng() % 64, '\0');
        for (char & c : t) {
            c = (char) (iter % 2 ? rng() % 256 : " a\n\xC3\xA9\xF0\x9F<|>s"[rng() % 11]);
        }
        for (const llm_vocab * v : { s, b }) {
            for (bool special : { false, true }) {
                const std::vector<int32_t> ids = llm_tokenize(*v, t, true, special);
                for (int32_t id : ids) {
                    REQUIRE(v->valid_id(id));
                }
                llm_detok_stream st(*v);
                std::string out;
                for (int32_t id : ids) out += st.push(id);
                out += st.flush();
                std::string rest = out, valid;
                llm_utf8_take_complete(rest, valid);
                CHECK(valid == out);  // the stream only ever emits valid UTF-8
            }
        }
        if (t.find(' ') == std::string::npos) {  // no escaped space for a lead byte to swallow
            CHECK(llm_detokenize(*s, llm_tokenize(*s, t, false, false)) == t);
        }
    }
}
