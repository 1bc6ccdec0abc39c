// The Jinja interpreter for chat templates: hand-written expectations per feature and per error, the limits,
// llm_chat_apply_jinja, and the golden cases of scripts/jinja_golden.py (jinja2's output for the real templates
// and for feature snippets; scripts/jinja-golden.sh BUILD_DIR makes them, LLM_JINJA_GOLDEN points elsewhere).
#include "chat.h"
#include "jinja.h"
#include "test_util.h"

#include <dirent.h>
#include "doctest_cstr.h"
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

using ojson = nlohmann::ordered_json;

static const int64_t k_now = 1721995200; // 2024-07-26 12:00:00 UTC, as scripts/jinja_golden.py

// the output, or "ERR <error>"
static std::string render(const std::string & tmpl, const ojson & ctx = ojson::object(),
                          const llm_jinja_options * o = nullptr) {
    std::string err, out;
    llm_jinja_options opts;
    opts.now = k_now;
    if (o) opts = *o;
    llm_jinja_template * t = llm_jinja_parse(tmpl, &err);
    if (!t) return "ERR " + err;
    const bool ok = llm_jinja_render(t, ctx, &out, &err, &opts);
    llm_jinja_free(t);
    return ok ? out : "ERR " + err;
}

static std::string render(const std::string & tmpl, const char * ctx_json) {
    return render(tmpl, ojson::parse(ctx_json));
}

TEST_CASE("text, expressions and comments") {
    CHECK(render("Hello {{ name }}!{# not shown #}", R"({"name": "World"})") == "Hello World!");
    CHECK(render("{{ 'a' ~ 'b' }}{{ \"c\" 'd' }}") == "abcd");
    CHECK(render("{{ 1 }}{{ -2 }}{{ 1_000 }}{{ 0x10 }}{{ 0b11 }}{{ 0o7 }}") == "1-210001637");
    CHECK(render("{{ 'esc \\n\\t\\\\ \\x41\\u00e9 \\U0001F600 \\q' }}") == "esc \n\t\\ A\xc3\xa9 \xf0\x9f\x98\x80 \\q");
    CHECK(render("{% raw %}{{ kept }}{% endraw %}") == "{{ kept }}");
    CHECK(render("{{ 1, 2 }}") == "(1, 2)");
}

TEST_CASE("whitespace: trim_blocks, lstrip_blocks and - / + as HF transformers sets jinja2 up") {
    const char * ctx = R"({"xs": [1, 2]})";
    CHECK(render("<ul>\n  {% for x in xs %}\n  <li>{{ x }}</li>\n  {% endfor %}\n</ul>", ctx) ==
          "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>");
    CHECK(render("a  {{- ' b ' -}}  c") == "a b c");
    CHECK(render("a\n  {%- if true -%}\n  b  \n{%- endif %}") == "ab");
    CHECK(render("{{ 'x' }}\n{{ 'y' }}") == "x\ny"); // no trim after }}
    CHECK(render("  {%+ if true %}x{% endif %}") == "  x");
    CHECK(render("{% if true +%}\nx{% endif %}") == "\nx");
    CHECK(render("a {# c #}\nb") == "a b");
    CHECK(render("x  {% if true %}y{% endif %}") == "x  y"); // lstrip only from the start of a line
    CHECK(render("one trailing newline dropped\n") == "one trailing newline dropped");
    CHECK(render("two\n\n") == "two\n");
    CHECK(render("crlf\r\nline\r{{ 'x' }}") == "crlf\nline\nx");
}

TEST_CASE("if / elif / else and truthiness") {
    const std::string t = "{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}";
    CHECK(render(t, R"({"n": 7})") == "big");
    CHECK(render(t, R"({"n": 3})") == "mid");
    CHECK(render(t, R"({"n": 1})") == "small");
    CHECK(render("{% if [] or {} or '' or 0 or 0.0 or none or missing %}T{% else %}F{% endif %}") == "F");
    CHECK(render("{% if [0] and {'a': 1} and ' ' and -1 and 'False' %}T{% endif %}") == "T");
    CHECK(render("{{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}[{{ 'y' if 0 }}]") == "yn[]");
}

