// cp-async.cuh - asynchronous global -> shared copies (cp.async, sm_80+): the staged K/V tiles of the tensor-core
// attention (fattn-mma.cu). A thread's copies form groups in issue order (cp_async_commit); cp_async_wait<n>()
// returns once at most n of its groups are still in flight (its own copies only: a __syncthreads() after it makes
// every thread's copies visible to the block).
#pragma once
#include "common.cuh"

// 16 bytes, through L2 only (.cg); dst and src 16-byte aligned
static __device__ __forceinline__ void cp_async16(void * dst, const void * src) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
}
// 16 bytes of shared memory from the first n (0..16) bytes at src, the rest zero
static __device__ __forceinline__ void cp_async16n(void * dst, const void * src, int n) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n));
}
// N bytes (4, 8 or 16) through L1 (.ca: the only form for 4 and 8 bytes); dst and src N-byte aligned
template <int N> static __device__ __forceinline__ void cp_async_n(void * dst, const void * src) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(src), "n"(N));
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N> static __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
