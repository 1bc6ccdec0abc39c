// cpu/tile_generic.h - a portable tile kernel for any block type: each x block and y block is
// dequantized to f32 (the types' reference to_float) and dotted in float. The scalar fallback of
// the quantized families, and the reference the SIMD tiles are checked against in tests.
//
//   static ggml_tile_table tiles = GGML_TILE_GENERIC_TABLE(GGML_TYPE_Q4_0, GGML_TYPE_Q8_1);
#pragma once

#include "cpu/quants.h"
#include "ggml.h"

#include <cstddef>
#include <cstdint>

template <ggml_type TX, ggml_type TY, int R, int C>
void ggml_tile_dot_generic(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                           size_t bs_c) {
    const ggml_type_traits * tx = ggml_get_type_traits(TX);
    const ggml_type_traits * ty = ggml_get_type_traits(TY);
    const int64_t blk = tx->blck_size; // the y type has the same block size
    float xf[R][256], yf[C][256];
    float acc[R][C] = {};
    for (int64_t ib = 0; ib < n / blk; ++ib) {
        for (int r = 0; r < R; ++r)
            tx->to_float((const char *)vx + r * bx + ib * tx->type_size, xf[r], blk);
        for (int c = 0; c < C; ++c)
            ty->to_float((const char *)vy + c * by + ib * ty->type_size, yf[c], blk);
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) {
                float sum = 0.0f;
                for (int64_t i = 0; i < blk; ++i)
                    sum += xf[r][i] * yf[c][i];
                acc[r][c] += sum;
            }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            *(float *)((char *)s + r * bs_r + c * bs_c) = acc[r][c];
}

#define GGML_TILE_GENERIC_TABLE(TX, TY) GGML_TILE_TABLE(ggml_tile_dot_generic, TX, TY)
