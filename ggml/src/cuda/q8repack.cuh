// q8repack.cuh - q8_0 weights in a GPU-friendly layout. A q8_0 tensor set in full into a weights
// buffer is stored as [qs: nrows * K int8, row r at r*K][d: nrows * K/32 half] (same 34 B per 32
// values, so the allocation size is unchanged); tensor->extra marks it. Every row of qs is 16-byte
// aligned (K % 32 == 0), so kernels load 16 quants per instruction. get_tensor returns ggml's bytes.
#pragma once
#include "common.cuh"

// true if t itself holds the repacked layout (views of it do not)
bool ggml_cuda_q8_repacked(const ggml_tensor * t);
// t or the tensor it views is repacked
bool ggml_cuda_q8_touches_repacked(const ggml_tensor * t);
// whether a set of [offset, offset+size) into t should store t repacked
bool ggml_cuda_q8_should_repack(const ggml_backend_buffer * buf, const ggml_tensor * t, size_t offset, size_t size);

// Buffer hooks (synchronous, legacy stream). set: data is ggml's bytes for [offset, offset+size).
void ggml_cuda_q8_set(ggml_tensor * t, const void * data, size_t offset, size_t size);
void ggml_cuda_q8_get(const ggml_tensor * t, void * data, size_t offset, size_t size);

// pointers into a repacked tensor
inline const int8_t * q8r_qs(const ggml_tensor * t) { return (const int8_t *)t->data; }
inline const half * q8r_d(const ggml_tensor * t) {
    return (const half *)((const char *)t->data + (size_t)ggml_nelements(t));
}

// repacked q8_0 -> dense f16 [K, nrows] on ctx.stream (the prefill path)
void ggml_cuda_q8r_to_f16(ggml_cuda_context & ctx, const ggml_tensor * t, half * dst);
