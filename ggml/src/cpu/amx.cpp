// cpu/amx.cpp - quantized mul_mat on AMX int8 tiles; see amx.h (and amx-quants.h for the weights).
//
// Tiles (palette 1), 2 x 2 blocking, tile block of BK = 32 (or 16) values:
//   tmm4, tmm5  A: 16 rows x BK int8, one tile block of weight rows 0-15 / 16-31 of a 32-row panel:
//               q8_0 read in place (row stride nb1), other types from the panel's unpacked copy
//   tmm6, tmm7  B: BK/4 rows x 64 int8, one block of two groups of 16 activation columns, VNNI order:
//               B[t][4 n + u] = y_n.qs[4 t + u]
//   tmm0..3     C: 16 rows (weight rows) x 16 int32 (activation columns), C[a * 2 + b] = A[a] . B[b]
// C = A . B gives the exact per-block int32 dots (TDPBSSD, s8 x s8); the four are independent, so
// the tile unit overlaps their latencies. Each block's C tiles are stored and AVX-512 adds
// int32 * (d_w * d_a) (+ m_w * s_a) into f32 accumulators (4 x 16 x 16, in L1).
//
// Scratch (p.wdata): for every batch (i12, i13), column group g of 16 and block ib one
// packed_block: the B tile, the 16 activation scales d_a and block sums s_a = d_a * sum(a) as f32.
// Columns past N are zero. Phase 1 packs (threads split the (batch, group) pairs), barrier, phase 2
// computes units (batch, column chunk, 32-row panel) with the panel innermost, so one thread's
// chunk of packed activations stays in L2 while the weight panels stream through; each unit unpacks
// its panel once (all K) and runs it against every column group of the chunk.
#include "cpu/amx.h"

#include "cpu/amx-quants.h"
#include "cpu/mul_mat.h"
#include "cpu/quants.h"
#include "cpu/repack.h"
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
constexpr size_t k_chunk_bytes = 1536 * 1024; // packed activations + unpacked panel one unit keeps hot (L2 2 MiB)
constexpr int k_panel = 32;                   // weight rows per unit: two A tiles

template <int BK> struct packed_block {
    int8_t qs[BK / 4 * 64]; // B tile, VNNI order
    float d[16];            // activation scale per column
    float s[16];            // d * sum of the column's BK quants (min terms)
};
static_assert(sizeof(packed_block<32>) == 640 && sizeof(packed_block<16>) == 384, "packed_block layout");

struct amx_shape {
    int64_t K, M, N, nb, ng; // nb: tile blocks per row, ng: groups of 16 columns
    int64_t batches;
    size_t block_bytes; // sizeof(packed_block<bk>)
    size_t batch_bytes; // packed bytes per batch
};

amx_shape shape_of(const ggml_tensor * dst, const ggml_amx_quant & qt) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    amx_shape s;
    s.K = a->ne[0];
    s.M = a->ne[1];
    s.N = b->ne[1];
    s.nb = s.K / qt.bk;
    s.ng = (s.N + 15) / 16;
    s.batches = b->ne[2] * b->ne[3];
    s.block_bytes = qt.bk == 32 ? sizeof(packed_block<32>) : sizeof(packed_block<16>);
    s.batch_bytes = (size_t)s.ng * (size_t)s.nb * s.block_bytes;
    return s;
}

bool env_on(const char * name) {
    const char * e = std::getenv(name);
    return e && *e && std::strcmp(e, "0") != 0;
}

[[maybe_unused]] bool amx_emulated() {
    static const bool emu = env_on("GGML_AMX_EMULATE") && !env_on("GGML_NO_AMX");
    return emu;
}

} // namespace

