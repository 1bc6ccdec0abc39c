// vocab-spm.cpp - SentencePiece-style (Llama 2) tokenization of one raw text fragment, as llama.cpp's
// llm_tokenizer_spm: split into UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is
// the highest-scoring token (ties: leftmost), then emit each symbol's token or its bytes as <0xXX> tokens.
// The caller has already replaced ' ' by U+2581 and added the space prefix.
#include "vocab.h"

#include "unicode.h"

#include <algorithm>
#include <queue>

namespace {

struct spm_symbol {
    int32_t prev;
    int32_t next;
    size_t  offs;  // into the text
    size_t  n;     // bytes; 0 once merged into its left neighbour
};

struct spm_bigram {
    int32_t left;
    int32_t right;
    float   score;
    size_t  size;
};

struct spm_bigram_less {  // priority: higher score first, then the leftmost
    bool operator()(const spm_bigram & l, const spm_bigram & r) const {
        return l.score < r.score || (l.score == r.score && l.left > r.left);
    }
};

struct spm_session {
    const llm_vocab &       vocab;
    std::string_view        text;
    std::vector<spm_symbol> symbols;
    std::priority_queue<spm_bigram, std::vector<spm_bigram>, spm_bigram_less> queue;

    void try_add_bigram(int32_t left, int32_t right) {
        if (left == -1 || right == -1) {
            return;
        }
        const std::string_view s = text.substr(symbols[left].offs, symbols[left].n + symbols[right].n);
        const int32_t id = vocab.find_token(s);
        if (id < 0) {
            return;
        }
        queue.push({ left, right, vocab.tokens[id].score, s.size() });
    }

    void tokenize(std::vector<int32_t> & out) {
        for (size_t offs = 0; offs < text.size();) {
            const size_t n = std::min(unicode_len_utf8(text[offs]), text.size() - offs);
            const int32_t i = (int32_t) symbols.size();
            symbols.push_back({ i - 1, offs + n == text.size() ? -1 : i + 1, offs, n });
            offs += n;
        }
        for (int32_t i = 1; i < (int32_t) symbols.size(); ++i) {
            try_add_bigram(i - 1, i);
        }
        while (!queue.empty()) {
            const spm_bigram b = queue.top();
            queue.pop();
            spm_symbol & l = symbols[b.left];
            spm_symbol & r = symbols[b.right];
            if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) {
                continue;  // stale: one side was merged since
            }
            l.n += r.n;
            r.n = 0;
            l.next = r.next;
            if (r.next >= 0) {
                symbols[r.next].prev = b.left;
            }
            try_add_bigram(l.prev, b.left);
            try_add_bigram(b.left, l.next);
        }
        // Every merged symbol is a token (only token bigrams are queued), so llama.cpp's rev_merge
        // re-segmentation never applies: a symbol is either a token or a single character -> bytes.
        for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
            const spm_symbol &     sym = symbols[i];
            const std::string_view s   = text.substr(sym.offs, sym.n);
            const int32_t          id  = vocab.find_token(s);
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
            for (const char c : s) {
                const int32_t bid = llm_byte_to_token(vocab, (uint8_t) c);
                if (bid >= 0) {
                    out.push_back(bid);
                }
            }
        }
    }
};

}  // namespace

void llm_tokenize_spm(const llm_vocab & vocab, std::string_view text, std::vector<int32_t> & out) {
    spm_session session{ vocab, text, {}, {} };
    session.symbols.reserve(text.size());
    session.tokenize(out);
}
