// cpu/amx.cpp - q8_0 x q8_1 mul_mat on AMX int8 tiles; see amx.h.
//
// Tiles (palette 1), 2 x 2 blocking:
//   tmm4, tmm5  A: 16 rows x 32 int8, one q8_0 block of weight rows 0-15 / 16-31 of a 32-row panel,
//               read in place (row stride nb1)
//   tmm6, tmm7  B: 8 rows x 64 int8, one block of two groups of 16 activation columns, VNNI order:
//               B[t][4 n + u] = y_n.qs[4 t + u]
//   tmm0..3     C: 16 rows (weight rows) x 16 int32 (activation columns), C[a * 2 + b] = A[a] . B[b]
// C = A . B gives the exact per-block int32 dots (TDPBSSD, s8 x s8); the four are independent, so
// the tile unit overlaps their latencies. Each block's C tiles are stored and AVX-512 adds
// int32 * (d_w * d_a) into f32 accumulators (4 x 16 x 16, in L1).
//
// Scratch (p.wdata): for every batch (i12, i13), column group g of 16 and block ib one
// packed_block (576 bytes): the B tile and the 16 activation scales as f32. Columns past N are
// zero. Phase 1 packs (threads split the (batch, group) pairs), barrier, phase 2 computes units
// (batch, column chunk, 16-row panel) with the panel innermost, so one thread's chunk of packed
// activations stays in L2 while the weight panels stream through.
#include "cpu/amx.h"

#include "cpu/mul_mat.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define GGML_CPU_AMX_BUILD 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// GCC 12 warns about the _mm*_undefined_* placeholders inside its own AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

constexpr int64_t k_min_cols = 2;             // N below this: the VNNI mat-vec
constexpr size_t k_chunk_bytes = 1536 * 1024; // packed activations one unit keeps hot (L2 is 2 MiB)
constexpr int k_panel = 32;                   // weight rows per unit: two A tiles

struct packed_block {
    int8_t qs[8 * 64]; // B tile, VNNI order
    float d[16];       // activation scale per column
};
static_assert(sizeof(packed_block) == 576, "packed_block layout");

struct amx_shape {
    int64_t K, M, N, nb, ng; // nb: blocks per row, ng: groups of 16 columns
    int64_t batches;
    size_t batch_bytes; // packed bytes per batch
};

amx_shape shape_of(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    amx_shape s;
    s.K = a->ne[0];
    s.M = a->ne[1];
    s.N = b->ne[1];
    s.nb = s.K / QK8_0;
    s.ng = (s.N + 15) / 16;
    s.batches = b->ne[2] * b->ne[3];
    s.batch_bytes = (size_t)s.ng * (size_t)s.nb * sizeof(packed_block);
    return s;
}

} // namespace

bool ggml_cpu_amx_int8_available() {
#if defined(GGML_CPU_AMX_BUILD)
    static const bool ok = [] {
        const char * e = std::getenv("GGML_NO_AMX");
        if (e && *e && std::strcmp(e, "0") != 0) return false;
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
        const bool amx = (d & (1u << 24)) && (d & (1u << 25));                        // AMX-TILE, AMX-INT8
        const bool avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)); // F, BW, VL
        if (!amx || !avx512) return false;
        // Linux hands out the 8 KiB tile state only on request (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
        if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
            GGML_LOG_DEBUG("%s: arch_prctl(ARCH_REQ_XCOMP_PERM) refused, AMX off\n", __func__);
            return false;
        }
        return true;
    }();
    return ok;
#else
    return false;
#endif
}

bool ggml_cpu_amx_q8_0_use(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (a->type != GGML_TYPE_Q8_0 || b->ne[1] < k_min_cols) return false;
    if (b->type != GGML_TYPE_F32 && b->type != GGML_TYPE_F16) return false;
    if (a->nb[1] > (size_t)1 << 30) return false; // tile strides are fine, keep the panel copy sane
    return ggml_cpu_amx_int8_available();
}

size_t ggml_cpu_amx_q8_0_work_size(const ggml_tensor * dst) {
    const amx_shape s = shape_of(dst);
    return (size_t)s.batches * s.batch_bytes;
}

#if defined(GGML_CPU_AMX_BUILD)

#define AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))

