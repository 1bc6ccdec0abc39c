// mmqw-q2_K.cu - the q2_K instance of the wgmma GEMM (mmq-w.cuh); built for sm_90a too (ggml/CMakeLists.txt).
#include "mmq-w.cuh"

GGML_CUDA_MMW_INSTANCE(qt_q2_K, q2_K)
