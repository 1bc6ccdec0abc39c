// Chat templates: exact strings as llama.cpp renders them, and per-turn deltas.
#include "chat.h"

#include <doctest/doctest.h>

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

TEST_CASE("template detection") {
    CHECK(llm_chat_detect("{{ '<|start_header_id|>' + message['role'] }}", false) == LLM_CHAT_TEMPLATE_LLAMA3);
    CHECK(llm_chat_detect("{{ bos_token + '[INST] ' + content }}", true) == LLM_CHAT_TEMPLATE_LLAMA2);
    CHECK(llm_chat_detect("", true) == LLM_CHAT_TEMPLATE_LLAMA3);
    CHECK(llm_chat_detect("", false) == LLM_CHAT_TEMPLATE_LLAMA2);
    CHECK(llm_chat_template_from_name("llama3") == LLM_CHAT_TEMPLATE_LLAMA3);
    CHECK(llm_chat_template_from_name("chatml") == LLM_CHAT_TEMPLATE_UNKNOWN);
}
