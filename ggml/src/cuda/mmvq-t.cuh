// mmvq-t.cuh - the kernels of one quantized weight type T (qtypes.cuh), included only by the per-type
// instance files mmvq-<type>.cu, each of which defines its ggml_cuda_qt_fns (mmvq.cuh) with
// GGML_CUDA_QT_INSTANCE:
//   decode mat-vec (N = 1..8 activation columns, batches with broadcast), the fused q/k/v group and the fused
//   gate/up + SwiGLU (N = 1); the weight -> f16 conversion of the prompt path; get_rows.
// Mat-vec layout: a block of 4 warps (with the q8 epilogue 32 / RPW: one group of 32 rows) takes 4 x RPW rows, RPW
// rows per warp (N = 1: ctx.qt_rpw, 2 by default:
// twice the weight bytes in flight per warp, measured on an H100 tg128 q4_0 388 -> 434 t/s, Q4_K_M 354 -> 382,
// q8_0 (v6 kernels of mmvq.cu) 278 -> 294; RPW 4 was slower for q4_0 and q8_0);
// lane l takes the row's chunks l, l + 32, ... (a chunk: 32..128 values, qtypes.cuh), keeping T::U chunks of
// each row's weights in flight; the first ones are loaded before pdl_wait() (common.cuh), as weights do not depend on
// the kernel before. Each chunk's dot reads the activation quants with 16-byte loads (L1/L2: every warp reads the same
// activation row), its weights with 16-byte loads where the layout allows.
#pragma once
#include "cpy.cuh"
#include "mmvq.cuh"
#include "qtypes.cuh"
#include "quantize.cuh"

#include <type_traits>

// ggml_cuda_qt_epi (mmvq.cuh) as the kernels take it: the q8 buffer split into its arrays
struct qt_epi_dev {
    const float * nsq_in;
    float eps_in;
    const float *res, *qw;
    int8_t * qs;
    float * qd;
    int * qsum;
    float * nsq_out;
};

static qt_epi_dev qt_epi_dev_of(const ggml_cuda_qt_epi * e, int64_t M) {
    qt_epi_dev d = {};
    if (!e) return d;
    d.nsq_in = e->nsq_in;
    d.eps_in = e->eps_in;
    d.res = e->res;
    d.qw = e->qw;
    if (e->q8) {
        GGML_ASSERT(M % 32 == 0);
        const q8s_view v = q8s_view_of(e->q8, 1, M);
        d.qs = v.qs;
        d.qd = v.d;
        d.qsum = v.s;
        d.nsq_out = e->nsq_out;
    }
    return d;
}

// the rms scale of a deferred norm (qt_epi_dev::nsq_in): nss is this lane's part of sum(x^2) (qt_rows_dot)
static __device__ __forceinline__ float qt_norm_scale(const qt_epi_dev & e, float nss, int K) {
    return e.nsq_in ? rsqrtf(warp_sum(nss) / (float)K + e.eps_in) : 1.0f;
}

// The q8 epilogue of a block that computed the 32 rows of group g (h: their values, in shared memory, written
// before the barrier every thread of the block passes): warp 0 quantizes them (times e.qw) into e.qs/qd/qsum
// (q8s_quantize_block, as k_quantize_q8s) and writes their sum of squares to e.nsq_out. (The first form counted
// each warp's rows with a global atomic and let the warp completing the group read them back from L2: two L2
// round trips more at the end of every wo / ffn_down launch, ~3 us of a 10.4 us q4_0 launch on an H100.)
// qw: warp 0's lane l holds e.qw[32 g + l] (1 without e.qw), requested before the dots (qt_mmvq_body)
static __device__ __forceinline__ void qt_epi_q8_block(const qt_epi_dev & e, const float * h, int64_t g, float qw) {
    __syncthreads();
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    const float v = h[lane];
    q8s_quantize_block(e.qw ? v * qw : v, lane, e.qs + 32 * g, e.qd + g, e.qsum + g);
    const float ss = warp_sum(v * v);
    if (lane == 0 && e.nsq_out) e.nsq_out[g] = ss;
}

template <typename T, int NW, int U>
static __device__ __forceinline__ void qt_load(const qregs (&w)[NW], const int64_t (&b0)[NW], int ch0, int nch, int sub,
                                               typename T::W (&wv)[U][NW]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int ch = ch0 + 32 * u;
        if (ch < nch) {
#pragma unroll
            for (int m = 0; m < NW; ++m)
                T::load(w[m], b0[m] + ch / T::CPB, sub, wv[u][m]);
        }
    }
}

// Chunks a lane keeps in flight in the kernels that run about one wave of blocks (the q/k/v group, the wo / ffn_down
// mat-vec of one block per 32 rows), at RPW rows per warp: q8_0 twice its T::U (4 of its 34-byte chunks: those
// kernels then have ~2x the weight bytes in flight per SM). H200, Llama-2-7B tg128 q8_0 403 -> 434 t/s; the same
// for the gate/up kernel (2.6 waves) was slower (427), and so was doubling U for q4_0 (567 -> 552) and Q4_K_M
// (485 -> 472): their registers, not their bytes in flight, limit those kernels.
template <typename T, int RPW> constexpr int qt_u_wave() {
    return T::type == GGML_TYPE_Q8_0 && RPW <= 2 ? 2 * T::U : T::U;
}

