// cpu/mul_mat.cpp - dst = a^T b on the CPU.
//
//   a: [K, M, A2, A3] f32/f16/any quant type with CPU tiles (cpu/quants.h)
//      (rows dense, rows and dims 1..3 may be strided/permuted)
//   b: [K, N, B2, B3] f32/f16 (any strides), B2 % A2 == 0, B3 % A3 == 0 (GQA broadcast)
//   dst: f32 [M, N, B2, B3]; dst[m, n, i2, i3] = dot(a[:, m, i2/(B2/A2), i3/(B3/A3)], b[:, n, i2, i3])
//
// Phase 1: b rows are converted (by all threads) into p.wdata as the dot's activation type:
// q8_1 for q8_0/q4_0/q4_1/q5_0/q5_1 weights, q8_K for the K-quants, else f32 when b's rows are not dense f32 (f16
// weights are not rounding the activations to f16, unlike ggml: with N >= 4 the weight rows are widened to f32 per
// unit). Barrier. Phase 2: work units of (batch, column chunk, row block) are split across threads; each is computed in
// register tiles of up to 4 rows x 4 columns, so a weight row is loaded once for 4 activation columns (a single
// column takes the type's 8-row decode tile where it has one, cpu/quants.h). Quant weights with N >= 2 go to AMX int8
// tiles instead when the CPU has them (cpu/amx.cpp). A weight repacked in 8-row groups (cpu/repack.h): N = 1 by the
// group mat-vec (cpu/gemv_q4_0x8.cpp, gemv_q4_Kx8.cpp, gemv_q6_Kx8.cpp), N > 1 by the plain tiles over each unit's
// rows unpacked into scratch.
#include "cpu/mul_mat.h"

#include "cpu/amx.h"
#include "cpu/gemm_t16.h"
#include "cpu/ops.h"
#include "cpu/quants.h"
#include "cpu/repack.h"
#include "cpu/vec_dot.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

struct mm_plan {
    ggml_type vec_type; // type of the b rows the dot reads
    bool convert;       // b rows are converted into wdata
    size_t row_size;    // bytes of one converted b row
    size_t wsize;       // scratch bytes
};

mm_plan mul_mat_plan(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    mm_plan pl{};
    pl.vec_type = ggml_cpu_get_type_traits(a->type)->vec_dot_type; // f32 for f32/f16, q8_1 or q8_K for quants
    if (pl.vec_type == GGML_TYPE_COUNT) GGML_ABORT("mul_mat: unsupported weight type %s", ggml_type_name(a->type));
    pl.convert = b->type != pl.vec_type || b->nb[0] != ggml_type_size(b->type);
    pl.row_size = ggml_row_size(pl.vec_type, a->ne[0]);
    pl.wsize = pl.convert ? pl.row_size * (size_t)ggml_nrows(b) : 0;
    return pl;
}

// one b row (K elements, any element stride) -> dst row of vec_type
void convert_row(const ggml_tensor * b, const char * src, ggml_type vec_type, void * dst, std::vector<float> & tmp) {
    const int64_t K = b->ne[0];
    const float * xf;
    if (b->type == GGML_TYPE_F32 && b->nb[0] == sizeof(float)) {
        xf = (const float *)src;
    } else {
        tmp.resize(K);
        for (int64_t i = 0; i < K; ++i) {
            const char * e = src + i * b->nb[0];
            tmp[i] = b->type == GGML_TYPE_F32 ? *(const float *)e : ggml_compute_fp16_to_fp32(*(const ggml_fp16_t *)e);
        }
        xf = tmp.data();
    }
    switch (vec_type) {
        case GGML_TYPE_F32:
            std::memcpy(dst, xf, K * sizeof(float));
            break;
        case GGML_TYPE_F16:
            ggml_fp32_to_fp16_row(xf, (ggml_fp16_t *)dst, K);
            break;
        default: // q8_1, q8_K
            ggml_cpu_get_type_traits(vec_type)->from_float(xf, dst, K);
            break;
    }
}

// this thread's share of b's rows (p.split), converted to pl.vec_type at out + r * pl.row_size
void convert_rows(const ggml_cpu_params & p, const ggml_tensor * b, const mm_plan & pl, void * out) {
    thread_local std::vector<float> tmp;
    const int64_t N = b->ne[1], B2 = b->ne[2];
    const int64_t nrows = ggml_nrows(b);
    int64_t r0, r1;
    p.split(nrows, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i11 = r % N, i12 = (r / N) % B2, i13 = r / (N * B2);
        const char * src = (const char *)b->data + i11 * b->nb[1] + i12 * b->nb[2] + i13 * b->nb[3];
        convert_row(b, src, pl.vec_type, (char *)out + r * pl.row_size, tmp);
    }
}

} // namespace

