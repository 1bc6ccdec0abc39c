// mix.cpp - llama.cpp's per-tensor type choice (llama_tensor_get_type, llama arch, no imatrix).
#include "mix.h"

#include <cstring>

namespace {

bool contains(const std::string & s, const char * what) { return s.find(what) != std::string::npos; }

bool ends_with(const std::string & s, const char * suffix) {
    const size_t n = strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// an integer hyperparameter "<arch>.<key>" (scalar of any integer type), or def
int64_t get_int(const gguf_context * g, const std::string & key, int64_t def) {
    const int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return def;
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT8:  return gguf_get_val_u8(g, id);
        case GGUF_TYPE_INT8:   return gguf_get_val_i8(g, id);
        case GGUF_TYPE_UINT16: return gguf_get_val_u16(g, id);
        case GGUF_TYPE_INT16:  return gguf_get_val_i16(g, id);
        case GGUF_TYPE_UINT32: return gguf_get_val_u32(g, id);
        case GGUF_TYPE_INT32:  return gguf_get_val_i32(g, id);
        case GGUF_TYPE_UINT64: return (int64_t) gguf_get_val_u64(g, id);
        case GGUF_TYPE_INT64:  return gguf_get_val_i64(g, id);
        default:               return def;
    }
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third one between
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama.cpp's replacement when ne[0] is not a multiple of the chosen type's block (it uses iq4_nl for
// q2_K / q3_K; this library has no iq4_nl, q4_0 has the same size and block)
ggml_type fallback_type(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K: return GGML_TYPE_Q4_0;
        case GGML_TYPE_Q4_K: return GGML_TYPE_Q5_0;
        case GGML_TYPE_Q5_K: return GGML_TYPE_Q5_1;
        case GGML_TYPE_Q6_K: return GGML_TYPE_Q8_0;
        default:             return GGML_TYPE_F16;
    }
}

}  // namespace

quant_mixer::quant_mixer(const gguf_context * g, const llm_ftype_info & fi, bool pure) : m_fi(fi), m_pure(pure) {
    const int64_t arch_id = gguf_find_key(g, "general.architecture");
    const std::string arch =
        arch_id >= 0 && gguf_get_kv_type(g, arch_id) == GGUF_TYPE_STRING ? gguf_get_val_str(g, arch_id) : "llama";
    const int64_t n_tensors = gguf_get_n_tensors(g);
    int n_ffn_down_tensors = 0;
    for (int64_t i = 0; i < n_tensors; ++i) {
        const std::string name = gguf_get_tensor_name(g, i);
        if (name == "output.weight") m_has_output = true;
        // llama.cpp counts the V projections, fused (attn_qkv) or not
        if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight")) ++m_n_attention_wv;
        if (contains(name, "ffn_down")) ++n_ffn_down_tensors;
    }
    m_n_layer = (int) get_int(g, arch + ".block_count", n_ffn_down_tensors);
    const int64_t n_head = get_int(g, arch + ".attention.head_count", 0);
    const int64_t n_head_kv = get_int(g, arch + ".attention.head_count_kv", n_head);
    m_n_gqa = n_head > 0 && n_head_kv > 0 ? (int) (n_head / n_head_kv) : 1;
    m_is_70b = m_n_layer == 80 && n_head > 0 && n_head_kv > 0 && n_head != n_head_kv;
    m_n_ffn_down = m_n_layer;  // llama.cpp: n_ffn_down = n_layer
}

// The mix proper (llama_tensor_get_type for the llama architecture, the non-IQ file types).
ggml_type quant_mixer::mix_type(const std::string & name, const int64_t ne[4], ggml_type type) {
    (void) ne;
    const llm_ftype ft = m_fi.ftype;
    if (name == "output.weight" || (!m_has_output && name == "token_embd.weight")) {
        // q6_K unless the file type is q8_0 (a row that q6_K cannot block goes to q8_0 in the fallback)
        if (type != GGML_TYPE_Q8_0) type = GGML_TYPE_Q6_K;
    } else if (contains(name, "attn_v.weight")) {
        const int i = m_i_attention_wv, n = m_n_attention_wv;
        if (ft == LLM_FTYPE_MOSTLY_Q2_K) {
            type = m_n_gqa >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
        } else if (ft == LLM_FTYPE_MOSTLY_Q3_K_M) {
            type = i < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
        } else if (ft == LLM_FTYPE_MOSTLY_Q3_K_L) {
            type = GGML_TYPE_Q5_K;
        } else if ((ft == LLM_FTYPE_MOSTLY_Q4_K_M || ft == LLM_FTYPE_MOSTLY_Q5_K_M) && use_more_bits(i, n)) {
            type = GGML_TYPE_Q6_K;
        } else if (ft == LLM_FTYPE_MOSTLY_Q4_K_S && i < 4) {
            type = GGML_TYPE_Q5_K;
        }
        // 70B: 8 heads share each V row, so the tensor is small and more bits cost little
        if (m_is_70b && (type == GGML_TYPE_Q3_K || type == GGML_TYPE_Q4_K)) type = GGML_TYPE_Q5_K;
        ++m_i_attention_wv;
    } else if (contains(name, "ffn_down")) {
        const int i = m_i_ffn_down, n = m_n_ffn_down;
        if (ft == LLM_FTYPE_MOSTLY_Q2_K) {
            type = GGML_TYPE_Q3_K;
        } else if (ft == LLM_FTYPE_MOSTLY_Q3_K_M) {
            type = i < n / 16 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
        } else if (ft == LLM_FTYPE_MOSTLY_Q3_K_L) {
            type = GGML_TYPE_Q5_K;
        } else if (ft == LLM_FTYPE_MOSTLY_Q4_K_M) {
            if (use_more_bits(i, n)) type = GGML_TYPE_Q6_K;
        } else if (ft == LLM_FTYPE_MOSTLY_Q4_K_S && i < n / 8) {
            type = GGML_TYPE_Q5_K;
        } else if (ft == LLM_FTYPE_MOSTLY_Q5_K_M && use_more_bits(i, n)) {
            type = GGML_TYPE_Q6_K;
        }
        ++m_i_ffn_down;
    } else if (contains(name, "attn_output.weight")) {
        if (ft == LLM_FTYPE_MOSTLY_Q2_K) type = GGML_TYPE_Q3_K;
        else if (ft == LLM_FTYPE_MOSTLY_Q3_K_M) type = GGML_TYPE_Q4_K;
        else if (ft == LLM_FTYPE_MOSTLY_Q3_K_L) type = GGML_TYPE_Q5_K;
    } else if (contains(name, "attn_qkv.weight")) {  // fused QKV (not in llama files; as llama.cpp)
        if (ft == LLM_FTYPE_MOSTLY_Q3_K_M || ft == LLM_FTYPE_MOSTLY_Q3_K_L) type = GGML_TYPE_Q4_K;
        else if (ft == LLM_FTYPE_MOSTLY_Q4_K_M) type = GGML_TYPE_Q5_K;
        else if (ft == LLM_FTYPE_MOSTLY_Q5_K_M) type = GGML_TYPE_Q6_K;
    }
    return type;
}

quant_choice quant_mixer::choose(const std::string & name, int n_dims, const int64_t ne[4], ggml_type src_type) {
    quant_choice c{src_type, src_type, false, false, {}};
    const ggml_type_traits * st = ggml_get_type_traits(src_type);
    // as llama.cpp: weight matrices only; norms and 1-D tensors stay as they are
    bool quantize = ends_with(name, "weight") && n_dims >= 2 && st->to_float != nullptr;
    quantize = quantize && !contains(name, "_norm.weight") && !contains(name, "ffn_gate_inp.weight") &&
               !contains(name, "pos_embd") && !contains(name, "token_types");
    if (!quantize) {
        if (n_dims == 1 && src_type == GGML_TYPE_F16) c.type = c.wanted = GGML_TYPE_F32;  // 1-D tensors in f32
        return c;
    }
    c.quantize = true;
    ggml_type type = m_fi.type;
    if (!m_pure && ggml_is_quantized(type)) type = mix_type(name, ne, type);
    c.wanted = c.type = type;
    if (ne[0] % ggml_blck_size(type) != 0) {
        ggml_type fb = fallback_type(type);
        if (ne[0] % ggml_blck_size(fb) != 0) fb = GGML_TYPE_F16;
        c.type = fb;
        c.fallback = true;
        c.why = "tensor '" + name + "': ne[0] = " + std::to_string(ne[0]) + " is not a multiple of " +
                std::to_string(ggml_blck_size(type)) + " (the " + ggml_type_name(type) + " block): using " +
                ggml_type_name(fb) + " instead of " + ggml_type_name(type);
    }
    return c;
}
