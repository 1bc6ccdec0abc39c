// fattn-trace.cuh - a per-block timeline of the tensor-core decode attention (k_fattn_mma_dec), compiled in only with
// -DGGML_CUDA_FATTN_TRACE=ON (cmake) and printed only with the environment variable GGML_CUDA_FATTN_TRACE=1 at decode
// steps of one token. Each block stamps %globaltimer (ns) into shared memory at its entry, after griddepcontrol.wait,
// at each warp's loop end, after its partial's fence and count, and (the last block of a kv head) after the second
// fence and after the split merge, then prints one line:
//   FATTN hk split smid last entry wait loop_end_min loop_end_max counted [fenced merged]
// scripts/fattn-trace.py groups the lines into launches and prints the medians of each phase. This is how the
// thirty-first session found that the split merge waits on its own cold code (docs/cuda-notes.md).
#pragma once

#ifdef GGML_CUDA_FATTN_TRACE
enum { FA_TR_ENTRY = 0, FA_TR_WAIT = 1, FA_TR_LOOP = 2, FA_TR_COUNTED = 18, FA_TR_FENCED = 19, FA_TR_N = 20 };
static __shared__ unsigned long long fa_tr[FA_TR_N];
static __device__ __forceinline__ unsigned long long fa_tr_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
// thread 0 (or lane 0 of a warp, slot FA_TR_LOOP + warp) stamps slot i
#define FA_TRACE(p, cond, i)                                                                                           \
    do {                                                                                                               \
        if ((p).trace && (cond)) fa_tr[i] = fa_tr_now();                                                               \
    } while (0)
// one line per block at its end (thread 0); W warps stamped their loop ends
template <int W> static __device__ __forceinline__ void fa_trace_print(int hk, int split, bool last) {
    static_assert(FA_TR_LOOP + W <= FA_TR_COUNTED, "fa_trace: too many warps");
    unsigned long long lo = ~0ull, hi = 0;
    for (int w = 0; w < W; ++w) {
        lo = min(lo, fa_tr[FA_TR_LOOP + w]);
        hi = max(hi, fa_tr[FA_TR_LOOP + w]);
    }
    int sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    if (last)
        printf("FATTN %d %d %d 1 %llu %llu %llu %llu %llu %llu %llu\n", hk, split, sm, fa_tr[FA_TR_ENTRY],
               fa_tr[FA_TR_WAIT], lo, hi, fa_tr[FA_TR_COUNTED], fa_tr[FA_TR_FENCED], fa_tr_now());
    else
        printf("FATTN %d %d %d 0 %llu %llu %llu %llu %llu\n", hk, split, sm, fa_tr[FA_TR_ENTRY], fa_tr[FA_TR_WAIT], lo,
               hi, fa_tr[FA_TR_COUNTED]);
}
#define FA_TRACE_PRINT(p, W, hk, split, last)                                                                          \
    do {                                                                                                               \
        if ((p).trace && threadIdx.x == 0) fa_trace_print<W>(hk, split, last);                                         \
    } while (0)
#else
#define FA_TRACE(p, cond, i) ((void)0)
#define FA_TRACE_PRINT(p, W, hk, split, last) ((void)0)
#endif
