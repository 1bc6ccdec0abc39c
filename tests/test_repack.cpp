// test_repack.cpp - the CPU_REPACK buffer type (cpu/repack.h): q4_0 / q4_K / q6_K matrices stored in 8-row groups. What
// goes in through ggml_backend_tensor_set comes back out of _get byte for byte (whole and partial writes and
// reads), the stored bytes really are the group layout, other types and shapes stay plain, and the CPU backend
// refuses every op but mul_mat's weight on a repacked tensor. The mat-muls: test_mul_mat.cpp.
#include "cpu/repack.h"
#include "ggml-backend.h"
#include "tensor_test_util.h"

#include <cstring>
#include "doctest_cstr.h"
#include <random>
#include <vector>

namespace {

struct repacked {
    ggml_context * ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_tensor * t = nullptr;
    repacked(ggml_type type, int64_t K, int64_t M, int64_t M2 = 1) {
        ctx = ggml_init({ggml_tensor_overhead() * 4, nullptr, true});
        t = ggml_new_tensor_3d(ctx, type, K, M, M2);
        buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_repack_buffer_type());
        REQUIRE(buf);
    }
    ~repacked() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
};

std::vector<uint8_t> random_rows(ggml_type type, int64_t K, int64_t M, std::mt19937 & rng) {
    ggml_context * ctx = ggml_init({size_t(16) << 20, nullptr, false});
    ggml_tensor * p = ggml_new_tensor_2d(ctx, type, K, M);
    fill(p, rng);
    std::vector<uint8_t> v((const uint8_t *)p->data, (const uint8_t *)p->data + ggml_nbytes(p));
    ggml_free(ctx);
    return v;
}

} // namespace

TEST_CASE("repack q4_0: set/get round trip, the stored group layout, plain tail rows") {
    std::mt19937 rng(5);
    for (int64_t K : {int64_t(32), int64_t(96), int64_t(512)})
        for (int64_t M : {int64_t(8), int64_t(15), int64_t(24), int64_t(203)}) {
            CAPTURE(K);
            CAPTURE(M);
            const std::vector<uint8_t> plain = random_rows(GGML_TYPE_Q4_0, K, M, rng);
            repacked r(GGML_TYPE_Q4_0, K, M);
            REQUIRE(ggml_cpu_is_repacked(r.t));
            ggml_backend_tensor_set(r.t, plain.data(), 0, plain.size());
            std::vector<uint8_t> back(plain.size());
            ggml_backend_tensor_get(r.t, back.data(), 0, back.size());
            CHECK(back == plain);

            // the stored bytes: group block j of group g holds row 8g + r's scale at d[r] and its qs[4k + i] at
            // qs[32k + 4r + i]; rows past the last whole group are plain
            const size_t rs = r.t->nb[1];
            const int64_t nblk = K / 32, G = M / 8;
            int wrong = 0;
            for (int64_t g = 0; g < G; ++g)
                for (int64_t j = 0; j < nblk; ++j) {
                    const auto * gb = (const block_q4_0x8 *)((const char *)r.t->data + g * 8 * rs) + j;
                    for (int rr = 0; rr < 8; ++rr) {
                        const auto * pb = (const block_q4_0 *)(plain.data() + (8 * g + rr) * rs) + j;
                        if (std::memcmp(&gb->d[rr], &pb->d, 2) != 0) ++wrong;
                        for (int k = 0; k < 4; ++k)
                            for (int i = 0; i < 4; ++i)
                                if (gb->qs[32 * k + 4 * rr + i] != pb->qs[4 * k + i]) ++wrong;
                    }
                }
            CHECK(wrong == 0);
            CHECK(std::memcmp((const char *)r.t->data + G * 8 * rs, plain.data() + G * 8 * rs, (M - G * 8) * rs) == 0);

            // partial write and read (a byte range across a group boundary)
            const size_t off = rs * 5 + 7, len = std::min<size_t>(plain.size() - off, rs * 6 + 3);
            std::vector<uint8_t> patch(len);
            for (auto & x : patch)
                x = (uint8_t)rng();
            ggml_backend_tensor_set(r.t, patch.data(), off, len);
            std::vector<uint8_t> want = plain;
            std::memcpy(want.data() + off, patch.data(), len);
            std::vector<uint8_t> part(len);
            ggml_backend_tensor_get(r.t, part.data(), off, len);
            CHECK(std::memcmp(part.data(), patch.data(), len) == 0);
            ggml_backend_tensor_get(r.t, back.data(), 0, back.size());
            CHECK(back == want);
        }
}

