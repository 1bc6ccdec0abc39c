// rope.cu - see rope.cuh. A block takes ROPE_HB consecutive rows (heads) of one token, a thread one rotated
// pair of each: the angle is computed once per (token, pair) and the HB rows' loads are issued together. (The
// first version took one row per block: rope of a 512-token prompt ran 65536 two-warp blocks in 21 waves, each a
// chain of dependent loads, 81 us per layer on an H200 by ncu, not bound by bandwidth or arithmetic.)
// Angles: rope_cs (rope.cuh).
#include "cpy.cuh"
#include "rope.cuh"

#define ROPE_HB 8

// One rope: x (shape/strides xs) into y (ys). rows: nullptr, or y's token index i2 -> row rows[i2] (rope fused
// with the SET_ROWS that stores the result in the KV cache; ys then describes the cache as [ne0, ne1, n_cells]).
struct rope_args {
    const char * x;
    char * y;
    const int32_t * rows;
    cuda_shape xs, ys;
    ggml_cuda_rope_params rp;
    int64_t ngroups; // groups of ROPE_HB rows of one token (one block each)
};

// rows [i1g * HB, i1g * HB + HB) of token (i2, i3), g the group index (T: the type of x, TO: the type of y), by the
// block's threads
template <typename T, typename TO, bool NEOX> static __device__ void rope_rows(const rope_args & a, int64_t g) {
    const cuda_shape & xs = a.xs;
    const cuda_shape & ys = a.ys;
    int64_t i1g, i2, i3;
    unravel_row(g, cuda_ceil_div_d(xs.ne[1], ROPE_HB), xs.ne[2], i1g, i2, i3);
    const int64_t o2 = a.rows ? a.rows[i2] : i2;
    if (o2 < 0 || o2 >= ys.ne[2]) return; // a cell out of range (SET_ROWS skips it too)
    const int64_t h0 = i1g * ROPE_HB;
    const int nh = (int)min((int64_t)ROPE_HB, xs.ne[1] - h0);
    const char * xr = a.x + h0 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3];
    char * yr = a.y + h0 * ys.nb[1] + o2 * ys.nb[2] + i3 * ys.nb[3];
    const double p = (double)a.rp.pos[i2];
    const int64_t ne0 = xs.ne[0];
    const int n_dims = a.rp.n_dims;
    for (int64_t i = threadIdx.x; i < ne0 / 2; i += blockDim.x) {
        const bool rot = i < n_dims / 2;
        const int64_t j0 = rot && NEOX ? i : 2 * i, j1 = rot && NEOX ? i + n_dims / 2 : 2 * i + 1;
        float cs = 1.0f, sn = 0.0f; // pass-through dims [n_dims, ne0) keep their values
        if (rot) rope_cs(a.rp, p, i, cs, sn);
        float x0[ROPE_HB], x1[ROPE_HB];
#pragma unroll
        for (int h = 0; h < ROPE_HB; ++h) {
            if (h < nh) {
                x0[h] = to_f32<T>(*(const T *)(xr + h * xs.nb[1] + j0 * xs.nb[0]));
                x1[h] = to_f32<T>(*(const T *)(xr + h * xs.nb[1] + j1 * xs.nb[0]));
            }
        }
#pragma unroll
        for (int h = 0; h < ROPE_HB; ++h) {
            if (h < nh) {
                *(TO *)(yr + h * ys.nb[1] + j0 * ys.nb[0]) = from_f32<TO>(rot ? x0[h] * cs - x1[h] * sn : x0[h]);
                *(TO *)(yr + h * ys.nb[1] + j1 * ys.nb[0]) = from_f32<TO>(rot ? x0[h] * sn + x1[h] * cs : x1[h]);
            }
        }
    }
}

template <typename T, typename TO, bool NEOX> static __global__ void k_rope(rope_args a) {
    pdl_start();
    rope_rows<T, TO, NEOX>(a, blockIdx.x);
}

ggml_cuda_rope_params ggml_cuda_rope_params_of(const ggml_tensor * rope) {
    const ggml_tensor * pos = rope->src[1];
    const ggml_tensor * ff = rope->src[2];
    GGML_ASSERT(pos->type == GGML_TYPE_I32 && ggml_is_contiguous(pos));
    ggml_cuda_rope_params p;
    p.pos = (const int32_t *)pos->data;
    p.ff = ff ? (const float *)ff->data : nullptr;
    p.n_dims = ggml_get_op_params_i32(rope, 0);
    p.theta_scale_log2 = -2.0 / p.n_dims * log2((double)ggml_get_op_params_f32(rope, 2));
    p.freq_scale = ggml_get_op_params_f32(rope, 3);
    return p;
}

