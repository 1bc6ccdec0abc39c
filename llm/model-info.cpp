// model-info.cpp - file-type names and the per-type tensor summary (see model-info.h).
#include "model-info.h"

#include "llm-impl.h"
#include "llm.h"

#include <cctype>

namespace {

// llama-quantize's listing order
const llm_ftype_info k_ftypes[] = {
    {LLM_FTYPE_MOSTLY_Q4_0,   "Q4_0",   "Q4_0",          GGML_TYPE_Q4_0},
    {LLM_FTYPE_MOSTLY_Q4_1,   "Q4_1",   "Q4_1",          GGML_TYPE_Q4_1},
    {LLM_FTYPE_MOSTLY_Q5_0,   "Q5_0",   "Q5_0",          GGML_TYPE_Q5_0},
    {LLM_FTYPE_MOSTLY_Q5_1,   "Q5_1",   "Q5_1",          GGML_TYPE_Q5_1},
    {LLM_FTYPE_MOSTLY_Q2_K,   "Q2_K",   "Q2_K - Medium", GGML_TYPE_Q2_K},
    {LLM_FTYPE_MOSTLY_Q3_K_S, "Q3_K_S", "Q3_K - Small",  GGML_TYPE_Q3_K},
    {LLM_FTYPE_MOSTLY_Q3_K_M, "Q3_K_M", "Q3_K - Medium", GGML_TYPE_Q3_K},
    {LLM_FTYPE_MOSTLY_Q3_K_L, "Q3_K_L", "Q3_K - Large",  GGML_TYPE_Q3_K},
    {LLM_FTYPE_MOSTLY_Q4_K_S, "Q4_K_S", "Q4_K - Small",  GGML_TYPE_Q4_K},
    {LLM_FTYPE_MOSTLY_Q4_K_M, "Q4_K_M", "Q4_K - Medium", GGML_TYPE_Q4_K},
    {LLM_FTYPE_MOSTLY_Q5_K_S, "Q5_K_S", "Q5_K - Small",  GGML_TYPE_Q5_K},
    {LLM_FTYPE_MOSTLY_Q5_K_M, "Q5_K_M", "Q5_K - Medium", GGML_TYPE_Q5_K},
    {LLM_FTYPE_MOSTLY_Q6_K,   "Q6_K",   "Q6_K",          GGML_TYPE_Q6_K},
    {LLM_FTYPE_MOSTLY_Q8_0,   "Q8_0",   "Q8_0",          GGML_TYPE_Q8_0},
    {LLM_FTYPE_MOSTLY_F16,    "F16",    "F16",           GGML_TYPE_F16},
    {LLM_FTYPE_ALL_F32,       "F32",    "all F32",       GGML_TYPE_F32},
};

std::string upper(const std::string & s) {
    std::string u = s;
    for (char & c : u) c = (char) std::toupper((unsigned char) c);
    return u;
}

// general.file_type is a u32 in llama.cpp's files; accept any integer type
int32_t read_ftype(const gguf_context * g) {
    const int64_t id = gguf_find_key(g, "general.file_type");
    if (id < 0) return -1;
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT8:  return gguf_get_val_u8(g, id);
        case GGUF_TYPE_INT8:   return gguf_get_val_i8(g, id);
        case GGUF_TYPE_UINT16: return gguf_get_val_u16(g, id);
        case GGUF_TYPE_INT16:  return gguf_get_val_i16(g, id);
        case GGUF_TYPE_UINT32: return (int32_t) gguf_get_val_u32(g, id);
        case GGUF_TYPE_INT32:  return gguf_get_val_i32(g, id);
        case GGUF_TYPE_UINT64: return (int32_t) gguf_get_val_u64(g, id);
        case GGUF_TYPE_INT64:  return (int32_t) gguf_get_val_i64(g, id);
        default:               return -1;
    }
}

}  // namespace

const llm_ftype_info * llm_ftype_list(size_t * n) {
    *n = sizeof(k_ftypes) / sizeof(k_ftypes[0]);
    return k_ftypes;
}

const llm_ftype_info * llm_ftype_from_name(const std::string & name) {
    std::string u = upper(name);
    if (u == "Q3_K" || u == "Q4_K" || u == "Q5_K") u += "_M";  // llama-quantize's aliases
    for (const llm_ftype_info & fi : k_ftypes) {
        if (u == fi.name) return &fi;
    }
    return nullptr;
}

const llm_ftype_info * llm_ftype_from_value(int32_t ftype) {
    for (const llm_ftype_info & fi : k_ftypes) {
        if (ftype == fi.ftype) return &fi;
    }
    return nullptr;
}

