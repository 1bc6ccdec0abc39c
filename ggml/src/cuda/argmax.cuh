// argmax.cuh - ARGMAX: f32 [n, rows] -> i32 [rows], the first index of the maximum.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(argmax);
