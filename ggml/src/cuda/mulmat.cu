// mulmat.cu - see mulmat.cuh.
#include "cpy.cuh"
#include "dq-ahead.cuh"
#include "mmq.cuh"
#include "mmv.cuh"
#include "mmvq.cuh"
#include "mulmat.cuh"
#include "norm.cuh"
#include "q8repack.cuh"
#include "quantize.cuh"
#include "rope.cuh"

#include <cstring>

// A tensor header describing dense memory of `type` with t's ne (data not set).
static ggml_tensor dense_header(const ggml_tensor * t, ggml_type type) {
    ggml_tensor c = *t;
    c.type = type;
    const cuda_shape s = ggml_cuda_contig_shape(type, t->ne);
    for (int i = 0; i < 4; ++i)
        c.nb[i] = (size_t)s.nb[i];
    c.view_src = nullptr;
    c.data = nullptr;
    return c;
}

// t converted into dense scratch memory of `type`
static ggml_tensor dense_copy(ggml_cuda_context & ctx, const ggml_tensor * t, ggml_type type) {
    ggml_tensor c = dense_header(t, type);
    c.data = ctx.pool.alloc(c.nb[3] * t->ne[3]);
    ggml_cuda_convert(ctx, t, c.data, type, cuda_shape_of(&c));
    return c;
}

static bool rows_dense(const ggml_tensor * t) { return t->nb[0] == ggml_type_size(t->type); }

