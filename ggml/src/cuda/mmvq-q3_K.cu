// mmvq-q3_K.cu - the q3_K instances of the quantized-weight kernels (mmvq-t.cuh); one file per type keeps the
// build parallel.
#include "mmvq-t.cuh"

GGML_CUDA_QT_INSTANCE(qt_q3_K, q3_K)
