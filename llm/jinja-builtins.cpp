// jinja-builtins.cpp - jinja2's filters and tests, the str/list/dict methods a sandboxed template may call, and
// the globals (range, namespace, dict, joiner; HF's raise_exception and strftime_now), with jinja2's argument
// names and edge cases (empty sequences give undefined, select/map/items give generators, ...).
#include "jinja-impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>

jinja_arg_binder::jinja_arg_binder(jinja_args & args, std::initializer_list<const char *> names, const char * fname,
                                   uint32_t pos)
    : vals(names.size()), given(names.size(), false) {
    if (args.pos.size() > names.size()) {
        jinja_fail(pos, std::string("TypeError: ") + fname + "() takes at most " + std::to_string(names.size()) +
                            " argument(s) (" + std::to_string(args.pos.size()) + " given)");
    }
    for (size_t k = 0; k < args.pos.size(); ++k) {
        vals[k] = args.pos[k];
        given[k] = true;
    }
    for (auto & kv : args.kw) {
        size_t k = 0;
        for (const char * n : names) {
            if (kv.first == n) break;
            ++k;
        }
        if (k == names.size()) {
            jinja_fail(pos,
                       std::string("TypeError: ") + fname + "() got an unexpected keyword argument '" + kv.first + "'");
        }
        if (given[k])
            jinja_fail(pos,
                       std::string("TypeError: ") + fname + "() got multiple values for argument '" + kv.first + "'");
        vals[k] = kv.second;
        given[k] = true;
    }
}

namespace {

using u32 = std::u32string;

// ---------------------------------------------------------------------------------------------------------
// helpers

int64_t want_int(const jinja_value & v, const char * what, uint32_t pos) {
    if (!v.is_integral()) {
        jinja_fail(pos,
                   std::string("TypeError: ") + what + ": an integer is required, not '" + jinja_type_name(v) + "'");
    }
    return v.as_int();
}

const std::string & want_str(const jinja_value & v, const char * what, uint32_t pos) {
    if (!v.is_string()) {
        jinja_fail(pos, std::string("TypeError: ") + what + ": a string is required, not '" + jinja_type_name(v) + "'");
    }
    return v.str();
}

jinja_value str_value(jinja_renderer & r, const u32 & s, uint32_t pos) {
    return r.make_string(jinja_utf8_encode(s), pos);
}

// jinja2's make_attrgetter: "a.b.0" looked up with getitem, part by part; an undefined part becomes dflt when
// one is given (not null)
jinja_value attr_get(jinja_renderer & r, const jinja_value & item, const jinja_value & attribute, uint32_t pos,
                     const jinja_value * dflt = nullptr) {
    auto fix = [&](jinja_value v) { return (dflt && v.is_undefined()) ? *dflt : v; };
    if (attribute.is_integral()) return fix(r.getitem(item, attribute, pos));
    const std::string & a = want_str(attribute, "attribute", pos);
    jinja_value cur = item;
    size_t b = 0;
    while (true) {
        const size_t e = a.find('.', b);
        const std::string part = a.substr(b, e == std::string::npos ? std::string::npos : e - b);
        int64_t idx;
        bool digits =
            !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return isdigit((unsigned char)c); });
        if (digits && jinja_parse_py_int(part, &idx))
            cur = fix(r.getitem(cur, jinja_value::integer(idx), pos));
        else
            cur = fix(r.getitem(cur, jinja_value::string(part), pos));
        if (e == std::string::npos) break;
        b = e + 1;
    }
    return cur;
}

jinja_value ignore_case(jinja_renderer & r, const jinja_value & v, uint32_t pos) {
    if (!v.is_string()) return v;
    return str_value(r, jinja_py_lower(jinja_utf8_decode(v.str())), pos);
}

jinja_value sort_key(jinja_renderer & r, const jinja_value & item, const jinja_value & attribute, bool case_sensitive,
                     uint32_t pos) {
    if (attribute.is_none() || attribute.is_undefined()) return case_sensitive ? item : ignore_case(r, item, pos);
    if (attribute.is_string() && attribute.str().find(',') != std::string::npos) {
        std::vector<jinja_value> keys;
        const std::string & a = attribute.str();
        size_t b = 0;
        while (true) {
            const size_t e = a.find(',', b);
            jinja_value k =
                attr_get(r, item, jinja_value::string(a.substr(b, e == std::string::npos ? e : e - b)), pos);
            keys.push_back(case_sensitive ? k : ignore_case(r, k, pos));
            if (e == std::string::npos) break;
            b = e + 1;
        }
        return jinja_value::list(std::move(keys), true);
    }
    const jinja_value k = attr_get(r, item, attribute, pos);
    return case_sensitive ? k : ignore_case(r, k, pos);
}

bool no_len(const jinja_value & v) { return v.type == JINJA_LIST && v.l->generator; }

// ---------------------------------------------------------------------------------------------------------
// filters

#define FILTER(name) jinja_value f_##name(jinja_renderer & r, const jinja_value & v, jinja_args & args, uint32_t pos)

