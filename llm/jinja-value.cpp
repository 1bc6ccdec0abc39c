// jinja-value.cpp - Jinja values as Python sees them: truthiness, str() and repr(), float repr, ==, <,
// json.dumps, and the UTF-8 / Unicode helpers the string operations need.
#include "jinja-impl.h"
#include "unicode.h"

#include <charconv>
#include <cmath>
#include <cstring>

// ---------------------------------------------------------------------------------------------------------
// UTF-8

thread_local uint64_t jinja_work = 0;
thread_local size_t jinja_str_cap = SIZE_MAX;

static void check_str_cap(const std::string & r) {
    if (r.size() > jinja_str_cap)
        throw jinja_error(0, "string too long: more than " + std::to_string(jinja_str_cap) + " bytes");
}

std::u32string jinja_utf8_decode(std::string_view s) {
    jinja_work += s.size() / 64;
    std::u32string r;
    r.reserve(s.size());
    size_t p = 0;
    while (p < s.size()) {
        const unsigned char c = (unsigned char)s[p];
        if (c < 0x80) {
            r += (char32_t)c;
            ++p;
            continue;
        }
        int len = 0;
        char32_t cp = 0;
        if ((c & 0xE0) == 0xC0)
            len = 2, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0)
            len = 3, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0)
            len = 4, cp = c & 0x07;
        bool ok = len > 0 && p + (size_t)len <= s.size();
        for (int k = 1; ok && k < len; ++k) {
            const unsigned char cc = (unsigned char)s[p + (size_t)k];
            if ((cc & 0xC0) != 0x80)
                ok = false;
            else
                cp = (cp << 6) | (cc & 0x3F);
        }
        // overlong forms, surrogates and values past U+10FFFF are invalid, as in Python's decoder
        if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
                   (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)) {
            ok = false;
        }
        if (ok) {
            r += cp;
            p += (size_t)len;
        } else {
            r += (char32_t)(0xDC00 + c); // surrogateescape
            ++p;
        }
    }
    return r;
}

void jinja_utf8_append(std::string & out, char32_t c) {
    if (c >= 0xDC80 && c <= 0xDCFF) {  // a raw byte of invalid UTF-8, kept as Python's surrogateescape does
        out += (char)(c - 0xDC00);
    } else {
        unicode_cpt_append_utf8(out, (uint32_t)c);
    }
}

std::string jinja_utf8_encode(std::u32string_view s) {
    std::string r;
    r.reserve(s.size());
    for (char32_t c : s)
        jinja_utf8_append(r, c);
    return r;
}

size_t jinja_utf8_length(std::string_view s) {
    bool ascii = true;
    for (char c : s) {
        if ((unsigned char)c >= 0x80) {
            ascii = false;
            break;
        }
    }
    return ascii ? s.size() : jinja_utf8_decode(s).size();
}

bool jinja_is_space(char32_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Simple (one to one) case mapping for the scripts chat templates meet: ASCII, Latin-1, Latin Extended-A,
// Greek and Cyrillic. Other letters are left as they are (see docs/jinja.md).
char32_t jinja_to_upper(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
    if (c == 0xB5) return 0x39C;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        const bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower) return (c & 1) == 0 ? c - 1 : c;
        return (c & 1) == 1 ? c - 1 : c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c >= 0x3AC && c <= 0x3AF) return c == 0x3AC ? 0x386 : c - 37;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    if (c >= 0x460 && c <= 0x4FF && (c & 1) == 1 && !(c >= 0x482 && c <= 0x489)) return c - 1;
    return c;
}

char32_t jinja_to_lower(char32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        const bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower) return (c & 1) == 1 ? c + 1 : c;
        return (c & 1) == 0 ? c + 1 : c;
    }
    if (c == 0x130) return 'i';
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if (c >= 0x460 && c <= 0x4FF && (c & 1) == 0 && !(c >= 0x482 && c <= 0x489)) return c + 1;
    return c;
}

