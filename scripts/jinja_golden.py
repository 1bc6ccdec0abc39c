#!/usr/bin/env python3
"""Golden outputs for the Jinja interpreter (llm/jinja-*.cpp), rendered by Python's jinja2 set up as HF
transformers' apply_chat_template does it: ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with the loopcontrols extension and a {% generation %} block, tojson as json.dumps
(ensure_ascii=False), and the raise_exception / strftime_now globals (the clock fixed at NOW).

    python3 scripts/jinja_golden.py TEMPLATE_DIR OUT_DIR

For every TEMPLATE_DIR/NAME.jinja and the SYNTHETIC_TEMPLATES below, renders the conversations below (with add_generation_prompt true and false)
and writes OUT_DIR/NAME.cases.json; the feature snippets below go to OUT_DIR/features.cases.json. Each file:
  {"template": SOURCE or null, "cases": [{"name", "template"?, "context", "expect" | "error", "error_type",
                                           "chat_api"}]}
"expect" holds the exact output; "error" (with jinja2's exception type) when jinja2 raised, and then the C++
side must fail too. "chat_api" marks cases whose context is what llm_chat_apply_jinja passes and whose output
does not depend on dict key order, so the test also runs them through that function.
"""
import datetime
import json
import os
import sys

from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1721995200  # 2024-07-26 12:00:00 UTC; the C++ test passes the same time
BOS, EOS = "<|bos|>", "<|eos|>"