FILTER(abs) {
    jinja_arg_binder b(args, {}, "abs", pos);
    if (v.type == JINJA_FLOAT) return jinja_value::floating(std::fabs(v.f));
    if (v.is_integral()) {
        if (v.as_int() == INT64_MIN) jinja_fail(pos, "unsupported: integer overflow (past 64 bits)");
        return jinja_value::integer(std::llabs(v.as_int()));
    }
    if (v.is_undefined()) jinja_fail_undefined(v, pos);
    jinja_fail(pos, std::string("TypeError: bad operand type for abs(): '") + jinja_type_name(v) + "'");
}

FILTER(attr) {
    jinja_arg_binder b(args, {"name"}, "attr", pos);
    const std::string name = jinja_to_str(b.get(0));
    jinja_value m;
    if (v.is_undefined()) jinja_fail_undefined(v, pos);
    if (jinja_find_method(v, name, &m)) return m;
    if (v.type == JINJA_NAMESPACE) {
        if (const jinja_value * x = v.ns->attrs.find(name)) return *x;
    }
    return jinja_value::undefined("'" + std::string(jinja_type_name(v)) + " object' has no attribute '" + name + "'");
}

FILTER(capitalize) {
    jinja_arg_binder b(args, {}, "capitalize", pos);
    return str_value(r, jinja_py_capitalize(jinja_utf8_decode(jinja_to_str(v))), pos);
}

FILTER(center) {
    jinja_arg_binder b(args, {"width"}, "center", pos);
    const int64_t width = b.has(0) ? want_int(b.get(0), "center", pos) : 80;
    const u32 s = jinja_utf8_decode(jinja_to_str(v));
    if (width <= (int64_t)s.size()) return jinja_value::string(jinja_to_str(v));
    if (width > (int64_t)r.lim.max_output) jinja_fail(pos, "string too long");
    const size_t marg = (size_t)width - s.size();
    const size_t left = marg / 2 + (marg & (size_t)width & 1);
    return str_value(r, u32(left, ' ') + s + u32(marg - left, ' '), pos);
}

FILTER(default) {
    jinja_arg_binder b(args, {"default_value", "boolean"}, "default", pos);
    const bool boolean = b.has(1) && jinja_truthy(b.get(1));
    if (v.is_undefined() || (boolean && !jinja_truthy(v))) return b.has(0) ? b.get(0) : jinja_value::string("");
    return v;
}

FILTER(dictsort) {
    jinja_arg_binder b(args, {"case_sensitive", "by", "reverse"}, "dictsort", pos);
    const bool cs = b.has(0) && jinja_truthy(b.get(0));
    const std::string by = b.has(1) ? jinja_to_str(b.get(1)) : "key";
    const bool reverse = b.has(2) && jinja_truthy(b.get(2));
    if (by != "key" && by != "value")
        jinja_fail(pos, "FilterArgumentError: You can only sort by either \"key\" or \"value\"");
    if (v.type != JINJA_DICT) {
        if (v.is_undefined()) jinja_fail_undefined(v, pos);
        jinja_fail(pos, std::string("AttributeError: dictsort: '") + jinja_type_name(v) +
                            "' object has no attribute 'items'");
    }
    std::vector<std::pair<jinja_value, jinja_value>> items; // (key, tuple)
    for (const auto & kv : v.d->items) {
        const jinja_value & k = by == "key" ? kv.first : kv.second;
        items.emplace_back(cs ? k : ignore_case(r, k, pos), jinja_value::list({kv.first, kv.second}, true));
    }
    std::stable_sort(items.begin(), items.end(), [&](const auto & x, const auto & y) {
        return reverse ? jinja_less(y.first, x.first, pos) : jinja_less(x.first, y.first, pos);
    });
    std::vector<jinja_value> out;
    for (auto & it : items)
        out.push_back(std::move(it.second));
    return jinja_value::list(std::move(out));
}

FILTER(escape) {
    jinja_arg_binder b(args, {}, "escape", pos);
    std::string o;
    for (char c : jinja_to_str(v)) {
        switch (c) {
            case '&':
                o += "&amp;";
                break;
            case '<':
                o += "&lt;";
                break;
            case '>':
                o += "&gt;";
                break;
            case '"':
                o += "&#34;";
                break;
            case '\'':
                o += "&#39;";
                break;
            default:
                o += c;
        }
    }
    return r.make_string(std::move(o), pos);
}

FILTER(first) {
    jinja_arg_binder b(args, {}, "first", pos);
    const std::vector<jinja_value> items = r.iterate(v, pos);
    if (items.empty()) return jinja_value::undefined("No first item, sequence was empty.");
    return items[0];
}

FILTER(last) {
    jinja_arg_binder b(args, {}, "last", pos);
    if (no_len(v)) jinja_fail(pos, "TypeError: 'generator' object is not reversible");
    if (v.type != JINJA_UNDEFINED && v.type != JINJA_LIST && v.type != JINJA_DICT && v.type != JINJA_STRING) {
        jinja_fail(pos, std::string("TypeError: '") + jinja_type_name(v) + "' object is not reversible");
    }
    const std::vector<jinja_value> items = r.iterate(v, pos);
    if (items.empty()) return jinja_value::undefined("No last item, sequence was empty.");
    return items.back();
}

