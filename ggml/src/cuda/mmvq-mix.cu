// mmvq-mix.cu - q/k/v groups whose v weight has another type than q and k: the K-quant mixes of llama.cpp's
// quantize (examples/quantize/mix.cpp) give attn_v more bits in some layers (Q4_K_M / Q5_K_M: q6_K in half of them,
// Q4_K_S and Q3_K_M / _L: q5_K, Q2_K: q4_K or q3_K). One launch for the three, with the rope + KV-store epilogue,
// instead of a q/k pair, a lone v mat-vec and a rope kernel (mmvq-t.cuh, k_qt_group).
#include "mmvq-t.cuh"

ggml_cuda_qt_group_fn ggml_cuda_qt_group_mixed(ggml_type qk, ggml_type v) {
#define QT_MIX(A, B)                                                                                                   \
    if (qk == A::type && v == B::type) return qt_group<A, B>;
    QT_MIX(qt_q4_K, qt_q6_K)
    QT_MIX(qt_q5_K, qt_q6_K)
    QT_MIX(qt_q4_K, qt_q5_K)
    QT_MIX(qt_q3_K, qt_q5_K)
    QT_MIX(qt_q3_K, qt_q4_K)
    QT_MIX(qt_q2_K, qt_q4_K)
    QT_MIX(qt_q2_K, qt_q3_K)
#undef QT_MIX
    return nullptr;
}
