// jinja-impl.h - internals of the Jinja interpreter (see jinja.h): values, tokens, the syntax tree, and the
// pieces the lexer, parser, evaluator and builtins share. Not part of the public API.
//
//   jinja_source src = jinja_source_make(text);         // newlines normalised, line table
//   std::vector<jinja_token> toks = jinja_lex(src);     // throws jinja_error
//   jinja_stmt_list body = jinja_parse(src, toks);      // throws jinja_error
//   (jinja-eval.cpp renders it; jinja-builtins.cpp holds the filters, tests, methods and globals)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// ---------------------------------------------------------------------------------------------------------
// errors: every failure is a jinja_error carrying the byte offset (in the normalised source) of the construct

struct jinja_error : std::runtime_error {
    uint32_t pos;
    jinja_error(uint32_t pos, const std::string & msg) : std::runtime_error(msg), pos(pos) {}
};
[[noreturn]] void jinja_fail(uint32_t pos, const std::string & msg);

// the template text with \r\n and \r turned into \n and one trailing \n removed (jinja2's
// keep_trailing_newline=False), plus where each line starts, for line:col in messages
struct jinja_source {
    std::string text;
    std::vector<uint32_t> line_starts;
};
jinja_source jinja_source_make(const std::string & raw);
std::string jinja_source_where(const jinja_source & src, uint32_t pos); // "line:col", col in code points

// ---------------------------------------------------------------------------------------------------------
// work done outside the step counter (decoding, copying), in units; the renderer adds it to its steps
extern thread_local uint64_t jinja_work;
// the longest string str()/repr()/json.dumps may build (the renderer sets it to its max_output)
extern thread_local size_t jinja_str_cap;

// UTF-8 and Python string helpers. Bytes that are not valid UTF-8 decode to U+DC80 + byte (as Python's
// surrogateescape) and encode back to the same byte, so no input is lost or rejected.

std::u32string jinja_utf8_decode(std::string_view s);
std::string jinja_utf8_encode(std::u32string_view s);
void jinja_utf8_append(std::string & out, char32_t c);
size_t jinja_utf8_length(std::string_view s); // code points
bool jinja_is_space(char32_t c);              // Python str.isspace
char32_t jinja_to_upper(char32_t c);          // simple case mapping (see docs/jinja.md)
char32_t jinja_to_lower(char32_t c);
bool jinja_is_cased_upper(char32_t c);
bool jinja_is_cased_lower(char32_t c);
bool jinja_is_alpha(char32_t c);
bool jinja_is_digit(char32_t c);
bool jinja_is_printable(char32_t c); // Python str.isprintable, for repr()

// ---------------------------------------------------------------------------------------------------------
// values: Python's types as jinja2 sees them

enum jinja_type : uint8_t {
    JINJA_UNDEFINED = 0, // jinja2.Undefined: prints as "", false, iterates as empty, fails on use
    JINJA_NONE,
    JINJA_BOOL,
    JINJA_INT,
    JINJA_FLOAT,
    JINJA_STRING,
    JINJA_LIST,      // list, tuple, or a generator (the result of map/select/...)
    JINJA_DICT,      // insertion ordered, like Python's dict
    JINJA_FUNC,      // macro, builtin function, bound method
    JINJA_NAMESPACE, // namespace(): the only value a template may change
};

struct jinja_value;
struct jinja_list;
struct jinja_dict;
struct jinja_func;
struct jinja_namespace;

struct jinja_value {
    jinja_type type = JINJA_UNDEFINED;
    bool b = false;
    int64_t i = 0;
    double f = 0.0;
    std::shared_ptr<const std::string> s; // string; for an undefined: why it is undefined (may be null)
    std::shared_ptr<jinja_list> l;
    std::shared_ptr<jinja_dict> d;
    std::shared_ptr<jinja_func> fn;
    std::shared_ptr<jinja_namespace> ns;

