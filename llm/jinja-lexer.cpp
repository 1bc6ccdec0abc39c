// jinja-lexer.cpp - Jinja template text -> tokens, with jinja2's whitespace control as HF transformers sets it
// up: trim_blocks (the first newline after a block or comment tag is dropped), lstrip_blocks (spaces and tabs
// from the start of a line to a block or comment tag are dropped), "-" / "+" on a tag, and
// keep_trailing_newline=False.
#include "jinja-impl.h"

#include <cstring>

void jinja_fail(uint32_t pos, const std::string & msg) { throw jinja_error(pos, msg); }

jinja_source jinja_source_make(const std::string & raw) {
    jinja_source src;
    src.text.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '\r') {
            src.text += '\n';
            if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
        } else {
            src.text += raw[i];
        }
    }
    if (!src.text.empty() && src.text.back() == '\n') src.text.pop_back();
    src.line_starts.push_back(0);
    for (size_t i = 0; i < src.text.size(); ++i) {
        if (src.text[i] == '\n') src.line_starts.push_back((uint32_t)i + 1);
    }
    return src;
}

std::string jinja_source_where(const jinja_source & src, uint32_t pos) {
    pos = std::min<uint32_t>(pos, (uint32_t)src.text.size());
    size_t line = 0;
    size_t lo = 0, hi = src.line_starts.size();
    while (hi - lo > 1) { // last line start <= pos
        const size_t mid = (lo + hi) / 2;
        if (src.line_starts[mid] <= pos)
            lo = mid;
        else
            hi = mid;
    }
    line = lo;
    const size_t col =
        jinja_utf8_length(std::string_view(src.text).substr(src.line_starts[line], pos - src.line_starts[line]));
    return std::to_string(line + 1) + ":" + std::to_string(col + 1);
}

namespace {

struct lexer {
    const std::string & s;
    std::vector<jinja_token> & out;
    size_t n;

