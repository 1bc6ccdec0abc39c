// cpu/vec_dot.h - register-tiled dot kernels for mul_mat (the single dots are in ops.h).
//
// A tile kernel computes nr x nc dot products of length n at once, loading each x row and each
// y column once per step, so a weight row read from memory is reused for several activation
// columns (prompt processing) and several rows share one activation load (decode):
//
//   ggml_tile_dot_t f = ggml_cpu_get_tile_dot(GGML_TYPE_Q8_0, 4, 2);  // 4 rows x 2 cols
//   f(K, x, x_row_bytes, y, y_col_bytes, s, s_row_bytes, s_col_bytes);
//   // s[r*s_row_bytes + c*s_col_bytes] (bytes) = dot(x row r, y col c)
//
// x is of the weight type (f32, f16, q8_0); y is of its mul_mat activation type
// (ggml_cpu_vec_dot_type): f32 for f32, f16 or f32 for f16 (see ggml_cpu_get_tile_dot), q8_1 for q8_0.
#pragma once

#include "ggml.h"

#include <cstddef>
#include <cstdint>

#define GGML_TILE_MAX_R 4
#define GGML_TILE_MAX_C 4

typedef void (*ggml_tile_dot_t)(int64_t n, const void * x, size_t bx, const void * y, size_t by, float * s, size_t bs_r,
                                size_t bs_c);

// type_x: weight type; y_f16 selects the f16 x f16 kernel for f16 weights (else f16 x f32).
// 1 <= nr <= GGML_TILE_MAX_R, 1 <= nc <= GGML_TILE_MAX_C.
ggml_tile_dot_t ggml_cpu_get_tile_dot(ggml_type type_x, bool y_f16, int nr, int nc);

// The 4 x 4 table {F<ARGS..., 1, 1>, ..., F<ARGS..., 4, 4>} of a tile kernel template whose last two
// parameters are R and C: ggml_tile_dot_t t[4][4] = GGML_TILE_TABLE(tile_dot_float, float, float);
#define GGML_TILE_TABLE(F, ...)                                                                                        \
    {                                                                                                                  \
        {F<__VA_ARGS__, 1, 1>, F<__VA_ARGS__, 1, 2>, F<__VA_ARGS__, 1, 3>, F<__VA_ARGS__, 1, 4>},                      \
            {F<__VA_ARGS__, 2, 1>, F<__VA_ARGS__, 2, 2>, F<__VA_ARGS__, 2, 3>, F<__VA_ARGS__, 2, 4>},                  \
            {F<__VA_ARGS__, 3, 1>, F<__VA_ARGS__, 3, 2>, F<__VA_ARGS__, 3, 3>, F<__VA_ARGS__, 3, 4>},                  \
            {F<__VA_ARGS__, 4, 1>, F<__VA_ARGS__, 4, 2>, F<__VA_ARGS__, 4, 3>, F<__VA_ARGS__, 4, 4>},                  \
    }

// A tile's row pointers: p[i] = the row at base + min(i, n - 1) * stride, as T (rows past the n real ones repeat
// the last, for kernels that process a whole register's worth of rows).
template <typename T, int N> inline void ggml_tile_rows(const void * base, size_t stride, int n, const T * (&p)[N]) {
    for (int i = 0; i < N; ++i)
        p[i] = (const T *)((const char *)base + (i < n ? i : n - 1) * stride);
}

// Name of the SIMD level vec_dot.cpp was built for ("avx512-vnni", "avx2", "scalar").
const char * ggml_cpu_simd_name();
