// mmq-q4_K.cu - the q4_K instance of the int8 tensor-core GEMM (mmq-t.cuh); one file per type keeps the build parallel.
#include "mmq-t.cuh"

GGML_CUDA_MMQ_INSTANCE(qt_q4_K, q4_K)
