// ggml-quants-k.cpp - reference quantize / dequantize of the K-quants (q2_K .. q6_K) and of q8_K,
// the activation type of their CPU dots. Bit-identical to ggml-quants.c's quantize_row_*_ref
// and dequantize_row_*: the scale searches (make_qx_quants, make_q3_quants, make_qkx2_quants)
// keep ggml's parameters, weights and float evaluation order, so a file quantized here equals one
// quantized by llama.cpp's quantize without an importance matrix, byte for byte.
//
// Super-blocks hold QK_K = 256 weights in sub-blocks of 16 (q2_K, q3_K, q6_K) or 32 (q4_K, q5_K);
// each sub-block has a quantized scale (and min), itself scaled by the super-block's f16 d (dmin).
//
// Float contraction (a*b + c into one fma) would change roundings: ggml's reference code is built
// for baseline x86-64 (no FMA), and with GCC's default -ffp-contract=fast under -march=native some
// q2_K/q3_K/q6_K blocks of the quant vectors came out different from llama.cpp's. So it stays off.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "ggml-impl.h"

#include <cmath>
#include <cstring>

namespace {

constexpr float k_group_max_eps = 1e-15f; // ggml's GROUP_MAX_EPS: a group below it is all zero

template <typename T> inline T min_of(T a, T b) { return a < b ? a : b; }
template <typename T> inline T max_of(T a, T b) { return a > b ? a : b; }

// Round to nearest (ties to even) for |fval| <= 4194303 through the float mantissa, as ggml does.
inline int nearest_int(float fval) {
    const float val = fval + 12582912.f;
    int i;
    std::memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

// Symmetric quants L[i] in [0, 2*nmax) with x ~ scale * (L - nmax). rmse_type 0: plain rounding of
// the absmax scale; 1..4: weights x^2, 1, |x|, sqrt|x| and a search over 18 nearby scales for
// the least weighted squared error; negative: one least-squares step, no search.
float make_qx_quants(int n, int nmax, const float * x, int8_t * L, int rmse_type, const float * qw) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < k_group_max_eps) { // all zero
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            const int l = nearest_int(iscale * x[i]);
            L[i] = (int8_t)(nmax + max_of(-nmax, min_of(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
    auto weight = [&](int i) -> float {
        return qw               ? qw[i]
               : rmse_type == 1 ? x[i] * x[i]
               : rmse_type == 2 ? 1
               : rmse_type == 3 ? std::fabs(x[i])
                                : std::sqrt(std::fabs(x[i]));
    };
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = max_of(-nmax, min_of(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = weight(i);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = max_of(-nmax, min_of(nmax - 1, l));
            const float w = weight(i);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + max_of(-nmax, min_of(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// q3_K's sub-block quantizer: symmetric L in [0, 2*nmax), with do_rmse a coordinate descent
// (up to 5 passes) on the x^2-weighted squared error.
float make_q3_quants(int n, int nmax, const float * x, int8_t * L, bool do_rmse) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < k_group_max_eps) { // all zero
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0;
        float suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = max_of(-nmax, min_of(nmax - 1, l));
            L[i] = (int8_t)l;
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                const float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * L[i] * L[i];
                    int new_l = nearest_int(x[i] * sl2 / slx);
                    new_l = max_of(-nmax, min_of(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx += w * x[i] * new_l;
                        sl2 += w * new_l * new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = (int8_t)new_l;
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; ++i)
            L[i] = (int8_t)(L[i] + nmax);
        return sumlx / suml2;
    }
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = max_of(-nmax, min_of(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
    }
    return 1 / iscale;
}

// Asymmetric quants L[i] in [0, nmax] with x ~ scale * L - the_min (the_min >= 0): starts from the
// min/max grid, then tries nstep+1 grids with nmax + rmin + rdelta*is levels across the range,
// fitting scale and min by weighted least squares and keeping the least weighted error
// (|diff| with use_mad, else diff^2).
float make_qkx2_quants(int n, int nmax, const float * x, const float * weights, uint8_t * L, float * the_min,
                       uint8_t * Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)max_of(0, min_of(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        const float w = weights[i];
        best_error += w * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = max_of(0, min_of(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                const float w = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i)
                    L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// q4_K / q5_K: 8 6-bit scales and 8 6-bit mins in 12 bytes. j < 4: low 6 bits of q[j] (scale)
// and q[j+4] (min); j >= 4: low/high nibble of q[j+4], top 2 bits from q[j-4] / q[j].
inline void get_scale_min_k4(int j, const uint8_t * q, uint8_t * d, uint8_t * m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// Packs the 6-bit scales ls[8] and mins lm[8] of q4_K / q5_K (inverse of get_scale_min_k4).
inline void pack_scale_min_k4(const float * scales, const float * mins, float max_scale, float max_min, uint8_t * out) {
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = min_of<uint8_t>(63, ls);
        lm = min_of<uint8_t>(63, lm);
        if (j < 4) {
            out[j] = ls;
            out[j + 4] = lm;
        } else {
            out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            out[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
}

// Sub-block scales/mins of q4_K (nmax 15) and q5_K (nmax 31): weights av|x| + |x|.
void quantize_k_sub_blocks(const float * x, int nmax, float rmin, float rdelta, int nstep, uint8_t * L, float * scales,
                           float * mins, float * max_scale, float * max_min) {
    uint8_t Laux[32];
    float weights[32];
    *max_scale = 0; // as the min is subtracted, scales are never negative
    *max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] =
            make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
        if (scales[j] > *max_scale) *max_scale = scales[j];
        if (mins[j] > *max_min) *max_min = mins[j];
    }
}

// Requantizes the weights of q4_K / q5_K against the stored (quantized) scales and mins.
void requantize_k_sub_blocks(const float * x, int nmax, ggml_fp16_t d16, ggml_fp16_t dmin16,
                             const uint8_t * packed_scales, uint8_t * L) {
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, packed_scales, &sc, &m);
        const float d = ggml_compute_fp16_to_fp32(d16) * sc;
        if (!d) continue;
        const float dm = ggml_compute_fp16_to_fp32(dmin16) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            l = max_of(0, min_of(nmax, l));
            L[32 * j + ii] = (uint8_t)l;
        }
    }
}

} // namespace

// ---------------------------------------------------------------------------------------------
// quantize

void quantize_row_q2_K_ref(const float * x, block_q2_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;

    uint8_t L[QK_K];
    uint8_t Laux[16];
    float weights[16];
    float mins[QK_K / 16];
    float scales[QK_K / 16];

    const float q4scale = 15.f;

    for (int64_t i = 0; i < nb; ++i) {
        float max_scale = 0; // as the min is subtracted, scales are never negative
        float max_min = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l)
                weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }

        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j)
                y[i].scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
            y[i].d = ggml_compute_fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; ++j)
                y[i].scales[j] = 0;
            y[i].d = ggml_compute_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j)
                y[i].scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = ggml_compute_fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = ggml_compute_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = ggml_compute_fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = ggml_compute_fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int((x[16 * j + ii] + dm) / d);
                l = max_of(0, min_of(3, l));
                L[16 * j + ii] = (uint8_t)l;
            }
        }

        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[j / 4 + l] =
                    (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
            }
        }
        x += QK_K;
    }
}

void quantize_row_q3_K_ref(const float * x, block_q3_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;

    int8_t L[QK_K];
    float scales[QK_K / 16];

    for (int64_t i = 0; i < nb; ++i) {
        float max_scale = 0;
        float amax = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }

        std::memset(y[i].scales, 0, 12);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                int8_t l = (int8_t)nearest_int(iscale * scales[j]);
                l = (int8_t)(max_of<int>(-32, min_of<int>(31, l)) + 32);
                if (j < 8) {
                    y[i].scales[j] = l & 0xF;
                } else {
                    y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                }
                l = (int8_t)(l >> 4);
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = ggml_compute_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = ggml_compute_fp32_to_fp16(0.f);
        }