TEST_CASE("repack q4_K: set/get round trip (scales and mins re-encoded and back), the stored group layout") {
    std::mt19937 rng(6);
    for (int64_t K : {int64_t(256), int64_t(768)})
        for (int64_t M : {int64_t(8), int64_t(21), int64_t(64)}) {
            CAPTURE(K);
            CAPTURE(M);
            std::vector<uint8_t> plain = random_rows(GGML_TYPE_Q4_K, K, M, rng);
            const size_t rs = ggml_row_size(GGML_TYPE_Q4_K, K);
            // every scale and min value 0..63 somewhere: random scale bytes (the 12 bytes are 16 six-bit fields)
            for (int64_t m = 0; m < M; ++m)
                for (int64_t j = 0; j < K / 256; ++j) {
                    auto * b = (block_q4_K *)(plain.data() + m * rs) + j;
                    for (auto & x : b->scales)
                        x = (uint8_t)rng();
                }
            repacked r(GGML_TYPE_Q4_K, K, M);
            REQUIRE(ggml_cpu_is_repacked(r.t));
            ggml_backend_tensor_set(r.t, plain.data(), 0, plain.size());
            std::vector<uint8_t> back(plain.size());
            ggml_backend_tensor_get(r.t, back.data(), 0, back.size());
            CHECK(back == plain);
            int wrong = 0; // qs: row r's byte 32c + 4k + i at 256c + 32k + 4r + i; d, dmin per row
            for (int64_t g = 0; g < M / 8; ++g)
                for (int64_t j = 0; j < K / 256; ++j) {
                    const auto * gb = (const block_q4_Kx8 *)((const char *)r.t->data + g * 8 * rs) + j;
                    for (int rr = 0; rr < 8; ++rr) {
                        const auto * pb = (const block_q4_K *)(plain.data() + (8 * g + rr) * rs) + j;
                        if (std::memcmp(&gb->d[rr], &pb->d, 2) != 0 || std::memcmp(&gb->dmin[rr], &pb->dmin, 2) != 0)
                            ++wrong;
                        for (int c = 0; c < 4; ++c)
                            for (int k = 0; k < 8; ++k)
                                for (int i = 0; i < 4; ++i)
                                    if (gb->qs[256 * c + 32 * k + 4 * rr + i] != pb->qs[32 * c + 4 * k + i]) ++wrong;
                    }
                }
            CHECK(wrong == 0);
        }
}

