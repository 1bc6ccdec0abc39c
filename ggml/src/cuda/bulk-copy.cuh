// bulk-copy.cuh - Hopper's bulk asynchronous copies (the TMA unit, sm_90) with the shared-memory barriers (mbarrier)
// they complete on: one thread copies a contiguous range global -> shared (cp.async.bulk, 16-byte aligned, a multiple
// of 16 bytes), the barrier's phase completes once its expected bytes have landed, and every thread that needs the
// data waits for that phase (its parity). The small-N wgmma GEMM's activation ring (mmq-w.cuh) uses it in place of
// per-thread cp.async and a block barrier a chunk.
#pragma once
#include "common.cuh"

#include <cstdint>

static __device__ __forceinline__ uint32_t smem_addr(const void * p) { return (uint32_t)__cvta_generic_to_shared(p); }

// one thread: a barrier expecting `count` arrivals a phase; then mbar_init_fence and a block barrier before any use
static __device__ __forceinline__ void mbar_init(uint64_t * bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// the initialised barriers visible to the async proxy (the copy unit)
static __device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;" ::: "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint64_t * bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// the producer's arrival, with the bytes the copies it issues next will complete
static __device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t * bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// until the phase of this parity has completed
static __device__ __forceinline__ void mbar_wait(uint64_t * bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory");
    } while (!done);
}
// bytes (a multiple of 16) from src to dst (both 16-byte aligned), completing on bar
static __device__ __forceinline__ void bulk_copy_g2s(void * dst, const void * src, uint32_t bytes, uint64_t * bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}
