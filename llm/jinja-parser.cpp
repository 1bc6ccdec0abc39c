// jinja-parser.cpp - tokens -> syntax tree, following jinja2's grammar (parser.py): operator precedence,
// tuples, filters and tests bound tighter than arithmetic, and unknown filters/tests rejected when parsing
// (jinja2 rejects them when compiling, before rendering).
#include "jinja-impl.h"

namespace {

const char * const k_end_tags[] = {"endif",   "elif",      "else",    "endfor",        "endset", "endmacro",
                                   "endcall", "endfilter", "endwith", "endgeneration", "endraw"};

struct parser {
    const jinja_source & src;
    const std::vector<jinja_token> & t;
    jinja_parse_limits lim;
    size_t k = 0;
    int depth = 0;
    int loops = 0;                    // enclosing for loops (break/continue)
    std::vector<jinja_stmt *> macros; // enclosing macros (varargs/kwargs/caller)

    struct depth_guard {
        parser & p;
        depth_guard(parser & p, uint32_t pos) : p(p) {
            if (++p.depth > p.lim.max_depth) jinja_fail(pos, "unsupported: template nested too deeply");
        }
        ~depth_guard() { --p.depth; }
    };

    const jinja_token & cur() const { return t[k]; }
    const jinja_token & look(size_t o = 1) const { return t[std::min(k + o, t.size() - 1)]; }
    bool is_op(const char * op) const { return cur().type == JINJA_T_OP && cur().s == op; }
    bool is_name(const char * nm) const { return cur().type == JINJA_T_NAME && cur().s == nm; }
    bool skip_op(const char * op) {
        if (!is_op(op)) return false;
        ++k;
        return true;
    }
    bool skip_name(const char * nm) {
        if (!is_name(nm)) return false;
        ++k;
        return true;
    }

    static std::string describe(const jinja_token & tk) {
        switch (tk.type) {
            case JINJA_T_TEXT:
                return "template data";
            case JINJA_T_VAR_BEGIN:
                return "'{{'";
            case JINJA_T_VAR_END:
                return "end of print statement";
            case JINJA_T_BLOCK_BEGIN:
                return "'{%'";
            case JINJA_T_BLOCK_END:
                return "end of statement block";
            case JINJA_T_NAME:
                return "'" + tk.s + "'";
            case JINJA_T_STRING:
                return "string";
            case JINJA_T_INT:
                return "integer";
            case JINJA_T_FLOAT:
                return "float";
            case JINJA_T_OP:
                return "'" + tk.s + "'";
            case JINJA_T_EOF:
                return "end of template";
        }
        return "?";
    }
    [[noreturn]] void fail_unexpected(const char * expected) const {
        jinja_fail(cur().pos, std::string("syntax error: unexpected ") + describe(cur()) + ", expected " + expected);
    }
    void expect_op(const char * op) {
        if (!skip_op(op)) fail_unexpected((std::string("'") + op + "'").c_str());
    }
    std::string expect_name() {
        if (cur().type != JINJA_T_NAME) fail_unexpected("a name");
        return t[k++].s;
    }
    void expect_block_end() {
        if (cur().type != JINJA_T_BLOCK_END) fail_unexpected("end of statement block ('%}')");
        ++k;
    }

    static jinja_expr_ptr node(jinja_expr_kind kind, uint32_t pos) {
        auto e = std::make_unique<jinja_expr>();
        e->kind = kind;
        e->pos = pos;
        return e;
    }

    // ---------------------------------------------------------------------------------------------------
    // expressions

    bool is_tuple_end(const char * extra = nullptr) const {
        const jinja_tok ty = cur().type;
        if (ty == JINJA_T_VAR_END || ty == JINJA_T_BLOCK_END || (ty == JINJA_T_OP && cur().s == ")")) return true;
        return extra && is_name(extra);
    }

    // mode: 0 expression with if-else, 1 without, 2 primaries only (assignment targets)
    jinja_expr_ptr parse_tuple(int mode = 0, const char * extra_end = nullptr, bool explicit_parens = false) {
        const uint32_t pos = cur().pos;
        std::vector<jinja_expr_ptr> args;
        bool is_tuple = false;
        for (;;) {
            if (!args.empty()) expect_op(",");
            if (is_tuple_end(extra_end)) break;
            args.push_back(mode == 2 ? parse_primary() : parse_expression(mode == 0));
            if (is_op(","))
                is_tuple = true;
            else
                break;
        }
        if (!is_tuple) {
            if (!args.empty()) return std::move(args[0]);
            if (!explicit_parens) fail_unexpected("an expression");
        }
        auto e = node(JINJA_E_TUPLE, pos);
        e->a = std::move(args);
        return e;
    }

