// jinja-eval.cpp - renders the syntax tree: scopes as jinja2 compiles them (a for-loop iteration, macro call,
// with/filter/set block gets its own scope; if does not), operators with Python's semantics, jinja2's default
// Undefined, the sandbox's getattr/getitem, macros and call blocks; and the public API of jinja.h.
#include "jinja-impl.h"
#include "jinja.h"

#include <cmath>
#include <nlohmann/json.hpp>

// ---------------------------------------------------------------------------------------------------------
// frames

const jinja_value * jinja_frame::find(const std::string & name) const {
    for (const auto & kv : vars) {
        if (kv.first == name) return &kv.second;
    }
    return nullptr;
}

void jinja_frame::set(const std::string & name, jinja_value v) {
    for (auto & kv : vars) {
        if (kv.first == name) {
            kv.second = std::move(v);
            return;
        }
    }
    vars.emplace_back(name, std::move(v));
}

static std::shared_ptr<jinja_frame> frame_child(const std::shared_ptr<jinja_frame> & parent) {
    auto f = std::make_shared<jinja_frame>();
    f->parent = parent;
    return f;
}

namespace {
// puts the renderer's frame back as it was when the scope ends, by a throw too
struct frame_restore {
    jinja_renderer & r;
    const std::shared_ptr<jinja_frame> saved;
    explicit frame_restore(jinja_renderer & r) : r(r), saved(r.frame) {}
    ~frame_restore() { r.frame = saved; }
    frame_restore(const frame_restore &) = delete;
    frame_restore & operator=(const frame_restore &) = delete;
};
} // namespace

void jinja_fail_undefined(const jinja_value & v, uint32_t pos) {
    const std::string & h = v.undefined_hint();
    if (h.compare(0, 13, "SecurityError") == 0 || h.compare(0, 11, "unsupported") == 0) jinja_fail(pos, h);
    jinja_fail(pos, "UndefinedError: " + (h.empty() ? std::string("value is undefined") : h));
}

// ---------------------------------------------------------------------------------------------------------
// limits and output

void jinja_renderer::step(uint32_t pos) {
    steps += 1 + jinja_work;
    jinja_work = 0;
    if (steps > lim.max_steps)
        jinja_fail(pos, "template too expensive: more than " + std::to_string(lim.max_steps) + " steps");
}

void jinja_renderer::charge(size_t bytes, uint32_t pos) {
    if (bytes > lim.max_output)
        jinja_fail(pos, "string too long: more than " + std::to_string(lim.max_output) + " bytes");
    alloc += bytes;
    if (alloc > lim.max_alloc)
        jinja_fail(pos,
                   "template uses too much memory: more than " + std::to_string(lim.max_alloc) + " bytes of strings");
}

void jinja_renderer::charge_alloc(size_t bytes, uint32_t pos) {
    alloc += bytes;
    if (alloc > lim.max_alloc) {
        jinja_fail(pos, "template uses too much memory: more than " + std::to_string(lim.max_alloc) + " bytes made");
    }
}

jinja_value jinja_renderer::make_string(std::string s, uint32_t pos) {
    charge(s.size(), pos);
    return jinja_value::string(std::move(s));
}

void jinja_renderer::emit(const std::string & s, uint32_t pos) {
    if (out->size() + s.size() > lim.max_output) {
        jinja_fail(pos, "output too long: more than " + std::to_string(lim.max_output) + " bytes");
    }
    out->append(s);
}

struct depth_guard {
    jinja_renderer & r;
    depth_guard(jinja_renderer & r, uint32_t pos) : r(r) {
        if (++r.depth > 4 * r.lim.max_depth + 512)
            jinja_fail(pos, "RecursionError: template evaluation nested too deeply");
    }
    ~depth_guard() { --r.depth; }
};

// ---------------------------------------------------------------------------------------------------------
// lookups

jinja_value jinja_renderer::lookup(const std::string & name, uint32_t pos) const {
    (void)pos;
    for (const jinja_frame * f = frame.get(); f; f = f->parent.get()) {
        if (const jinja_value * v = f->find(name)) return *v;
    }
    jinja_value g;
    if (jinja_find_global(name, &g)) return g;
    return jinja_value::undefined("'" + name + "' is undefined");
}

// jinja2's object_type_repr: 'dict object', 'None', ...
static std::string type_repr(const jinja_value & obj) {
    if (obj.is_none()) return "None";
    return std::string(jinja_type_name(obj)) + " object";
}

static std::string no_attr_hint(const jinja_value & obj, const std::string & name) {
    return "'" + type_repr(obj) + "' has no attribute '" + name + "'";
}

jinja_value jinja_renderer::getattr(const jinja_value & obj, const std::string & name, uint32_t pos) {
    if (obj.is_undefined()) jinja_fail_undefined(obj, pos);
    jinja_value m;
    if (jinja_find_method(obj, name, &m)) return m;
    if (obj.type == JINJA_DICT) {
        if (const jinja_value * v = obj.d->find(name)) return *v;
    } else if (obj.type == JINJA_NAMESPACE) {
        if (const jinja_value * v = obj.ns->attrs.find(name)) return *v;
    }
    return jinja_value::undefined(no_attr_hint(obj, name));
}

