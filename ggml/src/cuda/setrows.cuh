// setrows.cuh - SET_ROWS: dst (a view of src0: f32/f16 with any strides, or q8_0/q4_0 with dense rows of whole
// blocks) gets the f32 rows of src1 (any strides) at the rows named by i32 src2: src0[:, src2[i], i2, i3] =
// src1[:, i, i2, i3]. A q8_0/q4_0 row is quantized per 32-value block bit-identically to ggml's reference quantizer
// (cpy.cuh). Indices out of range are skipped (a kernel cannot abort; the CPU kernel reports them).
#pragma once
#include "common.cuh"

GGML_CUDA_OP(set_rows);