// The RPW rows of a warp from row0 (a row past M reads row M - 1 and is not stored): region pointers and first
// blocks, off rows into the weight (a batch's matrix), nbr blocks per row
template <int RPW>
static __device__ __forceinline__ void qt_warp_rows(const qregs & w, int64_t row0, int64_t M, int64_t off, int nbr,
                                                    qregs (&wr)[RPW], int64_t (&b0)[RPW]) {
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        wr[r] = w;
        b0[r] = ((row0 + r < M ? row0 + r : M - 1) + off) * nbr;
    }
}

// values of a deferred norm's sums (qt_rows_dot's nsq) a lane requests before its dots, covering K <= 32 * 32 * 4
// (4096); a longer row's other sums are read after the dots
#define QT_NSQ_R 4

// Whether a kernel of weight type T requests the deferred norm's sums before its dots (qt_rows_dot) or after them.
// H200, Llama-2-7B tg128, one call alternating builds: Q4_K_M 527.5 / 521.7 -> 551.9 / 550.3 t/s (its q/k/v group,
// gate/up and output mat-vec); q4_0 630 / 631 -> 624 / 626 (its 4-rows-per-warp group goes from 128 registers to
// 141, 3 blocks an SM; held to 128 it spills and gives 619): q4_0 sums them after the dots, as before.
template <typename T> constexpr bool qt_nsq_early() {
    return T::type != GGML_TYPE_Q4_0;
}

// This lane's part of the dots of NW weight rows (row m: regions w[m], first block b0[m]; nch chunks) with NC
// activation rows (row c: quants xq + c*K, scales and sums xd/xs + c*K/32). early: the weights may be loaded
// before pdl_wait().
// nsq (nullable): this lane's part of the sum of the K/32 values nsq (a deferred norm, qt_epi_dev) into nss; written
// by the kernel before, so read after pdl_wait and not through __ldg; summed in a fixed order (the same sum in every
// warp). qt_nsq_early<T>(): requested with the activations' first loads and summed after the dots, else summed
// before the dots.
// after_wait(): what the caller reads of the kernels before (an epilogue's inputs), right after pdl_wait(),
// requested before the dots and used after them: a load used before the dots would add its round trip to the
// kernel's path after the wait.
template <typename T, int NC, int NW, int U = T::U, typename AW>
static __device__ __forceinline__ void qt_rows_dot(const qregs (&w)[NW], const int64_t (&b0)[NW], int nch,
                                                   const int8_t * __restrict__ xq, const float * __restrict__ xd,
                                                   const int * __restrict__ xs, int K, int lane, bool early,
                                                   float (&acc)[NW][NC], const float * nsq, float & nss,
                                                   AW && after_wait) {
    constexpr int CPB = T::CPB;
    const int sub = lane % CPB; // chunk ch = lane + 32 i is chunk ch % CPB of its block: the same for every i
    typename T::W wv[U][NW];
    if (!early) pdl_wait();
    qt_load<T, NW, U>(w, b0, lane, nch, sub, wv);
    pdl_wait();
    after_wait();
    constexpr bool NE = qt_nsq_early<T>();
    float nv[QT_NSQ_R];
    if (nsq) {
        if constexpr (NE) {
#pragma unroll
            for (int i = 0; i < QT_NSQ_R; ++i)
                nv[i] = lane + 32 * i < K / 32 ? ld_act(nsq + lane + 32 * i) : 0.0f;
        } else {
            for (int g = lane; g < K / 32; g += 32)
                nss += ld_act(nsq + g);
        }
    }
    for (int ch0 = lane; ch0 < nch; ch0 += 32 * U) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int ch = ch0 + 32 * u;
            if (ch < nch) {
                const int bi = ch / CPB; // block of the row
#pragma unroll
                for (int c = 0; c < NC; ++c) {
                    const int64_t xo = (int64_t)c * (K / 32) + bi * (T::QK / 32);
                    const int4 * x = (const int4 *)(xq + (int64_t)c * K + (int64_t)bi * T::QK);
#pragma unroll
                    for (int m = 0; m < NW; ++m)
                        acc[m][c] += T::dot(wv[u][m], sub, x, xd + xo, xs + xo);
                }
            }
        }
        if (ch0 + 32 * U < nch) qt_load<T, NW, U>(w, b0, ch0 + 32 * U, nch, sub, wv);
    }
    if (NE && nsq) {
#pragma unroll
        for (int i = 0; i < QT_NSQ_R; ++i)
            nss += nv[i];
        for (int g = lane + 32 * QT_NSQ_R; g < K / 32; g += 32)
            nss += ld_act(nsq + g);
    }
}