TEST_CASE("repack q6_K: set/get round trip, the stored group layout (codes of 4 weights in 3 bytes), partial writes") {
    std::mt19937 rng(7);
    for (int64_t K : {int64_t(256), int64_t(768)})
        for (int64_t M : {int64_t(8), int64_t(21), int64_t(64)}) {
            CAPTURE(K);
            CAPTURE(M);
            std::vector<uint8_t> plain = random_rows(GGML_TYPE_Q6_K, K, M, rng);
            const size_t rs = ggml_row_size(GGML_TYPE_Q6_K, K);
            for (int64_t m = 0; m < M; ++m) // every bit pattern of ql, qh and the scales
                for (int64_t j = 0; j < K / 256; ++j) {
                    auto * b = (block_q6_K *)(plain.data() + m * rs) + j;
                    for (auto & x : b->ql)
                        x = (uint8_t)rng();
                    for (auto & x : b->qh)
                        x = (uint8_t)rng();
                    for (auto & x : b->scales)
                        x = (int8_t)rng();
                }
            repacked r(GGML_TYPE_Q6_K, K, M);
            REQUIRE(ggml_cpu_is_repacked(r.t));
            ggml_backend_tensor_set(r.t, plain.data(), 0, plain.size());
            std::vector<uint8_t> back(plain.size());
            ggml_backend_tensor_get(r.t, back.data(), 0, back.size());
            CHECK(back == plain);
            // group g of row r, weight 16g + 4v + i: its code u (ggml's dequantize_row_q6_K order: weight 128n + l +
            // 32m from ql[64n + l (+ 32 for odd m)], low nibble for m < 2, and qh[32n + l] >> 2m) in bits 0..5 of
            // vector v's byte 4r + i for v < 3; u_3's bits 2v..2v+1 in bits 6..7 of vector v's byte
            int wrong = 0;
            for (int64_t g8 = 0; g8 < M / 8; ++g8)
                for (int64_t j = 0; j < K / 256; ++j) {
                    const auto * gb = (const block_q6_Kx8 *)((const char *)r.t->data + g8 * 8 * rs) + j;
                    for (int rr = 0; rr < 8; ++rr) {
                        const auto * pb = (const block_q6_K *)(plain.data() + (8 * g8 + rr) * rs) + j;
                        if (std::memcmp(&gb->d[rr], &pb->d, 2) != 0) ++wrong;
                        uint8_t u[256];
                        for (int n = 0; n < 2; ++n)
                            for (int l = 0; l < 32; ++l) {
                                const uint8_t * ql = pb->ql + 64 * n;
                                const uint8_t h = pb->qh[32 * n + l];
                                u[128 * n + l] = (uint8_t)((ql[l] & 15) | (h & 3) << 4);
                                u[128 * n + l + 32] = (uint8_t)((ql[l + 32] & 15) | ((h >> 2) & 3) << 4);
                                u[128 * n + l + 64] = (uint8_t)((ql[l] >> 4) | ((h >> 4) & 3) << 4);
                                u[128 * n + l + 96] = (uint8_t)((ql[l + 32] >> 4) | ((h >> 6) & 3) << 4);
                            }
                        for (int g = 0; g < 16; ++g) {
                            if (gb->sc[g / 2][2 * rr + g % 2] != pb->scales[g]) ++wrong;
                            for (int i = 0; i < 4; ++i) {
                                const int u3 = u[16 * g + 12 + i];
                                for (int v = 0; v < 3; ++v) {
                                    const int want = u[16 * g + 4 * v + i] | ((u3 >> (2 * v)) & 3) << 6;
                                    if (gb->qs[g][v][4 * rr + i] != want) ++wrong;
                                }
                            }
                        }
                    }
                }
            CHECK(wrong == 0);
            CHECK(std::memcmp((const char *)r.t->data + M / 8 * 8 * rs, plain.data() + M / 8 * 8 * rs, (M % 8) * rs) ==
                  0);
            // a partial write across a group boundary
            const size_t off = rs * 3 + 11, len = std::min<size_t>(plain.size() - off, rs * 7 + 5);
            std::vector<uint8_t> patch(len);
            for (auto & x : patch)
                x = (uint8_t)rng();
            ggml_backend_tensor_set(r.t, patch.data(), off, len);
            std::memcpy(plain.data() + off, patch.data(), len);
            ggml_backend_tensor_get(r.t, back.data(), 0, back.size());
            CHECK(back == plain);
        }
}

TEST_CASE("repack: other types, fewer than 8 rows and 3-D tensors are stored plain") {
    std::mt19937 rng(9);
    {
        repacked r(GGML_TYPE_Q4_0, 64, 7);
        CHECK_FALSE(ggml_cpu_is_repacked(r.t));
        const std::vector<uint8_t> plain = random_rows(GGML_TYPE_Q4_0, 64, 7, rng);
        ggml_backend_tensor_set(r.t, plain.data(), 0, plain.size());
        CHECK(std::memcmp(r.t->data, plain.data(), plain.size()) == 0);
    }
    {
        repacked r(GGML_TYPE_Q4_0, 64, 8, 2);
        CHECK_FALSE(ggml_cpu_is_repacked(r.t));
    }
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_Q8_0, GGML_TYPE_Q5_K}) {
        repacked r(t, 256, 16);
        CHECK_FALSE(ggml_cpu_is_repacked(r.t));
    }
}

TEST_CASE("repack: the CPU backend runs mul_mat on a repacked weight and refuses other readers") {
    repacked r(GGML_TYPE_Q4_0, 64, 16);
    ggml_context * ctx = ggml_init({size_t(1) << 20, nullptr, true});
    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 3);
    ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    CHECK(ggml_backend_supports_buft(cpu, ggml_backend_cpu_repack_buffer_type()));
    CHECK(ggml_backend_supports_op(cpu, ggml_mul_mat(ctx, r.t, b)));
    CHECK_FALSE(ggml_backend_supports_op(cpu, ggml_get_rows(ctx, r.t, ids)));
    CHECK_FALSE(ggml_backend_supports_op(cpu, ggml_mul_mat(ctx, ggml_view_2d(ctx, r.t, 64, 8, r.t->nb[1], 0), b)));
    CHECK_FALSE(ggml_backend_supports_op(cpu, ggml_cpy(ctx, r.t, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 16))));
    ggml_backend_free(cpu);
    ggml_free(ctx);
}