    static jinja_value undefined(std::string hint = {});
    static jinja_value none();
    static jinja_value boolean(bool v);
    static jinja_value integer(int64_t v);
    static jinja_value floating(double v);
    static jinja_value string(std::string v);
    static jinja_value list(std::vector<jinja_value> items, bool tuple = false);
    static jinja_value generator(std::vector<jinja_value> items);
    static jinja_value dict();

    bool is_undefined() const { return type == JINJA_UNDEFINED; }
    bool is_none() const { return type == JINJA_NONE; }
    bool is_string() const { return type == JINJA_STRING; }
    bool is_number() const { return type == JINJA_BOOL || type == JINJA_INT || type == JINJA_FLOAT; }
    bool is_integral() const { return type == JINJA_BOOL || type == JINJA_INT; } // Python int
    const std::string & str() const;                                             // the string of a JINJA_STRING
    const std::string & undefined_hint() const;
    int64_t as_int() const { return type == JINJA_BOOL ? (int64_t)b : i; }
    double as_float() const { return type == JINJA_FLOAT ? f : (double)as_int(); }
};

// how deeply lists and dicts may nest (deeper values would overflow the stack when freed): deeper is an error
constexpr int k_jinja_max_nesting = 1000;

struct jinja_list {
    std::vector<jinja_value> items;
    bool tuple = false;
    bool generator = false; // always true, has no len(), prints as <generator object>
    int depth = 1;          // 1 + the deepest item's depth
};

int jinja_value_depth(const jinja_value & v); // 0 for scalars

struct jinja_dict {
    std::vector<std::pair<jinja_value, jinja_value>> items;
    int depth = 1;
    const jinja_value * find(const jinja_value & key) const;
    const jinja_value * find(std::string_view key) const;
    void set(const jinja_value & key, jinja_value v); // key must be hashable (caller checks)
};

struct jinja_namespace {
    jinja_dict attrs;
};

struct jinja_args {
    std::vector<jinja_value> pos;
    std::vector<std::pair<std::string, jinja_value>> kw;
};

struct jinja_renderer;
struct jinja_stmt;
struct jinja_frame;

struct jinja_func {
    std::string name;
    // builtin (or bound method: self is the receiver)
    std::function<jinja_value(jinja_renderer &, const jinja_value & self, jinja_args & args, uint32_t pos)> builtin;
    jinja_value self;
    // macro or caller(): the statement (JINJA_S_MACRO or JINJA_S_CALL) and the frame it was defined in
    const jinja_stmt * macro = nullptr;
    std::weak_ptr<jinja_frame> closure; // weak: a frame holding its own macro must not keep itself alive
    bool is_caller = false;
};

// truthiness, str(), repr(), ==, <, as Python
bool jinja_truthy(const jinja_value & v);
std::string jinja_to_str(const jinja_value & v);     // str(v); undefined -> ""
std::string jinja_repr(const jinja_value & v);       // repr(v)
std::string jinja_repr_string(std::string_view s);   // repr of a str
std::string jinja_float_repr(double f);              // Python's float repr: 1.0, 1e+20, 0.30000000000000004
const char * jinja_type_name(const jinja_value & v); // Python's type name: 'str', 'NoneType', ...
bool jinja_equal(const jinja_value & a, const jinja_value & b);
bool jinja_hashable(const jinja_value & v);
// a < b; throws a TypeError-like jinja_error when the types cannot be ordered
bool jinja_less(const jinja_value & a, const jinja_value & b, uint32_t pos);
int jinja_compare(const jinja_value & a, const jinja_value & b, uint32_t pos); // -1 0 1

struct jinja_json_opts {
    bool ensure_ascii = false;
    bool sort_keys = false;
    bool indent_set = false;
    std::string indent; // one level of indentation
    std::string item_sep = ", ";
    std::string key_sep = ": ";
};
// json.dumps(v); throws for values JSON cannot hold (undefined, functions, namespaces)
std::string jinja_to_json(const jinja_value & v, const jinja_json_opts & o, uint32_t pos);

