// gguf.cpp - gguf_context: type tables, key-value and tensor-info accessors and setters.
// Parsing is in gguf-read.cpp, writing in gguf-write.cpp.
#include "gguf-impl.h"

#include <sys/mman.h>

#include <cstring>

// ---------------------------------------------------------------------------------------------
// Type tables.

const char * gguf_type_name(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8:   return "u8";
        case GGUF_TYPE_INT8:    return "i8";
        case GGUF_TYPE_UINT16:  return "u16";
        case GGUF_TYPE_INT16:   return "i16";
        case GGUF_TYPE_UINT32:  return "u32";
        case GGUF_TYPE_INT32:   return "i32";
        case GGUF_TYPE_FLOAT32: return "f32";
        case GGUF_TYPE_BOOL:    return "bool";
        case GGUF_TYPE_STRING:  return "str";
        case GGUF_TYPE_ARRAY:   return "arr";
        case GGUF_TYPE_UINT64:  return "u64";
        case GGUF_TYPE_INT64:   return "i64";
        case GGUF_TYPE_FLOAT64: return "f64";
        default:                return "unknown";
    }
}

size_t gguf_type_size(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8:
        case GGUF_TYPE_INT8:
        case GGUF_TYPE_BOOL:    return 1;
        case GGUF_TYPE_UINT16:
        case GGUF_TYPE_INT16:   return 2;
        case GGUF_TYPE_UINT32:
        case GGUF_TYPE_INT32:
        case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64:
        case GGUF_TYPE_INT64:
        case GGUF_TYPE_FLOAT64: return 8;
        default:                return 0;
    }
}

// ggml's numbering (ggml.h upstream), including types this library does not implement, so errors can
// say "unsupported tensor type 12 (q4_K)". Empty entries were removed upstream.
static const char * const k_ggml_type_names[] = {
    "f32",     "f16",     "q4_0",    "q4_1",   "",       "",       "q5_0",    "q5_1",   "q8_0",  "q8_1",
    "q2_K",    "q3_K",    "q4_K",    "q5_K",   "q6_K",   "q8_K",   "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s",
    "iq4_nl",  "iq3_s",   "iq2_s",   "iq4_xs", "i8",     "i16",    "i32",     "i64",    "f64",   "iq1_m",
    "bf16",    "",        "",        "",       "tq1_0",  "tq2_0",  "",        "",       "",      "mxfp4",
};

const char * gguf_ggml_type_name_any(int32_t type) {
    const int32_t n = (int32_t) (sizeof(k_ggml_type_names) / sizeof(k_ggml_type_names[0]));
    if (type < 0 || type >= n || k_ggml_type_names[type][0] == '\0') {
        return nullptr;
    }
    return k_ggml_type_names[type];
}

bool gguf_tensor_nbytes(ggml_type type, const int64_t * ne, size_t * out) {
    const int64_t blck  = ggml_blck_size(type);
    const size_t  tsize = ggml_type_size(type);
    if (blck <= 0 || tsize == 0 || ne[0] % blck != 0) {
        return false;
    }
    size_t n = (size_t) (ne[0] / blck);
    if (__builtin_mul_overflow(n, tsize, &n)) {
        return false;
    }
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        if (ne[i] < 0 || __builtin_mul_overflow(n, (size_t) ne[i], &n)) {
            return false;
        }
    }
    *out = n;
    return true;
}

void gguf_update_offsets(gguf_context * ctx) {
    uint64_t off = 0;
    for (auto & ti : ctx->infos) {
        ti.offset = off;
        off += ti.size;
        off = (off + ctx->alignment - 1) / ctx->alignment * ctx->alignment;
    }
}

// ---------------------------------------------------------------------------------------------
// Context.

gguf_context * gguf_init_empty() {
    return new gguf_context();
}

void gguf_free(gguf_context * ctx) {
    if (!ctx) {
        return;
    }
    if (ctx->map_addr) {
        munmap(ctx->map_addr, ctx->map_size);
    }
    delete ctx;
}

