// mmq-q5_1.cu - the q5_1 instance of the int8 tensor-core GEMM (mmq-t.cuh); one file per type keeps the build parallel.
#include "mmq-t.cuh"

GGML_CUDA_MMQ_INSTANCE(qt_q5_1, q5_1)
