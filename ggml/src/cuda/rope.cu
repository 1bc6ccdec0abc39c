// rope.cu - see rope.cuh. One block per (head, token) row, one thread per rotated pair.
// Angles are computed in double: positions reach thousands of radians and the fast-math
// sin/cos would lose the phase.
#include "rope.cuh"

// T: the type of x, TO: the type of y. rows: nullptr, or y's token index i2 -> row rows[i2] (rope fused with
// the SET_ROWS that stores the result in the KV cache; ys then describes the cache as [ne0, ne1, n_cells]).
template <typename T, typename TO, bool NEOX>
static __global__ void k_rope(const char * x, const int32_t * pos, const float * ff, char * y, const int32_t * rows,
                              cuda_shape xs, cuda_shape ys, int n_dims, double theta_scale_log2, float freq_scale) {
    int64_t r = blockIdx.x;
    const int64_t i1 = r % xs.ne[1];
    r /= xs.ne[1];
    const int64_t i2 = r % xs.ne[2];
    const int64_t i3 = r / xs.ne[2];
    const char * xr = x + i1 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3];
    const int64_t o2 = rows ? rows[i2] : i2;
    if (o2 < 0 || o2 >= ys.ne[2]) return; // a cell out of range (SET_ROWS skips it too)
    char * yr = y + i1 * ys.nb[1] + o2 * ys.nb[2] + i3 * ys.nb[3];
    const double p = (double)pos[i2];
    const int64_t ne0 = xs.ne[0];
    for (int64_t i = threadIdx.x; i < ne0 / 2; i += blockDim.x) {
        int64_t j0, j1;
        if (i < n_dims / 2) {
            j0 = NEOX ? i : 2 * i;
            j1 = NEOX ? i + n_dims / 2 : 2 * i + 1;
            // theta = pos * freq_scale * base^(-2i/n_dims) / ff[i]
            double theta = p * freq_scale * exp2(theta_scale_log2 * (double)i);
            if (ff) theta /= (double)ff[i];
            double sn, cs;
            sincos(theta, &sn, &cs);
            const float x0 = to_f32<T>(*(const T *)(xr + j0 * xs.nb[0]));
            const float x1 = to_f32<T>(*(const T *)(xr + j1 * xs.nb[0]));
            *(TO *)(yr + j0 * ys.nb[0]) = from_f32<TO>((float)(x0 * cs - x1 * sn));
            *(TO *)(yr + j1 * ys.nb[0]) = from_f32<TO>((float)(x0 * sn + x1 * cs));
        } else { // pass-through dims [n_dims, ne0)
            j0 = 2 * i;
            j1 = 2 * i + 1;
            *(TO *)(yr + j0 * ys.nb[0]) = from_f32<TO>(to_f32<T>(*(const T *)(xr + j0 * xs.nb[0])));
            *(TO *)(yr + j1 * ys.nb[0]) = from_f32<TO>(to_f32<T>(*(const T *)(xr + j1 * xs.nb[0])));
        }
    }
}

// rope of x into y (ys: y's shape and strides), rows as in k_rope
static void rope_launch(ggml_cuda_context & ctx, const ggml_tensor * rope, char * y, ggml_type ty, const cuda_shape & ys,
                        const int32_t * rows) {
    const ggml_tensor * x = rope->src[0];
    const ggml_tensor * pos = rope->src[1];
    const ggml_tensor * ff = rope->src[2];
    GGML_ASSERT(pos->type == GGML_TYPE_I32 && ggml_is_contiguous(pos));
    const int n_dims = ggml_get_op_params_i32(rope, 0);
    const int mode = ggml_get_op_params_i32(rope, 1);
    const float base = ggml_get_op_params_f32(rope, 2);
    const float freq_scale = ggml_get_op_params_f32(rope, 3);
    const double theta_scale_log2 = -2.0 / n_dims * log2((double)base);
    const int64_t nrows = ggml_nrows(x);
    if (nrows == 0) return;
    const int bs = x->ne[0] / 2 >= 64 ? 64 : 32;
    const float * ffp = ff ? (const float *)ff->data : nullptr;
    const cuda_shape xs = cuda_shape_of(x);
    const char * xp = (const char *)x->data;
    const int32_t * pp = (const int32_t *)pos->data;
#define ROPE_LAUNCH(T, TO, NEOX)                                                                                       \
    k_rope<T, TO, NEOX><<<nrows, bs, 0, ctx.stream>>>(xp, pp, ffp, y, rows, xs, ys, n_dims, theta_scale_log2, freq_scale)
    const bool neox = mode == GGML_ROPE_TYPE_NEOX;
    const int variant = (x->type == GGML_TYPE_F16 ? 4 : 0) + (ty == GGML_TYPE_F16 ? 2 : 0) + (neox ? 1 : 0);
    switch (variant) {
        case 0: ROPE_LAUNCH(float, float, false); break;
        case 1: ROPE_LAUNCH(float, float, true); break;
        case 2: ROPE_LAUNCH(float, half, false); break;
        case 3: ROPE_LAUNCH(float, half, true); break;
        case 4: ROPE_LAUNCH(half, float, false); break;
        case 5: ROPE_LAUNCH(half, float, true); break;
        case 6: ROPE_LAUNCH(half, half, false); break;
        default: ROPE_LAUNCH(half, half, true); break;
    }
#undef ROPE_LAUNCH
    CUDA_CHECK_LAUNCH();
}

GGML_CUDA_OP(rope) {
    GGML_ASSERT(dst->src[0]->type == dst->type);
    rope_launch(ctx, dst, (char *)dst->data, dst->type, cuda_shape_of(dst), nullptr);
}

bool ggml_cuda_rope_set_rows_ok(const ggml_tensor * rope, const ggml_tensor * reshape, const ggml_tensor * set_rows) {
    const ggml_tensor * x = rope->src[0];
    const ggml_tensor * cache = set_rows->src[0];
    return rope->op == GGML_OP_ROPE && reshape->op == GGML_OP_RESHAPE && reshape->src[0] == rope &&
           set_rows->op == GGML_OP_SET_ROWS && set_rows->src[1] == reshape && ggml_is_contiguous(rope) &&
           x->type == rope->type && rope->ne[3] == 1 && reshape->ne[0] == rope->ne[0] * rope->ne[1] &&
           reshape->ne[1] == rope->ne[2] && ggml_nrows(reshape) == reshape->ne[1] && cache->ne[0] == reshape->ne[0] &&
           cache->nb[0] == ggml_type_size(cache->type) && cache->ne[2] == 1 && cache->ne[3] == 1 &&
           ggml_is_contiguous(set_rows->src[2]);
}

void ggml_cuda_op_rope_set_rows(ggml_cuda_context & ctx, const ggml_tensor * rope, ggml_tensor * set_rows) {
    const ggml_tensor * cache = set_rows->src[0]; // [ne0 * ne1 of the rope, n_cells]
    // the cache seen as [ne0, ne1, n_cells]: row i2 of the rope goes to cell rows[i2]
    cuda_shape ys;
    ys.ne[0] = rope->ne[0];
    ys.ne[1] = rope->ne[1];
    ys.ne[2] = cache->ne[1];
    ys.ne[3] = 1;
    ys.nb[0] = (int64_t)cache->nb[0];
    ys.nb[1] = (int64_t)cache->nb[0] * rope->ne[0];
    ys.nb[2] = (int64_t)cache->nb[1];
    ys.nb[3] = (int64_t)cache->nb[1] * cache->ne[1];
    rope_launch(ctx, rope, (char *)set_rows->data, set_rows->type, ys, (const int32_t *)set_rows->src[2]->data);
}
