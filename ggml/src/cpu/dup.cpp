// cpu/dup.cpp - copies with type conversion: DUP, CONT (src0 -> dst) and CPY (src0 -> dst, a view
// of src1). Types f32, f16 and the quantized weight types in any combination. Elements are matched in linear (ne) order,
// so the two shapes may differ as long as the element counts agree (ggml_cpy semantics).
// Any strides on either side, except that a quantized destination needs dense rows
// (nb0 == block bytes) and ne0 a multiple of the block (a block is quantized as a whole).
#include "cpu/common.h"
#include "cpu/ops.h"
#include "ggml-impl.h"

#include <cstring>
#include <vector>

namespace {

bool copy_type_ok(ggml_type t) { return ggml_cpu_is_weight_type(t); }

// element i0 of a row starting at `row`
inline float read_elem(const ggml_tensor * t, const char * row, int64_t i0) {
    switch (t->type) {
        case GGML_TYPE_F32:
            return *(const float *)(row + i0 * t->nb[0]);
        case GGML_TYPE_F16:
            return ggml_compute_fp16_to_fp32(*(const ggml_fp16_t *)(row + i0 * t->nb[0]));
        default: { // dequantize the element's block
            const ggml_type_traits * tt = ggml_get_type_traits(t->type);
            float blk[QK_K];
            tt->to_float(row + (i0 / tt->blck_size) * t->nb[0], blk, tt->blck_size);
            return blk[i0 % tt->blck_size];
        }
    }
}

// a whole row of floats into a dst row
void write_row(const ggml_tensor * t, char * row, const float * x, int64_t n) {
    const bool dense = t->nb[0] == ggml_type_size(t->type);
    switch (t->type) {
        case GGML_TYPE_F32:
            if (dense) {
                std::memcpy(row, x, n * sizeof(float));
            } else {
                for (int64_t i = 0; i < n; ++i)
                    *(float *)(row + i * t->nb[0]) = x[i];
            }
            break;
        case GGML_TYPE_F16:
            if (dense) {
                ggml_fp32_to_fp16_row(x, (ggml_fp16_t *)row, n);
            } else {
                for (int64_t i = 0; i < n; ++i)
                    *(ggml_fp16_t *)(row + i * t->nb[0]) = ggml_compute_fp32_to_fp16(x[i]);
            }
            break;
        default:
            ggml_get_type_traits(t->type)->from_float_ref(x, row, n);
            break;
    }
}

void copy_tensor(const ggml_cpu_params & p, const ggml_tensor * src, ggml_tensor * dst) {
    GGML_ASSERT(copy_type_ok(src->type) && copy_type_ok(dst->type));
    GGML_ASSERT(ggml_nelements(src) == ggml_nelements(dst));
    if (ggml_is_quantized(dst->type)) { // quantized dst: dense rows of whole blocks
        GGML_ASSERT(dst->nb[0] == ggml_type_size(dst->type) && dst->ne[0] % ggml_blck_size(dst->type) == 0);
    }
    if (src->data == dst->data && src->type == dst->type && ggml_are_same_shape(src, dst) &&
        std::memcmp(src->nb, dst->nb, sizeof(src->nb)) == 0) {
        return; // in place, nothing to do
    }

    // fast path: same type, both contiguous -> one memcpy split across threads
    if (src->type == dst->type && ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
        const int64_t nrows = ggml_nrows(dst);
        const size_t rsize = ggml_row_size(dst->type, dst->ne[0]);
        int64_t r0, r1;
        p.split(nrows, r0, r1);
        if (r1 > r0)
            std::memcpy((char *)dst->data + r0 * rsize, (const char *)src->data + r0 * rsize, (r1 - r0) * rsize);
        return;
    }

    thread_local std::vector<float> tmp;
    const int64_t dne0 = dst->ne[0];
    tmp.resize(dne0);
    const int64_t n_drows = ggml_nrows(dst);
    int64_t r0, r1;
    p.split(n_drows, r0, r1);

    // fast path: same shape, dense rows on both sides -> row conversion
    const bool src_dense = src->nb[0] == ggml_type_size(src->type);
    if (ggml_are_same_shape(src, dst) && src_dense) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
            const char * srow = ggml_ptr(src, i1, i2, i3);
            char * drow = ggml_ptr(dst, i1, i2, i3);
            if (src->type == dst->type && dst->nb[0] == ggml_type_size(dst->type)) {
                std::memcpy(drow, srow, ggml_row_size(dst->type, dne0));
                continue;
            }
            ggml_get_type_traits(src->type)->to_float(srow, tmp.data(), dne0);
            write_row(dst, drow, tmp.data(), dne0);
        }
        return;
    }

    // general: per dst row, walk src in linear order from the matching element
    const int64_t sne0 = src->ne[0], sne1 = src->ne[1], sne2 = src->ne[2];
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t k0 = r * dne0; // linear index of the row's first element
        int64_t j0 = k0 % sne0, j1 = (k0 / sne0) % sne1, j2 = (k0 / (sne0 * sne1)) % sne2,
                j3 = k0 / (sne0 * sne1 * sne2);
        const char * srow = ggml_ptr(src, j1, j2, j3);
        for (int64_t i = 0; i < dne0; ++i) {
            tmp[i] = read_elem(src, srow, j0);
            if (++j0 == sne0) {
                j0 = 0;
                if (++j1 == sne1) {
                    j1 = 0;
                    if (++j2 == sne2) {
                        j2 = 0;
                        ++j3;
                    }
                }
                if (i + 1 < dne0) srow = ggml_ptr(src, j1, j2, j3);
            }
        }
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        write_row(dst, ggml_ptr(dst, i1, i2, i3), tmp.data(), dne0);
    }
}

} // namespace

// DUP / CONT: dst is a fresh tensor (contiguous), possibly of another type (DUP).
void ggml_cpu_op_dup(const ggml_cpu_params & p, ggml_tensor * dst) { copy_tensor(p, dst->src[0], dst); }

// CPY: src0 is written into src1; dst is a view of src1 (same data, shape and strides).
void ggml_cpu_op_cpy(const ggml_cpu_params & p, ggml_tensor * dst) { copy_tensor(p, dst->src[0], dst); }