jinja_value to_float(const jinja_value & v, const jinja_value & dflt) {
    if (v.is_number()) return jinja_value::floating(v.as_float());
    double d;
    if (v.is_string() && jinja_parse_py_float(v.str(), &d)) return jinja_value::floating(d);
    return dflt;
}

FILTER(float) {
    (void)r;
    jinja_arg_binder b(args, {"default"}, "float", pos);
    return to_float(v, b.has(0) ? b.get(0) : jinja_value::floating(0.0));
}

FILTER(int) {
    (void)r;
    jinja_arg_binder b(args, {"default", "base"}, "int", pos);
    const jinja_value dflt = b.has(0) ? b.get(0) : jinja_value::integer(0);
    const int64_t base = b.has(1) ? want_int(b.get(1), "int", pos) : 10;
    if (v.is_integral()) return jinja_value::integer(v.as_int());
    if (v.type == JINJA_FLOAT) {
        if (std::isnan(v.f)) return dflt;
        if (std::isinf(v.f)) jinja_fail(pos, "OverflowError: cannot convert float infinity to integer");
        if (std::fabs(v.f) >= 9.2e18) jinja_fail(pos, "unsupported: integer overflow (past 64 bits)");
        return jinja_value::integer((int64_t)v.f);
    }
    if (v.is_string()) {
        int64_t i;
        if (base == 10 && jinja_parse_py_int(v.str(), &i)) return jinja_value::integer(i);
        if (base != 10) {
            std::string s =
                jinja_utf8_encode(jinja_py_strip(jinja_utf8_decode(v.str()), jinja_value::none(), true, true));
            char * end = nullptr;
            errno = 0;
            const long long x = strtoll(s.c_str(), &end, (int)base);
            if (!s.empty() && end && *end == 0 && errno == 0 && base >= 2 && base <= 36) return jinja_value::integer(x);
        }
        double d;
        if (jinja_parse_py_float(v.str(), &d)) {
            if (std::isnan(d)) return dflt;
            if (std::isinf(d)) jinja_fail(pos, "OverflowError: cannot convert float infinity to integer");
            if (std::fabs(d) >= 9.2e18) jinja_fail(pos, "unsupported: integer overflow (past 64 bits)");
            return jinja_value::integer((int64_t)d);
        }
    }
    return dflt;
}

FILTER(format) {
    if (!args.pos.empty() && !args.kw.empty()) {
        jinja_fail(pos, "FilterArgumentError: can't handle positional and keyword arguments at the same time");
    }
    jinja_value a;
    if (!args.kw.empty()) {
        a = jinja_value::dict();
        for (auto & kv : args.kw)
            a.d->set(jinja_value::string(kv.first), kv.second);
    } else {
        a = jinja_value::list(args.pos, true);
    }
    return r.make_string(jinja_percent_format(r, jinja_to_str(v), a, pos), pos);
}

FILTER(indent) {
    jinja_arg_binder b(args, {"width", "first", "blank"}, "indent", pos);
    if (!v.is_string()) {
        if (v.is_undefined()) jinja_fail_undefined(v, pos);
        jinja_fail(pos, std::string("TypeError: indent: can only indent a str, not '") + jinja_type_name(v) + "'");
    }
    std::string ind;
    if (b.has(0) && b.get(0).is_string()) {
        ind = b.get(0).str();
    } else {
        const int64_t w = b.has(0) ? want_int(b.get(0), "indent", pos) : 4;
        if (w > 4096) jinja_fail(pos, "unsupported: indent width over 4096");
        ind.assign((size_t)std::max<int64_t>(0, w), ' ');
    }
    const bool first = b.has(1) && jinja_truthy(b.get(1));
    const bool blank = b.has(2) && jinja_truthy(b.get(2));
    const std::vector<u32> lines = jinja_py_splitlines(jinja_utf8_decode(v.str() + "\n"), false);
    std::string o;
    for (size_t k = 0; k < lines.size(); ++k) {
        const std::string line = jinja_utf8_encode(lines[k]);
        if (k > 0) {
            o += '\n';
            if (blank || !line.empty()) o += ind;
        }
        o += line;
        if (o.size() > r.lim.max_output) jinja_fail(pos, "string too long");
    }
    if (first) o = ind + o;
    return r.make_string(std::move(o), pos);
}

FILTER(items) {
    (void)r;
    jinja_arg_binder b(args, {}, "items", pos);
    if (v.is_undefined()) return jinja_value::generator({});
    if (v.type != JINJA_DICT) jinja_fail(pos, "TypeError: Can only get item pairs from a mapping.");
    std::vector<jinja_value> out;
    for (const auto & kv : v.d->items)
        out.push_back(jinja_value::list({kv.first, kv.second}, true));
    return jinja_value::generator(std::move(out));
}