namespace {

struct tile_config {
    uint8_t palette_id;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
static_assert(sizeof(tile_config) == 64, "tile_config layout");

AMX_TARGET void amx_configure() {
    alignas(64) tile_config cfg;
    std::memset(&cfg, 0, sizeof(cfg));
    cfg.palette_id = 1;
    for (int t = 0; t < 4; ++t) {
        cfg.rows[t] = 16; // C
        cfg.colsb[t] = 64;
    }
    for (int t = 4; t < 6; ++t) {
        cfg.rows[t] = 16; // A
        cfg.colsb[t] = 32;
        cfg.rows[t + 2] = 8; // B
        cfg.colsb[t + 2] = 64;
    }
    __asm__ volatile("" ::: "memory"); // the intrinsic only declares 8 bytes of cfg as read
    _tile_loadconfig(&cfg);
}

// One b column (K elements, any strides, f32 or f16) -> f32.
void load_col(const ggml_tensor * b, const char * src, float * dst) {
    const int64_t K = b->ne[0];
    if (b->type == GGML_TYPE_F32 && b->nb[0] == sizeof(float)) {
        std::memcpy(dst, src, K * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < K; ++i) {
        const char * e = src + i * b->nb[0];
        dst[i] = b->type == GGML_TYPE_F32 ? *(const float *)e : ggml_compute_fp16_to_fp32(*(const ggml_fp16_t *)e);
    }
}

// Columns [16 g, 16 g + 16) of batch (i12, i13) -> nb packed blocks.
void pack_group(const ggml_tensor * b, const amx_shape & s, int64_t i12, int64_t i13, int64_t g, packed_block * out,
                std::vector<float> & colf, std::vector<block_q8_1> & colq) {
    colf.resize(s.K);
    colq.resize(s.nb);
    for (int j = 0; j < 16; ++j) {
        const int64_t n = g * 16 + j;
        if (n >= s.N) {
            for (int64_t ib = 0; ib < s.nb; ++ib) {
                for (int t = 0; t < 8; ++t)
                    std::memset(out[ib].qs + t * 64 + j * 4, 0, 4);
                out[ib].d[j] = 0.0f;
            }
            continue;
        }
        load_col(b, (const char *)b->data + n * b->nb[1] + i12 * b->nb[2] + i13 * b->nb[3], colf.data());
        quantize_row_q8_1(colf.data(), colq.data(), s.K);
        for (int64_t ib = 0; ib < s.nb; ++ib) {
            for (int t = 0; t < 8; ++t)
                std::memcpy(out[ib].qs + t * 64 + j * 4, colq[ib].qs + 4 * t, 4);
            out[ib].d[j] = ggml_compute_fp16_to_fp32(colq[ib].d);
        }
    }
}

// acc[m] += float(c[m]) * dx[m] * dy for 16 rows of a 16 x 16 block result.
AMX_TARGET inline void scale_add(const int32_t (*c)[16], const float * dx, __m512 dy, float (*acc)[16]) {
    for (int m = 0; m < 16; ++m) {
        const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(c[m]));
        const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(dx[m]), dy);
        _mm512_store_ps(acc[m], _mm512_fmadd_ps(v, sc, _mm512_load_ps(acc[m])));
    }
}

// 16 * NA weight rows (x, row stride bx) x NB column groups (pg[0], pg[1]) over nb blocks, 2 x 2
// tiles at most: tmm4/5 A (rows 0-15 / 16-31), tmm6/7 B (group 0 / 1), tmm0..3 C (a * 2 + b).
// dxf: [nb][32] weight scales. acc[a * 2 + b]: [16 rows][16 columns] f32.
// Software pipelined: the tile work of block ib is issued before the AVX-512 scaling of block
// ib - 1 (double-buffered C stores), so the two units overlap instead of taking turns.
template <int NA, int NB>
AMX_TARGET void block_kernel(const char * x, size_t bx, int64_t nb, const float * dxf, const packed_block * const * pg,
                             float (*acc)[16][16]) {
    alignas(64) int32_t cb[2][4][16][16];
    std::memset(acc, 0, 4 * sizeof(acc[0]));
    auto tiles = [&](int64_t ib, int32_t(*c)[16][16]) AMX_TARGET {
        const char * xa = x + ib * sizeof(block_q8_0) + 2;
        _tile_loadd(4, xa, bx);
        if constexpr (NA == 2) _tile_loadd(5, xa + 16 * bx, bx);
        _tile_loadd(6, pg[0][ib].qs, 64);
        if constexpr (NB == 2) _tile_loadd(7, pg[1][ib].qs, 64);
        _tile_zero(0);
        _tile_dpbssd(0, 4, 6);
        if constexpr (NB == 2) {
            _tile_zero(1);
            _tile_dpbssd(1, 4, 7);
        }
        if constexpr (NA == 2) {
            _tile_zero(2);
            _tile_dpbssd(2, 5, 6);
        }
        if constexpr (NA == 2 && NB == 2) {
            _tile_zero(3);
            _tile_dpbssd(3, 5, 7);
        }
        _tile_stored(0, c[0], 64);
        if constexpr (NB == 2) _tile_stored(1, c[1], 64);
        if constexpr (NA == 2) _tile_stored(2, c[2], 64);
        if constexpr (NA == 2 && NB == 2) _tile_stored(3, c[3], 64);
    };
    auto scale = [&](int64_t ib, const int32_t(*c)[16][16]) AMX_TARGET {
        const float * dx = dxf + ib * 32;
        const __m512 dy0 = _mm512_loadu_ps(pg[0][ib].d);
        scale_add(c[0], dx, dy0, acc[0]);
        if constexpr (NA == 2) scale_add(c[2], dx + 16, dy0, acc[2]);
        if constexpr (NB == 2) {
            const __m512 dy1 = _mm512_loadu_ps(pg[1][ib].d);
            scale_add(c[1], dx, dy1, acc[1]);
            if constexpr (NA == 2) scale_add(c[3], dx + 16, dy1, acc[3]);
        }
    };
    tiles(0, cb[0]);
    for (int64_t ib = 1; ib < nb; ++ib) {
        tiles(ib, cb[ib & 1]);
        scale(ib - 1, cb[(ib - 1) & 1]);
    }
    scale(nb - 1, cb[(nb - 1) & 1]);
}

// acc [16 rows][16 columns] -> dst (m, n) at dst + m * d0 + n * d1 for m < mr, n < nc.
AMX_TARGET void store_block(const float (*acc)[16], int mr, int64_t nc, char * dst, size_t d0, size_t d1) {
    if (d0 == sizeof(float)) { // column n of acc -> mr contiguous floats
        const __m512i row_idx =
            _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
        const __mmask16 mask = (__mmask16)((1u << mr) - 1);
        for (int64_t n = 0; n < nc; ++n)
            _mm512_mask_storeu_ps(dst + n * d1, mask, _mm512_i32gather_ps(row_idx, &acc[0][n], 4));
    } else {
        for (int64_t n = 0; n < nc; ++n)
            for (int m = 0; m < mr; ++m)
                *(float *)(dst + n * d1 + m * d0) = acc[m][n];
    }
}

// One panel of up to 32 weight rows (mr of them real) x column groups [0, ng) of pk; nc columns.
// The weight rows of the next unit (nx: first row, n_rows rows of row_bytes at stride bx_next) are
// prefetched a slice per column-group pair, so the next panel streams in from DRAM while this one
// computes instead of stalling its first pass (the weight-scale gather).
struct next_panel {
    const char * x = nullptr;
    size_t bx = 0, row_bytes = 0;
    int rows = 0;
};

AMX_TARGET void panel_kernel(const char * x, size_t bx, int64_t nb, const float * dxf, const packed_block * pk,
                             int64_t ng, int64_t nc, int mr, char * dst, size_t d0, size_t d1, const next_panel & np) {
    alignas(64) float acc[4][16][16];
    const int64_t lines_per_row = ((int64_t)np.row_bytes + 63) / 64;
    const int64_t n_lines = np.x ? np.rows * lines_per_row : 0;
    const int64_t per_pair = (n_lines + (ng + 1) / 2 - 1) / ((ng + 1) / 2);
    int64_t line = 0;
    for (int64_t g = 0; g < ng; g += 2) {
        for (int64_t e = std::min(n_lines, line + per_pair); line < e; ++line) {
            _mm_prefetch(np.x + (line / lines_per_row) * np.bx + (line % lines_per_row) * 64, _MM_HINT_T1);
        }
        const packed_block * pg[2] = {pk + g * nb, pk + (g + 1) * nb};
        const int nbg = g + 1 < ng ? 2 : 1, na = mr > 16 ? 2 : 1;
        if (na == 2 && nbg == 2) block_kernel<2, 2>(x, bx, nb, dxf, pg, acc);
        if (na == 2 && nbg == 1) block_kernel<2, 1>(x, bx, nb, dxf, pg, acc);
        if (na == 1 && nbg == 2) block_kernel<1, 2>(x, bx, nb, dxf, pg, acc);
        if (na == 1 && nbg == 1) block_kernel<1, 1>(x, bx, nb, dxf, pg, acc);
        for (int ia = 0; ia < na; ++ia)
            for (int ig = 0; ig < nbg; ++ig) {
                const int64_t n0 = (g + ig) * 16;
                store_block(acc[ia * 2 + ig], std::min(16, mr - 16 * ia), std::min<int64_t>(16, nc - n0),
                            dst + ia * 16 * d0 + n0 * d1, d0, d1);
            }
    }
}

AMX_TARGET void amx_mul_mat(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0]; // [K, M, A2, A3] q8_0
    const ggml_tensor * b = dst->src[1]; // [K, N, B2, B3] f32/f16
    const amx_shape s = shape_of(dst);
    const int64_t B2 = b->ne[2];
    const int64_t r2 = B2 / a->ne[2], r3 = b->ne[3] / a->ne[3];
    GGML_ASSERT(p.wdata && p.wsize >= ggml_cpu_amx_q8_0_work_size(dst));
    char * packed = (char *)p.wdata;