// Python str operations on code points (jinja-value.cpp)
const std::string & jinja_str_arg(const jinja_value & v, const char * what, uint32_t pos); // TypeError if not str
std::u32string jinja_py_lower(const std::u32string & s);
std::u32string jinja_py_upper(const std::u32string & s);
std::u32string jinja_py_title(const std::u32string & s);
std::u32string jinja_py_capitalize(const std::u32string & s);
bool jinja_is_cased(char32_t c);
// chars: none/undefined -> whitespace, else a str of the characters to strip
std::u32string jinja_py_strip(const std::u32string & s, const jinja_value & chars, bool left, bool right);
std::vector<std::u32string> jinja_py_split(const std::u32string & s, const jinja_value & sep, int64_t maxsplit,
                                           bool from_right, uint32_t pos);
std::u32string jinja_py_replace(const std::u32string & s, const std::u32string & old, const std::u32string & rep,
                                int64_t count);
bool jinja_is_line_break(char32_t c);
std::vector<std::u32string> jinja_py_splitlines(const std::u32string & s, bool keepends);
bool jinja_parse_py_float(const std::string & s, double * out); // Python's float(str)
bool jinja_parse_py_int(const std::string & s, int64_t * out);  // Python's int(str)

// ---------------------------------------------------------------------------------------------------------
// tokens

enum jinja_tok : uint8_t {
    JINJA_T_TEXT = 0,
    JINJA_T_VAR_BEGIN,   // {{
    JINJA_T_VAR_END,     // }}
    JINJA_T_BLOCK_BEGIN, // {%
    JINJA_T_BLOCK_END,   // %}
    JINJA_T_NAME,
    JINJA_T_STRING,
    JINJA_T_INT,
    JINJA_T_FLOAT,
    JINJA_T_OP, // s holds the operator: + - * / // % ** ~ [ ] ( ) { } == != < <= > >= = . : | , ;
    JINJA_T_EOF,
};

struct jinja_token {
    jinja_tok type = JINJA_T_EOF;
    uint32_t pos = 0;
    std::string s; // text, name, string value, operator
    int64_t i = 0;
    double f = 0.0;
};

std::vector<jinja_token> jinja_lex(const jinja_source & src);

// ---------------------------------------------------------------------------------------------------------
// syntax tree

enum jinja_expr_kind : uint8_t {
    JINJA_E_CONST = 0, // val
    JINJA_E_NAME,      // name
    JINJA_E_LIST,      // a: items
    JINJA_E_TUPLE,     // a: items
    JINJA_E_DICT,      // a: key0, value0, key1, value1, ...
    JINJA_E_GETATTR,   // a[0].name
    JINJA_E_GETITEM,   // a[0][a[1]]
    JINJA_E_SLICE,     // a[0][a[1]:a[2]:a[3]] (null children: omitted)
    JINJA_E_CALL,      // a[0](a[1..], kw...)
    JINJA_E_FILTER,    // a[0] | name(a[1..], kw...); a[0] null in a filter block's chain
    JINJA_E_TEST,      // a[0] is name(a[1..], kw...)
    JINJA_E_UNARY,     // op a[0]: "-" "+" "not"
    JINJA_E_BINARY,    // a[0] op a[1]: + - * / // % ** ~ and or
    JINJA_E_COMPARE,   // a[0] ops[0] a[1] ops[1] a[2] ...: == != < <= > >= in notin
    JINJA_E_COND,      // a[1] if a[0] else a[2] (a[2] null: undefined)
};

struct jinja_expr;
using jinja_expr_ptr = std::unique_ptr<jinja_expr>;

