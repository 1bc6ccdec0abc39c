// fattn-vecq-q4_0-q8_0.cu - the decode attention kernels of fattn-vecq.cuh for a q4_0 K and a q8_0 V cache.
#include "fattn-vecq.cuh"

GGML_CUDA_FATTN_VECQ_INSTANCE(q4_0, q8_0)