std::string llm_ftype_name(int32_t ftype) {
    if (ftype >= 0 && (ftype & LLM_FTYPE_GUESSED)) return llm_ftype_name(ftype & ~LLM_FTYPE_GUESSED) + " (guessed)";
    const llm_ftype_info * fi = llm_ftype_from_value(ftype);
    return fi ? fi->desc : "unknown, may not work";
}

void llm_type_summary::add(ggml_type type, uint64_t nel, uint64_t nbytes) {
    if ((int) type >= 0 && (int) type < GGML_TYPE_COUNT) ++n_tensors[type];
    n_elements += nel;
    n_bytes += nbytes;
}

int32_t llm_type_summary::guess_ftype() const {
    // as llama.cpp's loader: the most common type over all tensors (the first one on a tie)
    int best = -1;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (n_tensors[t] > 0 && (best < 0 || n_tensors[t] > n_tensors[best])) best = t;
    }
    int32_t ftype = LLM_FTYPE_ALL_F32;
    switch (best) {
        case GGML_TYPE_F16:  ftype = LLM_FTYPE_MOSTLY_F16; break;
        case GGML_TYPE_Q4_0: ftype = LLM_FTYPE_MOSTLY_Q4_0; break;
        case GGML_TYPE_Q4_1: ftype = LLM_FTYPE_MOSTLY_Q4_1; break;
        case GGML_TYPE_Q5_0: ftype = LLM_FTYPE_MOSTLY_Q5_0; break;
        case GGML_TYPE_Q5_1: ftype = LLM_FTYPE_MOSTLY_Q5_1; break;
        case GGML_TYPE_Q8_0: ftype = LLM_FTYPE_MOSTLY_Q8_0; break;
        case GGML_TYPE_Q2_K: ftype = LLM_FTYPE_MOSTLY_Q2_K; break;
        case GGML_TYPE_Q3_K: ftype = LLM_FTYPE_MOSTLY_Q3_K_M; break;
        case GGML_TYPE_Q4_K: ftype = LLM_FTYPE_MOSTLY_Q4_K_M; break;
        case GGML_TYPE_Q5_K: ftype = LLM_FTYPE_MOSTLY_Q5_K_M; break;
        case GGML_TYPE_Q6_K: ftype = LLM_FTYPE_MOSTLY_Q6_K; break;
        default: break;
    }
    return ftype | LLM_FTYPE_GUESSED;
}

llm_type_summary llm_type_summary_from_gguf(const gguf_context * g) {
    llm_type_summary s;
    const int64_t n = gguf_get_n_tensors(g);
    for (int64_t i = 0; i < n; ++i) {
        uint64_t nel = 1;
        for (int d = 0; d < GGML_MAX_DIMS; ++d) nel *= (uint64_t) gguf_get_tensor_ne(g, i, d);
        s.add(gguf_get_tensor_type(g, i), nel, gguf_get_tensor_size(g, i));
    }
    s.version = gguf_get_version(g);
    s.ftype = read_ftype(g);
    if (s.ftype < 0 && n > 0) s.ftype = s.guess_ftype();
    return s;
}

llm_type_summary llm_model_type_summary(const llm_model * model) { return llm_type_summary_from_gguf(model->gguf); }

std::string llm_format_size(uint64_t bytes) {
    char buf[64];
    if (bytes < (1ull << 30)) snprintf(buf, sizeof(buf), "%.2f MiB", bytes / 1048576.0);
    else snprintf(buf, sizeof(buf), "%.2f GiB", bytes / 1073741824.0);
    return buf;
}

void llm_type_summary_print(FILE * f, const llm_type_summary & s, const char * prefix) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (s.n_tensors[t] > 0) {
            fprintf(f, "%s- type %4s: %4lld tensors\n", prefix, ggml_type_name((ggml_type) t), (long long) s.n_tensors[t]);
        }
    }
    if (s.version) fprintf(f, "%sfile format = GGUF V%u%s\n", prefix, s.version, s.version == GGUF_VERSION ? " (latest)" : "");
    if (s.ftype >= 0) fprintf(f, "%sfile type   = %s\n", prefix, llm_ftype_name(s.ftype).c_str());
    fprintf(f, "%sfile size   = %s (%.2f BPW)\n", prefix, llm_format_size(s.n_bytes).c_str(), s.bpw());
}

std::string llm_model_desc_ftype(const llm_model * model) {
    // llm_model_desc is "llama <size> <dominant tensor type>": keep arch and size, name the file type
    std::string desc = llm_model_desc(model);
    const size_t sp = desc.rfind(' ');
    if (sp != std::string::npos) desc.resize(sp);
    const llm_type_summary s = llm_model_type_summary(model);
    return desc + " " + llm_ftype_name(s.ftype);
}
