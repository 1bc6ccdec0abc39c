// mmvq-q2_K.cu - the q2_K instances of the quantized-weight kernels (mmvq-t.cuh); one file per type keeps the
// build parallel.
#include "mmvq-t.cuh"

GGML_CUDA_QT_INSTANCE(qt_q2_K, q2_K)
