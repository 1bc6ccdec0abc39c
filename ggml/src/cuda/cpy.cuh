// cpy.cuh - copies with type conversion among f32/f16/q8_0, any strides on either side
// (DUP, CONT, CPY), and the conversion helper the mat-mul paths use.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(cpy); // src0 -> dst (dst views src1)
GGML_CUDA_OP(dup); // src0 -> dst (also CONT)

// Copy src (any strides, f32/f16/q8_0) into dst memory laid out with `dst_shape` of `dst_type`
// (element order: src's flat order). Both row lengths must be multiples of 32 for q8_0.
void ggml_cuda_convert(ggml_cuda_context & ctx, const ggml_tensor * src, void * dst, ggml_type dst_type,
                       const cuda_shape & dst_shape);
// Contiguous shape of the given type and ne.
cuda_shape ggml_cuda_contig_shape(ggml_type type, const int64_t * ne);
bool ggml_cuda_cpy_supported(ggml_type src, ggml_type dst, const ggml_tensor * s, const ggml_tensor * d);