static bool index_of(const jinja_value & key, int64_t n, int64_t * idx) {
    if (!key.is_integral()) return false;
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return false;
    *idx = i;
    return true;
}

jinja_value jinja_renderer::getitem(const jinja_value & obj, const jinja_value & key, uint32_t pos) {
    if (obj.is_undefined()) jinja_fail_undefined(obj, pos);
    int64_t idx = 0;
    switch (obj.type) {
        case JINJA_DICT:
            if (jinja_hashable(key)) {
                if (const jinja_value * v = obj.d->find(key)) return *v;
            }
            break;
        case JINJA_LIST:
            if (!obj.l->generator && index_of(key, (int64_t)obj.l->items.size(), &idx))
                return obj.l->items[(size_t)idx];
            break;
        case JINJA_STRING: {
            if (key.is_integral()) {
                const std::u32string u = jinja_utf8_decode(obj.str());
                if (index_of(key, (int64_t)u.size(), &idx))
                    return jinja_value::string(jinja_utf8_encode(u.substr((size_t)idx, 1)));
            }
            break;
        }
        default:
            break;
    }
    if (key.type == JINJA_STRING) { // obj[name] falls back to obj.name
        jinja_value m;
        if (jinja_find_method(obj, key.str(), &m)) return m;
        if (obj.type == JINJA_NAMESPACE) {
            if (const jinja_value * v = obj.ns->attrs.find(key.str())) return *v;
        }
    }
    if (key.is_string()) return jinja_value::undefined(no_attr_hint(obj, key.str()));
    return jinja_value::undefined("'" + type_repr(obj) + "' has no element " + jinja_repr(key));
}

std::vector<jinja_value> jinja_renderer::iterate(const jinja_value & v, uint32_t pos) {
    switch (v.type) {
        case JINJA_UNDEFINED:
            return {};
        case JINJA_LIST:
            jinja_work += v.l->items.size() / 16;
            return v.l->items;
        case JINJA_DICT: {
            std::vector<jinja_value> keys;
            keys.reserve(v.d->items.size());
            for (const auto & kv : v.d->items)
                keys.push_back(kv.first);
            return keys;
        }
        case JINJA_STRING: {
            const std::u32string u = jinja_utf8_decode(v.str());
            charge_alloc(u.size() * sizeof(jinja_value), pos); // one value per character
            std::vector<jinja_value> chars;
            chars.reserve(u.size());
            for (char32_t c : u) {
                std::string s;
                jinja_utf8_append(s, c);
                chars.push_back(jinja_value::string(std::move(s)));
            }
            return chars;
        }
        default:
            jinja_fail(pos, std::string("TypeError: '") + jinja_type_name(v) + "' object is not iterable");
    }
}

// ---------------------------------------------------------------------------------------------------------
// operators

static jinja_value int_result(__int128 v, uint32_t pos) {
    if (v > INT64_MAX || v < INT64_MIN) jinja_fail(pos, "unsupported: integer overflow (past 64 bits)");
    return jinja_value::integer((int64_t)v);
}

[[noreturn]] static void bad_operands(const std::string & op, const jinja_value & a, const jinja_value & b,
                                      uint32_t pos) {
    jinja_fail(pos, "TypeError: unsupported operand type(s) for " + op + ": '" + jinja_type_name(a) + "' and '" +
                        jinja_type_name(b) + "'");
}