static rope_args rope_args_of(const ggml_tensor * rope, char * y, const cuda_shape & ys, const int32_t * rows) {
    const ggml_tensor * x = rope->src[0];
    rope_args a;
    a.x = (const char *)x->data;
    a.y = y;
    a.rows = rows;
    a.xs = cuda_shape_of(x);
    a.ys = ys;
    a.rp = ggml_cuda_rope_params_of(rope);
    a.ngroups = cuda_ceil_div(x->ne[1], ROPE_HB) * x->ne[2] * x->ne[3];
    return a;
}

// rope of x into y (ys: y's shape and strides), rows as in rope_args
static void rope_launch(ggml_cuda_context & ctx, const ggml_tensor * rope, char * y, ggml_type ty, const cuda_shape & ys,
                        const int32_t * rows) {
    const ggml_tensor * x = rope->src[0];
    const rope_args a = rope_args_of(rope, y, ys, rows);
    if (a.ngroups == 0) return;
    const int bs = x->ne[0] / 2 >= 64 ? 64 : 32;
#define ROPE_LAUNCH(T, TO, NEOX) ggml_cuda_launch(ctx, k_rope<T, TO, NEOX>, dim3((unsigned)a.ngroups), dim3(bs), 0, a)
    const bool neox = ggml_get_op_params_i32(rope, 1) == GGML_ROPE_TYPE_NEOX;
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
}

GGML_CUDA_OP(rope) {
    GGML_ASSERT(dst->src[0]->type == dst->type);
    rope_launch(ctx, dst, (char *)dst->data, dst->type, cuda_shape_of(dst), nullptr);
}

bool ggml_cuda_rope_set_rows_ok(const ggml_tensor * rope, const ggml_tensor * reshape, const ggml_tensor * set_rows,
                                bool blocks) {
    const ggml_tensor * x = rope->src[0];
    const ggml_tensor * cache = set_rows->src[0];
    const bool blk = blocks && ggml_cuda_kvq_rows_ok(cache); // stored by the q/k/v group (qt_kv_block_store)
    return rope->op == GGML_OP_ROPE && reshape->op == GGML_OP_RESHAPE && reshape->src[0] == rope &&
           set_rows->op == GGML_OP_SET_ROWS && set_rows->src[1] == reshape && ggml_is_contiguous(rope) &&
           x->type == rope->type && rope->ne[3] == 1 && reshape->ne[0] == rope->ne[0] * rope->ne[1] &&
           reshape->ne[1] == rope->ne[2] && ggml_nrows(reshape) == reshape->ne[1] && cache->ne[0] == reshape->ne[0] &&
           (cache->type == GGML_TYPE_F32 || cache->type == GGML_TYPE_F16 || blk) && // else SET_ROWS quantizes
           cache->nb[0] == ggml_type_size(cache->type) && cache->ne[2] == 1 && cache->ne[3] == 1 &&
           ggml_is_contiguous(set_rows->src[2]);
}

// the cache of a fused rope + SET_ROWS seen as [ne0, ne1, n_cells]: row i2 of the rope goes to cell rows[i2]
static cuda_shape cache_rows_shape(const ggml_tensor * rope, const ggml_tensor * set_rows) {
    const ggml_tensor * cache = set_rows->src[0]; // [ne0 * ne1 of the rope, n_cells]
    cuda_shape ys;
    ys.ne[0] = rope->ne[0];
    ys.ne[1] = rope->ne[1];
    ys.ne[2] = cache->ne[1];
    ys.ne[3] = 1;
    ys.nb[0] = (int64_t)cache->nb[0];
    ys.nb[1] = (int64_t)cache->nb[0] * rope->ne[0];
    ys.nb[2] = (int64_t)cache->nb[1];
    ys.nb[3] = (int64_t)cache->nb[1] * cache->ne[1];
    return ys;
}

void ggml_cuda_op_rope_set_rows(ggml_cuda_context & ctx, const ggml_tensor * rope, ggml_tensor * set_rows) {
    rope_launch(ctx, rope, (char *)set_rows->data, set_rows->type, cache_rows_shape(rope, set_rows),
                (const int32_t *)set_rows->src[2]->data);
}

// ---- the decode step's q rope, k rope into the K cache, and v into the V cache: one launch --------------
struct store_args { // SET_ROWS of f32 src (ss) into dst (ds) at rows idx; nbx blocks of ROPE_VB per source row
    const char * src;
    const int32_t * idx;
    char * dst;
    cuda_shape ss, ds;
    int64_t nbx;
};
#define ROPE_VB 512 // elements of v a block stores: 8 per thread, loaded before any is stored