bool jinja_is_cased_upper(char32_t c) { return jinja_to_lower(c) != c || c == 0x130; }
bool jinja_is_cased_lower(char32_t c) { return jinja_to_upper(c) != c || c == 0xDF || c == 0x131; }

bool jinja_is_alpha(char32_t c) {
    if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
    return unicode_cpt_class((uint32_t)c) == UNICODE_CLASS_LETTER;
}

bool jinja_is_digit(char32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    return unicode_cpt_class((uint32_t)c) == UNICODE_CLASS_NUMBER;
}

bool jinja_is_printable(char32_t c) {
    if (c < 0x80) return c >= 0x20 && c < 0x7F;
    if (c >= 0xDC80 && c <= 0xDCFF) return false;
    const unicode_class k = unicode_cpt_class((uint32_t)c);
    return k != UNICODE_CLASS_UNDEFINED && k != UNICODE_CLASS_CONTROL && k != UNICODE_CLASS_SEPARATOR;
}

// ---------------------------------------------------------------------------------------------------------
// values

static const std::string k_empty;

jinja_value jinja_value::undefined(std::string hint) {
    jinja_value v;
    if (!hint.empty()) v.s = std::make_shared<const std::string>(std::move(hint));
    return v;
}
jinja_value jinja_value::none() {
    jinja_value v;
    v.type = JINJA_NONE;
    return v;
}
jinja_value jinja_value::boolean(bool b) {
    jinja_value v;
    v.type = JINJA_BOOL;
    v.b = b;
    return v;
}
jinja_value jinja_value::integer(int64_t i) {
    jinja_value v;
    v.type = JINJA_INT;
    v.i = i;
    return v;
}
jinja_value jinja_value::floating(double f) {
    jinja_value v;
    v.type = JINJA_FLOAT;
    v.f = f;
    return v;
}
jinja_value jinja_value::string(std::string s) {
    jinja_value v;
    v.type = JINJA_STRING;
    v.s = std::make_shared<const std::string>(std::move(s));
    return v;
}
int jinja_value_depth(const jinja_value & v) {
    if (v.type == JINJA_LIST) return v.l->depth;
    if (v.type == JINJA_DICT) return v.d->depth;
    return 0;
}

static void check_depth(int depth) {
    if (depth > k_jinja_max_nesting) {
        throw jinja_error(0,
                          "unsupported: lists/dicts nested more than " + std::to_string(k_jinja_max_nesting) + " deep");
    }
}

jinja_value jinja_value::list(std::vector<jinja_value> items, bool tuple) {
    jinja_value v;
    v.type = JINJA_LIST;
    v.l = std::make_shared<jinja_list>();
    int depth = 0;
    for (const auto & x : items)
        depth = std::max(depth, jinja_value_depth(x));
    check_depth(depth + 1);
    jinja_work += items.size() / 16;
    v.l->items = std::move(items);
    v.l->tuple = tuple;
    v.l->depth = depth + 1;
    return v;
}
jinja_value jinja_value::generator(std::vector<jinja_value> items) {
    jinja_value v = list(std::move(items));
    v.l->generator = true;
    return v;
}
jinja_value jinja_value::dict() {
    jinja_value v;
    v.type = JINJA_DICT;
    v.d = std::make_shared<jinja_dict>();
    return v;
}

const std::string & jinja_value::str() const { return s ? *s : k_empty; }
const std::string & jinja_value::undefined_hint() const { return s ? *s : k_empty; }

const jinja_value * jinja_dict::find(const jinja_value & key) const {
    jinja_work += items.size() / 16;
    for (const auto & kv : items) {
        if (jinja_equal(kv.first, key)) return &kv.second;
    }
    return nullptr;
}

const jinja_value * jinja_dict::find(std::string_view key) const {
    jinja_work += items.size() / 16;
    for (const auto & kv : items) {
        if (kv.first.type == JINJA_STRING && kv.first.str() == key) return &kv.second;
    }
    return nullptr;
}

