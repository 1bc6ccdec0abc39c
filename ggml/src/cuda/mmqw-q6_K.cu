// mmqw-q6_K.cu - the q6_K instance of the wgmma GEMM (mmq-w.cuh); built for sm_90a too (ggml/CMakeLists.txt).
#include "mmq-w.cuh"

GGML_CUDA_MMW_INSTANCE(qt_q6_K, q6_K)