    jinja_expr_ptr parse_expression(bool with_condexpr = true) {
        depth_guard g(*this, cur().pos);
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    jinja_expr_ptr parse_condexpr() {
        const uint32_t pos = cur().pos;
        jinja_expr_ptr e1 = parse_or();
        while (skip_name("if")) {
            jinja_expr_ptr e2 = parse_or();
            jinja_expr_ptr e3;
            if (skip_name("else")) e3 = parse_condexpr();
            auto c = node(JINJA_E_COND, pos);
            c->a.push_back(std::move(e2));
            c->a.push_back(std::move(e1));
            c->a.push_back(std::move(e3));
            e1 = std::move(c);
        }
        return e1;
    }

    jinja_expr_ptr binary(const std::string & op, jinja_expr_ptr l, jinja_expr_ptr r, uint32_t pos) {
        auto e = node(JINJA_E_BINARY, pos);
        e->name = op;
        e->a.push_back(std::move(l));
        e->a.push_back(std::move(r));
        return e;
    }

    jinja_expr_ptr parse_or() {
        jinja_expr_ptr l = parse_and();
        while (is_name("or")) {
            const uint32_t pos = t[k++].pos;
            l = binary("or", std::move(l), parse_and(), pos);
        }
        return l;
    }
    jinja_expr_ptr parse_and() {
        jinja_expr_ptr l = parse_not();
        while (is_name("and")) {
            const uint32_t pos = t[k++].pos;
            l = binary("and", std::move(l), parse_not(), pos);
        }
        return l;
    }
    jinja_expr_ptr parse_not() {
        if (is_name("not")) {
            depth_guard g(*this, cur().pos);
            auto e = node(JINJA_E_UNARY, t[k++].pos);
            e->name = "not";
            e->a.push_back(parse_not());
            return e;
        }
        return parse_compare();
    }
    jinja_expr_ptr parse_compare() {
        jinja_expr_ptr first = parse_math1();
        jinja_expr_ptr cmp;
        for (;;) {
            std::string op;
            const uint32_t op_pos = cur().pos;
            if (cur().type == JINJA_T_OP && (cur().s == "==" || cur().s == "!=" || cur().s == "<" || cur().s == "<=" ||
                                             cur().s == ">" || cur().s == ">=")) {
                op = t[k++].s;
            } else if (skip_name("in")) {
                op = "in";
            } else if (is_name("not") && look().type == JINJA_T_NAME && look().s == "in") {
                k += 2;
                op = "notin";
            } else {
                break;
            }
            if (!cmp) {
                cmp = node(JINJA_E_COMPARE, op_pos);
                cmp->a.push_back(std::move(first));
            }
            cmp->ops.push_back(op);
            cmp->a.push_back(parse_math1());
        }
        return cmp ? std::move(cmp) : std::move(first);
    }
    jinja_expr_ptr parse_math1() {
        jinja_expr_ptr l = parse_concat();
        while (is_op("+") || is_op("-")) {
            const std::string op = cur().s;
            const uint32_t pos = t[k++].pos;
            l = binary(op, std::move(l), parse_concat(), pos);
        }
        return l;
    }
    jinja_expr_ptr parse_concat() {
        jinja_expr_ptr l = parse_math2();
        while (is_op("~")) {
            const uint32_t pos = t[k++].pos;
            l = binary("~", std::move(l), parse_math2(), pos);
        }
        return l;
    }
    jinja_expr_ptr parse_math2() {
        jinja_expr_ptr l = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = cur().s;
            const uint32_t pos = t[k++].pos;
            l = binary(op, std::move(l), parse_pow(), pos);
        }
        return l;
    }
    jinja_expr_ptr parse_pow() {
        jinja_expr_ptr l = parse_unary();
        while (is_op("**")) {
            const uint32_t pos = t[k++].pos;
            l = binary("**", std::move(l), parse_unary(), pos);
        }
        return l;
    }
    jinja_expr_ptr parse_unary(bool with_filter = true) {
        depth_guard g(*this, cur().pos);
        jinja_expr_ptr e;
        if (is_op("-") || is_op("+")) {
            e = node(JINJA_E_UNARY, cur().pos);
            e->name = t[k++].s;
            e->a.push_back(parse_unary(false));
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    jinja_expr_ptr parse_primary() {
        depth_guard g(*this, cur().pos);
        const jinja_token & tk = cur();
        jinja_expr_ptr e;
        if (tk.type == JINJA_T_NAME) {
            e = node(JINJA_E_CONST, tk.pos);
            if (tk.s == "true" || tk.s == "True")
                e->val = jinja_value::boolean(true);
            else if (tk.s == "false" || tk.s == "False")
                e->val = jinja_value::boolean(false);
            else if (tk.s == "none" || tk.s == "None")
                e->val = jinja_value::none();
            else {
                e->kind = JINJA_E_NAME;
                e->name = tk.s;
                note_name(tk.s);
            }
            ++k;
        } else if (tk.type == JINJA_T_STRING) {
            e = node(JINJA_E_CONST, tk.pos);
            std::string s;
            while (cur().type == JINJA_T_STRING)
                s += t[k++].s;
            e->val = jinja_value::string(std::move(s));
        } else if (tk.type == JINJA_T_INT) {
            e = node(JINJA_E_CONST, tk.pos);
            e->val = jinja_value::integer(tk.i);
            ++k;
        } else if (tk.type == JINJA_T_FLOAT) {
            e = node(JINJA_E_CONST, tk.pos);
            e->val = jinja_value::floating(tk.f);
            ++k;
        } else if (is_op("(")) {
            ++k;
            e = parse_tuple(0, nullptr, true);
            expect_op(")");
        } else if (is_op("[")) {
            e = node(JINJA_E_LIST, t[k++].pos);
            while (!is_op("]")) {
                if (!e->a.empty()) expect_op(",");
                if (is_op("]")) break;
                e->a.push_back(parse_expression());
            }
            expect_op("]");
        } else if (is_op("{")) {
            e = node(JINJA_E_DICT, t[k++].pos);
            while (!is_op("}")) {
                if (!e->a.empty()) expect_op(",");
                if (is_op("}")) break;
                e->a.push_back(parse_expression());
                expect_op(":");
                e->a.push_back(parse_expression());
            }
            expect_op("}");
        } else {
            fail_unexpected("an expression");
        }
        return e;
    }

    void note_name(const std::string & nm) {
        if (macros.empty()) return;
        if (nm == "varargs") macros.back()->uses_varargs = true;
        if (nm == "kwargs") macros.back()->uses_kwargs = true;
        if (nm == "caller") macros.back()->uses_caller = true;
    }

    jinja_expr_ptr parse_postfix(jinja_expr_ptr e) {
        for (;;) {
            if (is_op(".") || is_op("["))
                e = parse_subscript(std::move(e));
            else if (is_op("("))
                e = parse_call(std::move(e));
            else
                break;
        }
        return e;
    }

    jinja_expr_ptr parse_filter_expr(jinja_expr_ptr e) {
        for (;;) {
            if (is_op("|"))
                e = parse_filter(std::move(e));
            else if (is_name("is"))
                e = parse_test(std::move(e));
            else if (is_op("("))
                e = parse_call(std::move(e));
            else
                break;
        }
        return e;
    }

    jinja_expr_ptr parse_subscript(jinja_expr_ptr obj) {
        depth_guard g(*this, cur().pos);
        const jinja_token & tk = t[k++];
        if (tk.s == ".") {
            const jinja_token & at = cur();
            if (at.type == JINJA_T_NAME) {
                auto e = node(JINJA_E_GETATTR, tk.pos);
                e->name = at.s;
                e->a.push_back(std::move(obj));
                ++k;
                return e;
            }
            if (at.type != JINJA_T_INT) fail_unexpected("a name or number");
            auto e = node(JINJA_E_GETITEM, tk.pos);
            e->a.push_back(std::move(obj));
            auto c = node(JINJA_E_CONST, at.pos);
            c->val = jinja_value::integer(at.i);
            e->a.push_back(std::move(c));
            ++k;
            return e;
        }
        std::vector<jinja_expr_ptr> args;
        while (!is_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        if (args.size() == 1 && args[0]->kind == JINJA_E_SLICE && !args[0]->a[0]) {
            args[0]->a[0] = std::move(obj);
            return std::move(args[0]);
        }
        auto e = node(JINJA_E_GETITEM, tk.pos);
        e->a.push_back(std::move(obj));
        if (args.size() == 1) {
            e->a.push_back(std::move(args[0]));
        } else {
            for (auto & a : args) {
                if (a->kind == JINJA_E_SLICE) jinja_fail(a->pos, "unsupported: a slice inside a tuple subscript");
            }
            auto tup = node(JINJA_E_TUPLE, tk.pos);
            tup->a = std::move(args);
            e->a.push_back(std::move(tup));
        }
        return e;
    }

    // an index or a slice [start:stop:step]; a slice comes back as JINJA_E_SLICE with a[0] empty
    jinja_expr_ptr parse_subscribed() {
        const uint32_t pos = cur().pos;
        jinja_expr_ptr start;
        if (!is_op(":")) {
            start = parse_expression();
            if (!is_op(":")) return start;
        }
        ++k; // ':'
        auto e = node(JINJA_E_SLICE, pos);
        e->a.push_back(nullptr);
        e->a.push_back(std::move(start));
        if (is_op(":") || is_op("]") || is_op(","))
            e->a.push_back(nullptr);
        else
            e->a.push_back(parse_expression());
        if (skip_op(":")) {
            if (is_op("]") || is_op(","))
                e->a.push_back(nullptr);
            else
                e->a.push_back(parse_expression());
        } else {
            e->a.push_back(nullptr);
        }
        return e;
    }

    void parse_call_args(jinja_expr & e) {
        const uint32_t pos = cur().pos;
        expect_op("(");
        bool require_comma = false;
        auto ensure = [&](bool ok) {
            if (!ok) jinja_fail(pos, "syntax error: invalid syntax for function call expression");
        };
        while (!is_op(")")) {
            if (require_comma) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (is_op("*")) {
                ensure(!e.star_args && !e.star_kwargs);
                ++k;
                e.star_args = parse_expression();
            } else if (is_op("**")) {
                ensure(!e.star_kwargs);
                ++k;
                e.star_kwargs = parse_expression();
            } else if (cur().type == JINJA_T_NAME && look().type == JINJA_T_OP && look().s == "=") {
                ensure(!e.star_kwargs);
                e.kw_names.push_back(cur().s);
                k += 2;
                e.kw.push_back(parse_expression());
            } else {
                ensure(!e.star_args && !e.star_kwargs && e.kw.empty());
                e.a.push_back(parse_expression());
            }
            require_comma = true;
        }
        expect_op(")");
    }

    jinja_expr_ptr parse_call(jinja_expr_ptr fn) {
        auto e = node(JINJA_E_CALL, cur().pos);
        e->a.push_back(std::move(fn));
        parse_call_args(*e);
        return e;
    }

    std::string dotted_name() {
        std::string nm = expect_name();
        while (skip_op("."))
            nm += "." + expect_name();
        return nm;
    }

    jinja_expr_ptr parse_filter(jinja_expr_ptr subject, bool start_inline = false) {
        while (is_op("|") || start_inline) {
            if (!start_inline) ++k;
            start_inline = false;
            const uint32_t pos = cur().pos;
            auto e = node(JINJA_E_FILTER, pos);
            e->name = dotted_name();
            if (!jinja_find_filter(e->name)) jinja_fail(pos, "unknown filter '" + e->name + "'");
            e->a.push_back(std::move(subject));
            if (is_op("(")) parse_call_args(*e);
            subject = std::move(e);
        }
        return subject;
    }

    jinja_expr_ptr parse_test(jinja_expr_ptr subject) {
        const uint32_t pos = t[k++].pos; // 'is'
        const bool negated = skip_name("not");
        const uint32_t npos = cur().pos;
        auto e = node(JINJA_E_TEST, npos);
        e->name = dotted_name();
        if (!jinja_find_test(e->name)) jinja_fail(npos, "unknown test '" + e->name + "'");
        e->a.push_back(std::move(subject));
        if (is_op("(")) {
            parse_call_args(*e);
        } else if ((cur().type == JINJA_T_NAME || cur().type == JINJA_T_STRING || cur().type == JINJA_T_INT ||
                    cur().type == JINJA_T_FLOAT || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) jinja_fail(cur().pos, "syntax error: you cannot chain multiple tests with is");
            e->a.push_back(parse_postfix(parse_primary()));
        }
        if (!negated) return e;
        auto n = node(JINJA_E_UNARY, pos);
        n->name = "not";
        n->a.push_back(std::move(e));
        return n;
    }

    // ---------------------------------------------------------------------------------------------------
    // statements

    // assignment target: a name, or a tuple of names (a, b / (a, b)); ns.attr when with_ns
    void parse_targets(jinja_stmt & s, const char * extra_end, bool with_ns) {
        if (with_ns && cur().type == JINJA_T_NAME && look().type == JINJA_T_OP && look().s == ".") {
            s.ns_name = t[k].s;
            k += 2;
            s.text = expect_name();
            return;
        }
        jinja_expr_ptr e = parse_tuple(2, extra_end);
        auto add = [&](const jinja_expr & n) {
            if (n.kind != JINJA_E_NAME) {
                jinja_fail(n.pos, n.kind == JINJA_E_CONST ? "syntax error: can't assign to a constant"
                                                          : "unsupported: assignment target other than a name");
            }
            s.targets.push_back(n.name);
        };
        if (e->kind == JINJA_E_TUPLE) {
            s.target_tuple = true;
            for (auto & a : e->a)
                add(*a);
        } else {
            add(*e);
        }
    }

    void parse_signature(jinja_stmt & s) {
        expect_op("(");
        bool defaults = false;
        while (!is_op(")")) {
            if (!s.targets.empty()) expect_op(",");
            s.targets.push_back(expect_name());
            if (skip_op("=")) {
                s.conds.push_back(parse_expression());
                defaults = true;
            } else {
                if (defaults) jinja_fail(cur().pos, "syntax error: non-default argument follows default argument");
                s.conds.push_back(nullptr);
            }
        }
        expect_op(")");
    }

    // the statements up to one of the end tags (left unconsumed: cur() is that tag's name)
    jinja_stmt_list subparse(std::initializer_list<const char *> ends, const char * what, uint32_t open_pos) {
        depth_guard g(*this, open_pos);
        jinja_stmt_list body;
        for (;;) {
            const jinja_token & tk = cur();
            if (tk.type == JINJA_T_EOF) {
                if (ends.size() == 0) return body;
                jinja_fail(open_pos, std::string("syntax error: unexpected end of template: '") + what +
                                         "' is not closed (expected '" + *ends.begin() + "')");
            }
            if (tk.type == JINJA_T_TEXT) {
                auto s = std::make_unique<jinja_stmt>();
                s->kind = JINJA_S_TEXT;
                s->pos = tk.pos;
                s->text = tk.s;
                body.push_back(std::move(s));
                ++k;
            } else if (tk.type == JINJA_T_VAR_BEGIN) {
                ++k;
                auto s = std::make_unique<jinja_stmt>();
                s->kind = JINJA_S_OUTPUT;
                s->pos = cur().pos;
                s->e = parse_tuple();
                if (cur().type != JINJA_T_VAR_END) fail_unexpected("end of print statement ('}}')");
                ++k;
                body.push_back(std::move(s));
            } else if (tk.type == JINJA_T_BLOCK_BEGIN) {
                ++k;
                if (cur().type == JINJA_T_NAME) {
                    for (const char * e : ends) {
                        if (cur().s == e) return body;
                    }
                }
                body.push_back(parse_statement());
                expect_block_end();
            } else {
                fail_unexpected("template data or a tag");
            }
        }
    }

    // after the tag's header: '%}', the body, and the end tag (its name consumed, not its '%}')
    jinja_stmt_list parse_block(std::initializer_list<const char *> ends, const char * what, uint32_t pos) {
        skip_op(":");
        expect_block_end();
        return subparse(ends, what, pos);
    }

    jinja_stmt_ptr parse_statement() {
        const jinja_token & tk = cur();
        if (tk.type != JINJA_T_NAME) fail_unexpected("a statement name");
        const std::string nm = tk.s;
        const uint32_t pos = tk.pos;
        auto s = std::make_unique<jinja_stmt>();
        s->pos = pos;
        ++k;
        if (nm == "if") {
            s->kind = JINJA_S_IF;
            for (;;) {
                s->conds.push_back(parse_tuple(1));
                s->bodies.push_back(parse_block({"elif", "else", "endif"}, "if", pos));
                const std::string e = t[k++].s;
                if (e == "elif") continue;
                if (e == "else") {
                    s->bodies.push_back(parse_block({"endif"}, "if", pos));
                    ++k;
                }
                break;
            }
        } else if (nm == "for") {
            s->kind = JINJA_S_FOR;
            parse_targets(*s, "in", false);
            if (!skip_name("in")) fail_unexpected("'in'");
            s->e = parse_tuple(1, "recursive");
            if (skip_name("if")) s->cond = parse_expression();
            if (is_name("recursive")) jinja_fail(cur().pos, "unsupported: recursive for loops");
            ++loops;
            s->bodies.push_back(parse_block({"endfor", "else"}, "for", pos));
            --loops;
            if (t[k++].s == "else") {
                s->bodies.push_back(parse_block({"endfor"}, "for", pos));
                ++k;
            }
        } else if (nm == "set") {
            parse_targets(*s, nullptr, true);
            if (skip_op("=")) {
                s->kind = JINJA_S_SET;
                s->e = parse_tuple();
            } else {
                s->kind = JINJA_S_SET_BLOCK;
                if (s->target_tuple) jinja_fail(pos, "unsupported: block set of a tuple");
                if (is_op("|")) s->filters = parse_filter(nullptr);
                s->bodies.push_back(parse_block({"endset"}, "set", pos));
                ++k;
            }
        } else if (nm == "macro") {
            s->kind = JINJA_S_MACRO;
            s->text = expect_name();
            parse_signature(*s);
            macros.push_back(s.get());
            const int saved_loops = loops;
            loops = 0;
            s->bodies.push_back(parse_block({"endmacro"}, "macro", pos));
            loops = saved_loops;
            macros.pop_back();
            ++k;
        } else if (nm == "call") {
            s->kind = JINJA_S_CALL;
            if (is_op("(")) parse_signature(*s);
            s->e = parse_expression();
            if (s->e->kind != JINJA_E_CALL) jinja_fail(s->e->pos, "syntax error: expected a call after 'call'");
            macros.push_back(s.get());
            const int saved_loops = loops;
            loops = 0;
            s->bodies.push_back(parse_block({"endcall"}, "call", pos));
            loops = saved_loops;
            macros.pop_back();
            ++k;
        } else if (nm == "filter") {
            s->kind = JINJA_S_FILTER;
            s->filters = parse_filter(nullptr, true);
            s->bodies.push_back(parse_block({"endfilter"}, "filter", pos));
            ++k;
        } else if (nm == "with") {
            s->kind = JINJA_S_WITH;
            while (cur().type != JINJA_T_BLOCK_END) {
                if (!s->targets.empty()) expect_op(",");
                jinja_stmt tmp;
                parse_targets(tmp, nullptr, false);
                if (tmp.target_tuple) jinja_fail(pos, "unsupported: tuple target in 'with'");
                s->targets.push_back(tmp.targets[0]);
                expect_op("=");
                s->conds.push_back(parse_expression());
            }
            s->bodies.push_back(parse_block({"endwith"}, "with", pos));
            ++k;
        } else if (nm == "break" || nm == "continue") {
            if (loops == 0) jinja_fail(pos, "syntax error: '" + nm + "' outside of a for loop");
            s->kind = nm == "break" ? JINJA_S_BREAK : JINJA_S_CONTINUE;
        } else if (nm == "generation") {
            s->kind = JINJA_S_BLOCK;
            const int saved_loops = loops; // the body is a call block's: no break/continue across it
            loops = 0;
            s->bodies.push_back(parse_block({"endgeneration"}, "generation", pos));
            loops = saved_loops;
            ++k;
        } else {
            for (const char * e : k_end_tags) {
                if (nm == e) jinja_fail(pos, "syntax error: unexpected tag '" + nm + "'");
            }
            static const char * const known[] = {"block", "extends",    "include", "import",    "from",
                                                 "do",    "autoescape", "trans",   "pluralize", "endblock"};
            for (const char * e : known) {
                if (nm == e) jinja_fail(pos, "unsupported tag '" + nm + "'");
            }
            jinja_fail(pos, "unknown tag '" + nm + "'");
        }
        return s;
    }
};

} // namespace

jinja_stmt_list jinja_parse(const jinja_source & src, const std::vector<jinja_token> & toks,
                            const jinja_parse_limits & lim) {
    parser p{src, toks, lim, 0, 0, 0, {}};
    return p.subparse({}, "template", 0);
}