class GenerationBlock(Extension):
    """{% generation %}...{% endgeneration %}: rendered as a call block, as transformers' AssistantTracker."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


class TemplateError(Exception):
    pass


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, context):
    try:
        return {"expect": env.from_string(source).render(**context)}
    except Exception as e:  # noqa: BLE001 - every jinja2 failure is an expected failure of ours
        return {"error": str(e).split("\n")[0][:300], "error_type": type(e).__name__}


def sort_keys(x):
    if isinstance(x, dict):
        return {k: sort_keys(x[k]) for k in sorted(x)}
    if isinstance(x, list):
        return [sort_keys(v) for v in x]
    return x


# ---------------------------------------------------------------------------------------------------------
# conversations

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "description": "Forecast days", "default": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "description": "Current time in a time zone (IANA name).",
                 "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}},
}
ARGS_STR = '{"city": "Paris", "unit": "celsius"}'
ARGS_OBJ = {"city": "Paris", "unit": "celsius"}


def tool_call(args, call_id="call_1", name="get_weather"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


CONVERSATIONS = [
    ("system_user", [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "Hello!"}], None, {}),
    ("user_only", [{"role": "user", "content": "What is 2+2?"}], None, {}),
    ("multi_turn", [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello! How can I help?"},
                    {"role": "user", "content": "Tell me a joke."},
                    {"role": "assistant", "content": "Why did the chicken cross the road?"},
                    {"role": "user", "content": "Why?"}], None, {}),
    ("assistant_empty", [{"role": "user", "content": "Say nothing."},
                         {"role": "assistant", "content": ""},
                         {"role": "user", "content": "Thanks."}], None, {}),
    ("unicode", [{"role": "system", "content": "Réponds en français — s'il te plaît. Ελληνικά, русский."},
                 {"role": "user", "content": "こんにちは 🌍! 中文测试 👩‍💻 ١٢٣ «quotes» \"dq\" 'sq' \\ back\tslash"},
                 {"role": "assistant", "content": "你好！😀 Ça va ? ñ ü ß"},
                 {"role": "user", "content": "🎉🎉 emoji only"}], None, {}),
    ("whitespace", [{"role": "user", "content": "  \n  padded question \n\n"},
                    {"role": "assistant", "content": "\n\nanswer with newlines\n  "},
                    {"role": "user", "content": "\tlast\u00a0"}], None, {}),
    ("tools_str_args", [{"role": "system", "content": "You can call tools."},
                        {"role": "user", "content": "Weather in Paris?"},
                        {"role": "assistant", "content": None, "tool_calls": [tool_call(ARGS_STR)]},
                        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
                         "content": '{"temp": 21, "sky": "sunny"}'},
                        {"role": "assistant", "content": "It is 21°C and sunny in Paris."}],
     [WEATHER_TOOL, TIME_TOOL], {}),
    ("tools_obj_args", [{"role": "user", "content": "Weather in Paris and the time in Tokyo?"},
                        {"role": "assistant", "content": "",
                         "tool_calls": [tool_call(ARGS_OBJ), tool_call({"tz": "Asia/Tokyo"}, "call_2", "get_time")]},
                        {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
                        {"role": "tool", "tool_call_id": "call_2", "content": "18:04"}],
     [WEATHER_TOOL, TIME_TOOL], {}),
    ("tools_pending", [{"role": "user", "content": "Weather in Paris?"}], [WEATHER_TOOL], {}),
    ("tool_then_user", [{"role": "user", "content": "Weather?"},
                        {"role": "assistant", "content": None, "tool_calls": [tool_call(ARGS_STR)]},
                        {"role": "tool", "content": "21 C"},
                        {"role": "assistant", "content": "21 C."},
                        {"role": "user", "content": "<tool_response>not really</tool_response>"}],
     [WEATHER_TOOL], {}),
    ("two_systems", [{"role": "system", "content": "First rule."},
                     {"role": "system", "content": "Second rule."},
                     {"role": "user", "content": "Go."}], None, {}),
    ("think_content", [{"role": "user", "content": "2+2?"},
                       {"role": "assistant", "content": "<think>\nsimple sum\n</think>\n\n4"},
                       {"role": "user", "content": "3+3?"}], None, {}),
    ("reasoning_field", [{"role": "user", "content": "2+2?"},
                         {"role": "assistant", "content": "4", "reasoning_content": "add them"},
                         {"role": "user", "content": "and 3+3?"},
                         {"role": "assistant", "content": "6", "reasoning_content": "again"}], None, {}),
    ("no_thinking", [{"role": "user", "content": "Quick answer please."}], None, {"enable_thinking": False}),
    ("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Describe "},
                                                    {"type": "image"},
                                                    {"type": "text", "text": " this image."}]}], None, {}),
    ("roles_not_alternating", [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], None, {}),
    ("starts_with_assistant", [{"role": "assistant", "content": "I speak first."},
                               {"role": "user", "content": "ok"}], None, {}),
    ("empty", [], None, {}),
    ("long_history", [m for i in range(12) for m in ({"role": "user", "content": f"question {i}"},
                                                     {"role": "assistant", "content": f"answer {i}"})], None, {}),
]


# Templates written for this test in the styles of the two families whose npm packages carry no chat_template
# (Llama 2's [INST] and gpt-oss's harmony format), using the constructs those real templates rely on.
SYNTHETIC_TEMPLATES = {
    "synth-llama2": """{%- if messages and messages[0]['role'] == 'system' -%}
    {%- set system_message = messages[0]['content'] | trim -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set system_message = false -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{- raise_exception('Roles must go user/assistant/user/... after an optional system message') -}}
    {%- endif -%}
    {%- if loop.index0 == 0 and system_message -%}
        {%- set content = '<<SYS>>\\n' ~ system_message ~ '\\n<</SYS>>\\n\\n' ~ message['content'] | trim -%}
    {%- else -%}
        {%- set content = message['content'] | trim -%}
    {%- endif -%}
    {%- if message['role'] == 'user' -%}
        {{ bos_token ~ '[INST] ' ~ content ~ ' [/INST]' }}
    {%- elif message['role'] == 'assistant' -%}
        {{ ' ' ~ content ~ ' ' ~ eos_token }}
    {%- endif -%}
{%- endfor -%}
""",
    "synth-harmony": """{#- a harmony-like format: typed tool signatures from JSON schemas, channels, the date -#}
{%- macro ts_type(spec, nullable=false) -%}
    {%- if spec is not mapping -%}any
    {%- elif spec.enum is defined -%}{{ spec.enum | map('tojson') | join(' | ') }}
    {%- elif spec.type == 'array' -%}
        {%- if spec['items'] is defined -%}{{ ts_type(spec['items']) }}[]{%- else -%}any[]{%- endif -%}
    {%- elif spec.type == 'object' and spec.properties is defined -%}
        {{- '{\\n' -}}
        {%- for name, prop in spec.properties | items -%}
            {%- if prop.description -%}{{ '// ' ~ prop.description ~ '\\n' }}{%- endif -%}
            {{ name }}{{ '' if name in spec.get('required', []) else '?' }}: {{ ts_type(prop) }}
            {%- if prop.default is defined %}, // default: {{ prop.default | tojson }}{% else %},{% endif %}
            {{- '\\n' -}}
        {%- endfor -%}
        }
    {%- elif spec.type in ['integer', 'number'] -%}number
    {%- elif spec.type is string -%}{{ spec.type }}
    {%- else -%}any
    {%- endif -%}
    {%- if nullable %} | null{% endif -%}
{%- endmacro -%}
{%- macro tool_namespace(tools) -%}
namespace functions {
{% for tool in tools -%}
{%- set fn = tool.function if tool.function is defined else tool -%}
// {{ fn.description | default('', true) }}
type {{ fn.name }} = {% if fn.parameters and fn.parameters.properties %}(_: {{ ts_type(fn.parameters) }}) => any;
{% else %}() => any;
{% endif %}
{% endfor -%}
} // namespace functions
{%- endmacro -%}
<|start|>system<|message|>Knowledge cutoff: 2024-06
Current date: {{ strftime_now('%Y-%m-%d') }}

Reasoning: {{ reasoning_effort | default('medium') }}
{%- if tools %}