// dst [M, NC, B2, B3]; weight rows flat (row + (i2/r2)*M + (i3/r3)*M*A2); activation rows bz*NC + c.
// Blocks of WPB warps, RPW rows per warp (2: twice the weight bytes in flight per warp; a last odd row is computed
// twice, stored once).
// e: the epilogues of ggml_cuda_qt_epi (NC = 1, one batch, dst contiguous); with e.qs WPB * RPW = 32 (a block per
// group of 32 rows, M % 32 == 0: every block whole).
template <typename T, int NC, int RPW, int WPB>
static __device__ __forceinline__ void
qt_mmvq_body(const qregs & w, const int8_t * __restrict__ xq, const float * __restrict__ xd,
             const int * __restrict__ xs, float * dst, int K, int64_t M, int64_t A2, int64_t B2, int64_t r2, int64_t r3,
             const cuda_shape & ds, int early, const qt_epi_dev & e) {
    pdl_trigger();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t row0 = ((int64_t)blockIdx.x * WPB + warp) * RPW, bz = blockIdx.y;
    if (row0 >= M) return;
    const int64_t i2 = bz % B2, i3 = bz / B2;
    const int64_t off = (i2 / r2) * M + (i3 / r3) * M * A2;
    const int nbr = K / T::QK;
    qregs wr[RPW];
    int64_t b0[RPW];
    qt_warp_rows<RPW>(w, row0, M, off, nbr, wr, b0);
    const int64_t x0 = bz * NC;
    float acc[RPW][NC] = {};
    float nss = 0.0f;
    constexpr int U = WPB * RPW == 32 ? qt_u_wave<T, RPW>() : T::U; // the one-block-per-32-rows form: one wave
    constexpr bool Q8E = NC == 1 && WPB * RPW == 32;                // the q8 epilogue's form
    // the q8 epilogue's inputs, requested before the dots (qt_rows_dot's after_wait): the residual (lane 0: rows
    // row0 ..; written by an earlier kernel) and warp 0's norm weights (qt_epi_q8_block). H200, Llama-2-7B tg128
    // (with qt_nsq_early), one call alternating builds: q4_0 613.7 / 613.4 -> 631.3 / 630.2 t/s, q8_0 453.8 / 454.8
    // -> 468.7 / 473.5; alone, q4_0 616.6 / 615.3 -> 629.5 / 631.0 and Q4_K_M 509.3 / 512.3 -> 527.5 / 521.7.
    float rv[RPW], qw = 1.0f;
    auto pre = [&] {
        if constexpr (Q8E) {
#pragma unroll
            for (int m = 0; m < RPW; ++m)
                rv[m] = e.res && lane == 0 && row0 + m < M ? ld_act(e.res + row0 + m) : 0.0f;
            if (e.qs && e.qw && warp == 0) qw = __ldg(e.qw + 32 * blockIdx.x + lane);
        }
    };
    qt_rows_dot<T, NC, RPW, U>(wr, b0, nbr * T::CPB, xq + x0 * K, xd + x0 * (K / 32), xs + x0 * (K / 32), K, lane,
                               early != 0, acc, e.nsq_in, nss, pre);
    const float sc = qt_norm_scale(e, nss, K);
    __shared__ float h[WPB * RPW]; // the block's rows for the q8 epilogue
#pragma unroll
    for (int m = 0; m < RPW; ++m)
#pragma unroll
        for (int c = 0; c < NC; ++c) {
            float v = warp_sum(acc[m][c]) * sc;
            if (lane == 0 && row0 + m < M) {
                if (e.res) v += Q8E ? rv[m] : ld_act(e.res + row0 + m);
                *(float *)((char *)dst + (row0 + m) * ds.nb[0] + c * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]) = v;
                if constexpr (NC == 1) h[warp * RPW + m] = v;
            }
        }
    if constexpr (Q8E) {
        if (e.qs) qt_epi_q8_block(e, h, blockIdx.x, qw);
    }
}

template <typename T, int NC, int RPW, int WPB>
static __global__ void __launch_bounds__(WPB * 32)
    k_qt_mmvq(const qregs w, const int8_t * __restrict__ xq, const float * __restrict__ xd, const int * __restrict__ xs,
              float * dst, int K, int64_t M, int64_t A2, int64_t B2, int64_t r2, int64_t r3, cuda_shape ds, int early,
              const qt_epi_dev e) {
    qt_mmvq_body<T, NC, RPW, WPB>(w, xq, xd, xs, dst, K, M, A2, B2, r2, r3, ds, early, e);
}
// The q4_0 wo / ffn_down form (2 rows a warp, 16 warps a 32-row group) held to 80 registers (85 by the compiler's
// choice; no spills): the block leaves more of its SM to the next kernel's early blocks. H200, Llama-2-7B q4_0 tg128,
// 7 alternating rounds in one call: 605.7 -> 614.0 t/s (+1.4%, ahead in every round). The K-quants' forms held
// lower were slower (Q4_K_M: q4_K 110 -> 96 registers -1.8%, -> 112 -0.5%; docs/perf.md, thirty-ninth session).
template <typename T, int NC, int RPW, int WPB>
static __global__ void __maxnreg__(80)
    k_qt_mmvq_r80(const qregs w, const int8_t * __restrict__ xq, const float * __restrict__ xd,
                  const int * __restrict__ xs, float * dst, int K, int64_t M, int64_t A2, int64_t B2, int64_t r2,
                  int64_t r3, cuda_shape ds, int early, const qt_epi_dev e) {
    qt_mmvq_body<T, NC, RPW, WPB>(w, xq, xd, xs, dst, K, M, A2, B2, r2, r3, ds, early, e);
}