FILTER(join) {
    jinja_arg_binder b(args, {"d", "attribute"}, "join", pos);
    const std::string sep = b.has(0) ? jinja_to_str(b.get(0)) : "";
    std::string o;
    bool first = true;
    for (const auto & it : r.iterate(v, pos)) {
        if (!first) o += sep;
        first = false;
        o += jinja_to_str(b.has(1) && !b.get(1).is_none() ? attr_get(r, it, b.get(1), pos) : it);
        if (o.size() > r.lim.max_output) jinja_fail(pos, "string too long");
    }
    return r.make_string(std::move(o), pos);
}

FILTER(length) {
    (void)r;
    jinja_arg_binder b(args, {}, "length", pos);
    switch (v.type) {
        case JINJA_UNDEFINED:
            return jinja_value::integer(0);
        case JINJA_STRING:
            return jinja_value::integer((int64_t)jinja_utf8_length(v.str()));
        case JINJA_LIST:
            if (!v.l->generator) return jinja_value::integer((int64_t)v.l->items.size());
            break;
        case JINJA_DICT:
            return jinja_value::integer((int64_t)v.d->items.size());
        default:
            break;
    }
    jinja_fail(pos, std::string("TypeError: object of type '") + jinja_type_name(v) + "' has no len()");
}

FILTER(list) {
    jinja_arg_binder b(args, {}, "list", pos);
    return jinja_value::list(r.iterate(v, pos));
}

FILTER(lower) {
    jinja_arg_binder b(args, {}, "lower", pos);
    return str_value(r, jinja_py_lower(jinja_utf8_decode(jinja_to_str(v))), pos);
}

FILTER(upper) {
    jinja_arg_binder b(args, {}, "upper", pos);
    return str_value(r, jinja_py_upper(jinja_utf8_decode(jinja_to_str(v))), pos);
}

FILTER(map) {
    std::vector<jinja_value> out;
    const std::vector<jinja_value> items = r.iterate(v, pos);
    if (args.pos.empty()) {
        jinja_value attribute, dflt = jinja_value::none();
        bool has_attr = false;
        for (auto & kv : args.kw) {
            if (kv.first == "attribute")
                attribute = kv.second, has_attr = true;
            else if (kv.first == "default")
                dflt = kv.second;
            else
                jinja_fail(pos, "FilterArgumentError: Unexpected keyword argument '" + kv.first + "'");
        }
        if (!has_attr) jinja_fail(pos, "FilterArgumentError: map requires a filter argument");
        for (const auto & it : items)
            out.push_back(attr_get(r, it, attribute, pos, dflt.is_none() ? nullptr : &dflt));
        return jinja_value::generator(std::move(out));
    }
    const std::string name = want_str(args.pos[0], "map", pos);
    jinja_args rest;
    rest.pos.assign(args.pos.begin() + 1, args.pos.end());
    rest.kw = args.kw;
    if (!jinja_find_filter(name)) jinja_fail(pos, "unknown filter '" + name + "'");
    for (const auto & it : items) {
        jinja_args a = rest;
        out.push_back(r.apply_filter(name, it, a, pos));
    }
    return jinja_value::generator(std::move(out));
}

jinja_value select_impl(jinja_renderer & r, const jinja_value & v, jinja_args & args, uint32_t pos, bool attr,
                        bool keep) {
    const std::vector<jinja_value> items = r.iterate(v, pos);
    size_t off = 0;
    jinja_value attribute;
    if (attr) {
        if (args.pos.empty()) jinja_fail(pos, "FilterArgumentError: Missing parameter for attribute name");
        attribute = args.pos[0];
        off = 1;
    }
    std::string test;
    jinja_args rest;
    if (args.pos.size() > off) {
        test = want_str(args.pos[off], "select", pos);
        if (!jinja_find_test(test)) jinja_fail(pos, "unknown test '" + test + "'");
        rest.pos.assign(args.pos.begin() + (long)off + 1, args.pos.end());
    }
    rest.kw = args.kw;
    std::vector<jinja_value> out;
    for (const auto & it : items) {
        const jinja_value x = attr ? attr_get(r, it, attribute, pos) : it;
        bool ok;
        if (test.empty()) {
            ok = jinja_truthy(x);
        } else {
            jinja_args a = rest;
            ok = r.apply_test(test, x, a, pos);
        }
        if (ok == keep) out.push_back(it);
    }
    return jinja_value::generator(std::move(out));
}

FILTER(select) { return select_impl(r, v, args, pos, false, true); }
FILTER(reject) { return select_impl(r, v, args, pos, false, false); }
FILTER(selectattr) { return select_impl(r, v, args, pos, true, true); }
FILTER(rejectattr) { return select_impl(r, v, args, pos, true, false); }

