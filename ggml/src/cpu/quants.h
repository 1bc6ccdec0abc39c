// cpu/quants.h - the CPU side of each weight type: the activation type its dots read, the
// quantizer that makes those activations, and its register-tile dot kernels (vec_dot.h).
//
//   const ggml_cpu_type_traits * tt = ggml_cpu_get_type_traits(GGML_TYPE_Q4_K);
//   ggml_cpu_get_type_traits(tt->vec_dot_type)->from_float(x, y_q8_K, K);   // b row -> q8_K
//   tt->tiles[nr - 1][nc - 1](K, w, w_row_bytes, y_q8_K, y_row_bytes, s, ...); // see vec_dot.h
//
// One row per type in quants.cpp; the kernels live per family: vec_dot.cpp (f32, f16, q8_0),
// vec_dot_q4_q5.cpp (q4_0, q4_1, q5_0, q5_1 against q8_1), vec_dot_k.cpp (K-quants against q8_K).
#pragma once

#include "cpu/vec_dot.h"
#include "ggml.h"

typedef const ggml_tile_dot_t ggml_tile_table[GGML_TILE_MAX_R][GGML_TILE_MAX_C];

// Rows of a decode tile (tile_decode): a mat-vec takes it for each GGML_TILE_DECODE_R rows, the 4-row tiles for the
// rest.
#define GGML_TILE_DECODE_R 8

struct ggml_cpu_type_traits {
    ggml_type vec_dot_type;       // what mul_mat converts b rows to (GGML_TYPE_COUNT: not a mul_mat weight)
    ggml_from_float_t from_float; // fast f32 -> this type (SIMD where it matters; bit-identical to the ref)
    ggml_tile_table * tiles;      // tiles[nr - 1][nc - 1] against vec_dot_type (nullptr: f32/f16, see vec_dot.h)
    ggml_tile_dot_t tile_decode;  // GGML_TILE_DECODE_R rows x 1 column, or nullptr (the build has none for the type)
};

const ggml_cpu_type_traits * ggml_cpu_get_type_traits(ggml_type type);

// Tile tables per family (x of the weight type, y of its vec_dot_type).
extern ggml_tile_table ggml_cpu_tiles_q8_0;                                           // vec_dot.cpp
extern ggml_tile_table ggml_cpu_tiles_q4_0, ggml_cpu_tiles_q4_1, ggml_cpu_tiles_q5_0, // vec_dot_q4_q5.cpp
    ggml_cpu_tiles_q5_1;
extern const ggml_tile_dot_t ggml_cpu_tile_decode_q4_0; // vec_dot_q4_q5.cpp: AVX2 (Zen 1), else nullptr
extern ggml_tile_table ggml_cpu_tiles_q2_K, ggml_cpu_tiles_q3_K, ggml_cpu_tiles_q4_K, // vec_dot_k.cpp
    ggml_cpu_tiles_q5_K, ggml_cpu_tiles_q6_K;

// q8_K activation quantizer (vec_dot_k.cpp), SIMD, bit-identical to quantize_row_q8_K_ref.
void quantize_row_q8_K(const float * x, block_q8_K * y, int64_t k);
