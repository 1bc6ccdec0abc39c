// cpu/gemm_t16.h - f32 GEMM on 16-row transposed weight panels, for float (f16/f32) weights with
// several activation columns: attention's K.Q and KQ.V, f16 weight matrices in prompt processing.
//
//   alignas(64) float xT[K * 16];                          // [16, K]
//   ggml_cpu_pack_t16(w_rows, GGML_TYPE_F16, w_nb1, mr, K, xT);   // mr <= 16 rows, rest zero
//   ggml_cpu_gemm_t16(K, xT, y, y_nb1, nc, mr, dst, dst_nb1);
//   // dst[m + n * dst_nb1 / 4] = sum_k w[m][k] * y[n][k] for m < mr, n < nc (dst rows dense)
//
// Summation is sequential over k in f32 FMAs, one accumulator per output.
#pragma once

#include "ggml.h"

#include <cstddef>
#include <cstdint>

// Built with AVX-512 (else the functions below abort and mul_mat keeps its dot tiles).
bool ggml_cpu_gemm_t16_available();
// mr (<= 16) rows of K f16/f32 elements (row stride bx bytes) -> xT[k * 16 + m] f32 (64-byte
// aligned); rows mr..15 are zero.
void ggml_cpu_pack_t16(const void * x, ggml_type type, size_t bx, int mr, int64_t K, float * xT);
// dst[m, n] (f32 at dst + n * d1 bytes, m contiguous) = sum_k xT[k * 16 + m] * y_n[k], y_n = y + n * by bytes
// (f32, dense), for m < mr and n < nc.
void ggml_cpu_gemm_t16(int64_t K, const float * xT, const float * y, size_t by, int64_t nc, int mr, float * dst,
                       size_t d1);