TEST_CASE("for loops: loop variables, else, filters, unpacking") {
    const char * ctx = R"({"xs": ["a", "b", "c"], "d": {"k1": 1, "k2": 2}})";
    CHECK(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                 "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ x }} {% endfor %}",
                 ctx) == "1032TrueFalse3a 2121FalseFalse3b 3210FalseTrue3c ");
    CHECK(render("{% for x in xs %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{% endfor %}", ctx) ==
          "<a>b|a<b>c|b<c>|");
    CHECK(render("{% for x in xs %}{{ loop.cycle('o', 'e') }}{% endfor %}", ctx) == "oeo");
    CHECK(render("{% for x in [] %}x{% else %}none{% endfor %}") == "none");
    CHECK(render("{% for x in missing %}x{% else %}undefined is empty{% endfor %}") == "undefined is empty");
    CHECK(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", ctx) ==
          "k1=1;k2=2;k1k2");
    CHECK(render("{% for x in xs if x != 'b' %}{{ x }}{{ loop.index }}/{{ loop.length }} {% endfor %}", ctx) ==
          "a1/2 c2/2 ");
    CHECK(render("{% for c in 'h\xc3\xa9' %}[{{ c }}]{% endfor %}") == "[h][\xc3\xa9]");
    CHECK(
        render(
            "{% for i in range(3) %}{% for j in range(2) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}|{% endfor %}") ==
        "001 012 |101 112 |201 212 |");
    CHECK(render(
              "{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
              "{{ x }}{% endfor %}") == "13");
}

TEST_CASE("set, block set, tuples, and scoping as jinja2 compiles it") {
    CHECK(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 3, 4 %}{{ t }}") == "12(3, 4)");
    CHECK(render("{% set x | upper %}shout {{ 1 }}{% endset %}[{{ x }}]") == "[SHOUT 1]");
    // a loop iteration is a scope: assignments vanish when it ends, and each iteration starts afresh
    CHECK(render("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}|{% endfor %}{{ x }}") == "01|02|0");
    // if does not make a scope
    CHECK(render("{% if true %}{% set z = 3 %}{% endif %}{{ z }}") == "3");
    CHECK(render("{% with a = 1 %}{{ a }}{% set b = 2 %}{% endwith %}[{{ a }}{{ b }}]") == "1[]");
    // namespaces carry state out of loops
    CHECK(render("{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}"
                 "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }} {{ ns.missing is defined }}") ==
          "6 123 False");
    CHECK(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns['b'] }}{{ ns }}") ==
          "12<Namespace {'a': 1, 'b': 2}>");
}

TEST_CASE("macros: defaults, keywords, varargs/kwargs, caller, recursion, closures") {
    const std::string m =
        "{% macro greet(name, greeting='Hello', end='!') %}{{ greeting }}, {{ name }}{{ end }}{% endmacro %}";
    CHECK(render(m + "{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(end='?', name='Cy') }}") ==
          "Hello, Ann! Hi, Bob! Hello, Cy?");
    CHECK(render("{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}[{{ c }}]{% endmacro %}{{ m('x') }}") == "xx![]");
    CHECK(render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}") ==
          "1(2, 3){'k': 'v'}");
    CHECK(render("{% macro m(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                 "{% call(v) m([1, 2]) %}<{{ v }}>{% endcall %}") == "<1><2>");
    CHECK(
        render("{% macro f(k) %}{% if k <= 1 %}1{% else %}{{ k * f(k - 1)|int }}{% endif %}{% endmacro %}{{ f(5) }}") ==
        "120");
    // a macro sees the template's variables as they are when it is called, but not its caller's loop variables
    CHECK(render("{% set g = 1 %}{% macro m() %}{{ g }}{{ x }}{% endmacro %}{{ m() }}{% set g = 2 %}"
                 "{% for x in [9] %}{{ m() }}{% endfor %}") == "12");
    CHECK(render("{% filter upper %}abc {{ 'd' }}{% endfilter %}") == "ABC D");
    CHECK(render("{% generation %}in{% set q = 1 %}{% endgeneration %}[{{ q }}]") == "in[]");
}

TEST_CASE("operators with Python's semantics") {
    CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }}") ==
          "3 -4 2 3.5 1024 0.5 64");
    CHECK(render("{{ -7.5 // 2 }} {{ -7.5 % 2 }} {{ 1 + 2 * 3 }} {{ -2 ** 2 }}") == "-4.0 0.5 7 4");
    CHECK(render("{{ 'ab' * 2 }}{{ [1] + [2] }}{{ 1 ~ none ~ true }}{{ true + 1 }}") == "abab[1, 2]1NoneTrue2");
    CHECK(render("{{ 1 == 1.0 }} {{ (1,) == [1] }} {{ 1 < 2 < 3 }} {{ 'b' > 'a' }} {{ [1, 2] < [1, 3] }}") ==
          "True False True True True");
    CHECK(
        render(
            "{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in missing }}") ==
        "True True True True False");
    CHECK(render("{{ 0 or 'dflt' }} {{ 'a' and 'b' }} {{ not none }} {{ none and x.y }}") == "dflt b True None");
    CHECK(render("{{ xs[0] }}{{ xs[-1] }}[{{ xs[9] }}]{{ xs[1:] }}{{ xs[::-1] }}{{ 'h\xc3\xa9llo'[1:3] }}",
                 R"({"xs": [1, 2, 3]})") == "13[][2, 3][3, 2, 1]\xc3\xa9l");
}