jinja_value min_max(jinja_renderer & r, const jinja_value & v, jinja_args & args, uint32_t pos, bool want_max) {
    jinja_arg_binder b(args, {"case_sensitive", "attribute"}, want_max ? "max" : "min", pos);
    const bool cs = b.has(0) && jinja_truthy(b.get(0));
    const jinja_value attribute = b.has(1) ? b.get(1) : jinja_value::none();
    const std::vector<jinja_value> items = r.iterate(v, pos);
    if (items.empty()) return jinja_value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    jinja_value best_key = sort_key(r, items[0], attribute, cs, pos);
    for (size_t k = 1; k < items.size(); ++k) {
        jinja_value key = sort_key(r, items[k], attribute, cs, pos);
        if (want_max ? jinja_less(best_key, key, pos) : jinja_less(key, best_key, pos)) {
            best = k;
            best_key = std::move(key);
        }
    }
    return items[best];
}

FILTER(max) { return min_max(r, v, args, pos, true); }
FILTER(min) { return min_max(r, v, args, pos, false); }

FILTER(replace) {
    jinja_arg_binder b(args, {"old", "new", "count"}, "replace", pos);
    if (!b.has(0) || !b.has(1)) jinja_fail(pos, "TypeError: replace() missing required arguments 'old' and 'new'");
    const int64_t count = b.has(2) && !b.get(2).is_none() ? want_int(b.get(2), "replace", pos) : -1;
    const u32 s = jinja_utf8_decode(jinja_to_str(v));
    const u32 old = jinja_utf8_decode(jinja_to_str(b.get(0)));
    const u32 rep = jinja_utf8_decode(jinja_to_str(b.get(1)));
    if (old.empty() && rep.size() * (s.size() + 1) > r.lim.max_output) jinja_fail(pos, "string too long");
    if (!old.empty() && rep.size() > old.size() && s.size() / old.size() * rep.size() > r.lim.max_output) {
        jinja_fail(pos, "string too long");
    }
    return str_value(r, jinja_py_replace(s, old, rep, count), pos);
}

FILTER(reverse) {
    jinja_arg_binder b(args, {}, "reverse", pos);
    if (v.is_string()) {
        u32 s = jinja_utf8_decode(v.str());
        std::reverse(s.begin(), s.end());
        return str_value(r, s, pos);
    }
    if (no_len(v)) {
        std::vector<jinja_value> items = v.l->items;
        std::reverse(items.begin(), items.end());
        return jinja_value::list(std::move(items));
    }
    std::vector<jinja_value> items = r.iterate(v, pos);
    std::reverse(items.begin(), items.end());
    return jinja_value::generator(std::move(items));
}

FILTER(round) {
    (void)r;
    jinja_arg_binder b(args, {"precision", "method"}, "round", pos);
    const int64_t prec = b.has(0) ? want_int(b.get(0), "round", pos) : 0;
    const std::string method = b.has(1) ? jinja_to_str(b.get(1)) : "common";
    if (method != "common" && method != "ceil" && method != "floor") {
        jinja_fail(pos, "FilterArgumentError: method must be common, ceil or floor");
    }
    if (v.is_undefined()) jinja_fail_undefined(v, pos);
    if (!v.is_number())
        jinja_fail(pos, std::string("TypeError: round: a number is required, not '") + jinja_type_name(v) + "'");
    if (method == "common") {
        if (v.is_integral() && prec >= 0) return jinja_value::integer(v.as_int());
        const double x = v.as_float();
        if (std::isnan(x) || std::isinf(x)) return jinja_value::floating(x);
        if (prec > 300 || prec < -300) return jinja_value::floating(prec > 0 ? x : 0.0 * x);
        if (prec >= 0) {
            char buf[720]; // 1e308 with 300 decimals fits
            snprintf(buf, sizeof(buf), "%.*f", (int)prec, x);
            const double res = strtod(buf, nullptr);
            return v.is_integral() ? jinja_value::integer((int64_t)res) : jinja_value::floating(res);
        }
        const double p = std::pow(10.0, (double)-prec);
        const double res = std::nearbyint(x / p) * p;
        return v.is_integral() ? jinja_value::integer((int64_t)res) : jinja_value::floating(res);
    }
    const double p = std::pow(10.0, (double)prec);
    const double x = v.as_float() * p;
    return jinja_value::floating((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

FILTER(safe) {
    jinja_arg_binder b(args, {}, "safe", pos);
    return v.is_string() ? v : r.make_string(jinja_to_str(v), pos);
}

FILTER(sort) {
    jinja_arg_binder b(args, {"reverse", "case_sensitive", "attribute"}, "sort", pos);
    const bool reverse = b.has(0) && jinja_truthy(b.get(0));
    const bool cs = b.has(1) && jinja_truthy(b.get(1));
    const jinja_value attribute = b.has(2) ? b.get(2) : jinja_value::none();
    const std::vector<jinja_value> items = r.iterate(v, pos);
    std::vector<std::pair<jinja_value, size_t>> keyed;
    for (size_t k = 0; k < items.size(); ++k)
        keyed.emplace_back(sort_key(r, items[k], attribute, cs, pos), k);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto & x, const auto & y) {
        return reverse ? jinja_less(y.first, x.first, pos) : jinja_less(x.first, y.first, pos);
    });
    std::vector<jinja_value> out;
    for (auto & kv : keyed)
        out.push_back(items[kv.second]);
    return jinja_value::list(std::move(out));
}

FILTER(string) {
    jinja_arg_binder b(args, {}, "string", pos);
    return v.is_string() ? v : r.make_string(jinja_to_str(v), pos);
}

FILTER(sum) {
    jinja_arg_binder b(args, {"attribute", "start"}, "sum", pos);
    jinja_value acc = b.has(1) ? b.get(1) : jinja_value::integer(0);
    for (const auto & it : r.iterate(v, pos)) {
        const jinja_value x = b.has(0) && !b.get(0).is_none() ? attr_get(r, it, b.get(0), pos) : it;
        if (acc.is_string() || x.is_string()) jinja_fail(pos, "TypeError: sum() can't sum strings");
        if (!(acc.is_number() && x.is_number())) {
            if (x.is_undefined()) jinja_fail_undefined(x, pos);
            jinja_fail(pos, std::string("TypeError: unsupported operand type(s) for +: '") + jinja_type_name(acc) +
                                "' and '" + jinja_type_name(x) + "'");
        }
        if (acc.is_integral() && x.is_integral()) {
            const __int128 s = (__int128)acc.as_int() + x.as_int();
            if (s > INT64_MAX || s < INT64_MIN) jinja_fail(pos, "unsupported: integer overflow (past 64 bits)");
            acc = jinja_value::integer((int64_t)s);
        } else {
            acc = jinja_value::floating(acc.as_float() + x.as_float());
        }
    }
    return acc;
}

FILTER(title) {
    jinja_arg_binder b(args, {}, "title", pos);
    // jinja2: words split on runs of [-\s({\[<], each word's first character upper-cased, the rest lowered
    const u32 s = jinja_utf8_decode(jinja_to_str(v));
    auto sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || jinja_is_space(c); };
    u32 o;
    bool at_word_start = true;
    for (char32_t c : s) {
        if (sep(c)) {
            o += c;
            at_word_start = true;
        } else if (at_word_start) {
            o += jinja_py_upper(u32(1, c));
            at_word_start = false;
        } else {
            o += jinja_py_lower(u32(1, c));
        }
    }
    return str_value(r, o, pos);
}

