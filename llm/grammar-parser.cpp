// grammar-parser.cpp - GBNF text -> llm_grammar (see grammar.h): a recursive-descent parser over the text,
// repetitions expanded into helper rules, then checks (undefined rules, root, left recursion) and
// flattening into one element array. Also the reverse, llm_grammar_to_gbnf.
#include "grammar.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

//
// llm_grammar_class
//

bool llm_grammar_class::contains(uint32_t cpt) const {
    if (cpt < 128) return (ascii[cpt >> 6] >> (cpt & 63)) & 1;
    // first range whose hi >= cpt
    auto it = std::lower_bound(ranges.begin(), ranges.end(), cpt,
                               [](const std::pair<uint32_t, uint32_t> & r, uint32_t c) { return r.second < c; });
    return it != ranges.end() && it->first <= cpt;
}

bool llm_grammar_class::intersects(uint32_t lo, uint32_t hi) const {
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const std::pair<uint32_t, uint32_t> & r, uint32_t c) { return r.second < c; });
    return it != ranges.end() && it->first <= hi;
}

bool llm_grammar_class::covers(uint32_t lo, uint32_t hi) const {
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const std::pair<uint32_t, uint32_t> & r, uint32_t c) { return r.second < c; });
    return it != ranges.end() && it->first <= lo && it->second >= hi; // ranges are non-adjacent
}

namespace {

constexpr uint32_t MAX_CPT = 0x10FFFF;
constexpr int MAX_REPEAT = 10000; // {m,n} bounds above this are refused
constexpr uint32_t NO_MAX = UINT32_MAX;
using range_list = std::vector<std::pair<uint32_t, uint32_t>>;

range_list normalize(range_list r) {
    std::sort(r.begin(), r.end());
    range_list out;
    for (const auto & x : r) {
        if (!out.empty() && x.first <= out.back().second + 1) {
            out.back().second = std::max(out.back().second, x.second);
        } else {
            out.push_back(x);
        }
    }
    return out;
}

range_list complement(const range_list & r) { // r normalized
    range_list out;
    uint32_t next = 0;
    for (const auto & x : r) {
        if (x.first > next) out.push_back({next, x.first - 1});
        next = x.second + 1;
    }
    if (next <= MAX_CPT && (r.empty() || r.back().second < MAX_CPT)) out.push_back({next, MAX_CPT});
    return out;
}

struct parse_error {
    size_t offs; // SIZE_MAX: no position
    std::string msg;
};

struct build_rule {
    std::string name;   // "" for helpers until named
    std::string parent; // helpers: the rule they were made for
    std::vector<std::vector<llm_grammar_elem>> alts;
    bool defined = false;
    bool repeat = false;   // helper for an open repetition (x* / x+ / x{m,})
    size_t offs = 0;       // definition (helpers: the construct)
    size_t ref = SIZE_MAX; // first reference
};

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class gbnf_parser {
  public:
    explicit gbnf_parser(std::string_view s) : s_(s) {}

    std::shared_ptr<llm_grammar> run();
    void position(size_t offs, int32_t & line, int32_t & col) const;

  private:
    std::string_view s_;
    size_t p_ = 0;
    std::vector<build_rule> rules_;
    std::map<std::string, uint32_t, std::less<>> by_name_;
    std::vector<llm_grammar_class> classes_;
    std::map<range_list, uint32_t> class_ids_;
    std::string cur_rule_; // the rule being defined (names its helpers)

    [[noreturn]] void fail(size_t offs, const std::string & msg) const { throw parse_error{offs, msg}; }
    bool at_end() const { return p_ >= s_.size(); }
    std::string shown(size_t offs) const; // the character at offs, for messages
    char peek(size_t k = 0) const { return p_ + k < s_.size() ? s_[p_ + k] : '\0'; }

    void skip_space(bool newline_ok);
    std::string parse_name();
    uint32_t rule_id(const std::string & name, size_t ref_offs);
    uint32_t new_helper(size_t offs);
    uint32_t class_id(const range_list & r);
    uint32_t parse_char(bool in_class);
    uint32_t parse_hex(int n_digits);
    void parse_rule();
    std::vector<std::vector<llm_grammar_elem>> parse_alternates(bool nested);
    std::vector<llm_grammar_elem> parse_sequence(bool nested);
    bool parse_postfix(std::vector<llm_grammar_elem> & seq, size_t item_start, bool nested);
    void repeat(std::vector<llm_grammar_elem> & seq, size_t item_start, uint32_t min, uint32_t max, size_t offs);
    std::shared_ptr<llm_grammar> finish();
    void check_left_recursion(const llm_grammar & g) const;
};

void gbnf_parser::position(size_t offs, int32_t & line, int32_t & col) const {
    line = 1;
    col = 1;
    for (size_t i = 0; i < offs && i < s_.size(); ++i) {
        if (s_[i] == '\n') {
            ++line;
            col = 1;
        } else if (((uint8_t)s_[i] & 0xC0) != 0x80) {
            ++col; // count code points, not bytes
        }
    }
}

std::string gbnf_parser::shown(size_t offs) const {
    if (offs >= s_.size()) return "end of input";
    const uint8_t c = (uint8_t)s_[offs];
    if (c == '\n' || c == '\r') return "end of line";
    if (c >= 0x20 && c < 0x7F) return std::string("'") + (char)c + "'";
    const int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    bool whole = n > 0 && offs + n <= s_.size();
    for (int i = 1; whole && i < n; ++i)
        whole = ((uint8_t)s_[offs + i] & 0xC0) == 0x80;
    if (whole) return "'" + std::string(s_.substr(offs, n)) + "'";
    char buf[16];
    snprintf(buf, sizeof(buf), "byte 0x%02X", c);
    return buf;
}

void gbnf_parser::skip_space(bool newline_ok) {
    while (!at_end()) {
        const char c = peek();
        if (c == ' ' || c == '\t') {
            ++p_;
        } else if (c == '#') {
            while (!at_end() && peek() != '\n' && peek() != '\r')
                ++p_;
        } else if ((c == '\n' || c == '\r') && newline_ok) {
            ++p_;
        } else {
            break;
        }
    }
}

std::string gbnf_parser::parse_name() {
    const size_t b = p_;
    while (!at_end() && is_name_char(peek()))
        ++p_;
    return std::string(s_.substr(b, p_ - b));
}

uint32_t gbnf_parser::rule_id(const std::string & name, size_t ref_offs) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) {
        build_rule & r = rules_[it->second];
        if (ref_offs != SIZE_MAX && r.ref == SIZE_MAX) r.ref = ref_offs;
        return it->second;
    }
    const uint32_t id = (uint32_t)rules_.size();
    rules_.push_back({});
    rules_.back().name = name;
    rules_.back().ref = ref_offs;
    by_name_[name] = id;
    return id;
}