uint32_t     gguf_get_version(const gguf_context * ctx) { return ctx->version; }
size_t       gguf_get_alignment(const gguf_context * ctx) { return ctx->alignment; }
size_t       gguf_get_data_offset(const gguf_context * ctx) { return ctx->data_offset; }
size_t       gguf_get_file_size(const gguf_context * ctx) { return ctx->file_size; }
const void * gguf_get_data(const gguf_context * ctx) {
    return ctx->base && ctx->data_offset <= ctx->file_size ? ctx->base + ctx->data_offset : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Key-values: getters.

int64_t gguf_get_n_kv(const gguf_context * ctx) { return (int64_t) ctx->kv.size(); }

int64_t gguf_find_key(const gguf_context * ctx, const char * key) {
    for (size_t i = 0; i < ctx->kv.size(); ++i) {
        if (ctx->kv[i].key == key) {
            return (int64_t) i;
        }
    }
    return -1;
}

static const gguf_kv & kv_at(const gguf_context * ctx, int64_t id) {
    GGML_ASSERT(id >= 0 && id < (int64_t) ctx->kv.size());
    return ctx->kv[(size_t) id];
}

const char * gguf_get_key(const gguf_context * ctx, int64_t id) { return kv_at(ctx, id).key.c_str(); }
gguf_type    gguf_get_kv_type(const gguf_context * ctx, int64_t id) { return kv_at(ctx, id).type; }

gguf_type gguf_get_arr_type(const gguf_context * ctx, int64_t id) {
    const gguf_kv & kv = kv_at(ctx, id);
    GGML_ASSERT(kv.type == GGUF_TYPE_ARRAY);
    return kv.arr_type;
}

size_t gguf_get_arr_n(const gguf_context * ctx, int64_t id) {
    const gguf_kv & kv = kv_at(ctx, id);
    GGML_ASSERT(kv.type == GGUF_TYPE_ARRAY);
    return kv.n;
}

const void * gguf_get_arr_data(const gguf_context * ctx, int64_t id) {
    const gguf_kv & kv = kv_at(ctx, id);
    GGML_ASSERT(kv.type == GGUF_TYPE_ARRAY && kv.arr_type != GGUF_TYPE_STRING);
    return kv.data.data();
}

const char * gguf_get_arr_str(const gguf_context * ctx, int64_t id, size_t i) {
    const gguf_kv & kv = kv_at(ctx, id);
    GGML_ASSERT(kv.type == GGUF_TYPE_ARRAY && kv.arr_type == GGUF_TYPE_STRING && i < kv.strs.size());
    return kv.strs[i].c_str();
}

size_t gguf_get_arr_str_len(const gguf_context * ctx, int64_t id, size_t i) {
    const gguf_kv & kv = kv_at(ctx, id);
    GGML_ASSERT(kv.type == GGUF_TYPE_ARRAY && kv.arr_type == GGUF_TYPE_STRING && i < kv.strs.size());
    return kv.strs[i].size();
}

template <typename T>
static T get_scalar(const gguf_context * ctx, int64_t id, gguf_type type) {
    const gguf_kv & kv = kv_at(ctx, id);
    GGML_ASSERT(kv.type == type && kv.data.size() == sizeof(T));
    T v;
    std::memcpy(&v, kv.data.data(), sizeof(T));
    return v;
}

uint8_t  gguf_get_val_u8 (const gguf_context * c, int64_t id) { return get_scalar<uint8_t >(c, id, GGUF_TYPE_UINT8); }
int8_t   gguf_get_val_i8 (const gguf_context * c, int64_t id) { return get_scalar<int8_t  >(c, id, GGUF_TYPE_INT8); }
uint16_t gguf_get_val_u16(const gguf_context * c, int64_t id) { return get_scalar<uint16_t>(c, id, GGUF_TYPE_UINT16); }
int16_t  gguf_get_val_i16(const gguf_context * c, int64_t id) { return get_scalar<int16_t >(c, id, GGUF_TYPE_INT16); }
uint32_t gguf_get_val_u32(const gguf_context * c, int64_t id) { return get_scalar<uint32_t>(c, id, GGUF_TYPE_UINT32); }
int32_t  gguf_get_val_i32(const gguf_context * c, int64_t id) { return get_scalar<int32_t >(c, id, GGUF_TYPE_INT32); }
float    gguf_get_val_f32(const gguf_context * c, int64_t id) { return get_scalar<float   >(c, id, GGUF_TYPE_FLOAT32); }
uint64_t gguf_get_val_u64(const gguf_context * c, int64_t id) { return get_scalar<uint64_t>(c, id, GGUF_TYPE_UINT64); }
int64_t  gguf_get_val_i64(const gguf_context * c, int64_t id) { return get_scalar<int64_t >(c, id, GGUF_TYPE_INT64); }
double   gguf_get_val_f64(const gguf_context * c, int64_t id) { return get_scalar<double  >(c, id, GGUF_TYPE_FLOAT64); }
bool gguf_get_val_bool(const gguf_context * c, int64_t id) { return get_scalar<uint8_t>(c, id, GGUF_TYPE_BOOL) != 0; }

const char * gguf_get_val_str(const gguf_context * ctx, int64_t id) {
    const gguf_kv & kv = kv_at(ctx, id);
    GGML_ASSERT(kv.type == GGUF_TYPE_STRING && kv.strs.size() == 1);
    return kv.strs[0].c_str();
}

// ---------------------------------------------------------------------------------------------
// Key-values: setters.

// The alignment follows general.alignment (validated u32 power of two), offsets follow the alignment.
static void sync_alignment(gguf_context * ctx) {
    const int64_t id = gguf_find_key(ctx, GGUF_KEY_GENERAL_ALIGNMENT);
    size_t align = GGUF_DEFAULT_ALIGNMENT;
    if (id >= 0) {
        const gguf_kv & kv = ctx->kv[(size_t) id];
        if (kv.type != GGUF_TYPE_UINT32) {
            GGML_ABORT("gguf: %s must be a u32, got %s", GGUF_KEY_GENERAL_ALIGNMENT, gguf_type_name(kv.type));
        }
        uint32_t a;
        std::memcpy(&a, kv.data.data(), 4);
        if (a == 0 || (a & (a - 1)) != 0) {
            GGML_ABORT("gguf: %s = %u is not a power of two", GGUF_KEY_GENERAL_ALIGNMENT, a);
        }
        align = a;
    }
    if (align != ctx->alignment) {
        ctx->alignment = align;
        gguf_update_offsets(ctx);
    }
}

static void set_kv(gguf_context * ctx, gguf_kv && kv) {
    const int64_t id = gguf_find_key(ctx, kv.key.c_str());
    if (id >= 0) {
        ctx->kv[(size_t) id] = std::move(kv);
    } else {
        ctx->kv.push_back(std::move(kv));
    }
    sync_alignment(ctx);
}

template <typename T>
static void set_scalar(gguf_context * ctx, const char * key, gguf_type type, T v) {
    gguf_kv kv;
    kv.key  = key;
    kv.type = type;
    kv.data.resize(sizeof(T));
    std::memcpy(kv.data.data(), &v, sizeof(T));
    set_kv(ctx, std::move(kv));
}

void gguf_set_val_u8  (gguf_context * c, const char * k, uint8_t  v) { set_scalar(c, k, GGUF_TYPE_UINT8, v); }
void gguf_set_val_i8  (gguf_context * c, const char * k, int8_t   v) { set_scalar(c, k, GGUF_TYPE_INT8, v); }
void gguf_set_val_u16 (gguf_context * c, const char * k, uint16_t v) { set_scalar(c, k, GGUF_TYPE_UINT16, v); }
void gguf_set_val_i16 (gguf_context * c, const char * k, int16_t  v) { set_scalar(c, k, GGUF_TYPE_INT16, v); }
void gguf_set_val_u32 (gguf_context * c, const char * k, uint32_t v) { set_scalar(c, k, GGUF_TYPE_UINT32, v); }
void gguf_set_val_i32 (gguf_context * c, const char * k, int32_t  v) { set_scalar(c, k, GGUF_TYPE_INT32, v); }
void gguf_set_val_f32 (gguf_context * c, const char * k, float    v) { set_scalar(c, k, GGUF_TYPE_FLOAT32, v); }
void gguf_set_val_u64 (gguf_context * c, const char * k, uint64_t v) { set_scalar(c, k, GGUF_TYPE_UINT64, v); }
void gguf_set_val_i64 (gguf_context * c, const char * k, int64_t  v) { set_scalar(c, k, GGUF_TYPE_INT64, v); }
void gguf_set_val_f64 (gguf_context * c, const char * k, double   v) { set_scalar(c, k, GGUF_TYPE_FLOAT64, v); }
void gguf_set_val_bool(gguf_context * c, const char * k, bool     v) { set_scalar(c, k, GGUF_TYPE_BOOL, (uint8_t) (v ? 1 : 0)); }

void gguf_set_val_str(gguf_context * ctx, const char * key, const char * v) {
    gguf_kv kv;
    kv.key  = key;
    kv.type = GGUF_TYPE_STRING;
    kv.strs.emplace_back(v);
    set_kv(ctx, std::move(kv));
}

void gguf_set_arr_data(gguf_context * ctx, const char * key, gguf_type type, const void * data, size_t n) {
    const size_t esize = gguf_type_size(type);
    GGML_ASSERT(esize > 0 && "gguf_set_arr_data: element type must be fixed size (use gguf_set_arr_str)");
    GGML_ASSERT(n <= GGUF_MAX_ARRAY_LENGTH);
    gguf_kv kv;
    kv.key      = key;
    kv.type     = GGUF_TYPE_ARRAY;
    kv.arr_type = type;
    kv.n        = n;
    kv.data.resize(n * esize);
    if (n > 0) {
        std::memcpy(kv.data.data(), data, n * esize);
    }
    set_kv(ctx, std::move(kv));
}

void gguf_set_arr_str(gguf_context * ctx, const char * key, const char ** data, size_t n) {
    GGML_ASSERT(n <= GGUF_MAX_ARRAY_LENGTH);
    gguf_kv kv;
    kv.key      = key;
    kv.type     = GGUF_TYPE_ARRAY;
    kv.arr_type = GGUF_TYPE_STRING;
    kv.n        = n;
    kv.strs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        kv.strs.emplace_back(data[i]);
    }
    set_kv(ctx, std::move(kv));
}