jinja_value jinja_renderer::binary(const std::string & op, const jinja_value & a, const jinja_value & b, uint32_t pos) {
    if (op == "~") {
        std::string s = jinja_to_str(a);
        s += jinja_to_str(b);
        return make_string(std::move(s), pos);
    }
    if (a.is_undefined()) jinja_fail_undefined(a, pos);
    if (b.is_undefined()) jinja_fail_undefined(b, pos);
    const bool nums = a.is_number() && b.is_number();
    const bool ints = a.is_integral() && b.is_integral();
    if (op == "+") {
        if (ints) return int_result((__int128)a.as_int() + b.as_int(), pos);
        if (nums) return jinja_value::floating(a.as_float() + b.as_float());
        if (a.is_string() && b.is_string()) return make_string(a.str() + b.str(), pos);
        if (a.type == JINJA_LIST && b.type == JINJA_LIST && !a.l->generator && !b.l->generator &&
            a.l->tuple == b.l->tuple) {
            if (a.l->items.size() + b.l->items.size() > lim.max_output / 16) jinja_fail(pos, "list too long");
            charge_alloc((a.l->items.size() + b.l->items.size()) * sizeof(jinja_value), pos);
            std::vector<jinja_value> items = a.l->items;
            items.insert(items.end(), b.l->items.begin(), b.l->items.end());
            return jinja_value::list(std::move(items), a.l->tuple);
        }
        if (a.is_string() || b.is_string()) {
            jinja_fail(pos, std::string("TypeError: can only concatenate str (not \"") +
                                jinja_type_name(a.is_string() ? b : a) + "\") to str");
        }
        bad_operands(op, a, b, pos);
    }
    if (op == "-") {
        if (ints) return int_result((__int128)a.as_int() - b.as_int(), pos);
        if (nums) return jinja_value::floating(a.as_float() - b.as_float());
        bad_operands(op, a, b, pos);
    }
    if (op == "*") {
        if (ints) return int_result((__int128)a.as_int() * b.as_int(), pos);
        if (nums) return jinja_value::floating(a.as_float() * b.as_float());
        const jinja_value * seq = a.is_integral() ? &b : &a;
        const jinja_value * cnt = a.is_integral() ? &a : &b;
        if (cnt->is_integral() && (seq->is_string() || (seq->type == JINJA_LIST && !seq->l->generator))) {
            const int64_t n = std::max<int64_t>(0, cnt->as_int());
            if (seq->is_string()) {
                const size_t len = seq->str().size();
                if (len && (uint64_t)n > lim.max_output / len) jinja_fail(pos, "string too long");
                std::string s;
                s.reserve(len * (size_t)n);
                for (int64_t k = 0; k < n; ++k)
                    s += seq->str();
                return make_string(std::move(s), pos);
            }
            const size_t len = seq->l->items.size();
            if (len && (uint64_t)n > lim.max_output / 16 / len) jinja_fail(pos, "list too long");
            charge_alloc(len * (size_t)n * sizeof(jinja_value), pos);
            std::vector<jinja_value> items;
            for (int64_t k = 0; k < n; ++k)
                items.insert(items.end(), seq->l->items.begin(), seq->l->items.end());
            return jinja_value::list(std::move(items), seq->l->tuple);
        }
        bad_operands(op, a, b, pos);
    }
    if (op == "/" || op == "//" || op == "%") {
        if (op == "%" && a.is_string()) return make_string(jinja_percent_format(*this, a.str(), b, pos), pos);
        if (!nums) bad_operands(op, a, b, pos);
        if (b.as_float() == 0.0) {
            jinja_fail(pos, op == "/"    ? "ZeroDivisionError: division by zero"
                            : op == "//" ? "ZeroDivisionError: integer division or modulo by zero"
                                         : "ZeroDivisionError: integer modulo by zero");
        }
        if (op == "/") return jinja_value::floating(a.as_float() / b.as_float());
        if (ints) {
            const int64_t x = a.as_int(), y = b.as_int();
            if (y == -1) return op == "//" ? int_result(-(__int128)x, pos) : jinja_value::integer(0);
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q -= 1;
                m += y;
            }
            return jinja_value::integer(op == "//" ? q : m);
        }
        // float divmod as CPython computes it
        const double x = a.as_float(), y = b.as_float();
        double mod = std::fmod(x, y);
        double div = (x - mod) / y;
        if (mod != 0.0) {
            if ((y < 0) != (mod < 0)) {
                mod += y;
                div -= 1.0;
            }
        } else {
            mod = std::copysign(0.0, y);
        }
        if (op == "%") return jinja_value::floating(mod);
        double fl;
        if (div != 0.0) {
            fl = std::floor(div);
            if (div - fl > 0.5) fl += 1.0;
        } else {
            fl = std::copysign(0.0, x / y);
        }
        return jinja_value::floating(fl);
    }
    if (op == "**") {
        if (!nums) bad_operands(op, a, b, pos);
        if (ints && b.as_int() >= 0) {
            __int128 r = 1, base = a.as_int();
            int64_t e = b.as_int();
            while (e > 0) {
                if (e & 1) {
                    r *= base;
                    if (r > INT64_MAX || r < INT64_MIN) int_result(r, pos);
                }
                e >>= 1;
                if (e) {
                    base *= base;
                    if (base > INT64_MAX || base < INT64_MIN) int_result(base, pos);
                }
            }
            return int_result(r, pos);
        }
        if (a.as_float() == 0.0 && b.as_float() < 0) {
            jinja_fail(pos, "ZeroDivisionError: 0.0 cannot be raised to a negative power");
        }
        const double r = std::pow(a.as_float(), b.as_float());
        if (std::isnan(r) && !std::isnan(a.as_float()) && !std::isnan(b.as_float())) {
            jinja_fail(pos, "unsupported: complex result of '**'");
        }
        return jinja_value::floating(r);
    }
    jinja_fail(pos, "unknown operator '" + op + "'");
}

bool jinja_renderer::contains(const jinja_value & c, const jinja_value & item, uint32_t pos) {
    switch (c.type) {
        case JINJA_UNDEFINED:
            return false;
        case JINJA_STRING:
            if (!item.is_string()) {
                jinja_fail(pos, std::string("TypeError: 'in <string>' requires string as left operand, not ") +
                                    jinja_type_name(item));
            }
            return c.str().find(item.str()) != std::string::npos;
        case JINJA_LIST:
            jinja_work += c.l->items.size() / 16;
            for (const auto & x : c.l->items) {
                if (jinja_equal(x, item)) return true;
            }
            return false;
        case JINJA_DICT:
            if (!jinja_hashable(item))
                jinja_fail(pos, std::string("TypeError: unhashable type: '") + jinja_type_name(item) + "'");
            return c.d->find(item) != nullptr;
        default:
            jinja_fail(pos, std::string("TypeError: argument of type '") + jinja_type_name(c) + "' is not iterable");
    }
}

