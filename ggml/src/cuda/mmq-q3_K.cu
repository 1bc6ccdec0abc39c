// mmq-q3_K.cu - the q3_K instance of the int8 tensor-core GEMM (mmq-t.cuh); one file per type keeps the build parallel.
#include "mmq-t.cuh"

GGML_CUDA_MMQ_INSTANCE(qt_q3_K, q3_K)