// cuBLAS path. a: f16 or f32 with dense rows; b: same type as a with dense rows.
static void mul_mat_cublas(ggml_cuda_context & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t A2 = a->ne[2], A3 = a->ne[3], B2 = b->ne[2], B3 = b->ne[3];
    const int64_t r2 = B2 / A2, r3 = B3 / A3;
    const size_t ts = ggml_type_size(a->type);
    const cudaDataType_t dt = a->type == GGML_TYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
    const int64_t lda = a->nb[1] / ts, ldb = b->nb[1] / ts, ldc = dst->nb[1] / 4;
    const float alpha = 1.0f, beta = 0.0f;
    for (int64_t i3 = 0; i3 < B3; ++i3) {
        const char * a3 = (const char *)a->data + (i3 / r3) * a->nb[3];
        const char * b3 = (const char *)b->data + i3 * b->nb[3];
        char * d3 = (char *)dst->data + i3 * dst->nb[3];
        if (r2 == 1) { // one batched call over all B2 matrices
            CUBLAS_CHECK(cublasGemmStridedBatchedEx(
                ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, a3, dt, (int)lda,
                (long long)(a->nb[2] / ts), b3, dt, (int)ldb, (long long)(b->nb[2] / ts), &beta, d3, CUDA_R_32F,
                (int)ldc, (long long)(dst->nb[2] / 4), (int)B2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        } else { // GQA: each a matrix serves r2 consecutive b matrices (stride 0 over a)
            for (int64_t i2a = 0; i2a < A2; ++i2a) {
                CUBLAS_CHECK(cublasGemmStridedBatchedEx(
                    ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &alpha, a3 + i2a * a->nb[2], dt,
                    (int)lda, 0, b3 + i2a * r2 * b->nb[2], dt, (int)ldb, (long long)(b->nb[2] / ts), &beta,
                    d3 + i2a * r2 * dst->nb[2], CUDA_R_32F, (int)ldc, (long long)(dst->nb[2] / 4), (int)r2,
                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            }
        }
    }
}

// cuBLAS needs ld >= rows and element-aligned strides
static bool cublas_layout_ok(const ggml_tensor * t) {
    const size_t ts = ggml_type_size(t->type);
    if (!rows_dense(t)) return false;
    for (int i = 1; i < 4; ++i)
        if (t->nb[i] % ts != 0) return false;
    return t->nb[1] / ts >= (size_t)t->ne[0] && (uintptr_t)t->data % 16 == 0;
}

static bool cache_hit(const ggml_cuda_qcache & q, const ggml_tensor * b) {
    bool hit = q.buf && q.src == b->data;
    for (int i = 0; i < 4 && hit; ++i)
        hit = q.ne[i] == b->ne[i] && q.nb[i] == (int64_t)b->nb[i];
    return hit;
}

static void cache_set(ggml_cuda_qcache & q, const ggml_tensor * b, void * buf) {
    q.buf = buf;
    q.nsq = nullptr;
    q.src = b->data;
    q.bytes = ggml_nbytes(b);
    for (int i = 0; i < 4; ++i) {
        q.ne[i] = b->ne[i];
        q.nb[i] = (int64_t)b->nb[i];
    }
}

// b in the split q8 layout; reused while the same b is multiplied again (q/k/v, gate/up) and no
// node has written its memory since (ggml_cuda_qcache_written)
static const void * quantized_b(ggml_cuda_context & ctx, const ggml_tensor * b) {
    if (cache_hit(ctx.qcache, b)) return ctx.qcache.buf;
    void * buf = ctx.pool.alloc(ggml_cuda_q8s_size(ggml_nrows(b), b->ne[0]));
    ggml_cuda_quantize_q8s(ctx, b, buf);
    cache_set(ctx.qcache, b, buf);
    return buf;
}

// the deferred norm of the cached q8s bq (code 12), for the mat-vec epilogues that apply it (mmvq.cuh)
static ggml_cuda_qt_epi epi_in(const ggml_cuda_context & ctx, const void * bq) {
    ggml_cuda_qt_epi e;
    if (ctx.qcache.buf == bq && ctx.qcache.nsq) {
        e.nsq_in = ctx.qcache.nsq;
        e.eps_in = ctx.qcache.eps;
    }
    return e;
}

// quantized_b for the kernels that cannot apply a deferred norm (the planner gives them none)
static const void * quantized_b_plain(ggml_cuda_context & ctx, const ggml_tensor * b) {
    const void * bq = quantized_b(ctx, b);
    GGML_ASSERT(!epi_in(ctx, bq).nsq_in);
    return bq;
}

// b (f32) as dense f16 for cuBLAS, reused in the same way (ctx.hcache)
static ggml_tensor f16_b(ggml_cuda_context & ctx, const ggml_tensor * b) {
    if (cache_hit(ctx.hcache, b)) {
        ggml_tensor c = dense_header(b, GGML_TYPE_F16);
        c.data = ctx.hcache.buf;
        return c;
    }
    const ggml_tensor c = dense_copy(ctx, b, GGML_TYPE_F16);
    cache_set(ctx.hcache, b, c.data);
    return c;
}

// b (f32, at most 64 columns) in the wgmma GEMM's order (ggml_cuda_mmw_order), reused in the same way (ctx.wcache)
static ggml_tensor mmw_b(ggml_cuda_context & ctx, const ggml_tensor * b) {
    ggml_tensor c = {};
    c.type = GGML_TYPE_F16;
    c.ne[0] = ggml_cuda_mmw_kpad(b->ne[0]);
    c.ne[1] = ggml_cuda_mmw_nt(b->ne[1]);
    c.ne[2] = b->ne[2];
    c.ne[3] = b->ne[3];
    c.nb[0] = sizeof(half);
    for (int i = 1; i < 4; ++i)
        c.nb[i] = c.nb[i - 1] * c.ne[i - 1];
    if (cache_hit(ctx.wcache, b)) {
        c.data = ctx.wcache.buf;
        return c;
    }
    c.data = ctx.pool.alloc(ggml_nbytes(&c));
    ggml_cuda_mmw_order(ctx, b, (half *)c.data);
    cache_set(ctx.wcache, b, c.data);
    return c;
}

void ggml_cuda_qcache_written(ggml_cuda_context & ctx, const ggml_tensor * t) {
    const char * a0 = (const char *)t->data, * a1 = a0 + ggml_nbytes(t);
    for (ggml_cuda_qcache * q : {&ctx.qcache, &ctx.hcache, &ctx.wcache, &ctx.rcache}) {
        const char * b0 = (const char *)q->src, * b1 = b0 + q->bytes;
        if (q->buf && a0 < b1 && b0 < a1) q->buf = nullptr;
    }
}

// the quantized weights a mat-vec reads through the q8s activation (quantized_b): repacked q8_0 and every type of
// ggml_cuda_qt (the latter in any layout: a weight not in the kernel layout is repacked into scratch first)
static bool q8s_weight(const ggml_tensor * a) { return ggml_cuda_q8_repacked(a) || ggml_cuda_qt(a->type); }

// the kernels of mmvq-t.cuh for weight a (repacked q8_0 unless GGML_CUDA_Q8_V6, the other quantized types), else
// nullptr: the mat-vecs that take the epilogues of ggml_cuda_qt_epi
static const ggml_cuda_qt_fns * qt_fns_of(const ggml_cuda_context & ctx, const ggml_tensor * a) {
    if (const ggml_cuda_qt_fns * q8 = ggml_cuda_qt_q8r(ctx, a)) return q8;
    return ggml_cuda_q8_repacked(a) ? nullptr : ggml_cuda_qt(a->type);
}

bool ggml_cuda_mul_mat_reads_q8s_norm(const ggml_cuda_context & ctx, const ggml_tensor * mm) {
    return ggml_cuda_mul_mat_reads_q8s(ctx, mm) && qt_fns_of(ctx, mm->src[0]) && ggml_nrows(mm->src[1]) == 1;
}

int64_t ggml_cuda_mmv_max_n(const ggml_cuda_context & ctx) {
    return ctx.use_mmq && !ctx.mmq_int8 ? ctx.mmv_max_n : MUL_MAT_VEC_MAX_N;
}

bool ggml_cuda_mul_mat_reads_q8s(const ggml_cuda_context & ctx, const ggml_tensor * mm) {
    const ggml_tensor * a = mm->src[0], * b = mm->src[1];
    return mm->op == GGML_OP_MUL_MAT && a && b && q8s_weight(a) && b->ne[1] <= ggml_cuda_mmv_max_n(ctx);
}

// a quantized weight in the kernel layout (repacked q8_0, or a type of ggml_cuda_qt, contiguous) as dense f16
void ggml_cuda_weight_to_f16(ggml_cuda_context & ctx, const ggml_tensor * a, half * dst) {
    if (ggml_cuda_q8_repacked(a)) {
        ggml_cuda_q8r_to_f16(ctx, a, dst);
        return;
    }
    const ggml_cuda_qt_fns * qt = ggml_cuda_qt(a->type);
    GGML_ASSERT(qt && ggml_is_contiguous(a));
    qt->to_f16(ctx, a, dst);
}

// A quantized a times N > ggml_cuda_mmv_max_n columns: a dequantized to f16 for cuBLAS, either ahead on the side
// stream (dq-ahead.cuh) or here into scratch (an interim: the scratch is given back to the pool as soon as the GEMM
// is launched, so no f16 copy of a weight outlives it and the pool's peak is the largest weight, not the sum of
// them). b is converted first (its f16 copy is cached for the next GEMM reading it, so it must lie below the mark).
static void mul_mat_dequant_cublas(ggml_cuda_context & ctx, const ggml_tensor * a, const ggml_tensor * b,
                                   ggml_tensor * dst) {
    ggml_tensor b_tmp;
    if (b->type != GGML_TYPE_F16 || !cublas_layout_ok(b)) {
        b_tmp = f16_b(ctx, b);
        b = &b_tmp;
    }
    ggml_tensor a_tmp = dense_header(a, GGML_TYPE_F16); // a's f16 copy, dense
    a_tmp.extra = nullptr;
    if (const half * w = ggml_cuda_dq_ahead_take(ctx, dst)) {
        a_tmp.data = (void *)w;
        mul_mat_cublas(ctx, &a_tmp, b, dst);
        ggml_cuda_dq_ahead_release(ctx);
        return;
    }
    const size_t mark = ctx.pool.mark();
    if (ggml_cuda_q8_repacked(a) || ggml_cuda_qt(a->type)) {
        a_tmp.data = ctx.pool.alloc(a_tmp.nb[3] * a->ne[3]);
        ggml_cuda_weight_to_f16(ctx, a, (half *)a_tmp.data);
    } else {
        a_tmp = dense_copy(ctx, a, GGML_TYPE_F16); // q8_0 in ggml's layout (any strides)
    }
    mul_mat_cublas(ctx, &a_tmp, b, dst);
    ctx.pool.rewind(mark);
}

// Up to how many columns the tensor-core GEMM (MMQ) beats dequantization + cuBLAS. The int8 GEMM, measured end to
// end on an H200 (Llama-2-7B, bench -p 16..256 -n 0 -fa 1, 2026-11-26; docs/perf.md): q8_0 pp16 / 32 / 64 / 128 /
// 256 1818 / 3522 / 6405 / 8242 / 10324 t/s with MMQ against 1253 / 2499 / 4883 / 8837 / 15388 without; q4_0 the
// same within 2%; Q4_K_M (q4_K + q6_K) 1412 / 2779 / 4991 / 6298 / 7618 against 1137 / 2270 / 4543 / 8043 / 14578.
// The crossing by linear interpolation of the ratio: ~116 columns for the 32-value types, ~84 for the K-quants.
// The f16 GEMM (the default, mmq-h.cuh) runs the K-quants as fast as q4_0 (H100, bench-mmvq, the three Llama-2-7B
// shapes at N = 96: q4_K 31 / 70 / 72 us against the int8 GEMM's 38 / 90 / 88 and cuBLAS's 33 / 89 / 93), so one
// bound serves every type there. GGML_CUDA_MMQ_MAX_N sets one bound for every type (0: off), GGML_CUDA_NO_MMQ turns
// it off.
static int64_t mmq_crossover_n(const ggml_cuda_context & ctx, ggml_type type) {
    return ctx.mmq_int8 && ggml_blck_size(type) == QK_K ? 80 : 112;
}

// the quantized GEMM (mmq.cuh) for a quantized a times N > ggml_cuda_mmv_max_n columns, else nullptr
static const ggml_cuda_mmq_fns * mmq_of(const ggml_cuda_context & ctx, const ggml_tensor * a, int64_t N) {
    const int64_t max_n = ctx.mmq_max_n >= 0 ? ctx.mmq_max_n : mmq_crossover_n(ctx, a->type);
    if (!ctx.use_mmq || N <= ggml_cuda_mmv_max_n(ctx) || N > max_n) return nullptr;
    if (a->ne[0] > INT32_MAX || a->ne[1] > INT32_MAX) return nullptr;
    return ggml_cuda_mmq(a->type);
}

bool ggml_cuda_mul_mat_dequant_f16(const ggml_cuda_context & ctx, const ggml_tensor * mm) {
    if (mm->op != GGML_OP_MUL_MAT || !mm->src[0] || !mm->src[1]) return false;
    const ggml_tensor * a = mm->src[0];
    const int64_t N = mm->src[1]->ne[1];
    if (!ggml_cuda_q8_repacked(a) && !(ggml_cuda_qt(a->type) && ggml_is_contiguous(a))) return false;
    return N > ggml_cuda_mmv_max_n(ctx) && !mmq_of(ctx, a, N);
}

bool ggml_cuda_mul_mat_reads_mmw(const ggml_cuda_context & ctx, const ggml_tensor * mm) {
    if (mm->op != GGML_OP_MUL_MAT || !mm->src[0] || !mm->src[1]) return false;
    const ggml_tensor * a = mm->src[0], * b = mm->src[1];
    const int64_t N = b->ne[1];
    if (b->type != GGML_TYPE_F32 || !q8s_weight(a) || (!ggml_cuda_q8_repacked(a) && !ggml_is_contiguous(a)))
        return false;
    // as GGML_CUDA_OP(mul_mat) -> mul_mat_mmq decide
    return mmq_of(ctx, a, N) && !ctx.mmq_int8 && ctx.mmw_ok && N <= ctx.mmq_wg_n && ggml_cuda_mmw(a->type);
}

void ggml_cuda_wcache_set(ggml_cuda_context & ctx, const ggml_tensor * b, half * xw) { cache_set(ctx.wcache, b, xw); }

// a's data in the kernel layout: a->data (early: a kernel may read it before pdl_wait), or, for a weight in ggml's
// layout (outside a weights buffer, a view), a copy repacked into scratch for this launch (given back at the
// caller's rewind; early false, as the repack kernel wrote it)
static const void * kernel_layout_data(ggml_cuda_context & ctx, const ggml_tensor * a, bool & early) {
    early = ggml_cuda_kernel_layout(a);
    if (early) return a->data;
    void * w = ctx.pool.alloc(ggml_nbytes(a));
    ggml_cuda_repack_into(ctx, a, w);
    return w;
}

// dst = a^T b through the GEMM f: on f16 tensor cores with b converted to f16 (on wgmma up to ctx.mmq_wg_n columns
// where the device has it, mmq-w.cuh, b in its order; else mmq-s.cuh up to ctx.mmq_stream_n, mmq-h.cuh beyond), or with
// GGML_CUDA_MMQ_INT8=1 on int8 tensor cores with b quantized to q8s (every copy of b cached, so they lie below the
// mark)
static void mul_mat_mmq(ggml_cuda_context & ctx, const ggml_cuda_mmq_fns * f, const ggml_tensor * a,
                        const ggml_tensor * b, ggml_tensor * dst) {
    const ggml_cuda_mmqh_fn wg =
        !ctx.mmq_int8 && ctx.mmw_ok && b->ne[1] <= ctx.mmq_wg_n ? ggml_cuda_mmw(a->type) : nullptr;
    ggml_tensor bh;
    const void * bq = nullptr;
    if (ctx.mmq_int8)
        bq = quantized_b_plain(ctx, b);
    else
        bh = wg ? mmw_b(ctx, b) : f16_b(ctx, b);
    const size_t mark = ctx.pool.mark();
    bool early = true;
    const void * w = kernel_layout_data(ctx, a, early);
    if (ctx.mmq_int8) {
        f->s8(ctx, a, w, early, bq, b, dst);
    } else if (wg) {
        wg(ctx, a, w, early, &bh, dst);
        ++ctx.n_mmw;
    } else if (b->ne[1] <= ctx.mmq_stream_n) {
        f->stream(ctx, a, w, early, &bh, dst);
    } else {
        f->f16(ctx, a, w, early, &bh, dst);
    }
    ctx.pool.rewind(mark);
}

GGML_CUDA_OP(mul_mat) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    GGML_ASSERT(b->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_is_contiguous(dst));
    if (ggml_nelements(dst) == 0) return;
    const int64_t N = b->ne[1];
    ggml_tensor a_tmp, b_tmp;

    const int64_t vec_max_n = ggml_cuda_mmv_max_n(ctx); // quantized weights: mat-vec up to here, then the GEMM
    if (ggml_cuda_q8_repacked(a)) {
        if (N <= vec_max_n) {
            if (const ggml_cuda_qt_fns * q8 = ggml_cuda_qt_q8r(ctx, a)) {
                const void * bq = quantized_b(ctx, b);
                const ggml_cuda_qt_epi e = epi_in(ctx, bq);
                q8->mmvq(ctx, a, a->data, true, bq, b, dst, e.nsq_in ? &e : nullptr);
            } else {
                ggml_cuda_mmvq_q8r(ctx, a, quantized_b_plain(ctx, b), b, dst);
            }
            return;
        }
        if (const ggml_cuda_mmq_fns * mmq = mmq_of(ctx, a, N)) {
            mul_mat_mmq(ctx, mmq, a, b, dst);
            return;
        }
        mul_mat_dequant_cublas(ctx, a, b, dst);
        return;
    }
    if (const ggml_cuda_qt_fns * qt = ggml_cuda_qt(a->type)) {
        GGML_ASSERT(ggml_is_contiguous(a) && a->ne[0] % qt->qk == 0);
        if (N > vec_max_n) {
            if (const ggml_cuda_mmq_fns * mmq = mmq_of(ctx, a, N))
                mul_mat_mmq(ctx, mmq, a, b, dst);
            else
                mul_mat_dequant_cublas(ctx, a, b, dst);
            return;
        }
        const void * bq = quantized_b(ctx, b);
        const ggml_cuda_qt_epi e = epi_in(ctx, bq);
        const size_t mark = ctx.pool.mark();
        bool early = true;
        const void * w = kernel_layout_data(ctx, a, early);
        qt->mmvq(ctx, a, w, early, bq, b, dst, e.nsq_in ? &e : nullptr);
        ctx.pool.rewind(mark);
        return;
    }
    if (a->type == GGML_TYPE_Q8_0) {
        if (N <= MUL_MAT_VEC_MAX_N) {
            const int64_t nblk = ggml_nelements(b) / 32;
            cuda_block_q8_1 * bq = (cuda_block_q8_1 *)ctx.pool.alloc(nblk * sizeof(cuda_block_q8_1));
            ggml_cuda_quantize_q8_1(ctx, b, bq);
            ggml_cuda_mmvq_q8_0(ctx, a, bq, b, dst);
            return;
        }
        mul_mat_dequant_cublas(ctx, a, b, dst);
        return;
    }
    if (!rows_dense(a)) { // e.g. a transposed view: make it dense first
        a_tmp = dense_copy(ctx, a, a->type);
        a = &a_tmp;
    }
    if (N <= MUL_MAT_VEC_MAX_N) {
        ggml_cuda_mmv(ctx, a, b, dst);
        return;
    }
    if (!cublas_layout_ok(a)) {
        a_tmp = dense_copy(ctx, a, a->type);
        a = &a_tmp;
    }
    if (b->type != a->type || !cublas_layout_ok(b)) {
        b_tmp = a->type == GGML_TYPE_F16 ? f16_b(ctx, b) : dense_copy(ctx, b, a->type);
        b = &b_tmp;
    }
    mul_mat_cublas(ctx, a, b, dst);
}

void ggml_cuda_qcache_set(ggml_cuda_context & ctx, const ggml_tensor * b, void * q, const float * nsq, float eps) {
    cache_set(ctx.qcache, b, q);
    ctx.qcache.nsq = nsq;
    ctx.qcache.eps = eps;
}

// ---- fused decode mat-vecs ----------------------------------------------------------------------
static bool overlaps(const ggml_tensor * a, const ggml_tensor * b) {
    const char *a0 = (const char *)a->data, *a1 = a0 + ggml_nbytes(a);
    const char *b0 = (const char *)b->data, *b1 = b0 + ggml_nbytes(b);
    return a0 < b1 && b0 < a1;
}

// the launcher of a group of quantized weights of mmvq-t.cuh: their type's, or a mixed one when the third weight's type
// differs from the first two's (nullptr: none)
static ggml_cuda_qt_group_fn group_fn_of(const ggml_cuda_context & ctx, const ggml_tensor * const * mm, int n) {
    const ggml_tensor *a0 = mm[0]->src[0], *a2 = mm[n - 1]->src[0];
    const ggml_cuda_qt_fns * qt = qt_fns_of(ctx, a0);
    if (!qt) return nullptr;
    if (a2->type == a0->type) return qt->group;
    // (no pair of the table has q8_0, so a repacked q8_0 weight never reaches a mixed launcher)
    if (n != 3 || mm[1]->src[0]->type != a0->type || ctx.qt_rpw != 2 || ctx.no_mmv_mix) return nullptr;
    return ggml_cuda_qt_group_mixed(a0->type, a2->type);
}

bool ggml_cuda_mul_mat_group_ok(const ggml_cuda_context & ctx, const ggml_tensor * const * mm, int n) {
    if (n < 2 || n > MMV_GROUP_MAX) return false;
    const ggml_tensor * x = mm[0]->src[1];
    if (!x || x->type != GGML_TYPE_F32 || x->ne[1] != 1 || x->ne[2] != 1 || x->ne[3] != 1) return false;
    const int64_t K = x->ne[0];
    const ggml_tensor * a0 = mm[0]->src[0];
    if (!a0) return false;
    // quantized types of mmvq-t.cuh (repacked q8_0 too, unless GGML_CUDA_Q8_V6): all weights of one type, in the
    // kernel layout; q8: repacked q8_0 through mmvq.cu's v6 kernels
    const ggml_cuda_qt_fns * q8qt = ggml_cuda_qt_q8r(ctx, a0);
    const ggml_cuda_qt_fns * qt = q8qt ? q8qt : ggml_cuda_qt(a0->type);
    const bool q8 = !qt && ggml_cuda_q8_repacked(a0);
    if (q8   ? !(K % 32 == 0 && ggml_cuda_mmvq_q8r_v6(ctx, K, 1))
        : qt ? !(K % qt->qk == 0 && K <= INT32_MAX)
             : !(x->nb[0] == 4 && (uintptr_t)x->data % 16 == 0))
        return false;
    for (int m = 0; m < n; ++m) {
        const ggml_tensor * t = mm[m];
        const ggml_tensor * a = t->src[0];
        if (t->op != GGML_OP_MUL_MAT || t->src[1] != x || !a) return false;
        if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) || t->ne[0] != a->ne[1] || ggml_nrows(t) != 1)
            return false;
        // (v of a q/k/v group may have another type where a mixed instance exists: mmvq-mix.cu)
        const bool type_ok = a->type == a0->type || (qt && m == 2 && n == 3 && group_fn_of(ctx, mm, n));
        const bool w_ok =
            q8   ? ggml_cuda_q8_repacked(a) && a->ne[0] == K && a->ne[2] == 1 && a->ne[3] == 1
            : qt ? type_ok && ggml_cuda_kernel_layout(a) && a->ne[0] == K && a->ne[2] == 1 && a->ne[3] == 1
                 : ggml_cuda_mmv_f16_fusable(a, K);
        if (!w_ok) return false;
        if (overlaps(t, x)) return false; // f16 kernels read x while writing (q8: harmless, but never seen)
    }
    return true;
}

bool ggml_cuda_mul_mat_group_wg_ok(const ggml_cuda_context & ctx, const ggml_tensor * const * mm, int n) {
    if (n < 2 || n > 3 || !ctx.mmw_tick || ctx.mmq_int8) return false;
    const ggml_tensor * x = mm[0]->src[1];
    const ggml_tensor * a0 = mm[0]->src[0];
    if (!x || !a0 || x->type != GGML_TYPE_F32 || x->ne[2] != 1 || x->ne[3] != 1) return false;
    const int64_t N = x->ne[1];
    if (N > ctx.mmq_wg_n || N > ctx.mmw_group_n || !ggml_cuda_mmw_group(a0->type)) return false;
    for (int m = 0; m < n; ++m) {
        const ggml_tensor * t = mm[m];
        const ggml_tensor * a = t->src[0];
        if (t->op != GGML_OP_MUL_MAT || t->src[1] != x || !a || a->type != a0->type) return false;
        // what mul_mat_mmq would run on its own: the wgmma GEMM, on the weight's own data
        if (!mmq_of(ctx, a, N) || !ggml_cuda_kernel_layout(a) || !ggml_is_contiguous(a)) return false;
        if (a->ne[0] != x->ne[0] || a->ne[0] % ggml_blck_size(a->type) != 0 || a->ne[2] != 1 || a->ne[3] != 1)
            return false;
        if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) || overlaps(t, x)) return false;
    }
    return true;
}

