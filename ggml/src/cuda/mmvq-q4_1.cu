// mmvq-q4_1.cu - the q4_1 instances of the quantized-weight kernels (mmvq-t.cuh); one file per type keeps the
// build parallel.
#include "mmvq-t.cuh"

GGML_CUDA_QT_INSTANCE(qt_q4_1, q4_1)