FILTER(tojson) {
    jinja_arg_binder b(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson", pos);
    jinja_json_opts o;
    o.ensure_ascii = b.has(0) && jinja_truthy(b.get(0));
    o.sort_keys = b.has(3) && jinja_truthy(b.get(3));
    if (b.has(1) && !b.get(1).is_none()) {
        o.indent_set = true;
        if (b.get(1).is_string()) {
            o.indent = b.get(1).str();
        } else {
            const int64_t w = want_int(b.get(1), "tojson indent", pos);
            if (w > 4096) jinja_fail(pos, "unsupported: indent width over 4096");
            o.indent.assign((size_t)std::max<int64_t>(0, w), ' ');
        }
        o.item_sep = ",";
    }
    if (b.has(2) && !b.get(2).is_none()) {
        const jinja_value & sep = b.get(2);
        if (sep.type != JINJA_LIST || sep.l->items.size() != 2 || !sep.l->items[0].is_string() ||
            !sep.l->items[1].is_string()) {
            jinja_fail(pos, "TypeError: tojson: separators must be a pair of strings");
        }
        o.item_sep = sep.l->items[0].str();
        o.key_sep = sep.l->items[1].str();
    }
    return r.make_string(jinja_to_json(v, o, pos), pos);
}

FILTER(trim) {
    jinja_arg_binder b(args, {"chars"}, "trim", pos);
    const jinja_value chars = b.has(0) ? b.get(0) : jinja_value::none();
    if (!chars.is_none()) want_str(chars, "trim", pos);
    return str_value(r, jinja_py_strip(jinja_utf8_decode(jinja_to_str(v)), chars, true, true), pos);
}

FILTER(unique) {
    jinja_arg_binder b(args, {"case_sensitive", "attribute"}, "unique", pos);
    const bool cs = b.has(0) && jinja_truthy(b.get(0));
    const jinja_value attribute = b.has(1) ? b.get(1) : jinja_value::none();
    std::vector<jinja_value> seen, out;
    for (const auto & it : r.iterate(v, pos)) {
        jinja_value key = sort_key(r, it, attribute, cs, pos);
        if (!jinja_hashable(key))
            jinja_fail(pos, std::string("TypeError: unhashable type: '") + jinja_type_name(key) + "'");
        bool dup = false;
        for (const auto & s : seen) {
            if (jinja_equal(s, key)) {
                dup = true;
                break;
            }
        }
        if (dup) continue;
        seen.push_back(std::move(key));
        out.push_back(it);
    }
    return jinja_value::generator(std::move(out));
}

FILTER(wordcount) {
    (void)r;
    jinja_arg_binder b(args, {}, "wordcount", pos);
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : jinja_utf8_decode(jinja_to_str(v))) {
        const bool w = c == '_' || jinja_is_alpha(c) || jinja_is_digit(c);
        if (w && !in_word) ++n;
        in_word = w;
    }
    return jinja_value::integer(n);
}