void jinja_dict::set(const jinja_value & key, jinja_value v) {
    depth = std::max(depth, 1 + std::max(jinja_value_depth(key), jinja_value_depth(v)));
    check_depth(depth);
    jinja_work += items.size() / 16;
    for (auto & kv : items) {
        if (jinja_equal(kv.first, key)) {
            kv.second = std::move(v);
            return;
        }
    }
    items.emplace_back(key, std::move(v));
}

bool jinja_truthy(const jinja_value & v) {
    switch (v.type) {
        case JINJA_UNDEFINED:
        case JINJA_NONE:
            return false;
        case JINJA_BOOL:
            return v.b;
        case JINJA_INT:
            return v.i != 0;
        case JINJA_FLOAT:
            return v.f != 0.0;
        case JINJA_STRING:
            return !v.str().empty();
        case JINJA_LIST:
            return v.l->generator || !v.l->items.empty();
        case JINJA_DICT:
            return !v.d->items.empty();
        case JINJA_FUNC:
        case JINJA_NAMESPACE:
            return true;
    }
    return false;
}

const char * jinja_type_name(const jinja_value & v) {
    switch (v.type) {
        case JINJA_UNDEFINED:
            return "Undefined";
        case JINJA_NONE:
            return "NoneType";
        case JINJA_BOOL:
            return "bool";
        case JINJA_INT:
            return "int";
        case JINJA_FLOAT:
            return "float";
        case JINJA_STRING:
            return "str";
        case JINJA_LIST:
            return v.l->generator ? "generator" : v.l->tuple ? "tuple" : "list";
        case JINJA_DICT:
            return "dict";
        case JINJA_FUNC:
            return v.fn->macro ? "Macro" : "builtin_function_or_method";
        case JINJA_NAMESPACE:
            return "Namespace";
    }
    return "?";
}

std::string jinja_float_repr(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    // sci: [-]d[.ddd]e[+-]XX
    bool neg = false;
    size_t p = 0;
    if (sci[0] == '-') neg = true, p = 1;
    const size_t epos = sci.find('e');
    std::string digits;
    for (size_t k = p; k < epos; ++k)
        if (sci[k] != '.') digits += sci[k];
    const int exp = atoi(sci.c_str() + epos + 1);
    std::string r = neg ? "-" : "";
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            r += "0.";
            r.append((size_t)(-exp - 1), '0');
            r += digits;
        } else {
            const size_t int_len = (size_t)exp + 1;
            if (digits.size() <= int_len) {
                r += digits;
                r.append(int_len - digits.size(), '0');
                r += ".0";
            } else {
                r += digits.substr(0, int_len);
                r += '.';
                r += digits.substr(int_len);
            }
        }
    } else {
        r += digits[0];
        if (digits.size() > 1) {
            r += '.';
            r += digits.substr(1);
        }
        char eb[16];
        snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        r += eb;
    }
    return r;
}

std::string jinja_repr_string(std::string_view s) {
    const bool has_sq = s.find('\'') != std::string_view::npos;
    const bool has_dq = s.find('"') != std::string_view::npos;
    const char q = (has_sq && !has_dq) ? '"' : '\'';
    std::string r(1, q);
    for (char32_t c : jinja_utf8_decode(s)) {
        if (c == (char32_t)q || c == '\\') {
            r += '\\';
            r += (char)c;
        } else if (c == '\t') {
            r += "\\t";
        } else if (c == '\n') {
            r += "\\n";
        } else if (c == '\r') {
            r += "\\r";
        } else if (jinja_is_printable(c)) {
            jinja_utf8_append(r, c);
        } else {
            char b[16];
            if (c <= 0xFF)
                snprintf(b, sizeof(b), "\\x%02x", (unsigned)c);
            else if (c <= 0xFFFF)
                snprintf(b, sizeof(b), "\\u%04x", (unsigned)c);
            else
                snprintf(b, sizeof(b), "\\U%08x", (unsigned)c);
            r += b;
        }
    }
    r += q;
    return r;
}

