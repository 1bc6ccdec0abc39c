// cpu/repack.cpp - the CPU_REPACK buffer type: host memory whose q4_0 / q4_K / q6_K matrices are stored in 8-row groups
// (layout: cpu/repack.h). The buffer is a CPU buffer with its own set/get: tensors are converted on the way
// in and out, so the loader writes GGUF bytes and ggml_backend_tensor_get reads them back.
#include "cpu/repack.h"

#include "ggml-backend.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

const char * repack_buft_get_name(ggml_backend_buffer_type_t) { return "CPU_REPACK"; }
bool repack_buft_is_host(ggml_backend_buffer_type_t) { return false; } // t->data is not in the plain layout

// q4_0: group g's plain rows (src, row stride rs) -> its K / 32 group blocks at dst
void pack_group_q4_0(const char * src, size_t rs, int64_t nblk, void * vdst) {
    block_q4_0x8 * dst = (block_q4_0x8 *)vdst;
    for (int64_t j = 0; j < nblk; ++j) {
        block_q4_0x8 & o = dst[j];
        for (int r = 0; r < 8; ++r) {
            const block_q4_0 & b = ((const block_q4_0 *)(src + r * rs))[j];
            o.d[r] = b.d;
            for (int k = 0; k < 4; ++k)
                std::memcpy(o.qs + 32 * k + 4 * r, b.qs + 4 * k, 4);
        }
    }
}

// q4_0: the first nrows (<= 8) plain rows of group blocks src -> dst (row stride rs)
void unpack_group_q4_0(const void * vsrc, int64_t nblk, int nrows, char * dst, size_t rs) {
    const block_q4_0x8 * src = (const block_q4_0x8 *)vsrc;
    for (int r = 0; r < nrows; ++r) {
        block_q4_0 * row = (block_q4_0 *)(dst + r * rs);
        for (int64_t j = 0; j < nblk; ++j) {
            row[j].d = src[j].d[r];
            for (int k = 0; k < 4; ++k)
                std::memcpy(row[j].qs + 4 * k, src[j].qs + 32 * k + 4 * r, 4);
        }
    }
}

