// libFuzzer: the Jinja interpreter on arbitrary templates. The first byte picks one of a few contexts (chat
// messages with tools, unicode, nested data, empty); the rest is the template. Parse and render must fail with
// an error, never crash, hang or leak; the limits are small so runaway templates stop quickly.
#include "jinja.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

static const nlohmann::ordered_json & context(uint8_t which) {
    static const nlohmann::ordered_json ctxs[4] = {
        nlohmann::ordered_json::parse(R"({
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <think>x</think>"},
                         {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                          "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
                         {"role": "tool", "content": "42"}, {"role": "assistant", "content": "done"}],
            "tools": [{"type": "function", "function": {"name": "f", "description": "d",
                       "parameters": {"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 2]}},
                                      "required": ["a"]}}}],
            "documents": null, "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})"),
        nlohmann::ordered_json::parse(R"({
            "messages": [{"role": "user", "content": "\u3053\u3093\u306b\u3061\u306f \ud83c\udf0d caf\u00e9"},
                         {"role": "assistant", "content": [{"type": "text", "text": " t "}, {"type": "image"}]}],
            "tools": null, "add_generation_prompt": false, "bos_token": "", "eos_token": ""})"),
        nlohmann::ordered_json::parse(R"({"a": [1, 2.5, "x", null, true, {"b": [[], {}]}], "n": -7, "s": " s ",
                                          "d": {"items": 1, "k": {"k": {"k": "v"}}}})"),
        nlohmann::ordered_json::object(),
    };
    return ctxs[which & 3];
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) return 0;
    const std::string src((const char *)data + 1, size - 1);
    std::string err, out;
    llm_jinja_template * t = llm_jinja_parse(src, &err);
    if (!t) return 0;
    llm_jinja_options o;
    o.max_output = 1u << 20;
    o.max_depth = 64;
    o.max_steps = 200000;
    o.max_alloc = 64u << 20;
    o.now = 0;
    (void)llm_jinja_render(t, context(data[0]), &out, &err, &o);
    llm_jinja_free(t);
    return 0;
}
