// getrows.cuh - GET_ROWS: rows of src0 (f32/f16/q8_0; q4_0 ... q6_K contiguous, mmvq-t.cuh) picked by i32 src1
// -> f32
// dst [ne0, n, ne1b, ne2b]; src0's dims 2,3 follow src1's dims 1,2 (or broadcast when 1).
#pragma once
#include "common.cuh"

GGML_CUDA_OP(get_rows);
