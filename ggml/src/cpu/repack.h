// cpu/repack.h - weights stored in 8-row groups for the decode mat-vec (the "CPU_REPACK" buffer type,
// ggml_backend_cpu_repack_buffer_type in ggml-backend.h).
//
// q4_0 x 8: a [K, M] q4_0 matrix in a repack buffer keeps its size and row stride, but the bytes of rows
// 8g .. 8g+7 (g < M / 8) hold, per block column j, one 144-byte group block (block_q4_0x8):
//   d[r]              row 8g + r's scale (f16)
//   qs[32 k + 4 r + i] row 8g + r's qs[4 k + i]      (k 0..3, r 0..7, i 0..3)
// so one 256-bit load holds 8 weights of each of the 8 rows, one dword per row, and the 8 scales are one
// 128-bit load: no per-row gathers or cross-row folds in the mat-vec. Rows 8 (M / 8) .. M - 1 stay plain.
//
// q4_K x 8: the same for 256-weight super-blocks (block_q4_Kx8, 1152 bytes = 8 plain blocks): the 8 rows' d and dmin;
// their 6-bit scales and mins re-encoded per sub-block s (8 of 32 weights) so that one 8-byte load gives a row's
// value per byte: lo[s][r] = (sc & 15) | (mn & 15) << 4 and, per sub-block pair t, hi[t][r] = the high 2 bits of
// sc(2t), mn(2t), sc(2t+1), mn(2t+1) from bit 0 up; qs[256 c + 32 k + 4 r + i] = row r's qs[32 c + 4 k + i] (c: the
// 64-weight chunk whose low nibbles are sub-block 2c and high nibbles 2c+1).
// q6_K x 8: per 256-weight super-block (block_q6_Kx8, 1680 bytes = 8 plain blocks, read front to back): the 8 rows'
// d; their 16 scales as pairs, sc[t][2r + e] = row r's scale of group 2t + e (16 weights each); then per group g
// (weights 16g .. 16g + 15) three 32-byte vectors X, Y, Z, row r's dword at 4r, byte i: with u_v the 6-bit quant
// (0..63, the value + 32) of weight 16g + 4v + i, X = u_0 | (u_3 & 3) << 6, Y = u_1 | (u_3 >> 2 & 3) << 6,
// Z = u_2 | (u_3 >> 4) << 6. So u_0..u_2 are one AND each and u_3 the three top bit pairs shifted together, and a
// group's 8 rows are 96 contiguous bytes: one sequential stream per group.
// The buffer's set_tensor / get_tensor convert, so ggml_backend_tensor_get returns the plain (GGUF) bytes.
// Only mul_mat reads such a tensor (as src0); other ops refuse it (ggml_cpu_supports_op).
#pragma once

#include "ggml.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

struct block_q4_0x8 {
    ggml_fp16_t d[8];
    uint8_t qs[128];
};
static_assert(sizeof(block_q4_0x8) == 8 * sizeof(block_q4_0), "a group block is 8 plain blocks");

struct block_q4_Kx8 {
    ggml_fp16_t d[8], dmin[8];
    uint8_t lo[8][8]; // [sub-block][row]
    uint8_t hi[4][8]; // [sub-block pair][row]
    uint8_t qs[1024];
};
static_assert(sizeof(block_q4_Kx8) == 8 * sizeof(block_q4_K), "a group block is 8 plain blocks");

struct block_q6_Kx8 {
    ggml_fp16_t d[8];
    int8_t sc[8][16];      // [group pair t][2 row + group 2t + e]
    uint8_t qs[16][3][32]; // [group][X Y Z][4 row + i]
};
static_assert(sizeof(block_q6_Kx8) == 8 * sizeof(block_q6_K), "a group block is 8 plain blocks");

// t's data is in the group layout: allocated in a repack buffer, of a type that has one (q4_0, q4_K, q6_K), 2-D, dense
// rows, at least 8 rows.
bool ggml_cpu_is_repacked(const ggml_tensor * t);
// t, or the tensor it is a view of, is in the group layout.
bool ggml_cpu_reads_repacked(const ggml_tensor * t);

// Rows [r0, r1) of the repacked matrix a (r0 a multiple of 8) as plain rows at dst, row stride a->nb[1].
void ggml_cpu_repack_unpack_rows(const ggml_tensor * a, int64_t r0, int64_t r1, void * dst);

// Decode over n_groups consecutive groups of a repacked matrix of type `type` (x: the first group's first byte,
// groups of K / block-size group blocks): s[r * bs] (bytes) = dot(row r, y) for r < 8 n_groups; y: the type's
// activation row (q8_1 for q4_0, q8_K for q4_K and q6_K). Exact integer block dots; AVX2 or plain C++.
void ggml_cpu_gemv_repacked(ggml_type type, int64_t K, const void * x, int64_t n_groups, const void * y, float * s,
                            size_t bs);
void ggml_cpu_gemv_q4_0x8(int64_t K, const void * x, int64_t n_groups, const void * y, float * s, size_t bs);
void ggml_cpu_gemv_q4_Kx8(int64_t K, const void * x, int64_t n_groups, const void * y, float * s, size_t bs);
void ggml_cpu_gemv_q6_Kx8(int64_t K, const void * x, int64_t n_groups, const void * y, float * s, size_t bs);

// Shared by the group mat-vecs: a group's 8 results (row r: v[r]) to s + r * bs bytes (any output row stride).
inline void ggml_repack_store_group(const float * v, float * s, size_t bs) {
    for (int r = 0; r < 8; ++r)
        *(float *)((char *)s + r * bs) = v[r];
}
#if defined(__AVX2__)
inline void ggml_repack_store_group(__m256 v, float * s, size_t bs) {
    alignas(32) float o[8];
    _mm256_store_ps(o, v);
    ggml_repack_store_group(o, s, bs);
}
// The 4 activation bytes at p in every dword lane, against the dword of weights each row of a group block holds.
inline __m256i ggml_repack_bcast4(const int8_t * p) {
    int32_t v;
    std::memcpy(&v, p, sizeof(v));
    return _mm256_set1_epi32(v);
}
#endif
