// mmq.cu - see mmq.cuh: the function of each type's instance file.
#include "mmq.cuh"

#define MMQ_DECL(name) extern const ggml_cuda_mmq_fns ggml_cuda_mmq_##name;
MMQ_DECL(q8_0)
MMQ_DECL(q4_0)
MMQ_DECL(q4_1)
MMQ_DECL(q5_0)
MMQ_DECL(q5_1)
MMQ_DECL(q2_K)
MMQ_DECL(q3_K)
MMQ_DECL(q4_K)
MMQ_DECL(q5_K)
MMQ_DECL(q6_K)
#undef MMQ_DECL

const ggml_cuda_mmq_fns * ggml_cuda_mmq(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q8_0:
            return &ggml_cuda_mmq_q8_0;
        case GGML_TYPE_Q4_0:
            return &ggml_cuda_mmq_q4_0;
        case GGML_TYPE_Q4_1:
            return &ggml_cuda_mmq_q4_1;
        case GGML_TYPE_Q5_0:
            return &ggml_cuda_mmq_q5_0;
        case GGML_TYPE_Q5_1:
            return &ggml_cuda_mmq_q5_1;
        case GGML_TYPE_Q2_K:
            return &ggml_cuda_mmq_q2_K;
        case GGML_TYPE_Q3_K:
            return &ggml_cuda_mmq_q3_K;
        case GGML_TYPE_Q4_K:
            return &ggml_cuda_mmq_q4_K;
        case GGML_TYPE_Q5_K:
            return &ggml_cuda_mmq_q5_K;
        case GGML_TYPE_Q6_K:
            return &ggml_cuda_mmq_q6_K;
        default:
            return nullptr;
    }
}
