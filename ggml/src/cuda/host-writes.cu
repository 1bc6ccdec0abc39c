// host-writes.cu - see host-writes.cuh
#include "host-writes.cuh"

#include <cstring>

static_assert(sizeof(ggml_cuda_host_writes::batch) <= 4000, "host writes: the batch is a kernel parameter");

// one block: entry by entry (a barrier between them: a later write of the same bytes lands last), the threads over
// its bytes
static __global__ void k_host_writes(const ggml_cuda_host_writes::batch b) {
    for (uint32_t i = 0; i < b.n; ++i) {
        const ggml_cuda_host_writes::entry e = b.e[i];
        for (uint32_t j = threadIdx.x; j < e.size; j += blockDim.x)
            e.dst[j] = (char)b.data[e.off + j];
        __syncthreads();
    }
}

void ggml_cuda_host_writes_flush(ggml_cuda_context & ctx) {
    ggml_cuda_host_writes * w = ctx.hw;
    if (!w || w->pend.n == 0) return;
    CUDA_CHECK(cudaSetDevice(ctx.device));
    k_host_writes<<<1, 256, 0, ctx.stream>>>(w->pend);
    CUDA_CHECK_LAUNCH();
    w->pend.n = w->pend.used = 0;
}

void ggml_cuda_host_write(ggml_cuda_context & ctx, void * dst, const void * data, size_t size) {
    using W = ggml_cuda_host_writes;
    if (size == 0) return;
    if (!ctx.hw) ctx.hw = new W();
    W & w = *ctx.hw;
    if (size <= W::BYTES) {
        if (w.pend.n == W::MAX || w.pend.used + size > W::BYTES) ggml_cuda_host_writes_flush(ctx);
        W::entry & e = w.pend.e[w.pend.n++];
        e.dst = (char *)dst;
        e.off = w.pend.used;
        e.size = (uint32_t)size;
        std::memcpy(w.pend.data + e.off, data, size);
        w.pend.used += ((uint32_t)size + 15) & ~15u;
        ++w.n_kernel;
        return;
    }
    ggml_cuda_host_writes_flush(ctx); // the gathered writes go first
    CUDA_CHECK(cudaSetDevice(ctx.device));
    if (!w.ring && size <= W::RING / 2 && cudaMallocHost((void **)&w.ring, W::RING) != cudaSuccess) {
        (void)cudaGetLastError(); // no page-locked memory: every large write waited for
        w.ring = nullptr;
    }
    if (size > W::RING / 2 || !w.ring) { // a copy of its own from the caller's memory, waited for
        CUDA_CHECK(cudaMemcpyAsync(dst, data, size, cudaMemcpyHostToDevice, ctx.stream));
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        ++w.n_sync;
        return;
    }
    if (w.head + size > W::RING) { // the ring's earlier copies must be done before its start is written again
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        w.head = 0;
    }
    std::memcpy(w.ring + w.head, data, size);
    CUDA_CHECK(cudaMemcpyAsync(dst, w.ring + w.head, size, cudaMemcpyHostToDevice, ctx.stream));
    w.head += (size + 255) & ~size_t(255);
    ++w.n_ring;
}

void ggml_cuda_host_writes_free(ggml_cuda_context & ctx) {
    if (!ctx.hw) return;
    if (ctx.hw->ring) cudaFreeHost(ctx.hw->ring);
    delete ctx.hw;
    ctx.hw = nullptr;
}
