// fattn-vecq-f16-q4_0.cu - the decode attention kernels of fattn-vecq.cuh for a f16 K and a q4_0 V cache.
#include "fattn-vecq.cuh"

GGML_CUDA_FATTN_VECQ_INSTANCE(f16, q4_0)
