// qtypes.cuh - one device-side traits struct per quantized weight type (q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K
// q5_K q6_K), shared by the mat-vec, the dequantization for cuBLAS and get_rows (mmvq-t.cuh):
//   QK          values per block; CPB chunks per block (a lane's unit of work: 32 to 128 values, all its bytes
//               read with 16-byte loads where the layout allows); U chunks a lane keeps in flight
//   W           the registers of one chunk; load(r, b, sub, w): chunk `sub` of block b (flat over the tensor)
//               from the kernel layout (q8repack.cuh: r[j] = region j, segment j of block b at r[j] + b*size_j)
//   dot(w, sub, xq, xd, xs)   the chunk's dot with the block's q8s activations (quantize.cuh): xq the block's
//               QK int8 quants (16-byte aligned), xd its QK/32 f32 scales, xs its QK/32 packed half-block sums.
//               Integer dots with __dp4a; the offsets / mins of a type come from the activation sums (__dp2a),
//               the scale math once per 32 values (16 for the types with 16-value scales).
//   dq8(p, b, j, y)  values 8j .. 8j+7 of block b from either layout (cuda_qptrs): get_rows, to-f16.
//   MMQ_SB, MMQ_MIN, MU, mmq_load(r, b, u, mu), mmq_unpack(mu, u, q, d, m)   the int8 tensor-core GEMM (mmq-t.cuh):
//               the 32 values of unit u of block b; mmq_load issues the raw loads only (kept in flight across a
//               K step), mmq_unpack gives 8 words of int8 values (offsets such as q4_0's -8 folded in) and a float
//               scale per MMQ_SB (32 or 16) values, plus a min per MMQ_SB values for the MMQ_MIN types:
//               value = d[i / MMQ_SB] * q[i] + m[i / MMQ_SB].
// Value formulas: ggml's dequantize_row_* (ggml-quants-legacy.cpp, ggml-quants-k.cpp).
#pragma once
#include "common.cuh"
#include "q8repack.cuh"

struct qregs {
    const char * r[4];
};
// the region pointers of a tensor of nblk blocks of `type` in the kernel layout at data
static inline qregs qt_regs_of(ggml_type type, const void * data, int64_t nblk) {
    const cuda_qptrs p = ggml_cuda_qptrs_repacked(type, data, nblk);
    qregs r;
    for (int j = 0; j < 4; ++j)
        r.r[j] = p.r[j];
    return r;
}