uint32_t gbnf_parser::new_helper(size_t offs) {
    const uint32_t id = (uint32_t)rules_.size();
    rules_.push_back({});
    rules_.back().parent = cur_rule_;
    rules_.back().defined = true;
    rules_.back().offs = offs;
    return id;
}

uint32_t gbnf_parser::class_id(const range_list & r) {
    auto it = class_ids_.find(r);
    if (it != class_ids_.end()) return it->second;
    llm_grammar_class c;
    c.ranges = r;
    for (const auto & x : r) {
        for (uint32_t cpt = x.first; cpt <= x.second && cpt < 128; ++cpt)
            c.ascii[cpt >> 6] |= 1ull << (cpt & 63);
    }
    const uint32_t id = (uint32_t)classes_.size();
    classes_.push_back(std::move(c));
    class_ids_[r] = id;
    return id;
}

uint32_t gbnf_parser::parse_hex(int n_digits) {
    uint32_t v = 0;
    for (int i = 0; i < n_digits; ++i) {
        const char c = peek();
        int d = -1;
        if (c >= '0' && c <= '9') d = c - '0';
        if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        if (d < 0) fail(p_, "expected " + std::to_string(n_digits) + " hex digits");
        v = v * 16 + (uint32_t)d;
        ++p_;
    }
    return v;
}