TEST_CASE("values print as Python's str()") {
    CHECK(render("{{ [1, 'a', none, true, 1.5, {'k': (1,)}] }}") == "[1, 'a', None, True, 1.5, {'k': (1,)}]");
    CHECK(render("{{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ -0.0 }}") ==
          "1.0 1e+20 0.30000000000000004 1e+16 1000000000000000.0 1.5e-05 0.0001 -0.0");
    CHECK(render("{{ [\"it's\", 'say \"x\"', 'both \\' \"', 'tab\\t', '\\x01'] }}") ==
          "[\"it's\", 'say \"x\"', 'both \\' \"', 'tab\\t', '\\x01']");
    CHECK(render("{{ none }}|{{ missing }}|{{ (1,) }}|{{ () }}|{{ {} }}") == "None||(1,)|()|{}");
}

TEST_CASE("filters") {
    const char * ctx =
        R"({"users": [{"name": "ann", "age": 31}, {"name": "Bob", "age": 25}, {"name": "cy", "age": 31, "x": 1}]})";
    CHECK(
        render(
            "{{ '  hi \\n'|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hi'|upper }}{{ 'Hi'|lower }}|{{ 'hello wORLD'|title }}|"
            "{{ 'hELLO'|capitalize }}") == "hi|hi|HIhi|Hello World|Hello");
    CHECK(render("{{ [1, 2]|length }}{{ 'h\xc3\xa9'|length }}{{ {'a': 1}|count }}{{ missing|length }}") == "2210");
    CHECK(render("{{ missing|default('d') }} {{ none|default('d') }} {{ ''|d('d', true) }}") == "d None d");
    CHECK(render("{{ [1, 2, 3]|join(', ') }} {{ users|map(attribute='name')|join('/') }}", ctx) ==
          "1, 2, 3 ann/Bob/cy");
    CHECK(render("{{ [3, 1, 2]|first }}{{ [3, 1, 2]|last }}{{ [3, 1, 2]|sort }}{{ [3, 1, 2]|sort(reverse=true) }}{{ "
                 "['b', 'A', 'a']|sort }}") == "32[1, 2, 3][3, 2, 1]['A', 'a', 'b']");
    CHECK(render("{{ users|sort(attribute='age')|map(attribute='name')|list }}", ctx) == "['Bob', 'ann', 'cy']");
    CHECK(render("{{ users|selectattr('age', 'equalto', 31)|map(attribute='name')|list }} "
                 "{{ users|rejectattr('x')|list|length }} {{ users|selectattr('x', 'defined')|list|length }}",
                 ctx) == "['ann', 'cy'] 2 1");
    CHECK(render("{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3, 4]|reject('even')|list }}{{ [0, 1, '']|select|list "
                 "}}") == "[1, 3][1, 3][1]");
    CHECK(render("{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1}|items|list }} {{ [1, 2, 1]|unique|list }}") ==
          "[('a', 2), ('b', 1)] [('b', 1)] [1, 2]");
    CHECK(render("{{ 'a-b'|replace('-', '+') }} {{ 'a\\nb'|indent(2) }} {{ 'a\\nb'|indent(2, true) }}") ==
          "a+b a\n  b   a\n  b");
    CHECK(render("{{ '3.7'|int }} {{ 'x'|int }} {{ '2.5'|float }} {{ 2.5|round }} {{ 2.675|round(2) }} {{ -3|abs }} {{ "
                 "5|string ~ 'x' }}") == "3 0 2.5 2.0 2.67 3 5x");
    CHECK(render("{{ [1, 2]|sum }} {{ [4, 2]|min }} {{ [4, 2]|max }} {{ 'a b  c'|wordcount }} {{ 'abc'|reverse }} {{ "
                 "'<&>'|e }}") == "3 2 4 3 cba &lt;&amp;&gt;");
    CHECK(render("{{ '%s=%d (%.1f%%)'|format('a', 2, 99.5) }} {{ '%05.1f|%-3s|' % (3.14159, 'x') }}") ==
          "a=2 (99.5%) 003.1|x  |");
}