void ggml_cuda_mul_mat_group_wg(ggml_cuda_context & ctx, ggml_tensor * const * mm, int n) {
    GGML_ASSERT(ggml_cuda_mul_mat_group_wg_ok(ctx, mm, n));
    const ggml_tensor * x = mm[0]->src[1];
    const ggml_tensor bw = mmw_b(ctx, x);
    const ggml_tensor * a[3] = {};
    for (int m = 0; m < n; ++m)
        a[m] = mm[m]->src[0];
    ggml_cuda_mmw_group(a[0]->type)(ctx, a, n, &bw, mm);
    ++ctx.n_mmw;
}

void ggml_cuda_mul_mat_group(ggml_cuda_context & ctx, ggml_tensor * const * mm, int n) {
    GGML_ASSERT(ggml_cuda_mul_mat_group_ok(ctx, mm, n));
    const ggml_tensor * x = mm[0]->src[1];
    const ggml_tensor * a0 = mm[0]->src[0];
    if (qt_fns_of(ctx, a0)) {
        const void * bq = quantized_b(ctx, x);
        const ggml_cuda_qt_epi e = epi_in(ctx, bq);
        group_fn_of(ctx, mm, n)(ctx, mm, n, bq, e.nsq_in ? &e : nullptr, nullptr);
    } else if (ggml_cuda_q8_repacked(a0)) {
        ggml_cuda_mmvq_q8r_group(ctx, mm, n, quantized_b_plain(ctx, x));
    } else {
        ggml_cuda_mmv_f16_group(ctx, mm, n);
    }
}