static bool slice_index(const jinja_value & v, int64_t * out) {
    if (v.is_none()) return false;
    *out = v.as_int();
    return true;
}

jinja_value jinja_renderer::slice(const jinja_value & obj, const jinja_expr & e) {
    jinja_value parts[3];
    for (int k = 0; k < 3; ++k)
        parts[k] = e.a[(size_t)k + 1] ? eval(*e.a[(size_t)k + 1]) : jinja_value::none();
    if (obj.is_undefined()) jinja_fail_undefined(obj, e.pos);
    for (const auto & p : parts) {
        if (!p.is_none() && !p.is_integral()) return jinja_value::undefined("slice indices must be integers or None");
    }
    const bool is_str = obj.is_string();
    if (!is_str && !(obj.type == JINJA_LIST && !obj.l->generator)) {
        return jinja_value::undefined(std::string("'") + jinja_type_name(obj) + "' object is not subscriptable");
    }
    std::u32string u;
    if (is_str) u = jinja_utf8_decode(obj.str());
    const int64_t n = is_str ? (int64_t)u.size() : (int64_t)obj.l->items.size();
    int64_t step = 1;
    if (slice_index(parts[2], &step) && step == 0) jinja_fail(e.pos, "ValueError: slice step cannot be zero");
    const int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? n - 1 : n;
    auto clamp = [&](const jinja_value & v, int64_t dflt) {
        int64_t i;
        if (!slice_index(v, &i)) return dflt;
        if (i < 0) {
            i += n;
            if (i < lower) i = lower;
        } else if (i > upper) {
            i = upper;
        }
        return i;
    };
    const int64_t start = clamp(parts[0], step < 0 ? upper : lower);
    const int64_t stop = clamp(parts[1], step < 0 ? lower : upper);
    if (is_str) {
        std::u32string r;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            r += u[(size_t)i];
        return make_string(jinja_utf8_encode(r), e.pos);
    }
    std::vector<jinja_value> r;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        r.push_back(obj.l->items[(size_t)i]);
    return jinja_value::list(std::move(r), obj.l->tuple);
}

// ---------------------------------------------------------------------------------------------------------
// expressions

void jinja_renderer::eval_args(const jinja_expr & e, size_t first, jinja_args & args) {
    for (size_t k = first; k < e.a.size(); ++k)
        args.pos.push_back(eval(*e.a[k]));
    if (e.star_args) {
        const jinja_value v = eval(*e.star_args);
        for (auto & x : iterate(v, e.star_args->pos))
            args.pos.push_back(std::move(x));
    }
    for (size_t k = 0; k < e.kw.size(); ++k)
        args.kw.emplace_back(e.kw_names[k], eval(*e.kw[k]));
    if (e.star_kwargs) {
        const jinja_value v = eval(*e.star_kwargs);
        if (v.type != JINJA_DICT) jinja_fail(e.star_kwargs->pos, "TypeError: argument after ** must be a mapping");
        for (const auto & kv : v.d->items) {
            if (!kv.first.is_string()) jinja_fail(e.star_kwargs->pos, "TypeError: keywords must be strings");
            args.kw.emplace_back(kv.first.str(), kv.second);
        }
    }
}

jinja_value jinja_renderer::apply_filter(const std::string & name, const jinja_value & v, jinja_args & args,
                                         uint32_t pos) {
    jinja_filter_fn f = jinja_find_filter(name);
    if (!f) jinja_fail(pos, "unknown filter '" + name + "'");
    return f(*this, v, args, pos);
}

bool jinja_renderer::apply_test(const std::string & name, const jinja_value & v, jinja_args & args, uint32_t pos) {
    jinja_test_fn t = jinja_find_test(name);
    if (!t) jinja_fail(pos, "unknown test '" + name + "'");
    return t(*this, v, args, pos);
}

jinja_value jinja_renderer::eval_filter_chain(const jinja_expr & e, const jinja_value & hole) {
    const jinja_value v = e.a[0] ? eval_filter_chain(*e.a[0], hole) : hole;
    jinja_args args;
    eval_args(e, 1, args);
    return apply_filter(e.name, v, args, e.pos);
}

