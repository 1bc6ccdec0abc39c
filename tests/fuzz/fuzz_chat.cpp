// libFuzzer: chat-template application on arbitrary messages (roles and contents from the input).
#include "chat.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static const char * roles[] = {"system", "user", "assistant", ""};
    std::vector<llm_chat_msg> msgs;
    size_t i = 0;
    while (i < size) {
        const uint8_t role = data[i++];
        size_t j = i;
        while (j < size && data[j] != 0) ++j;
        msgs.push_back({roles[role & 3], std::string((const char *) data + i, j - i)});
        i = j + 1;
    }
    for (auto t : {LLM_CHAT_TEMPLATE_LLAMA2, LLM_CHAT_TEMPLATE_LLAMA3}) {
        const std::string whole = llm_chat_apply(t, msgs, true);
        if (msgs.size() > 1) {
            std::vector<llm_chat_msg> past(msgs.begin(), msgs.end() - 1), added(msgs.end() - 1, msgs.end());
            (void) llm_chat_delta(t, past, added, true);
        }
        (void) llm_chat_detect(whole, msgs.size() & 1);
    }
    return 0;
}
