// cpu/mul_mat.h - mul_mat's scratch size (used by ggml_cpu_op_work_size in work_size.cpp).
#pragma once

#include "ggml.h"

#include <cstddef>

// Bytes of p.wdata ggml_cpu_op_mul_mat needs for dst (b rows converted to the dot's input type).
size_t ggml_cpu_mul_mat_work_size(const ggml_tensor * dst);