bool ggml_cpu_amx_int8_available() {
#if defined(GGML_CPU_AMX_BUILD)
    if (amx_emulated()) return true;
    static const bool ok = [] {
        if (env_on("GGML_NO_AMX")) return false;
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

bool ggml_cpu_amx_use(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const ggml_amx_quant * qt = ggml_amx_get_quant(a->type);
    if (!qt || b->ne[1] < k_min_cols || ggml_cpu_is_repacked(a)) return false;
    if (b->type != GGML_TYPE_F32 && b->type != GGML_TYPE_F16) return false;
    if (a->nb[1] > (size_t)1 << 30) return false; // tile strides are fine, keep the panel copy sane
    return ggml_cpu_amx_int8_available();
}

size_t ggml_cpu_amx_work_size(const ggml_tensor * dst) {
    const amx_shape s = shape_of(dst, *ggml_amx_get_quant(dst->src[0]->type));
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

AMX_TARGET void amx_configure(int bk) {
    alignas(64) tile_config cfg;
    std::memset(&cfg, 0, sizeof(cfg));
    cfg.palette_id = 1;
    for (int t = 0; t < 4; ++t) {
        cfg.rows[t] = 16; // C
        cfg.colsb[t] = 64;
    }
    for (int t = 4; t < 6; ++t) {
        cfg.rows[t] = 16; // A
        cfg.colsb[t] = (uint16_t)bk;
        cfg.rows[t + 2] = (uint8_t)(bk / 4); // B
        cfg.colsb[t + 2] = 64;
    }
    __asm__ volatile("" ::: "memory"); // the intrinsic only declares 8 bytes of cfg as read
    _tile_loadconfig(&cfg);
}

AMX_TARGET void amx_release() { _tile_release(); }

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

// Columns [16 g, 16 g + 16) of batch (i12, i13) -> nb packed blocks, quantized to qt.vec_type (q8_1
// or q8_K, the VNNI tiles' activations) and cut into BK-value blocks.
template <int BK>
void pack_group(const ggml_tensor * b, const ggml_amx_quant & qt, const amx_shape & s, int64_t i12, int64_t i13,
                int64_t g, packed_block<BK> * out, std::vector<float> & colf, std::vector<char> & colq) {
    colf.resize(s.K);
    colq.resize(ggml_row_size(qt.vec_type, s.K));
    const bool q8_1 = qt.vec_type == GGML_TYPE_Q8_1;
    const ggml_from_float_t quantize = ggml_cpu_get_type_traits(qt.vec_type)->from_float;
    for (int j = 0; j < 16; ++j) {
        const int64_t n = g * 16 + j;
        if (n >= s.N) {
            for (int64_t ib = 0; ib < s.nb; ++ib) {
                for (int t = 0; t < BK / 4; ++t)
                    std::memset(out[ib].qs + t * 64 + j * 4, 0, 4);
                out[ib].d[j] = 0.0f;
                out[ib].s[j] = 0.0f;
            }
            continue;
        }
        load_col(b, (const char *)b->data + n * b->nb[1] + i12 * b->nb[2] + i13 * b->nb[3], colf.data());
        quantize(colf.data(), colq.data(), s.K);
        for (int64_t ib = 0; ib < s.nb; ++ib) {
            const int64_t k0 = ib * BK;
            const int8_t * q;
            float d;
            if (q8_1) {
                const block_q8_1 & y = ((const block_q8_1 *)colq.data())[k0 / QK8_1];
                q = y.qs + k0 % QK8_1;
                d = ggml_compute_fp16_to_fp32(y.d);
            } else {
                const block_q8_K & y = ((const block_q8_K *)colq.data())[k0 / QK_K];
                q = y.qs + k0 % QK_K;
                d = y.d;
            }
            int sum = 0;
            for (int t = 0; t < BK / 4; ++t)
                std::memcpy(out[ib].qs + t * 64 + j * 4, q + 4 * t, 4);
            if (qt.has_min)
                for (int k = 0; k < BK; ++k)
                    sum += q[k];
            out[ib].d[j] = d;
            out[ib].s[j] = d * (float)sum;
        }
    }
}

// acc[m] += float(c[m]) * dx[m] * dy (+ mx[m] * sy) for 16 rows of a 16 x 16 block result.
template <bool MIN>
AMX_TARGET inline void scale_add(const int32_t (*c)[16], const float * dx, const float * mx, __m512 dy, __m512 sy,
                                 float (*acc)[16]) {
    for (int m = 0; m < 16; ++m) {
        const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(c[m]));
        const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(dx[m]), dy);
        __m512 r = _mm512_fmadd_ps(v, sc, _mm512_load_ps(acc[m]));
        if constexpr (MIN) r = _mm512_fmadd_ps(_mm512_set1_ps(mx[m]), sy, r);
        _mm512_store_ps(acc[m], r);
    }
}

// The A side of one unit: tile block ib of rows 0-15 at x + ib * xs (row stride bx), rows 16-31
// 16 * bx further; dxf / mxf: [nb][32] weight scales / min terms.
struct panel_src {
    const char * x;
    size_t bx, xs;
    const float * dxf;
    const float * mxf;
};

// 16 * NA weight rows x NB column groups (pg[0], pg[1]) over nb blocks, 2 x 2 tiles at most:
// tmm4/5 A (rows 0-15 / 16-31), tmm6/7 B (group 0 / 1), tmm0..3 C (a * 2 + b).
// acc[a * 2 + b]: [16 rows][16 columns] f32.
// Software pipelined: the tile work of block ib is issued before the AVX-512 scaling of block
// ib - 1 (double-buffered C stores), so the two units overlap instead of taking turns.
template <int BK, bool MIN, int NA, int NB>
AMX_TARGET void block_kernel(const panel_src & ps, int64_t nb, const packed_block<BK> * const * pg,
                             float (*acc)[16][16]) {
    alignas(64) int32_t cb[2][4][16][16];
    std::memset(acc, 0, 4 * sizeof(acc[0]));
    auto tiles = [&](int64_t ib, int32_t(*c)[16][16]) AMX_TARGET {
        const char * xa = ps.x + ib * ps.xs;
        _tile_loadd(4, xa, ps.bx);
        if constexpr (NA == 2) _tile_loadd(5, xa + 16 * ps.bx, ps.bx);
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
        const float * dx = ps.dxf + ib * 32;
        const float * mx = MIN ? ps.mxf + ib * 32 : nullptr;
        const __m512 dy0 = _mm512_loadu_ps(pg[0][ib].d);
        const __m512 sy0 = MIN ? _mm512_loadu_ps(pg[0][ib].s) : _mm512_setzero_ps();
        scale_add<MIN>(c[0], dx, mx, dy0, sy0, acc[0]);
        if constexpr (NA == 2) scale_add<MIN>(c[2], dx + 16, MIN ? mx + 16 : nullptr, dy0, sy0, acc[2]);
        if constexpr (NB == 2) {
            const __m512 dy1 = _mm512_loadu_ps(pg[1][ib].d);
            const __m512 sy1 = MIN ? _mm512_loadu_ps(pg[1][ib].s) : _mm512_setzero_ps();
            scale_add<MIN>(c[1], dx, mx, dy1, sy1, acc[1]);
            if constexpr (NA == 2) scale_add<MIN>(c[3], dx + 16, MIN ? mx + 16 : nullptr, dy1, sy1, acc[3]);
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

// GGML_AMX_EMULATE: the tile math of block_kernel and store_block in scalar C++ (same inputs, same
// per-block int32 dots), for testing the unpacking, packing and scheduling on CPUs without AMX.
template <int BK, bool MIN>
void block_kernel_emu(const panel_src & ps, int64_t nb, const packed_block<BK> * const * pg, int na, int nbg,
                      float (*acc)[16][16]) {
    std::memset(acc, 0, 4 * sizeof(acc[0]));
    for (int64_t ib = 0; ib < nb; ++ib)
        for (int ia = 0; ia < na; ++ia)
            for (int ig = 0; ig < nbg; ++ig)
                for (int m = 0; m < 16; ++m) {
                    const int8_t * xr = (const int8_t *)(ps.x + ib * ps.xs + (16 * ia + m) * ps.bx);
                    const packed_block<BK> & y = pg[ig][ib];
                    for (int n = 0; n < 16; ++n) {
                        int32_t c = 0;
                        for (int k = 0; k < BK; ++k)
                            c += (int32_t)xr[k] * (int32_t)y.qs[(k / 4) * 64 + n * 4 + k % 4];
                        float r = acc[ia * 2 + ig][m][n] + (float)c * (ps.dxf[ib * 32 + 16 * ia + m] * y.d[n]);
                        if (MIN) r += ps.mxf[ib * 32 + 16 * ia + m] * y.s[n];
                        acc[ia * 2 + ig][m][n] = r;
                    }
                }
}

void store_block_emu(const float (*acc)[16], int mr, int64_t nc, char * dst, size_t d0, size_t d1) {
    for (int64_t n = 0; n < nc; ++n)
        for (int m = 0; m < mr; ++m)
            *(float *)(dst + n * d1 + m * d0) = acc[m][n];
}

// One panel of up to 32 weight rows (mr of them real) x column groups [0, ng) of pk; nc columns.
// The weight rows of the next unit (nx: first row, n_rows rows of row_bytes at stride bx_next) are
// prefetched a slice per column-group pair, so the next panel streams in from DRAM while this one
// computes instead of stalling its first pass.
struct next_panel {
    const char * x = nullptr;
    size_t bx = 0, row_bytes = 0;
    int rows = 0;
};

template <int BK, bool MIN, bool EMU>
void panel_kernel(const panel_src & ps, int64_t nb, const packed_block<BK> * pk, int64_t ng, int64_t nc, int mr,
                  char * dst, size_t d0, size_t d1, const next_panel & np) {
    alignas(64) float acc[4][16][16];
    const int64_t lines_per_row = ((int64_t)np.row_bytes + 63) / 64;
    const int64_t n_lines = np.x ? np.rows * lines_per_row : 0;
    const int64_t per_pair = (n_lines + (ng + 1) / 2 - 1) / ((ng + 1) / 2);
    int64_t line = 0;
    for (int64_t g = 0; g < ng; g += 2) {
        for (int64_t e = std::min(n_lines, line + per_pair); line < e; ++line) {
            _mm_prefetch(np.x + (line / lines_per_row) * np.bx + (line % lines_per_row) * 64, _MM_HINT_T1);
        }
        const packed_block<BK> * pg[2] = {pk + g * nb, pk + (g + 1) * nb};
        const int nbg = g + 1 < ng ? 2 : 1, na = mr > 16 ? 2 : 1;
        if constexpr (EMU) {
            block_kernel_emu<BK, MIN>(ps, nb, pg, na, nbg, acc);
        } else {
            if (na == 2 && nbg == 2) block_kernel<BK, MIN, 2, 2>(ps, nb, pg, acc);
            if (na == 2 && nbg == 1) block_kernel<BK, MIN, 2, 1>(ps, nb, pg, acc);
            if (na == 1 && nbg == 2) block_kernel<BK, MIN, 1, 2>(ps, nb, pg, acc);
            if (na == 1 && nbg == 1) block_kernel<BK, MIN, 1, 1>(ps, nb, pg, acc);
        }
        for (int ia = 0; ia < na; ++ia)
            for (int ig = 0; ig < nbg; ++ig) {
                const int64_t n0 = (g + ig) * 16;
                const int rows = std::min(16, mr - 16 * ia);
                const int64_t cols = std::min<int64_t>(16, nc - n0);
                char * o = dst + ia * 16 * d0 + n0 * d1;
                if constexpr (EMU) {
                    store_block_emu(acc[ia * 2 + ig], rows, cols, o, d0, d1);
                } else {
                    store_block(acc[ia * 2 + ig], rows, cols, o, d0, d1);
                }
            }
    }
}

template <int BK> void amx_mul_mat(const ggml_cpu_params & p, ggml_tensor * dst, const ggml_amx_quant & qt, bool emu) {
    const ggml_tensor * a = dst->src[0]; // [K, M, A2, A3] quantized
    const ggml_tensor * b = dst->src[1]; // [K, N, B2, B3] f32/f16
    const amx_shape s = shape_of(dst, qt);
    const int64_t B2 = b->ne[2];
    const int64_t r2 = B2 / a->ne[2], r3 = b->ne[3] / a->ne[3];
    GGML_ASSERT(p.wdata && p.wsize >= ggml_cpu_amx_work_size(dst));
    char * packed = (char *)p.wdata;

    // phase 1: pack the activations
    {
        thread_local std::vector<float> colf;
        thread_local std::vector<char> colq;
        int64_t u0, u1;
        p.split(s.batches * s.ng, u0, u1);
        for (int64_t u = u0; u < u1; ++u) {
            const int64_t g = u % s.ng, batch = u / s.ng;
            pack_group<BK>(b, qt, s, batch % B2, batch / B2, g,
                           (packed_block<BK> *)(packed + batch * s.batch_bytes) + g * s.nb, colf, colq);
        }
        p.barrier();
    }

    // phase 2: units (batch, column chunk, panel of 32 rows), panel innermost
    const size_t row_bytes = ggml_row_size(a->type, s.K);
    const size_t panel_bytes = qt.in_place ? 0 : (size_t)s.nb * k_panel * (BK + (qt.has_min ? 8 : 4));
    const int64_t group_bytes = s.nb * (int64_t)sizeof(packed_block<BK>);
    const int64_t budget = std::max<int64_t>((int64_t)k_chunk_bytes - (int64_t)panel_bytes, 512 * 1024);
    const int64_t gpc = std::clamp<int64_t>(budget / group_bytes, 1, s.ng); // groups per chunk
    const int64_t nch = (s.ng + gpc - 1) / gpc;
    const int64_t npan = (s.M + k_panel - 1) / k_panel;
    const int64_t n_units = s.batches * nch * npan;
    ggml_cpu_units units(p, n_units, n_units / (16 * p.nth));

    thread_local std::vector<float> dxf, mxf;
    thread_local std::vector<int8_t> qbuf; // unpacked panel [nb][32 rows][BK] (also q8_0 tail panels)
    dxf.resize(s.nb * k_panel);
    mxf.resize(qt.has_min ? s.nb * k_panel : 0);
    if (emu || !qt.in_place || s.M % k_panel != 0) qbuf.resize((size_t)s.nb * k_panel * BK);
    if (!emu) amx_configure(BK);
    for (int64_t u0, u1; units.next(u0, u1);) {
        for (int64_t u = u0; u < u1; ++u) {
            const int64_t pan = u % npan, ich = (u / npan) % nch, batch = u / (npan * nch);
            const int64_t i12 = batch % B2, i13 = batch / B2;
            const int64_t m0 = pan * k_panel;
            const int mr = (int)std::min<int64_t>(k_panel, s.M - m0);
            const char * x = (const char *)a->data + m0 * a->nb[1] + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
            panel_src ps{};
            ps.dxf = dxf.data();
            ps.mxf = mxf.data();
            if (qt.in_place && mr == k_panel) { // q8_0: the values are the weight bytes
                qt.unpack(x, a->nb[1], k_panel, s.K, nullptr, dxf.data(), mxf.data());
                ps.x = x + (qt.block_bytes - BK);
                ps.bx = a->nb[1];
                ps.xs = qt.block_bytes;
            } else {
                qt.unpack(x, a->nb[1], mr, s.K, qbuf.data(), dxf.data(), mxf.data());
                for (int64_t ib = 0; ib < s.nb && mr < k_panel; ++ib) { // rows past M: zero
                    std::memset(qbuf.data() + (ib * k_panel + mr) * BK, 0, (size_t)(k_panel - mr) * BK);
                    for (int m = mr; m < k_panel; ++m) {
                        dxf[ib * k_panel + m] = 0.0f;
                        if (qt.has_min) mxf[ib * k_panel + m] = 0.0f;
                    }
                }
                ps.x = (const char *)qbuf.data();
                ps.bx = BK;
                ps.xs = (size_t)k_panel * BK;
            }
            __asm__ volatile("" ::: "memory"); // tile loads are asm without memory inputs
            const int64_t g0 = ich * gpc, g1 = std::min(s.ng, g0 + gpc);
            const packed_block<BK> * pk = (const packed_block<BK> *)(packed + batch * s.batch_bytes) + g0 * s.nb;
            char * d = (char *)dst->data + m0 * dst->nb[0] + g0 * 16 * dst->nb[1] + i12 * dst->nb[2] + i13 * dst->nb[3];
            next_panel np;
            if (pan + 1 < npan) {
                np.x =
                    (const char *)a->data + (m0 + k_panel) * a->nb[1] + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
                np.bx = a->nb[1];
                np.row_bytes = row_bytes;
                np.rows = (int)std::min<int64_t>(k_panel, s.M - m0 - k_panel);
            }
            const int64_t ngc = g1 - g0, nc = s.N - g0 * 16;
            const size_t d0 = dst->nb[0], d1 = dst->nb[1];
            if (emu) {
                if (qt.has_min)
                    panel_kernel<BK, true, true>(ps, s.nb, pk, ngc, nc, mr, d, d0, d1, np);
                else
                    panel_kernel<BK, false, true>(ps, s.nb, pk, ngc, nc, mr, d, d0, d1, np);
            } else {
                if (qt.has_min)
                    panel_kernel<BK, true, false>(ps, s.nb, pk, ngc, nc, mr, d, d0, d1, np);
                else
                    panel_kernel<BK, false, false>(ps, s.nb, pk, ngc, nc, mr, d, d0, d1, np);
            }
        }
    }
    if (!emu) amx_release();
}

} // namespace

void ggml_cpu_amx_mul_mat(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_amx_quant * qt = ggml_amx_get_quant(dst->src[0]->type);
    GGML_ASSERT(qt);
    const bool emu = amx_emulated();
    if (qt->bk == 32)
        amx_mul_mat<32>(p, dst, *qt, emu);
    else
        amx_mul_mat<16>(p, dst, *qt, emu);
}

#else

void ggml_cpu_amx_mul_mat(const ggml_cpu_params &, ggml_tensor *) {
    GGML_ABORT("ggml_cpu_amx_mul_mat: built without AMX support");
}

#endif