struct jinja_expr {
    jinja_expr_kind kind = JINJA_E_CONST;
    uint32_t pos = 0;
    std::string name; // name, attribute, filter/test name, unary/binary operator
    jinja_value val;
    std::vector<jinja_expr_ptr> a;
    std::vector<std::string> ops;      // compare operators
    std::vector<std::string> kw_names; // call/filter/test keyword arguments, values in kw
    std::vector<jinja_expr_ptr> kw;
    jinja_expr_ptr star_args, star_kwargs; // f(*x, **y)
};

enum jinja_stmt_kind : uint8_t {
    JINJA_S_TEXT = 0,  // text
    JINJA_S_OUTPUT,    // {{ e }}
    JINJA_S_IF,        // conds[i] -> bodies[i]; bodies.back() is the else when bodies.size() > conds.size()
    JINJA_S_FOR,       // for targets in e [if cond]: bodies[0] [else bodies[1]]
    JINJA_S_SET,       // targets (or ns.attr) = e
    JINJA_S_SET_BLOCK, // {% set target | filters %} bodies[0] {% endset %}
    JINJA_S_MACRO,     // macro name(params = defaults): bodies[0]
    JINJA_S_CALL,      // {% call(params) e %} bodies[0]: caller body
    JINJA_S_FILTER,    // {% filter filters %} bodies[0]
    JINJA_S_WITH,      // targets = values: bodies[0]
    JINJA_S_BREAK,
    JINJA_S_CONTINUE,
    JINJA_S_BLOCK, // generation (HF's extension): bodies[0] rendered in place
};

struct jinja_stmt;
using jinja_stmt_ptr = std::unique_ptr<jinja_stmt>;
using jinja_stmt_list = std::vector<jinja_stmt_ptr>;

struct jinja_stmt {
    jinja_stmt_kind kind = JINJA_S_TEXT;
    uint32_t pos = 0;
    std::string text;                 // text; macro name; namespace attribute (set ns.attr)
    std::string ns_name;              // set ns.attr: the namespace variable
    std::vector<std::string> targets; // for/set/with names; macro/call parameter names
    bool target_tuple = false;
    jinja_expr_ptr e;                  // output/for iterable/set value/call expression
    jinja_expr_ptr cond;               // for ... if cond
    std::vector<jinja_expr_ptr> conds; // if/elif conditions; with values; macro defaults (null: none)
    jinja_expr_ptr filters;            // set block / filter block: a JINJA_E_FILTER chain on null
    std::vector<jinja_stmt_list> bodies;
    bool uses_varargs = false, uses_kwargs = false, uses_caller = false; // macros
};

struct jinja_parse_limits {
    int max_depth = 128; // nesting of expressions and blocks
};

jinja_stmt_list jinja_parse(const jinja_source & src, const std::vector<jinja_token> & toks,
                            const jinja_parse_limits & lim = {});

// ---------------------------------------------------------------------------------------------------------
// builtins (jinja-builtins.cpp)

using jinja_filter_fn = jinja_value (*)(jinja_renderer &, const jinja_value & v, jinja_args & args, uint32_t pos);
using jinja_test_fn = bool (*)(jinja_renderer &, const jinja_value & v, jinja_args & args, uint32_t pos);

jinja_filter_fn jinja_find_filter(std::string_view name); // null if unknown
jinja_test_fn jinja_find_test(std::string_view name);
// obj.name for str, list, dict methods: a bound method, or undefined when obj has no such method
bool jinja_find_method(const jinja_value & obj, const std::string & name, jinja_value * out);
// globals: range, namespace, dict, raise_exception, strftime_now, joiner
bool jinja_find_global(const std::string & name, jinja_value * out);

// argument binding for builtins: names are the parameters after the subject, in order
struct jinja_arg_binder {
    std::vector<jinja_value> vals;
    std::vector<bool> given;
    jinja_arg_binder(jinja_args & args, std::initializer_list<const char *> names, const char * fname, uint32_t pos);
    bool has(size_t i) const { return given[i]; }
    const jinja_value & get(size_t i) const { return vals[i]; }
};

