// all-reduce.cuh - ALL_REDUCE over an NCCL communicator (ggml_backend_cuda_comm_new): f32 a (contiguous) -> the sum of
// every rank's a, by ncclAllReduce on the backend's stream (capturable into the step's CUDA graph).
#pragma once
#include "common.cuh"

GGML_CUDA_OP(all_reduce);
// whether this build can run it (NCCL found at configure time: GGML_CUDA_NCCL)
bool ggml_cuda_all_reduce_available();
// the CUDA device of rank `rank` of an NCCL communicator (-1: none)
int ggml_cuda_comm_device(const ggml_comm * comm, int rank);