// Loads of quantized weights: read once a step, constant for the whole grid (ld.global.nc, like __ldg, may run
// above griddepcontrol.wait). L1::evict_first: a weight sector still serves the lane's other loads from it (q8_0's
// two 16-byte halves of a 32-byte block), but the weights streaming through L1 no longer push out the activations
// that every warp of the SM reads (H200, Llama-2-7B tg128, two calls: q8_0 +3.0%, q4_0 +1.7%, Q4_K_M +0.9%; pp512
// and batched decode level. L1::no_allocate was 10% slower on q8_0 and Q4_K_M, whose loads share sectors; an L2
// evict-first cache policy cost registers, q4_0 -5%; the activations with L1::evict_last added nothing;
// docs/cuda-notes.md, thirty-second session).
static __device__ __forceinline__ int4 qt_ld16(const char * p) {
    int4 r;
    asm("ld.global.nc.L1::evict_first.v4.s32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
static __device__ __forceinline__ int2 qt_ld8(const char * p) {
    int2 r;
    asm("ld.global.nc.L1::evict_first.v2.s32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
}
static __device__ __forceinline__ int qt_ld4(const char * p) {
    int r;
    asm("ld.global.nc.L1::evict_first.s32 %0, [%1];" : "=r"(r) : "l"(p));
    return r;
}
static __device__ __forceinline__ int qt_ldu16(const char * p) {
    unsigned short r;
    asm("ld.global.nc.L1::evict_first.u16 %0, [%1];" : "=h"(r) : "l"(p));
    return r;
}
static __device__ __forceinline__ float qt_h2f(int h) { return __half2float(__ushort_as_half((unsigned short)h)); }
static __device__ __forceinline__ float qt_ldh(const char * p) {
    return __half2float(__ushort_as_half((unsigned short)qt_ldu16(p)));
}
static __device__ __forceinline__ float2 qt_ldh2(const char * p) {
    const int v = qt_ld4(p);
    return __half22float2(*(const half2 *)&v);
}
// byte loads for dq8 (any alignment of ggml's layout)
static __device__ __forceinline__ const uint8_t * qt_seg(const cuda_qptrs & p, int j, int64_t b) {
    return (const uint8_t *)p.r[j] + b * p.st[j];
}
static __device__ __forceinline__ float qt_h(const uint8_t * p) {
    return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}
static __device__ __forceinline__ int i4(const int4 & v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
// the 4 bits (v >> s) & 15 moved to bit 4 of the 4 bytes (bit k -> bit 8k + 4)
static __device__ __forceinline__ int qt_spread4(int v, int s) {
    return (int)((((unsigned)v >> s) & 0xfu) * 0x02040810u) & 0x10101010;
}
static __device__ __forceinline__ int sbyte(int v, int k) { return (int)(int8_t)(v >> (8 * k)); } // signed byte k
static __device__ __forceinline__ int ubyte(int v, int k) { return (v >> (8 * k)) & 0xff; }

// ---- q4_0: d * (q - 8) ----------------------------------------------------------------------------------------
struct qt_q4_0 {
    static constexpr ggml_type type = GGML_TYPE_Q4_0;
    static constexpr int QK = 32, CPB = 1, U = 4;
    struct W {
        int4 q;
        float d;
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int, W & w) {
        w.q = qt_ld16(r.r[0] + b * 16);
        w.d = qt_ldh(r.r[1] + b * 2);
    }
    static __device__ __forceinline__ float dot(const W & w, int, const int4 * xq, const float * xd, const int * xs) {
        const int4 x0 = __ldg(xq), x1 = __ldg(xq + 1);
        // two independent dp4a chains (low / high nibbles), 4 deep instead of 9 (fixed-latency waits are the q4_0
        // mat-vecs' largest stall after memory); the integer sum is the same in any order (docs/cuda-notes.md,
        // forty-fourth session: tg128 +0.9%)
        int lo = __dp2a_lo(__ldg(xs), 0xf8f8, 0), hi = 0; // - 8 * sum(x)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            lo = __dp4a(i4(w.q, i) & 0x0f0f0f0f, i4(x0, i), lo);
            hi = __dp4a((i4(w.q, i) >> 4) & 0x0f0f0f0f, i4(x1, i), hi);
        }
        const int s = lo + hi;
        return w.d * __ldg(xd) * (float)s;
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j, float (&y)[8]) {
        const uint8_t * qs = qt_seg(p, 0, b) + 8 * (j & 1);
        const float d = qt_h(qt_seg(p, 1, b));
#pragma unroll
        for (int e = 0; e < 8; ++e)
            y[e] = d * (float)(((j < 2 ? qs[e] : qs[e] >> 4) & 15) - 8);
    }
    static constexpr int MMQ_SB = 32;
    static constexpr bool MMQ_MIN = false;
    struct MU {
        int4 q;
        int d;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int, MU & w) {
        w.q = qt_ld16(r.r[0] + b * 16);
        w.d = qt_ldu16(r.r[1] + b * 2);
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int, int (&q)[8], float (&d)[2], float (&)[2]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) { // q - 8 as signed bytes
            q[i] = __vsub4(i4(w.q, i) & 0x0f0f0f0f, 0x08080808);
            q[4 + i] = __vsub4((i4(w.q, i) >> 4) & 0x0f0f0f0f, 0x08080808);
        }
        d[0] = qt_h2f(w.d);
    }
};

// ---- q8_0: d * q (the repacked layout [qs 32][d 2]; the v6 kernels of mmvq.cu are the default for it) ----------
struct qt_q8_0 {
    static constexpr ggml_type type = GGML_TYPE_Q8_0;
    static constexpr int QK = 32, CPB = 1, U = 2;
    struct W {
        int4 q0, q1;
        float d;
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int, W & w) {
        w.q0 = qt_ld16(r.r[0] + b * 32);
        w.q1 = qt_ld16(r.r[0] + b * 32 + 16);
        w.d = qt_ldh(r.r[1] + b * 2);
    }
    static __device__ __forceinline__ float dot(const W & w, int, const int4 * xq, const float * xd, const int *) {
        const int4 x0 = __ldg(xq), x1 = __ldg(xq + 1);
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            s = __dp4a(i4(w.q0, i), i4(x0, i), s);
            s = __dp4a(i4(w.q1, i), i4(x1, i), s);
        }
        return w.d * __ldg(xd) * (float)s;
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j, float (&y)[8]) {
        const int8_t * qs = (const int8_t *)qt_seg(p, 0, b) + 8 * j;
        const float d = qt_h(qt_seg(p, 1, b));
#pragma unroll
        for (int e = 0; e < 8; ++e)
            y[e] = d * (float)qs[e];
    }
    static constexpr int MMQ_SB = 32;
    static constexpr bool MMQ_MIN = false;
    struct MU {
        int4 q0, q1;
        int d;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int, MU & w) {
        w.q0 = qt_ld16(r.r[0] + b * 32);
        w.q1 = qt_ld16(r.r[0] + b * 32 + 16);
        w.d = qt_ldu16(r.r[1] + b * 2);
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int, int (&q)[8], float (&d)[2], float (&)[2]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[i] = i4(w.q0, i);
            q[4 + i] = i4(w.q1, i);
        }
        d[0] = qt_h2f(w.d);
    }
};

// ---- q4_1: d * q + m ------------------------------------------------------------------------------------------
struct qt_q4_1 {
    static constexpr ggml_type type = GGML_TYPE_Q4_1;
    static constexpr int QK = 32, CPB = 1, U = 4;
    struct W {
        int4 q;
        float2 dm;
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int, W & w) {
        w.q = qt_ld16(r.r[0] + b * 16);
        w.dm = qt_ldh2(r.r[1] + b * 4);
    }
    static __device__ __forceinline__ float dot(const W & w, int, const int4 * xq, const float * xd, const int * xs) {
        const int4 x0 = __ldg(xq), x1 = __ldg(xq + 1);
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            s = __dp4a(i4(w.q, i) & 0x0f0f0f0f, i4(x0, i), s);
            s = __dp4a((i4(w.q, i) >> 4) & 0x0f0f0f0f, i4(x1, i), s);
        }
        const int sx = __dp2a_lo(__ldg(xs), 0x0101, 0);
        return __ldg(xd) * (w.dm.x * (float)s + w.dm.y * (float)sx);
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j, float (&y)[8]) {
        const uint8_t * qs = qt_seg(p, 0, b) + 8 * (j & 1);
        const uint8_t * dm = qt_seg(p, 1, b);
        const float d = qt_h(dm), m = qt_h(dm + 2);
#pragma unroll
        for (int e = 0; e < 8; ++e)
            y[e] = d * (float)((j < 2 ? qs[e] : qs[e] >> 4) & 15) + m;
    }
    static constexpr int MMQ_SB = 32;
    static constexpr bool MMQ_MIN = true;
    struct MU {
        int4 q;
        int dm;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int, MU & w) {
        w.q = qt_ld16(r.r[0] + b * 16);
        w.dm = qt_ld4(r.r[1] + b * 4);
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int, int (&q)[8], float (&d)[2], float (&m)[2]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[i] = i4(w.q, i) & 0x0f0f0f0f;
            q[4 + i] = (i4(w.q, i) >> 4) & 0x0f0f0f0f;
        }
        const float2 dm = __half22float2(*(const half2 *)&w.dm);
        d[0] = dm.x;
        m[0] = dm.y;
    }
};

