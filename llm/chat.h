// chat.h - chat templates for multi-turn dialogue (Llama 3 header tokens, Llama 2 [INST]).
//
//   llm_chat_template t = llm_chat_detect(gguf_template_string, vocab_has_llama3_headers);
//   std::vector<llm_chat_msg> hist = {{"system", "Be brief."}, {"user", "Hi"}};
//   std::string prompt = llm_chat_apply(t, hist, /*add_assistant=*/true);
//   // later turns: tokenize only what the new messages add to the formatted history
//   std::string delta = llm_chat_delta(t, hist_before, new_msgs, true);
//   // any other renderer (a Jinja template): llm_chat_delta(render_fn, hist_before, new_msgs, true, &delta)
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

enum llm_chat_template { LLM_CHAT_TEMPLATE_UNKNOWN = 0, LLM_CHAT_TEMPLATE_LLAMA2, LLM_CHAT_TEMPLATE_LLAMA3 };

struct llm_chat_msg {
    std::string role;     // "system", "user", "assistant"
    std::string content;
};

// "llama2" / "llama3" -> template; anything else UNKNOWN
llm_chat_template llm_chat_template_from_name(const std::string & name);
const char *      llm_chat_template_name(llm_chat_template t);
// From the GGUF tokenizer.chat_template (Jinja source) or, if that is empty/unrecognised, the vocab:
// Llama 3 header tokens present -> LLAMA3, else LLAMA2.
llm_chat_template llm_chat_detect(const std::string & jinja, bool vocab_has_llama3_headers);
// Format a whole conversation as llama.cpp's llama_chat_apply_template does (no BOS: the
// tokenizer adds it). add_assistant appends the opening of the assistant's turn.
std::string       llm_chat_apply(llm_chat_template t, const std::vector<llm_chat_msg> & msgs, bool add_assistant);

// Renders a conversation into *out (add_assistant: open the assistant's turn); false on failure (the renderer
// keeps its own error).
using llm_chat_render_fn =
    std::function<bool(const std::vector<llm_chat_msg> & msgs, bool add_assistant, std::string * out)>;
// The text that new messages add after the already rendered (and evaluated) history: render(past + added)
// less its prefix render(past). A template that re-renders earlier turns differently gives the whole text
// (rare; still correct for the model, which then reads the history twice). False when render fails.
bool llm_chat_delta(const llm_chat_render_fn & render, const std::vector<llm_chat_msg> & past,
                    const std::vector<llm_chat_msg> & added, bool add_assistant, std::string * delta);
// The same with a built-in template (which cannot fail).
std::string       llm_chat_delta(llm_chat_template t, const std::vector<llm_chat_msg> & past,
                                 const std::vector<llm_chat_msg> & added, bool add_assistant);

// Render a Jinja chat template (tokenizer.chat_template or --chat-template-file) as HF transformers /
// llama.cpp --jinja do. messages: [{"role":..,"content":..,...}], tools may be null. Returns false with a
// one-line error naming the construct and the position (line:col) on failure.
bool llm_chat_apply_jinja(const std::string & tmpl, const nlohmann::json & messages, const nlohmann::json & tools,
                          bool add_generation_prompt, const std::string & bos_token, const std::string & eos_token,
                          std::string * out, std::string * err);
