// tensor_test_util.h - element reads and random fills for the CPU kernel tests, written
// independently of the library's accessors (only the reference converters are shared).
#pragma once

#include "ggml-impl.h"

#include <cstring>
#include <random>
#include <vector>

// element (i0, i1, i2, i3) of an f32/f16/quantized tensor in host memory, honouring its strides
// (quantized: the element's block is dequantized with the type's reference to_float, whose
// bit-exactness test_quant_vectors checks against llama.cpp's data)
inline double rd(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char * row = (const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    switch (t->type) {
        case GGML_TYPE_F32: return *(const float *) (row + i0 * t->nb[0]);
        case GGML_TYPE_F16: return ggml_fp16_to_fp32(*(const ggml_fp16_t *) (row + i0 * t->nb[0]));
        case GGML_TYPE_Q8_0: {
            const block_q8_0 * b = (const block_q8_0 *) (row + (i0 / 32) * t->nb[0]);
            return (double) ggml_fp16_to_fp32(b->d) * b->qs[i0 % 32];
        }
        default: {
            const ggml_type_traits * tt = ggml_get_type_traits(t->type);
            GGML_ASSERT(tt->is_quantized && tt->to_float);
            float blk[QK_K];
            tt->to_float(row + (i0 / tt->blck_size) * t->nb[0], blk, tt->blck_size);
            return blk[i0 % tt->blck_size];
        }
    }
}

// Fill a contiguous tensor with N(0, sigma) values; returns the f32 values before conversion, in
// linear order. Quantized rows are quantized with the type's reference quantizer.
inline std::vector<float> fill(ggml_tensor * t, std::mt19937 & rng, float sigma = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> v(ggml_nelements(t));
    for (auto & x : v) x = nd(rng);
    switch (t->type) {
        case GGML_TYPE_F32: std::memcpy(t->data, v.data(), v.size() * 4); break;
        case GGML_TYPE_F16:
            for (size_t i = 0; i < v.size(); ++i) ((ggml_fp16_t *) t->data)[i] = ggml_fp32_to_fp16(v[i]);
            break;
        default: {
            const ggml_type_traits * tt = ggml_get_type_traits(t->type);
            GGML_ASSERT(tt->is_quantized && tt->from_float_ref);
            tt->from_float_ref(v.data(), t->data, (int64_t) v.size());
            break;
        }
    }
    return v;
}

inline void poison(ggml_tensor * t) { std::memset(t->data, 0xff, ggml_nbytes(t)); }  // NaNs
