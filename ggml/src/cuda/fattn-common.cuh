// fattn-common.cuh - what the FLASH_ATTN_EXT kernels of fattn.cu and fattn-vecq.cuh share: the launch parameters,
// the merge of KV-split partials, and the decode kernels' last steps (warps merged through shared memory, the
// output stored, and with several splits the merge by the last block of each kv head).
#pragma once
#include "common.cuh"
#include "fattn-range.cuh"
#include "fattn-trace.cuh"
#include "mmw-order.cuh"
#include "quantize.cuh"

struct fa_params {
    const char * q;
    const char * k;
    const char * v;
    const char * mask;
    float * dst;    // final output (n_split == 1)
    float * part;   // [n_split][n_q][D] partial accumulators (n_split > 1)
    float2 * ml;    // [n_split][n_q] (m, l)
    int * counters; // decode kernel with n_split > 1: one per kv head, 0 between launches (see k_fattn_vec)
    int8_t * q8s;   // decode kernel, optional: the output also quantized for the next mat-vec (quantize.cuh's
    float * q8d;    // split layout, rows = tokens of n_head * D values)
    int * q8sum;    // (its block sums)
    half * xw;      // decode kernel, optional: the output also in the wgmma GEMM's f16 order (mmw-order.cuh) of the
    int xw_nt;      // [n_head * D, T] rows, xw_nt columns (the batched wo GEMM after it)
    cuda_shape qs, ks, vs, ms, ds;
    int D, n_kv, n_tokens, n_head, r, n_split, kv_per_split, causal_n_past, mask_f16;
    float scale;
    // optional [n_tokens] {first visible key, one past the last} per token (fattn-range.cuh; nullptr: all n_kv): a
    // block reads only the keys of its tokens' ranges
    const int2 * ranges;
    int per_token; // decode kernel: 1 = block x takes the r queries of token x (a batch of many sequences), n_split 1
    int exact;     // per_token, or one token: a token whose range is exact (fattn-range.cuh) reads no mask (0 with
                   // GGML_CUDA_FATTN_EXACT=0, an A/B; fattn_token_exact)
    int lean;      // tensor-core decode kernel: lean tiles (fattn-mma.cu; 0 with GGML_CUDA_FATTN_LEAN=0, an A/B)
    // tensor-core decode kernel, one token (swapped form): the KV cell this step writes (a graph input, uploaded before
    // the graph ran), so that its warps request their first tiles before griddepcontrol.wait (fattn-mma.cu); nullptr:
    // after the wait (ggml_cuda_fattn_plan_early)
    const int * wcells;
    // tensor-core decode kernel, n_split > 1: the first block of a kv head to finish runs the split merge's code once
    // without storing (fattn_vec_finish), so that the last block finds that code in L2, not DRAM. H200, Llama-3-8B
    // q8_0 tg32 at depth 16384, four alternating rounds: f16 cache 303.5 -> 307.4 t/s, q8_0 301.8 -> 306.4 (+1.3%,
    // +1.5%; docs/perf.md, forty-second session). 0 with GGML_CUDA_FATTN_WARM=0 (the A/B).
    int warm;
#ifdef GGML_CUDA_FATTN_TRACE
    int trace; // tensor-core decode kernel: print its per-block timeline (fattn-trace.cuh)
#endif
};

typedef void (*fattn_vec_fn)(fa_params);

// One launch merging the p.n_split partials (p.part, p.ml: the layout merge_splits reads) of every query into p.dst
// (fields read: dst, ds, D, n_tokens, n_head, r, n_split, part, ml).
void ggml_cuda_fattn_combine(ggml_cuda_context & ctx, const fa_params & p);