// fused group: block b (4 warps, 4 * RPW rows) belongs to weight m where blk[m] <= b < blk[m+1] (blk1, blk2 as in
// mmvq.cu)
struct qt_group_args {
    qregs w[MMV_GROUP_MAX];
    float * dst[MMV_GROUP_MAX];
    int64_t M[MMV_GROUP_MAX];
    int64_t blk1, blk2;
};

// one rotated pair of the rope epilogue (ggml_cuda_qt_rope): rows r, r + 1 (r even) of weight m (0 q, 1 k, 2 v)
static __device__ __forceinline__ void qt_rope_pair(const ggml_cuda_qt_rope & rp, int m, int64_t r, float x0,
                                                    float x1) {
    if (m < 2 && (r % rp.D) / 2 < rp.rp.n_dims / 2) { // pass-through dims keep their values
        float cs, sn;
        rope_cs(rp.rp, (double)rp.rp.pos[0], (r % rp.D) / 2, cs, sn);
        const float y0 = x0 * cs - x1 * sn, y1 = x0 * sn + x1 * cs;
        x0 = y0;
        x1 = y1;
    }
    if (m == 0) {
        rp.q[r] = x0;
        rp.q[r + 1] = x1;
        return;
    }
    if (m == 1 ? rp.k_blk : rp.v_blk) { // a block cache: through scr (qt_kv_block_store)
        float * s = rp.scr + (m == 1 ? 0 : rp.Mk) + r;
        s[0] = x0;
        s[1] = x1;
        return;
    }
    const int64_t cell = rp.cell[0];
    if (cell < 0 || cell >= rp.ncell) return;
    char * d = m == 1 ? rp.k + cell * rp.k_nb1 : rp.v + cell * rp.v_nb1;
    const int64_t nb0 = m == 1 ? rp.k_nb0 : rp.v_nb0;
    if (m == 1 ? rp.k_f16 : rp.v_f16) {
        *(half *)(d + r * nb0) = __float2half(x0);
        *(half *)(d + (r + 1) * nb0) = __float2half(x1);
    } else {
        *(float *)(d + r * nb0) = x0;
        *(float *)(d + (r + 1) * nb0) = x1;
    }
}

// A q8_0 / q4_0 cache of weight m (1 k, 2 v) in the rope epilogue: the block (of 4 warps, rows row_b .. + 4 RPW, all
// below M, M % 32 == 0) has put its rows in rp.scr; the last block of their 32-row group to arrive quantizes the group
// into block row_b / 32 of the cell's row (one warp, kvq_quantize: ggml's reference quantizer) and zeroes its count.
// Called by every thread of the block.
template <int RPW>
static __device__ __forceinline__ void qt_kv_block_store(const ggml_cuda_qt_rope & rp, int m, int64_t row_b) {
    static_assert(32 % (4 * RPW) == 0, "q/k/v group: whole blocks per 32-row group");
    __shared__ int s_last;
    const int64_t grp = row_b / 32;
    int * cnt = rp.cnt + (m == 2 ? rp.Mk / 32 : 0) + grp;
    if (threadIdx.x % 32 < RPW / 2) __threadfence(); // the lanes that wrote to scr, before the count
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(cnt, 1) == 32 / (4 * RPW) - 1;
    __syncthreads();
    if (!s_last || threadIdx.x >= 32) return;
    __threadfence();
    const int lane = threadIdx.x;
    const float x = __ldcg(rp.scr + (m == 2 ? rp.Mk : 0) + grp * 32 + lane);
    if (lane == 0) *cnt = 0;
    const int64_t cell = rp.cell[0];
    if (cell < 0 || cell >= rp.ncell) return;
    const int type = m == 1 ? rp.k_blk : rp.v_blk;
    char * row = m == 1 ? rp.k + cell * rp.k_nb1 : rp.v + cell * rp.v_nb1;
    if (type == GGML_TYPE_Q8_0) {
        kvq_quantize<GGML_TYPE_Q8_0>(x, lane, row + grp * 34);
    } else {
        kvq_quantize<GGML_TYPE_Q4_0>(x, lane, row + grp * 18);
    }
}

