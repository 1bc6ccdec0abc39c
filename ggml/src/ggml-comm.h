// ggml-comm.h - communicators (internal): the ranks that an ALL_REDUCE node sums over.
//
// A host communicator's ranks are threads of this process whose tensors are in host memory (the CPU backend, and the
// simulated devices of the tests): the CPU kernel (cpu/all_reduce.cpp) meets the other ranks at `barrier`, reads
// their inputs through `src` and adds them in rank order. An NCCL one (cuda/all-reduce.cu) holds one ncclComm_t per
// rank in `impl`, freed by `free_impl`.
#pragma once

#include "ggml-backend.h"

#include <condition_variable>
#include <mutex>
#include <vector>

struct ggml_comm {
    ggml_comm_kind kind = GGML_COMM_HOST;
    int n_ranks = 0;
    std::vector<int> devices;  // NCCL: the CUDA device of each rank

    // host: the inputs of the current all-reduce, by rank, and a reusable barrier of n_ranks threads
    std::vector<const float *> src;
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    uint64_t generation = 0;
    void barrier();

    void * impl = nullptr;
    void (*free_impl)(ggml_comm *) = nullptr;
};