void gguf_set_kv(gguf_context * ctx, const gguf_context * src) {
    for (const gguf_kv & kv : src->kv) {
        gguf_kv copy = kv;
        set_kv(ctx, std::move(copy));
    }
}

void gguf_remove_key(gguf_context * ctx, const char * key) {
    const int64_t id = gguf_find_key(ctx, key);
    if (id >= 0) {
        ctx->kv.erase(ctx->kv.begin() + id);
        sync_alignment(ctx);
    }
}

// ---------------------------------------------------------------------------------------------
// Tensor infos.

int64_t gguf_get_n_tensors(const gguf_context * ctx) { return (int64_t) ctx->infos.size(); }

int64_t gguf_find_tensor(const gguf_context * ctx, const char * name) {
    for (size_t i = 0; i < ctx->infos.size(); ++i) {
        if (ctx->infos[i].name == name) {
            return (int64_t) i;
        }
    }
    return -1;
}

static const gguf_tensor_info & info_at(const gguf_context * ctx, int64_t id) {
    GGML_ASSERT(id >= 0 && id < (int64_t) ctx->infos.size());
    return ctx->infos[(size_t) id];
}

const char * gguf_get_tensor_name(const gguf_context * ctx, int64_t id) { return info_at(ctx, id).name.c_str(); }
ggml_type    gguf_get_tensor_type(const gguf_context * ctx, int64_t id) { return info_at(ctx, id).type; }
int          gguf_get_tensor_n_dims(const gguf_context * ctx, int64_t id) { return info_at(ctx, id).n_dims; }
size_t       gguf_get_tensor_offset(const gguf_context * ctx, int64_t id) { return info_at(ctx, id).offset; }
size_t       gguf_get_tensor_size(const gguf_context * ctx, int64_t id) { return info_at(ctx, id).size; }