TEST_CASE("tojson as transformers defines it (json.dumps, ensure_ascii=False)") {
    CHECK(render("{{ {'a': [1, 2.5, none, true], 'b': 'caf\xc3\xa9 \"q\"\\n'}|tojson }}") ==
          "{\"a\": [1, 2.5, null, true], \"b\": \"caf\xc3\xa9 \\\"q\\\"\\n\"}");
    CHECK(render("{{ {'a': [1, {}], 'b': []}|tojson(indent=2) }}") ==
          "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
    CHECK(render("{{ '\xc3\xa9\xf0\x9f\x98\x80'|tojson(ensure_ascii=true) }}") == "\"\\u00e9\\ud83d\\ude00\"");
    CHECK(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ [1, 2]|tojson(separators=(',', ':')) }}") ==
          "{\"a\": 2, \"b\": 1} [1,2]");
    CHECK(render("{{ '\\x01'|tojson }}") == "\"\\u0001\"");
    // key order is the context's: ordered_json keeps the caller's order
    CHECK(render("{{ tool|tojson }}", R"({"tool": {"name": "f", "description": "d", "parameters": {}}})") ==
          "{\"name\": \"f\", \"description\": \"d\", \"parameters\": {}}");
}

TEST_CASE("tests") {
    CHECK(render("{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 1 is number }}{{ true is number }}"
                 "{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}",
                 R"({"x": 1})") == "TrueTrueTrueTrueTrueTrueTrueTrue");
    CHECK(render("{{ 's' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 1 is iterable }}{{ 's' is sequence }}"
                 "{{ {} is sequence }}") == "TrueTrueTrueFalseTrueTrue");
    CHECK(render("{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 2 is in [1, 2] }}{{ 'a' is eq 'a' }}"
                 "{{ 2 is equalto 3 }}{{ 3 is gt 2 }}{{ 'AB' is upper }}{{ true is true }}{{ 1 is true }}") ==
          "TrueFalseTrueTrueTrueFalseTrueTrueTrueFalse");
    CHECK(render("{{ x is not none }} {{ not x is defined }}", R"({"x": null})") == "False False");
}

TEST_CASE("str, dict and list methods") {
    CHECK(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.rsplit(',', 1) }} {{ "
                 "'x</t>y'.split('</t>')[-1] }}") == "['a', 'b', '', 'c'] ['a', 'b'] ['a,b', 'c'] y");
    CHECK(
        render(
            "{{ '\\n x \\n'.strip() }}|{{ '\\n\\nx'.lstrip('\\n') }}|{{ 'x  '.rstrip() }}|{{ 'abc'.startswith('ab') }}"
            "{{ 'abc'.endswith(('x', 'c')) }}{{ 'h\xc3\xa9llo'.find('l') }}{{ 'aXa'.count('a') }}") ==
        "x|x|x|TrueTrue22");
    CHECK(render("{{ 'hi {}!'.format('you') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{n:>4}|{x:.2f}'.format(n='r', "
                 "x=2) }}") == "hi you! aba    r|2.00");
    CHECK(render("{{ m.get('role') }} {{ m.get('x', 'd') }} {{ m.get('x') }} {{ m.keys()|list }} {{ m.values()|list }} "
                 "{{ m.items()|list }}",
                 R"({"m": {"role": "user", "content": "hi"}})") ==
          "user d None ['role', 'content'] ['user', 'hi'] [('role', 'user'), ('content', 'hi')]");
    // a dict's methods win over keys of the same name with '.', keys win with []
    CHECK(render("{{ d.items is callable }} {{ d['items'] }}", R"({"d": {"items": "key"}})") == "True key");
}