jinja_value jinja_renderer::eval(const jinja_expr & e) {
    step(e.pos);
    depth_guard g(*this, e.pos);
    switch (e.kind) {
        case JINJA_E_CONST:
            return e.val;
        case JINJA_E_NAME:
            return lookup(e.name, e.pos);
        case JINJA_E_LIST:
        case JINJA_E_TUPLE: {
            std::vector<jinja_value> items;
            items.reserve(e.a.size());
            for (const auto & x : e.a)
                items.push_back(eval(*x));
            return jinja_value::list(std::move(items), e.kind == JINJA_E_TUPLE);
        }
        case JINJA_E_DICT: {
            jinja_value d = jinja_value::dict();
            for (size_t k = 0; k + 1 < e.a.size(); k += 2) {
                jinja_value key = eval(*e.a[k]);
                if (!jinja_hashable(key))
                    jinja_fail(e.a[k]->pos, std::string("TypeError: unhashable type: '") + jinja_type_name(key) + "'");
                d.d->set(key, eval(*e.a[k + 1]));
            }
            return d;
        }
        case JINJA_E_GETATTR:
            return getattr(eval(*e.a[0]), e.name, e.pos);
        case JINJA_E_GETITEM: {
            const jinja_value obj = eval(*e.a[0]);
            return getitem(obj, eval(*e.a[1]), e.pos);
        }
        case JINJA_E_SLICE:
            return slice(eval(*e.a[0]), e);
        case JINJA_E_CALL: {
            const jinja_value fn = eval(*e.a[0]);
            jinja_args args;
            eval_args(e, 1, args);
            return call(fn, args, e.pos);
        }
        case JINJA_E_FILTER: {
            const jinja_value v = eval(*e.a[0]);
            jinja_args args;
            eval_args(e, 1, args);
            return apply_filter(e.name, v, args, e.pos);
        }
        case JINJA_E_TEST: {
            const jinja_value v = eval(*e.a[0]);
            jinja_args args;
            eval_args(e, 1, args);
            return jinja_value::boolean(apply_test(e.name, v, args, e.pos));
        }
        case JINJA_E_UNARY: {
            const jinja_value v = eval(*e.a[0]);
            if (e.name == "not") return jinja_value::boolean(!jinja_truthy(v));
            if (v.is_undefined()) jinja_fail_undefined(v, e.pos);
            if (!v.is_number())
                jinja_fail(e.pos, "TypeError: bad operand type for unary " + e.name + ": '" + jinja_type_name(v) + "'");
            if (e.name == "+") return v.type == JINJA_FLOAT ? v : jinja_value::integer(v.as_int());
            if (v.type == JINJA_FLOAT) return jinja_value::floating(-v.f);
            return int_result(-(__int128)v.as_int(), e.pos);
        }
        case JINJA_E_BINARY: {
            if (e.name == "and" || e.name == "or") {
                jinja_value l = eval(*e.a[0]);
                if (jinja_truthy(l) == (e.name == "or")) return l;
                return eval(*e.a[1]);
            }
            const jinja_value l = eval(*e.a[0]);
            const jinja_value r = eval(*e.a[1]);
            return binary(e.name, l, r, e.pos);
        }
        case JINJA_E_COMPARE: {
            jinja_value l = eval(*e.a[0]);
            for (size_t k = 0; k < e.ops.size(); ++k) {
                jinja_value r = eval(*e.a[k + 1]);
                const std::string & op = e.ops[k];
                bool ok;
                if (op == "==")
                    ok = jinja_equal(l, r);
                else if (op == "!=")
                    ok = !jinja_equal(l, r);
                else if (op == "in")
                    ok = contains(r, l, e.pos);
                else if (op == "notin")
                    ok = !contains(r, l, e.pos);
                else {
                    const int c = jinja_compare(l, r, e.pos);
                    ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
                }
                if (!ok) return jinja_value::boolean(false);
                l = std::move(r);
            }
            return jinja_value::boolean(true);
        }
        case JINJA_E_COND: {
            if (jinja_truthy(eval(*e.a[0]))) return eval(*e.a[1]);
            if (e.a[2]) return eval(*e.a[2]);
            return jinja_value::undefined(
                "the inline if-expression evaluated to false and no else section was defined");
        }
    }
    jinja_fail(e.pos, "internal: unknown expression");
}

// ---------------------------------------------------------------------------------------------------------
// calls

jinja_value jinja_renderer::call(const jinja_value & fn, jinja_args & args, uint32_t pos) {
    if (fn.is_undefined()) jinja_fail_undefined(fn, pos);
    if (fn.type != JINJA_FUNC)
        jinja_fail(pos, std::string("TypeError: '") + jinja_type_name(fn) + "' object is not callable");
    if (fn.fn->builtin) return fn.fn->builtin(*this, fn.fn->self, args, pos);
    return make_string(call_macro(*fn.fn, args, pos), pos);
}