// ---- q5_0: d * (q - 16), q = nibble | bit of qh << 4 ------------------------------------------------------------
struct qt_q5_0 {
    static constexpr ggml_type type = GGML_TYPE_Q5_0;
    static constexpr int QK = 32, CPB = 1, U = 4;
    struct W {
        int4 q;
        int qh;
        float d;
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int, W & w) {
        w.q = qt_ld16(r.r[0] + b * 16);
        w.qh = qt_ld4(r.r[1] + b * 4);
        w.d = qt_ldh(r.r[2] + b * 2);
    }
    static __device__ __forceinline__ float dot(const W & w, int, const int4 * xq, const float * xd, const int * xs) {
        const int4 x0 = __ldg(xq), x1 = __ldg(xq + 1);
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            s = __dp4a((i4(w.q, i) & 0x0f0f0f0f) | qt_spread4(w.qh, 4 * i), i4(x0, i), s);
            s = __dp4a(((i4(w.q, i) >> 4) & 0x0f0f0f0f) | qt_spread4(w.qh, 16 + 4 * i), i4(x1, i), s);
        }
        s = __dp2a_lo(__ldg(xs), 0xf0f0, s); // - 16 * sum(x)
        return w.d * __ldg(xd) * (float)s;
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j, float (&y)[8]) {
        const uint8_t * qs = qt_seg(p, 0, b) + 8 * (j & 1);
        const uint8_t * h = qt_seg(p, 1, b);
        const uint32_t qh = h[0] | (h[1] << 8) | (h[2] << 16) | ((uint32_t)h[3] << 24);
        const float d = qt_h(qt_seg(p, 2, b));
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int v = 8 * j + e; // value index: bit v of qh
            y[e] = d * (float)((int)(((j < 2 ? qs[e] : qs[e] >> 4) & 15) | (((qh >> v) & 1) << 4)) - 16);
        }
    }
    static constexpr int MMQ_SB = 32;
    static constexpr bool MMQ_MIN = false;
    struct MU {
        int4 q;
        int qh, d;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int, MU & w) {
        w.q = qt_ld16(r.r[0] + b * 16);
        w.qh = qt_ld4(r.r[1] + b * 4);
        w.d = qt_ldu16(r.r[2] + b * 2);
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int, int (&q)[8], float (&d)[2], float (&)[2]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) { // q - 16 as signed bytes
            q[i] = __vsub4((i4(w.q, i) & 0x0f0f0f0f) | qt_spread4(w.qh, 4 * i), 0x10101010);
            q[4 + i] = __vsub4(((i4(w.q, i) >> 4) & 0x0f0f0f0f) | qt_spread4(w.qh, 16 + 4 * i), 0x10101010);
        }
        d[0] = qt_h2f(w.d);
    }
};

// ---- q5_1: d * q + m --------------------------------------------------------------------------------------------
struct qt_q5_1 {
    static constexpr ggml_type type = GGML_TYPE_Q5_1;
    static constexpr int QK = 32, CPB = 1, U = 4;
    struct W {
        int4 q;
        int2 dmh; // x: d, m (half2); y: qh
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int, W & w) {
        w.q = qt_ld16(r.r[0] + b * 16);
        w.dmh = qt_ld8(r.r[1] + b * 8);
    }
    static __device__ __forceinline__ float dot(const W & w, int, const int4 * xq, const float * xd, const int * xs) {
        const int4 x0 = __ldg(xq), x1 = __ldg(xq + 1);
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            s = __dp4a((i4(w.q, i) & 0x0f0f0f0f) | qt_spread4(w.dmh.y, 4 * i), i4(x0, i), s);
            s = __dp4a(((i4(w.q, i) >> 4) & 0x0f0f0f0f) | qt_spread4(w.dmh.y, 16 + 4 * i), i4(x1, i), s);
        }
        const int sx = __dp2a_lo(__ldg(xs), 0x0101, 0);
        const float2 dm = __half22float2(*(const half2 *)&w.dmh.x);
        return __ldg(xd) * (dm.x * (float)s + dm.y * (float)sx);
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j, float (&y)[8]) {
        const uint8_t * qs = qt_seg(p, 0, b) + 8 * (j & 1);
        const uint8_t * s1 = qt_seg(p, 1, b);
        const float d = qt_h(s1), m = qt_h(s1 + 2);
        const uint32_t qh = s1[4] | (s1[5] << 8) | (s1[6] << 16) | ((uint32_t)s1[7] << 24);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int v = 8 * j + e;
            y[e] = d * (float)(((j < 2 ? qs[e] : qs[e] >> 4) & 15) | (((qh >> v) & 1) << 4)) + m;
        }
    }
    static constexpr int MMQ_SB = 32;
    static constexpr bool MMQ_MIN = true;
    struct MU {
        int4 q;
        int2 dmh;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int, MU & w) {
        w.q = qt_ld16(r.r[0] + b * 16);
        w.dmh = qt_ld8(r.r[1] + b * 8);
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int, int (&q)[8], float (&d)[2], float (&m)[2]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[i] = (i4(w.q, i) & 0x0f0f0f0f) | qt_spread4(w.dmh.y, 4 * i);
            q[4 + i] = ((i4(w.q, i) >> 4) & 0x0f0f0f0f) | qt_spread4(w.dmh.y, 16 + 4 * i);
        }
        const float2 dm = __half22float2(*(const half2 *)&w.dmh.x);
        d[0] = dm.x;
        m[0] = dm.y;
    }
};