// one code point of a literal or a class, escapes resolved
uint32_t gbnf_parser::parse_char(bool in_class) {
    const size_t b = p_;
    const char c = peek();
    if (c == '\n' || c == '\r') fail(b, in_class ? "unterminated character class" : "unterminated string literal");
    if (c == '\\') {
        ++p_;
        const char e = peek();
        ++p_;
        switch (e) {
            case 'n':
                return '\n';
            case 'r':
                return '\r';
            case 't':
                return '\t';
            case '\\':
                return '\\';
            case '"':
                return '"';
            case '[':
                return '[';
            case ']':
                return ']';
            case '-':
                return '-';
            case 'x':
                return parse_hex(2);
            case 'u':
                return parse_hex(4);
            case 'U': {
                const uint32_t v = parse_hex(8);
                if (v > MAX_CPT) fail(b, "code point beyond U+10FFFF");
                return v;
            }
            case '\0':
                fail(b, "unterminated escape");
            default:
                if (e > 0x20 && e < 0x7F) fail(b, std::string("unknown escape '\\") + e + "'");
                fail(b, "a backslash must be followed by an escape letter");
        }
    }
    // a UTF-8 character
    const uint8_t lead = (uint8_t)c;
    int n = lead < 0x80                    ? 1
            : lead >= 0xC2 && lead <= 0xDF ? 2
            : lead >= 0xE0 && lead <= 0xEF ? 3
            : lead >= 0xF0 && lead <= 0xF4 ? 4
                                           : 0;
    if (n == 0) fail(b, "invalid UTF-8");
    uint32_t v = n == 1 ? lead : lead & (0x7F >> n);
    ++p_;
    for (int i = 1; i < n; ++i) {
        if (((uint8_t)peek() & 0xC0) != 0x80) fail(b, "invalid UTF-8");
        v = (v << 6) | ((uint8_t)peek() & 0x3F);
        ++p_;
    }
    if (v > MAX_CPT) fail(b, "invalid UTF-8");
    return v;
}

void gbnf_parser::parse_rule() {
    const size_t b = p_;
    std::string name = parse_name();
    if (name.empty()) {
        const std::string what = shown(p_);
        fail(p_, "expected a rule name, got " + what);
    }
    skip_space(false);
    if (s_.substr(p_, 3) != "::=") fail(p_, "expected ::=");
    p_ += 3;
    skip_space(true);
    const uint32_t id = rule_id(name, SIZE_MAX);
    if (rules_[id].defined) {
        int32_t l, c;
        position(rules_[id].offs, l, c);
        fail(b, "rule '" + name + "' defined twice (first at line " + std::to_string(l) + ")");
    }
    rules_[id].defined = true;
    rules_[id].offs = b;
    cur_rule_ = name;
    auto alts = parse_alternates(false);
    rules_[id].alts = std::move(alts);
    skip_space(false);
    if (!at_end() && peek() != '\n' && peek() != '\r') { fail(p_, "unexpected " + shown(p_)); }
}

std::vector<std::vector<llm_grammar_elem>> gbnf_parser::parse_alternates(bool nested) {
    std::vector<std::vector<llm_grammar_elem>> alts;
    alts.push_back(parse_sequence(nested));
    for (;;) {
        const size_t save = p_;
        skip_space(true); // a line may begin with '|' to continue the rule above
        if (peek() != '|') {
            p_ = save;
            break;
        }
        ++p_;
        skip_space(true);
        alts.push_back(parse_sequence(nested));
    }
    return alts;
}

std::vector<llm_grammar_elem> gbnf_parser::parse_sequence(bool nested) {
    std::vector<llm_grammar_elem> seq;
    for (;;) {
        skip_space(nested);
        const size_t b = p_;
        const size_t start = seq.size();
        const char c = peek();
        if (at_end()) break;
        if (c == '"') {
            ++p_;
            while (peek() != '"') {
                if (at_end() || peek() == '\n' || peek() == '\r') fail(b, "unterminated string literal");
                const uint32_t cpt = parse_char(false);
                seq.push_back({LLM_GRAMMAR_ELEM_CHAR, class_id({{cpt, cpt}})});
            }
            ++p_;
            if (seq.size() == start) { // "" matches the empty string: nothing to add, and nothing to repeat
                skip_space(nested);
                if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') fail(p_, "nothing to repeat");
                continue;
            }
        } else if (c == '[') {
            ++p_;
            const bool neg = peek() == '^';
            if (neg) ++p_;
            range_list r;
            for (;;) {
                if (at_end() || peek() == '\n' || peek() == '\r') fail(b, "unterminated character class");
                if (peek() == ']') {
                    ++p_;
                    break;
                }
                const size_t cb = p_;
                const uint32_t lo = parse_char(true);
                uint32_t hi = lo;
                if (peek() == '-' && peek(1) != ']' && p_ + 1 < s_.size()) {
                    ++p_;
                    hi = parse_char(true);
                    if (hi < lo) fail(cb, "character range out of order");
                }
                r.push_back({lo, hi});
            }
            r = normalize(r);
            if (neg) r = complement(r);
            seq.push_back({LLM_GRAMMAR_ELEM_CHAR, class_id(r)});
        } else if (c == '.') {
            ++p_;
            seq.push_back({LLM_GRAMMAR_ELEM_CHAR, class_id({{0, MAX_CPT}})});
        } else if (c == '(') {
            ++p_;
            skip_space(true);
            auto alts = parse_alternates(true);
            skip_space(true);
            if (peek() != ')') {
                if (at_end()) fail(b, "unclosed '('");
                fail(p_, "expected ')', got " + shown(p_));
            }
            ++p_;
            const uint32_t h = new_helper(b);
            rules_[h].alts = std::move(alts);
            seq.push_back({LLM_GRAMMAR_ELEM_RULE, h});
        } else if (is_name_char(c)) {
            const std::string name = parse_name();
            seq.push_back({LLM_GRAMMAR_ELEM_RULE, rule_id(name, b)});
        } else if (c == '<') {
            fail(b, "token references (<...>) are not supported");
        } else {
            break; // '|', ')', a newline, or something the caller reports
        }
        while (parse_postfix(seq, start, nested)) {}
    }
    return seq;
}