Calls to these tools must go to the commentary channel: 'functions'.
{%- endif %}<|end|>
{%- set ns = namespace(developer='', first=true) -%}
{%- for m in messages if m.role == 'system' -%}
    {%- set ns.developer = ns.developer ~ ('' if loop.first else '\\n') ~ m.content -%}
{%- endfor -%}
{%- if ns.developer or tools -%}
<|start|>developer<|message|>
{%- if ns.developer %}# Instructions

{{ ns.developer }}
{% endif -%}
{%- if tools %}

# Tools

## functions

{{ tool_namespace(tools) }}
{%- endif -%}
<|end|>
{%- endif -%}
{%- for m in messages -%}
    {%- if m.role == 'user' -%}
<|start|>user<|message|>{{ m.content }}<|end|>
    {%- elif m.role == 'assistant' -%}
        {%- if m.reasoning_content is defined and m.reasoning_content and loop.last -%}
<|start|>assistant<|channel|>analysis<|message|>{{ m.reasoning_content }}<|end|>
        {%- endif -%}
        {%- if m.tool_calls -%}
            {%- for tc in m.tool_calls -%}
                {%- set call = tc.function if tc.function is defined else tc -%}
<|start|>assistant to=functions.{{ call.name }}<|channel|>commentary json<|message|>
                {%- if call.arguments is string %}{{ call.arguments }}{% else %}{{ call.arguments | tojson }}{% endif -%}
<|call|>
            {%- endfor -%}
        {%- endif -%}
        {%- if m.content -%}
<|start|>assistant<|channel|>final<|message|>{{ m.content }}{{ '<|return|>' if loop.last else '<|end|>' }}
        {%- endif -%}
    {%- elif m.role == 'tool' -%}
        {%- set ns2 = namespace(name='unknown') -%}
        {%- for prev in messages[:loop.index0] | reverse -%}
            {%- if ns2.name == 'unknown' and prev.tool_calls -%}
                {%- set ns2.name = (prev.tool_calls | last).function.name -%}
            {%- endif -%}
        {%- endfor -%}