// ---- q2_K: 16 sub-blocks of 16, d * (sc & 15) * q - dmin * (sc >> 4), q 2 bits
// --------------------------------------- value 128h + 32j + l (l < 32): bits 2j of qs[32h + l], scale byte 8h + 2j +
// l/16. A chunk is one h (128 values).
struct qt_q2_K {
    static constexpr ggml_type type = GGML_TYPE_Q2_K;
    static constexpr int QK = 256, CPB = 2, U = 2;
    struct W {
        int4 q0, q1; // qs[32h .. 32h + 32)
        int2 sc;     // scales[8h .. 8h + 8)
        float2 dm;   // d, dmin
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int h, W & w) {
        const char * blk = r.r[0] + b * 80;
        w.q0 = qt_ld16(blk + 16 + 32 * h);
        w.q1 = qt_ld16(blk + 32 + 32 * h);
        w.sc = qt_ld8(blk + 8 * h);
        w.dm = qt_ldh2(r.r[1] + b * 4);
    }
    static __device__ __forceinline__ float dot(const W & w, int h, const int4 * xq, const float * xd, const int * xs) {
        xq += 8 * h; // this chunk's 128 activations: 4 blocks of 32
        xd += 4 * h;
        xs += 4 * h;
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int4 x0 = __ldg(xq + 2 * j), x1 = __ldg(xq + 2 * j + 1);
            int dlo = 0, dhi = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                dlo = __dp4a((i4(w.q0, i) >> (2 * j)) & 0x03030303, i4(x0, i), dlo);
                dhi = __dp4a((i4(w.q1, i) >> (2 * j)) & 0x03030303, i4(x1, i), dhi);
            }
            const int sc = j < 2 ? w.sc.x : w.sc.y; // bytes 2j, 2j+1 (mod 4): this sub-block pair
            const int sh = 16 * (j & 1);
            const int isum = ((sc >> sh) & 15) * dlo + ((sc >> (sh + 8)) & 15) * dhi;
            const int imin = __dp2a_lo(__ldg(xs + j), (sc >> (sh + 4)) & 0x0f0f, 0);
            acc += __ldg(xd + j) * (w.dm.x * (float)isum - w.dm.y * (float)imin);
        }
        return acc;
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j8, float (&y)[8]) {
        const int v = 8 * j8, h = v / 128, j = (v % 128) / 32, l0 = v % 32;
        const uint8_t * blk = qt_seg(p, 0, b);
        const uint8_t * dm = qt_seg(p, 1, b);
        const int sc = blk[8 * h + 2 * j + l0 / 16];
        const float dl = qt_h(dm) * (float)(sc & 15), ml = qt_h(dm + 2) * (float)(sc >> 4);
#pragma unroll
        for (int e = 0; e < 8; ++e)
            y[e] = dl * (float)((blk[16 + 32 * h + l0 + e] >> (2 * j)) & 3) - ml;
    }
    // unit u (values 32u ..): h = u / 4, j = u % 4; scales per 16 with mins
    static constexpr int MMQ_SB = 16;
    static constexpr bool MMQ_MIN = true;
    struct MU {
        int4 q0, q1;
        int sc, dm;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int u, MU & w) {
        const char * blk = r.r[0] + b * 80;
        const int h = u >> 2, j = u & 3;
        w.q0 = qt_ld16(blk + 16 + 32 * h);
        w.q1 = qt_ld16(blk + 32 + 32 * h);
        w.sc = qt_ldu16(blk + 8 * h + 2 * j);
        w.dm = qt_ld4(r.r[1] + b * 4);
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int u, int (&q)[8], float (&d)[2], float (&m)[2]) {
        const int j = u & 3;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[i] = (i4(w.q0, i) >> (2 * j)) & 0x03030303;
            q[4 + i] = (i4(w.q1, i) >> (2 * j)) & 0x03030303;
        }
        const float2 dm = __half22float2(*(const half2 *)&w.dm);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int sc = (w.sc >> (8 * e)) & 0xff;
            d[e] = dm.x * (float)(sc & 15);
            m[e] = -dm.y * (float)(sc >> 4);
        }
    }
};

