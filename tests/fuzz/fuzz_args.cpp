// libFuzzer: the CLI argument parser; the input is split into argv at NUL bytes.
#include "args.h"

#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    std::vector<std::string> parts = {"main"};
    std::string cur;
    for (size_t i = 0; i < size; ++i) {
        if (data[i] == 0) {
            parts.push_back(cur);
            cur.clear();
        } else {
            cur.push_back((char) data[i]);
        }
    }
    parts.push_back(cur);
    std::vector<const char *> argv;
    for (const auto & p : parts) argv.push_back(p.c_str());
    llm_cli_params p;
    std::string err;
    // -f reads files: keep the fuzzer away from the file system
    for (const auto & a : parts) {
        if (a == "-f" || a == "--file") return 0;
    }
    if (!llm_cli_parse((int) argv.size(), argv.data(), p, &err)) {
        if (err.empty() || err.find('\n') != std::string::npos) __builtin_trap();  // one-line errors only
    }
    (void) llm_utf8_invalid_at(cur);
    return 0;
}
