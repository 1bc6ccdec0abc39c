// chat.cpp - chat templates (see chat.h).
#include "chat.h"

#include "jinja.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

static std::string trim(const std::string & s) {
    const char * ws = " \t\n\r";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

llm_chat_template llm_chat_template_from_name(const std::string & name) {
    if (name == "llama2" || name == "llama-2") return LLM_CHAT_TEMPLATE_LLAMA2;
    if (name == "llama3" || name == "llama-3") return LLM_CHAT_TEMPLATE_LLAMA3;
    return LLM_CHAT_TEMPLATE_UNKNOWN;
}

const char * llm_chat_template_name(llm_chat_template t) {
    switch (t) {
        case LLM_CHAT_TEMPLATE_LLAMA2: return "llama2";
        case LLM_CHAT_TEMPLATE_LLAMA3: return "llama3";
        default: return "unknown";
    }
}

llm_chat_template llm_chat_detect(const std::string & jinja, bool vocab_has_llama3_headers) {
    if (jinja.find("<|start_header_id|>") != std::string::npos) return LLM_CHAT_TEMPLATE_LLAMA3;
    if (jinja.find("[INST]") != std::string::npos) return LLM_CHAT_TEMPLATE_LLAMA2;
    return vocab_has_llama3_headers ? LLM_CHAT_TEMPLATE_LLAMA3 : LLM_CHAT_TEMPLATE_LLAMA2;
}

std::string llm_chat_apply(llm_chat_template t, const std::vector<llm_chat_msg> & msgs, bool add_assistant) {
    std::ostringstream ss;
    if (t == LLM_CHAT_TEMPLATE_LLAMA3) {
        for (const auto & m : msgs) {
            ss << "<|start_header_id|>" << m.role << "<|end_header_id|>\n\n" << trim(m.content) << "<|eot_id|>";
        }
        if (add_assistant) ss << "<|start_header_id|>assistant<|end_header_id|>\n\n";
        return ss.str();
    }
    // Llama 2: [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant}</s>[INST] ...
    bool inside_turn = true;
    ss << "[INST] ";
    for (const auto & m : msgs) {
        const std::string content = trim(m.content);
        if (!inside_turn) {
            inside_turn = true;
            ss << "[INST] ";
        }
        if (m.role == "system") {
            ss << "<<SYS>>\n" << content << "\n<</SYS>>\n\n";
        } else if (m.role == "user") {
            ss << content << " [/INST]";
        } else {
            ss << " " << content << "</s>";
            inside_turn = false;
        }
    }
    (void) add_assistant;  // the assistant turn opens right after [/INST]
    return ss.str();
}

bool llm_chat_delta(const llm_chat_render_fn & render, const std::vector<llm_chat_msg> & past,
                    const std::vector<llm_chat_msg> & added, bool add_assistant, std::string * delta) {
    std::vector<llm_chat_msg> all = past;
    all.insert(all.end(), added.begin(), added.end());
    std::string before, after;
    if ((!past.empty() && !render(past, false, &before)) || !render(all, add_assistant, &after)) return false;
    *delta = after.compare(0, before.size(), before) == 0 ? after.substr(before.size()) : std::move(after);
    return true;
}

std::string llm_chat_delta(llm_chat_template t, const std::vector<llm_chat_msg> & past,
                           const std::vector<llm_chat_msg> & added, bool add_assistant) {
    std::string delta;
    llm_chat_delta(
        [t](const std::vector<llm_chat_msg> & msgs, bool add, std::string * out) {
            *out = llm_chat_apply(t, msgs, add);
            return true;
        },
        past, added, add_assistant, &delta);
    return delta;
}

bool llm_chat_apply_jinja(const std::string & tmpl, const nlohmann::json & messages, const nlohmann::json & tools,
                          bool add_generation_prompt, const std::string & bos_token, const std::string & eos_token,
                          std::string * out, std::string * err) {
    llm_jinja_template * t = llm_jinja_parse(tmpl, err);
    if (!t) return false;
    // the variables transformers' apply_chat_template passes (documents is None without RAG documents)
    nlohmann::json ctx = {
        {"messages", messages},   {"tools", tools},         {"documents", nullptr},
        {"bos_token", bos_token}, {"eos_token", eos_token}, {"add_generation_prompt", add_generation_prompt},
    };
    const bool ok = llm_jinja_render(t, ctx, out, err);
    llm_jinja_free(t);
    return ok;
}