static void repr_into(std::string & r, const jinja_value & v, int depth);

static void str_into(std::string & r, const jinja_value & v, int depth) {
    switch (v.type) {
        case JINJA_UNDEFINED:
            return;
        case JINJA_NONE:
            r += "None";
            return;
        case JINJA_BOOL:
            r += v.b ? "True" : "False";
            return;
        case JINJA_INT:
            r += std::to_string(v.i);
            return;
        case JINJA_FLOAT:
            r += jinja_float_repr(v.f);
            return;
        case JINJA_STRING:
            r += v.str();
            return;
        default:
            repr_into(r, v, depth);
    }
}

static void repr_into(std::string & r, const jinja_value & v, int depth) {
    if (depth > 200) {
        r += "...";
        return;
    }
    switch (v.type) {
        case JINJA_UNDEFINED:
            r += "Undefined";
            return;
        case JINJA_STRING:
            r += jinja_repr_string(v.str());
            return;
        case JINJA_LIST: {
            if (v.l->generator) {
                r += "<generator object>";
                return;
            }
            r += v.l->tuple ? '(' : '[';
            for (size_t k = 0; k < v.l->items.size(); ++k) {
                if (k) r += ", ";
                repr_into(r, v.l->items[k], depth + 1);
                check_str_cap(r);
            }
            if (v.l->tuple && v.l->items.size() == 1) r += ',';
            r += v.l->tuple ? ')' : ']';
            return;
        }
        case JINJA_DICT: {
            r += '{';
            for (size_t k = 0; k < v.d->items.size(); ++k) {
                if (k) r += ", ";
                repr_into(r, v.d->items[k].first, depth + 1);
                r += ": ";
                repr_into(r, v.d->items[k].second, depth + 1);
                check_str_cap(r);
            }
            r += '}';
            return;
        }
        case JINJA_FUNC:
            if (v.fn->macro && !v.fn->is_caller)
                r += "<Macro '" + v.fn->name + "'>";
            else
                r += "<built-in function " + v.fn->name + ">";
            return;
        case JINJA_NAMESPACE: {
            r += "<Namespace {";
            const auto & items = v.ns->attrs.items;
            for (size_t k = 0; k < items.size(); ++k) {
                if (k) r += ", ";
                repr_into(r, items[k].first, depth + 1);
                r += ": ";
                repr_into(r, items[k].second, depth + 1);
            }
            r += "}>";
            return;
        }
        default:
            str_into(r, v, depth);
    }
}

std::string jinja_to_str(const jinja_value & v) {
    if (v.type == JINJA_STRING) return v.str();
    std::string r;
    str_into(r, v, 0);
    return r;
}

std::string jinja_repr(const jinja_value & v) {
    std::string r;
    repr_into(r, v, 0);
    return r;
}

bool jinja_hashable(const jinja_value & v) {
    if (v.type == JINJA_DICT || v.type == JINJA_NAMESPACE) return false;
    if (v.type == JINJA_LIST) {
        if (!v.l->tuple) return v.l->generator;
        for (const auto & x : v.l->items) {
            if (!jinja_hashable(x)) return false;
        }
    }
    return true;
}

static bool equal_depth(const jinja_value & a, const jinja_value & b, int depth) {
    if (depth > 200) return false;
    if (a.is_number() && b.is_number()) {
        if (a.type == JINJA_FLOAT || b.type == JINJA_FLOAT) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.type != b.type) return false;
    switch (a.type) {
        case JINJA_UNDEFINED:
        case JINJA_NONE:
            return true;
        case JINJA_STRING:
            return a.str() == b.str();
        case JINJA_LIST:
            if (a.l == b.l) return true;
            if (a.l->generator || b.l->generator) return false;
            if (a.l->tuple != b.l->tuple || a.l->items.size() != b.l->items.size()) return false;
            for (size_t k = 0; k < a.l->items.size(); ++k) {
                if (!equal_depth(a.l->items[k], b.l->items[k], depth + 1)) return false;
            }
            return true;
        case JINJA_DICT:
            if (a.d == b.d) return true;
            if (a.d->items.size() != b.d->items.size()) return false;
            for (const auto & kv : a.d->items) {
                const jinja_value * o = b.d->find(kv.first);
                if (!o || !equal_depth(kv.second, *o, depth + 1)) return false;
            }
            return true;
        case JINJA_FUNC:
            return a.fn == b.fn;
        case JINJA_NAMESPACE:
            return a.ns == b.ns;
        default:
            return false;
    }
}