TEST_CASE("undefined values behave as jinja2's default Undefined") {
    CHECK(render("[{{ missing }}][{{ missing ~ 'x' }}][{{ missing|trim }}][{{ missing|list }}][{{ missing is sequence "
                 "}}]") == "[][x][][[]][True]");
    CHECK(render("[{{ d.nope }}][{{ d['nope'] }}][{{ xs[5] }}][{{ none.attr }}][{{ 'ab'.nope }}]",
                 R"({"d": {}, "xs": []})") == "[][][][][]");
    CHECK(render("{{ missing == missing }} {{ missing == none }} {{ missing is none }}") == "True False False");
    CHECK(render("{{ missing.attr }}") == "ERR 1:11: UndefinedError: 'missing' is undefined");
    CHECK(render("{{ missing + 1 }}") == "ERR 1:12: UndefinedError: 'missing' is undefined");
    CHECK(render("{{ d.a.b }}", R"({"d": {}})") == "ERR 1:7: UndefinedError: 'dict object' has no attribute 'a'");
    CHECK(render("{{ missing() }}") == "ERR 1:11: UndefinedError: 'missing' is undefined");
}

TEST_CASE("raise_exception and strftime_now") {
    CHECK(render("line one\n{{ raise_exception('Roles must alternate') }}") ==
          "ERR 2:19: raise_exception: Roles must alternate");
    CHECK(render("{{ strftime_now('%Y-%m-%d %b %A') }}") == "2024-07-26 Jul Friday");
}

