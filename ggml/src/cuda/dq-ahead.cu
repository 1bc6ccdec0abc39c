// dq-ahead.cu - see dq-ahead.cuh.
#include "dq-ahead.cuh"
#include "mulmat.cuh"

#include <algorithm>

static size_t f16_bytes(const ggml_tensor * mm) { return sizeof(half) * (size_t)ggml_nelements(mm->src[0]); }

// ctx.stream is the side stream (PDL off) while it lives: the dequantization kernels launch on ctx.stream
struct side_stream {
    ggml_cuda_context & ctx;
    cudaStream_t main;
    bool pdl;
    side_stream(ggml_cuda_context & c) : ctx(c), main(c.stream), pdl(c.use_pdl) {
        ctx.stream = ctx.dq->stream;
        ctx.use_pdl = false;
    }
    ~side_stream() {
        ctx.stream = main;
        ctx.use_pdl = pdl;
    }
};

// the k-th mat-mul of the list into slot k % 2, once that slot's last GEMM is done
static void issue(ggml_cuda_context & ctx, size_t k) {
    ggml_cuda_dq_ahead & d = *ctx.dq;
    if (k >= d.list.size()) return;
    const int s = (int)(k % 2);
    CUDA_CHECK(cudaStreamWaitEvent(d.stream, d.free_[s], 0));
    {
        side_stream on(ctx);
        ggml_cuda_weight_to_f16(ctx, d.list[k]->src[0], d.buf[s]);
    }
    CUDA_CHECK(cudaEventRecord(d.ready[s], d.stream));
}

// both slots at least `bytes`; false (and inline from now on) when the memory is not there
static bool reserve(ggml_cuda_context & ctx, size_t bytes) {
    ggml_cuda_dq_ahead & d = *ctx.dq;
    if (bytes <= d.cap) return true;
    CUDA_CHECK(cudaStreamSynchronize(d.stream)); // the old slots may still be written or read
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    for (half *& b : d.buf) {
        if (b) CUDA_CHECK(cudaFree(b));
        b = nullptr;
    }
    d.cap = 0;
    for (half *& b : d.buf) {
        if (cudaMalloc((void **)&b, bytes) != cudaSuccess) {
            cudaGetLastError();
            GGML_LOG_WARN("CUDA%d: no memory for the dequantization slots (2 x %.1f MiB): prompts dequantize "
                          "inline\n",
                          ctx.device, bytes / 1048576.0);
            for (half *& c : d.buf) {
                if (c) cudaFree(c);
                c = nullptr;
            }
            d.broken = true;
            return false;
        }
    }
    d.cap = bytes;
    return true;
}

void ggml_cuda_dq_ahead_begin(ggml_cuda_context & ctx, const ggml_cgraph * gf, const std::vector<uint8_t> & fused) {
    if (!ctx.use_dq_ahead) return;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &cs));
    if (cs != cudaStreamCaptureStatusNone) return;
    if (!ctx.dq) {
        ctx.dq = new ggml_cuda_dq_ahead;
        ggml_cuda_dq_ahead & d = *ctx.dq;
        CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
        for (cudaEvent_t * e : {&d.start, &d.ready[0], &d.ready[1], &d.free_[0], &d.free_[1], &d.done})
            CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    }
    ggml_cuda_dq_ahead & d = *ctx.dq;
    d.list.clear();
    d.next = 0;
    if (d.broken) return;
    size_t bytes = 0;
    // the mat-muls that will take the dequantize + cuBLAS path (nodes inside a fused span never do: those are mat-vecs)
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * t = gf->nodes[i];
        if (fused[i] == 0 && ggml_nelements(t) != 0 && ggml_cuda_mul_mat_dequant_f16(ctx, t) &&
            f16_bytes(t) <= GGML_CUDA_DQ_AHEAD_MAX_BYTES) {
            d.list.push_back(t);
            bytes = std::max(bytes, f16_bytes(t));
        }
    }
    if (d.list.empty() || !reserve(ctx, bytes)) {
        d.list.clear();
        return;
    }
    // the weights are constant; what the side stream must follow is the main stream's past (uploads, repacks)
    CUDA_CHECK(cudaEventRecord(d.start, ctx.stream));
    CUDA_CHECK(cudaStreamWaitEvent(d.stream, d.start, 0));
    issue(ctx, 0);
    issue(ctx, 1);
}

const half * ggml_cuda_dq_ahead_take(ggml_cuda_context & ctx, const ggml_tensor * mm) {
    ggml_cuda_dq_ahead * d = ctx.dq;
    if (!d || d->next >= d->list.size() || d->list[d->next] != mm) return nullptr;
    const int s = (int)(d->next % 2);
    CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, d->ready[s], 0));
    ++ctx.n_dq_ahead;
    return d->buf[s];
}

void ggml_cuda_dq_ahead_release(ggml_cuda_context & ctx) {
    ggml_cuda_dq_ahead & d = *ctx.dq;
    CUDA_CHECK(cudaEventRecord(d.free_[d.next % 2], ctx.stream));
    issue(ctx, d.next + 2);
    ++d.next;
}

void ggml_cuda_dq_ahead_end(ggml_cuda_context & ctx) {
    ggml_cuda_dq_ahead * d = ctx.dq;
    if (!d || d->list.empty()) return;
    CUDA_CHECK(cudaEventRecord(d->done, d->stream));
    CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, d->done, 0));
    d->list.clear();
    d->next = 0;
}

void ggml_cuda_dq_ahead_free(ggml_cuda_context & ctx) {
    ggml_cuda_dq_ahead * d = ctx.dq;
    if (!d) return;
    cudaStreamSynchronize(d->stream);
    for (half * b : d->buf)
        if (b) cudaFree(b);
    for (cudaEvent_t e : {d->start, d->ready[0], d->ready[1], d->free_[0], d->free_[1], d->done})
        if (e) cudaEventDestroy(e);
    cudaStreamDestroy(d->stream);
    delete d;
    ctx.dq = nullptr;
}
