// gguf.h - GGUF v3 files: read (mmap, fully validated) and write (aligned, temp file + rename).
//
// Reading:
//   std::string err;
//   ggml_context * meta = nullptr;
//   gguf_context * g = gguf_init_from_file("model.gguf", { /*no_alloc=*/false, &meta }, &err);
//   if (!g) { fprintf(stderr, "error: %s\n", err.c_str()); return 1; }
//   int64_t k = gguf_find_key(g, "general.architecture");
//   const char * arch = gguf_get_val_str(g, k);
//   ggml_tensor * w = ggml_get_tensor(meta, "token_embd.weight"); // data points into the mapping
//   ...
//   ggml_free(meta); gguf_free(g);   // gguf_free unmaps: free the ggml context first or together
//
// Writing:
//   gguf_context * g = gguf_init_empty();
//   gguf_set_val_str(g, "general.architecture", "llama");
//   gguf_add_tensor(g, tensor);   // tensor->data must stay valid until written
//   if (!gguf_write_to_file(g, "out.gguf", false, &err)) ...
//
// Every validation failure is reported through err as one line naming the file, what is wrong
// and where (byte offset, key or tensor name), and the call returns nullptr. Never aborts on
// bad input.
#pragma once

#include "ggml.h"

#include <cstdint>
#include <string>
#include <vector>

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"

// Loader limits a user can reason about (checked before any allocation).
#define GGUF_MAX_STRING_LENGTH (64u * 1024 * 1024)   // bytes in one string
#define GGUF_MAX_KV_COUNT      (1u << 20)            // key-value pairs
#define GGUF_MAX_TENSOR_COUNT  (1u << 20)            // tensors
#define GGUF_MAX_ARRAY_LENGTH  (1ull << 28)          // elements in one array

enum gguf_type : int32_t {
    GGUF_TYPE_UINT8   = 0,
    GGUF_TYPE_INT8    = 1,
    GGUF_TYPE_UINT16  = 2,
    GGUF_TYPE_INT16   = 3,
    GGUF_TYPE_UINT32  = 4,
    GGUF_TYPE_INT32   = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL    = 7,
    GGUF_TYPE_STRING  = 8,
    GGUF_TYPE_ARRAY   = 9,
    GGUF_TYPE_UINT64  = 10,
    GGUF_TYPE_INT64   = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT,
};
const char * gguf_type_name(gguf_type t);

struct gguf_context;

struct gguf_init_params {
    // false: tensors in *ctx point into the read-only file mapping (zero copy).
    // true: tensors in *ctx have data == nullptr (caller loads via gguf_get_tensor_data).
    bool no_alloc;
    // if not nullptr, receives a new ggml context holding one tensor per GGUF tensor info
    ggml_context ** ctx;
};

gguf_context * gguf_init_empty();
gguf_context * gguf_init_from_file(const char * fname, gguf_init_params params, std::string * err = nullptr);
// Parse from memory (the bytes must outlive the context unless no_alloc). name is used in messages.
gguf_context * gguf_init_from_buffer(const void * data, size_t size, const char * name, gguf_init_params params,
                                     std::string * err = nullptr);
void gguf_free(gguf_context * ctx);

uint32_t gguf_get_version(const gguf_context * ctx);
size_t   gguf_get_alignment(const gguf_context * ctx);
size_t   gguf_get_data_offset(const gguf_context * ctx);  // file offset of the tensor data section
const void * gguf_get_data(const gguf_context * ctx);     // start of the data section (mapped), or nullptr
size_t   gguf_get_file_size(const gguf_context * ctx);

// Key-values. Getters assert the type (a bug if the caller did not check gguf_get_kv_type).
int64_t      gguf_get_n_kv(const gguf_context * ctx);
int64_t      gguf_find_key(const gguf_context * ctx, const char * key);  // -1 if absent
const char * gguf_get_key(const gguf_context * ctx, int64_t id);
gguf_type    gguf_get_kv_type(const gguf_context * ctx, int64_t id);
gguf_type    gguf_get_arr_type(const gguf_context * ctx, int64_t id);
size_t       gguf_get_arr_n(const gguf_context * ctx, int64_t id);
const void * gguf_get_arr_data(const gguf_context * ctx, int64_t id);        // not for strings
const char * gguf_get_arr_str(const gguf_context * ctx, int64_t id, size_t i);
size_t       gguf_get_arr_str_len(const gguf_context * ctx, int64_t id, size_t i);  // strings may hold NULs