bool gbnf_parser::parse_postfix(std::vector<llm_grammar_elem> & seq, size_t item_start, bool nested) {
    skip_space(nested);
    const size_t b = p_;
    const char c = peek();
    if (c == '*') {
        ++p_;
        repeat(seq, item_start, 0, NO_MAX, b);
    } else if (c == '+') {
        ++p_;
        repeat(seq, item_start, 1, NO_MAX, b);
    } else if (c == '?') {
        ++p_;
        repeat(seq, item_start, 0, 1, b);
    } else if (c == '{') {
        ++p_;
        skip_space(nested);
        const auto number = [&]() -> uint32_t {
            if (!(peek() >= '0' && peek() <= '9')) fail(p_, "expected a number");
            uint64_t v = 0;
            while (peek() >= '0' && peek() <= '9') {
                v = v * 10 + (uint64_t)(peek() - '0');
                if (v > MAX_REPEAT) fail(b, "repetition count above " + std::to_string(MAX_REPEAT));
                ++p_;
            }
            return (uint32_t)v;
        };
        uint32_t min = 0, max = NO_MAX;
        if (peek() == ',') { // {,n}
            ++p_;
            skip_space(nested);
            max = number();
        } else {
            min = number();
            skip_space(nested);
            if (peek() == ',') {
                ++p_;
                skip_space(nested);
                if (peek() != '}') max = number();
            } else {
                max = min;
            }
        }
        skip_space(nested);
        if (peek() != '}') fail(p_, "expected '}'");
        ++p_;
        if (max < min) fail(b, "repetition {m,n} with n < m");
        repeat(seq, item_start, min, max, b);
    } else {
        return false;
    }
    return true;
}

// x{min,max} (max = NO_MAX: open): min copies of x, then either  R ::= x R |  (open)  or a chain of
// max - min optional copies, each nested in the previous one so every count parses one way.
void gbnf_parser::repeat(std::vector<llm_grammar_elem> & seq, size_t item_start, uint32_t min, uint32_t max,
                         size_t offs) {
    if (seq.size() == item_start) fail(offs, "nothing to repeat");
    if (seq.size() - item_start > 1) { // a multi-character literal repeats as a whole
        const uint32_t h = new_helper(offs);
        rules_[h].alts.push_back(std::vector<llm_grammar_elem>(seq.begin() + (ptrdiff_t)item_start, seq.end()));
        seq.resize(item_start);
        seq.push_back({LLM_GRAMMAR_ELEM_RULE, h});
    }
    const llm_grammar_elem x = seq.back();
    seq.pop_back();
    for (uint32_t i = 0; i < min; ++i)
        seq.push_back(x);
    if (max == NO_MAX) {
        const uint32_t r = new_helper(offs);
        rules_[r].repeat = true;
        rules_[r].alts = {{x, {LLM_GRAMMAR_ELEM_RULE, r}}, {}};
        seq.push_back({LLM_GRAMMAR_ELEM_RULE, r});
    } else if (max > min) {
        int64_t prev = -1;
        for (uint32_t k = 0; k < max - min; ++k) {
            const uint32_t o = new_helper(offs);
            std::vector<llm_grammar_elem> a = {x};
            if (prev >= 0) a.push_back({LLM_GRAMMAR_ELEM_RULE, (uint32_t)prev});
            rules_[o].alts = {a, {}};
            prev = o;
        }
        seq.push_back({LLM_GRAMMAR_ELEM_RULE, (uint32_t)prev});
    }
}