bool ggml_cuda_mul_mat_group_rope_ok(const ggml_cuda_context & ctx, ggml_tensor * const * n, int span) {
    if ((span != 10 && span != 11) || !ggml_cuda_mul_mat_group_ok(ctx, n, 3) || ctx.qt_rpw % 2 != 0) return false;
    if (!qt_fns_of(ctx, n[0]->src[0]) || !ggml_cuda_rope_qkv_ok(n + 4, span - 4, true)) return false;
    const ggml_tensor *rq = n[4], *rk = n[6], *sk = n[8], *sv = n[span - 1];
    // q8_0 / q4_0 caches: k and v rows in whole 32-row groups, their counts in ctx.counters' KV part
    if (ggml_cuda_is_kvq(sk->type) || ggml_cuda_is_kvq(sv->type)) {
        if (n[1]->ne[0] % 32 != 0 || n[2]->ne[0] % 32 != 0 ||
            (n[1]->ne[0] + n[2]->ne[0]) / 32 > GGML_CUDA_N_COUNTERS_KV || !ctx.counters)
            return false;
    }
    // q, k, v: the group's results; rope(q) reads q's view, rope(k) k's view, SET_ROWS(v) v itself
    if (!ggml_is_view_op(n[3]->op) || n[3]->src[0] != n[0] || rq->src[0] != n[3] || n[5]->src[0] != n[1] ||
        rk->src[0] != n[5] || sv->src[1] != n[2])
        return false;
    const int D = (int)rq->ne[0], n_dims = ggml_get_op_params_i32(rq, 0);
    return ggml_get_op_params_i32(rq, 1) == GGML_ROPE_TYPE_NORMAL && rq->ne[2] == 1 && rk->ne[0] == D && D % 2 == 0 &&
           n_dims % 2 == 0 && n_dims <= D && ggml_is_contiguous(rq) && rq->src[1] == rk->src[1] &&
           rq->src[2] == rk->src[2] && memcmp(rq->op_params, rk->op_params, sizeof(rq->op_params)) == 0 &&
           n[0]->ne[0] == D * rq->ne[1] && n[1]->ne[0] == D * rk->ne[1] && sk->src[2]->ne[0] == 1;
}

