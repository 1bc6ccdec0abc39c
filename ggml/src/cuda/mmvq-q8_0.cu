// mmvq-q8_0.cu - the q8_0 instances of the quantized-weight kernels (mmvq-t.cuh) over the repacked layout: the
// decode mat-vec / group / gate-up of repacked q8_0 weights (mulmat.cu; mmvq.cu's v6 kernels with GGML_CUDA_Q8_V6).
#include "mmvq-t.cuh"

GGML_CUDA_QT_INSTANCE(qt_q8_0, q8_0)
