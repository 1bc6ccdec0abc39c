// fattn-mma-wide.cu - see fattn-mma.cuh (ggml_cuda_fattn_mma_wide). Fragment layouts: fattn-mma.cu's head comment.
// Against k_fattn_mma (16 rows per warp, Q in registers, the mask applied to every score): each warp owns two
// m-tiles (32 query rows), so each K / V fragment loaded from shared memory feeds two mma instead of one and each
// warp has twice the independent mma in flight; Q lives in shared memory (f16, pre-scaled) and is loaded per k-step
// (the registers go to the second m-tile's accumulators). Where the ranges say the mask is exactly "0 on the
// token's range, -inf elsewhere" (the causal mask of a sequence: fattn-range.cuh's exact flags), a step of keys
// inside every range of the block's tokens is not masked at all and the steps at the edges compare keys with the
// ranges; other masks are read from global memory per score. Per 64-key tile: S issued in two 32-key steps, then per
// step the online softmax and P V (the first step's softmax overlaps the second's S, its P V the second's softmax);
// the row sums l come from the tensor cores (LS). Several blocks may share a row block's tiles (p.n_split: partials
// merged by ggml_cuda_fattn_combine).
#include "fattn-mma-frag.cuh"
#include "fattn-mma.cuh"
#include "fattn-range.cuh"

#include <algorithm>
#include <climits>
#include <cstdlib>

#define FW_BN 64      // keys per tile
#define FW_W 4        // warps per block
#define FW_BM 128     // query rows per block: FW_W x 32
#define FW_SPLIT 2048 // the fewest keys per KV split