// ---- q3_K: 16 sub-blocks of 16, d * (sc - 32) * (q - 4), q = 2 bits | hmask bit << 2, sc 6 bits
// ---------------------- value 128h + 32j + l: bits 2j of qs[32h + l], bit 4h + j of hmask[l], scale 8h + 2j + l/16. A
// chunk is one h.
struct qt_q3_K {
    static constexpr ggml_type type = GGML_TYPE_Q3_K;
    static constexpr int QK = 256, CPB = 2, U = 2;
    struct W {
        int4 h0, h1;    // hmask
        int4 q0, q1;    // qs[32h .. 32h + 32)
        int a0, a1, a2; // the 12 scale bytes
        float d;
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int h, W & w) {
        const char * blk = r.r[0] + b * 96;
        w.h0 = qt_ld16(blk);
        w.h1 = qt_ld16(blk + 16);
        w.q0 = qt_ld16(blk + 32 + 32 * h);
        w.q1 = qt_ld16(blk + 48 + 32 * h);
        const char * sc = r.r[1] + b * 12;
        w.a0 = qt_ld4(sc);
        w.a1 = qt_ld4(sc + 4);
        w.a2 = qt_ld4(sc + 8);
        w.d = qt_ldh(r.r[2] + b * 2);
    }
    // scales 8h .. 8h+7 as signed bytes (sc - 32): A = 8h+0..3, B = 8h+4..7
    static __device__ __forceinline__ void scales(const W & w, int h, int & A, int & B) {
        const int lo_a = (w.a0 >> (4 * h)) & 0x0f0f0f0f, lo_b = (w.a1 >> (4 * h)) & 0x0f0f0f0f;
        const int hi_a = ((w.a2 >> (4 * h)) & 0x03030303) << 4, hi_b = ((w.a2 >> (4 * h + 2)) & 0x03030303) << 4;
        // per byte: x in 0..63 -> x - 32 (no borrow between bytes: every byte is >= 0x80 before the subtraction)
        A = (int)((((unsigned)(lo_a | hi_a) | 0x80808080u) - 0x20202020u) ^ 0x80808080u);
        B = (int)((((unsigned)(lo_b | hi_b) | 0x80808080u) - 0x20202020u) ^ 0x80808080u);
    }
    static __device__ __forceinline__ float dot(const W & w, int h, const int4 * xq, const float * xd, const int * xs) {
        xq += 8 * h;
        xd += 4 * h;
        xs += 4 * h;
        int A, B;
        scales(w, h, A, B);
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int4 x0 = __ldg(xq + 2 * j), x1 = __ldg(xq + 2 * j + 1);
            const int hb = 4 * h + j;
            int dlo = 0, dhi = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) { // q + 4 * hbit in 0..7; the -4 comes from the activation sums
                const int wl = ((i4(w.q0, i) >> (2 * j)) & 0x03030303) | (((i4(w.h0, i) >> hb) & 0x01010101) << 2);
                const int wh = ((i4(w.q1, i) >> (2 * j)) & 0x03030303) | (((i4(w.h1, i) >> hb) & 0x01010101) << 2);
                dlo = __dp4a(wl, i4(x0, i), dlo);
                dhi = __dp4a(wh, i4(x1, i), dhi);
            }
            const int pair = (j < 2 ? A : B) >> (16 * (j & 1)); // signed scales of the two halves in bytes 0, 1
            const int isum = sbyte(pair, 0) * dlo + sbyte(pair, 1) * dhi - 4 * __dp2a_lo(__ldg(xs + j), pair, 0);
            acc += __ldg(xd + j) * (float)isum;
        }
        return w.d * acc;
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j8, float (&y)[8]) {
        const int v = 8 * j8, h = v / 128, j = (v % 128) / 32, l0 = v % 32;
        const uint8_t * blk = qt_seg(p, 0, b);
        const uint8_t * s = qt_seg(p, 1, b);
        const int is = 8 * h + 2 * j + l0 / 16;
        const int sc = ((s[is % 8] >> (4 * (is / 8))) & 15) | (((s[8 + is % 4] >> (2 * (is / 4))) & 3) << 4);
        const float dl = qt_h(qt_seg(p, 2, b)) * (float)(sc - 32);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int l = l0 + e;
            const int q = ((blk[32 + 32 * h + l] >> (2 * j)) & 3) - ((blk[l] >> (4 * h + j)) & 1 ? 0 : 4);
            y[e] = dl * (float)q;
        }
    }
    // unit u: h = u / 4, j = u % 4; scales per 16, q - 4 as signed bytes
    static constexpr int MMQ_SB = 16;
    static constexpr bool MMQ_MIN = false;
    struct MU {
        int4 h0, h1, q0, q1;
        int a0, a1, a2, d;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int u, MU & w) {
        const char * blk = r.r[0] + b * 96;
        const int h = u >> 2;
        w.h0 = qt_ld16(blk);
        w.h1 = qt_ld16(blk + 16);
        w.q0 = qt_ld16(blk + 32 + 32 * h);
        w.q1 = qt_ld16(blk + 48 + 32 * h);
        const char * sc = r.r[1] + b * 12;
        w.a0 = qt_ld4(sc);
        w.a1 = qt_ld4(sc + 4);
        w.a2 = qt_ld4(sc + 8);
        w.d = qt_ldu16(r.r[2] + b * 2);
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int u, int (&q)[8], float (&d)[2], float (&)[2]) {
        const int h = u >> 2, j = u & 3, hb = 4 * h + j;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[i] = __vsub4(((i4(w.q0, i) >> (2 * j)) & 0x03030303) | (((i4(w.h0, i) >> hb) & 0x01010101) << 2),
                           0x04040404);
            q[4 + i] = __vsub4(((i4(w.q1, i) >> (2 * j)) & 0x03030303) | (((i4(w.h1, i) >> hb) & 0x01010101) << 2),
                               0x04040404);
        }
        const float dd = qt_h2f(w.d);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int is = 8 * h + 2 * j + e;
            const int lo = (is & 7) < 4 ? w.a0 : w.a1; // scale bytes is % 8 and 8 + is % 4
            const int sc =
                ((ubyte(lo, is & 3) >> (4 * (is >> 3))) & 15) | (((ubyte(w.a2, is & 3) >> (2 * (is >> 2))) & 3) << 4);
            d[e] = dd * (float)(sc - 32);
        }
    }
};