void ggml_cuda_mul_mat_group_rope(ggml_cuda_context & ctx, ggml_tensor * const * n, int span) {
    GGML_ASSERT(ggml_cuda_mul_mat_group_rope_ok(ctx, n, span));
    const ggml_tensor *rq = n[4], *sk = n[8], *sv = n[span - 1];
    ggml_cuda_qt_rope r;
    r.rp = ggml_cuda_rope_params_of(rq);
    r.D = (int)rq->ne[0];
    r.q = (float *)rq->data;
    r.cell = (const int32_t *)sk->src[2]->data;
    r.ncell = sk->ne[1];
    GGML_ASSERT(sv->ne[1] == r.ncell);
    r.k = (char *)sk->data;
    r.v = (char *)sv->data;
    r.k_nb0 = (int64_t)sk->nb[0];
    r.k_nb1 = (int64_t)sk->nb[1];
    r.v_nb0 = (int64_t)sv->nb[0];
    r.v_nb1 = (int64_t)sv->nb[1];
    r.k_f16 = sk->type == GGML_TYPE_F16;
    r.v_f16 = sv->type == GGML_TYPE_F16;
    r.k_blk = ggml_cuda_is_kvq(sk->type) ? (int)sk->type : 0;
    r.v_blk = ggml_cuda_is_kvq(sv->type) ? (int)sv->type : 0;
    r.Mk = n[1]->ne[0];
    r.scr = nullptr;
    r.cnt = ctx.counters + GGML_CUDA_N_COUNTERS_EPI;
    if (r.k_blk || r.v_blk) r.scr = (float *)ctx.pool.alloc(sizeof(float) * (n[1]->ne[0] + n[2]->ne[0]));
    const void * bq = quantized_b(ctx, n[0]->src[1]);
    const ggml_cuda_qt_epi e = epi_in(ctx, bq);
    group_fn_of(ctx, n, 3)(ctx, n, 3, bq, e.nsq_in ? &e : nullptr, &r);
}

