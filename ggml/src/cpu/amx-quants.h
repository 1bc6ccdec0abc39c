// cpu/amx-quants.h - the weight side of the AMX int8 mul_mat (cpu/amx.cpp): per weight type, how a
// 32-row panel of weight rows becomes int8 A tiles plus per-row, per-block f32 scales.
//
// A weight row of K values is cut into tile blocks of bk values (32, or 16 for the K-quants whose
// scales cover 16 values: q2_K, q3_K, q6_K). Block ib of row m is worth
//     dw[m, ib] * sum_j q[m, ib, j] * x[j]  +  mw[m, ib] * sum_j x[j]
// with q int8: signed values for the symmetric types (q4_0: nibble - 8), unsigned values and the
// min in mw for the others (q4_1: mw = m; q4_K: dw = d * sc, mw = -dmin * min). Against an
// activation block (d_a, int8 a, s_a = d_a * sum(a)) that is dw * d_a * dot(q, a) + mw * s_a:
// one TDPBSSD for the dots, the rest in f32.
//
//   const ggml_amx_quant * t = ggml_amx_get_quant(a->type);     // nullptr: not on AMX
//   t->unpack(rows, row_stride, 32, K, q, dw, mw);              // q[ib][m][bk], dw/mw[ib][32]
#pragma once

#include "ggml.h"

#include <cstddef>
#include <cstdint>

struct ggml_amx_quant {
    int bk;             // values per tile block (per scale): 32 or 16
    bool has_min;       // mw is used
    bool in_place;      // q8_0: the int8 values are the weight bytes, full panels are read in place
    size_t block_bytes; // in place: bytes of one weight block (the values start after the 2-byte scale)
    ggml_type vec_type; // activation type the packing quantizes b to: q8_1 or q8_K (as the VNNI tiles)
    // n <= 32 weight rows at x (row stride bx), K values each -> q[(ib * 32 + m) * bk + j] (int8),
    // dw[ib * 32 + m], mw[ib * 32 + m] (has_min only). q == nullptr (in-place types): scales only.
    void (*unpack)(const char * x, size_t bx, int n, int64_t K, int8_t * q, float * dw, float * mw);
};

// The AMX description of weight type t, nullptr where the type has none.
const ggml_amx_quant * ggml_amx_get_quant(ggml_type t);
