// cuda_test_util.h - include first in a test that needs a GPU: without one (or in a build without
// CUDA) the program prints SKIPPED and exits 77, which CTest reports as skipped (SKIP_RETURN_CODE).
#pragma once

#include <cstdio>
#include <cstdlib>

#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"
#endif

inline const bool g_cuda_test_skip_check = [] {
#ifndef GGML_USE_CUDA
    printf("SKIPPED: built without CUDA\n");
    std::exit(77);
#else
    if (ggml_backend_cuda_get_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        std::exit(77);
    }
#endif
    return false;
}();
