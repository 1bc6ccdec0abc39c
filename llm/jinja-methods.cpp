// jinja-methods.cpp - what a sandboxed template can call besides filters: str/list/dict methods (those that
// would change a list or dict are refused, as ImmutableSandboxedEnvironment does), the globals (range,
// namespace, dict, joiner, and HF's raise_exception and strftime_now), and Python's two string formattings
// (str % args, str.format).
#include "jinja-impl.h"

#include <cmath>
#include <cstring>
#include <ctime>

namespace {

using u32 = std::u32string;
using method_fn = jinja_value (*)(jinja_renderer &, const jinja_value & self, jinja_args & args, uint32_t pos);

jinja_value bind(const char * name, method_fn fn, const jinja_value & self) {
    jinja_value m;
    m.type = JINJA_FUNC;
    m.fn = std::make_shared<jinja_func>();
    m.fn->name = name;
    m.fn->builtin = fn;
    m.fn->self = self;
    return m;
}

jinja_value ustr(jinja_renderer & r, const u32 & s, uint32_t pos) { return r.make_string(jinja_utf8_encode(s), pos); }

u32 self_u(const jinja_value & self) { return jinja_utf8_decode(self.str()); }

int64_t int_arg(const jinja_arg_binder & b, size_t i, int64_t dflt, const char * what, uint32_t pos) {
    if (!b.has(i) || b.get(i).is_none()) return dflt;
    if (!b.get(i).is_integral()) {
        jinja_fail(pos, std::string("TypeError: ") + what + ": an integer is required, not '" +
                            jinja_type_name(b.get(i)) + "'");
    }
    return b.get(i).as_int();
}

const jinja_value & req(const jinja_arg_binder & b, size_t i, const char * what, uint32_t pos) {
    if (!b.has(i)) jinja_fail(pos, std::string("TypeError: ") + what + "() missing a required argument");
    return b.get(i);
}

// start/end arguments of find/count/startswith as Python clamps them
void span(const jinja_arg_binder & b, size_t i, size_t n, size_t * lo, size_t * hi, const char * what, uint32_t pos) {
    int64_t s = int_arg(b, i, 0, what, pos), e = int_arg(b, i + 1, (int64_t)n, what, pos);
    if (s < 0) s = std::max<int64_t>(0, s + (int64_t)n);
    if (e < 0) e = std::max<int64_t>(0, e + (int64_t)n);
    *lo = (size_t)std::min<int64_t>(s, (int64_t)n);
    *hi = (size_t)std::min<int64_t>(e, (int64_t)n);
}

#define METHOD(name) jinja_value m_##name(jinja_renderer & r, const jinja_value & self, jinja_args & args, uint32_t pos)

// ---------------------------------------------------------------------------------------------------------
// str

jinja_value strip_common(jinja_renderer & r, const jinja_value & self, jinja_args & args, uint32_t pos, bool l, bool rt,
                         const char * name) {
    jinja_arg_binder b(args, {"chars"}, name, pos);
    const jinja_value chars = b.has(0) ? b.get(0) : jinja_value::none();
    if (!chars.is_none()) jinja_str_arg(chars, name, pos);
    return ustr(r, jinja_py_strip(self_u(self), chars, l, rt), pos);
}
METHOD(strip) { return strip_common(r, self, args, pos, true, true, "strip"); }
METHOD(lstrip) { return strip_common(r, self, args, pos, true, false, "lstrip"); }
METHOD(rstrip) { return strip_common(r, self, args, pos, false, true, "rstrip"); }

jinja_value split_common(jinja_renderer & r, const jinja_value & self, jinja_args & args, uint32_t pos, bool right) {
    jinja_arg_binder b(args, {"sep", "maxsplit"}, right ? "rsplit" : "split", pos);
    const jinja_value sep = b.has(0) ? b.get(0) : jinja_value::none();
    const int64_t maxsplit = int_arg(b, 1, -1, "split", pos);
    std::vector<jinja_value> out;
    for (const auto & p : jinja_py_split(self_u(self), sep, maxsplit, right, pos))
        out.push_back(ustr(r, p, pos));
    return jinja_value::list(std::move(out));
}
METHOD(split) { return split_common(r, self, args, pos, false); }
METHOD(rsplit) { return split_common(r, self, args, pos, true); }

METHOD(splitlines) {
    jinja_arg_binder b(args, {"keepends"}, "splitlines", pos);
    std::vector<jinja_value> out;
    for (const auto & p : jinja_py_splitlines(self_u(self), b.has(0) && jinja_truthy(b.get(0))))
        out.push_back(ustr(r, p, pos));
    return jinja_value::list(std::move(out));
}

jinja_value affix_common(jinja_renderer & r, const jinja_value & self, jinja_args & args, uint32_t pos, bool start) {
    (void)r;
    const char * name = start ? "startswith" : "endswith";
    jinja_arg_binder b(args, {"prefix", "start", "end"}, name, pos);
    const jinja_value & p = req(b, 0, name, pos);
    const u32 s = self_u(self);
    size_t lo, hi;
    span(b, 1, s.size(), &lo, &hi, name, pos);
    std::vector<jinja_value> cands;
    if (p.type == JINJA_LIST && p.l->tuple)
        cands = p.l->items;
    else
        cands.push_back(p);
    for (const auto & c : cands) {
        const u32 x = jinja_utf8_decode(jinja_str_arg(c, name, pos));
        if (lo > hi || hi - lo < x.size()) continue;
        if (start ? s.compare(lo, x.size(), x) == 0 : s.compare(hi - x.size(), x.size(), x) == 0)
            return jinja_value::boolean(true);
    }
    return jinja_value::boolean(false);
}
METHOD(startswith) { return affix_common(r, self, args, pos, true); }
METHOD(endswith) { return affix_common(r, self, args, pos, false); }

jinja_value find_common(jinja_renderer & r, const jinja_value & self, jinja_args & args, uint32_t pos, bool right,
                        bool raise, const char * name) {
    (void)r;
    jinja_arg_binder b(args, {"sub", "start", "end"}, name, pos);
    const u32 sub = jinja_utf8_decode(jinja_str_arg(req(b, 0, name, pos), name, pos));
    const u32 s = self_u(self);
    size_t lo, hi;
    span(b, 1, s.size(), &lo, &hi, name, pos);
    int64_t found = -1;
    if (lo <= hi && hi - lo >= sub.size()) {
        const u32 part = s.substr(lo, hi - lo);
        const size_t k = right ? part.rfind(sub) : part.find(sub);
        if (k != u32::npos) found = (int64_t)(k + lo);
    }
    if (found < 0 && raise) jinja_fail(pos, "ValueError: substring not found");
    return jinja_value::integer(found);
}
METHOD(find) { return find_common(r, self, args, pos, false, false, "find"); }
METHOD(rfind) { return find_common(r, self, args, pos, true, false, "rfind"); }
METHOD(index) { return find_common(r, self, args, pos, false, true, "index"); }
METHOD(rindex) { return find_common(r, self, args, pos, true, true, "rindex"); }

METHOD(count) {
    (void)r;
    jinja_arg_binder b(args, {"sub", "start", "end"}, "count", pos);
    const u32 sub = jinja_utf8_decode(jinja_str_arg(req(b, 0, "count", pos), "count", pos));
    const u32 s = self_u(self);
    size_t lo, hi;
    span(b, 1, s.size(), &lo, &hi, "count", pos);
    if (lo > hi) return jinja_value::integer(0);
    const u32 part = s.substr(lo, hi - lo);
    if (sub.empty()) return jinja_value::integer((int64_t)part.size() + 1);
    int64_t n = 0;
    for (size_t k = part.find(sub); k != u32::npos; k = part.find(sub, k + sub.size()))
        ++n;
    return jinja_value::integer(n);
}

METHOD(replace) {
    jinja_arg_binder b(args, {"old", "new", "count"}, "replace", pos);
    const u32 old = jinja_utf8_decode(jinja_str_arg(req(b, 0, "replace", pos), "replace", pos));
    const u32 rep = jinja_utf8_decode(jinja_str_arg(req(b, 1, "replace", pos), "replace", pos));
    const u32 s = self_u(self);
    if ((old.empty() ? s.size() + 1 : s.size() / old.size()) * rep.size() > r.lim.max_output)
        jinja_fail(pos, "string too long");
    return ustr(r, jinja_py_replace(s, old, rep, int_arg(b, 2, -1, "replace", pos)), pos);
}

#define CASE_METHOD(name, fn)                                                                                          \
    METHOD(name) {                                                                                                     \
        jinja_arg_binder b(args, {}, #name, pos);                                                                      \
        return ustr(r, fn(self_u(self)), pos);                                                                         \
    }
CASE_METHOD(upper, jinja_py_upper)
CASE_METHOD(lower, jinja_py_lower)
CASE_METHOD(casefold, jinja_py_lower)
CASE_METHOD(title, jinja_py_title)
CASE_METHOD(capitalize, jinja_py_capitalize)
#undef CASE_METHOD

METHOD(swapcase) {
    jinja_arg_binder b(args, {}, "swapcase", pos);
    u32 s = self_u(self);
    for (auto & c : s)
        c = jinja_is_cased_upper(c) ? jinja_to_lower(c) : jinja_to_upper(c);
    return ustr(r, s, pos);
}

#define IS_METHOD(name, pred)                                                                                          \
    METHOD(name) {                                                                                                     \
        (void)r;                                                                                                       \
        jinja_arg_binder b(args, {}, #name, pos);                                                                      \
        const u32 s = self_u(self);                                                                                    \
        if (s.empty()) return jinja_value::boolean(false);                                                             \
        for (char32_t c : s) {                                                                                         \
            if (!(pred)) return jinja_value::boolean(false);                                                           \
        }                                                                                                              \
        return jinja_value::boolean(true);                                                                             \
    }
IS_METHOD(isalpha, jinja_is_alpha(c))
IS_METHOD(isdigit, jinja_is_digit(c))
IS_METHOD(isnumeric, jinja_is_digit(c))
IS_METHOD(isdecimal, jinja_is_digit(c))
IS_METHOD(isalnum, jinja_is_alpha(c) || jinja_is_digit(c))
IS_METHOD(isspace, jinja_is_space(c))
#undef IS_METHOD

METHOD(islower) {
    (void)r;
    jinja_arg_binder b(args, {}, "islower", pos);
    bool cased = false;
    for (char32_t c : self_u(self)) {
        if (jinja_is_cased_upper(c)) return jinja_value::boolean(false);
        if (jinja_is_cased_lower(c)) cased = true;
    }
    return jinja_value::boolean(cased);
}

METHOD(isupper) {
    (void)r;
    jinja_arg_binder b(args, {}, "isupper", pos);
    bool cased = false;
    for (char32_t c : self_u(self)) {
        if (jinja_is_cased_lower(c)) return jinja_value::boolean(false);
        if (jinja_is_cased_upper(c)) cased = true;
    }
    return jinja_value::boolean(cased);
}

METHOD(join) {
    jinja_arg_binder b(args, {"iterable"}, "join", pos);
    std::string o;
    size_t k = 0;
    for (const auto & it : r.iterate(req(b, 0, "join", pos), pos)) {
        if (!it.is_string()) {
            jinja_fail(pos, "TypeError: sequence item " + std::to_string(k) + ": expected str instance, " +
                                jinja_type_name(it) + " found");
        }
        if (k++) o += self.str();
        o += it.str();
        if (o.size() > r.lim.max_output) jinja_fail(pos, "string too long");
    }
    return r.make_string(std::move(o), pos);
}

jinja_value pad_common(jinja_renderer & r, const jinja_value & self, jinja_args & args, uint32_t pos, int how,
                       const char * name) {
    jinja_arg_binder b(args, {"width", "fillchar"}, name, pos);
    const int64_t width = int_arg(b, 0, 0, name, pos);
    u32 fill = U" ";
    if (b.has(1)) fill = jinja_utf8_decode(jinja_str_arg(b.get(1), name, pos));
    if (fill.size() != 1) jinja_fail(pos, "TypeError: The fill character must be exactly one character long");
    const u32 s = self_u(self);
    if (width <= (int64_t)s.size()) return self;
    if (width > (int64_t)r.lim.max_output) jinja_fail(pos, "string too long");
    const size_t marg = (size_t)width - s.size();
    size_t left = how < 0 ? 0 : how > 0 ? marg : marg / 2 + (marg & (size_t)width & 1);
    return ustr(r, u32(left, fill[0]) + s + u32(marg - left, fill[0]), pos);
}
METHOD(ljust) { return pad_common(r, self, args, pos, -1, "ljust"); }
METHOD(rjust) { return pad_common(r, self, args, pos, 1, "rjust"); }
METHOD(center) { return pad_common(r, self, args, pos, 0, "center"); }

METHOD(zfill) {
    jinja_arg_binder b(args, {"width"}, "zfill", pos);
    const int64_t width = int_arg(b, 0, 0, "zfill", pos);
    u32 s = self_u(self);
    if (width <= (int64_t)s.size()) return self;
    if (width > (int64_t)r.lim.max_output) jinja_fail(pos, "string too long");
    const size_t fill = (size_t)width - s.size();
    const size_t at = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    s.insert(at, u32(fill, '0'));
    return ustr(r, s, pos);
}

jinja_value partition_common(jinja_renderer & r, const jinja_value & self, jinja_args & args, uint32_t pos,
                             bool right) {
    const char * name = right ? "rpartition" : "partition";
    jinja_arg_binder b(args, {"sep"}, name, pos);
    const u32 sep = jinja_utf8_decode(jinja_str_arg(req(b, 0, name, pos), name, pos));
    if (sep.empty()) jinja_fail(pos, "ValueError: empty separator");
    const u32 s = self_u(self);
    const size_t k = right ? s.rfind(sep) : s.find(sep);
    if (k == u32::npos) {
        if (right) return jinja_value::list({jinja_value::string(""), jinja_value::string(""), self}, true);
        return jinja_value::list({self, jinja_value::string(""), jinja_value::string("")}, true);
    }
    return jinja_value::list({ustr(r, s.substr(0, k), pos), ustr(r, sep, pos), ustr(r, s.substr(k + sep.size()), pos)},
                             true);
}
METHOD(partition) { return partition_common(r, self, args, pos, false); }
METHOD(rpartition) { return partition_common(r, self, args, pos, true); }

METHOD(removeprefix) {
    jinja_arg_binder b(args, {"prefix"}, "removeprefix", pos);
    const std::string & p = jinja_str_arg(req(b, 0, "removeprefix", pos), "removeprefix", pos);
    const std::string & s = self.str();
    if (s.compare(0, p.size(), p) == 0) return r.make_string(s.substr(p.size()), pos);
    return self;
}

METHOD(removesuffix) {
    jinja_arg_binder b(args, {"suffix"}, "removesuffix", pos);
    const std::string & p = jinja_str_arg(req(b, 0, "removesuffix", pos), "removesuffix", pos);
    const std::string & s = self.str();
    if (!p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
        return r.make_string(s.substr(0, s.size() - p.size()), pos);
    }
    return self;
}

METHOD(format) { return r.make_string(jinja_str_format(r, self.str(), args, pos), pos); }

// ---------------------------------------------------------------------------------------------------------
// list and dict

METHOD(list_count) {
    (void)r;
    jinja_arg_binder b(args, {"value"}, "count", pos);
    const jinja_value & x = req(b, 0, "count", pos);
    int64_t n = 0;
    for (const auto & it : self.l->items)
        n += jinja_equal(it, x) ? 1 : 0;
    return jinja_value::integer(n);
}

METHOD(list_index) {
    (void)r;
    jinja_arg_binder b(args, {"value"}, "index", pos);
    const jinja_value & x = req(b, 0, "index", pos);
    for (size_t k = 0; k < self.l->items.size(); ++k) {
        if (jinja_equal(self.l->items[k], x)) return jinja_value::integer((int64_t)k);
    }
    jinja_fail(pos, "ValueError: " + jinja_repr(x) + " is not in list");
}

METHOD(copy) {
    (void)r;
    jinja_arg_binder b(args, {}, "copy", pos);
    if (self.type == JINJA_LIST) return jinja_value::list(self.l->items, self.l->tuple);
    jinja_value d = jinja_value::dict();
    d.d->items = self.d->items;
    d.d->depth = self.d->depth;
    return d;
}

METHOD(dict_get) {
    (void)r;
    jinja_arg_binder b(args, {"key", "default"}, "get", pos);
    const jinja_value & key = req(b, 0, "get", pos);
    if (!jinja_hashable(key))
        jinja_fail(pos, std::string("TypeError: unhashable type: '") + jinja_type_name(key) + "'");
    if (const jinja_value * v = self.d->find(key)) return *v;
    return b.has(1) ? b.get(1) : jinja_value::none();
}

METHOD(dict_items) {
    (void)r;
    jinja_arg_binder b(args, {}, "items", pos);
    std::vector<jinja_value> out;
    for (const auto & kv : self.d->items)
        out.push_back(jinja_value::list({kv.first, kv.second}, true));
    return jinja_value::list(std::move(out));
}

METHOD(dict_keys) {
    (void)r;
    jinja_arg_binder b(args, {}, "keys", pos);
    std::vector<jinja_value> out;
    for (const auto & kv : self.d->items)
        out.push_back(kv.first);
    return jinja_value::list(std::move(out));
}

METHOD(dict_values) {
    (void)r;
    jinja_arg_binder b(args, {}, "values", pos);
    std::vector<jinja_value> out;
    for (const auto & kv : self.d->items)
        out.push_back(kv.second);
    return jinja_value::list(std::move(out));
}

struct method_entry {
    const char * name;
    method_fn fn;
};

const method_entry k_str_methods[] = {
    {"capitalize", m_capitalize},
    {"casefold", m_casefold},
    {"center", m_center},
    {"count", m_count},
    {"endswith", m_endswith},
    {"find", m_find},
    {"format", m_format},
    {"index", m_index},
    {"isalnum", m_isalnum},
    {"isalpha", m_isalpha},
    {"isdecimal", m_isdecimal},
    {"isdigit", m_isdigit},
    {"islower", m_islower},
    {"isnumeric", m_isnumeric},
    {"isspace", m_isspace},
    {"isupper", m_isupper},
    {"join", m_join},
    {"ljust", m_ljust},
    {"lower", m_lower},
    {"lstrip", m_lstrip},
    {"partition", m_partition},
    {"removeprefix", m_removeprefix},
    {"removesuffix", m_removesuffix},
    {"replace", m_replace},
    {"rfind", m_rfind},
    {"rindex", m_rindex},
    {"rjust", m_rjust},
    {"rpartition", m_rpartition},
    {"rsplit", m_rsplit},
    {"rstrip", m_rstrip},
    {"split", m_split},
    {"splitlines", m_splitlines},
    {"startswith", m_startswith},
    {"strip", m_strip},
    {"swapcase", m_swapcase},
    {"title", m_title},
    {"upper", m_upper},
    {"zfill", m_zfill},
};

const method_entry k_list_methods[] = {{"count", m_list_count}, {"index", m_list_index}, {"copy", m_copy}};
const method_entry k_dict_methods[] = {
    {"get", m_dict_get}, {"items", m_dict_items}, {"keys", m_dict_keys}, {"values", m_dict_values}, {"copy", m_copy}};

// Python attributes that exist but that the immutable sandbox refuses (or that we do not provide)
const char * const k_str_other[] = {"encode",      "expandtabs", "format_map", "isascii",  "isidentifier",
                                    "isprintable", "istitle",    "maketrans",  "translate"};
const char * const k_list_unsafe[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
const char * const k_dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", "fromkeys"};

// ---------------------------------------------------------------------------------------------------------
// globals

METHOD(g_range) {
    (void)self;
    if (!args.kw.empty()) jinja_fail(pos, "TypeError: range() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 3) jinja_fail(pos, "TypeError: range expected 1 to 3 arguments");
    int64_t v[3] = {0, 0, 1};
    for (size_t k = 0; k < args.pos.size(); ++k) {
        if (!args.pos[k].is_integral()) {
            jinja_fail(pos, std::string("TypeError: '") + jinja_type_name(args.pos[k]) +
                                "' object cannot be interpreted as an integer");
        }
    }
    if (args.pos.size() == 1)
        v[1] = args.pos[0].as_int();
    else {
        v[0] = args.pos[0].as_int();
        v[1] = args.pos[1].as_int();
        if (args.pos.size() == 3) v[2] = args.pos[2].as_int();
    }
    if (v[2] == 0) jinja_fail(pos, "ValueError: range() arg 3 must not be zero");
    const __int128 span = v[2] > 0 ? (__int128)v[1] - v[0] : (__int128)v[0] - v[1];
    const __int128 step = v[2] > 0 ? v[2] : -(__int128)v[2];
    const __int128 n = span <= 0 ? 0 : (span + step - 1) / step;
    if (n > 100000) {
        jinja_fail(pos, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    std::vector<jinja_value> out;
    for (__int128 k = 0; k < n; ++k) {
        r.step(pos);
        out.push_back(jinja_value::integer((int64_t)(v[0] + k * v[2])));
    }
    return jinja_value::list(std::move(out));
}

jinja_value dict_from_args(jinja_renderer & r, jinja_args & args, uint32_t pos, const char * name) {
    if (args.pos.size() > 1) jinja_fail(pos, std::string("TypeError: ") + name + " expected at most 1 argument");
    jinja_value d = jinja_value::dict();
    if (!args.pos.empty()) {
        const jinja_value & src = args.pos[0];
        if (src.type == JINJA_DICT || src.type == JINJA_NAMESPACE) {
            for (const auto & kv : src.type == JINJA_DICT ? src.d->items : src.ns->attrs.items)
                d.d->set(kv.first, kv.second);
        } else {
            for (const auto & it : r.iterate(src, pos)) {
                const std::vector<jinja_value> kv = it.type == JINJA_LIST ? it.l->items : r.iterate(it, pos);
                if (kv.size() != 2)
                    jinja_fail(pos, "ValueError: dictionary update sequence element has length " +
                                        std::to_string(kv.size()) + "; 2 is required");
                if (!jinja_hashable(kv[0]))
                    jinja_fail(pos, std::string("TypeError: unhashable type: '") + jinja_type_name(kv[0]) + "'");
                d.d->set(kv[0], kv[1]);
            }
        }
    }
    for (auto & kv : args.kw)
        d.d->set(jinja_value::string(kv.first), kv.second);
    return d;
}

METHOD(g_dict) {
    (void)self;
    return dict_from_args(r, args, pos, "dict");
}

METHOD(g_namespace) {
    (void)self;
    jinja_value d = dict_from_args(r, args, pos, "namespace");
    jinja_value ns;
    ns.type = JINJA_NAMESPACE;
    ns.ns = std::make_shared<jinja_namespace>();
    for (const auto & kv : d.d->items) {
        if (!kv.first.is_string()) jinja_fail(pos, "TypeError: namespace attribute names must be strings");
        ns.ns->attrs.items.push_back(kv);
    }
    r.namespaces.push_back(ns.ns);
    return ns;
}

METHOD(g_raise_exception) {
    (void)r;
    (void)self;
    const std::string msg = args.pos.empty() ? std::string() : jinja_to_str(args.pos[0]);
    jinja_fail(pos, "raise_exception: " + msg);
}

METHOD(g_strftime_now) {
    (void)self;
    jinja_arg_binder b(args, {"format"}, "strftime_now", pos);
    std::string fmt = jinja_str_arg(req(b, 0, "strftime_now", pos), "strftime_now", pos);
    if (fmt.size() > 1024) jinja_fail(pos, "unsupported: strftime_now format longer than 1024 bytes");
    // Python's datetime handles %f (microseconds) itself
    for (size_t k = 0; (k = fmt.find('%', k)) != std::string::npos; k += 2) {
        if (k + 1 < fmt.size() && fmt[k + 1] == 'f') fmt.replace(k, 2, "000000");
    }
    const time_t t = r.lim.now >= 0 ? (time_t)r.lim.now : time(nullptr);
    struct tm tmv;
    if (r.lim.now >= 0)
        gmtime_r(&t, &tmv);
    else
        localtime_r(&t, &tmv);
    const std::string f = " " + fmt;
    std::vector<char> buf(256 + f.size() * 64);
    const size_t n = strftime(buf.data(), buf.size(), f.c_str(), &tmv);
    if (n == 0) jinja_fail(pos, "strftime_now: format result too long");
    return r.make_string(std::string(buf.data() + 1, n - 1), pos);
}

METHOD(joiner_call) {
    (void)r;
    jinja_arg_binder b(args, {}, "joiner", pos);
    // self: a namespace holding the separator and whether it was called before
    jinja_dict & st = self.ns->attrs;
    if (!jinja_truthy(*st.find(std::string_view("used")))) {
        st.set(jinja_value::string("used"), jinja_value::boolean(true));
        return jinja_value::string("");
    }
    return *st.find(std::string_view("sep"));
}

METHOD(g_joiner) {
    (void)self;
    jinja_arg_binder b(args, {"sep"}, "joiner", pos);
    jinja_value st;
    st.type = JINJA_NAMESPACE;
    st.ns = std::make_shared<jinja_namespace>();
    st.ns->attrs.set(jinja_value::string("sep"),
                     b.has(0) ? jinja_value::string(jinja_to_str(b.get(0))) : jinja_value::string(", "));
    st.ns->attrs.set(jinja_value::string("used"), jinja_value::boolean(false));
    r.namespaces.push_back(st.ns);
    return bind("joiner", m_joiner_call, st);
}

const method_entry k_globals[] = {
    {"dict", m_g_dict},           {"joiner", m_g_joiner},
    {"namespace", m_g_namespace}, {"raise_exception", m_g_raise_exception},
    {"range", m_g_range},         {"strftime_now", m_g_strftime_now},
};

#undef METHOD

template <size_t N> const method_entry * find_in(const method_entry (&tab)[N], const std::string & name) {
    for (const auto & e : tab) {
        if (name == e.name) return &e;
    }
    return nullptr;
}

template <size_t N> bool listed(const char * const (&tab)[N], const std::string & name) {
    for (const char * e : tab) {
        if (name == e) return true;
    }
    return false;
}

// ---------------------------------------------------------------------------------------------------------
// formatting helpers

// apply width / left-justify / zero padding to an already converted field
std::string pad_field(const std::string & s, int64_t width, char align, char32_t fill) {
    const int64_t len = (int64_t)jinja_utf8_length(s);
    if (width <= len) return s;
    const size_t marg = (size_t)(width - len);
    std::string f;
    jinja_utf8_append(f, fill);
    auto rep = [&](size_t n) {
        std::string o;
        for (size_t k = 0; k < n; ++k)
            o += f;
        return o;
    };
    if (align == '<') return s + rep(marg);
    if (align == '^') return rep(marg / 2) + s + rep(marg - marg / 2);
    if (align == '=') { // after the sign
        if (!s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) return s.substr(0, 1) + rep(marg) + s.substr(1);
        return rep(marg) + s;
    }
    return rep(marg) + s;
}

// snprintf into a string of the size it needs
template <typename T> std::string c_format(const std::string & spec, T x) {
    const int n = snprintf(nullptr, 0, spec.c_str(), x);
    if (n <= 0) return std::string();
    std::string r((size_t)n + 1, '\0');
    snprintf(r.data(), r.size(), spec.c_str(), x);
    r.resize((size_t)n);
    return r;
}

std::string c_number(char conv, const std::string & flags, int64_t prec, const jinja_value & v, uint32_t pos) {
    std::string spec = "%" + flags;
    if (prec >= 0) spec += "." + std::to_string(std::min<int64_t>(prec, 300));
    if (strchr("diouxX", conv)) {
        int64_t i;
        if (v.is_integral())
            i = v.as_int();
        else if (v.type == JINJA_FLOAT && strchr("diu", conv)) {
            if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18)
                jinja_fail(pos, "unsupported: %d of a huge or non-finite float");
            i = (int64_t)v.f;
        } else {
            jinja_fail(pos,
                       std::string("TypeError: %") + conv + " format: a number is required, not " + jinja_type_name(v));
        }
        const char c = (conv == 'i' || conv == 'u') ? 'd' : conv;
        spec += "ll";
        spec += c;
        std::string s = c_format(spec, (long long)i);
        if (conv == 'o' && flags.find('#') != std::string::npos && s.find('0') != std::string::npos) {
            const size_t z = s.find_first_of("0123456789"); // C prints 0NN, Python 0oNN
            if (z != std::string::npos && s[z] == '0' && i != 0) s.insert(z + 1, "o");
        }
        return s;
    }
    if (!v.is_number()) jinja_fail(pos, std::string("TypeError: must be real number, not ") + jinja_type_name(v));
    spec += conv;
    return c_format(spec, v.as_float());
}

} // namespace

bool jinja_find_method(const jinja_value & obj, const std::string & name, jinja_value * out) {
    const method_entry * e = nullptr;
    bool unsafe = false;
    switch (obj.type) {
        case JINJA_STRING:
            e = find_in(k_str_methods, name);
            if (!e && listed(k_str_other, name)) {
                *out = jinja_value::undefined("unsupported: str method '" + name + "'");
                return true;
            }
            break;
        case JINJA_LIST:
            if (obj.l->generator) return false;
            e = find_in(k_list_methods, name);
            unsafe = listed(k_list_unsafe, name);
            break;
        case JINJA_DICT:
            e = find_in(k_dict_methods, name);
            unsafe = listed(k_dict_unsafe, name);
            break;
        default:
            return false;
    }
    if (unsafe) {
        *out = jinja_value::undefined("SecurityError: access to attribute '" + name + "' of '" + jinja_type_name(obj) +
                                      "' object is unsafe.");
        return true;
    }
    if (!e) return false;
    *out = bind(e->name, e->fn, obj);
    return true;
}

bool jinja_find_global(const std::string & name, jinja_value * out) {
    const method_entry * e = find_in(k_globals, name);
    if (!e) return false;
    *out = bind(e->name, e->fn, jinja_value::none());
    return true;
}

std::string jinja_percent_format(jinja_renderer & r, const std::string & fmt, const jinja_value & args, uint32_t pos) {
    std::vector<jinja_value> vals;
    const jinja_value * mapping = nullptr;
    if (args.type == JINJA_LIST && args.l->tuple)
        vals = args.l->items;
    else {
        vals.push_back(args);
        if (args.type == JINJA_DICT) mapping = &args;
    }
    size_t next = 0;
    bool used_mapping = false;
    auto take = [&]() -> const jinja_value & {
        if (next >= vals.size()) jinja_fail(pos, "TypeError: not enough arguments for format string");
        return vals[next++];
    };
    std::string o;
    for (size_t k = 0; k < fmt.size(); ++k) {
        if (fmt[k] != '%') {
            o += fmt[k];
            continue;
        }
        if (++k >= fmt.size()) jinja_fail(pos, "ValueError: incomplete format");
        const jinja_value * arg = nullptr;
        jinja_value keyed;
        if (fmt[k] == '(') {
            if (!mapping) jinja_fail(pos, "TypeError: format requires a mapping");
            const size_t e = fmt.find(')', k);
            if (e == std::string::npos) jinja_fail(pos, "ValueError: incomplete format key");
            const jinja_value * v = mapping->d->find(std::string_view(fmt).substr(k + 1, e - k - 1));
            if (!v) jinja_fail(pos, "KeyError: " + jinja_repr_string(fmt.substr(k + 1, e - k - 1)));
            keyed = *v;
            arg = &keyed;
            used_mapping = true;
            k = e + 1;
        }
        std::string flags;
        while (k < fmt.size() && strchr("-+ #0", fmt[k]))
            flags += fmt[k++];
        int64_t width = -1, prec = -1;
        if (k < fmt.size() && fmt[k] == '*') {
            width = take().as_int();
            ++k;
        } else {
            while (k < fmt.size() && isdigit((unsigned char)fmt[k]))
                width = std::max<int64_t>(width, 0) * 10 + (fmt[k++] - '0'), width = std::min<int64_t>(width, 100000);
        }
        if (k < fmt.size() && fmt[k] == '.') {
            ++k;
            prec = 0;
            if (k < fmt.size() && fmt[k] == '*') {
                prec = take().as_int();
                ++k;
            } else {
                while (k < fmt.size() && isdigit((unsigned char)fmt[k]))
                    prec = std::min<int64_t>(prec * 10 + (fmt[k++] - '0'), 100000);
            }
        }
        while (k < fmt.size() && strchr("hlL", fmt[k]))
            ++k;
        if (k >= fmt.size()) jinja_fail(pos, "ValueError: incomplete format");
        const char conv = fmt[k];
        if (conv == '%') {
            o += '%';
            continue;
        }
        if (!arg) arg = &take();
        std::string field;
        if (conv == 's' || conv == 'r' || conv == 'a') {
            field = conv == 's' ? jinja_to_str(*arg) : jinja_repr(*arg);
            if (prec >= 0) field = jinja_utf8_encode(jinja_utf8_decode(field).substr(0, (size_t)prec));
            const bool left = flags.find('-') != std::string::npos;
            field = pad_field(field, width, left ? '<' : '>', ' ');
        } else if (conv == 'c') {
            if (arg->is_integral()) {
                if (arg->as_int() < 0 || arg->as_int() > 0x10FFFF)
                    jinja_fail(pos, "OverflowError: %c arg not in range(0x110000)");
                jinja_utf8_append(field, (char32_t)arg->as_int());
            } else if (arg->is_string() && jinja_utf8_length(arg->str()) == 1) {
                field = arg->str();
            } else {
                jinja_fail(pos, "TypeError: %c requires int or char");
            }
            field = pad_field(field, width, flags.find('-') != std::string::npos ? '<' : '>', ' ');
        } else if (strchr("diouxXeEfFgG", conv)) {
            std::string fl = flags;
            if (width >= 0) fl += std::to_string(width);
            field = c_number(conv, fl, prec, *arg, pos);
        } else {
            jinja_fail(pos, std::string("ValueError: unsupported format character '") + conv + "'");
        }
        o += field;
        if (o.size() > r.lim.max_output) jinja_fail(pos, "string too long");
    }
    if (!used_mapping && !mapping && next < vals.size()) {
        jinja_fail(pos, "TypeError: not all arguments converted during string formatting");
    }
    return o;
}

// format(value, spec) for str.format's fields: [[fill]align][sign][#][0][width][,_][.precision][type]
static std::string format_spec(const jinja_value & v, const std::string & spec_in, uint32_t pos) {
    const u32 spec = jinja_utf8_decode(spec_in);
    size_t k = 0;
    char32_t fill = ' ';
    char align = 0;
    if (spec.size() >= 2 && strchr("<>=^", (int)(spec[1] < 128 ? spec[1] : 'x'))) {
        fill = spec[0];
        align = (char)spec[1];
        k = 2;
    } else if (!spec.empty() && spec[0] < 128 && strchr("<>=^", (int)spec[0])) {
        align = (char)spec[0];
        k = 1;
    }
    char sign = 0;
    if (k < spec.size() && (spec[k] == '+' || spec[k] == '-' || spec[k] == ' ')) sign = (char)spec[k++];
    bool alt = false;
    if (k < spec.size() && spec[k] == '#') alt = true, ++k;
    if (k < spec.size() && spec[k] == '0') {
        if (!align) fill = '0', align = '=';
        ++k;
    }
    int64_t width = -1, prec = -1;
    while (k < spec.size() && spec[k] >= '0' && spec[k] <= '9')
        width = std::min<int64_t>(std::max<int64_t>(width, 0) * 10 + (spec[k++] - '0'), 100000);
    char grouping = 0;
    if (k < spec.size() && (spec[k] == ',' || spec[k] == '_')) grouping = (char)spec[k++];
    if (k < spec.size() && spec[k] == '.') {
        ++k;
        prec = 0;
        while (k < spec.size() && spec[k] >= '0' && spec[k] <= '9')
            prec = std::min<int64_t>(prec * 10 + (spec[k++] - '0'), 1000);
    }
    char type = 0;
    if (k < spec.size()) type = (char)spec[k++];
    if (k != spec.size() || grouping) jinja_fail(pos, "unsupported: format spec '" + spec_in + "'");
    std::string body;
    if (v.is_string() || (!v.is_number() && (type == 0 || type == 's'))) {
        if (type && type != 's')
            jinja_fail(pos, std::string("ValueError: Unknown format code '") + type + "' for object of type 'str'");
        if (sign || alt) jinja_fail(pos, "ValueError: sign not allowed in string format specifier");
        body = jinja_to_str(v);
        if (prec >= 0) body = jinja_utf8_encode(jinja_utf8_decode(body).substr(0, (size_t)prec));
        return pad_field(body, width, align ? align : '<', fill);
    }
    if (!v.is_number())
        jinja_fail(pos,
                   std::string("TypeError: unsupported format string passed to ") + jinja_type_name(v) + ".__format__");
    std::string flags;
    if (sign == '+' || sign == ' ') flags += sign;
    if (alt) flags += '#';
    if (type == 0 && v.type == JINJA_FLOAT) {
        body = prec >= 0 ? c_number('g', flags, prec, v, pos) : jinja_float_repr(v.f);
        if (sign == '+' && v.f >= 0 && prec < 0) body = "+" + body;
    } else if (type == 0 || type == 'd' || type == 'n') {
        if (type && !v.is_integral()) jinja_fail(pos, "ValueError: Unknown format code 'd' for object of type 'float'");
        body = v.type == JINJA_FLOAT ? jinja_float_repr(v.f) : c_number('d', flags, -1, v, pos);
    } else if (strchr("xXob", type)) {
        if (!v.is_integral())
            jinja_fail(pos, std::string("ValueError: Unknown format code '") + type + "' for object of type 'float'");
        if (type == 'b') {
            uint64_t x = v.as_int() < 0 ? 0 - (uint64_t)v.as_int() : (uint64_t)v.as_int();
            std::string bits;
            do
                bits.insert(bits.begin(), (char)('0' + (x & 1)));
            while (x >>= 1);
            body = (v.as_int() < 0 ? "-"
                                   : (sign == '+'   ? "+"
                                      : sign == ' ' ? " "
                                                    : "")) +
                   std::string(alt ? "0b" : "") + bits;
        } else {
            body = c_number(type, flags, -1, v, pos);
        }
    } else if (strchr("eEfFgG%", type)) {
        if (type == '%') {
            body = c_number('f', flags, prec < 0 ? 6 : prec, jinja_value::floating(v.as_float() * 100.0), pos) + "%";
        } else {
            body = c_number(type, flags, prec < 0 ? 6 : prec, v, pos);
        }
    } else {
        jinja_fail(pos, std::string("ValueError: Unknown format code '") + type + "'");
    }
    return pad_field(body, width, align ? align : '>', fill);
}

std::string jinja_str_format(jinja_renderer & r, const std::string & fmt, jinja_args & args, uint32_t pos) {
    std::string o;
    size_t auto_idx = 0;
    bool used_auto = false, used_manual = false;
    for (size_t k = 0; k < fmt.size(); ++k) {
        const char c = fmt[k];
        if (c == '}') {
            if (k + 1 < fmt.size() && fmt[k + 1] == '}') {
                o += '}';
                ++k;
                continue;
            }
            jinja_fail(pos, "ValueError: Single '}' encountered in format string");
        }
        if (c != '{') {
            o += c;
            continue;
        }
        if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
            o += '{';
            ++k;
            continue;
        }
        // the field up to the matching '}' (nested {} in the spec are not supported)
        const size_t e = fmt.find('}', k);
        if (e == std::string::npos) jinja_fail(pos, "ValueError: expected '}' before end of string");
        std::string field = fmt.substr(k + 1, e - k - 1);
        if (field.find('{') != std::string::npos)
            jinja_fail(pos, "unsupported: nested replacement fields in str.format");
        k = e;
        std::string spec, conv;
        const size_t colon = field.find(':');
        if (colon != std::string::npos) {
            spec = field.substr(colon + 1);
            field = field.substr(0, colon);
        }
        const size_t bang = field.find('!');
        if (bang != std::string::npos) {
            conv = field.substr(bang + 1);
            field = field.substr(0, bang);
            if (conv != "r" && conv != "s" && conv != "a")
                jinja_fail(pos, "ValueError: Unknown conversion specifier " + conv);
        }
        size_t p = 0;
        while (p < field.size() && field[p] != '.' && field[p] != '[')
            ++p;
        const std::string head = field.substr(0, p);
        jinja_value v;
        if (head.empty()) {
            if (used_manual)
                jinja_fail(pos,
                           "ValueError: cannot switch from manual field specification to automatic field numbering");
            used_auto = true;
            if (auto_idx >= args.pos.size())
                jinja_fail(pos, "IndexError: Replacement index " + std::to_string(auto_idx) +
                                    " out of range for positional args tuple");
            v = args.pos[auto_idx++];
        } else if (std::all_of(head.begin(), head.end(), [](char ch) { return isdigit((unsigned char)ch); })) {
            if (used_auto)
                jinja_fail(pos,
                           "ValueError: cannot switch from automatic field numbering to manual field specification");
            used_manual = true;
            const size_t idx = (size_t)std::min<long long>(atoll(head.c_str()), 1 << 20);
            if (idx >= args.pos.size())
                jinja_fail(pos, "IndexError: Replacement index " + head + " out of range for positional args tuple");
            v = args.pos[idx];
        } else {
            bool found = false;
            for (auto & kv : args.kw) {
                if (kv.first == head) {
                    v = kv.second;
                    found = true;
                }
            }
            if (!found) jinja_fail(pos, "KeyError: " + jinja_repr_string(head));
        }
        while (p < field.size()) {
            if (field[p] == '.') {
                size_t q = p + 1;
                while (q < field.size() && field[q] != '.' && field[q] != '[')
                    ++q;
                v = r.getattr(v, field.substr(p + 1, q - p - 1), pos);
                p = q;
            } else {
                const size_t q = field.find(']', p);
                if (q == std::string::npos) jinja_fail(pos, "ValueError: Missing ']' in format string");
                const std::string key = field.substr(p + 1, q - p - 1);
                int64_t idx;
                const bool is_num = !key.empty() && std::all_of(key.begin(), key.end(),
                                                                [](char ch) { return isdigit((unsigned char)ch); });
                v = r.getitem(
                    v, is_num && jinja_parse_py_int(key, &idx) ? jinja_value::integer(idx) : jinja_value::string(key),
                    pos);
                p = q + 1;
            }
        }
        if (v.is_undefined()) jinja_fail_undefined(v, pos);
        if (conv == "r" || conv == "a")
            v = jinja_value::string(jinja_repr(v));
        else if (conv == "s")
            v = jinja_value::string(jinja_to_str(v));
        o += format_spec(v, spec, pos);
        if (o.size() > r.lim.max_output) jinja_fail(pos, "string too long");
    }
    return o;
}
