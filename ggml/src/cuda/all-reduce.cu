// all-reduce.cu - NCCL communicators and the ALL_REDUCE op (all-reduce.cuh). Built without NCCL, no communicator can be
// made (ggml_backend_cuda_comm_new says so) and no ALL_REDUCE node reaches this backend.
#include "all-reduce.cuh"
#include "ggml-comm.h"
#include "ggml-cuda.h"

#include <cstdlib>
#include <string>

#ifdef GGML_CUDA_NCCL
#include <nccl.h>

struct nccl_comms {
    std::vector<ncclComm_t> comm;  // per rank
};

static void nccl_comms_free(ggml_comm * c) {
    auto * nc = (nccl_comms *)c->impl;
    for (ncclComm_t x : nc->comm) {
        if (x) ncclCommDestroy(x);
    }
    delete nc;
    c->impl = nullptr;
}
#endif

bool ggml_cuda_all_reduce_available() {
#ifdef GGML_CUDA_NCCL
    return true;
#else
    return false;
#endif
}

int ggml_cuda_comm_device(const ggml_comm * comm, int rank) {
    return comm->kind == GGML_COMM_NCCL && rank >= 0 && rank < comm->n_ranks ? comm->devices[rank] : -1;
}

ggml_comm * ggml_backend_cuda_comm_new(const int * devices, int n, std::string * err) {
    auto fail = [&](const std::string & m) -> ggml_comm * {
        if (err) *err = m;
        return nullptr;
    };
    if (n < 1) return fail("no devices");
    for (int i = 0; i < n; ++i) {
        if (devices[i] < 0 || devices[i] >= ggml_backend_cuda_get_device_count()) {
            return fail("CUDA device " + std::to_string(devices[i]) + " does not exist");
        }
    }
#ifdef GGML_CUDA_NCCL
    // NVLink SHARP (multicast) stays off: on a shared host it can put the GPUs out of service
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    // connections set up here, not at the first all-reduce (which may be inside a CUDA-graph capture)
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    auto * nc = new nccl_comms;
    nc->comm.assign(n, nullptr);
    const ncclResult_t r = ncclCommInitAll(nc->comm.data(), n, devices);
    if (r != ncclSuccess) {
        delete nc;
        return fail(std::string("ncclCommInitAll: ") + ncclGetErrorString(r));
    }
    auto * c = new ggml_comm;
    c->kind = GGML_COMM_NCCL;
    c->n_ranks = n;
    c->devices.assign(devices, devices + n);
    c->impl = nc;
    c->free_impl = nccl_comms_free;
    return c;
#else
    return fail("this build has no NCCL (nccl.h and libnccl were not found when it was configured)");
#endif
}

void ggml_cuda_op_all_reduce(ggml_cuda_context & ctx, ggml_tensor * t) {
    const ggml_tensor * a = t->src[0];
    ggml_comm * comm = ggml_all_reduce_comm(t);
    const int rank = ggml_get_op_params_i32(t, 0);
    GGML_ASSERT(comm->kind == GGML_COMM_NCCL && rank >= 0 && rank < comm->n_ranks);
    GGML_ASSERT(comm->devices[rank] == ctx.device);
    GGML_ASSERT(a->type == GGML_TYPE_F32 && ggml_is_contiguous(a) && ggml_is_contiguous(t));
#ifdef GGML_CUDA_NCCL
    auto * nc = (nccl_comms *)comm->impl;
    const ncclResult_t r =
        ncclAllReduce(a->data, t->data, (size_t)ggml_nelements(a), ncclFloat, ncclSum, nc->comm[rank], ctx.stream);
    if (r != ncclSuccess) GGML_ABORT("ALL_REDUCE '%s': ncclAllReduce: %s", t->name, ncclGetErrorString(r));
#else
    GGML_ABORT("ALL_REDUCE '%s': this build has no NCCL", t->name);
#endif
}
