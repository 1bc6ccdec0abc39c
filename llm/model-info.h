// model-info.h - the file-type names of llama.cpp (general.file_type) and the per-type tensor summary
// the tools print for a model, as llama.cpp's loader does:
//
//   - type  f32:    3 tensors
//   - type q4_K:    6 tensors
//   - type q6_K:    2 tensors
//   file type   = Q4_K - Medium
//   file size   = 0.54 MiB (5.41 BPW)
//
// Usage:
//   llm_type_summary s = llm_type_summary_from_gguf(g);   // or llm_model_type_summary(model)
//   llm_type_summary_print(stderr, s, "");                 // the lines above, each after a prefix
//   const llm_ftype_info * fi = llm_ftype_from_name("q4_k_m");   // quantize's TYPE argument
//
// BPW = 8 * (sum of tensor data bytes) / (sum of tensor elements), over every tensor of the file.
#pragma once

#include "ggml.h"
#include "gguf.h"

#include <cstdint>
#include <cstdio>
#include <string>

struct llm_model;

// llama.cpp's llama_ftype values (general.file_type) for the types this library implements
enum llm_ftype : int32_t {
    LLM_FTYPE_ALL_F32       = 0,
    LLM_FTYPE_MOSTLY_F16    = 1,
    LLM_FTYPE_MOSTLY_Q4_0   = 2,
    LLM_FTYPE_MOSTLY_Q4_1   = 3,
    LLM_FTYPE_MOSTLY_Q8_0   = 7,
    LLM_FTYPE_MOSTLY_Q5_0   = 8,
    LLM_FTYPE_MOSTLY_Q5_1   = 9,
    LLM_FTYPE_MOSTLY_Q2_K   = 10,
    LLM_FTYPE_MOSTLY_Q3_K_S = 11,
    LLM_FTYPE_MOSTLY_Q3_K_M = 12,
    LLM_FTYPE_MOSTLY_Q3_K_L = 13,
    LLM_FTYPE_MOSTLY_Q4_K_S = 14,
    LLM_FTYPE_MOSTLY_Q4_K_M = 15,
    LLM_FTYPE_MOSTLY_Q5_K_S = 16,
    LLM_FTYPE_MOSTLY_Q5_K_M = 17,
    LLM_FTYPE_MOSTLY_Q6_K   = 18,
    LLM_FTYPE_GUESSED       = 1024,  // or-ed in when the type was guessed from the tensors
};

struct llm_ftype_info {
    llm_ftype    ftype;
    const char * name;  // quantize's name: "Q4_K_M"
    const char * desc;  // llama.cpp's llama_model_ftype_name: "Q4_K - Medium"
    ggml_type    type;  // the default tensor type of the mix
};

// All file types above, in llama-quantize's listing order; n receives the count.
const llm_ftype_info * llm_ftype_list(size_t * n);
// Case-insensitive; also the aliases Q3_K = Q3_K_M, Q4_K = Q4_K_M, Q5_K = Q5_K_M. nullptr if unknown.
const llm_ftype_info * llm_ftype_from_name(const std::string & name);
const llm_ftype_info * llm_ftype_from_value(int32_t ftype);  // nullptr if unknown
// "Q4_K - Medium"; "Q4_K - Medium (guessed)" with LLM_FTYPE_GUESSED; "unknown, may not work" otherwise
std::string llm_ftype_name(int32_t ftype);

struct llm_type_summary {
    int64_t  n_tensors[GGML_TYPE_COUNT] = {};  // tensors per ggml type
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;                      // tensor data bytes (no padding, no header)
    int32_t  ftype = -1;                       // general.file_type, or a guess | LLM_FTYPE_GUESSED; -1: none
    uint32_t version = 0;                      // GGUF version (0: not from a file)

    void   add(ggml_type type, uint64_t n_elements, uint64_t n_bytes);
    double bpw() const { return n_elements ? 8.0 * (double) n_bytes / (double) n_elements : 0.0; }
    // llama.cpp's guess when there is no general.file_type: the ftype of the most common tensor type
    int32_t guess_ftype() const;
};

llm_type_summary llm_type_summary_from_gguf(const gguf_context * g);
llm_type_summary llm_model_type_summary(const llm_model * model);

// "0.54 MiB" below 1 GiB, "3.80 GiB" above (llama.cpp's file size line)
std::string llm_format_size(uint64_t bytes);
// The lines shown at the top of this file, each preceded by prefix ("" or e.g. "main: ").
void llm_type_summary_print(FILE * f, const llm_type_summary & s, const char * prefix);
// "llama 1.2M Q4_K - Medium": llm_model_desc with the file type's name in place of the tensor type
std::string llm_model_desc_ftype(const llm_model * model);