std::string jinja_renderer::call_macro(const jinja_func & fn, jinja_args & args, uint32_t pos) {
    const jinja_stmt & m = *fn.macro;
    std::shared_ptr<jinja_frame> closure = fn.closure.lock();
    if (!closure) jinja_fail(pos, "unsupported: calling macro '" + fn.name + "' after the block that defined it ended");
    if (call_depth >= lim.max_depth) {
        jinja_fail(pos, "RecursionError: more than " + std::to_string(lim.max_depth) + " nested macro calls");
    }
    auto f = frame_child(closure);
    const size_t nparams = m.targets.size();
    std::vector<bool> given(nparams, false);
    std::vector<jinja_value> vals(nparams);
    std::vector<jinja_value> extra;
    jinja_value kwargs = jinja_value::dict();
    const std::string what = fn.is_caller ? std::string("caller") : "macro '" + fn.name + "'";
    for (size_t k = 0; k < args.pos.size(); ++k) {
        if (k < nparams) {
            vals[k] = args.pos[k];
            given[k] = true;
        } else if (m.uses_varargs) {
            extra.push_back(args.pos[k]);
        } else {
            jinja_fail(pos, "TypeError: " + what + " takes not more than " + std::to_string(nparams) + " argument(s)");
        }
    }
    for (auto & kv : args.kw) {
        size_t p = 0;
        while (p < nparams && m.targets[p] != kv.first)
            ++p;
        if (p < nparams) {
            if (given[p])
                jinja_fail(pos, "TypeError: " + what + " got multiple values for argument '" + kv.first + "'");
            vals[p] = kv.second;
            given[p] = true;
        } else if (kv.first == "caller" && m.uses_caller && !fn.is_caller) {
            f->set("caller", kv.second);
        } else if (m.uses_kwargs) {
            kwargs.d->set(jinja_value::string(kv.first), kv.second);
        } else {
            jinja_fail(pos, "TypeError: " + what + " takes no keyword argument '" + kv.first + "'");
        }
    }
    ++call_depth;
    struct restore {
        jinja_renderer & r;
        std::shared_ptr<jinja_frame> saved;
        ~restore() {
            r.frame = saved;
            --r.call_depth;
        }
    } rs{*this, frame};
    frame = f;
    for (size_t k = 0; k < nparams; ++k) {
        if (given[k])
            f->set(m.targets[k], vals[k]);
        else if (m.conds[k])
            f->set(m.targets[k], eval(*m.conds[k]));
        else
            f->set(m.targets[k], jinja_value::undefined("parameter '" + m.targets[k] + "' was not provided"));
    }
    if (m.uses_varargs) f->set("varargs", jinja_value::list(std::move(extra), true));
    if (m.uses_kwargs) f->set("kwargs", kwargs);
    return capture(m.bodies[0], f);
}

// ---------------------------------------------------------------------------------------------------------
// statements

std::string jinja_renderer::capture(const jinja_stmt_list & body, std::shared_ptr<jinja_frame> f) {
    std::string buf;
    std::string * saved_out = out;
    std::shared_ptr<jinja_frame> saved_frame = frame;
    struct restore {
        jinja_renderer & r;
        std::string * o;
        std::shared_ptr<jinja_frame> fr;
        ~restore() {
            r.out = o;
            r.frame = fr;
        }
    } rs{*this, saved_out, saved_frame};
    out = &buf;
    frame = std::move(f);
    exec(body);
    return buf;
}

void jinja_renderer::assign(const jinja_stmt & s, const jinja_value & v, jinja_frame & f) {
    if (!s.target_tuple) {
        f.set(s.targets[0], v);
        return;
    }
    if (v.is_undefined()) jinja_fail_undefined(v, s.pos);
    const std::vector<jinja_value> items = iterate(v, s.pos);
    if (items.size() < s.targets.size()) {
        jinja_fail(s.pos, "ValueError: not enough values to unpack (expected " + std::to_string(s.targets.size()) +
                              ", got " + std::to_string(items.size()) + ")");
    }
    if (items.size() > s.targets.size()) {
        jinja_fail(s.pos, "ValueError: too many values to unpack (expected " + std::to_string(s.targets.size()) + ")");
    }
    for (size_t k = 0; k < items.size(); ++k)
        f.set(s.targets[k], items[k]);
}

static jinja_value loop_cycle(jinja_renderer &, const jinja_value & self, jinja_args & args, uint32_t pos) {
    if (args.pos.empty()) jinja_fail(pos, "TypeError: no items for cycling given");
    const int64_t i = self.i;
    return args.pos[(size_t)(i % (int64_t)args.pos.size())];
}

