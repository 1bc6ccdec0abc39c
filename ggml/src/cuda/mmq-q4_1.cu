// mmq-q4_1.cu - the q4_1 instance of the int8 tensor-core GEMM (mmq-t.cuh); one file per type keeps the build parallel.
#include "mmq-t.cuh"

GGML_CUDA_MMQ_INSTANCE(qt_q4_1, q4_1)