// TV: the type of weight 2 (v of a q/k/v group; the K-quant mixes quantize attn_v with more bits, e.g. Q4_K_M's q6_K
// beside q4_K q and k): its blocks take TV's row loop (block-uniform branch), the others T's
template <typename T, typename TV, int RPW>
static __global__ void __launch_bounds__(128)
    k_qt_group(const qt_group_args g, const int8_t * __restrict__ xq, const float * __restrict__ xd,
               const int * __restrict__ xs, int K, const qt_epi_dev e, const ggml_cuda_qt_rope rp) {
    pdl_trigger();
    const int lane = threadIdx.x % 32;
    // with a q8_0 / q4_0 cache the k and v blocks (their last-block quantization: qt_kv_block_store) run first, so
    // that their longer ends overlap the q blocks
    const int64_t b = rp.k_blk || rp.v_blk ? (blockIdx.x + g.blk1) % gridDim.x : blockIdx.x;
    const int m = b >= g.blk2 ? 2 : b >= g.blk1 ? 1 : 0;
    const int64_t bm0 = m == 2 ? g.blk2 : m == 1 ? g.blk1 : 0;
    const int64_t M = m == 2 ? g.M[2] : m == 1 ? g.M[1] : g.M[0];
    const int64_t row0 = ((b - bm0) * 4 + threadIdx.x / 32) * RPW;
    if (row0 >= M) return;
    const qregs w = m == 2 ? g.w[2] : m == 1 ? g.w[1] : g.w[0];
    float acc[RPW][1] = {};
    float nss = 0.0f;
    auto rows = [&](auto tt) {
        using TT = decltype(tt);
        const int nbr = K / TT::QK;
        qregs wr[RPW];
        int64_t b0[RPW];
        qt_warp_rows<RPW>(w, row0, M, 0, nbr, wr, b0);
        qt_rows_dot<TT, 1, RPW, qt_u_wave<TT, RPW>()>(wr, b0, nbr * TT::CPB, xq, xd, xs, K, lane, true, acc, e.nsq_in,
                                                      nss, [] {});
    };
    if (std::is_same_v<T, TV> || m != 2)
        rows(T{});
    else
        rows(TV{});
    const float sc = qt_norm_scale(e, nss, K);
    float * dst = m == 2 ? g.dst[2] : m == 1 ? g.dst[1] : g.dst[0];
    float v[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        v[r] = warp_sum(acc[r][0]) * sc;
        if (!rp.q && lane == 0 && row0 + r < M) dst[row0 + r] = v[r];
    }
    if constexpr (RPW % 2 == 0) { // the rope epilogue: lane p takes the warp's pair p (M is even)
        if (rp.q)
#pragma unroll
            for (int p = 0; p < RPW / 2; ++p)
                if (lane == p && row0 + 2 * p < M) qt_rope_pair(rp, m, row0 + 2 * p, v[2 * p], v[2 * p + 1]);
        if (rp.q && m > 0 && (m == 1 ? rp.k_blk : rp.v_blk)) qt_kv_block_store<RPW>(rp, m, (b - bm0) * 4 * RPW);
    }
}

static __device__ __forceinline__ float qt_silu(float x) { return x / (1.0f + expf(-x)); } // as unary.cu

// blocks per SM the gate/up kernel is compiled for: q4_0 at two rows per warp held to 128 registers (4 blocks, 16
// warps per SM; 167 registers and 3 blocks otherwise): H100 tg128 479.5 / 481.2 -> 502.8 / 503.4 t/s. The same
// bound made q8_0 (one row per warp) 4% and Q4_K_M 0-1% slower: they keep the compiler's choice.
template <typename T, int RPW> constexpr int qt_swiglu_min_blocks() {
    return T::type == GGML_TYPE_Q4_0 && RPW == 2 ? 4 : 1;
}

// dst[row] = silu(gate . x) * (up . x): both rows in one warp, one activation load serves both
// (RPW rows per warp: weight rows gate r, up r for each)
template <typename T, int RPW>
static __global__ void __launch_bounds__(128, qt_swiglu_min_blocks<T, RPW>())
    k_qt_swiglu(const qregs gw, const qregs uw, const int8_t * __restrict__ xq, const float * __restrict__ xd,
                const int * __restrict__ xs, float * __restrict__ dst, int K, int64_t M, const qt_epi_dev e) {
    pdl_trigger();
    const int lane = threadIdx.x % 32;
    const int64_t row0 = ((int64_t)blockIdx.x * 4 + threadIdx.x / 32) * RPW;
    if (row0 >= M) return;
    const int nbr = K / T::QK;
    qregs wr[2 * RPW];
    int64_t b0[2 * RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        wr[2 * r] = gw;
        wr[2 * r + 1] = uw;
        b0[2 * r] = b0[2 * r + 1] = (row0 + r < M ? row0 + r : M - 1) * nbr;
    }
    float acc[2 * RPW][1] = {};
    float nss = 0.0f;
    qt_rows_dot<T, 1, 2 * RPW>(wr, b0, nbr * T::CPB, xq, xd, xs, K, lane, true, acc, e.nsq_in, nss, [] {});
    const float sc = qt_norm_scale(e, nss, K);
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        const float g = warp_sum(acc[2 * r][0]) * sc, u = warp_sum(acc[2 * r + 1][0]) * sc;
        if (lane == 0 && row0 + r < M) dst[row0 + r] = qt_silu(g) * u;
    }
}