FILTER(truncate) {
    jinja_arg_binder b(args, {"length", "killwords", "end", "leeway"}, "truncate", pos);
    const int64_t length = b.has(0) ? want_int(b.get(0), "truncate", pos) : 255;
    const bool killwords = b.has(1) && jinja_truthy(b.get(1));
    const u32 end = jinja_utf8_decode(b.has(2) ? jinja_to_str(b.get(2)) : "...");
    const int64_t leeway = b.has(3) && !b.get(3).is_none() ? want_int(b.get(3), "truncate", pos) : 5;
    if (length < (int64_t)end.size()) jinja_fail(pos, "truncate: length must be at least the end's length");
    if (leeway < 0) jinja_fail(pos, "truncate: leeway must be positive");
    const u32 s = jinja_utf8_decode(jinja_to_str(v));
    if ((int64_t)s.size() <= length + leeway) return str_value(r, s, pos);
    u32 cut = s.substr(0, (size_t)(length - (int64_t)end.size()));
    if (killwords) return str_value(r, cut + end, pos);
    const size_t sp = cut.rfind(' ');
    if (sp != u32::npos) cut = cut.substr(0, sp);
    return str_value(r, cut + end, pos);
}

#undef FILTER

struct filter_entry {
    const char * name;
    jinja_filter_fn fn;
};

const filter_entry k_filters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

// ---------------------------------------------------------------------------------------------------------
// tests

#define TEST(name) bool t_##name(jinja_renderer & r, const jinja_value & v, jinja_args & args, uint32_t pos)
#define NOARGS(name)                                                                                                   \
    (void)r;                                                                                                           \
    jinja_arg_binder b(args, {}, name, pos)

TEST(defined) {
    NOARGS("defined");
    return !v.is_undefined();
}
TEST(undefined) {
    NOARGS("undefined");
    return v.is_undefined();
}
TEST(none) {
    NOARGS("none");
    return v.is_none();
}
TEST(boolean) {
    NOARGS("boolean");
    return v.type == JINJA_BOOL;
}
TEST(true) {
    NOARGS("true");
    return v.type == JINJA_BOOL && v.b;
}
TEST(false) {
    NOARGS("false");
    return v.type == JINJA_BOOL && !v.b;
}
TEST(integer) {
    NOARGS("integer");
    return v.type == JINJA_INT;
}
TEST(float) {
    NOARGS("float");
    return v.type == JINJA_FLOAT;
}
TEST(number) {
    NOARGS("number");
    return v.is_number();
}
TEST(string) {
    NOARGS("string");
    return v.is_string();
}
TEST(mapping) {
    NOARGS("mapping");
    return v.type == JINJA_DICT;
}
TEST(iterable) {
    NOARGS("iterable");
    return v.type == JINJA_UNDEFINED || v.type == JINJA_LIST || v.type == JINJA_DICT || v.type == JINJA_STRING;
}
TEST(sequence) {
    NOARGS("sequence");
    return v.type == JINJA_UNDEFINED || (v.type == JINJA_LIST && !v.l->generator) || v.type == JINJA_DICT ||
           v.type == JINJA_STRING;
}
TEST(callable) {
    NOARGS("callable");
    return v.type == JINJA_FUNC;
}
TEST(escaped) {
    NOARGS("escaped");
    (void)v;
    return false;
}
TEST(lower) {
    NOARGS("lower");
    bool cased = false;
    for (char32_t c : jinja_utf8_decode(jinja_to_str(v))) {
        if (jinja_is_cased_upper(c)) return false;
        if (jinja_is_cased_lower(c)) cased = true;
    }
    return cased;
}
TEST(upper) {
    NOARGS("upper");
    bool cased = false;
    for (char32_t c : jinja_utf8_decode(jinja_to_str(v))) {
        if (jinja_is_cased_lower(c)) return false;
        if (jinja_is_cased_upper(c)) cased = true;
    }
    return cased;
}

bool mod_equals(jinja_renderer & r, const jinja_value & v, const jinja_value & d, int64_t want, uint32_t pos) {
    if (v.is_undefined()) jinja_fail_undefined(v, pos);
    if (!v.is_number() || !d.is_number()) {
        jinja_fail(pos, std::string("TypeError: unsupported operand type(s) for %: '") + jinja_type_name(v) +
                            "' and '" + jinja_type_name(d) + "'");
    }
    if (d.as_float() == 0.0) jinja_fail(pos, "ZeroDivisionError: integer modulo by zero");
    if (v.is_integral() && d.is_integral()) {
        int64_t m = d.as_int() == -1 ? 0 : v.as_int() % d.as_int();
        if (m != 0 && ((m < 0) != (d.as_int() < 0))) m += d.as_int();
        return m == want;
    }
    (void)r;
    double m = std::fmod(v.as_float(), d.as_float());
    if (m != 0.0 && ((m < 0) != (d.as_float() < 0))) m += d.as_float();
    return m == (double)want;
}