// block: FW_W warps x 32 query rows (rows = token * r + head of the kv head's group, as k_fattn_mma); grid: (row
// blocks, kv heads, splits). Shared memory: Q [FW_BM][LD], K and V [2][FW_BN][LD] each (f16).
template <int D, int SB, bool LS>
static __global__ void __launch_bounds__(FW_W * 32) k_fattn_mma_wide(const fattn_mma_params p) {
    constexpr int LD = D + 8; // shared row stride in halves: 16-byte aligned rows, ldmatrix without bank conflicts
    constexpr int KT = D / 16, NT = D / 8, BM = FW_BM;
    constexpr float LOG2E = 1.4426950408889634f; // scores are kept in log2 units: exp2 in the softmax
    extern __shared__ __align__(16) half fw_smem[];
    half * Qs = fw_smem;             // [BM][LD]
    half * Ks = Qs + BM * LD;        // [2][FW_BN][LD]
    half * Vs = Ks + 2 * FW_BN * LD; // [2][FW_BN][LD]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int hk = blockIdx.y, n_q = p.n_tokens * p.r, q0 = blockIdx.x * BM;
    const int t_lo = q0 / p.r, t_hi = min(n_q - 1, q0 + BM - 1) / p.r; // the block's tokens

    // Q rows of the block -> f16 in shared memory, times scale * log2(e) (rows past n_q repeat the last one)
    for (int e = threadIdx.x; e < BM * (D / 2); e += blockDim.x) {
        const int row = e / (D / 2), d = 2 * (e % (D / 2));
        const int qq = min(q0 + row, n_q - 1);
        const char * src = p.q + (qq / p.r) * p.qs.nb[1] + (hk * p.r + qq % p.r) * p.qs.nb[2] + d * p.qs.nb[0];
        const float x0 = *(const float *)src, x1 = *(const float *)(src + p.qs.nb[0]);
        *(uint32_t *)(Qs + row * LD + d) = fm_pack(x0 * (p.scale * LOG2E), x1 * (p.scale * LOG2E));
    }

    // the keys the block reads, and whether the ranges alone describe its tokens' mask (exact): then tiles inside
    // [lo_max, hi_min) of every token need no mask at all
    int kv_end = p.n_kv, kv_begin = 0, lo_max = 0, hi_min = p.n_kv;
    bool exact = !p.mask;
    if (p.causal_n_past >= 0) kv_end = min(kv_end, p.causal_n_past + t_hi + 1);
    if (p.ranges) {
        const int2 u = fattn_ranges_union(p.ranges, t_lo, t_hi);
        kv_begin = u.x;
        kv_end = min(kv_end, u.y);
        exact = true;
        lo_max = 0;
        hi_min = INT_MAX;
        for (int t = t_lo; t <= t_hi; ++t) {
            const int2 r = p.ranges[t];
            exact = exact && p.ranges[p.n_tokens + t].x;
            lo_max = max(lo_max, r.x);
            hi_min = min(hi_min, r.y);
        }
    }
    if (p.causal_n_past >= 0) hi_min = min(hi_min, p.causal_n_past + t_lo + 1);
    hi_min = min(hi_min, kv_end);

    // this thread's query row j (m-tile j / 2, row g + 8 (j % 2)): token, head, the keys it may see [lo, hi) and its
    // mask row (where not exact). Recomputed where needed (the tiles at the edges): the registers hold the
    // accumulators.
    auto row_of = [&](int j, int & tok, int & h) {
        const int qq = min(q0 + warp * 32 + (j / 2) * 16 + g + 8 * (j % 2), n_q - 1);
        tok = qq / p.r;
        h = hk * p.r + qq % p.r;
    };
    auto row_keys = [&](int j, int & lo, int & hi, const char *& mrow) {
        int tok, h;
        row_of(j, tok, h);
        lo = 0;
        hi = kv_end;
        if (p.causal_n_past >= 0) hi = min(hi, p.causal_n_past + tok + 1);
        if (p.ranges && exact) {
            const int2 r = p.ranges[tok];
            lo = r.x;
            hi = min(hi, r.y);
        }
        mrow = p.mask && !exact ? p.mask + tok * p.ms.nb[1] + (h % p.ms.ne[2]) * p.ms.nb[2] : nullptr;
    };

    // this block's part of the tiles: split blockIdx.z of p.n_split
    const int tiles_all = max(0, (kv_end + FW_BN - 1) / FW_BN - kv_begin / FW_BN);
    const int per_split = (tiles_all + p.n_split - 1) / p.n_split;
    const int tile_begin = kv_begin / FW_BN + blockIdx.z * per_split;
    const int n_tiles = max(0, min(per_split, tiles_all - (int)blockIdx.z * per_split));
    const char * kb = p.k + hk * p.ks.nb[2];
    const char * vb = p.v + hk * p.vs.nb[2];
    auto load_tile = [&](int tile, int buf) {
        fm_load_kv<D, FW_BN, LD>(Ks, Vs, kb, vb, p.ks.nb[1], p.vs.nb[1], p.n_kv, tile, buf);
        cp_async_commit();
    };

    float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // LS: the row sums l by the tensor cores, as an extra n-tile of O against a V column of ones (P's f16 values
    // summed exactly as P V uses them; no per-score adds and shuffles): l of row j = o[j / 2][NT][2 (j % 2)]
    float o[2][NT + LS][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT + LS; ++nt)
            o[mt][nt][0] = o[mt][nt][1] = o[mt][nt][2] = o[mt][nt][3] = 0.0f;

    const int mat = lane / 8, mi = lane % 8; // ldmatrix: this lane's row address is row mi of matrix mat
    const half * Qw = Qs + (warp * 32 + mi + (mat & 1) * 8) * LD + (mat >> 1) * 8;
    if (n_tiles > 0) load_tile(tile_begin, 0);
    for (int it = 0; it < n_tiles; ++it) {
        fm_next_tile(it, n_tiles, tile_begin, load_tile);
        const half * Kb = Ks + (it & 1) * FW_BN * LD;
        const half * Vb = Vs + (it & 1) * FW_BN * LD;

        // S [2 m-tiles][16 rows][64 keys] of this warp (n-tile nt = keys 8 nt .. 8 nt + 7), issued by steps of SB
        // keys: the softmax of a step waits only for its own mma while the next step's are still running
        float s[2][FW_BN / 8][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < FW_BN / 8; ++nt)
                s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
        for (int sub = 0; sub < FW_BN / SB; ++sub)
#pragma unroll
            for (int kt = 0; kt < KT; ++kt) {
                uint32_t qa[2][4]; // A of m-tiles 0 and 1: rows (0..7 | 8..15) x d 16 kt + (0..7 | 8..15)
                fm_ldsm(qa[0], Qw + kt * 16);
                fm_ldsm(qa[1], Qw + 16 * LD + kt * 16);
#pragma unroll
                for (int n2 = sub * SB / 16; n2 < (sub + 1) * SB / 16; ++n2) {
                    // keys 16 n2 + (0..7 | 8..15) x d 16 kt + (0..7 | 8..15): b0, b1 of n-tile 2 n2, then 2 n2 + 1
                    uint32_t b[4];
                    fm_ldsm(b, Kb + (n2 * 16 + mi + (mat >> 1) * 8) * LD + kt * 16 + (mat & 1) * 8);
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        fm_mma(s[mt][2 * n2], qa[mt], b[0], b[1]);
                        fm_mma(s[mt][2 * n2 + 1], qa[mt], b[2], b[3]);
                    }
                }
            }

            // per step of SB keys: mask, online softmax, O += P V (the step's P V mma run during the next step's
            // softmax)
#pragma unroll
        for (int sub = 0; sub < FW_BN / SB; ++sub) {
            constexpr int NS = SB / 8; // n-tiles of the step: s[.][sub * NS + ..]
            // mask: none for keys inside every token's range of an exact mask; else keys outside the row's [lo, hi),
            // plus the mask's value where it is not exact
            const int key0 = (tile_begin + it) * FW_BN + sub * SB;
            if (!exact || key0 < lo_max || key0 + SB > hi_min) {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    int lo, hi;
                    const char * mrow;
                    row_keys(j, lo, hi, mrow);
#pragma unroll
                    for (int nt = 0; nt < NS; ++nt)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int key = key0 + nt * 8 + 2 * c + e;
                            float & sv = s[j / 2][sub * NS + nt][2 * (j % 2) + e];
                            if (key < lo || key >= hi) {
                                sv = -INFINITY;
                            } else if (mrow) {
                                const char * mp = mrow + key * p.ms.nb[0];
                                sv += LOG2E * (p.mask_f16 ? __half2float(*(const half *)mp) : *(const float *)mp);
                            }
                        }
                }
            }

            // online softmax per row (a row's SB scores are spread over the 4 lanes of its group); maxima and sums
            // as pairwise trees (short dependency chains)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float(&sr)[FW_BN / 8][4] = s[j / 2];
                const int i = j % 2;
                float mx2[NS];
