// mmqw-q4_0.cu - the q4_0 instance of the wgmma GEMM (mmq-w.cuh); built for sm_90a too (ggml/CMakeLists.txt).
#include "mmq-w.cuh"

GGML_CUDA_MMW_INSTANCE(qt_q4_0, q4_0)
