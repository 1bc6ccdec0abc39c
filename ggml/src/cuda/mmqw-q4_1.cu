// mmqw-q4_1.cu - the q4_1 instance of the wgmma GEMM (mmq-w.cuh); built for sm_90a too (ggml/CMakeLists.txt).
#include "mmq-w.cuh"

GGML_CUDA_MMW_INSTANCE(qt_q4_1, q4_1)
