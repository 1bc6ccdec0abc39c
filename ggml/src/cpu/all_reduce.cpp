// cpu/all_reduce.cpp - ALL_REDUCE over a host communicator (ggml-comm.h): f32 a [any shape, contiguous] -> f32, the
// element-wise sum of every rank's a. Serial (thread 0 of each rank's pool): the rank publishes its input, waits for
// all ranks, adds all inputs in rank order (so every rank gets the same bits) and waits again before any rank may
// reuse its input's memory.
#include "common.h"
#include "ggml-comm.h"

void ggml_cpu_op_all_reduce(const ggml_cpu_params & p, ggml_tensor * dst) {
    if (p.ith != 0) return;
    const ggml_tensor * a = dst->src[0];
    ggml_comm * comm = ggml_all_reduce_comm(dst);
    const int rank = ggml_get_op_params_i32(dst, 0);
    GGML_ASSERT(comm->kind == GGML_COMM_HOST && rank >= 0 && rank < comm->n_ranks);
    GGML_ASSERT(a->type == GGML_TYPE_F32 && ggml_is_contiguous(a) && ggml_is_contiguous(dst));
    const int64_t n = ggml_nelements(a);

    comm->src[rank] = (const float *)a->data;
    comm->barrier();
    float * d = (float *)dst->data;
    for (int64_t i = 0; i < n; ++i) {
        float s = comm->src[0][i];
        for (int r = 1; r < comm->n_ranks; ++r) s += comm->src[r][i];
        d[i] = s;
    }
    comm->barrier();
}