    // \s of Python's re on str patterns: Unicode whitespace
    size_t space_len(size_t p) const {
        if (p >= n) return 0;
        const unsigned char c = (unsigned char)s[p];
        if (c < 0x80) return (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
        size_t q = p;
        const std::u32string one = jinja_utf8_decode(std::string_view(s).substr(p, 4));
        if (one.empty() || !jinja_is_space(one[0])) return 0;
        std::string enc;
        jinja_utf8_append(enc, one[0]);
        q += enc.size();
        return q - p;
    }
    size_t skip_space(size_t p) const {
        for (size_t k; (k = space_len(p)) > 0;)
            p += k;
        return p;
    }
    bool at(size_t p, const char * lit) const {
        const size_t k = strlen(lit);
        return p + k <= n && s.compare(p, k, lit) == 0;
    }
    void emit_text(std::string text, uint32_t pos) {
        if (text.empty()) return;
        jinja_token t;
        t.type = JINJA_T_TEXT;
        t.pos = pos;
        t.s = std::move(text);
        out.push_back(std::move(t));
    }
    void emit(jinja_tok type, size_t pos, std::string v = {}) {
        jinja_token t;
        t.type = type;
        t.pos = (uint32_t)pos;
        t.s = std::move(v);
        out.push_back(std::move(t));
    }

    // the text before a tag, after "-" (strip all whitespace) or lstrip_blocks (spaces/tabs after the last
    // newline, or from the start when the previous match ended a line)
    static void strip_before(std::string & text, char sign, bool is_var, bool line_starting) {
        if (sign == '-') {
            const std::u32string u = jinja_utf8_decode(text);
            size_t e = u.size();
            while (e > 0 && jinja_is_space(u[e - 1]))
                --e;
            text = jinja_utf8_encode(std::u32string_view(u).substr(0, e));
        } else if (sign != '+' && !is_var) {
            const size_t nl = text.rfind('\n');
            const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
            if (l_pos > 0 || line_starting) {
                bool only_blank = true;
                for (size_t k = l_pos; k < text.size(); ++k) {
                    if (text[k] != ' ' && text[k] != '\t') {
                        only_blank = false;
                        break;
                    }
                }
                if (only_blank) text.resize(l_pos);
            }
        }
    }

    // {% raw %} at p (just after "{%" and its sign)? returns the end of the opening tag or 0
    size_t raw_begin(size_t p) const {
        size_t q = skip_space(p);
        if (!at(q, "raw")) return 0;
        q = skip_space(q + 3);
        if (at(q, "-%}")) return skip_space(q + 3);
        if (at(q, "%}")) return q + 2;
        return 0;
    }

    // a string literal's contents as Python's unicode-escape decoding sees them
    static std::string unescape(std::string_view body, uint32_t pos) {
        std::string r;
        r.reserve(body.size());
        for (size_t k = 0; k < body.size(); ++k) {
            const char c = body[k];
            if (c != '\\' || k + 1 >= body.size()) {
                r += c;
                continue;
            }
            const char e = body[++k];
            auto hex = [&](int digits) {
                uint32_t v = 0;
                for (int d = 0; d < digits; ++d) {
                    if (k + 1 >= body.size() || !isxdigit((unsigned char)body[k + 1])) {
                        jinja_fail(pos, "syntax error: truncated \\" + std::string(1, e) + " escape in a string");
                    }
                    const char h = body[++k];
                    v = v * 16 + (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
                }
                if (v > 0x10FFFF) jinja_fail(pos, "syntax error: illegal Unicode character in a string escape");
                jinja_utf8_append(r, v);
            };
            switch (e) {
                case '\n':
                    break; // line continuation
                case '\\':
                    r += '\\';
                    break;
                case '\'':
                    r += '\'';
                    break;
                case '"':
                    r += '"';
                    break;
                case 'a':
                    r += '\a';
                    break;
                case 'b':
                    r += '\b';
                    break;
                case 'f':
                    r += '\f';
                    break;
                case 'n':
                    r += '\n';
                    break;
                case 'r':
                    r += '\r';
                    break;
                case 't':
                    r += '\t';
                    break;
                case 'v':
                    r += '\v';
                    break;
                case 'x':
                    hex(2);
                    break;
                case 'u':
                    hex(4);
                    break;
                case 'U':
                    hex(8);
                    break;
                case 'N':
                    jinja_fail(pos, "unsupported: \\N{...} escape in a string");
                default:
                    if (e >= '0' && e <= '7') {
                        uint32_t v = (uint32_t)(e - '0');
                        for (int d = 0; d < 2 && k + 1 < body.size() && body[k + 1] >= '0' && body[k + 1] <= '7'; ++d) {
                            v = v * 8 + (uint32_t)(body[++k] - '0');
                        }
                        jinja_utf8_append(r, v);
                    } else {
                        r += '\\';
                        r += e;
                    }
            }
        }
        return r;
    }

    // digits with optional single underscores between them: (\d+_)*\d+ ; returns end or p if none
    size_t digits(size_t p, int base) const {
        auto ok = [&](char c) {
            if (base == 16) return (bool)isxdigit((unsigned char)c);
            if (base == 8) return c >= '0' && c <= '7';
            if (base == 2) return c == '0' || c == '1';
            return (bool)isdigit((unsigned char)c);
        };
        size_t q = p;
        while (q < n && ok(s[q])) {
            ++q;
            if (q + 1 < n && s[q] == '_' && ok(s[q + 1])) ++q;
        }
        return q;
    }

    // one token of an expression at p; returns the position after it
    size_t expr_token(size_t p, std::vector<char> & stack) {
        const char c = s[p];
        // float: (?<!\.)(\d+_)*\d+((\.(\d+_)*\d+)?e[+\-]?(\d+_)*\d+|\.(\d+_)*\d+)
        if (isdigit((unsigned char)c) && !(p > 0 && s[p - 1] == '.')) {
            const size_t ie = digits(p, 10);
            size_t fe = 0;
            size_t q = ie;
            if (q < n && s[q] == '.' && q + 1 < n && isdigit((unsigned char)s[q + 1])) q = digits(q + 1, 10), fe = q;
            if (q < n && (s[q] == 'e' || s[q] == 'E')) {
                size_t r = q + 1;
                if (r < n && (s[r] == '+' || s[r] == '-')) ++r;
                if (r < n && isdigit((unsigned char)s[r])) fe = digits(r, 10);
            }
            if (fe) {
                std::string lit;
                for (size_t k = p; k < fe; ++k)
                    if (s[k] != '_') lit += s[k];
                jinja_token t;
                t.type = JINJA_T_FLOAT;
                t.pos = (uint32_t)p;
                t.f = strtod(lit.c_str(), nullptr);
                t.s = lit;
                out.push_back(std::move(t));
                return fe;
            }
        }
        // integer: 0b.. 0o.. 0x.. [1-9](_?\d)* 0(_?0)*
        if (isdigit((unsigned char)c)) {
            int base = 10;
            size_t q = p, e;
            if (c == '0' && p + 1 < n && strchr("bBoOxX", s[p + 1]) && s[p + 1] != 0) {
                base = (s[p + 1] == 'b' || s[p + 1] == 'B') ? 2 : (s[p + 1] == 'o' || s[p + 1] == 'O') ? 8 : 16;
                q = p + 2;
                if (q < n && s[q] == '_') ++q;
                e = digits(q, base);
                if (e == q) jinja_fail((uint32_t)p, "syntax error: invalid integer literal");
            } else if (c == '0') {
                e = p + 1;
                while (e < n && (s[e] == '0' || (s[e] == '_' && e + 1 < n && s[e + 1] == '0')))
                    ++e;
            } else {
                e = digits(p, 10);
            }
            uint64_t v = 0;
            for (size_t k = q; k < e; ++k) {
                if (s[k] == '_') continue;
                const uint64_t d =
                    isdigit((unsigned char)s[k]) ? (uint64_t)(s[k] - '0') : (uint64_t)(tolower(s[k]) - 'a' + 10);
                if (v > (uint64_t)(INT64_MAX - d) / (uint64_t)base)
                    jinja_fail((uint32_t)p, "unsupported: integer literal too large");
                v = v * (uint64_t)base + d;
            }
            jinja_token t;
            t.type = JINJA_T_INT;
            t.pos = (uint32_t)p;
            t.i = (int64_t)v;
            out.push_back(std::move(t));
            return e;
        }
        if (isalpha((unsigned char)c) || c == '_') {
            size_t e = p;
            while (e < n && (isalnum((unsigned char)s[e]) || s[e] == '_'))
                ++e;
            emit(JINJA_T_NAME, p, s.substr(p, e - p));
            return e;
        }
        if (c == '\'' || c == '"') {
            size_t e = p + 1;
            while (e < n && s[e] != c)
                e += (s[e] == '\\') ? 2 : 1;
            if (e >= n) jinja_fail((uint32_t)p, "syntax error: unterminated string");
            jinja_token t;
            t.type = JINJA_T_STRING;
            t.pos = (uint32_t)p;
            t.s = unescape(std::string_view(s).substr(p + 1, e - p - 1), (uint32_t)p);
            out.push_back(std::move(t));
            return e + 1;
        }
        static const char * ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                     "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
        for (const char * op : ops) {
            if (!at(p, op)) continue;
            const char o = op[0];
            if (op[1] == 0 && (o == '(' || o == '[' || o == '{')) {
                stack.push_back(o == '(' ? ')' : o == '[' ? ']' : '}');
            } else if (op[1] == 0 && (o == ')' || o == ']' || o == '}')) {
                if (stack.empty()) jinja_fail((uint32_t)p, std::string("syntax error: unexpected '") + o + "'");
                if (stack.back() != o) {
                    jinja_fail((uint32_t)p,
                               std::string("syntax error: unexpected '") + o + "', expected '" + stack.back() + "'");
                }
                stack.pop_back();
            }
            emit(JINJA_T_OP, p, op);
            return p + strlen(op);
        }
        const std::u32string u = jinja_utf8_decode(std::string_view(s).substr(p, 4));
        std::string ch;
        jinja_utf8_append(ch, u.empty() ? (char32_t)(unsigned char)c : u[0]);
        jinja_fail((uint32_t)p, "syntax error: unexpected char '" + ch + "'");
    }

    void run() {
        size_t p = 0;
        bool line_starting = true;
        while (p < n) {
            // the next tag opener
            size_t open = p;
            for (;; ++open) {
                open = s.find('{', open);
                if (open == std::string::npos || open + 1 >= n) {
                    open = std::string::npos;
                    break;
                }
                const char k = s[open + 1];
                if (k == '{' || k == '%' || k == '#') break;
            }
            if (open == std::string::npos) {
                emit_text(s.substr(p), (uint32_t)p);
                break;
            }
            const char kind = s[open + 1];
            size_t q = open + 2;
            char sign = 0;
            if (q < n && (s[q] == '-' || s[q] == '+')) sign = s[q++];
            std::string text = s.substr(p, open - p);
            strip_before(text, sign, kind == '{', line_starting);
            emit_text(std::move(text), (uint32_t)p);

            if (kind == '#') {
                const size_t e = s.find("#}", q);
                if (e == std::string::npos) jinja_fail((uint32_t)open, "syntax error: missing end of comment tag");
                const char csign = (e > q && (s[e - 1] == '-' || s[e - 1] == '+')) ? s[e - 1] : 0;
                size_t end = e + 2;
                if (csign == '-')
                    end = skip_space(end);
                else if (csign != '+' && end < n && s[end] == '\n')
                    ++end;
                line_starting = end > e + 2 && s[end - 1] == '\n';
                p = end;
                continue;
            }

            if (kind == '%') {
                if (const size_t rb = raw_begin(q)) {
                    line_starting = rb > 0 && s[rb - 1] == '\n';
                    // {% endraw %} with its own sign and ending
                    size_t f = rb;
                    for (;; f += 2) {
                        f = s.find("{%", f);
                        if (f == std::string::npos)
                            jinja_fail((uint32_t)open, "syntax error: missing end of raw directive");
                        size_t r = f + 2;
                        char rsign = 0;
                        if (r < n && (s[r] == '-' || s[r] == '+')) rsign = s[r++];
                        r = skip_space(r);
                        if (!at(r, "endraw")) continue;
                        r = skip_space(r + 6);
                        size_t end;
                        if (at(r, "+%}"))
                            end = r + 3;
                        else if (at(r, "-%}"))
                            end = skip_space(r + 3);
                        else if (at(r, "%}"))
                            end = (r + 2 < n && s[r + 2] == '\n') ? r + 3 : r + 2;
                        else
                            continue;
                        std::string body = s.substr(rb, f - rb);
                        strip_before(body, rsign, false, line_starting);
                        emit_text(std::move(body), (uint32_t)rb);
                        line_starting = end > 0 && s[end - 1] == '\n';
                        p = end;
                        break;
                    }
                    continue;
                }
            }

            emit(kind == '{' ? JINJA_T_VAR_BEGIN : JINJA_T_BLOCK_BEGIN, open);
            std::vector<char> stack;
            for (;;) {
                q = skip_space(q);
                if (q >= n) {
                    jinja_fail((uint32_t)open, std::string("syntax error: unexpected end of template, missing '") +
                                                   (kind == '{' ? "}}" : "%}") + "'");
                }
                if (stack.empty()) {
                    size_t end = 0;
                    if (kind == '{') {
                        if (at(q, "-}}"))
                            end = skip_space(q + 3);
                        else if (at(q, "}}"))
                            end = q + 2;
                    } else {
                        if (at(q, "+%}"))
                            end = q + 3;
                        else if (at(q, "-%}"))
                            end = skip_space(q + 3);
                        else if (at(q, "%}"))
                            end = (q + 2 < n && s[q + 2] == '\n') ? q + 3 : q + 2;
                    }
                    if (end) {
                        emit(kind == '{' ? JINJA_T_VAR_END : JINJA_T_BLOCK_END, q);
                        line_starting = s[end - 1] == '\n';
                        p = end;
                        break;
                    }
                }
                q = expr_token(q, stack);
            }
        }
        emit(JINJA_T_EOF, n);
    }
};

} // namespace

std::vector<jinja_token> jinja_lex(const jinja_source & src) {
    std::vector<jinja_token> toks;
    lexer lx{src.text, toks, src.text.size()};
    lx.run();
    return toks;
}