bool jinja_equal(const jinja_value & a, const jinja_value & b) { return equal_depth(a, b, 0); }

int jinja_compare(const jinja_value & a, const jinja_value & b, uint32_t pos) {
    if (a.is_undefined()) jinja_fail_undefined(a, pos);
    if (b.is_undefined()) jinja_fail_undefined(b, pos);
    if (a.is_number() && b.is_number()) {
        if (a.type == JINJA_FLOAT || b.type == JINJA_FLOAT) {
            const double x = a.as_float(), y = b.as_float();
            return x < y ? -1 : x > y ? 1 : 0;
        }
        const int64_t x = a.as_int(), y = b.as_int();
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.type == JINJA_STRING && b.type == JINJA_STRING) {
        const int c = a.str().compare(b.str());
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.type == JINJA_LIST && b.type == JINJA_LIST && !a.l->generator && !b.l->generator &&
        a.l->tuple == b.l->tuple) {
        const auto & x = a.l->items;
        const auto & y = b.l->items;
        for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
            if (jinja_equal(x[k], y[k])) continue;
            return jinja_compare(x[k], y[k], pos);
        }
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    jinja_fail(pos, std::string("TypeError: '<' not supported between instances of '") + jinja_type_name(a) +
                        "' and '" + jinja_type_name(b) + "'");
}

bool jinja_less(const jinja_value & a, const jinja_value & b, uint32_t pos) { return jinja_compare(a, b, pos) < 0; }

// ---------------------------------------------------------------------------------------------------------
// json.dumps

static void json_string(std::string & r, std::string_view s, bool ensure_ascii) {
    r += '"';
    for (char32_t c : jinja_utf8_decode(s)) {
        switch (c) {
            case '"':
                r += "\\\"";
                continue;
            case '\\':
                r += "\\\\";
                continue;
            case '\n':
                r += "\\n";
                continue;
            case '\r':
                r += "\\r";
                continue;
            case '\t':
                r += "\\t";
                continue;
            case '\b':
                r += "\\b";
                continue;
            case '\f':
                r += "\\f";
                continue;
            default:
                break;
        }
        char b[16];
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
            if (c >= 0x10000 && !(c >= 0xDC80 && c <= 0xDCFF)) {
                const char32_t v = c - 0x10000;
                snprintf(b, sizeof(b), "\\u%04x\\u%04x", (unsigned)(0xD800 + (v >> 10)),
                         (unsigned)(0xDC00 + (v & 0x3FF)));
            } else {
                snprintf(b, sizeof(b), "\\u%04x", (unsigned)c);
            }
            r += b;
        } else {
            jinja_utf8_append(r, c);
        }
    }
    r += '"';
}

static void json_float(std::string & r, double f) {
    if (std::isnan(f))
        r += "NaN";
    else if (std::isinf(f))
        r += f < 0 ? "-Infinity" : "Infinity";
    else
        r += jinja_float_repr(f);
}