        for (int j = 0; j < QK_K / 16; ++j) {
            int sc = j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4;
            sc = (sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float d = ggml_compute_fp16_to_fp32(y[i].d) * sc;
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = max_of(-4, min_of(3, l));
                L[16 * j + ii] = (int8_t)(l + 4);
            }
        }

        // the high bit of quants 0..31 goes to bit 0 of hmask[0..31], of 32..63 to bit 1, ...
        std::memset(y[i].hmask, 0, QK_K / 8);
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < QK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[m] |= hm;
                L[j] -= 4;
            }
            if (++m == QK_K / 8) {
                m = 0;
                hm <<= 1;
            }
        }
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[j / 4 + l] =
                    (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
            }
        }
        x += QK_K;
    }
}

void quantize_row_q4_K_ref(const float * x, block_q4_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;

    uint8_t L[QK_K];
    float mins[QK_K / 32];
    float scales[QK_K / 32];

    for (int64_t i = 0; i < nb; ++i) {
        float max_scale, max_min;
        quantize_k_sub_blocks(x, 15, -1.f, 0.1f, 20, L, scales, mins, &max_scale, &max_min);
        pack_scale_min_k4(scales, mins, max_scale, max_min, y[i].scales);
        y[i].d = ggml_compute_fp32_to_fp16(max_scale / 63.f);
        y[i].dmin = ggml_compute_fp32_to_fp16(max_min / 63.f);
        requantize_k_sub_blocks(x, 15, y[i].d, y[i].dmin, y[i].scales, L);

        uint8_t * q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
        x += QK_K;
    }
}