TEST(odd) {
    jinja_arg_binder b(args, {}, "odd", pos);
    return mod_equals(r, v, jinja_value::integer(2), 1, pos);
}
TEST(even) {
    jinja_arg_binder b(args, {}, "even", pos);
    return mod_equals(r, v, jinja_value::integer(2), 0, pos);
}
TEST(divisibleby) {
    jinja_arg_binder b(args, {"num"}, "divisibleby", pos);
    if (!b.has(0)) jinja_fail(pos, "TypeError: divisibleby() missing 1 required positional argument: 'num'");
    return mod_equals(r, v, b.get(0), 0, pos);
}

const jinja_value & one_arg(jinja_arg_binder & b, const char * name, uint32_t pos) {
    if (!b.has(0)) jinja_fail(pos, std::string("TypeError: ") + name + "() missing 1 required positional argument");
    return b.get(0);
}

TEST(eq) {
    (void)r;
    jinja_arg_binder b(args, {"other"}, "eq", pos);
    return jinja_equal(v, one_arg(b, "eq", pos));
}
TEST(ne) {
    (void)r;
    jinja_arg_binder b(args, {"other"}, "ne", pos);
    return !jinja_equal(v, one_arg(b, "ne", pos));
}
TEST(lt) {
    (void)r;
    jinja_arg_binder b(args, {"other"}, "lt", pos);
    return jinja_compare(v, one_arg(b, "lt", pos), pos) < 0;
}
TEST(le) {
    (void)r;
    jinja_arg_binder b(args, {"other"}, "le", pos);
    return jinja_compare(v, one_arg(b, "le", pos), pos) <= 0;
}
TEST(gt) {
    (void)r;
    jinja_arg_binder b(args, {"other"}, "gt", pos);
    return jinja_compare(v, one_arg(b, "gt", pos), pos) > 0;
}
TEST(ge) {
    (void)r;
    jinja_arg_binder b(args, {"other"}, "ge", pos);
    return jinja_compare(v, one_arg(b, "ge", pos), pos) >= 0;
}
TEST(in) {
    jinja_arg_binder b(args, {"seq"}, "in", pos);
    const jinja_value & seq = one_arg(b, "in", pos);
    switch (seq.type) {
        case JINJA_UNDEFINED:
            return false;
        case JINJA_STRING:
            if (!v.is_string()) {
                jinja_fail(pos, std::string("TypeError: 'in <string>' requires string as left operand, not ") +
                                    jinja_type_name(v));
            }
            return seq.str().find(v.str()) != std::string::npos;
        case JINJA_LIST:
            for (const auto & x : seq.l->items) {
                if (jinja_equal(x, v)) return true;
            }
            return false;
        case JINJA_DICT:
            if (!jinja_hashable(v))
                jinja_fail(pos, std::string("TypeError: unhashable type: '") + jinja_type_name(v) + "'");
            return seq.d->find(v) != nullptr;
        default:
            (void)r;
            jinja_fail(pos, std::string("TypeError: argument of type '") + jinja_type_name(seq) + "' is not iterable");
    }
}
TEST(sameas) {
    (void)r;
    jinja_arg_binder b(args, {"other"}, "sameas", pos);
    const jinja_value & o = one_arg(b, "sameas", pos);
    if (v.type != o.type) return false;
    switch (v.type) {
        case JINJA_NONE:
            return true;
        case JINJA_UNDEFINED:
            return false;
        case JINJA_BOOL:
            return v.b == o.b;
        case JINJA_INT:
            return v.i == o.i && v.i >= -5 && v.i <= 256; // CPython's small int cache
        case JINJA_STRING:
            return v.s == o.s;
        case JINJA_LIST:
            return v.l == o.l;
        case JINJA_DICT:
            return v.d == o.d;
        case JINJA_FUNC:
            return v.fn == o.fn;
        case JINJA_NAMESPACE:
            return v.ns == o.ns;
        default:
            return false;
    }
}
TEST(filter) {
    (void)r;
    jinja_arg_binder b(args, {}, "filter", pos);
    return v.is_string() && jinja_find_filter(v.str());
}
TEST(test) {
    (void)r;
    jinja_arg_binder b(args, {}, "test", pos);
    return v.is_string() && jinja_find_test(v.str());
}

#undef TEST
#undef NOARGS

struct test_entry {
    const char * name;
    jinja_test_fn fn;
};

const test_entry k_tests[] = {
    {"!=", t_ne},
    {"<", t_lt},
    {"<=", t_le},
    {"==", t_eq},
    {">", t_gt},
    {">=", t_ge},
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"escaped", t_escaped},
    {"even", t_even},
    {"false", t_false},
    {"filter", t_filter},
    {"float", t_float},
    {"ge", t_ge},
    {"greaterthan", t_gt},
    {"gt", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"lessthan", t_lt},
    {"lower", t_lower},
    {"lt", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"test", t_test},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

} // namespace

jinja_filter_fn jinja_find_filter(std::string_view name) {
    for (const auto & f : k_filters) {
        if (name == f.name) return f.fn;
    }
    return nullptr;
}

jinja_test_fn jinja_find_test(std::string_view name) {
    for (const auto & t : k_tests) {
        if (name == t.name) return t.fn;
    }
    return nullptr;
}

// the methods and globals live in jinja-methods.cpp
