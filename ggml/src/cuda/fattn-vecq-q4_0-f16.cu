// fattn-vecq-q4_0-f16.cu - the decode attention kernels of fattn-vecq.cuh for a q4_0 K and a f16 V cache.
#include "fattn-vecq.cuh"

GGML_CUDA_FATTN_VECQ_INSTANCE(q4_0, f16)
