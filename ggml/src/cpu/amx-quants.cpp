// cpu/amx-quants.cpp - per weight type, its blocks as int8 tile values and f32 scales (see amx-quants.h).
//
// One decoder per type turns a weight block into its int8 values (qk of them) and the dw / mw of each
// of its bk-value sub-blocks, bit for bit the ggml dequantization (value * dw + mw per element);
// unpack<D> lays a panel of rows out as the tiles want them. Plain C++ that the compiler vectorizes
// (AVX2 on x86: every AMX CPU has it, and so does a host that tests the path by emulation).
#include "cpu/amx-quants.h"

#include "ggml-impl.h"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#define AMXQ_TARGET __attribute__((target("avx2,fma,f16c")))
#else
#define AMXQ_TARGET
#endif

namespace {

inline float f16(ggml_fp16_t h) { return ggml_compute_fp16_to_fp32(h); }

// q4_K / q5_K: 6-bit scale and min of sub-block j (as get_scale_min_k4 in ggml-quants-k.cpp)
inline void scale_min_k4(int j, const uint8_t * q, int & d, int & m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

// q4_K / q5_K: the 8 sub-blocks' scales d * sc and min terms -dmin * m
template <typename block> void k4_scales(const block & b, float * dw, float * mw) {
    const float d = f16(b.d), dmin = f16(b.dmin);
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        scale_min_k4(j, b.scales, sc, m);
        dw[j] = d * (float)sc;
        mw[j] = -(dmin * (float)m);
    }
}

struct dec_q8_0 {
    using block = block_q8_0;
    static constexpr int qk = 32, bk = 32;
    static constexpr bool has_min = false;
    static void decode(const block & b, int8_t * q, float * dw, float *) {
        if (q) std::memcpy(q, b.qs, 32);
        dw[0] = f16(b.d);
    }
};

// the 32 values of a q4 block: low nibbles first, then the high ones, minus off
inline void q4_values(const uint8_t * qs, int off, int8_t * q) {
    for (int j = 0; j < 16; ++j) {
        q[j] = (int8_t)((qs[j] & 0xF) - off);
        q[j + 16] = (int8_t)((qs[j] >> 4) - off);
    }
}

struct dec_q4_0 {
    using block = block_q4_0;
    static constexpr int qk = 32, bk = 32;
    static constexpr bool has_min = false;
    static void decode(const block & b, int8_t * q, float * dw, float *) {
        q4_values(b.qs, 8, q);
        dw[0] = f16(b.d);
    }
};

struct dec_q4_1 {
    using block = block_q4_1;
    static constexpr int qk = 32, bk = 32;
    static constexpr bool has_min = true;
    static void decode(const block & b, int8_t * q, float * dw, float * mw) {
        q4_values(b.qs, 0, q);
        dw[0] = f16(b.d);
        mw[0] = f16(b.m);
    }
};

// 5th bit j of a q5 block: bit j of qh
inline void q5_values(const uint8_t * qs, const uint8_t * qh4, int off, int8_t * q) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
    for (int j = 0; j < 16; ++j) {
        q[j] = (int8_t)(((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - off);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off);
    }
}

struct dec_q5_0 {
    using block = block_q5_0;
    static constexpr int qk = 32, bk = 32;
    static constexpr bool has_min = false;
    static void decode(const block & b, int8_t * q, float * dw, float *) {
        q5_values(b.qs, b.qh, 16, q);
        dw[0] = f16(b.d);
    }
};

struct dec_q5_1 {
    using block = block_q5_1;
    static constexpr int qk = 32, bk = 32;
    static constexpr bool has_min = true;
    static void decode(const block & b, int8_t * q, float * dw, float * mw) {
        q5_values(b.qs, b.qh, 0, q);
        dw[0] = f16(b.d);
        mw[0] = f16(b.m);
    }
};

// q4_K: 64-value chunk c holds sub-block 2c in the low nibbles of qs[32c..], 2c + 1 in the high ones
struct dec_q4_K {
    using block = block_q4_K;
    static constexpr int qk = QK_K, bk = 32;
    static constexpr bool has_min = true;
    static void decode(const block & b, int8_t * q, float * dw, float * mw) {
        for (int c = 0; c < 4; ++c) {
            const uint8_t * s = b.qs + 32 * c;
            for (int l = 0; l < 32; ++l) {
                q[64 * c + l] = (int8_t)(s[l] & 0xF);
                q[64 * c + 32 + l] = (int8_t)(s[l] >> 4);
            }
        }
        k4_scales(b, dw, mw);
    }
};

// q5_K: as q4_K, 5th bit of value l of sub-block j in bit j of qh[l]
struct dec_q5_K {
    using block = block_q5_K;
    static constexpr int qk = QK_K, bk = 32;
    static constexpr bool has_min = true;
    static void decode(const block & b, int8_t * q, float * dw, float * mw) {
        for (int c = 0; c < 4; ++c) {
            const uint8_t * s = b.qs + 32 * c;
            for (int l = 0; l < 32; ++l) {
                q[64 * c + l] = (int8_t)((s[l] & 0xF) | (((b.qh[l] >> (2 * c)) & 1) << 4));
                q[64 * c + 32 + l] = (int8_t)((s[l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
            }
        }
        k4_scales(b, dw, mw);
    }
};

// q6_K: 16 scales of 16 values; value index 128 h + 32 k + l (l < 32) from ql/qh as dequantize_row_q6_K
struct dec_q6_K {
    using block = block_q6_K;
    static constexpr int qk = QK_K, bk = 16;
    static constexpr bool has_min = false;
    static void decode(const block & b, int8_t * q, float * dw, float *) {
        const float d = f16(b.d);
        for (int h = 0; h < 2; ++h) {
            const uint8_t * ql = b.ql + 64 * h;
            const uint8_t * qh = b.qh + 32 * h;
            int8_t * y = q + 128 * h;
            for (int l = 0; l < 32; ++l) {
                y[l + 0] = (int8_t)(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                y[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        for (int j = 0; j < 16; ++j)
            dw[j] = d * (float)b.scales[j];
    }
};

// q3_K: value 128 n + 32 j + l = ((qs[32 n + l] >> 2 j) & 3) - (hmask[l] bit 4 n + j ? 0 : 4), 16 6-bit scales - 32
struct dec_q3_K {
    using block = block_q3_K;
    static constexpr int qk = QK_K, bk = 16;
    static constexpr bool has_min = false;
    static void decode(const block & b, int8_t * q, float * dw, float *) {
        const float d = f16(b.d);
        constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
        uint32_t aux[4];
        std::memcpy(aux, b.scales, 12);
        const uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t sc[16];
        std::memcpy(sc, aux, 16);
        for (int n = 0; n < 2; ++n)
            for (int j = 0; j < 4; ++j) {
                const int bit = 4 * n + j;
                for (int l = 0; l < 32; ++l)
                    q[128 * n + 32 * j + l] =
                        (int8_t)(((b.qs[32 * n + l] >> (2 * j)) & 3) - (((b.hmask[l] >> bit) & 1) ? 0 : 4));
            }
        for (int j = 0; j < 16; ++j)
            dw[j] = d * (float)(sc[j] - 32);
    }
};

// q2_K: value 128 n + 32 j + l = (qs[32 n + l] >> 2 j) & 3; scales[i]: scale (low nibble), min (high)
struct dec_q2_K {
    using block = block_q2_K;
    static constexpr int qk = QK_K, bk = 16;
    static constexpr bool has_min = true;
    static void decode(const block & b, int8_t * q, float * dw, float * mw) {
        const float d = f16(b.d), dmin = f16(b.dmin);
        for (int n = 0; n < 2; ++n)
            for (int j = 0; j < 4; ++j)
                for (int l = 0; l < 32; ++l)
                    q[128 * n + 32 * j + l] = (int8_t)((b.qs[32 * n + l] >> (2 * j)) & 3);
        for (int j = 0; j < 16; ++j) {
            dw[j] = d * (float)(b.scales[j] & 0xF);
            mw[j] = -(dmin * (float)(b.scales[j] >> 4));
        }
    }
};

template <class D>
AMXQ_TARGET void unpack(const char * x, size_t bx, int n, int64_t K, int8_t * q, float * dw, float * mw) {
    constexpr int BK = D::bk, NS = D::qk / D::bk;
    const int64_t nblk = K / D::qk;
    alignas(64) int8_t tmp[D::qk];
    float sd[NS], sm[NS];
    for (int m = 0; m < n; ++m) {
        const auto * row = (const typename D::block *)(x + m * bx);
        for (int64_t i = 0; i < nblk; ++i) {
            D::decode(row[i], q ? tmp : nullptr, sd, sm);
            for (int s = 0; s < NS; ++s) {
                const int64_t ib = i * NS + s;
                if (q) std::memcpy(q + (ib * 32 + m) * BK, tmp + s * BK, BK);
                dw[ib * 32 + m] = sd[s];
                if constexpr (D::has_min) mw[ib * 32 + m] = sm[s];
            }
        }
    }
}

template <class D> constexpr ggml_amx_quant make(ggml_type vec_type, bool in_place = false) {
    return {D::bk, D::has_min, in_place, sizeof(typename D::block), vec_type, unpack<D>};
}

const ggml_amx_quant k_q8_0 = make<dec_q8_0>(GGML_TYPE_Q8_1, true);
const ggml_amx_quant k_q4_0 = make<dec_q4_0>(GGML_TYPE_Q8_1);
const ggml_amx_quant k_q4_1 = make<dec_q4_1>(GGML_TYPE_Q8_1);
const ggml_amx_quant k_q5_0 = make<dec_q5_0>(GGML_TYPE_Q8_1);
const ggml_amx_quant k_q5_1 = make<dec_q5_1>(GGML_TYPE_Q8_1);
const ggml_amx_quant k_q2_K = make<dec_q2_K>(GGML_TYPE_Q8_K);
const ggml_amx_quant k_q3_K = make<dec_q3_K>(GGML_TYPE_Q8_K);
const ggml_amx_quant k_q4_K = make<dec_q4_K>(GGML_TYPE_Q8_K);
const ggml_amx_quant k_q5_K = make<dec_q5_K>(GGML_TYPE_Q8_K);
const ggml_amx_quant k_q6_K = make<dec_q6_K>(GGML_TYPE_Q8_K);

} // namespace

const ggml_amx_quant * ggml_amx_get_quant(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q8_0:
            return &k_q8_0;
        case GGML_TYPE_Q4_0:
            return &k_q4_0;
        case GGML_TYPE_Q4_1:
            return &k_q4_1;
        case GGML_TYPE_Q5_0:
            return &k_q5_0;
        case GGML_TYPE_Q5_1:
            return &k_q5_1;
        case GGML_TYPE_Q2_K:
            return &k_q2_K;
        case GGML_TYPE_Q3_K:
            return &k_q3_K;
        case GGML_TYPE_Q4_K:
            return &k_q4_K;
        case GGML_TYPE_Q5_K:
            return &k_q5_K;
        case GGML_TYPE_Q6_K:
            return &k_q6_K;
        default:
            return nullptr;
    }
}