std::shared_ptr<llm_grammar> gbnf_parser::run() {
    skip_space(true);
    while (!at_end()) {
        parse_rule();
        skip_space(true);
    }
    return finish();
}

std::shared_ptr<llm_grammar> gbnf_parser::finish() {
    for (const build_rule & r : rules_) {
        if (!r.defined) fail(r.ref, "undefined rule '" + r.name + "'");
    }
    auto root = by_name_.find("root");
    if (root == by_name_.end()) fail(SIZE_MAX, "no rule named 'root'");

    // name the helpers "<parent>-<n>", avoiding every user name
    std::map<std::string, int> counter;
    for (build_rule & r : rules_) {
        if (!r.name.empty()) continue;
        for (;;) {
            std::string n = r.parent + "-" + std::to_string(++counter[r.parent]);
            if (!by_name_.count(n)) {
                r.name = n;
                break;
            }
        }
    }

    auto g = std::make_shared<llm_grammar>();
    g->root = root->second;
    g->classes = std::move(classes_);
    g->rules.resize(rules_.size());
    for (size_t i = 0; i < rules_.size(); ++i) {
        llm_grammar_rule & out = g->rules[i];
        out.name = rules_[i].name;
        position(rules_[i].offs, out.line, out.col);
        for (const auto & alt : rules_[i].alts) {
            out.alts.push_back((uint32_t)g->elems.size());
            g->elems.insert(g->elems.end(), alt.begin(), alt.end());
            g->elems.push_back({LLM_GRAMMAR_ELEM_END, 0});
        }
    }
    check_left_recursion(*g);
    return g;
}

// A rule is left-recursive when it can reach itself through rules met before any character is read
// (each preceded only by nullable elements). The matcher would expand such a rule forever.
void gbnf_parser::check_left_recursion(const llm_grammar & g) const {
    const size_t n = g.rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < n; ++r) {
            if (nullable[r]) continue;
            for (uint32_t a : g.rules[r].alts) {
                bool all = true;
                for (uint32_t e = a; g.elems[e].type != LLM_GRAMMAR_ELEM_END; ++e) {
                    if (g.elems[e].type == LLM_GRAMMAR_ELEM_CHAR || !nullable[g.elems[e].value]) {
                        all = false;
                        break;
                    }
                }
                if (all) {
                    nullable[r] = 1;
                    changed = true;
                    break;
                }
            }
        }
    }
    std::vector<std::vector<uint32_t>> first(n); // rules r can start with
    for (size_t r = 0; r < n; ++r) {
        for (uint32_t a : g.rules[r].alts) {
            for (uint32_t e = a; g.elems[e].type == LLM_GRAMMAR_ELEM_RULE; ++e) {
                first[r].push_back(g.elems[e].value);
                if (!nullable[g.elems[e].value]) break;
            }
        }
    }
    // DFS for a cycle; report it from a user-named rule when it has one
    std::vector<int> color(n, 0); // 0 new, 1 on the path, 2 done
    std::vector<uint32_t> path;
    std::vector<uint32_t> cycle;
    std::function<bool(uint32_t)> dfs = [&](uint32_t r) -> bool {
        color[r] = 1;
        path.push_back(r);
        for (uint32_t q : first[r]) {
            if (color[q] == 1) {
                auto it = std::find(path.begin(), path.end(), q);
                cycle.assign(it, path.end());
                return true;
            }
            if (color[q] == 0 && dfs(q)) return true;
        }
        path.pop_back();
        color[r] = 2;
        return false;
    };
    for (uint32_t r = 0; r < n && cycle.empty(); ++r) {
        if (color[r] == 0) dfs(r);
    }
    if (cycle.empty()) return;
    size_t start = 0;
    for (size_t i = 0; i < cycle.size(); ++i) {
        if (rules_[cycle[i]].parent.empty()) {
            start = i;
            break;
        }
    }
    std::rotate(cycle.begin(), cycle.begin() + (ptrdiff_t)start, cycle.end());
    for (uint32_t r : cycle) {
        if (rules_[r].repeat && cycle.size() <= 2) {
            fail(rules_[r].offs, "the repeated item can match the empty string (it would repeat forever)");
        }
    }
    std::string chain;
    for (uint32_t r : cycle)
        chain += g.rules[r].name + " -> ";
    chain += g.rules[cycle[0]].name;
    fail(rules_[cycle[0]].offs, "rule '" + g.rules[cycle[0]].name + "' is left-recursive (" + chain + ")");
}