// q4_K's 12 scale bytes <-> 8 six-bit scales and mins (ggml's get_scale_min_k4 layout; all 96 bits are used, so
// the two are inverse)
void k4_scales_get(const uint8_t * q, uint8_t * sc, uint8_t * mn) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 15) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}
void k4_scales_set(const uint8_t * sc, const uint8_t * mn, uint8_t * q) {
    for (int j = 0; j < 4; ++j) {
        q[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
}

void pack_group_q4_K(const char * src, size_t rs, int64_t nblk, void * vdst) {
    block_q4_Kx8 * dst = (block_q4_Kx8 *)vdst;
    for (int64_t j = 0; j < nblk; ++j) {
        block_q4_Kx8 & o = dst[j];
        std::memset(o.hi, 0, sizeof(o.hi));
        for (int r = 0; r < 8; ++r) {
            const block_q4_K & b = ((const block_q4_K *)(src + r * rs))[j];
            o.d[r] = b.d;
            o.dmin[r] = b.dmin;
            uint8_t sc[8], mn[8];
            k4_scales_get(b.scales, sc, mn);
            for (int sb = 0; sb < 8; ++sb) {
                o.lo[sb][r] = (uint8_t)((sc[sb] & 15) | ((mn[sb] & 15) << 4));
                o.hi[sb / 2][r] |= (uint8_t)(((sc[sb] >> 4) | ((mn[sb] >> 4) << 2)) << (4 * (sb & 1)));
            }
            for (int c = 0; c < 4; ++c)
                for (int k = 0; k < 8; ++k)
                    std::memcpy(o.qs + 256 * c + 32 * k + 4 * r, b.qs + 32 * c + 4 * k, 4);
        }
    }
}

void unpack_group_q4_K(const void * vsrc, int64_t nblk, int nrows, char * dst, size_t rs) {
    const block_q4_Kx8 * src = (const block_q4_Kx8 *)vsrc;
    for (int r = 0; r < nrows; ++r) {
        block_q4_K * row = (block_q4_K *)(dst + r * rs);
        for (int64_t j = 0; j < nblk; ++j) {
            const block_q4_Kx8 & b = src[j];
            row[j].d = b.d[r];
            row[j].dmin = b.dmin[r];
            uint8_t sc[8], mn[8];
            for (int sb = 0; sb < 8; ++sb) {
                const int h = b.hi[sb / 2][r] >> (4 * (sb & 1));
                sc[sb] = (uint8_t)((b.lo[sb][r] & 15) | ((h & 3) << 4));
                mn[sb] = (uint8_t)((b.lo[sb][r] >> 4) | (((h >> 2) & 3) << 4));
            }
            k4_scales_set(sc, mn, row[j].scales);
            for (int c = 0; c < 4; ++c)
                for (int k = 0; k < 8; ++k)
                    std::memcpy(row[j].qs + 32 * c + 4 * k, b.qs + 256 * c + 32 * k + 4 * r, 4);
        }
    }
}

// q6_K: a plain block's 256 six-bit quants u (0..63) in weight order and back (ggml's layout: per 128-weight half n,
// weight 128n + 32m + l has its low 4 bits in ql[64n + 32(m & 1) + l] (low nibble for m < 2, high for m >= 2) and its
// high 2 in qh[32n + l] >> 2m; every bit of ql and qh is used, so the two are inverse)
void q6_quants_get(const block_q6_K & b, uint8_t * u) {
    for (int n = 0; n < 2; ++n)
        for (int m = 0; m < 4; ++m)
            for (int l = 0; l < 32; ++l) {
                const uint8_t lb = b.ql[64 * n + 32 * (m & 1) + l];
                u[128 * n + 32 * m + l] =
                    (uint8_t)((m >= 2 ? lb >> 4 : lb & 15) | ((b.qh[32 * n + l] >> (2 * m)) & 3) << 4);
            }
}
void q6_quants_set(const uint8_t * u, block_q6_K & b) {
    for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
            const uint8_t * v = u + 128 * n + l; // weights 128n + l + 32m
            b.ql[64 * n + l] = (uint8_t)((v[0] & 15) | (v[64] & 15) << 4);
            b.ql[64 * n + 32 + l] = (uint8_t)((v[32] & 15) | (v[96] & 15) << 4);
            b.qh[32 * n + l] = (uint8_t)(v[0] >> 4 | (v[32] >> 4) << 2 | (v[64] >> 4) << 4 | (v[96] >> 4) << 6);
        }
}

// q6_K: a group's three vector dwords of one row (X, Y, Z: 4 bytes each) <-> its 16 codes u (weights 16g .. 16g + 15:
// four dwords U0..U3), byte-parallel in 32-bit words (codes <= 63, so no shift crosses a byte)
constexpr uint32_t k_b2 = 0x03030303u, k_b6 = 0x3F3F3F3Fu;
inline void q6_codes_to_xyz(const uint8_t * u, uint8_t * x, uint8_t * y, uint8_t * z) {
    uint32_t U[4];
    std::memcpy(U, u, sizeof(U));
    const uint32_t X = U[0] | (U[3] & k_b2) << 6, Y = U[1] | (U[3] >> 2 & k_b2) << 6,
                   Z = U[2] | (U[3] >> 4 & k_b2) << 6;
    std::memcpy(x, &X, 4);
    std::memcpy(y, &Y, 4);
    std::memcpy(z, &Z, 4);
}
inline void q6_xyz_to_codes(const uint8_t * x, const uint8_t * y, const uint8_t * z, uint8_t * u) {
    uint32_t X, Y, Z;
    std::memcpy(&X, x, 4);
    std::memcpy(&Y, y, 4);
    std::memcpy(&Z, z, 4);
    const uint32_t U[4] = {X & k_b6, Y & k_b6, Z & k_b6, (X >> 6 & k_b2) | (Y >> 4 & k_b2 << 2) | (Z >> 2 & k_b2 << 4)};
    std::memcpy(u, U, sizeof(U));
}

void pack_group_q6_K(const char * src, size_t rs, int64_t nblk, void * vdst) {
    block_q6_Kx8 * dst = (block_q6_Kx8 *)vdst;
    uint8_t u[QK_K];
    for (int64_t j = 0; j < nblk; ++j) {
        block_q6_Kx8 & o = dst[j];
        for (int r = 0; r < 8; ++r) {
            const block_q6_K & b = ((const block_q6_K *)(src + r * rs))[j];
            o.d[r] = b.d;
            q6_quants_get(b, u);
            for (int g = 0; g < 16; ++g) {
                o.sc[g / 2][2 * r + g % 2] = b.scales[g];
                q6_codes_to_xyz(u + 16 * g, o.qs[g][0] + 4 * r, o.qs[g][1] + 4 * r, o.qs[g][2] + 4 * r);
            }
        }
    }
}

void unpack_group_q6_K(const void * vsrc, int64_t nblk, int nrows, char * dst, size_t rs) {
    const block_q6_Kx8 * src = (const block_q6_Kx8 *)vsrc;
    uint8_t u[QK_K];
    for (int r = 0; r < nrows; ++r) {
        block_q6_K * row = (block_q6_K *)(dst + r * rs);
        for (int64_t j = 0; j < nblk; ++j) {
            const block_q6_Kx8 & b = src[j];
            block_q6_K & o = row[j];
            o.d = b.d[r];
            for (int g = 0; g < 16; ++g) {
                o.scales[g] = b.sc[g / 2][2 * r + g % 2];
                q6_xyz_to_codes(b.qs[g][0] + 4 * r, b.qs[g][1] + 4 * r, b.qs[g][2] + 4 * r, u + 16 * g);
            }
            q6_quants_set(u, o);
        }
    }
}

// the group layout of each type that has one
struct repack_layout {
    ggml_type type;
    void (*pack_group)(const char * src, size_t rs, int64_t nblk, void * dst);
    void (*unpack_group)(const void * src, int64_t nblk, int nrows, char * dst, size_t rs);
};
const repack_layout k_layouts[] = {
    {GGML_TYPE_Q4_0, pack_group_q4_0, unpack_group_q4_0},
    {GGML_TYPE_Q4_K, pack_group_q4_K, unpack_group_q4_K},
    {GGML_TYPE_Q6_K, pack_group_q6_K, unpack_group_q6_K},
};
const repack_layout * layout_of(ggml_type type) {
    for (const repack_layout & l : k_layouts)
        if (l.type == type) return &l;
    return nullptr;
}

// whole tensor: plain bytes -> t->data (groups, then the plain tail rows)
void pack_tensor(const ggml_tensor * t, const char * plain) {
    const repack_layout * l = layout_of(t->type);
    const size_t rs = t->nb[1];
    const int64_t nblk = t->ne[0] / ggml_blck_size(t->type), M = t->ne[1], G = M / 8;
    for (int64_t g = 0; g < G; ++g)
        l->pack_group(plain + g * 8 * rs, rs, nblk, (char *)t->data + g * 8 * rs);
    std::memcpy((char *)t->data + G * 8 * rs, plain + G * 8 * rs, (M - G * 8) * rs);
}

void repack_set_tensor(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    if (!ggml_cpu_is_repacked(t)) {
        std::memcpy((char *)t->data + offset, data, size);
        return;
    }
    const size_t n = ggml_nbytes(t);
    if (offset == 0 && size == n) {
        pack_tensor(t, (const char *)data);
        return;
    }
    std::vector<char> plain(n); // a partial write: through the plain bytes
    ggml_cpu_repack_unpack_rows(t, 0, t->ne[1], plain.data());
    std::memcpy(plain.data() + offset, data, size);
    pack_tensor(t, plain.data());
}

void repack_get_tensor(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    if (!ggml_cpu_is_repacked(t)) {
        std::memcpy(data, (const char *)t->data + offset, size);
        return;
    }
    const size_t n = ggml_nbytes(t);
    if (offset == 0 && size == n) {
        ggml_cpu_repack_unpack_rows(t, 0, t->ne[1], data);
        return;
    }
    std::vector<char> plain(n);
    ggml_cpu_repack_unpack_rows(t, 0, t->ne[1], plain.data());
    std::memcpy(data, plain.data() + offset, size);
}

ggml_backend_buffer_t repack_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    // a CPU buffer (its memory, base, clear and free) with this type's conversions
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), size);
    if (!buf) return nullptr;
    buf->buft = buft;
    buf->iface.set_tensor = repack_set_tensor;
    buf->iface.get_tensor = repack_get_tensor;
    buf->iface.cpy_tensor = nullptr; // copies go through get/set
    return buf;
}