// Dim d of global query qg (kv head * n_q + query) merged over the n_split partials (part, ml); nq_all = n_q *
// n_head_kv. The loads bypass L1 (__ldcg): the decode kernel's last block reads partials other blocks of the same
// launch wrote. One pass (online: the running max rescales num and den per batch of MS_B splits), every load of a
// batch issued before any is used: the last block's merge is the SM-idle tail of a split launch, and each L2 round
// trip in it counts (a loop step per split was ~13 us of tail at 16 splits, ncu on an H200 at 1.4 GHz; two passes of
// batches of 8 for one output at a time, 8 round trips a thread at D 128 and 4 queries, until the twenty-second
// session). MS_B x 3 values are in registers at once (fattn_vec_finish: 8 for the tensor-core decode kernels at
// D 128, else 4; the combine launch 8). The batch loop stays rolled: the merge runs once a launch, in the last block
// of each kv head while the other SMs idle, and its code is fetched cold (the weights streamed through L2 since the
// previous launch evicted it). H200, Llama-3-8B q8_0 cache at depth 16384, the D 128 decode kernel's merge by
// in-kernel %globaltimer stamps: 10.2 us with two outputs a thread and the loops unrolled (3.8 us when the same code
// ran again right after), 6.2 us with one output a thread and the loops rolled (docs/cuda-notes.md, thirty-first
// session).
template <int MS_B>
static __device__ __forceinline__ float merge_splits(const fa_params & p, int64_t qg, int64_t nq_all, int d) {
    float M = -INFINITY, num = 0.0f, den = 0.0f;
#pragma unroll 1
    for (int s0 = 0; s0 < p.n_split; s0 += MS_B) {
        float2 ml[MS_B];
        float pt[MS_B];
#pragma unroll
        for (int i = 0; i < MS_B; ++i) {
            const bool in = s0 + i < p.n_split;
            ml[i] = in ? __ldcg(&p.ml[(s0 + i) * nq_all + qg]) : make_float2(-INFINITY, 0.0f);
            pt[i] = in ? __ldcg(&p.part[((s0 + i) * nq_all + qg) * p.D + d]) : 0.0f;
        }
        float mb = M;
#pragma unroll
        for (int i = 0; i < MS_B; ++i)
            mb = fmaxf(mb, ml[i].x);
        if (mb == -INFINITY) continue; // nothing seen yet
        const float sc = M == -INFINITY ? 0.0f : expf(M - mb);
        num *= sc;
        den *= sc;
#pragma unroll
        for (int i = 0; i < MS_B; ++i) {
            const float w = ml[i].x == -INFINITY ? 0.0f : expf(ml[i].x - mb);
            num += w * pt[i];
            den += w * ml[i].y;
        }
        M = mb;
    }
    return den > 0.0f ? num / den : 0.0f;
}

// output o of query j (of kv head hk), dim d; with p.q8s also quantized: called by all 32 lanes of a warp at
// once for 32 consecutive d of one query (one q8 block: D % 32 == 0); with p.xw also in the wgmma GEMM's order.
// st false: the same instructions without the stores (p.warm)
static __device__ __forceinline__ void fattn_vec_store(const fa_params & p, int hk, int j, int d, float o,
                                                       bool st = true) {
    const int t = j / p.r, h = hk * p.r + j % p.r;
    if (st) *(float *)((char *)p.dst + d * p.ds.nb[0] + h * p.ds.nb[1] + t * p.ds.nb[2]) = o;
    if (p.q8s) {
        const int64_t blk = ((int64_t)t * p.n_head * p.D + h * p.D + d) / 32; // block of the [n_head * D, T] rows
        q8s_quantize_block(o, d % 32, p.q8s + 32 * blk, p.q8d + blk, p.q8sum + blk, st);
    }
    if (p.xw && st) mmw_put1(p.xw, p.xw_nt, p.n_tokens, t, (int64_t)h * p.D + d, o);
}

// What a decode kernel may write beside its f32 output (a contiguous dst, read as [D * n_head, T] rows): the output
// quantized for the q8s mat-vec after it (q8s, q8d, q8sum), or in the wgmma GEMM's order (xw, xw_nt columns).
struct fa_side {
    int8_t * q8s = nullptr;
    float * q8d = nullptr;
    int * q8sum = nullptr;
    half * xw = nullptr;
    int xw_nt = 0;
};

static inline void fa_set_side(fa_params & p, const fa_side & s) {
    p.q8s = s.q8s;
    p.q8d = s.q8d;
    p.q8sum = s.q8sum;
    p.xw = s.xw;
    p.xw_nt = s.xw_nt;
}

// whether token t's visible range is exact (its flag after the p.n_tokens ranges), so its decode reads no mask
static __device__ __forceinline__ bool fattn_token_exact(const fa_params & p, int t) {
    return p.exact && p.ranges && p.ranges[p.n_tokens + t].x;
}

