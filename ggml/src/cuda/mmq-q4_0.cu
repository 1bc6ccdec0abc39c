// mmq-q4_0.cu - the q4_0 instance of the int8 tensor-core GEMM (mmq-t.cuh); one file per type keeps the build parallel.
#include "mmq-t.cuh"

GGML_CUDA_MMQ_INSTANCE(qt_q4_0, q4_0)