// ---- q4_K / q5_K: 8 sub-blocks of 32, d * sc * q - dmin * m, 6-bit sc/m packed in 12 bytes
// ---------------------------- value 64g + l (l < 32): low nibble of qs[32g + l], sub-block 2g; 64g + 32 + l: high
// nibble, sub-block 2g + 1. A chunk is one g (64 values). hdr: the block's first 16 bytes (d, dmin, scales).
static __device__ __forceinline__ void qt_k4_scales(const int4 & hdr, int g, int & sa, int & sb, int & ma, int & mb) {
    const int S0 = hdr.y, S1 = hdr.z, S2 = hdr.w;
    const int sc = g < 2 ? S0 & 0x3f3f3f3f : (S2 & 0x0f0f0f0f) | ((S0 >> 2) & 0x30303030);
    const int m = g < 2 ? S1 & 0x3f3f3f3f : ((S2 >> 4) & 0x0f0f0f0f) | ((S1 >> 2) & 0x30303030);
    const int sh = 16 * (g & 1);
    sa = (sc >> sh) & 0xff;
    sb = (sc >> (sh + 8)) & 0xff;
    ma = (m >> sh) & 0xff;
    mb = (m >> (sh + 8)) & 0xff;
}
static __device__ __forceinline__ void qt_k4_scale_min(const uint8_t * s, int j, int & sc, int & m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
// the chunk's two sub-blocks from their integer dots da, db (values 0..15 or 0..31 times the activation quants)
static __device__ __forceinline__ float qt_k4_finish(const int4 & hdr, int g, int da, int db, const float * xd,
                                                     const int * xs) {
    int sa, sb, ma, mb;
    qt_k4_scales(hdr, g, sa, sb, ma, mb);
    const float2 dm = __half22float2(*(const half2 *)&hdr.x);
    const int Sa = __dp2a_lo(__ldg(xs + 2 * g), 0x0101, 0), Sb = __dp2a_lo(__ldg(xs + 2 * g + 1), 0x0101, 0);
    return __ldg(xd + 2 * g) * (dm.x * (float)(sa * da) - dm.y * (float)(ma * Sa)) +
           __ldg(xd + 2 * g + 1) * (dm.x * (float)(sb * db) - dm.y * (float)(mb * Sb));
}

struct qt_q4_K {
    static constexpr ggml_type type = GGML_TYPE_Q4_K;
    static constexpr int QK = 256, CPB = 4, U = 2;
    struct W {
        int4 hdr, q0, q1;
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int g, W & w) {
        const char * blk = r.r[0] + b * 144;
        w.hdr = qt_ld16(blk);
        w.q0 = qt_ld16(blk + 16 + 32 * g);
        w.q1 = qt_ld16(blk + 32 + 32 * g);
    }
    static __device__ __forceinline__ float dot(const W & w, int g, const int4 * xq, const float * xd, const int * xs) {
        const int4 * x = xq + 4 * g; // blocks 2g (x[0], x[1]) and 2g+1 (x[2], x[3])
        const int4 xa0 = __ldg(x), xa1 = __ldg(x + 1), xb0 = __ldg(x + 2), xb1 = __ldg(x + 3);
        int da = 0, db = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            da = __dp4a(i4(w.q0, i) & 0x0f0f0f0f, i4(xa0, i), da);
            da = __dp4a(i4(w.q1, i) & 0x0f0f0f0f, i4(xa1, i), da);
            db = __dp4a((i4(w.q0, i) >> 4) & 0x0f0f0f0f, i4(xb0, i), db);
            db = __dp4a((i4(w.q1, i) >> 4) & 0x0f0f0f0f, i4(xb1, i), db);
        }
        return qt_k4_finish(w.hdr, g, da, db, xd, xs);
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j8, float (&y)[8]) {
        const int v = 8 * j8, g = v / 64, hi = (v % 64) / 32, l0 = v % 32;
        const uint8_t * blk = qt_seg(p, 0, b);
        int sc, m;
        qt_k4_scale_min(blk + 4, 2 * g + hi, sc, m);
        const float d = qt_h(blk) * (float)sc, mn = qt_h(blk + 2) * (float)m;
#pragma unroll
        for (int e = 0; e < 8; ++e)
            y[e] = d * (float)((blk[16 + 32 * g + l0 + e] >> (4 * hi)) & 15) - mn;
    }
    // unit u (values 32u ..): g = u / 2, nibble u % 2
    static constexpr int MMQ_SB = 32;
    static constexpr bool MMQ_MIN = true;
    struct MU {
        int4 hdr, q0, q1;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int u, MU & w) {
        const char * blk = r.r[0] + b * 144;
        w.hdr = qt_ld16(blk);
        w.q0 = qt_ld16(blk + 16 + 32 * (u >> 1));
        w.q1 = qt_ld16(blk + 32 + 32 * (u >> 1));
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int u, int (&q)[8], float (&d)[2], float (&m)[2]) {
        const int sh = 4 * (u & 1);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[i] = (i4(w.q0, i) >> sh) & 0x0f0f0f0f;
            q[4 + i] = (i4(w.q1, i) >> sh) & 0x0f0f0f0f;
        }
        int sa, sb, ma, mb;
        qt_k4_scales(w.hdr, u >> 1, sa, sb, ma, mb);
        const float2 dm = __half22float2(*(const half2 *)&w.hdr.x);
        d[0] = dm.x * (float)(u & 1 ? sb : sa);
        m[0] = -dm.y * (float)(u & 1 ? mb : ma);
    }
};