// The keys [kv0, kv1) of KV split `split` (kv_per_split keys of n_kv), before the tokens' visible ranges narrow them
static __device__ __forceinline__ void fattn_split_keys(const fa_params & p, int split, int & kv0, int & kv1) {
    kv0 = split * p.kv_per_split;
    kv1 = min(p.n_kv, kv0 + p.kv_per_split);
}
// The key range [kv0, kv1) a decode block reads: its split of n_kv, within the union of the visible ranges of tokens
// t0 .. t1 when p.ranges is set.
static __device__ __forceinline__ void fattn_block_keys(const fa_params & p, int split, int t0, int t1, int & kv0,
                                                        int & kv1) {
    fattn_split_keys(p, split, kv0, kv1);
    if (!p.ranges) return;
    const int2 u = fattn_ranges_union(p.ranges, t0, t1);
    kv0 = max(kv0, u.x);
    kv1 = min(kv1, u.y);
}

// The end of a decode kernel of W warps: warp w left its queries' unnormalised output in s_acc[w][j][0..D) and
// (m, l) in s_ml[w][j] (m in natural-log units, -inf: saw nothing; j is query qbase + j of the kv head). Merges the
// warps; with one split stores the output, else writes this block's partial and the last block of the kv head to
// finish merges the splits (no combine launch; it resets the counter; MS: splits a batch of merge_splits). Every
// thread of the block calls it.
template <int W, int NQ, int D, int MS = 4>
static __device__ __forceinline__ void fattn_vec_finish(const fa_params & p, const float (&s_acc)[W][NQ][D],
                                                        const float (&s_ml)[W][NQ][2], int hk, int split, int n_q,
                                                        int qbase = 0) {
    __syncthreads();
    // merge the warps: thread e handles (query j, dim d) pairs; a warp's 32 e are 32 consecutive d of one query
    const int64_t nq_all = (int64_t)n_q * gridDim.y;
    for (int e = threadIdx.x; e < n_q * D; e += blockDim.x) {
        const int j = e / D, d = e % D;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; ++w)
            M = fmaxf(M, s_ml[w][j][0]);
        float num = 0.0f, den = 0.0f;
        if (M != -INFINITY) {
#pragma unroll
            for (int w = 0; w < W; ++w) {
                const float mw = s_ml[w][j][0];
                const float sc = mw == -INFINITY ? 0.0f : expf(mw - M);
                num += sc * s_acc[w][j][d];
                den += sc * s_ml[w][j][1];
            }
        }
        if (p.n_split == 1) {
            fattn_vec_store(p, hk, qbase + j, d, den > 0.0f ? num / den : 0.0f);
        } else {
            const int64_t qg = (int64_t)hk * n_q + j;
            p.part[((int64_t)split * nq_all + qg) * D + d] = num;
            if (d == 0) p.ml[split * nq_all + qg] = make_float2(M, den);
        }
    }
    if (p.n_split == 1) return;
    // the last block of this kv head to finish merges the splits (no combine launch); it resets the counter
    __shared__ int s_rank;
    __threadfence(); // this block's partials, visible before its count
    __syncthreads();
    if (threadIdx.x == 0) s_rank = atomicAdd(p.counters + hk, 1);
    __syncthreads();
    FA_TRACE(p, threadIdx.x == 0, FA_TR_COUNTED);
    // the last block merges; the first one, with p.warm, runs the merge's instructions without storing: the code of
    // a once-a-launch merge is otherwise fetched cold from DRAM by the last block (merge_splits), while the other
    // splits still run. Its loads of partials still being written are discarded.
    const bool last = s_rank == p.n_split - 1, dry = !last && s_rank == 0 && p.warm;
    if (!last && !dry) {
        FA_TRACE_PRINT(p, W, hk, split, false);
        return;
    }
    __threadfence();
    FA_TRACE(p, threadIdx.x == 0, FA_TR_FENCED);
    // one output a thread per step, the loop rolled (see merge_splits: cold code; e unsigned: the signed form took
    // some quantized-cache decode kernels from 168 to 196 registers); a warp's 32 threads are 32 consecutive d of
    // one query at every e (n_q D and blockDim are multiples of 32 where q8s is set)
#pragma unroll 1
    for (unsigned e = threadIdx.x; e < (unsigned)(n_q * D); e += blockDim.x) {
        int st = last;
        asm volatile("" : "+r"(st)); // opaque a step: one copy of the loop serves both (not unswitched)
        fattn_vec_store(p, hk, e / D, e % D, merge_splits<MS>(p, (int64_t)hk * n_q + e / D, nq_all, e % D), st != 0);
    }
    if (threadIdx.x == 0 && last) p.counters[hk] = 0;
    FA_TRACE_PRINT(p, W, hk, split, last);
}