static void json_into(std::string & r, const jinja_value & v, const jinja_json_opts & o, int level, uint32_t pos) {
    if (level > 200) jinja_fail(pos, "RecursionError: tojson: value nested too deeply");
    auto newline = [&](int lvl) {
        r += '\n';
        for (int k = 0; k < lvl; ++k)
            r += o.indent;
    };
    switch (v.type) {
        case JINJA_NONE:
            r += "null";
            return;
        case JINJA_BOOL:
            r += v.b ? "true" : "false";
            return;
        case JINJA_INT:
            r += std::to_string(v.i);
            return;
        case JINJA_FLOAT:
            json_float(r, v.f);
            return;
        case JINJA_STRING:
            json_string(r, v.str(), o.ensure_ascii);
            return;
        case JINJA_LIST: {
            if (v.l->generator) break;
            if (v.l->items.empty()) {
                r += "[]";
                return;
            }
            r += '[';
            for (size_t k = 0; k < v.l->items.size(); ++k) {
                if (k) r += o.item_sep;
                if (o.indent_set) newline(level + 1);
                json_into(r, v.l->items[k], o, level + 1, pos);
                check_str_cap(r);
            }
            if (o.indent_set) newline(level);
            r += ']';
            return;
        }
        case JINJA_DICT: {
            if (v.d->items.empty()) {
                r += "{}";
                return;
            }
            std::vector<std::pair<std::string, const jinja_value *>> items;
            for (const auto & kv : v.d->items) {
                const jinja_value & key = kv.first;
                std::string ks;
                switch (key.type) {
                    case JINJA_STRING:
                        ks = key.str();
                        break;
                    case JINJA_NONE:
                        ks = "null";
                        break;
                    case JINJA_BOOL:
                        ks = key.b ? "true" : "false";
                        break;
                    case JINJA_INT:
                        ks = std::to_string(key.i);
                        break;
                    case JINJA_FLOAT:
                        json_float(ks, key.f);
                        break;
                    default:
                        jinja_fail(pos,
                                   std::string("TypeError: tojson: keys must be str, int, float, bool or None, not ") +
                                       jinja_type_name(key));
                }
                items.emplace_back(std::move(ks), &kv.second);
            }
            if (o.sort_keys) {
                for (const auto & kv : v.d->items) {
                    if (kv.first.type != v.d->items[0].first.type &&
                        !(kv.first.is_number() && v.d->items[0].first.is_number())) {
                        jinja_fail(pos, "TypeError: tojson: sort_keys with keys of different types");
                    }
                }
                std::vector<size_t> idx(items.size());
                for (size_t k = 0; k < idx.size(); ++k)
                    idx[k] = k;
                std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) {
                    return jinja_less(v.d->items[x].first, v.d->items[y].first, pos);
                });
                std::vector<std::pair<std::string, const jinja_value *>> sorted;
                for (size_t k : idx)
                    sorted.push_back(items[k]);
                items.swap(sorted);
            }
            r += '{';
            for (size_t k = 0; k < items.size(); ++k) {
                if (k) r += o.item_sep;
                if (o.indent_set) newline(level + 1);
                json_string(r, items[k].first, o.ensure_ascii);
                r += o.key_sep;
                json_into(r, *items[k].second, o, level + 1, pos);
                check_str_cap(r);
            }
            if (o.indent_set) newline(level);
            r += '}';
            return;
        }
        default:
            break;
    }
    jinja_fail(pos,
               std::string("TypeError: tojson: Object of type ") + jinja_type_name(v) + " is not JSON serializable");
}

std::string jinja_to_json(const jinja_value & v, const jinja_json_opts & o, uint32_t pos) {
    std::string r;
    json_into(r, v, o, 0, pos);
    return r;
}

// ---------------------------------------------------------------------------------------------------------
// Python str operations (on code points)

const std::string & jinja_str_arg(const jinja_value & v, const char * what, uint32_t pos) {
    if (!v.is_string()) {
        jinja_fail(pos, std::string("TypeError: ") + what + ": a string is required, not '" + jinja_type_name(v) + "'");
    }
    return v.str();
}

std::u32string jinja_py_lower(const std::u32string & s) {
    std::u32string r;
    r.reserve(s.size());
    for (char32_t c : s) {
        if (c == 0x130)
            r += U"i\u0307";
        else
            r += jinja_to_lower(c);
    }
    return r;
}