struct qt_q5_K {
    static constexpr ggml_type type = GGML_TYPE_Q5_K;
    static constexpr int QK = 256, CPB = 4, U = 2;
    struct W {
        int4 hdr, h0, h1, q0, q1;
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int g, W & w) {
        const char * blk = r.r[0] + b * 176;
        w.hdr = qt_ld16(blk);
        w.h0 = qt_ld16(blk + 16);
        w.h1 = qt_ld16(blk + 32);
        w.q0 = qt_ld16(blk + 48 + 32 * g);
        w.q1 = qt_ld16(blk + 64 + 32 * g);
    }
    static __device__ __forceinline__ float dot(const W & w, int g, const int4 * xq, const float * xd, const int * xs) {
        const int4 * x = xq + 4 * g;
        const int4 xa0 = __ldg(x), xa1 = __ldg(x + 1), xb0 = __ldg(x + 2), xb1 = __ldg(x + 3);
        int da = 0, db = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            da = __dp4a((i4(w.q0, i) & 0x0f0f0f0f) | (((i4(w.h0, i) >> (2 * g)) & 0x01010101) << 4), i4(xa0, i), da);
            da = __dp4a((i4(w.q1, i) & 0x0f0f0f0f) | (((i4(w.h1, i) >> (2 * g)) & 0x01010101) << 4), i4(xa1, i), da);
            db = __dp4a(((i4(w.q0, i) >> 4) & 0x0f0f0f0f) | (((i4(w.h0, i) >> (2 * g + 1)) & 0x01010101) << 4),
                        i4(xb0, i), db);
            db = __dp4a(((i4(w.q1, i) >> 4) & 0x0f0f0f0f) | (((i4(w.h1, i) >> (2 * g + 1)) & 0x01010101) << 4),
                        i4(xb1, i), db);
        }
        return qt_k4_finish(w.hdr, g, da, db, xd, xs);
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j8, float (&y)[8]) {
        const int v = 8 * j8, g = v / 64, hi = (v % 64) / 32, l0 = v % 32;
        const uint8_t * blk = qt_seg(p, 0, b);
        int sc, m;
        qt_k4_scale_min(blk + 4, 2 * g + hi, sc, m);
        const float d = qt_h(blk) * (float)sc, mn = qt_h(blk + 2) * (float)m;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int l = l0 + e;
            const int q = ((blk[48 + 32 * g + l] >> (4 * hi)) & 15) | (((blk[16 + l] >> (2 * g + hi)) & 1) << 4);
            y[e] = d * (float)q - mn;
        }
    }
    static constexpr int MMQ_SB = 32;
    static constexpr bool MMQ_MIN = true;
    struct MU {
        int4 hdr, h0, h1, q0, q1;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int u, MU & w) {
        const char * blk = r.r[0] + b * 176;
        w.hdr = qt_ld16(blk);
        w.h0 = qt_ld16(blk + 16);
        w.h1 = qt_ld16(blk + 32);
        w.q0 = qt_ld16(blk + 48 + 32 * (u >> 1));
        w.q1 = qt_ld16(blk + 64 + 32 * (u >> 1));
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int u, int (&q)[8], float (&d)[2], float (&m)[2]) {
        const int sh = 4 * (u & 1);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[i] = ((i4(w.q0, i) >> sh) & 0x0f0f0f0f) | (((i4(w.h0, i) >> u) & 0x01010101) << 4);
            q[4 + i] = ((i4(w.q1, i) >> sh) & 0x0f0f0f0f) | (((i4(w.h1, i) >> u) & 0x01010101) << 4);
        }
        int sa, sb, ma, mb;
        qt_k4_scales(w.hdr, u >> 1, sa, sb, ma, mb);
        const float2 dm = __half22float2(*(const half2 *)&w.hdr.x);
        d[0] = dm.x * (float)(u & 1 ? sb : sa);
        m[0] = -dm.y * (float)(u & 1 ? mb : ma);
    }
};