void quantize_row_q5_K_ref(const float * x, block_q5_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;

    uint8_t L[QK_K];
    float mins[QK_K / 32];
    float scales[QK_K / 32];

    for (int64_t i = 0; i < nb; ++i) {
        float max_scale, max_min;
        quantize_k_sub_blocks(x, 31, -0.5f, 0.1f, 15, L, scales, mins, &max_scale, &max_min);
        pack_scale_min_k4(scales, mins, max_scale, max_min, y[i].scales);
        y[i].d = ggml_compute_fp32_to_fp16(max_scale / 63.f);
        y[i].dmin = ggml_compute_fp32_to_fp16(max_min / 63.f);
        requantize_k_sub_blocks(x, 31, y[i].d, y[i].dmin, y[i].scales, L);

        uint8_t * qh = y[i].qh;
        uint8_t * ql = y[i].qs;
        std::memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < QK_K; n += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[n + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 <<= 2;
            m2 <<= 2;
            ql += 32;
        }
        x += QK_K;
    }
}

void quantize_row_q6_K_ref(const float * x, block_q6_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;

    int8_t L[QK_K];
    float scales[QK_K / 16];

    for (int64_t i = 0; i < nb; ++i) {
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, nullptr);
            scales[ib] = scale;
            const float abs_scale = std::fabs(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }

        if (max_abs_scale < k_group_max_eps) {
            std::memset(&y[i], 0, sizeof(block_q6_K));
            y[i].d = ggml_compute_fp32_to_fp16(0.f);
            x += QK_K;
            continue;
        }

        const float iscale = -128.f / max_scale;
        y[i].d = ggml_compute_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            y[i].scales[ib] = (int8_t)min_of(127, nearest_int(iscale * scales[ib]));
        }

        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = ggml_compute_fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = max_of(-32, min_of(31, l));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }

        uint8_t * ql = y[i].ql;
        uint8_t * qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
        x += QK_K;
    }
}

void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; ++i) {
        float max = 0;
        float amax = 0;
        for (int j = 0; j < QK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (!amax) {
            y[i].d = 0;
            std::memset(y[i].qs, 0, QK_K);
            std::memset(y[i].bsums, 0, sizeof(y[i].bsums)); // ggml leaves them unwritten; all sums are 0
            x += QK_K;
            continue;
        }
        // -127 rather than -128 (so that no quant is -128, as ggml's iq2 dots need)
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; ++j) {
            const int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)min_of(127, v);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii)
                sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
        x += QK_K;
    }
}

// ---------------------------------------------------------------------------------------------
// dequantize

void dequantize_row_q2_K(const block_q2_K * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        const float min = ggml_compute_fp16_to_fp32(x[i].dmin);
        const uint8_t * q = x[i].qs;
        int is = 0;
        for (int n = 0; n < QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = x[i].scales[is++];
                float dl = d * (sc & 0xF);
                float ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
                sc = x[i].scales[is++];
                dl = d * (sc & 0xF);
                ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

void dequantize_row_q3_K(const block_q3_K * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    constexpr uint32_t kmask1 = 0x03030303;
    constexpr uint32_t kmask2 = 0x0f0f0f0f;
    for (int64_t i = 0; i < nb; ++i) {
        const float d_all = ggml_compute_fp16_to_fp32(x[i].d);
        const uint8_t * q = x[i].qs;
        const uint8_t * hm = x[i].hmask;
        uint8_t m = 1;

        // unpack the 16 6-bit scales: low nibbles in scales[0..7], high 2 bits in scales[8..11]
        uint32_t aux[4];
        std::memcpy(aux, x[i].scales, 12);
        const uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t scales[16];
        std::memcpy(scales, aux, 16);

        int is = 0;
        for (int n = 0; n < QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                float dl = d_all * (scales[is++] - 32);
                for (int l = 0; l < 16; ++l) {
                    *y++ = dl * ((int8_t)((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
                }
                dl = d_all * (scales[is++] - 32);
                for (int l = 0; l < 16; ++l) {
                    *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
                }
                shift += 2;
                m <<= 1;
            }
            q += 32;
        }
    }
}

void dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t * q = x[i].qs;
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        const float min = ggml_compute_fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < QK_K; j += 64) {
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc;
            const float m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc;
            const float m2 = min * m;
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

void dequantize_row_q5_K(const block_q5_K * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t * ql = x[i].qs;
        const uint8_t * qh = x[i].qh;
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        const float min = ggml_compute_fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K; j += 64) {
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc;
            const float m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc;
            const float m2 = min * m;
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

void dequantize_row_q6_K(const block_q6_K * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t * sc = x[i].scales;
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; ++i) {
        for (int j = 0; j < QK_K; ++j)
            *y++ = x[i].d * x[i].qs[j];
    }
}
