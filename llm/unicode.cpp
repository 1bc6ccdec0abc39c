// unicode.cpp - UTF-8, category classes, GPT-2 byte mapping and the hand-written pre-tokenizer splitters.
// The splitters follow llama.cpp's unicode_regex_split_custom_{llama3,gpt2} step for step, so that the
// words (and hence the tokens) are identical to llama.cpp's.
#include "unicode.h"

#include <algorithm>
#include <array>

//
// classes
//

namespace {

// flat table built once from the generated runs: [0x110000] class per code point
const std::vector<uint8_t> & class_table() {
    static const std::vector<uint8_t> table = [] {
        std::vector<uint8_t> t(0x110000, UNICODE_CLASS_UNDEFINED);
        for (size_t i = 0; i < unicode_category_runs_n; ++i) {
            const uint32_t first = unicode_category_runs[i] >> 3;
            const uint32_t last  = i + 1 < unicode_category_runs_n ? (unicode_category_runs[i + 1] >> 3) : 0x110000;
            std::fill(t.begin() + first, t.begin() + last, (uint8_t) (unicode_category_runs[i] & 7));
        }
        return t;
    }();
    return table;
}

}  // namespace

unicode_class unicode_cpt_class(uint32_t cpt) {
    return cpt < 0x110000 ? (unicode_class) class_table()[cpt] : UNICODE_CLASS_UNDEFINED;
}

bool unicode_cpt_is_whitespace(uint32_t cpt) {
    // PropList.txt White_Space
    return (cpt >= 0x09 && cpt <= 0x0D) || cpt == 0x20 || cpt == 0x85 || cpt == 0xA0 || cpt == 0x1680 ||
           (cpt >= 0x2000 && cpt <= 0x200A) || cpt == 0x2028 || cpt == 0x2029 || cpt == 0x202F || cpt == 0x205F ||
           cpt == 0x3000;
}

//
// UTF-8
//

size_t unicode_len_utf8(char c) {
    static const uint8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lookup[(uint8_t) c >> 4];
}

