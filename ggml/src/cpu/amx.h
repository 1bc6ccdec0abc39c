// cpu/amx.h - q8_0 x q8_1 mul_mat on Intel AMX int8 tiles (Sapphire Rapids and later).
//
// Used by ggml_cpu_op_mul_mat for q8_0 weights when the batch has several columns (prompt
// processing); decode (N = 1) stays on the AVX-512 VNNI mat-vec, which is memory bound anyway.
//
//   if (ggml_cpu_amx_q8_0_use(dst)) {            // same answer for work size and compute
//       size_t ws = ggml_cpu_amx_q8_0_work_size(dst);
//       ggml_cpu_amx_q8_0_mul_mat(p, dst);       // called by all p.nth threads, one barrier inside
//   }
//
// Per 32-element block, one TDPBSSD computes the exact int32 dots of 16 weight rows x 16
// activation columns; AVX-512 then adds int32 * (d_w * d_a) into f32 accumulators. Weights are
// read in place (a 16 x 32-byte tile with the weight row stride); activations are quantized to
// q8_1 and packed once per call into the VNNI tile layout. Runtime checks: CPUID (AMX-TILE,
// AMX-INT8) and Linux's arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA); env GGML_NO_AMX=1 disables it.
#pragma once

#include "cpu/ops.h"
#include "ggml.h"

#include <cstddef>

// AMX int8 is present and this process may use it (checked once, cached).
bool ggml_cpu_amx_int8_available();
// dst = mul_mat(q8_0 a, f32/f16 b) goes through AMX (needs N >= 2 and AMX).
bool ggml_cpu_amx_q8_0_use(const ggml_tensor * dst);
// Scratch bytes for the packed activations.
size_t ggml_cpu_amx_q8_0_work_size(const ggml_tensor * dst);
// The whole op (see cpu/mul_mat.cpp for the shapes); all threads call it.
void ggml_cpu_amx_q8_0_mul_mat(const ggml_cpu_params & p, ggml_tensor * dst);
