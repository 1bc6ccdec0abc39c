// jinja.h - a Jinja2 interpreter for chat templates (tokenizer.chat_template), rendering them as HF transformers'
// apply_chat_template does: jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
// loopcontrols, its tojson (ensure_ascii=False), and the raise_exception / strftime_now globals. What is and
// is not supported: docs/jinja.md.
//
//   std::string err, out;
//   llm_jinja_template * t = llm_jinja_parse(tmpl_source, &err);        // null + "3:14: unknown filter 'foo'"
//   nlohmann::ordered_json ctx = {{"messages", msgs}, {"add_generation_prompt", true}, {"bos_token", "<s>"}};
//   if (!t || !llm_jinja_render(t, ctx, &out, &err)) fprintf(stderr, "chat template: %s\n", err.c_str());
//   llm_jinja_free(t);
//
// Errors (syntax, unknown filter/test/tag, runtime type errors, raise_exception, limits) come back as one line,
// "LINE:COL: what", never as an abort. Dict order follows the context's JSON objects: pass an ordered_json
// to keep the caller's key order (json.dumps in the template prints keys in that order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

struct llm_jinja_template;

struct llm_jinja_options {
    size_t max_output = 16u << 20; // bytes of output (and of any one string)
    int max_depth = 256;           // nested macro calls
    uint64_t max_steps = 20000000; // evaluation steps
    size_t max_alloc = 1u << 30;   // bytes of strings and lists made while rendering (freed ones count too)
    int64_t now = -1;              // strftime_now's time, seconds since the epoch, formatted as UTC; -1: local now
};

// Parse a template; null (and *err set) on a syntax error or an unknown filter, test or tag.
llm_jinja_template * llm_jinja_parse(const std::string & source, std::string * err);
// Render with the variables of ctx (a JSON object). false (and *err set) on failure; *out is untouched then.
bool llm_jinja_render(const llm_jinja_template * t, const nlohmann::json & ctx, std::string * out, std::string * err,
                      const llm_jinja_options * opts = nullptr);
bool llm_jinja_render(const llm_jinja_template * t, const nlohmann::ordered_json & ctx, std::string * out,
                      std::string * err, const llm_jinja_options * opts = nullptr);
void llm_jinja_free(llm_jinja_template * t);