size_t ggml_cpu_mul_mat_preconvert_size(const ggml_tensor * dst) {
    if (ggml_cpu_amx_use(dst)) return 0;
    const mm_plan pl = mul_mat_plan(dst);
    return pl.convert ? pl.wsize : 0;
}

bool ggml_cpu_mul_mat_barrier_free(const ggml_tensor * dst) {
    return !ggml_cpu_amx_use(dst) && !mul_mat_plan(dst).convert;
}

void ggml_cpu_mul_mat_convert(const ggml_cpu_params & p, const ggml_tensor * dst, void * out) {
    const mm_plan pl = mul_mat_plan(dst);
    GGML_ASSERT(pl.convert && !ggml_cpu_amx_use(dst));
    convert_rows(p, dst->src[1], pl, out);
}

size_t ggml_cpu_mul_mat_work_size(const ggml_tensor * dst) {
    if (ggml_cpu_amx_use(dst)) return ggml_cpu_amx_work_size(dst);
    return mul_mat_plan(dst).wsize;
}

void ggml_cpu_op_mul_mat(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0]; // [K, M, A2, A3]
    const ggml_tensor * b = dst->src[1]; // [K, N, B2, B3]
    const int64_t K = a->ne[0], M = a->ne[1], A2 = a->ne[2], A3 = a->ne[3];
    const int64_t N = b->ne[1], B2 = b->ne[2], B3 = b->ne[3];

    GGML_ASSERT(b->type == GGML_TYPE_F32 || b->type == GGML_TYPE_F16);
    GGML_ASSERT(dst->type == GGML_TYPE_F32);
    GGML_ASSERT(b->ne[0] == K && dst->ne[0] == M && dst->ne[1] == N && dst->ne[2] == B2 && dst->ne[3] == B3);
    GGML_ASSERT(A2 > 0 && A3 > 0 && B2 % A2 == 0 && B3 % A3 == 0);
    GGML_ASSERT(a->nb[0] == ggml_type_size(a->type)); // each weight row dense
    GGML_ASSERT(K % ggml_blck_size(a->type) == 0);

    if (ggml_cpu_amx_use(dst)) { // prompt batches on AMX int8 tiles (cpu/amx.cpp)
        ggml_cpu_amx_mul_mat(p, dst);
        return;
    }

    const mm_plan pl = mul_mat_plan(dst);

    // phase 1: b -> wdata (skipped when the graph executor converted b already: p.pre_b)
    const char * ybase = (const char *)b->data;
    if (pl.convert && p.pre_b) {
        ybase = (const char *)p.pre_b;
    } else if (pl.convert) {
        GGML_ASSERT(p.wdata && p.wsize >= pl.wsize);
        convert_rows(p, b, pl, p.wdata);
        p.barrier();
        ybase = (const char *)p.wdata;
    }
    const size_t ys1 = pl.convert ? pl.row_size : b->nb[1];
    const size_t ys2 = pl.convert ? pl.row_size * N : b->nb[2];
    const size_t ys3 = pl.convert ? pl.row_size * N * B2 : b->nb[3];

    // phase 2: units = (batch, column chunk, row block), row block innermost so that one
    // thread's consecutive units share the column chunk (kept in cache) and stream weights.
    // Float weights with several columns: each 16-row block is packed transposed as f32 once per
    // unit and multiplied without horizontal sums (cpu/gemm_t16.cpp). Long rows (weight matrices):
    // a unit covers all N columns, so each row block is packed once. Short rows (attention):
    // chunks of <= 512 KiB of activations, which the row blocks of a chunk reuse from L2.
    const bool t16 = (a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_F32) && N >= 4 && dst->nb[0] == sizeof(float) &&
                     ggml_cpu_gemm_t16_available();
    constexpr int64_t TR = GGML_TILE_MAX_R, TC = GGML_TILE_MAX_C;
    int64_t CB = 64; // columns per chunk: 64 q8_1 rows of K=4096 ~ 290 KiB (L2)
    if (t16) CB = K >= 1024 ? N : std::min(N, std::max<int64_t>(64, (512 << 10) / (K * (int64_t)sizeof(float))));
    const int64_t ncb = (N + CB - 1) / CB;
    // a repacked a (cpu/repack.h): row blocks of whole 8-row groups; the decode mat-vec takes up to 8 groups per
    // call (it sums each activation block once per call)
    const bool rp = ggml_cpu_is_repacked(a);
    int64_t RB = rp && N == 1 ? 64 : 16;
    if (rp) {
        while (RB > 8 && B2 * B3 * ncb * ((M + RB - 1) / RB) < 4 * p.nth)
            RB /= 2;
    } else if (!t16 && B2 * B3 * ncb * ((M + RB - 1) / RB) < 4 * p.nth) {
        RB = TR; // small problems: finer split
    }
    ggml_tile_dot_t tiles[TR][TC];
    for (int r = 0; r < TR; ++r)
        for (int c = 0; c < TC; ++c)
            tiles[r][c] = ggml_cpu_get_tile_dot(a->type, false, r + 1, c + 1);
    // Mat-vec columns: the type's decode tile (more rows per activation load) where it has one.
    const ggml_tile_dot_t tile_decode = ggml_cpu_get_type_traits(a->type)->tile_decode;
    constexpr int64_t DR = GGML_TILE_DECODE_R;
    const int64_t nrb = (M + RB - 1) / RB;
    const int64_t n_units = B2 * B3 * ncb * nrb;
    thread_local std::vector<float> panel_mem; // [16, K] transposed rows, 64-byte aligned
    thread_local std::vector<char> plain_rows; // [K, RB] a repacked a's row block in the plain layout (N > 1)
    if (rp && N > 1) plain_rows.resize(RB * a->nb[1]);
    float * panel = nullptr;
    if (t16) {
        panel_mem.resize((size_t)16 * K + 16);
        panel = (float *)(((uintptr_t)panel_mem.data() + 63) & ~(uintptr_t)63);
    }

    const int64_t r2 = B2 / A2, r3 = B3 / A3;
    // Decode (N = 1) streams weights: each thread reads its own contiguous rows (ggml_cpu_units' streaming
    // mode), so the kernels' rows-ahead prefetch stays inside the thread's rows (measured: 2-thread q4_0
    // mat-vec 40-54 -> 53-60 GB/s with guided takes, docs/cpu-notes.md), and ends on single units taken
    // from the others' ends so that no thread waits at the barrier for another's last long run.
    ggml_cpu_units units =
        N == 1 ? ggml_cpu_units(p, n_units, 1, true) : ggml_cpu_units(p, n_units, n_units / (16 * p.nth));
    for (int64_t u0, u1; units.next(u0, u1);)
        for (int64_t u = u0; u < u1; ++u) {
            const int64_t irb = u % nrb, icb = (u / nrb) % ncb, batch = u / (nrb * ncb);
            const int64_t i12 = batch % B2, i13 = batch / B2;
            const int64_t ir0 = irb * RB, ir1 = std::min(M, ir0 + RB);
            const int64_t ic0 = icb * CB, ic1 = std::min(N, ic0 + CB);
            const char * xb = (const char *)a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
            const char * yb = ybase + i12 * ys2 + i13 * ys3;
            char * db = (char *)dst->data + i12 * dst->nb[2] + i13 * dst->nb[3];
            if (t16) {
                const int mr = (int)(ir1 - ir0);
                ggml_cpu_pack_t16(xb + ir0 * a->nb[1], a->type, a->nb[1], mr, K, panel);
                ggml_cpu_gemm_t16(K, panel, (const float *)(yb + ic0 * ys1), ys1, ic1 - ic0, mr,
                                  (float *)(db + ir0 * dst->nb[0] + ic0 * dst->nb[1]), dst->nb[1]);
                continue;
            }
            // xr: row ir0 of the plain layout (a itself, or a repacked a's rows unpacked)
            const char * xr = xb + ir0 * a->nb[1];
            int64_t ir_first = ir0; // rows before this are done
            if (rp && N == 1) {     // whole groups by the repacked mat-vec, the plain tail rows below
                const int64_t ge = std::min(ir1, M / 8 * 8);
                if (ge > ir0)
                    ggml_cpu_gemv_repacked(a->type, K, xr, (ge - ir0) / 8, yb, (float *)(db + ir0 * dst->nb[0]),
                                           dst->nb[0]);
                ir_first = std::max(ir0, ge);
            } else if (rp) {
                ggml_cpu_repack_unpack_rows(a, ir0, ir1, plain_rows.data());
                xr = plain_rows.data();
            }
            for (int64_t ic = ic0; ic < ic1; ic += TC) {
                const int64_t nc = std::min(TC, ic1 - ic);
                int64_t ir = ir_first;
                if (nc == 1 && tile_decode)
                    for (; ir + DR <= ir1; ir += DR)
                        tile_decode(K, xr + (ir - ir0) * a->nb[1], a->nb[1], yb + ic * ys1, ys1,
                                    (float *)(db + ir * dst->nb[0] + ic * dst->nb[1]), dst->nb[0], dst->nb[1]);
                for (; ir < ir1; ir += TR) {
                    const int64_t nr = std::min(TR, ir1 - ir);
                    tiles[nr - 1][nc - 1](K, xr + (ir - ir0) * a->nb[1], a->nb[1], yb + ic * ys1, ys1,
                                          (float *)(db + ir * dst->nb[0] + ic * dst->nb[1]), dst->nb[0], dst->nb[1]);
                }
            }
        }
}