bool unicode_cpt_from_utf8(std::string_view s, size_t & offs, uint32_t & cpt) {
    const size_t n = s.size();
    const auto b = [&](size_t i) { return (uint8_t) s[offs + i]; };
    const auto cont = [&](size_t i) { return offs + i < n && (b(i) & 0xC0) == 0x80; };
    const uint8_t b0 = b(0);
    if (!(b0 & 0x80)) {
        cpt = b0;
        offs += 1;
        return true;
    }
    if (!(b0 & 0x40)) {
        return false;  // stray continuation byte
    }
    if (!(b0 & 0x20)) {
        if (!cont(1)) {
            return false;
        }
        cpt = ((b0 & 0x1F) << 6) | (b(1) & 0x3F);
        offs += 2;
        return true;
    }
    if (!(b0 & 0x10)) {
        if (!cont(1) || !cont(2)) {
            return false;
        }
        cpt = ((b0 & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
        offs += 3;
        return true;
    }
    if (!(b0 & 0x08)) {
        if (!cont(1) || !cont(2) || !cont(3)) {
            return false;
        }
        const uint32_t c = ((b0 & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
        if (c > 0x10FFFF) {
            return false;  // llama.cpp would throw later when re-encoding; treat as invalid instead
        }
        cpt = c;
        offs += 4;
        return true;
    }
    return false;
}

std::vector<uint32_t> unicode_cpts_from_utf8(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    size_t offs = 0;
    while (offs < s.size()) {
        uint32_t cpt;
        if (unicode_cpt_from_utf8(s, offs, cpt)) {
            out.push_back(cpt);
        } else {
            out.push_back(0xFFFD);  // as llama.cpp: one replacement character per invalid byte
            offs++;
        }
    }
    return out;
}

void unicode_cpt_append_utf8(std::string & out, uint32_t cpt) {
    if (cpt <= 0x7F) {
        out.push_back((char) cpt);
    } else if (cpt <= 0x7FF) {
        out.push_back((char) (0xC0 | (cpt >> 6)));
        out.push_back((char) (0x80 | (cpt & 0x3F)));
    } else if (cpt <= 0xFFFF) {
        out.push_back((char) (0xE0 | (cpt >> 12)));
        out.push_back((char) (0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back((char) (0x80 | (cpt & 0x3F)));
    } else {
        out.push_back((char) (0xF0 | ((cpt >> 18) & 0x07)));
        out.push_back((char) (0x80 | ((cpt >> 12) & 0x3F)));
        out.push_back((char) (0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back((char) (0x80 | (cpt & 0x3F)));
    }
}

std::string unicode_cpt_to_utf8(uint32_t cpt) {
    std::string s;
    unicode_cpt_append_utf8(s, cpt);
    return s;
}

//
// GPT-2 byte <-> unicode
//

namespace {

struct byte_map {
    std::array<std::string, 256> to_utf8;
    std::array<int16_t, 512>     from_cpt;  // all mapped code points are < 0x144
    byte_map() {
        from_cpt.fill(-1);
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const uint32_t cpt = printable ? (uint32_t) b : (uint32_t) (256 + n++);
            to_utf8[b]    = unicode_cpt_to_utf8(cpt);
            from_cpt[cpt] = (int16_t) b;
        }
    }
};

const byte_map & get_byte_map() {
    static const byte_map m;
    return m;
}

}  // namespace

const std::string & unicode_byte_to_utf8(uint8_t b) { return get_byte_map().to_utf8[b]; }

int unicode_utf8_to_byte(uint32_t cpt) { return cpt < 512 ? get_byte_map().from_cpt[cpt] : -1; }

//
// pre-tokenizers
//

namespace {

constexpr uint32_t OUT_OF_RANGE = 0xFFFFFFFF;

enum : uint8_t { F_VALID = 1, F_LETTER = 2, F_NUMBER = 4, F_WS = 8, F_PUNCT_DEFAULT = 16 };

uint8_t cpt_flags(uint32_t cpt) {
    const unicode_class c = unicode_cpt_class(cpt);
    uint8_t f = F_VALID;
    f |= c == UNICODE_CLASS_LETTER ? F_LETTER : 0;
    f |= c == UNICODE_CLASS_NUMBER ? F_NUMBER : 0;
    f |= unicode_cpt_is_whitespace(cpt) ? F_WS : 0;
    // [\p{P}\$\+<=>\^~\|] of the default pre-tokenizer
    const bool extra = cpt == '$' || cpt == '+' || cpt == '<' || cpt == '=' || cpt == '>' || cpt == '^' ||
                       cpt == '~' || cpt == '|';
    f |= (c == UNICODE_CLASS_PUNCTUATION || extra) ? F_PUNCT_DEFAULT : 0;
    return f;
}

// only ASCII letters matter after an apostrophe ('s 't 're 've 'm 'll 'd); no non-ASCII code point has a
// single-code-point lowercase among those letters, so ASCII folding equals llama.cpp's unicode_tolower here
uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// the text as code points + flags; splitters produce piece lengths (in code points)
struct cpt_text {
    std::vector<uint32_t> cpts;
    std::vector<uint8_t>  flags;
    explicit cpt_text(std::string_view s) : cpts(unicode_cpts_from_utf8(s)) {
        flags.resize(cpts.size());
        for (size_t i = 0; i < cpts.size(); ++i) {
            flags[i] = cpt_flags(cpts[i]);
        }
    }
};

// a window [ini, end) of the text, with llama.cpp's out-of-range conventions
struct cpt_window {
    const cpt_text & t;
    size_t ini, end;
    size_t prev_end;
    std::vector<size_t> & out;
    uint32_t cpt(size_t pos) const { return pos >= ini && pos < end ? t.cpts[pos] : OUT_OF_RANGE; }
    uint8_t  flags(size_t pos) const { return pos >= ini && pos < end ? t.flags[pos] : 0; }
    size_t add(size_t pos) {
        const size_t len = pos - prev_end;
        if (len > 0) {
            out.push_back(len);
        }
        prev_end = pos;
        return len;
    }
};

// returns true if a contraction ('s 't 'm 'd 're 've 'll) starts at pos; n receives its length
bool match_contraction(const cpt_window & w, size_t pos, bool fold_case, size_t & n) {
    if (w.cpt(pos) != '\'' || pos + 1 >= w.end) {
        return false;
    }
    const auto lower = [&](uint32_t c) { return fold_case ? ascii_lower(c) : c; };
    const uint32_t c1 = lower(w.cpt(pos + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        n = 2;
        return true;
    }
    if (pos + 2 < w.end) {
        const uint32_t c2 = lower(w.cpt(pos + 2));
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
            n = 3;
            return true;
        }
    }
    return false;
}

// trailing whitespace alternatives shared by both regexes; handles \s*[\r\n]+ only when with_newline
void match_whitespace(cpt_window & w, size_t & pos, bool with_newline) {
    size_t nws     = 0;
    size_t last_rn = 0;
    while (w.flags(pos + nws) & F_WS) {
        const uint32_t c = w.cpt(pos + nws);
        if (c == '\r' || c == '\n') {
            last_rn = pos + nws + 1;
        }
        nws++;
    }
    if (with_newline && last_rn > 0) {  // \s*[\r\n]+
        pos = last_rn;
        w.add(pos);
    } else if (nws > 1 && w.cpt(pos + nws) != OUT_OF_RANGE) {  // \s+(?!\S)
        pos += nws - 1;
        w.add(pos);
    } else if (nws > 0) {  // \s+
        pos += nws;
        w.add(pos);
    } else {  // no match: one code point on its own
        w.add(++pos);
    }
}

void split_llama3(const cpt_text & t, size_t ini, size_t end, std::vector<size_t> & out) {
    cpt_window w{ t, ini, end, ini, out };
    for (size_t pos = ini; pos < end;) {
        const uint32_t c = w.cpt(pos);
        const uint8_t  f = w.flags(pos);
        size_t n = 0;
        if (match_contraction(w, pos, true, n)) {  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
            pos += w.add(pos + n);
            continue;
        }
        if (!(c == '\r' || c == '\n' || (f & F_NUMBER))) {  // [^\r\n\p{L}\p{N}]?\p{L}+
            if ((f & F_LETTER) || (w.flags(pos + 1) & F_LETTER)) {
                pos++;
                while (w.flags(pos) & F_LETTER) {
                    pos++;
                }
                w.add(pos);
                continue;
            }
        }
        if (f & F_NUMBER) {  // \p{N}{1,3}
            size_t first = pos;
            while (w.flags(pos) & F_NUMBER) {
                if (++pos - first >= 3) {
                    w.add(pos);
                    first = pos;
                }
            }
            w.add(pos);
            continue;
        }
        uint8_t f2 = c == ' ' ? w.flags(pos + 1) : f;  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        if (!(f2 & (F_WS | F_LETTER | F_NUMBER)) && (f & F_VALID)) {
            pos += c == ' ';
            while (!(f2 & (F_WS | F_LETTER | F_NUMBER)) && (f2 & F_VALID)) {
                f2 = w.flags(++pos);
            }
            uint32_t c2 = w.cpt(pos);
            while (c2 == '\r' || c2 == '\n') {
                c2 = w.cpt(++pos);
            }
            w.add(pos);
            continue;
        }
        match_whitespace(w, pos, true);
    }
}

void split_gpt2(const cpt_text & t, size_t ini, size_t end, std::vector<size_t> & out) {
    cpt_window w{ t, ini, end, ini, out };
    for (size_t pos = ini; pos < end;) {
        const uint32_t c = w.cpt(pos);
        const uint8_t  f = w.flags(pos);
        size_t n = 0;
        if (match_contraction(w, pos, false, n)) {  // 's|'t|'re|'ve|'m|'ll|'d
            pos += w.add(pos + n);
            continue;
        }
        uint8_t f2 = c == ' ' ? w.flags(pos + 1) : f;
        bool matched = false;
        for (const uint8_t cls : { (uint8_t) F_LETTER, (uint8_t) F_NUMBER }) {  // ' ?\p{L}+' then ' ?\p{N}+'
            if (f2 & cls) {
                pos += c == ' ';
                while (f2 & cls) {
                    f2 = w.flags(++pos);
                }
                w.add(pos);
                matched = true;
                break;
            }
        }
        if (matched) {
            continue;
        }
        if (!(f2 & (F_WS | F_LETTER | F_NUMBER)) && (f2 & F_VALID)) {  // ' ?[^\s\p{L}\p{N}]+'
            pos += c == ' ';
            while (!(f2 & (F_WS | F_LETTER | F_NUMBER)) && (f2 & F_VALID)) {
                f2 = w.flags(++pos);
            }
            w.add(pos);
            continue;
        }
        match_whitespace(w, pos, false);
    }
}

// one regex X+ (or fixed-length run) over each piece: matches and the gaps between them become pieces
template <typename F>
std::vector<size_t> split_runs(const std::vector<size_t> & pieces, F && match_at) {
    std::vector<size_t> out;
    size_t start = 0;
    for (const size_t len : pieces) {
        const size_t end = start + len;
        size_t gap = start;
        for (size_t pos = start; pos < end;) {
            const size_t n = match_at(pos, end);
            if (n == 0) {
                pos++;
                continue;
            }
            if (pos > gap) {
                out.push_back(pos - gap);
            }
            out.push_back(n);
            pos += n;
            gap = pos;
        }
        if (end > gap) {
            out.push_back(end - gap);
        }
        start = end;
    }
    return out;
}

std::vector<std::string> encode_words(const cpt_text & t, const std::vector<size_t> & pieces) {
    std::vector<std::string> words;
    words.reserve(pieces.size());
    size_t start = 0;
    std::string utf8;
    for (const size_t len : pieces) {
        utf8.clear();
        for (size_t i = start; i < start + len; ++i) {
            unicode_cpt_append_utf8(utf8, t.cpts[i]);
        }
        std::string word;
        word.reserve(utf8.size() * 2);
        for (const char ch : utf8) {
            word += unicode_byte_to_utf8((uint8_t) ch);
        }
        words.push_back(std::move(word));
        start += len;
    }
    return words;
}

}  // namespace

std::vector<std::string> unicode_split_llama3(std::string_view text) {
    const cpt_text t(text);
    std::vector<size_t> pieces;
    split_llama3(t, 0, t.cpts.size(), pieces);
    return encode_words(t, pieces);
}

std::vector<std::string> unicode_split_gpt2(std::string_view text) {
    const cpt_text t(text);
    std::vector<size_t> pieces;
    split_gpt2(t, 0, t.cpts.size(), pieces);
    return encode_words(t, pieces);
}

std::vector<std::string> unicode_split_default(std::string_view text) {
    const cpt_text t(text);
    std::vector<size_t> pieces;
    if (!t.cpts.empty()) {
        pieces.push_back(t.cpts.size());
    }
    const auto run_of = [&](uint8_t flag) {
        return [&t, flag](size_t pos, size_t end) {
            size_t n = 0;
            while (pos + n < end && (t.flags[pos + n] & flag)) {
                n++;
            }
            return n;
        };
    };
    pieces = split_runs(pieces, run_of(F_PUNCT_DEFAULT));  // [\p{P}\$\+<=>\^~\|]+
    std::vector<size_t> next;
    size_t start = 0;
    for (const size_t len : pieces) {  // GPT-2 regex within each piece
        split_gpt2(t, start, start + len, next);
        start += len;
    }
    pieces = split_runs(next, run_of(F_NUMBER));  // \p{N}+
    pieces = split_runs(pieces, [&t](size_t pos, size_t end) -> size_t {  // [0-9][0-9][0-9]
        const auto digit = [&](size_t i) { return i < end && t.cpts[i] >= '0' && t.cpts[i] <= '9'; };
        return digit(pos) && digit(pos + 1) && digit(pos + 2) ? 3 : 0;
    });
    return encode_words(t, pieces);
}
