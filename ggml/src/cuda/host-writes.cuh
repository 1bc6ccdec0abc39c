// host-writes.cuh - the backend's set_tensor_async: host data written into device tensors in stream order.
//
// The scheduler copies a split's host inputs this way (ggml-sched.cpp: copy_input): a decode step's token ids,
// positions, cells and cache cells. Each was a synchronous cudaMemcpy (~6 us of host time, with the device idle
// between steps). Here the data is read before the call returns, and:
//   - small writes (up to BYTES in all, MAX of them) are gathered and written by one kernel launched before the
//     backend's next work (ggml_cuda_host_writes_flush): their bytes travel in its parameters, so nothing is left
//     to read later and no copy engine round trip is waited for;
//   - larger ones are copied into a page-locked ring and from there by cudaMemcpyAsync; the ring is reused from its
//     start after a wait for the stream (the copies out of it done); one above half the ring is copied and waited for.
#pragma once
#include "common.cuh"

struct ggml_cuda_host_writes {
    static constexpr int MAX = 16;
    static constexpr uint32_t BYTES = 3584; // the batch below is a kernel parameter: under 4 KiB in all
    struct entry {
        char * dst;
        uint32_t off, size; // in data
    };
    struct batch {
        entry e[MAX];
        uint32_t n, used;
        alignas(16) unsigned char data[BYTES];
    };
    batch pend = {};
    char * ring = nullptr; // page-locked, RING bytes
    size_t head = 0;
    static constexpr size_t RING = size_t(8) << 20;
    int n_kernel = 0, n_ring = 0, n_sync = 0; // writes by each path (tests)
};

// size bytes of data into device memory dst, ordered after the work queued on ctx.stream and before the next
void ggml_cuda_host_write(ggml_cuda_context & ctx, void * dst, const void * data, size_t size);
// launch the gathered small writes (before any other work on ctx.stream, or a wait for it)
void ggml_cuda_host_writes_flush(ggml_cuda_context & ctx);
void ggml_cuda_host_writes_free(ggml_cuda_context & ctx);