    // phase 1: pack the activations
    {
        thread_local std::vector<float> colf;
        thread_local std::vector<block_q8_1> colq;
        int64_t u0, u1;
        p.split(s.batches * s.ng, u0, u1);
        for (int64_t u = u0; u < u1; ++u) {
            const int64_t g = u % s.ng, batch = u / s.ng;
            pack_group(b, s, batch % B2, batch / B2, g, (packed_block *)(packed + batch * s.batch_bytes) + g * s.nb,
                       colf, colq);
        }
        p.barrier();
    }

    // phase 2: units (batch, column chunk, panel of 32 rows), panel innermost
    const int64_t group_bytes = s.nb * (int64_t)sizeof(packed_block);
    const int64_t gpc = std::clamp<int64_t>((int64_t)k_chunk_bytes / group_bytes, 1, s.ng); // groups per chunk
    const int64_t nch = (s.ng + gpc - 1) / gpc;
    const int64_t npan = (s.M + k_panel - 1) / k_panel;
    const int64_t n_units = s.batches * nch * npan;
    ggml_cpu_units units(p, n_units, n_units / (16 * p.nth));

    thread_local std::vector<float> dxf;
    thread_local std::vector<char> tail; // zero-padded copy of a last panel with < 32 rows
    dxf.resize(s.nb * k_panel);
    const size_t row_bytes = (size_t)s.nb * sizeof(block_q8_0);
    amx_configure();
    for (int64_t u0, u1; units.next(u0, u1);) {
        for (int64_t u = u0; u < u1; ++u) {
            const int64_t pan = u % npan, ich = (u / npan) % nch, batch = u / (npan * nch);
            const int64_t i12 = batch % B2, i13 = batch / B2;
            const int64_t m0 = pan * k_panel;
            const int mr = (int)std::min<int64_t>(k_panel, s.M - m0);
            const char * x = (const char *)a->data + m0 * a->nb[1] + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
            size_t bx = a->nb[1];
            if (mr < k_panel) {
                tail.assign(k_panel * row_bytes, 0);
                for (int m = 0; m < mr; ++m)
                    std::memcpy(tail.data() + m * row_bytes, x + m * a->nb[1], row_bytes);
                x = tail.data();
                bx = row_bytes;
            }
            for (int m = 0; m < k_panel; ++m) {
                const block_q8_0 * xr = (const block_q8_0 *)(x + m * bx);
                for (int64_t ib = 0; ib < s.nb; ++ib)
                    dxf[ib * k_panel + m] = m < mr ? ggml_compute_fp16_to_fp32(xr[ib].d) : 0.0f;
            }
            __asm__ volatile("" ::: "memory"); // tile loads are asm without memory inputs
            const int64_t g0 = ich * gpc, g1 = std::min(s.ng, g0 + gpc);
            const packed_block * pk = (const packed_block *)(packed + batch * s.batch_bytes) + g0 * s.nb;
            char * d = (char *)dst->data + m0 * dst->nb[0] + g0 * 16 * dst->nb[1] + i12 * dst->nb[2] + i13 * dst->nb[3];
            next_panel np;
            if (pan + 1 < npan) {
                np.x =
                    (const char *)a->data + (m0 + k_panel) * a->nb[1] + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
                np.bx = a->nb[1];
                np.row_bytes = row_bytes;
                np.rows = (int)std::min<int64_t>(k_panel, s.M - m0 - k_panel);
            }
            panel_kernel(x, bx, s.nb, dxf.data(), pk, g1 - g0, s.N - g0 * 16, mr, d, dst->nb[0], dst->nb[1], np);
        }
    }
    _tile_release();
}

} // namespace

void ggml_cpu_amx_q8_0_mul_mat(const ggml_cpu_params & p, ggml_tensor * dst) { amx_mul_mat(p, dst); }

#else

void ggml_cpu_amx_q8_0_mul_mat(const ggml_cpu_params &, ggml_tensor *) {
    GGML_ABORT("ggml_cpu_amx_q8_0_mul_mat: built without AMX support");
}

#endif