<|start|>functions.{{ m.name | default(ns2.name) }} to=assistant<|channel|>commentary<|message|>{{ m.content | tojson if m.content is not string else m.content }}<|end|>
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|start|>assistant
{%- endif -%}
""",
}


def conversation_cases(env, name, source):
    cases = []
    for conv_name, messages, tools, extra in CONVERSATIONS:
        for agp in (True, False):
            ctx = {"messages": messages, "tools": tools, "documents": None, "add_generation_prompt": agp,
                   "bos_token": BOS, "eos_token": EOS}
            ctx.update(extra)
            case = {"name": f"{name}.{conv_name}.{'gen' if agp else 'nogen'}", "context": ctx}
            case.update(render(env, source, ctx))
            # llm_chat_apply_jinja: no extra variables, and the real clock
            case["chat_api"] = not extra and "strftime_now" not in source and render(env, source, sort_keys(ctx)) == {k: case[k] for k in case
                                                                                       if k in ("expect", "error",
                                                                                                "error_type")}
            cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------------------------
# feature snippets: each rendered with FEATURE_CONTEXT

FEATURE_CONTEXT = {
    "xs": [3, 1, 2], "ys": ["b", "A", "c", "a"], "s": "Héllo, Wörld", "n": 7, "f": 2.5, "neg": -3, "t": True,
    "nothing": None, "empty": [], "e": "", "d": {"b": 2, "a": 1, "items": "key named items", "c": [1, {"x": "y"}]},
    "users": [{"name": "ann", "age": 31, "admin": True, "tags": ["x"]}, {"name": "Bob", "age": 25, "admin": False},
              {"name": "cy", "age": 31, "admin": None, "tags": []}],
    "msg": {"role": "user", "content": "hi"}, "nested": {"a": {"b": {"c": "deep"}}}, "big": 2 ** 40,
    "uni": "日本語テキスト 🌍", "ws": " \t padded \n", "html": "<a href=\"x\">&'</a>",
}

FEATURES = [
    # output, literals, printing as Python's str()
    "plain text only", "{{ 'single' }}{{ \"double\" }}{{ 'adj' 'acent' }}", "{{ 42 }} {{ -7 }} {{ 0 }} {{ 1_000 }}",
    "{{ 0x1F }} {{ 0o17 }} {{ 0b101 }}", "{{ 1.5 }} {{ 1.0 }} {{ 2.50 }} {{ 1e3 }} {{ 1.5e-7 }} {{ 123456789012345678.0 }}",
    "{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 2 / 2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }}",
    "{{ true }} {{ false }} {{ True }} {{ none }} {{ None }}", "{{ [1, 'a', none, true, 2.0] }}", "{{ (1, 2) }} {{ (1,) }} {{ () }}",
    "{{ {'a': 1, 'b': [1, 2], 3: 'x'} }}", "{{ {} }} {{ [] }}", "{{ ['it\\'s', \"say \\\"hi\\\"\", 'both \\' \"', 'back\\\\slash'] }}",
    "{{ ['tab\\there', 'nl\\nhere', 'uni é 🌍', '\\x00\\x7f', '\\u00a0nbsp', '\\u200b'] }}",
    "{{ 'esc: \\t|\\n|\\\\|\\'|\\x41|\\u00e9|\\U0001F600|\\101' }}", "{{ 'unknown \\q escape' }}", "{{ d }}", "{{ users[0] }}",
    "{{ xs }}{{ ys }}", "{{ nothing }}|{{ undefined_var }}|", "{{ 1, 2 }}", "{{ s }} {{ uni }}",
    # whitespace control
    "a  {{- ' b ' -}}  c", "a\n  {%- if true %}\nb\n  {%- endif %}\nc", "x\n    {% if true %}\n    y\n    {% endif %}\nz",
    "{% if true %}  \n  kept\n{% endif %}", "  {% if true %}x{% endif %}  \nnext", "line\n\t{% for i in xs %}{{ i }}{% endfor %}\nend",
    "{# comment #}a{# multi\nline #}b\n{# c -#}   \n  c", "a {#- stripped #} b", "  {#+ keep #}  x", "  {%+ if true %}x{% endif %}",
    "{% if true +%}\nkeeps newline{% endif %}", "{% raw %}{{ not rendered }}{% endraw %}", "  {% raw -%}  {{ x }}  {%- endraw %}  |",
    "trailing newline kept?\n", "two trailing\n\n", "{{ 'a' }}\n{{ 'b' }}\n", "{% for i in xs %}\n{{ i }}\n{% endfor %}\n",
    "{%- for i in xs -%}\n  {{ i }}\n{%- endfor -%}", "{{- 'x' }}   {{ 'y' -}}   \n  z", "a\r\nb\rc\r\n{{ 'd' }}",
    # if / elif / else
    "{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}", "{% if neg > 0 %}pos{% elif neg == 0 %}zero{% else %}neg{% endif %}",
    "{% if empty %}T{% else %}F{% endif %}{% if e %}T{% else %}F{% endif %}{% if d %}T{% endif %}{% if nothing %}T{% else %}F{% endif %}",
    "{% if undefined_var %}T{% else %}F{% endif %}", "{% if 0.0 %}T{% else %}F{% endif %}{% if '0' %}T{% endif %}",
    # for loops and loop variables
    "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
    "{% for x in xs %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }}|{% endfor %}", "{% for x in xs %}{{ loop.cycle('odd', 'even') }}{% endfor %}",
    "{% for x in empty %}X{% else %}empty{% endfor %}", "{% for x in undefined_var %}X{% else %}undef-empty{% endfor %}",
    "{% for k in d %}{{ k }},{% endfor %}", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{% for c in 'añ🌍' %}[{{ c }}]{% endfor %}",
    "{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}", "{% for a, b in ['xy', 'zw'] %}{{ b }}{{ a }}{% endfor %}",
    "{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", "{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %}", "{% for i in range(3) %}{% for j in range(2) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}",
    "{% for x in xs %}{% set y = x * 2 %}{{ y }}{% endfor %}[{{ y }}]", "{% set x = 0 %}{% for i in xs %}{{ x }}{% set x = i %}{{ x }}|{% endfor %}{{ x }}",
    "{% for u in users|selectattr('admin') %}{{ u.name }}{% endfor %}", "{% for x in xs|sort %}{{ x }}{% endfor %}{% for x in xs|reverse %}{{ x }}{% endfor %}",
    "{% for i in range(1, 10, 3) %}{{ i }}{% endfor %}{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}{% for i in range(0) %}x{% endfor %}",
    # set, block set, namespaces, with, scoping
    "{% set a = 1 %}{% set b, c = 2, 3 %}{{ a }}{{ b }}{{ c }}", "{% set t = 1, 2 %}{{ t }}", "{% set x %}block {{ n }}{% endset %}[{{ x }}]",
    "{% set x | upper | trim %}  shout  {% endset %}[{{ x }}]", "{% set ns = namespace(count=0, items='') %}{% for x in xs %}{% set ns.count = ns.count + x %}{% endfor %}{{ ns.count }}",
    "{% set ns = namespace() %}{% set ns.a = 'x' %}{{ ns.a }}{{ ns.missing }}|{{ ns }}", "{% set ns = namespace({'k': 1}, j=2) %}{{ ns.k }}{{ ns.j }}{{ ns['k'] }}",
    "{% set ns = namespace(found=false) %}{% for u in users %}{% if u.age > 30 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}",
    "{% set ns = namespace(s='') %}{% set ns.s %}captured{% endset %}{{ ns.s }}",
    "{% with a = 1, b = n %}{{ a + b }}{% set c = 3 %}{% endwith %}[{{ a }}{{ c }}]", "{% if true %}{% set z = 3 %}{% endif %}{{ z }}",
    "{% for i in [1] %}{% else %}{% set q = 1 %}{% endfor %}[{{ q }}]",
    # macros and call blocks
    "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(greeting='Yo', name='Cy') }}",
    "{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{% endmacro %}{{ m('x') }}", "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}",
    "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", "{% macro m() %}{{ caller() }}{{ caller() }}{% endmacro %}{% call m() %}c{% endcall %}",
    "{% macro m(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) m([1, 2]) %}<{{ v }}>{% endcall %}",
    "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}",
    "{% set g = 'global' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}{% set g = 'changed' %}{{ m() }}",
    "{% macro m() %}{{ loopvar }}{% endmacro %}{% for loopvar in [5] %}[{{ m() }}]{% endfor %}", "{% macro m() %}x{% endmacro %}{{ m }}",
    "{% macro m() %}\n  line\n{% endmacro %}[{{ m() }}]", "{% macro outer() %}{% macro inner() %}in{% endmacro %}[{{ inner() }}]{% endmacro %}{{ outer() }}",
    "{% filter upper %}shout {{ s }}{% endfilter %}", "{% filter replace('a', 'o') | title %}banana bread{% endfilter %}",
    "{% generation %}gen {{ n }}{% endgeneration %}", "{% generation %}{% set inside = 1 %}{% endgeneration %}[{{ inside }}]",
    # operators
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }}",
    "{{ 7.5 // 2 }} {{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ -7.5 % 2 }} {{ 2.0 ** 0.5 }} {{ 10 / 4 * 2 }}", "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ - - 3 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ 2.0 }}", "{{ 'ab' * 3 }}{{ 2 * 'c' }}{{ [1] * 3 }}{{ 'x' * 0 }}{{ 'y' * -1 }}", "{{ [1, 2] + [3] }}{{ (1,) + (2,) }}{{ 'a' + 'b' }}",
    "{{ true + 1 }} {{ true * 3 }} {{ 3 - true }}", "{{ big * 1000 // big }} {{ big ** 1 }}", "{{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' == 'a' }} {{ [1] == [1] }} {{ (1,) == [1] }} {{ none == none }} {{ {'a': 1} == {'a': 1} }}",
    "{{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ 'B' < 'a' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2.0 }}",
    "{{ 'ell' in 'hello' }} {{ 2 in xs }} {{ 'a' in d }} {{ 'z' not in d }} {{ 5 not in xs }} {{ 'x' in undefined_var }}",
    "{{ true and 'yes' }} {{ 0 and 'no' }} {{ '' or 'default' }} {{ 'first' or 'second' }} {{ none or empty }} {{ not 0 }} {{ not not 'x' }}",
    "{{ 'yes' if t else 'no' }} {{ 'yes' if nothing else 'no' }} [{{ 'only' if false }}] {{ 1 if false else 2 if true else 3 }}",
    "{{ not n > 5 }} {{ not (n > 5) }} {{ n > 5 and n < 10 }} {{ -n|abs }} {{ (-n)|abs }}",
    # subscripts, slices, attributes
    "{{ xs[0] }}{{ xs[-1] }}{{ xs[5] }}|{{ d['a'] }}{{ d.a }}{{ d.zz }}|{{ d['zz'] }}|", "{{ s[0] }}{{ s[-1] }}{{ s[1:4] }}{{ s[::-1] }}{{ s[::2] }}",
    "{{ xs[1:] }}{{ xs[:-1] }}{{ xs[::-1] }}{{ xs[10:] }}{{ xs[-10:1] }}{{ xs[::2] }}{{ xs[2:0:-1] }}", "{{ (1, 2, 3)[1:] }}",
    "{{ d.items is callable }}", "{{ d['items'] }}", "{{ nested.a.b.c }} {{ nested['a']['b'].c }} {{ users[1].name }} {{ users.0.name }}",
    "{{ nothing.attr }}|{{ nothing['k'] }}|{{ n.nope }}|{{ xs.length }}|", "{{ msg.role }}{{ msg['content'] }}{{ msg.get('role') }}{{ msg.get('x', 'dflt') }}{{ msg.get('x') }}",
    # filters
    "{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ ws|trim }}|{{ none|trim }}|{{ 5|trim }}", "{{ s|upper }} {{ s|lower }} {{ 'hello wORLD-x (y'|title }} {{ 'hELLO'|capitalize }}",
    "{{ xs|length }} {{ s|length }} {{ d|length }} {{ uni|length }} {{ undefined_var|length }} {{ xs|count }}", "{{ undefined_var|default('dflt') }} {{ nothing|default('dflt') }} {{ ''|default('dflt', true) }} {{ 'v'|d('x') }}",
    "{{ xs|join(',') }} {{ ys|join }} {{ users|join(', ', attribute='name') }} {{ [1, none, 'a']|join('-') }}", "{{ xs|first }} {{ xs|last }} {{ s|first }} {{ empty|first }}|{{ d|first }} {{ d|last }}",
    "{{ xs|list }} {{ s|list }} {{ d|list }} {{ undefined_var|list }}", "{{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }}",
    "{{ xs|sort }} {{ xs|sort(reverse=true) }} {{ ys|sort }} {{ ys|sort(case_sensitive=true) }} {{ users|sort(attribute='age')|map(attribute='name')|join(',') }}",
    "{{ users|sort(attribute='age,name')|map(attribute='name')|join(',') }}", "{{ [1, 2, 2, 1, 3]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }}",
    "{{ xs|min }} {{ xs|max }} {{ ys|min }} {{ ys|max }} {{ users|max(attribute='age') }} {{ empty|max }}|", "{{ xs|sum }} {{ [1.5, 2]|sum }} {{ users|sum(attribute='age') }} {{ xs|sum(start=10) }}",
    "{{ xs|map('string')|join('|') }} {{ users|map(attribute='name')|list }} {{ users|map(attribute='tags.0', default='-')|list }} {{ ys|map('upper')|list }}",
    "{{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }}",
    "{{ users|selectattr('age', 'equalto', 31)|map(attribute='name')|list }} {{ users|selectattr('tags', 'defined')|map(attribute='name')|list }}",
    "{{ xs|select('odd')|list }} {{ xs|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ xs|select('>', 1)|list }} {{ xs|select('in', [1, 3])|list }}",
    "{{ users|selectattr('name', 'in', ['ann', 'cy'])|list|length }}", "{{ xs|select('odd') is iterable }}", "{% if empty|select('odd') %}generator is truthy{% endif %}",
    "{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '.') }} {{ 123|replace('2', 'x') }}",
    "{{ 'line1\nline2\n\nline4'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'x'|indent('> ', true) }}",
    "{{ '3'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ 3.9|int }} {{ -3.9|int }} {{ none|int }} {{ ' 42 '|int }} {{ '0x1A'|int(base=16) }} {{ true|int }}",
    "{{ '2.5'|float }} {{ 'x'|float }} {{ 3|float }} {{ '1e3'|float }} {{ ' -inf '|float }}", "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3|round }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(method='floor') }} {{ -2.5|round }}",
    "{{ -3|abs }} {{ -2.5|abs }} {{ 5|string ~ 'x' }} {{ [1]|string }} {{ none|string }} {{ 'x'|safe }} {{ html|e }} {{ html|escape }}",
    "{{ 'Hello big World'|wordcount }} {{ 'a  b\tc\nd'|wordcount }} {{ uni|wordcount }}", "{{ s|reverse }} {{ xs|reverse|list }} {{ 'abc'|center(9) }}|{{ 'abc'|center(8) }}|",
    "{{ 'The quick brown fox jumps over the lazy dog'|truncate(20) }} {{ 'short'|truncate(20) }} {{ 'killing words here'|truncate(9, true, '..', 0) }}",
    "{{ '%s is %d years, %.2f%%'|format('Ann', 31, 12.345) }} {{ '%5s|%-5s|%05d|%x|%r'|format('a', 'b', 42, 255, 'q') }}", "{{ '%(a)s-%(b)s' % {'a': 1, 'b': 2} }} {{ '%s' % 'one' }} {{ '%s %s' % ('a', 'b') }}",
    "{{ users[0]|attr('name') }}|{{ d|attr('a') }}|{{ d|attr('keys') is callable }}",
    # tojson as HF defines it
    "{{ d|tojson }}", "{{ users|tojson }}", "{{ uni|tojson }} {{ uni|tojson(ensure_ascii=true) }} {{ 'ctl\\x01\\x1f\\x7f\\u2028'|tojson }}",
    "{{ {'a': [1, {}], 'b': [], 'c': {'d': none}}|tojson(indent=2) }}", "{{ [1, [2, 3]]|tojson(indent=0) }}", "{{ xs|tojson(indent='\\t') }}",
    "{{ {'b': 1, 'a': {'d': 1, 'c': 2}}|tojson(sort_keys=true) }}", "{{ d|tojson(separators=(',', ':')) }}", "{{ [1.0, 1e20, 0.1, -0.0, 1234567890123456789, true, none]|tojson }}",
    "{{ {1: 'int key', none: 'none key', true: 'bool key', 2.5: 'float key'}|tojson }}", "{{ 'quote \" backslash \\\\ nl \n tab \t'|tojson }}", "{{ (1, 2)|tojson }}",
    # tests
    "{{ n is defined }} {{ undefined_var is defined }} {{ undefined_var is undefined }} {{ nothing is none }} {{ n is not none }}",
    "{{ n is number }} {{ f is number }} {{ t is number }} {{ n is integer }} {{ t is integer }} {{ f is float }} {{ t is boolean }} {{ n is boolean }}",
    "{{ s is string }} {{ xs is string }} {{ d is mapping }} {{ xs is mapping }} {{ xs is iterable }} {{ s is iterable }} {{ n is iterable }} {{ d is iterable }}",
    "{{ xs is sequence }} {{ s is sequence }} {{ d is sequence }} {{ n is sequence }} {{ undefined_var is sequence }} {{ undefined_var is iterable }}",
    "{{ t is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}",
    "{{ n is eq 7 }} {{ n is equalto 7 }} {{ n is == 7 }} {{ n is ne 7 }} {{ n is lt 8 }} {{ n is gt 8 }} {{ n is ge 7 }} {{ n is le 6 }} {{ n is greaterthan 1 }} {{ n is lessthan 1 }}",
    "{{ 2 is in xs }} {{ 'x' is in 'xyz' }} {{ 'HI' is upper }} {{ 'hi' is lower }} {{ 'Hi' is lower }} {{ '1' is lower }}",
    "{{ none is sameas none }} {{ true is sameas true }} {{ xs is sameas xs }} {{ range is callable }} {{ n is callable }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }}",
    "{{ not n is defined }} {{ n is not defined or true }} {{ msg.content is string and msg.content }}", "{{ undefined_var.attr is defined }}",
    # str / dict / list methods
    "{{ s.upper() }} {{ s.lower() }} {{ 'a b c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  x  y '.split() }}",
    "{{ '  pad  '.strip() }}|{{ '  pad  '.lstrip() }}|{{ '  pad  '.rstrip() }}|{{ 'xxpadxx'.strip('x') }}|{{ '\n\nnl\n'.strip('\n') }}",
    "{{ s.startswith('Hé') }} {{ s.endswith('ld') }} {{ s.startswith(('x', 'H')) }} {{ s.find('l') }} {{ s.rfind('l') }} {{ s.find('zz') }} {{ s.count('l') }}",
    "{{ 'a-b'.replace('-', '_') }} {{ 'hello world'.title() }} {{ \"they're bill's\".title() }} {{ 'hello'.capitalize() }} {{ 'Hello'.swapcase() }}",
    "{{ ', '.join(['a', 'b']) }} {{ 'x'.join('abc') }} {{ '42'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'ab1'.isalnum() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }}",
    "{{ '7'.zfill(3) }} {{ '-7'.zfill(4) }} {{ 'ab'.ljust(4, '.') }}|{{ 'ab'.rjust(4) }}|{{ 'ab'.center(5, '*') }} {{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }}",
    "{{ 'pre_x'.removeprefix('pre_') }} {{ 'x.txt'.removesuffix('.txt') }} {{ 'a\nb\r\nc'.splitlines() }} {{ 'MiXeD'.casefold() }}",
    "{{ '{} and {}'.format('a', 'b') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='x') }} {{ '{:>5}|{:<4}|{:^5}|{:05d}|{:.2f}|{!r}'.format('r', 'l', 'c', 42, 3.14159, 's') }}",
    "{{ d.keys()|list }} {{ d.values()|list|length }} {{ d.items()|list|first }} {{ xs.index(2) }} {{ xs.count(3) }} {{ d.copy() == d }}",
    "{{ users[0].get('tags') }} {{ users[1].get('tags', 'none') }} {{ msg.items()|list }}",
    # globals
    "{{ range(5)|list }} {{ range(2, 5)|list }} {{ range(10, 0, -3)|list }} {{ range(3)|length }}", "{{ dict(a=1, b='x') }} {{ dict([('k', 'v')]) }}",
    "{% set j = joiner(' | ') %}{% for x in xs %}{{ j() }}{{ x }}{% endfor %}", "{{ strftime_now('%Y-%m-%d %H:%M:%S, %d %b %Y, %A %B') }}",
    "{% if false %}{{ raise_exception('not raised') }}{% endif %}ok",
    # assorted
    "{{ {'a': {'b': 1}} }}{{ {'a': {'b': {'c': [1]}}}['a'] }}", "{{ 'straße'|upper }} {{ 'ÉCOLE Ωμέγα ПРИВЕТ'|lower }} {{ 'éa'|capitalize }} {{ 'ÀB'.lower() }}",
    "{{ [1, 2, 3]|map('string')|map('int')|sum }} {{ 10|string|length }} {{ (users|selectattr('age', 'gt', 26)|first).name }}",
    "{% for x in 'ab' %}{% for y in 'cd' %}{{ x ~ y }}{% endfor %}{% endfor %}", "{% for a in [1, 2] %}{% set o = loop %}{% for b in [3] %}{{ o.index }}{{ loop.index }}{% endfor %}{% endfor %}",
    "{{ users|map(attribute='age')|unique|list }} {{ [none, 1]|select('none')|list }} {{ xs.0 }}{{ 'abc'[1] }} {{ ' a b '.split(none, 1) }} {{ ' a b '.rsplit(none, 1) }} {{ 'a b'.split(' ', 0) }}",
    "{{ '\u3000x\u00a0'|trim }}|{{ '\u2028y\x1f'.strip() }}|", "{% set x = 'outer' %}{% macro m(x) %}{{ x }}{% endmacro %}{{ m('arg') }}{{ x }}",
    "{% for m in [{'role': 'user'}, {'role': 'system'}] | rejectattr('role', 'equalto', 'system') %}{{ m.role }}{% endfor %}",
    "{{ (d|dictsort|first)[0] }} {{ d|dictsort|map('first')|list }} {{ ys|map('lower')|sort|join }}", "{% for k, v in d|dictsort if v is number %}{{ k }}{% endfor %}",
    "{{ [1, 2]|tojson|length }} {{ {'k': 'v'}|tojson|tojson }}", "{{ 'a' ~ 'b' * 2 ~ 'c' }} {{ 1 + 2 ~ 3 }} {{ 2 * 3 ~ 4 - 1 }}",
    "{{ xs|length is odd }} {{ xs|first is number }} {{ 'x' ~ xs|length }}", "{% if msg.content is string and msg.content|length > 1 %}long{% endif %}",
    "{{ none|tojson }} {{ true|tojson }} {{ 1.5|tojson }} {{ 'x'|tojson }} {{ [] |tojson }}", "{{ '1,2,3'.split(',')|map('int')|list }}",
    # errors: jinja2 raises, so must we
    "{{ raise_exception('Conversation roles must alternate user/assistant') }}", "{{ undefined_var.attr }}", "{{ undefined_var['k'] }}", "{{ undefined_var + 1 }}",
    "{{ 1 + 'a' }}", "{{ 'a' + 1 }}", "{{ 1 / 0 }}", "{{ 1 // 0 }}", "{{ 1 % 0 }}", "{{ xs < 'a' }}", "{{ none < 1 }}", "{{ 1 in 'abc' }}", "{{ 1 in 5 }}",
    "{{ undefined_fn() }}", "{{ n() }}", "{{ xs|select('odd')|length }}", "{{ 'x'|nofilter }}", "{{ 1 is notatest }}", "{% unknowntag %}", "{% for %}",
    "{% if true %}unclosed", "{% endif %}", "{{ 'unterminated }}", "{{ (1 }}", "{{ 1 ] }}", "{{ }}", "{% set 1 = 2 %}", "{% set x.y = 1 %}", "{{ xs.append(4) }}",
    "{{ d.update({'a': 2}) }}", "{% for a, b in [1, 2] %}{% endfor %}", "{% for a, b in [(1, 2, 3)] %}{% endfor %}", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", "{{ range(1000000)|length }}", "{{ range(1, 2, 0) }}", "{{ {[1]: 2} }}", "{{ 'a'|indent(none) }}",
    "{% break %}", "{{ undefined_var|tojson }}", "{{ namespace|tojson }}", "{{ xs|join(',', attribute='x') }}", "{{ users|sort(attribute='admin') }}",
    "{{ 'a' 'b }}", "{# unclosed comment", "{{ 1 if true else }}", "{{ x is not }}", "{{ xs[1:2:0] }}", "{% include 'other.jinja' %}",
    "{% extends 'base' %}", "{% do xs %}", "{{ '%d' % 'x' }}", "{{ '%s %s' % ('a',) }}", "{{ '{}'.format() }}",
]


def feature_cases(env):
    cases = []
    for k, src in enumerate(FEATURES):
        case = {"name": f"feature{k}", "template": src, "context": FEATURE_CONTEXT}
        case.update(render(env, src, FEATURE_CONTEXT))
        case["chat_api"] = False
        cases.append(case)
    return cases


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tdir, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    env = make_env()
    total = 0
    names = sorted(f[:-6] for f in os.listdir(tdir) if f.endswith(".jinja")) if os.path.isdir(tdir) else []
    sources = {}
    for name in names:
        with open(os.path.join(tdir, name + ".jinja"), encoding="utf-8") as fh:
            sources[name] = fh.read()
    sources.update(SYNTHETIC_TEMPLATES)
    for name, source in sorted(sources.items()):
        cases = conversation_cases(env, name, source)
        with open(os.path.join(out, name + ".cases.json"), "w", encoding="utf-8") as fh:
            json.dump({"template": source, "cases": cases}, fh, ensure_ascii=False, indent=1)
        total += len(cases)
        errors = sum("error" in c for c in cases)
        print(f"jinja_golden: {name}: {len(cases)} cases ({errors} where jinja2 raises)")
    cases = feature_cases(env)
    with open(os.path.join(out, "features.cases.json"), "w", encoding="utf-8") as fh:
        json.dump({"template": None, "cases": cases}, fh, ensure_ascii=False, indent=1)
    total += len(cases)
    print(f"jinja_golden: features: {len(cases)} cases ({sum('error' in c for c in cases)} where jinja2 raises)")
    print(f"jinja_golden: {total} cases in {out}")


if __name__ == "__main__":
    main()