#pragma unroll
                for (int nt = 0; nt < NS; ++nt)
                    mx2[nt] = fmaxf(sr[sub * NS + nt][2 * i], sr[sub * NS + nt][2 * i + 1]);
#pragma unroll
                for (int w = NS / 2; w > 0; w /= 2)
#pragma unroll
                    for (int nt = 0; nt < w; ++nt)
                        mx2[nt] = fmaxf(mx2[nt], mx2[nt + w]);
                float mx = mx2[0];
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                const float m_new = fmaxf(m[j], mx);
                const float m_use = m_new == -INFINITY ? 0.0f : m_new; // a row with nothing visible yet stays at 0
                const float alpha = exp2f(m[j] - m_use);
                float rs2[NS];
#pragma unroll
                for (int nt = 0; nt < NS; ++nt) {
                    const float p0 = exp2f(sr[sub * NS + nt][2 * i] - m_use);
                    const float p1 = exp2f(sr[sub * NS + nt][2 * i + 1] - m_use);
                    sr[sub * NS + nt][2 * i] = p0;
                    sr[sub * NS + nt][2 * i + 1] = p1;
                    rs2[nt] = p0 + p1;
                }
                if (!LS) {
#pragma unroll
                    for (int w = NS / 2; w > 0; w /= 2)
#pragma unroll
                        for (int nt = 0; nt < w; ++nt)
                            rs2[nt] += rs2[nt + w];
                    float rs = rs2[0];
                    rs += __shfl_xor_sync(0xffffffff, rs, 1);
                    rs += __shfl_xor_sync(0xffffffff, rs, 2);
                    l[j] = l[j] * alpha + rs;
                }
                m[j] = m_new;
                if (__any_sync(0xffffffff, alpha != 1.0f)) { // deep in a long prompt the row maxima rarely move
#pragma unroll
                    for (int nt = 0; nt < NT + LS; ++nt) {
                        o[j / 2][nt][2 * i] *= alpha;
                        o[j / 2][nt][2 * i + 1] *= alpha;
                    }
                }
            }

            // O += P V: k-step kk = keys 16 kk .. 16 kk + 15 of the tile
