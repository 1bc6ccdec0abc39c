// binary.cuh - ADD and MUL: dst = a op b, b repeated over a (b->ne[i] divides a->ne[i]); any strides.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(add);
GGML_CUDA_OP(mul);