bool ggml_cuda_mul_mat_swiglu_ok(const ggml_cuda_context & ctx, const ggml_tensor * gate, const ggml_tensor * up,
                                 const ggml_tensor * glu) {
    const ggml_tensor * mm[2] = {gate, up};
    if (!ggml_cuda_mul_mat_group_ok(ctx, mm, 2)) return false;
    if (glu->op != GGML_OP_SWIGLU || glu->src[0] != gate || glu->src[1] != up) return false;
    if (glu->type != GGML_TYPE_F32 || !ggml_is_contiguous(glu) || !ggml_are_same_shape(glu, gate)) return false;
    if (gate->src[0]->ne[1] != up->src[0]->ne[1]) return false;
    // by the time the allocator places glu, x may be free (gate/up were its last readers): the f16 kernel reads
    // x while it writes glu (the quantized-weight paths have quantized x before)
    return !overlaps(glu, gate->src[1]) || q8s_weight(gate->src[0]);
}

void ggml_cuda_mul_mat_swiglu(ggml_cuda_context & ctx, ggml_tensor * gate, ggml_tensor * up, ggml_tensor * glu) {
    GGML_ASSERT(ggml_cuda_mul_mat_swiglu_ok(ctx, gate, up, glu));
    const ggml_tensor * x = gate->src[1];
    if (const ggml_cuda_qt_fns * qt = qt_fns_of(ctx, gate->src[0])) {
        const void * bq = quantized_b(ctx, x);
        const ggml_cuda_qt_epi e = epi_in(ctx, bq);
        qt->swiglu(ctx, gate->src[0], up->src[0], bq, (float *)glu->data, e.nsq_in ? &e : nullptr);
    } else if (ggml_cuda_q8_repacked(gate->src[0])) {
        ggml_cuda_mmvq_q8r_swiglu(ctx, gate->src[0], up->src[0], quantized_b_plain(ctx, x), (float *)glu->data);
    } else {
        ggml_cuda_mmv_f16_swiglu(ctx, gate->src[0], up->src[0], x, (float *)glu->data);
    }
}

