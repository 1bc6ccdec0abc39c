// mmvq-q4_0.cu - the q4_0 instances of the quantized-weight kernels (mmvq-t.cuh); one file per type keeps the
// build parallel.
#include "mmvq-t.cuh"

GGML_CUDA_QT_INSTANCE(qt_q4_0, q4_0)