jinja_flow jinja_renderer::exec_for(const jinja_stmt & s) {
    const jinja_value seq = eval(*s.e);
    std::vector<jinja_value> items = iterate(seq, s.e->pos);
    if (s.cond) {
        std::vector<jinja_value> kept;
        for (auto & it : items) {
            step(s.pos);
            auto f = frame_child(frame);
            assign(s, it, *f);
            frame_restore rs(*this);
            frame = f;
            if (jinja_truthy(eval(*s.cond))) kept.push_back(std::move(it));
        }
        items.swap(kept);
    }
    if (items.empty()) {
        if (s.bodies.size() > 1) {
            frame_restore rs(*this);
            frame = frame_child(rs.saved);
            exec(s.bodies[1]);
        }
        return JINJA_FLOW_NORMAL;
    }
    const int64_t n = (int64_t)items.size();
    frame_restore rs(*this);
    for (int64_t i = 0; i < n; ++i) {
        step(s.pos);
        auto f = frame_child(rs.saved);
        assign(s, items[(size_t)i], *f);
        jinja_value loop = jinja_value::dict();
        auto & d = *loop.d;
        auto put = [&](const char * k, jinja_value v) { d.set(jinja_value::string(k), std::move(v)); };
        put("index", jinja_value::integer(i + 1));
        put("index0", jinja_value::integer(i));
        put("revindex", jinja_value::integer(n - i));
        put("revindex0", jinja_value::integer(n - i - 1));
        put("first", jinja_value::boolean(i == 0));
        put("last", jinja_value::boolean(i == n - 1));
        put("length", jinja_value::integer(n));
        put("depth", jinja_value::integer(1));
        put("depth0", jinja_value::integer(0));
        put("previtem", i > 0 ? items[(size_t)i - 1] : jinja_value::undefined("there is no previous item"));
        put("nextitem", i + 1 < n ? items[(size_t)i + 1] : jinja_value::undefined("there is no next item"));
        jinja_value cyc;
        cyc.type = JINJA_FUNC;
        cyc.fn = std::make_shared<jinja_func>();
        cyc.fn->name = "cycle";
        cyc.fn->builtin = loop_cycle;
        cyc.fn->self = jinja_value::integer(i);
        put("cycle", cyc);
        f->set("loop", loop);
        frame = f;
        if (exec(s.bodies[0]) == JINJA_FLOW_BREAK) break;
    }
    return JINJA_FLOW_NORMAL;
}

jinja_flow jinja_renderer::exec(const jinja_stmt_list & body) {
    depth_guard g(*this, body.empty() ? 0 : body[0]->pos);
    for (const auto & sp : body) {
        const jinja_stmt & s = *sp;
        step(s.pos);
        switch (s.kind) {
            case JINJA_S_TEXT:
                emit(s.text, s.pos);
                break;
            case JINJA_S_OUTPUT: {
                const jinja_value v = eval(*s.e);
                if (v.is_string())
                    emit(v.str(), s.pos);
                else
                    emit(jinja_to_str(v), s.pos);
                break;
            }
            case JINJA_S_IF: {
                size_t k = 0;
                for (; k < s.conds.size(); ++k) {
                    if (jinja_truthy(eval(*s.conds[k]))) break;
                }
                if (k < s.bodies.size()) {
                    const jinja_flow fl = exec(s.bodies[k]);
                    if (fl != JINJA_FLOW_NORMAL) return fl;
                }
                break;
            }
            case JINJA_S_FOR:
                exec_for(s);
                break;
            case JINJA_S_SET: {
                const jinja_value v = eval(*s.e);
                if (!s.ns_name.empty()) {
                    const jinja_value ns = lookup(s.ns_name, s.pos);
                    if (ns.type != JINJA_NAMESPACE)
                        jinja_fail(s.pos, "cannot assign attribute on non-namespace object");
                    ns.ns->attrs.set(jinja_value::string(s.text), v);
                } else {
                    assign(s, v, *frame);
                }
                break;
            }
            case JINJA_S_SET_BLOCK: {
                jinja_value v = make_string(capture(s.bodies[0], frame_child(frame)), s.pos);
                if (s.filters) v = eval_filter_chain(*s.filters, v);
                if (!s.ns_name.empty()) {
                    const jinja_value ns = lookup(s.ns_name, s.pos);
                    if (ns.type != JINJA_NAMESPACE)
                        jinja_fail(s.pos, "cannot assign attribute on non-namespace object");
                    ns.ns->attrs.set(jinja_value::string(s.text), v);
                } else {
                    frame->set(s.targets[0], v);
                }
                break;
            }
            case JINJA_S_MACRO: {
                jinja_value m;
                m.type = JINJA_FUNC;
                m.fn = std::make_shared<jinja_func>();
                m.fn->name = s.text;
                m.fn->macro = &s;
                m.fn->closure = frame;
                frame->set(s.text, m);
                break;
            }
            case JINJA_S_CALL: {
                jinja_value c;
                c.type = JINJA_FUNC;
                c.fn = std::make_shared<jinja_func>();
                c.fn->name = "caller";
                c.fn->macro = &s;
                c.fn->closure = frame;
                c.fn->is_caller = true;
                const jinja_expr & ce = *s.e;
                const jinja_value fn = eval(*ce.a[0]);
                jinja_args args;
                eval_args(ce, 1, args);
                args.kw.emplace_back("caller", c);
                const jinja_value r = call(fn, args, ce.pos);
                emit(jinja_to_str(r), s.pos);
                break;
            }
            case JINJA_S_FILTER: {
                const jinja_value v = make_string(capture(s.bodies[0], frame_child(frame)), s.pos);
                emit(jinja_to_str(eval_filter_chain(*s.filters, v)), s.pos);
                break;
            }
            case JINJA_S_WITH: {
                auto f = frame_child(frame);
                for (size_t k = 0; k < s.targets.size(); ++k)
                    f->set(s.targets[k], eval(*s.conds[k]));
                frame_restore rs(*this);
                frame = f;
                const jinja_flow fl = exec(s.bodies[0]);
                if (fl != JINJA_FLOW_NORMAL) return fl;
                break;
            }
            case JINJA_S_BREAK:
                return JINJA_FLOW_BREAK;
            case JINJA_S_CONTINUE:
                return JINJA_FLOW_CONTINUE;
            case JINJA_S_BLOCK:
                emit(capture(s.bodies[0], frame_child(frame)), s.pos);
                break;
        }
    }
    return JINJA_FLOW_NORMAL;
}