// one thread per 8 values -> one 16-byte store of f16
template <typename T> static __global__ void k_qt_to_f16(const cuda_qptrs p, uint4 * __restrict__ dst, int64_t n8) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    float y[8];
    T::dq8(p, i / (T::QK / 8), (int)(i % (T::QK / 8)), y);
    uint4 out;
    half2 * h = (half2 *)&out;
#pragma unroll
    for (int e = 0; e < 4; ++e)
        h[e] = __floats2half2_rn(y[2 * e], y[2 * e + 1]);
    dst[i] = out;
}

// one block per output row (as getrows.cu); src contiguous: row (r, i2, i3) is flat row r + (i2 + i3*ne2)*ne1
template <typename T>
static __global__ void k_qt_get_rows(const cuda_qptrs p, int64_t nbr, const char * idx, char * dst, cuda_shape ss,
                                     cuda_shape is, cuda_shape ds) {
    pdl_start();
    int64_t i10, i11, i12;
    unravel_row(blockIdx.x, ds.ne[1], ds.ne[2], i10, i11, i12);
    const int64_t row = *(const int32_t *)(idx + i10 * is.nb[0] + i11 * is.nb[1] + i12 * is.nb[2]);
    const int64_t flat = row + ((i11 % ss.ne[2]) + (i12 % ss.ne[3]) * ss.ne[2]) * ss.ne[1];
    char * dr = dst + i10 * ds.nb[1] + i11 * ds.nb[2] + i12 * ds.nb[3];
    for (int64_t j8 = threadIdx.x; j8 < ds.ne[0] / 8; j8 += blockDim.x) {
        float y[8];
        T::dq8(p, flat * nbr + j8 / (T::QK / 8), (int)(j8 % (T::QK / 8)), y);
#pragma unroll
        for (int e = 0; e < 8; ++e)
            *(float *)(dr + (8 * j8 + e) * ds.nb[0]) = y[e];
    }
}

// ---- launchers ---------------------------------------------------------------------------------------------------
template <typename T>
static void qt_mmvq(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early, const void * bq,
                    const ggml_tensor * b, ggml_tensor * dst, const ggml_cuda_qt_epi * epi) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1], B2 = b->ne[2], B3 = b->ne[3];
    GGML_ASSERT(a->type == T::type && K % T::QK == 0 && K <= INT32_MAX && N >= 1 && N <= MMVQ_MAX_COLS);
    GGML_ASSERT(b->ne[0] == K && B2 % a->ne[2] == 0 && B3 % a->ne[3] == 0);
    GGML_ASSERT(!epi || (N == 1 && B2 * B3 == 1 && ggml_is_contiguous(dst)));
    if (M == 0 || B2 * B3 == 0) return;
    const qt_epi_dev e = qt_epi_dev_of(epi, M);
    const q8s_view x = q8s_view_of(const_cast<void *>(bq), ggml_nrows(b), K);
    const qregs r = qt_regs_of(T::type, w, ggml_nelements(a) / T::QK);
    const cuda_shape dsh = cuda_shape_of(dst);
    const int64_t r2 = B2 / a->ne[2], r3 = B3 / a->ne[3];
    const dim3 grid((unsigned)cuda_ceil_div(M, 4), (unsigned)(B2 * B3));
    float * dp = (float *)dst->data;
#define QT_MMVQ_KERNEL(kernel, rpw, wpb)                                                                               \
    ggml_cuda_launch(ctx, kernel, dim3((unsigned)cuda_ceil_div(M, (rpw) * (wpb)), (unsigned)(B2 * B3)),                \
                     dim3((wpb)*32), 0, r, (const int8_t *)x.qs, (const float *)x.d, (const int *)x.s, dp, (int)K, M,  \
                     a->ne[2], B2, r2, r3, dsh, early ? 1 : 0, e)
#define QT_MMVQ_RPW(rpw, wpb) QT_MMVQ_KERNEL((k_qt_mmvq<T, 1, rpw, wpb>), rpw, wpb)
    if (e.qs) { // one block per group of 32 rows
        if constexpr (T::type == GGML_TYPE_Q4_0) {
            if (ctx.qt_rpw == 2) {
                QT_MMVQ_KERNEL((k_qt_mmvq_r80<T, 1, 2, 16>), 2, 16);
                return;
            }
        }
        if (ctx.qt_rpw == 4)
            QT_MMVQ_RPW(4, 8);
        else if (ctx.qt_rpw == 2)
            QT_MMVQ_RPW(2, 16);
        else
            QT_MMVQ_RPW(1, 32);
        return;
    }
    if (N == 1 && ctx.qt_rpw > 1) {
        if (ctx.qt_rpw == 4)
            QT_MMVQ_RPW(4, 4);
        else
            QT_MMVQ_RPW(2, 4);
        return;
    }
