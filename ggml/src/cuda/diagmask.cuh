// diagmask.cuh - DIAG_MASK_INF: a[i0, i1] = -inf where i0 > n_past + i1 (params: i32 n_past).
#pragma once
#include "common.cuh"

GGML_CUDA_OP(diag_mask_inf);
