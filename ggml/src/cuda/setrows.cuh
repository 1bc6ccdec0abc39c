// setrows.cuh - SET_ROWS: dst (a view of src0, f32/f16, any strides) gets the f32 rows of src1 at the
// rows named by i32 src2: src0[:, src2[i], i2, i3] = src1[:, i, i2, i3]. Indices out of range are skipped
// (a kernel cannot abort; the CPU kernel reports them).
#pragma once
#include "common.cuh"

GGML_CUDA_OP(set_rows);
