// mmvq-q6_K.cu - the q6_K instances of the quantized-weight kernels (mmvq-t.cuh); one file per type keeps the
// build parallel.
#include "mmvq-t.cuh"

GGML_CUDA_QT_INSTANCE(qt_q6_K, q6_K)