// ---- q6_K: 16 sub-blocks of 16, d * sc * (q - 32), q = 4 bits of ql | 2 bits of qh << 4, sc int8 -----------------
// half n (128 values), l < 32: value 128n + 32k + l (k = 0, 1): low nibble of ql[64n + 32k + l], bits 2k of
// qh[32n + l], scale 8n + 2k + l/16; value 128n + 64 + 32k + l: high nibble of the same ql byte, bits 2k + 4,
// scale 8n + 4 + 2k + l/16. A chunk is one (n, k): sub = 2n + k.
struct qt_q6_K {
    static constexpr ggml_type type = GGML_TYPE_Q6_K;
    static constexpr int QK = 256, CPB = 4, U = 2;
    struct W {
        int4 l0, l1; // ql[64n + 32k .. + 32)
        int4 h0, h1; // qh[32n .. 32n + 32)
        int2 sc;     // scales[8n .. 8n + 8)
        float d;
    };
    static __device__ __forceinline__ void load(const qregs & r, int64_t b, int sub, W & w) {
        const int n = sub >> 1, k = sub & 1;
        const char * blk = r.r[0] + b * 208;
        w.l0 = qt_ld16(blk + 64 * n + 32 * k);
        w.l1 = qt_ld16(blk + 64 * n + 32 * k + 16);
        w.h0 = qt_ld16(blk + 128 + 32 * n);
        w.h1 = qt_ld16(blk + 128 + 32 * n + 16);
        w.sc = qt_ld8(blk + 192 + 8 * n);
        w.d = qt_ldh(r.r[1] + b * 2);
    }
    static __device__ __forceinline__ float dot(const W & w, int sub, const int4 * xq, const float * xd,
                                                const int * xs) {
        const int n = sub >> 1, k = sub & 1;
        const int ba = 4 * n + k, bb = 4 * n + 2 + k; // the activation blocks of the two groups
        const int4 xa0 = __ldg(xq + 2 * ba), xa1 = __ldg(xq + 2 * ba + 1);
        const int4 xb0 = __ldg(xq + 2 * bb), xb1 = __ldg(xq + 2 * bb + 1);
        int da0 = 0, da1 = 0, db0 = 0, db1 = 0; // per 16 values (each has its scale)
#pragma unroll
        for (int i = 0; i < 4; ++i) { // q in 0..63; the -32 comes from the activation sums
            const int wa0 = (i4(w.l0, i) & 0x0f0f0f0f) | (((i4(w.h0, i) >> (2 * k)) & 0x03030303) << 4);
            const int wa1 = (i4(w.l1, i) & 0x0f0f0f0f) | (((i4(w.h1, i) >> (2 * k)) & 0x03030303) << 4);
            const int wb0 = ((i4(w.l0, i) >> 4) & 0x0f0f0f0f) | (((i4(w.h0, i) >> (2 * k + 4)) & 0x03030303) << 4);
            const int wb1 = ((i4(w.l1, i) >> 4) & 0x0f0f0f0f) | (((i4(w.h1, i) >> (2 * k + 4)) & 0x03030303) << 4);
            da0 = __dp4a(wa0, i4(xa0, i), da0);
            da1 = __dp4a(wa1, i4(xa1, i), da1);
            db0 = __dp4a(wb0, i4(xb0, i), db0);
            db1 = __dp4a(wb1, i4(xb1, i), db1);
        }
        const int pa = w.sc.x >> (16 * k), pb = w.sc.y >> (16 * k); // signed scales in bytes 0, 1
        const int ia = sbyte(pa, 0) * da0 + sbyte(pa, 1) * da1 - 32 * __dp2a_lo(__ldg(xs + ba), pa, 0);
        const int ib = sbyte(pb, 0) * db0 + sbyte(pb, 1) * db1 - 32 * __dp2a_lo(__ldg(xs + bb), pb, 0);
        return w.d * (__ldg(xd + ba) * (float)ia + __ldg(xd + bb) * (float)ib);
    }
    static __device__ __forceinline__ void dq8(const cuda_qptrs & p, int64_t b, int j8, float (&y)[8]) {
        const int v = 8 * j8, n = v / 128, k4 = (v % 128) / 32, l0 = v % 32;
        const uint8_t * blk = qt_seg(p, 0, b);
        const float d = qt_h(qt_seg(p, 1, b)) * (float)(int8_t)blk[192 + 8 * n + 2 * k4 + l0 / 16];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int l = l0 + e;
            const int ql = blk[64 * n + 32 * (k4 & 1) + l] >> (4 * (k4 >> 1));
            const int q = (ql & 15) | (((blk[128 + 32 * n + l] >> (2 * k4)) & 3) << 4);
            y[e] = d * (float)(q - 32);
        }
    }
    // unit u (values 32u ..): n = u / 4, k4 = u % 4; scales per 16, q - 32 as signed bytes
    static constexpr int MMQ_SB = 16;
    static constexpr bool MMQ_MIN = false;
    struct MU {
        int4 l0, l1, h0, h1;
        int sc, d;
    };
    static __device__ __forceinline__ void mmq_load(const qregs & r, int64_t b, int u, MU & w) {
        const int n = u >> 2, k4 = u & 3;
        const char * blk = r.r[0] + b * 208;
        w.l0 = qt_ld16(blk + 64 * n + 32 * (k4 & 1));
        w.l1 = qt_ld16(blk + 64 * n + 32 * (k4 & 1) + 16);
        w.h0 = qt_ld16(blk + 128 + 32 * n);
        w.h1 = qt_ld16(blk + 128 + 32 * n + 16);
        w.sc = qt_ldu16(blk + 192 + 8 * n + 2 * k4);
        w.d = qt_ldu16(r.r[1] + b * 2);
    }
    static __device__ __forceinline__ void mmq_unpack(const MU & w, int u, int (&q)[8], float (&d)[2], float (&)[2]) {
        const int k4 = u & 3, sl = 4 * (k4 >> 1), shh = 2 * k4;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q[i] = __vsub4(((i4(w.l0, i) >> sl) & 0x0f0f0f0f) | (((i4(w.h0, i) >> shh) & 0x03030303) << 4), 0x20202020);
            q[4 + i] =
                __vsub4(((i4(w.l1, i) >> sl) & 0x0f0f0f0f) | (((i4(w.h1, i) >> shh) & 0x03030303) << 4), 0x20202020);
        }
        const float dd = qt_h2f(w.d);
        d[0] = dd * (float)sbyte(w.sc, 0);
        d[1] = dd * (float)sbyte(w.sc, 1);
    }
};
