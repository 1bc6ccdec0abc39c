// vocab-bpe.cpp - byte-level BPE (Llama 3) tokenization of one raw text fragment, as llama.cpp's
// llm_tokenizer_bpe: pre-tokenize into words (unicode_split_*, already byte-level encoded), then within
// each word repeatedly merge the adjacent pair with the lowest merge rank (ties: leftmost).
#include "vocab.h"

#include "unicode.h"

#include <algorithm>
#include <queue>

namespace {

struct bpe_symbol {
    int32_t prev;
    int32_t next;
    size_t  offs;  // into the word
    size_t  n;     // bytes; 0 once merged into its left neighbour
};

struct bpe_bigram {
    int32_t left;
    int32_t right;
    int32_t rank;
    size_t  size;
};

struct bpe_bigram_greater {  // priority: lowest rank first, then the leftmost
    bool operator()(const bpe_bigram & l, const bpe_bigram & r) const {
        return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
    }
};

struct bpe_session {
    const llm_vocab &       vocab;
    std::vector<bpe_symbol> symbols;
    std::priority_queue<bpe_bigram, std::vector<bpe_bigram>, bpe_bigram_greater> queue;
    std::string             key;  // "left right", reused

    void try_add_bigram(std::string_view word, int32_t left, int32_t right) {
        if (left == -1 || right == -1) {
            return;
        }
        key.assign(word.substr(symbols[left].offs, symbols[left].n));
        key += ' ';
        key.append(word.substr(symbols[right].offs, symbols[right].n));
        const auto it = vocab.merge_rank.find(std::string_view(key));
        if (it == vocab.merge_rank.end()) {
            return;
        }
        queue.push({ left, right, it->second, symbols[left].n + symbols[right].n });
    }

    void tokenize_word(std::string_view word, std::vector<int32_t> & out) {
        if (vocab.ignore_merges) {
            const int32_t id = vocab.find_token(word);
            if (id >= 0) {
                out.push_back(id);
                return;
            }
        }
        symbols.clear();
        queue = {};
        for (size_t offs = 0; offs < word.size();) {
            const size_t n = std::min(unicode_len_utf8(word[offs]), word.size() - offs);
            const int32_t i = (int32_t) symbols.size();
            symbols.push_back({ i - 1, offs + n == word.size() ? -1 : i + 1, offs, n });
            offs += n;
        }
        for (int32_t i = 1; i < (int32_t) symbols.size(); ++i) {
            try_add_bigram(word, i - 1, i);
        }
        while (!queue.empty()) {
            const bpe_bigram b = queue.top();
            queue.pop();
            bpe_symbol & l = symbols[b.left];
            bpe_symbol & r = symbols[b.right];
            // symbols only grow rightwards, so an unchanged total size means both sides are unchanged
            if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) {
                continue;
            }
            l.n += r.n;
            r.n = 0;
            l.next = r.next;
            if (r.next >= 0) {
                symbols[r.next].prev = b.left;
            }
            try_add_bigram(word, l.prev, b.left);
            try_add_bigram(word, b.left, l.next);
        }
        for (const bpe_symbol & sym : symbols) {
            if (sym.n == 0) {
                continue;
            }
            const std::string_view s  = word.substr(sym.offs, sym.n);
            const int32_t          id = vocab.find_token(s);
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
            // A merge result that is not a token (only in a malformed vocab). llama.cpp looks up each byte of
            // the byte-level string; we look up each byte-level character, i.e. each original byte.
            std::vector<uint32_t> cpts = unicode_cpts_from_utf8(s);
            for (const uint32_t c : cpts) {
                const int b = unicode_utf8_to_byte(c);
                if (b >= 0 && vocab.byte_ids[b] >= 0) {
                    out.push_back(vocab.byte_ids[b]);
                }
            }
        }
    }
};

}  // namespace

void llm_tokenize_bpe(const llm_vocab & vocab, std::string_view text, std::vector<int32_t> & out) {
    std::vector<std::string> words;
    switch (vocab.pre) {
        case LLM_VOCAB_PRE_LLAMA3:  words = unicode_split_llama3(text); break;
        case LLM_VOCAB_PRE_GPT2:    words = unicode_split_gpt2(text); break;
        case LLM_VOCAB_PRE_DEFAULT: words = unicode_split_default(text); break;
    }
    bpe_session session{ vocab, {}, {}, {} };
    for (const std::string & w : words) {
        session.tokenize_word(w, out);
    }
}