#pragma unroll
            for (int kk = sub * SB / 16; kk < (sub + 1) * SB / 16; ++kk) {
                uint32_t pa[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    pa[mt][0] = fm_pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                    pa[mt][1] = fm_pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                    pa[mt][2] = fm_pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                    pa[mt][3] = fm_pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                }
#pragma unroll
                for (int n2 = 0; n2 < NT / 2; ++n2) {
                    // keys 16 kk + (0..7 | 8..15) x d 16 n2 + (0..7 | 8..15), transposed: b0, b1 of d-tile 2 n2, then
                    // 2 n2 + 1
                    uint32_t b[4];
                    fm_ldsm_t(b, Vb + (kk * 16 + mi + (mat & 1) * 8) * LD + n2 * 16 + (mat >> 1) * 8);
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        fm_mma(o[mt][2 * n2], pa[mt], b[0], b[1]);
                        fm_mma(o[mt][2 * n2 + 1], pa[mt], b[2], b[3]);
                    }
                }
                if (LS) {
                    constexpr uint32_t ONES = 0x3C003C00u; // f16 1.0, 1.0
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt)
                        fm_mma(o[mt][NT], pa[mt], ONES, ONES);
                }
            }
        }
        __syncthreads(); // the next iteration's load overwrites this buffer
    }

    if (p.n_split > 1) { // unnormalised partials: o [split][kv head * n_q + row][D], (m in natural-log units, l)
        const int64_t nq_all = (int64_t)n_q * gridDim.y;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int qi = q0 + warp * 32 + (j / 2) * 16 + g + 8 * (j % 2);
            if (qi >= n_q) continue;
            const int64_t qg = blockIdx.z * nq_all + (int64_t)hk * n_q + qi;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
                *(float2 *)(p.part + qg * D + nt * 8 + 2 * c) =
                    make_float2(o[j / 2][nt][2 * (j % 2)], o[j / 2][nt][2 * (j % 2) + 1]);
            if (c == 0) p.ml[qg] = make_float2(m[j] * 0.6931471805599453f, LS ? o[j / 2][NT][2 * (j % 2)] : l[j]);
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int qi = q0 + warp * 32 + (j / 2) * 16 + g + 8 * (j % 2);
        if (qi >= n_q) continue;
        const float lj = LS ? o[j / 2][NT][2 * (j % 2)] : l[j];
        const float inv = lj > 0.0f ? 1.0f / lj : 0.0f;
        float * out = (float *)((char *)p.dst + (hk * p.r + qi % p.r) * p.ds.nb[1] + (qi / p.r) * p.ds.nb[2]);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
            *(float2 *)(out + nt * 8 + 2 * c) =
                make_float2(o[j / 2][nt][2 * (j % 2)] * inv, o[j / 2][nt][2 * (j % 2) + 1] * inv);
    }
}

