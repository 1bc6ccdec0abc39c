// Chat templates: exact strings as llama.cpp renders them, and per-turn deltas.
#include "chat.h"

#include "doctest_cstr.h"
#include <nlohmann/json.hpp>

TEST_CASE("llama3 template") {
    std::vector<llm_chat_msg> m = {{"system", "You are helpful."}, {"user", "Hello"}};
    CHECK(llm_chat_apply(LLM_CHAT_TEMPLATE_LLAMA3, m, true) ==
          "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("llama2 template with system prompt and history") {
    std::vector<llm_chat_msg> m = {
        {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
    CHECK(llm_chat_apply(LLM_CHAT_TEMPLATE_LLAMA2, m, true) ==
          "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello!</s>[INST] Bye [/INST]");
}

TEST_CASE("delta of a new turn is the suffix of the whole conversation") {
    for (auto t : {LLM_CHAT_TEMPLATE_LLAMA2, LLM_CHAT_TEMPLATE_LLAMA3}) {
        std::vector<llm_chat_msg> past = {{"user", "Hi"}, {"assistant", "Hello!"}};
        std::vector<llm_chat_msg> add = {{"user", "How are you?"}};
        const std::string d = llm_chat_delta(t, past, add, true);
        std::vector<llm_chat_msg> all = past;
        all.push_back(add[0]);
        const std::string whole = llm_chat_apply(t, all, true);
        CHECK(whole == llm_chat_apply(t, past, false) + d);
        CHECK(d.find("How are you?") != std::string::npos);
        CHECK(d.find("Hello!") == std::string::npos);
    }
}

TEST_CASE("delta with a renderer: a Jinja template, one that re-renders the past, one that fails") {
    // a ChatML-like Jinja template, rendered as llm-main --jinja renders it
    const std::string tmpl = "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                             "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    std::string err;
    auto jinja = [&](const std::vector<llm_chat_msg> & msgs, bool add_assistant, std::string * out) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto & m : msgs)
            j.push_back({{"role", m.role}, {"content", m.content}});
        return llm_chat_apply_jinja(tmpl, j, nullptr, add_assistant, "<s>", "</s>", out, &err);
    };
    std::vector<llm_chat_msg> past;
    std::string d;
    REQUIRE_MESSAGE(llm_chat_delta(jinja, past, {{"system", "S"}, {"user", "Hi"}}, true, &d), err);
    CHECK(d == "<s><|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    past = {{"system", "S"}, {"user", "Hi"}, {"assistant", "Hello!"}};
    REQUIRE_MESSAGE(llm_chat_delta(jinja, past, {{"user", "Bye"}}, true, &d), err);
    CHECK(d == "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");  // the reply is in the past

    // a renderer whose output for the past changes with what follows: the whole text
    auto counting = [](const std::vector<llm_chat_msg> & msgs, bool, std::string * out) {
        *out = std::to_string(msgs.size()) + ":";
        for (const auto & m : msgs)
            *out += m.content;
        return true;
    };
    REQUIRE(llm_chat_delta(counting, {{"user", "a"}}, {{"user", "b"}}, true, &d));
    CHECK(d == "2:ab");

    // a failing renderer: false, and the renderer's own error
    auto failing = [&](const std::vector<llm_chat_msg> & msgs, bool, std::string *) {
        err = "render failed at " + std::to_string(msgs.size());
        return false;
    };
    CHECK(!llm_chat_delta(failing, {{"user", "a"}}, {{"user", "b"}}, true, &d));
    CHECK(err == "render failed at 1");
    CHECK(!llm_chat_delta(failing, {}, {{"user", "b"}}, true, &d));
    CHECK(err == "render failed at 1");
}

TEST_CASE("template detection") {
    CHECK(llm_chat_detect("{{ '<|start_header_id|>' + message['role'] }}", false) == LLM_CHAT_TEMPLATE_LLAMA3);
    CHECK(llm_chat_detect("{{ bos_token + '[INST] ' + content }}", true) == LLM_CHAT_TEMPLATE_LLAMA2);
    CHECK(llm_chat_detect("", true) == LLM_CHAT_TEMPLATE_LLAMA3);
    CHECK(llm_chat_detect("", false) == LLM_CHAT_TEMPLATE_LLAMA2);
    CHECK(llm_chat_template_from_name("llama3") == LLM_CHAT_TEMPLATE_LLAMA3);
    CHECK(llm_chat_template_from_name("chatml") == LLM_CHAT_TEMPLATE_UNKNOWN);
}