uint8_t      gguf_get_val_u8  (const gguf_context * ctx, int64_t id);
int8_t       gguf_get_val_i8  (const gguf_context * ctx, int64_t id);
uint16_t     gguf_get_val_u16 (const gguf_context * ctx, int64_t id);
int16_t      gguf_get_val_i16 (const gguf_context * ctx, int64_t id);
uint32_t     gguf_get_val_u32 (const gguf_context * ctx, int64_t id);
int32_t      gguf_get_val_i32 (const gguf_context * ctx, int64_t id);
float        gguf_get_val_f32 (const gguf_context * ctx, int64_t id);
uint64_t     gguf_get_val_u64 (const gguf_context * ctx, int64_t id);
int64_t      gguf_get_val_i64 (const gguf_context * ctx, int64_t id);
double       gguf_get_val_f64 (const gguf_context * ctx, int64_t id);
bool         gguf_get_val_bool(const gguf_context * ctx, int64_t id);
const char * gguf_get_val_str (const gguf_context * ctx, int64_t id);

// Setters replace an existing key of the same name.
void gguf_set_val_u8  (gguf_context * ctx, const char * key, uint8_t  v);
void gguf_set_val_i8  (gguf_context * ctx, const char * key, int8_t   v);
void gguf_set_val_u16 (gguf_context * ctx, const char * key, uint16_t v);
void gguf_set_val_i16 (gguf_context * ctx, const char * key, int16_t  v);
void gguf_set_val_u32 (gguf_context * ctx, const char * key, uint32_t v);
void gguf_set_val_i32 (gguf_context * ctx, const char * key, int32_t  v);
void gguf_set_val_f32 (gguf_context * ctx, const char * key, float    v);
void gguf_set_val_u64 (gguf_context * ctx, const char * key, uint64_t v);
void gguf_set_val_i64 (gguf_context * ctx, const char * key, int64_t  v);
void gguf_set_val_f64 (gguf_context * ctx, const char * key, double   v);
void gguf_set_val_bool(gguf_context * ctx, const char * key, bool     v);
void gguf_set_val_str (gguf_context * ctx, const char * key, const char * v);
void gguf_set_arr_data(gguf_context * ctx, const char * key, gguf_type type, const void * data, size_t n);
void gguf_set_arr_str (gguf_context * ctx, const char * key, const char ** data, size_t n);
void gguf_set_kv      (gguf_context * ctx, const gguf_context * src);  // copy all KVs of src
void gguf_remove_key  (gguf_context * ctx, const char * key);

// Tensor infos.
int64_t      gguf_get_n_tensors(const gguf_context * ctx);
int64_t      gguf_find_tensor(const gguf_context * ctx, const char * name);  // -1 if absent
const char * gguf_get_tensor_name(const gguf_context * ctx, int64_t id);
ggml_type    gguf_get_tensor_type(const gguf_context * ctx, int64_t id);
int          gguf_get_tensor_n_dims(const gguf_context * ctx, int64_t id);
int64_t      gguf_get_tensor_ne(const gguf_context * ctx, int64_t id, int dim);  // 1 past n_dims
size_t       gguf_get_tensor_offset(const gguf_context * ctx, int64_t id);  // relative to data section
size_t       gguf_get_tensor_size(const gguf_context * ctx, int64_t id);    // bytes
const void * gguf_get_tensor_data(const gguf_context * ctx, int64_t id);    // in the mapping, or nullptr

// Writing: tensors are laid out in the order added, each aligned.
// gguf_add_tensor copies name/type/shape; the data pointer (tensor->data) is read at write time.
void gguf_add_tensor(gguf_context * ctx, const ggml_tensor * tensor);
// change a tensor's type/data before writing (recomputes offsets); data may be nullptr for streaming
void gguf_set_tensor_type(gguf_context * ctx, const char * name, ggml_type type);
void gguf_set_tensor_data(gguf_context * ctx, const char * name, const void * data);

// Whole file: written to "<fname>.tmp" then renamed; on any failure nothing is left behind.
bool gguf_write_to_file(const gguf_context * ctx, const char * fname, bool only_meta, std::string * err = nullptr);
// Header + KVs + tensor infos + padding to the data section (for streaming writers:
// append each tensor's bytes, zero padded to gguf_get_alignment, in gguf order).
std::vector<uint8_t> gguf_get_meta_data(const gguf_context * ctx);