int64_t gguf_get_tensor_ne(const gguf_context * ctx, int64_t id, int dim) {
    GGML_ASSERT(dim >= 0 && dim < GGML_MAX_DIMS);
    return info_at(ctx, id).ne[dim];
}

const void * gguf_get_tensor_data(const gguf_context * ctx, int64_t id) {
    const gguf_tensor_info & ti = info_at(ctx, id);
    const uint8_t * data = (const uint8_t *) gguf_get_data(ctx);
    return data ? data + ti.offset : nullptr;
}

void gguf_add_tensor(gguf_context * ctx, const ggml_tensor * tensor) {
    GGML_ASSERT(tensor);
    if (gguf_find_tensor(ctx, tensor->name) >= 0) {
        GGML_ABORT("gguf_add_tensor: duplicate tensor name '%s'", tensor->name);
    }
    gguf_tensor_info ti;
    ti.name   = tensor->name;
    ti.type   = tensor->type;
    ti.n_dims = 1;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        ti.ne[i] = tensor->ne[i];
        if (tensor->ne[i] != 1) {
            ti.n_dims = i + 1;
        }
    }
    if (!gguf_tensor_nbytes(ti.type, ti.ne, &ti.size)) {
        GGML_ABORT("gguf_add_tensor: tensor '%s' has an invalid shape for type %d", tensor->name, (int) ti.type);
    }
    ti.tensor = tensor;
    ctx->infos.push_back(std::move(ti));
    gguf_update_offsets(ctx);
}

void gguf_set_tensor_type(gguf_context * ctx, const char * name, ggml_type type) {
    const int64_t id = gguf_find_tensor(ctx, name);
    GGML_ASSERT(id >= 0 && "gguf_set_tensor_type: no such tensor");
    gguf_tensor_info & ti = ctx->infos[(size_t) id];
    size_t size = 0;
    if (!gguf_tensor_nbytes(type, ti.ne, &size)) {
        GGML_ABORT("gguf_set_tensor_type: tensor '%s' ne[0] = %lld does not fit type %d", name, (long long) ti.ne[0],
                   (int) type);
    }
    ti.type = type;
    ti.size = size;
    gguf_update_offsets(ctx);
}

void gguf_set_tensor_data(gguf_context * ctx, const char * name, const void * data) {
    const int64_t id = gguf_find_tensor(ctx, name);
    GGML_ASSERT(id >= 0 && "gguf_set_tensor_data: no such tensor");
    ctx->infos[(size_t) id].data     = data;
    ctx->infos[(size_t) id].data_set = true;
}
