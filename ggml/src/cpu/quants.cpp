// cpu/quants.cpp - the CPU type traits table (see quants.h).
#include "cpu/quants.h"

#include "cpu/common.h"
#include "cpu/ops.h"
#include "ggml-impl.h"

namespace {

template <typename B, void (*Q)(const float *, B *, int64_t)> void from_float(const float * x, void * y, int64_t n) {
    Q(x, (B *)y, n);
}

ggml_cpu_type_traits make(ggml_type vec_dot_type, ggml_from_float_t from_float, ggml_tile_table * tiles,
                          ggml_tile_dot_t tile_decode = nullptr) {
    return {vec_dot_type, from_float, tiles, tile_decode};
}

struct table {
    ggml_cpu_type_traits t[GGML_TYPE_COUNT];
    table() {
        for (auto & e : t)
            e = make(GGML_TYPE_COUNT, nullptr, nullptr);
        t[GGML_TYPE_F32] = make(GGML_TYPE_F32, ggml_get_type_traits(GGML_TYPE_F32)->from_float_ref, nullptr);
        t[GGML_TYPE_F16] = make(GGML_TYPE_F32, ggml_get_type_traits(GGML_TYPE_F16)->from_float_ref, nullptr);
        t[GGML_TYPE_Q8_0] = make(GGML_TYPE_Q8_1, from_float<block_q8_0, quantize_row_q8_0_ref>, &ggml_cpu_tiles_q8_0);
        t[GGML_TYPE_Q8_1] = make(GGML_TYPE_COUNT, from_float<block_q8_1, quantize_row_q8_1>, nullptr);
        t[GGML_TYPE_Q4_0] = make(GGML_TYPE_Q8_1, from_float<block_q4_0, quantize_row_q4_0_ref>, &ggml_cpu_tiles_q4_0,
                                 ggml_cpu_tile_decode_q4_0);
        t[GGML_TYPE_Q4_1] = make(GGML_TYPE_Q8_1, from_float<block_q4_1, quantize_row_q4_1_ref>, &ggml_cpu_tiles_q4_1);
        t[GGML_TYPE_Q5_0] = make(GGML_TYPE_Q8_1, from_float<block_q5_0, quantize_row_q5_0_ref>, &ggml_cpu_tiles_q5_0);
        t[GGML_TYPE_Q5_1] = make(GGML_TYPE_Q8_1, from_float<block_q5_1, quantize_row_q5_1_ref>, &ggml_cpu_tiles_q5_1);
        t[GGML_TYPE_Q2_K] = make(GGML_TYPE_Q8_K, from_float<block_q2_K, quantize_row_q2_K_ref>, &ggml_cpu_tiles_q2_K);
        t[GGML_TYPE_Q3_K] = make(GGML_TYPE_Q8_K, from_float<block_q3_K, quantize_row_q3_K_ref>, &ggml_cpu_tiles_q3_K);
        t[GGML_TYPE_Q4_K] = make(GGML_TYPE_Q8_K, from_float<block_q4_K, quantize_row_q4_K_ref>, &ggml_cpu_tiles_q4_K);
        t[GGML_TYPE_Q5_K] = make(GGML_TYPE_Q8_K, from_float<block_q5_K, quantize_row_q5_K_ref>, &ggml_cpu_tiles_q5_K);
        t[GGML_TYPE_Q6_K] = make(GGML_TYPE_Q8_K, from_float<block_q6_K, quantize_row_q6_K_ref>, &ggml_cpu_tiles_q6_K);
        t[GGML_TYPE_Q8_K] = make(GGML_TYPE_COUNT, from_float<block_q8_K, quantize_row_q8_K>, nullptr);
    }
};

} // namespace

const ggml_cpu_type_traits * ggml_cpu_get_type_traits(ggml_type type) {
    static const table k_table;
    GGML_ASSERT((int)type >= 0 && (int)type < GGML_TYPE_COUNT);
    return &k_table.t[type];
}

bool ggml_cpu_is_weight_type(ggml_type t) {
    return (int)t >= 0 && (int)t < GGML_TYPE_COUNT && ggml_cpu_get_type_traits(t)->vec_dot_type != GGML_TYPE_COUNT;
}