#undef QT_MMVQ_RPW
#undef QT_MMVQ_KERNEL
#define QT_MMVQ(n)                                                                                                     \
    case n:                                                                                                            \
        ggml_cuda_launch(ctx, k_qt_mmvq<T, n, 1, 4>, grid, dim3(128), 0, r, (const int8_t *)x.qs, (const float *)x.d,  \
                         (const int *)x.s, dp, (int)K, M, a->ne[2], B2, r2, r3, dsh, early ? 1 : 0, e);                \
        break;
    switch (N) {
        QT_MMVQ(1)
        QT_MMVQ(2)
        QT_MMVQ(3)
        QT_MMVQ(4)
        QT_MMVQ(5)
        QT_MMVQ(6)
        QT_MMVQ(7)
        QT_MMVQ(8)
        default:
            GGML_ABORT("mmvq %s: %lld columns", ggml_type_name(T::type), (long long)N);
    }
#undef QT_MMVQ
}

// Rows per warp of a q/k/v group of one type T: 4 for q4_0 (768 blocks of 128 registers for Llama-2-7B's 12288 rows
// instead of 1536 of 93: each warp requests 16 chunks of 16 bytes at once), qt_rpw (2) for the others, or qt_rpw for
// every type where GGML_CUDA_QT_RPW says. H200, Llama-2-7B tg128, two calls, each alternating two rounds: q4_0
// 591-594 -> 607-610 t/s (+2.6%); q8_0 460.1 / 461.6 -> 457.4 / 458.0, q4_K (Q4_K_M's layers without a q6_K attn_v)
// 510.2 / 510.8 -> 512.5 / 513.8 (level); gate/up or wo / ffn_down at 4 rows per warp were level or slower
// (docs/perf.md, thirty-ninth session). A mixed group (T != TV) runs at 2 (at 4: 247 registers, level).
template <typename T> static int qt_group_rpw(const ggml_cuda_context & ctx) {
    return !ctx.qt_rpw_env && T::type == GGML_TYPE_Q4_0 ? 4 : ctx.qt_rpw;
}

// TV: weight 2's type (k_qt_group); a mixed group needs rows per warp 2
template <typename T, typename TV = T>
static void qt_group(ggml_cuda_context & ctx, const ggml_tensor * const * dsts, int n, const void * bq,
                     const ggml_cuda_qt_epi * epi, const ggml_cuda_qt_rope * rope) {
    GGML_ASSERT(n >= 1 && n <= MMV_GROUP_MAX);
    const int rpw = std::is_same_v<T, TV> ? qt_group_rpw<T>(ctx) : 2;
    GGML_ASSERT(!epi || (!epi->res && !epi->q8)); // a deferred norm only
    GGML_ASSERT(!rope || (n == 3 && rpw % 2 == 0 && rope->D % 2 == 0));
    GGML_ASSERT((std::is_same_v<T, TV>) || (n == 3 && ctx.qt_rpw == 2));
    ggml_cuda_qt_rope rp = {};
    if (rope) rp = *rope;
    const qt_epi_dev e = qt_epi_dev_of(epi, 0);
    const int64_t K = dsts[0]->src[0]->ne[0];
    GGML_ASSERT(K % T::QK == 0 && K % TV::QK == 0 && K <= INT32_MAX);
    qt_group_args g = {};
    int64_t blk[MMV_GROUP_MAX + 1] = {0, 0, 0, 0};
    for (int m = 0; m < MMV_GROUP_MAX; ++m) {
        if (m < n) {
            const ggml_tensor * a = dsts[m]->src[0];
            GGML_ASSERT(a->type == (m == 2 ? TV::type : T::type) && ggml_cuda_kernel_layout(a) && a->ne[0] == K &&
                        ggml_nrows(a) == a->ne[1]);
            GGML_ASSERT(dsts[m]->type == GGML_TYPE_F32 && ggml_nelements(dsts[m]) == a->ne[1]);
            g.w[m] = qt_regs_of(a->type, a->data, ggml_nelements(a) / (m == 2 ? TV::QK : T::QK));
            g.dst[m] = (float *)dsts[m]->data;
            g.M[m] = a->ne[1];
        }
        blk[m + 1] = blk[m] + (m < n ? cuda_ceil_div(g.M[m], 4 * rpw) : 0);
    }
    g.blk1 = blk[1];
    g.blk2 = blk[2];
    const int64_t nblk = blk[MMV_GROUP_MAX];
    if (nblk == 0) return;
    const q8s_view x = q8s_view_of(const_cast<void *>(bq), 1, K);
    if constexpr (!std::is_same_v<T, TV>)
        ggml_cuda_launch(ctx, k_qt_group<T, TV, 2>, dim3((unsigned)nblk), dim3(128), 0, g, (const int8_t *)x.qs,
                         (const float *)x.d, (const int *)x.s, (int)K, e, rp);
    else if (rpw == 4)
        ggml_cuda_launch(ctx, k_qt_group<T, TV, 4>, dim3((unsigned)nblk), dim3(128), 0, g, (const int8_t *)x.qs,
                         (const float *)x.d, (const int *)x.s, (int)K, e, rp);
    else if (rpw == 2)
        ggml_cuda_launch(ctx, k_qt_group<T, TV, 2>, dim3((unsigned)nblk), dim3(128), 0, g, (const int8_t *)x.qs,
                         (const float *)x.d, (const int *)x.s, (int)K, e, rp);
    else
        ggml_cuda_launch(ctx, k_qt_group<T, TV, 1>, dim3((unsigned)nblk), dim3(128), 0, g, (const int8_t *)x.qs,
                         (const float *)x.d, (const int *)x.s, (int)K, e, rp);
}

