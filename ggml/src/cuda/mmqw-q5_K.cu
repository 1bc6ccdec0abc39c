// mmqw-q5_K.cu - the q5_K instance of the wgmma GEMM (mmq-w.cuh); built for sm_90a too (ggml/CMakeLists.txt).
#include "mmq-w.cuh"

GGML_CUDA_MMW_INSTANCE(qt_q5_K, q5_K)