size_t repack_buft_get_alignment(ggml_backend_buffer_type_t) {
    return ggml_backend_buft_get_alignment(ggml_backend_cpu_buffer_type());
}
size_t repack_buft_get_max_size(ggml_backend_buffer_type_t) { return SIZE_MAX; }

} // namespace

ggml_backend_buffer_type_t ggml_backend_cpu_repack_buffer_type() {
    static ggml_backend_buffer_type buft = {
        {repack_buft_get_name, repack_buft_alloc_buffer, repack_buft_get_alignment, repack_buft_get_max_size, nullptr,
         repack_buft_is_host},
        nullptr,
    };
    return &buft;
}

// by default where measured faster: AVX2 cores (Zen 3, docs/cpu-notes.md); AVX-512 builds keep their two-row tiles
bool ggml_backend_cpu_repack_wanted(ggml_type type) {
    if (!layout_of(type)) return false;
    const char * e = std::getenv("GGML_CPU_REPACK");
    if (e && *e) return std::strcmp(e, "0") != 0;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__) && !defined(__AVX512F__)
    return true;
#else
    return false;
#endif
}

bool ggml_cpu_is_repacked(const ggml_tensor * t) {
    return t->buffer && t->buffer->buft == ggml_backend_cpu_repack_buffer_type() && !t->view_src &&
           layout_of(t->type) && t->ne[1] >= 8 && t->ne[2] == 1 && t->ne[3] == 1 &&
           t->nb[0] == ggml_type_size(t->type) && t->nb[1] == ggml_row_size(t->type, t->ne[0]);
}

