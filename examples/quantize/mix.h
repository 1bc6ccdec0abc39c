// mix.h - the per-tensor type choice of quantize: llama.cpp's llama_tensor_get_type for the llama
// architecture without an importance matrix (the _S/_M/_L mixes, output.weight in q6_K, the fallback
// when a row is not a multiple of the block).
//
//   quant_mixer mix(gguf, *llm_ftype_from_name("Q4_K_M"), pure);   // reads n_layer / heads, counts attn_v
//   for each tensor, in llama.cpp's order (quantize.cpp: llama_order):
//       quant_choice c = mix.choose(name, n_dims, ne, src_type);
//       if (c.fallback) warn(c.why);                              // c.type differs from c.wanted
#pragma once

#include "model-info.h"

#include <string>

struct quant_choice {
    ggml_type   type;             // what the tensor is written as
    ggml_type   wanted;           // what the mix asked for (== type unless it fell back)
    bool        quantize;         // a weight matrix the mix chose a type for (false: kept as it is / f32)
    bool        fallback = false; // wanted's block does not divide ne[0]
    std::string why;              // the fallback, in words (for the warning)
};

class quant_mixer {
public:
    quant_mixer(const gguf_context * g, const llm_ftype_info & fi, bool pure);
    // Call for every tensor in file order (the attn_v / ffn_down counters advance).
    quant_choice choose(const std::string & name, int n_dims, const int64_t ne[4], ggml_type src_type);

    int n_layer() const { return m_n_layer; }
    int n_gqa() const { return m_n_gqa; }

private:
    ggml_type mix_type(const std::string & name, const int64_t ne[4], ggml_type type);

    const llm_ftype_info & m_fi;
    bool m_pure;
    bool m_has_output = false;
    bool m_is_70b = false;        // llama.cpp's LLM_TYPE_70B: 80 layers with grouped-query attention
    int  m_n_layer = 0;
    int  m_n_gqa = 1;             // n_head / n_head_kv
    int  m_n_attention_wv = 0;
    int  m_i_attention_wv = 0;
    int  m_n_ffn_down = 0;
    int  m_i_ffn_down = 0;
};
