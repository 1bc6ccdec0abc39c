// fuzz_log_errors.h - include in a libFuzzer target whose loaders warn about their input: defines
// LLVMFuzzerInitialize so that only errors are logged (one warning per input would dominate the run time).
#pragma once

#include "ggml.h"

#include <cstdio>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    ggml_log_set(
        [](ggml_log_level level, const char * text, void *) {
            if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
        },
        nullptr);
    return 0;
}