template <typename T>
static void qt_swiglu(ggml_cuda_context & ctx, const ggml_tensor * gate_w, const ggml_tensor * up_w, const void * bq,
                      float * dst, const ggml_cuda_qt_epi * epi) {
    const int64_t K = gate_w->ne[0], M = gate_w->ne[1];
    GGML_ASSERT(gate_w->type == T::type && up_w->type == T::type && K % T::QK == 0 && K <= INT32_MAX);
    GGML_ASSERT(!epi || (!epi->res && !epi->q8)); // a deferred norm only
    const qt_epi_dev e = qt_epi_dev_of(epi, M);
    GGML_ASSERT(ggml_cuda_kernel_layout(gate_w) && ggml_cuda_kernel_layout(up_w));
    GGML_ASSERT(up_w->ne[0] == K && up_w->ne[1] == M && ggml_nrows(gate_w) == M && ggml_nrows(up_w) == M);
    if (M == 0) return;
    const q8s_view x = q8s_view_of(const_cast<void *>(bq), 1, K);
    const qregs g = qt_regs_of(T::type, gate_w->data, ggml_nelements(gate_w) / T::QK);
    const qregs u = qt_regs_of(T::type, up_w->data, ggml_nelements(up_w) / T::QK);
    // rows per warp: 2 for the 32-value 4/5-bit types (measured, H100: q4_0 tg128 434 -> 450 t/s), 1 for q8_0 and
    // the K-quants (their chunks hold more registers: 2 measured slower or equal); GGML_CUDA_QT_RPW_GLU overrides
    const int rpw = ctx.qt_rpw_glu ? ctx.qt_rpw_glu : T::QK == 32 && T::type != GGML_TYPE_Q8_0 ? 2 : 1;
    const dim3 grid((unsigned)cuda_ceil_div(M, 4 * rpw));
    if (rpw == 2)
        ggml_cuda_launch(ctx, k_qt_swiglu<T, 2>, grid, dim3(128), 0, g, u, (const int8_t *)x.qs, (const float *)x.d,
                         (const int *)x.s, dst, (int)K, M, e);
    else
        ggml_cuda_launch(ctx, k_qt_swiglu<T, 1>, grid, dim3(128), 0, g, u, (const int8_t *)x.qs, (const float *)x.d,
                         (const int *)x.s, dst, (int)K, M, e);
}

template <typename T> static void qt_to_f16(ggml_cuda_context & ctx, const ggml_tensor * t, half * dst) {
    GGML_ASSERT(t->type == T::type && ggml_is_contiguous(t));
    const int64_t n8 = ggml_nelements(t) / 8;
    if (n8 == 0) return;
    k_qt_to_f16<T><<<(unsigned)cuda_ceil_div(n8, 256), 256, 0, ctx.stream>>>(ggml_cuda_qptrs_of(t), (uint4 *)dst, n8);
    CUDA_CHECK_LAUNCH();
}

template <typename T> static void qt_get_rows(ggml_cuda_context & ctx, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * idx = dst->src[1];
    GGML_ASSERT(src->type == T::type && ggml_is_contiguous(src) && idx->type == GGML_TYPE_I32);
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && dst->ne[0] == src->ne[0]);
    const int64_t rows = dst->ne[1] * dst->ne[2] * dst->ne[3];
    if (rows == 0) return;
    const int bs = src->ne[0] >= 2048 ? 256 : src->ne[0] >= 512 ? 64 : 32;
    ggml_cuda_launch(ctx, k_qt_get_rows<T>, dim3((unsigned)rows), dim3(bs), 0, ggml_cuda_qptrs_of(src),
                     (int64_t)(src->ne[0] / T::QK), (const char *)idx->data, (char *)dst->data, cuda_shape_of(src),
                     cuda_shape_of(idx), cuda_shape_of(dst));
}

#define GGML_CUDA_QT_INSTANCE(T, name)                                                                                 \
    extern const ggml_cuda_qt_fns ggml_cuda_qt_##name;                                                                 \
    const ggml_cuda_qt_fns ggml_cuda_qt_##name = {T::type,      T::QK,        qt_mmvq<T>,    qt_group<T>,              \
                                                  qt_swiglu<T>, qt_to_f16<T>, qt_get_rows<T>};
