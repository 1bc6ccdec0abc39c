// cpu/amx.h - quantized mul_mat on Intel AMX int8 tiles (Sapphire Rapids and later): q8_0, q4_0,
// q4_1, q5_0, q5_1 and the K-quants q2_K..q6_K as weights, their activations quantized to q8_1 /
// q8_K as the VNNI tiles do.
//
// Used by ggml_cpu_op_mul_mat when the batch has several columns (prompt processing); decode (N = 1)
// stays on the AVX-512 VNNI mat-vec, which is memory bound anyway.
//
//   if (ggml_cpu_amx_use(dst)) {            // same answer for work size and compute
//       size_t ws = ggml_cpu_amx_work_size(dst);
//       ggml_cpu_amx_mul_mat(p, dst);       // called by all p.nth threads, one barrier inside
//   }
//
// Per tile block (32 values, 16 for the K-quants with 16-value scales), one TDPBSSD computes the
// exact int32 dots of 16 weight rows x 16 activation columns; AVX-512 then adds int32 * (d_w * d_a)
// (+ min_w * s_a for the types with a min) into f32 accumulators. q8_0 weights are read in place;
// the other types are unpacked per 32-row panel into int8 tiles (cpu/amx-quants.h). Activations are
// packed once per call into the VNNI tile layout. Runtime checks: CPUID (AMX-TILE, AMX-INT8) and
// Linux's arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA); env GGML_NO_AMX=1 disables it.
// GGML_AMX_EMULATE=1 (tests only) runs the same path with scalar tile math on any CPU with AVX2.
#pragma once

#include "cpu/ops.h"
#include "ggml.h"

#include <cstddef>

// AMX int8 is present and this process may use it (checked once, cached); true under GGML_AMX_EMULATE.
bool ggml_cpu_amx_int8_available();
// dst = mul_mat(a, f32/f16 b) goes through AMX (a type with an AMX description, N >= 2, AMX present).
bool ggml_cpu_amx_use(const ggml_tensor * dst);
// Scratch bytes for the packed activations.
size_t ggml_cpu_amx_work_size(const ggml_tensor * dst);
// The whole op (see cpu/mul_mat.cpp for the shapes); all threads call it.
void ggml_cpu_amx_mul_mat(const ggml_cpu_params & p, ggml_tensor * dst);