std::u32string jinja_py_upper(const std::u32string & s) {
    std::u32string r;
    r.reserve(s.size());
    for (char32_t c : s) {
        if (c == 0xDF)
            r += U"SS";
        else
            r += jinja_to_upper(c);
    }
    return r;
}

bool jinja_is_cased(char32_t c) { return jinja_is_cased_upper(c) || jinja_is_cased_lower(c); }

std::u32string jinja_py_title(const std::u32string & s) {
    std::u32string r;
    bool prev_cased = false;
    for (char32_t c : s) {
        if (prev_cased)
            r += jinja_to_lower(c);
        else
            r += jinja_to_upper(c);
        prev_cased = jinja_is_cased(c);
    }
    return r;
}

std::u32string jinja_py_capitalize(const std::u32string & s) {
    if (s.empty()) return s;
    std::u32string r = jinja_py_upper(s.substr(0, 1));
    r += jinja_py_lower(s.substr(1));
    return r;
}

std::u32string jinja_py_strip(const std::u32string & s, const jinja_value & chars, bool left, bool right) {
    std::u32string set;
    const bool ws = chars.is_none() || chars.is_undefined();
    if (!ws) set = jinja_utf8_decode(chars.str());
    auto strip_it = [&](char32_t c) { return ws ? jinja_is_space(c) : set.find(c) != std::u32string::npos; };
    size_t b = 0, e = s.size();
    if (left)
        while (b < e && strip_it(s[b]))
            ++b;
    if (right)
        while (e > b && strip_it(s[e - 1]))
            --e;
    return s.substr(b, e - b);
}

std::vector<std::u32string> jinja_py_split(const std::u32string & s, const jinja_value & sep, int64_t maxsplit,
                                           bool from_right, uint32_t pos) {
    std::vector<std::u32string> parts;
    if (sep.is_none() || sep.is_undefined()) {
        // runs of whitespace, none empty
        if (!from_right) {
            size_t i = 0;
            while (true) {
                while (i < s.size() && jinja_is_space(s[i]))
                    ++i;
                if (i >= s.size()) break;
                if (maxsplit >= 0 && (int64_t)parts.size() == maxsplit) {
                    parts.push_back(s.substr(i)); // the rest keeps its trailing whitespace
                    break;
                }
                size_t j = i;
                while (j < s.size() && !jinja_is_space(s[j]))
                    ++j;
                parts.push_back(s.substr(i, j - i));
                i = j;
            }
        } else {
            size_t e = s.size();
            while (true) {
                while (e > 0 && jinja_is_space(s[e - 1]))
                    --e;
                if (e == 0) break;
                if (maxsplit >= 0 && (int64_t)parts.size() == maxsplit) {
                    parts.push_back(s.substr(0, e)); // the rest keeps its leading whitespace
                    break;
                }
                size_t j = e;
                while (j > 0 && !jinja_is_space(s[j - 1]))
                    --j;
                parts.push_back(s.substr(j, e - j));
                e = j;
            }
            std::reverse(parts.begin(), parts.end());
        }
        return parts;
    }
    const std::u32string d = jinja_utf8_decode(jinja_str_arg(sep, "split", pos));
    if (d.empty()) jinja_fail(pos, "ValueError: empty separator");
    if (!from_right) {
        size_t i = 0;
        while (true) {
            const size_t j = (maxsplit >= 0 && (int64_t)parts.size() == maxsplit) ? std::u32string::npos : s.find(d, i);
            if (j == std::u32string::npos) {
                parts.push_back(s.substr(i));
                break;
            }
            parts.push_back(s.substr(i, j - i));
            i = j + d.size();
        }
    } else {
        size_t e = s.size();
        while (true) {
            size_t j = std::u32string::npos;
            if (!(maxsplit >= 0 && (int64_t)parts.size() == maxsplit) && e >= d.size()) j = s.rfind(d, e - d.size());
            if (j == std::u32string::npos) {
                parts.push_back(s.substr(0, e));
                break;
            }
            parts.push_back(s.substr(j + d.size(), e - j - d.size()));
            e = j;
        }
        std::reverse(parts.begin(), parts.end());
    }
    return parts;
}