// ---------------------------------------------------------------------------------------------------------
// public API

struct llm_jinja_template {
    jinja_source src;
    jinja_stmt_list body;
};

static std::string one_line(const jinja_source * src, uint32_t pos, const std::string & msg) {
    std::string r = src ? jinja_source_where(*src, pos) + ": " : std::string();
    for (char c : msg) {
        if (c == '\n')
            r += "\\n";
        else if (c == '\r')
            r += "\\r";
        else
            r += c;
        if (r.size() > 500) {
            r += "...";
            break;
        }
    }
    return r;
}

llm_jinja_template * llm_jinja_parse(const std::string & source, std::string * err) {
    auto t = std::make_unique<llm_jinja_template>();
    try {
        t->src = jinja_source_make(source);
        const std::vector<jinja_token> toks = jinja_lex(t->src);
        t->body = jinja_parse(t->src, toks);
    } catch (const jinja_error & e) {
        if (err) *err = one_line(&t->src, e.pos, e.what());
        return nullptr;
    } catch (const std::exception & e) {
        if (err) *err = std::string("template parse failed: ") + e.what();
        return nullptr;
    }
    return t.release();
}

void llm_jinja_free(llm_jinja_template * t) { delete t; }

template <typename J> static jinja_value from_json(const J & j, int depth) {
    if (depth > 512) throw jinja_error(0, "context nested too deeply");
    switch (j.type()) {
        case J::value_t::null:
            return jinja_value::none();
        case J::value_t::boolean:
            return jinja_value::boolean(j.template get<bool>());
        case J::value_t::number_integer:
            return jinja_value::integer(j.template get<int64_t>());
        case J::value_t::number_unsigned: {
            const uint64_t u = j.template get<uint64_t>();
            return u <= (uint64_t)INT64_MAX ? jinja_value::integer((int64_t)u) : jinja_value::floating((double)u);
        }
        case J::value_t::number_float:
            return jinja_value::floating(j.template get<double>());
        case J::value_t::string:
            return jinja_value::string(j.template get<std::string>());
        case J::value_t::array: {
            std::vector<jinja_value> items;
            items.reserve(j.size());
            for (const auto & x : j)
                items.push_back(from_json(x, depth + 1));
            return jinja_value::list(std::move(items));
        }
        case J::value_t::object: {
            jinja_value d = jinja_value::dict();
            for (auto it = j.begin(); it != j.end(); ++it) {
                jinja_value v = from_json(it.value(), depth + 1);
                d.d->depth = std::max(d.d->depth, 1 + jinja_value_depth(v));
                d.d->items.emplace_back(jinja_value::string(it.key()), std::move(v)); // JSON keys are unique
            }
            return d;
        }
        default:
            return jinja_value::none();
    }
}

template <typename J>
static bool render_impl(const llm_jinja_template * t, const J & ctx, std::string * out, std::string * err,
                        const llm_jinja_options * opts) {
    if (!t) {
        if (err) *err = "no template";
        return false;
    }
    jinja_renderer r;
    if (opts) {
        r.lim.max_output = opts->max_output;
        r.lim.max_depth = opts->max_depth;
        r.lim.max_steps = opts->max_steps;
        r.lim.now = opts->now;
        r.lim.max_alloc = opts->max_alloc;
    }
    jinja_work = 0;
    jinja_str_cap = r.lim.max_output;
    std::string buf;
    bool ok = true;
    try {
        if (!ctx.is_object() && !ctx.is_null()) throw jinja_error(0, "the context must be a JSON object");
        r.frame = std::make_shared<jinja_frame>();
        if (ctx.is_object()) {
            for (auto it = ctx.begin(); it != ctx.end(); ++it)
                r.frame->set(it.key(), from_json(it.value(), 0));
        }
        r.out = &buf;
        r.exec(t->body);
    } catch (const jinja_error & e) {
        if (err) *err = one_line(&t->src, e.pos, e.what());
        ok = false;
    } catch (const std::bad_alloc &) {
        if (err) *err = "out of memory while rendering the template";
        ok = false;
    } catch (const std::exception & e) {
        if (err) *err = std::string("template render failed: ") + e.what();
        ok = false;
    }
    for (auto & ns : r.namespaces)
        ns->attrs.items.clear();
    r.frame.reset();
    if (ok && out) *out = std::move(buf);
    return ok;
}

bool llm_jinja_render(const llm_jinja_template * t, const nlohmann::json & ctx, std::string * out, std::string * err,
                      const llm_jinja_options * opts) {
    return render_impl(t, ctx, out, err, opts);
}

bool llm_jinja_render(const llm_jinja_template * t, const nlohmann::ordered_json & ctx, std::string * out,
                      std::string * err, const llm_jinja_options * opts) {
    return render_impl(t, ctx, out, err, opts);
}