// ---- a mat-vec with the residual ADD and the RMS_NORM * w after it (code 12) --------------------------------------
bool ggml_cuda_mul_mat_add_norm_ok(const ggml_cuda_context & ctx, const ggml_tensor * mm, const ggml_tensor * add,
                                   const ggml_tensor * norm, const ggml_tensor * mul) {
    if (mm->op != GGML_OP_MUL_MAT || add->op != GGML_OP_ADD || norm->op != GGML_OP_RMS_NORM || mul->op != GGML_OP_MUL)
        return false;
    if (norm->src[0] != add || mul->src[0] != norm || (add->src[0] == mm) == (add->src[1] == mm)) return false;
    if (!ggml_cuda_add_rms_norm_mul_ok(add, norm, mul)) return false;
    const ggml_tensor *a = mm->src[0], *x = mm->src[1];
    if (!a || !x || x->type != GGML_TYPE_F32 || ggml_nrows(x) != 1 || x->ne[0] != a->ne[0]) return false;
    const ggml_cuda_qt_fns * qt = qt_fns_of(ctx, a);
    const int64_t K = a->ne[0], M = a->ne[1];
    return qt && ggml_cuda_kernel_layout(a) && a->ne[2] == 1 && a->ne[3] == 1 && K % qt->qk == 0 && K <= INT32_MAX &&
           mm->type == GGML_TYPE_F32 && ggml_is_contiguous(mm) && ggml_nrows(mm) == 1 && add->ne[0] == M && M % 32 == 0;
}

void * ggml_cuda_mul_mat_add_norm(ggml_cuda_context & ctx, ggml_tensor * mm, ggml_tensor * add, ggml_tensor * norm,
                                  ggml_tensor * mul, const float ** nsq) {
    GGML_ASSERT(ggml_cuda_mul_mat_add_norm_ok(ctx, mm, add, norm, mul));
    const ggml_tensor *a = mm->src[0], *x = mm->src[1];
    const int64_t M = a->ne[1];
    const void * bq = quantized_b(ctx, x);
    ggml_cuda_qt_epi e = epi_in(ctx, bq);
    e.res = (const float *)add->src[add->src[0] == mm ? 1 : 0]->data;
    e.qw = (const float *)mul->src[1]->data;
    e.q8 = ctx.pool.alloc(ggml_cuda_q8s_size(1, M) + sizeof(float) * (M / 32));
    e.nsq_out = (float *)((char *)e.q8 + ggml_cuda_q8s_size(1, M));
    qt_fns_of(ctx, a)->mmvq(ctx, a, a->data, true, bq, x, add, &e);
    *nsq = e.nsq_out;
    return e.q8;
}