std::u32string jinja_py_replace(const std::u32string & s, const std::u32string & old, const std::u32string & rep,
                                int64_t count) {
    std::u32string r;
    if (old.empty()) {
        int64_t n = 0;
        for (size_t i = 0; i <= s.size(); ++i) {
            if (count < 0 || n < count) {
                r += rep;
                ++n;
            }
            if (i < s.size()) r += s[i];
        }
        return r;
    }
    size_t i = 0;
    int64_t n = 0;
    while (true) {
        const size_t j = (count >= 0 && n >= count) ? std::u32string::npos : s.find(old, i);
        if (j == std::u32string::npos) {
            r += s.substr(i);
            break;
        }
        r += s.substr(i, j - i);
        r += rep;
        i = j + old.size();
        ++n;
    }
    return r;
}

bool jinja_is_line_break(char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
}

std::vector<std::u32string> jinja_py_splitlines(const std::u32string & s, bool keepends) {
    std::vector<std::u32string> lines;
    size_t i = 0;
    while (i < s.size()) {
        size_t j = i;
        while (j < s.size() && !jinja_is_line_break(s[j]))
            ++j;
        size_t e = j;
        if (j < s.size()) e = (s[j] == '\r' && j + 1 < s.size() && s[j + 1] == '\n') ? j + 2 : j + 1;
        lines.push_back(s.substr(i, (keepends ? e : j) - i));
        i = e;
    }
    return lines;
}

// Python's float(str): surrounding whitespace, sign, digits with '_', inf/nan
bool jinja_parse_py_float(const std::string & in, double * out) {
    const std::u32string t = jinja_py_strip(jinja_utf8_decode(in), jinja_value::none(), true, true);
    std::string s;
    for (char32_t c : t) {
        if (c >= 0x80) return false;
        s += (char)c;
    }
    std::string lo;
    for (char c : s)
        lo += (char)tolower((unsigned char)c);
    std::string body = lo;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
    if (body == "inf" || body == "infinity" || body == "nan") {
        const double v = body == "nan" ? NAN : INFINITY;
        *out = lo[0] == '-' ? -v : v;
        return true;
    }
    std::string clean;
    for (size_t k = 0; k < s.size(); ++k) {
        if (s[k] == '_') {
            if (k == 0 || k + 1 >= s.size() || !isdigit((unsigned char)s[k - 1]) || !isdigit((unsigned char)s[k + 1]))
                return false;
            continue;
        }
        if (!(isdigit((unsigned char)s[k]) || strchr("+-.eE", s[k]))) return false;
        clean += s[k];
    }
    if (clean.empty()) return false;
    char * end = nullptr;
    *out = strtod(clean.c_str(), &end);
    return end && *end == 0 && end != clean.c_str();
}

// Python's int(str, 10)
bool jinja_parse_py_int(const std::string & in, int64_t * out) {
    const std::u32string t = jinja_py_strip(jinja_utf8_decode(in), jinja_value::none(), true, true);
    size_t k = 0;
    bool neg = false;
    if (k < t.size() && (t[k] == '+' || t[k] == '-')) neg = t[k++] == '-';
    if (k >= t.size()) return false;
    __int128 v = 0;
    for (; k < t.size(); ++k) {
        if (t[k] == '_' && k + 1 < t.size() && t[k + 1] != '_' && k > 0 && isdigit((int)t[k - 1])) continue;
        if (t[k] < '0' || t[k] > '9') return false;
        v = v * 10 + (t[k] - '0');
        if (v > (__int128)INT64_MAX + 1) return false;
    }
    if (neg) v = -v;
    if (v > INT64_MAX) return false;
    *out = (int64_t)v;
    return true;
}