template <typename TK, typename TV, bool NEOX>
static __global__ void __launch_bounds__(64) k_rope_qkv(rope_args q, rope_args k, store_args v) {
    pdl_start();
    int64_t b = blockIdx.x;
    if (b < q.ngroups) {
        rope_rows<float, float, NEOX>(q, b);
        return;
    }
    b -= q.ngroups;
    if (b < k.ngroups) {
        rope_rows<float, TK, NEOX>(k, b);
        return;
    }
    b -= k.ngroups;
    int64_t rr, c, i1, i2, i3;
    divmod(b, v.nbx, rr, c);
    unravel_row(rr, v.ss.ne[1], v.ss.ne[2], i1, i2, i3);
    const int64_t row = v.idx[i1];
    if (row < 0 || row >= v.ds.ne[1]) return;
    const char * sr = v.src + i1 * v.ss.nb[1] + i2 * v.ss.nb[2] + i3 * v.ss.nb[3];
    char * dr = v.dst + row * v.ds.nb[1] + i2 * v.ds.nb[2] + i3 * v.ds.nb[3];
    constexpr int P = ROPE_VB / 64;
    float x[P];
#pragma unroll
    for (int j = 0; j < P; ++j) {
        const int64_t i0 = c * ROPE_VB + j * 64 + threadIdx.x;
        if (i0 < v.ss.ne[0]) x[j] = *(const float *)(sr + i0 * v.ss.nb[0]);
    }
#pragma unroll
    for (int j = 0; j < P; ++j) {
        const int64_t i0 = c * ROPE_VB + j * 64 + threadIdx.x;
        if (i0 < v.ss.ne[0]) *(TV *)(dr + i0 * v.ds.nb[0]) = from_f32<TV>(x[j]);
    }
}

bool ggml_cuda_rope_qkv_ok(ggml_tensor * const * n, int span, bool blocks) {
    if (span == 7 && !ggml_is_view_op(n[5]->op)) return false;
    const ggml_tensor * rq = n[0], * rk = n[2], * sk = n[4], * sv = n[span - 1];
    auto f32 = [](const ggml_tensor * t) { return t->type == GGML_TYPE_F32; };
    auto cache_type = [&](const ggml_tensor * t) {
        return t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_F32 || (blocks && ggml_cuda_kvq_rows_ok(t));
    };
    return rq->op == GGML_OP_ROPE && f32(rq) && f32(rq->src[0]) && ggml_is_view_op(n[1]->op) &&
           ggml_cuda_rope_set_rows_ok(rk, n[3], sk, blocks) && f32(rk) && cache_type(sk) &&
           sv->op == GGML_OP_SET_ROWS && f32(sv->src[1]) && cache_type(sv) && sv->src[2] == sk->src[2] &&
           ggml_is_contiguous(rq->src[1]) && ggml_get_op_params_i32(rq, 1) == ggml_get_op_params_i32(rk, 1) &&
           ggml_nrows(sv->src[1]) <= INT32_MAX;
}

void ggml_cuda_op_rope_qkv(ggml_cuda_context & ctx, ggml_tensor * const * n, int span) {
    const ggml_tensor * rq = n[0], * rk = n[2];
    ggml_tensor * sk = n[4], * sv = n[span - 1];
    const rope_args q = rope_args_of(rq, (char *)rq->data, cuda_shape_of(rq), nullptr);
    const rope_args k = rope_args_of(rk, (char *)sk->data, cache_rows_shape(rk, sk), (const int32_t *)sk->src[2]->data);
    const ggml_tensor * vsrc = sv->src[1];
    store_args v;
    v.src = (const char *)vsrc->data;
    v.idx = (const int32_t *)sv->src[2]->data;
    v.dst = (char *)sv->data;
    v.ss = cuda_shape_of(vsrc);
    v.ds = cuda_shape_of(sv);
    v.nbx = cuda_ceil_div(vsrc->ne[0], ROPE_VB);
    const int64_t blocks = q.ngroups + k.ngroups + v.nbx * ggml_nrows(vsrc);
    if (blocks == 0) return;
    const bool neox = ggml_get_op_params_i32(rq, 1) == GGML_ROPE_TYPE_NEOX;
    const int variant = (sk->type == GGML_TYPE_F16 ? 4 : 0) + (sv->type == GGML_TYPE_F16 ? 2 : 0) + (neox ? 1 : 0);
#define QKV_LAUNCH(TK, TV, NEOX)                                                                                       \
    ggml_cuda_launch(ctx, k_rope_qkv<TK, TV, NEOX>, dim3((unsigned)blocks), dim3(64), 0, q, k, v)
    switch (variant) {
        case 0: QKV_LAUNCH(float, float, false); break;
        case 1: QKV_LAUNCH(float, float, true); break;
        case 2: QKV_LAUNCH(float, half, false); break;
        case 3: QKV_LAUNCH(float, half, true); break;
        case 4: QKV_LAUNCH(half, float, false); break;
        case 5: QKV_LAUNCH(half, float, true); break;
        case 6: QKV_LAUNCH(half, half, false); break;
        default: QKV_LAUNCH(half, half, true); break;
    }
#undef QKV_LAUNCH
}