//
// printing
//

void append_escaped(std::string & out, uint32_t c, bool in_class) {
    char buf[16];
    if (c == '\n') {
        out += "\\n";
    } else if (c == '\r') {
        out += "\\r";
    } else if (c == '\t') {
        out += "\\t";
    } else if (in_class && c == '^') {
        out += "\\x5E"; // a leading ^ would negate the class
    } else if (c == '\\' || c == '"' || (in_class && (c == ']' || c == '[' || c == '-'))) {
        out += '\\';
        out += (char)c;
    } else if (c < 0x20 || c == 0x7F) {
        snprintf(buf, sizeof(buf), "\\x%02X", c);
        out += buf;
    } else if (c < 0x80) {
        out += (char)c;
    } else if (c <= 0xFFFF) {
        snprintf(buf, sizeof(buf), "\\u%04X", c);
        out += buf;
    } else {
        snprintf(buf, sizeof(buf), "\\U%08X", c);
        out += buf;
    }
}

} // namespace

void llm_grammar_escape_bytes(std::string & out, std::string_view bytes) {
    for (unsigned char c : bytes) {
        if (c < 0x80) {
            append_escaped(out, c, false);
        } else {
            out += (char)c; // UTF-8 passes through
        }
    }
}

std::string llm_grammar_to_gbnf(const llm_grammar & g) {
    std::string out;
    for (const llm_grammar_rule & r : g.rules) {
        out += r.name + " ::=";
        // an empty alternative prints as "" (a line ending in '::=' or '|' would continue on the next one)
        const std::vector<uint32_t> & alts = r.alts;
        for (size_t a = 0; a < alts.size(); ++a) {
            if (a > 0) out += " |";
            if (g.elems[alts[a]].type == LLM_GRAMMAR_ELEM_END) out += " \"\"";
            bool in_lit = false;
            for (uint32_t e = alts[a]; g.elems[e].type != LLM_GRAMMAR_ELEM_END; ++e) {
                const llm_grammar_elem & el = g.elems[e];
                if (el.type == LLM_GRAMMAR_ELEM_RULE) {
                    if (in_lit) out += '"';
                    in_lit = false;
                    out += " " + g.rules[el.value].name;
                    continue;
                }
                const range_list & rl = g.classes[el.value].ranges;
                if (rl.size() == 1 && rl[0].first == rl[0].second) {
                    if (!in_lit) out += " \"";
                    in_lit = true;
                    append_escaped(out, rl[0].first, false);
                    continue;
                }
                if (in_lit) out += '"';
                in_lit = false;
                if (rl.size() == 1 && rl[0].first == 0 && rl[0].second == MAX_CPT) {
                    out += " .";
                    continue;
                }
                const bool neg = !rl.empty() && rl.front().first == 0 && rl.back().second == MAX_CPT;
                range_list shown = neg ? complement(rl) : rl;
                out += neg ? " [^" : " [";
                for (const auto & x : shown) {
                    append_escaped(out, x.first, true);
                    if (x.second != x.first) {
                        out += '-';
                        append_escaped(out, x.second, true);
                    }
                }
                out += ']';
            }
            if (in_lit) out += '"';
        }
        out += '\n';
    }
    return out;
}

std::shared_ptr<const llm_grammar> llm_grammar_parse(std::string_view text, std::string * err) {
    gbnf_parser p(text);
    try {
        return p.run();
    } catch (const parse_error & e) {
        if (err) {
            if (e.offs == SIZE_MAX) {
                *err = "grammar: " + e.msg;
            } else {
                int32_t l, c;
                p.position(e.offs, l, c);
                *err = "grammar: line " + std::to_string(l) + ", col " + std::to_string(c) + ": " + e.msg;
            }
        }
        return nullptr;
    }
}