// Splits: when the row blocks fill under two blocks per SM and there are at least 2048 keys per split, the key
// tiles are split so that the grid makes at most two blocks per SM (one wave) (the occupancy the registers and shared
// memory allow for D 128); partials are merged by ggml_cuda_fattn_combine. GGML_CUDA_FATTN_WIDE_SPLIT=0: never (an
// A/B).
template <int D, int SB, bool LS> static void launch_wide(ggml_cuda_context & ctx, const fattn_mma_params & p0) {
    static const bool no_split = [] {
        const char * e = std::getenv("GGML_CUDA_FATTN_WIDE_SPLIT");
        return e && std::atoi(e) == 0;
    }();
    fattn_mma_params p = p0;
    const size_t smem = sizeof(half) * (FW_BM + 4 * FW_BN) * (D + 8);
    CUDA_CHECK(
        cudaFuncSetAttribute(k_fattn_mma_wide<D, SB, LS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int gx = (int)cuda_ceil_div((int64_t)p.n_tokens * p.r, FW_BM), n_head_kv = p.n_head / p.r;
    const int64_t blocks = (int64_t)gx * n_head_kv;
    p.n_split = 1;
    if (!no_split && blocks < 2 * ctx.n_sm)
        p.n_split = (int)std::max<int64_t>(1, std::min<int64_t>(2 * ctx.n_sm / blocks, p.n_kv / FW_SPLIT));
    const size_t mark = ctx.pool.mark();
    if (p.n_split > 1) {
        const int64_t nq_all = (int64_t)p.n_tokens * p.n_head;
        p.part = (float *)ctx.pool.alloc(sizeof(float) * p.n_split * nq_all * D);
        p.ml = (float2 *)ctx.pool.alloc(sizeof(float2) * p.n_split * nq_all);
    }
    k_fattn_mma_wide<D, SB, LS><<<dim3(gx, n_head_kv, p.n_split), FW_W * 32, smem, ctx.stream>>>(p);
    CUDA_CHECK_LAUNCH();
    if (p.n_split > 1) {
        fa_params c = {};
        c.dst = p.dst;
        c.ds = p.ds;
        c.D = D;
        c.n_tokens = p.n_tokens;
        c.n_head = p.n_head;
        c.r = p.r;
        c.n_split = p.n_split;
        c.part = p.part;
        c.ml = p.ml;
        ggml_cuda_fattn_combine(ctx, c);
    }
    ctx.pool.rewind(mark); // read only by the two launches just queued
}

bool ggml_cuda_fattn_mma_wide_wanted(const fattn_mma_params & p, int n_sm) {
    static const bool off = [] {
        const char * e = std::getenv("GGML_CUDA_FATTN_WIDE");
        return e && std::atoi(e) == 0;
    }();
    const int64_t blocks = cuda_ceil_div((int64_t)p.n_tokens * p.r, FW_BM) * (p.n_head / p.r);
    return !off && (p.n_kv >= FW_SPLIT || blocks >= 2 * n_sm);
}

// GGML_CUDA_FATTN_WIDE_SB=64: one softmax step per tile; GGML_CUDA_FATTN_WIDE_LSUM=0: row sums by adds (A/Bs)
template <int D> static void launch_wide_variant(ggml_cuda_context & ctx, const fattn_mma_params & p) {
    static const int v = [] {
        const char * sb = std::getenv("GGML_CUDA_FATTN_WIDE_SB");
        const char * ls = std::getenv("GGML_CUDA_FATTN_WIDE_LSUM");
        return sb && std::atoi(sb) == 64 ? 2 : ls && std::atoi(ls) == 0 ? 1 : 0;
    }();
    if (v == 0) launch_wide<D, 32, true>(ctx, p);
    if (v == 1) launch_wide<D, 32, false>(ctx, p);
    if (v == 2) launch_wide<D, 64, false>(ctx, p);
}

void ggml_cuda_fattn_mma_wide(ggml_cuda_context & ctx, const fattn_mma_params & p) {
    fattn_mma_for_d(p.D, [&](auto d) { launch_wide_variant<decltype(d)::value>(ctx, p); });
}