bool ggml_cpu_reads_repacked(const ggml_tensor * t) {
    while (t->view_src)
        t = t->view_src;
    return ggml_cpu_is_repacked(t);
}

void ggml_cpu_repack_unpack_rows(const ggml_tensor * a, int64_t r0, int64_t r1, void * dst) {
    GGML_ASSERT(r0 % 8 == 0 && r1 <= a->ne[1]);
    const repack_layout * l = layout_of(a->type);
    const size_t rs = a->nb[1];
    const int64_t nblk = a->ne[0] / ggml_blck_size(a->type), G = a->ne[1] / 8;
    for (int64_t r = r0; r < r1;) {
        char * out = (char *)dst + (r - r0) * rs;
        const char * in = (const char *)a->data + r * rs;
        if (r / 8 < G) {
            const int n = (int)std::min<int64_t>(8, r1 - r);
            l->unpack_group(in, nblk, n, out, rs);
            r += n;
        } else { // the plain tail
            std::memcpy(out, in, (r1 - r) * rs);
            r = r1;
        }
    }
}

void ggml_cpu_gemv_repacked(ggml_type type, int64_t K, const void * x, int64_t n_groups, const void * y, float * s,
                            size_t bs) {
    switch (type) {
        case GGML_TYPE_Q4_0:
            ggml_cpu_gemv_q4_0x8(K, x, n_groups, y, s, bs);
            break;
        case GGML_TYPE_Q4_K:
            ggml_cpu_gemv_q4_Kx8(K, x, n_groups, y, s, bs);
            break;
        case GGML_TYPE_Q6_K:
            ggml_cpu_gemv_q6_Kx8(K, x, n_groups, y, s, bs);
            break;
        default:
            GGML_ABORT("no repacked mat-vec for %s", ggml_type_name(type));
    }
}