// ---------------------------------------------------------------------------------------------------------
// the evaluator's services the builtins use (jinja-eval.cpp)

struct jinja_render_limits {
    size_t max_output = 16u << 20; // bytes of any one string or output buffer
    int max_depth = 256;           // nested macro calls
    uint64_t max_steps = 20000000; // evaluation steps (expressions, statements, loop iterations)
    size_t max_alloc = 1u << 30;   // bytes of strings made while rendering
    int64_t now = -1;              // strftime_now's clock: seconds since the epoch (UTC); -1: local time now
};

// a scope: the template's top level, one for-loop iteration, a macro call, a with block, ...
struct jinja_frame {
    std::shared_ptr<jinja_frame> parent;
    std::vector<std::pair<std::string, jinja_value>> vars;
    const jinja_value * find(const std::string & name) const;
    void set(const std::string & name, jinja_value v);
};

enum jinja_flow { JINJA_FLOW_NORMAL = 0, JINJA_FLOW_BREAK, JINJA_FLOW_CONTINUE };

struct jinja_renderer {
    jinja_render_limits lim;
    uint64_t steps = 0;
    size_t alloc = 0;
    int call_depth = 0;
    int depth = 0;
    std::shared_ptr<jinja_frame> frame;
    std::string * out = nullptr;
    std::vector<std::shared_ptr<jinja_namespace>> namespaces; // emptied after rendering (breaks cycles)

    void step(uint32_t pos);
    void charge(size_t bytes, uint32_t pos);       // a new string of that many bytes
    void charge_alloc(size_t bytes, uint32_t pos); // other memory made (lists)
    jinja_value make_string(std::string s, uint32_t pos);
    void emit(const std::string & s, uint32_t pos);

    jinja_flow exec(const jinja_stmt_list & body);
    jinja_value eval(const jinja_expr & e);
    jinja_value lookup(const std::string & name, uint32_t pos) const;
    jinja_value call(const jinja_value & fn, jinja_args & args, uint32_t pos);
    // getattr / getitem as jinja2's sandboxed environment does them
    jinja_value getattr(const jinja_value & obj, const std::string & name, uint32_t pos);
    jinja_value getitem(const jinja_value & obj, const jinja_value & key, uint32_t pos);
    // iterate: list items, dict keys, string characters, undefined: nothing; else TypeError
    std::vector<jinja_value> iterate(const jinja_value & v, uint32_t pos);
    jinja_value apply_filter(const std::string & name, const jinja_value & v, jinja_args & args, uint32_t pos);
    bool apply_test(const std::string & name, const jinja_value & v, jinja_args & args, uint32_t pos);

  private:
    jinja_value eval_filter_chain(const jinja_expr & e, const jinja_value & hole);
    void eval_args(const jinja_expr & e, size_t first, jinja_args & args);
    jinja_value binary(const std::string & op, const jinja_value & a, const jinja_value & b, uint32_t pos);
    bool contains(const jinja_value & container, const jinja_value & item, uint32_t pos);
    jinja_value slice(const jinja_value & obj, const jinja_expr & e);
    void assign(const jinja_stmt & s, const jinja_value & v, jinja_frame & f);
    jinja_flow exec_for(const jinja_stmt & s);
    std::string capture(const jinja_stmt_list & body, std::shared_ptr<jinja_frame> f);
    std::string call_macro(const jinja_func & fn, jinja_args & args, uint32_t pos);
};

// printf-style formatting (str % args, the format filter)
std::string jinja_percent_format(jinja_renderer & r, const std::string & fmt, const jinja_value & args, uint32_t pos);
// str.format
std::string jinja_str_format(jinja_renderer & r, const std::string & fmt, jinja_args & args, uint32_t pos);

[[noreturn]] void jinja_fail_undefined(const jinja_value & v, uint32_t pos);
