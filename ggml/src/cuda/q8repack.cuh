// q8repack.cuh - quantized weights in a GPU-friendly layout ("repacked"). ggml's block of each type is cut
// into segments (qlayout), and segment j of every block is stored in its own region: a tensor of nblk blocks
// holds [seg 0 of all blocks][seg 1 of all blocks]..., region j starting at nblk * (sizes of the segments
// before it), so the allocation size is unchanged. The quants come first: their rows are 16-byte aligned, so
// the kernels load 16 bytes per instruction; scales follow in their own regions.
//   q8_0: [qs: nrows * K int8, row r at r*K][d: nrows * K/32 half]   (the layout the q8_0 kernels read)
//   q4_0: [qs 16 B][d 2 B]    q4_1: [qs 16][d,m 4]    q5_0: [qs 16][qh 4][d 2]    q5_1: [qs 16][d,m,qh 8]
//   q2_K: [scales,qs 80][d,dmin 4]    q3_K: [hmask,qs 96][scales 12][d 2]    q6_K: [ql,qh,scales 208][d 2]
//   q4_K, q5_K: ggml's own layout (144 / 176 bytes, 16-byte aligned fields): nothing to repack.
// A tensor set in full into a weights buffer is stored repacked (tensor->extra marks it); get_tensor returns
// ggml's bytes. Kernels address a block's segment j through cuda_qptrs (either layout).
#pragma once
#include "common.cuh"

// ggml's block cut into segments: segment j is bytes [off[j], off[j] + size[j]) of a block, in region order
struct ggml_cuda_qlayout {
    int n;
    int off[4];
    int size[4];
};
// the layout of a quantized type the CUDA backend computes with (nullptr: none); n == 1: ggml's own
const ggml_cuda_qlayout * ggml_cuda_qlayout_of(ggml_type type);

// segment j of block b (flat over the tensor) at r[j] + b * st[j]: repacked (st = segment size) or ggml's
// layout (r[j] = data + off[j], st = block size)
struct cuda_qptrs {
    const char * r[4];
    int64_t st[4];
};
// t (contiguous; a view: its own data) in whichever layout it is stored
cuda_qptrs ggml_cuda_qptrs_of(const ggml_tensor * t);
// the region pointers of a tensor of nblk blocks of `type` repacked at data
cuda_qptrs ggml_cuda_qptrs_repacked(ggml_type type, const void * data, int64_t nblk);

// true if t itself holds the repacked layout (views of it do not)
bool ggml_cuda_repacked(const ggml_tensor * t);
inline bool ggml_cuda_q8_repacked(const ggml_tensor * t) { return ggml_cuda_repacked(t) && t->type == GGML_TYPE_Q8_0; }
// t or the tensor it views is repacked
bool ggml_cuda_touches_repacked(const ggml_tensor * t);
// whether a set of [offset, offset+size) into t should store t repacked
bool ggml_cuda_should_repack(const ggml_backend_buffer * buf, const ggml_tensor * t, size_t offset, size_t size);
// t's data can be read by the 16-byte-load mat-vec kernels as it is: repacked, or a type whose ggml layout is
// the kernel layout (q4_K, q5_K), contiguous and 16-byte aligned
bool ggml_cuda_kernel_layout(const ggml_tensor * t);

// Buffer hooks (synchronous, legacy stream). set: data is ggml's bytes for [offset, offset+size).
void ggml_cuda_repack_set(ggml_tensor * t, const void * data, size_t offset, size_t size);
void ggml_cuda_repack_get(const ggml_tensor * t, void * data, size_t offset, size_t size);
// t (ggml's layout, contiguous) repacked into dst (ggml_nbytes(t) bytes of device memory) on ctx.stream
void ggml_cuda_repack_into(ggml_cuda_context & ctx, const ggml_tensor * t, void * dst);

// pointers into a repacked q8_0 tensor
inline const int8_t * q8r_qs(const ggml_tensor * t) { return (const int8_t *)t->data; }
inline const half * q8r_d(const ggml_tensor * t) {
    return (const half *)((const char *)t->data + (size_t)ggml_nelements(t));
}

// repacked q8_0 -> dense f16 [K, nrows] on ctx.stream (the prefill path)
void ggml_cuda_q8r_to_f16(ggml_cuda_context & ctx, const ggml_tensor * t, half * dst);