TEST_CASE("errors name the construct and its line:col") {
    CHECK(render("a\n  {{ x|nope }}") == "ERR 2:8: unknown filter 'nope'");
    CHECK(render("{{ x is nope }}") == "ERR 1:9: unknown test 'nope'");
    CHECK(render("{% if x %}\n{% frobnicate %}") == "ERR 2:4: unknown tag 'frobnicate'");
    CHECK(render("{% for x in xs %}\nno end") ==
          "ERR 1:4: syntax error: unexpected end of template: 'for' is not closed (expected 'endfor')");
    CHECK(render("{% endif %}") == "ERR 1:4: syntax error: unexpected tag 'endif'");
    CHECK(render("{{ 'open }}") == "ERR 1:4: syntax error: unterminated string");
    CHECK(render("{{ (1 }}") == "ERR 1:7: syntax error: unexpected '}', expected ')'");
    CHECK(render("{{ 1 + }}") == "ERR 1:8: syntax error: unexpected end of print statement, expected an expression");
    CHECK(render("{# open") == "ERR 1:1: syntax error: missing end of comment tag");
    CHECK(render("{% include 'x' %}") == "ERR 1:4: unsupported tag 'include'");
    CHECK(render("{% break %}") == "ERR 1:4: syntax error: 'break' outside of a for loop");
    CHECK(render("\xc3\xa9{{ 1 / 0 }}") == "ERR 1:7: ZeroDivisionError: division by zero"); // column in characters
    CHECK(render("{{ 1 + 'a' }}") == "ERR 1:6: TypeError: can only concatenate str (not \"int\") to str");
    CHECK(render("{{ none < 1 }}") ==
          "ERR 1:9: TypeError: '<' not supported between instances of 'NoneType' and 'int'");
    CHECK(render("{{ [1]|select('odd')|length }}") == "ERR 1:22: TypeError: object of type 'generator' has no len()");
    CHECK(render("{{ xs.append(1) }}", R"({"xs": []})") ==
          "ERR 1:13: SecurityError: access to attribute 'append' of 'list' object is unsafe.");
    CHECK(render("{% set x.y = 1 %}") == "ERR 1:4: cannot assign attribute on non-namespace object");
    CHECK(render("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}") ==
          "ERR 1:35: TypeError: macro 'm' takes not more than 1 argument(s)");
    CHECK(render("{{ range(200000)|length }}") ==
          "ERR 1:9: OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    CHECK(render("{{ 9223372036854775807 + 1 }}") == "ERR 1:24: unsupported: integer overflow (past 64 bits)");
    CHECK(render("{{ raise_exception('multi\nline') }}") ==
          "ERR 1:19: raise_exception: multi\\nline"); // stays one line
}

TEST_CASE("limits turn runaway templates into errors") {
    llm_jinja_options o;
    o.now = k_now;
    o.max_output = 1000;
    CHECK(render("{% for i in range(1000) %}xx{% endfor %}", ojson::object(), &o) ==
          "ERR 1:27: output too long: more than 1000 bytes");
    CHECK(render("{{ 'x' * 2000 }}", ojson::object(), &o) == "ERR 1:8: string too long");
    CHECK(render("{{ range(1000)|list }}", ojson::object(), &o).find("string too long") != std::string::npos);
    CHECK(render("{{ range(1000)|list|tojson }}", ojson::object(), &o).find("string too long") != std::string::npos);
    o = llm_jinja_options();
    o.max_alloc = 100000;
    CHECK(render("{% for i in range(100) %}{% set s = 'x' * 2000 %}{% endfor %}", ojson::object(), &o) ==
          "ERR 1:41: template uses too much memory: more than 100000 bytes of strings");
    CHECK(render("{% for c in s %}{% endfor %}", ojson{{"s", std::string(100000, 'x')}}, &o).find("too much memory") !=
          std::string::npos);
    o = llm_jinja_options();
    CHECK(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", ojson::object(), &o) ==
          "ERR 1:20: RecursionError: more than 256 nested macro calls");
    o.max_steps = 10000;
    CHECK(render("{% for i in range(100000) %}{% endfor %}", ojson::object(), &o) ==
          "ERR 1:18: template too expensive: more than 10000 steps");
    const std::string deep = std::string(300, '(') + "1" + std::string(300, ')');
    CHECK(render("{{ " + deep + " }}").find("unsupported: template nested too deeply") != std::string::npos);
    std::string nested;
    for (int i = 0; i < 200; ++i)
        nested += "{% if true %}";
    CHECK(render(nested).rfind("ERR ", 0) == 0);
    CHECK(render("{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.l = [ns, ns] %}ok") ==
          "ok"); // a cycle, freed
}

TEST_CASE("llm_chat_apply_jinja: the Llama 3 template renders as llm_chat_apply") {
    const std::string tmpl =
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ "
        "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
        "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
    const std::vector<llm_chat_msg> msgs = {
        {"system", " Be brief. "}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye\n"}};
    nlohmann::json jm = nlohmann::json::array();
    for (const auto & m : msgs)
        jm.push_back({{"role", m.role}, {"content", m.content}});
    std::string out, err;
    REQUIRE_MESSAGE(llm_chat_apply_jinja(tmpl, jm, nullptr, true, "", "</s>", &out, &err), err);
    CHECK(out == llm_chat_apply(LLM_CHAT_TEMPLATE_LLAMA3, msgs, true));
    REQUIRE(llm_chat_apply_jinja(tmpl, jm, nullptr, false, "<|begin_of_text|>", "", &out, &err));
    CHECK(out == "<|begin_of_text|>" + llm_chat_apply(LLM_CHAT_TEMPLATE_LLAMA3, msgs, false));
    CHECK_FALSE(llm_chat_apply_jinja("{{ messages|length }}{{ x.y }}", jm, nullptr, true, "", "", &out, &err));
    CHECK(err == "1:26: UndefinedError: 'x' is undefined");
    CHECK_FALSE(llm_chat_apply_jinja("{{ tools|length }}", jm, nullptr, true, "", "", &out, &err));
    CHECK(err == "1:10: TypeError: object of type 'NoneType' has no len()");
    REQUIRE(llm_chat_apply_jinja("{{ tools is none }} {{ documents is none }} {{ messages|length }}", jm, nullptr, true,
                                 "", "", &out, &err));
    CHECK(out == "True True 4");
}

TEST_CASE("shared tokenizers' chat templates") {
    for (const char * name : {"llama3-tokenizer", "llama2-tokenizer"}) {
        const std::string path = llm_shared_path(std::string("models/") + name + "/tokenizer_config.json");
        std::ifstream f(path);
        if (!f) {
            MESSAGE("skipping: " << path << " not found");
            continue;
        }
        const nlohmann::json cfg = nlohmann::json::parse(f);
        if (!cfg.contains("chat_template") || !cfg["chat_template"].is_string()) {
            MESSAGE("skipping: " << path << " has no chat_template");
            continue;
        }
        const std::vector<llm_chat_msg> msgs = {{"system", "You are helpful."}, {"user", " Hello \n"}};
        nlohmann::json jm = nlohmann::json::array();
        for (const auto & m : msgs)
            jm.push_back({{"role", m.role}, {"content", m.content}});
        std::string out, err;
        REQUIRE_MESSAGE(
            llm_chat_apply_jinja(cfg["chat_template"].get<std::string>(), jm, nullptr, true, "", "", &out, &err), err);
        // the hard-coded formats of chat.cpp follow these templates
        CHECK(out == llm_chat_apply(llm_chat_detect(cfg["chat_template"].get<std::string>(), false), msgs, true));
    }
}

// ---------------------------------------------------------------------------------------------------------
// golden cases (scripts/jinja_golden.py)

static std::string golden_dir() {
    const char * e = std::getenv("LLM_JINJA_GOLDEN");
    return e && *e ? std::string(e) : std::string(LLM_BINARY_DIR) + "/jinja-golden";
}

static std::string first_diff(const std::string & want, const std::string & got) {
    size_t p = 0;
    while (p < want.size() && p < got.size() && want[p] == got[p])
        ++p;
    auto around = [&](const std::string & s) {
        return nlohmann::json(s.substr(p < 40 ? 0 : p - 40, 100))
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    std::ostringstream ss;
    ss << "first difference at byte " << p << " (want " << want.size() << " bytes, got " << got.size()
       << ")\n  want: " << around(want) << "\n  got:  " << around(got);
    return ss.str();
}

TEST_CASE("golden: byte-identical to jinja2 on real templates and feature snippets") {
    const std::string dir = golden_dir();
    std::vector<std::string> files;
    if (DIR * d = opendir(dir.c_str())) {
        while (dirent * e = readdir(d)) {
            const std::string n = e->d_name;
            if (n.size() > 11 && n.compare(n.size() - 11, 11, ".cases.json") == 0) files.push_back(n);
        }
        closedir(d);
    }
    if (files.empty()) {
        MESSAGE("skipping: no golden cases in " << dir
                                                << " (run scripts/jinja-golden.sh BUILD_DIR or set LLM_JINJA_GOLDEN)");
        return;
    }
    std::sort(files.begin(), files.end());
    int n_ok = 0, n_cases = 0;
    for (const auto & fn : files) {
        std::ifstream f(dir + "/" + fn);
        const ojson data = ojson::parse(f);
        int file_ok = 0;
        for (const auto & c : data["cases"]) {
            const std::string name = c["name"].get<std::string>();
            const std::string src =
                c.contains("template") ? c["template"].get<std::string>() : data["template"].get<std::string>();
            llm_jinja_options o;
            o.now = k_now;
            std::string out, err;
            llm_jinja_template * t = llm_jinja_parse(src, &err);
            const bool ok = t && llm_jinja_render(t, c["context"], &out, &err, &o);
            llm_jinja_free(t);
            ++n_cases;
            bool pass;
            if (c.contains("expect")) {
                const std::string want = c["expect"].get<std::string>();
                pass = ok && out == want;
                CHECK_MESSAGE(ok, name << ": failed where jinja2 renders: " << err);
                if (ok) CHECK_MESSAGE(out == want, name << ": " << first_diff(want, out));
            } else {
                pass = !ok;
                CHECK_MESSAGE(!ok, name << ": rendered where jinja2 raises " << c["error_type"].get<std::string>()
                                        << ": " << c["error"].get<std::string>());
                if (c["error_type"] == "TemplateError" && !ok) { // raise_exception: the template's own message
                    CHECK_MESSAGE(err.find(c["error"].get<std::string>()) != std::string::npos, name << ": " << err);
                }
            }
            // the same through llm_chat_apply_jinja (its json sorts keys: only where order does not matter)
            if (c["chat_api"].get<bool>()) {
                const ojson & x = c["context"];
                std::string out2, err2;
                const bool ok2 = llm_chat_apply_jinja(
                    src, nlohmann::json::parse(x["messages"].dump()), nlohmann::json::parse(x["tools"].dump()),
                    x["add_generation_prompt"].get<bool>(), x["bos_token"].get<std::string>(),
                    x["eos_token"].get<std::string>(), &out2, &err2);
                CHECK_MESSAGE(ok2 == ok, name << ": llm_chat_apply_jinja: " << err2);
                if (ok && ok2) CHECK_MESSAGE(out2 == out, name << ": llm_chat_apply_jinja: " << first_diff(out, out2));
            }
            file_ok += pass;
        }
        n_ok += file_ok;
        MESSAGE(fn << ": " << file_ok << "/" << data["cases"].size() << " cases match jinja2");
    }
    MESSAGE("golden: " << n_ok << "/" << n_cases << " cases match jinja2");
}
