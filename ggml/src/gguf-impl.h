// gguf-impl.h - the gguf_context layout shared by gguf.cpp (accessors), gguf-read.cpp (parser)
// and gguf-write.cpp (writer). Not a public header.
#pragma once

#include "gguf.h"

#include <cstdint>
#include <string>
#include <vector>

struct gguf_kv {
    std::string key;
    gguf_type   type     = GGUF_TYPE_UINT8;
    gguf_type   arr_type = GGUF_TYPE_UINT8;  // element type when type == GGUF_TYPE_ARRAY
    size_t      n        = 1;                // elements (1 for scalars)
    std::vector<uint8_t>     data;           // scalar or array of fixed-size elements, little endian
    std::vector<std::string> strs;           // the string (type STRING) or the strings (array of STRING)
};

struct gguf_tensor_info {
    std::string name;
    ggml_type   type   = GGML_TYPE_F32;
    int         n_dims = 1;
    int64_t     ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    uint64_t    offset = 0;  // relative to the data section
    size_t      size   = 0;  // bytes

    // writing only: where the bytes come from at write time
    const ggml_tensor * tensor   = nullptr;  // tensor->data is read at write time ...
    const void *        data     = nullptr;  // ... unless gguf_set_tensor_data was called
    bool                data_set = false;
};

struct gguf_context {
    uint32_t version   = GGUF_VERSION;
    size_t   alignment = GGUF_DEFAULT_ALIGNMENT;

    std::vector<gguf_kv>          kv;
    std::vector<gguf_tensor_info> infos;

    // reading only
    size_t          data_offset = 0;        // file offset of the data section
    size_t          file_size   = 0;
    const uint8_t * base        = nullptr;  // whole file (mapping or caller's buffer), nullptr if not kept
    void *          map_addr    = nullptr;  // owned mapping (munmap in gguf_free)
    size_t          map_size    = 0;
};

// Size in bytes of one element of a fixed-size GGUF type; 0 for STRING/ARRAY/invalid.
size_t gguf_type_size(gguf_type t);

// ggml's name for a type id (also for ids this library does not implement, e.g. 2 -> "q4_0"); nullptr if unknown.
const char * gguf_ggml_type_name_any(int32_t type);

// Bytes of a tensor of this (supported) type and shape; false on overflow or ne[0] % blck != 0.
bool gguf_tensor_nbytes(ggml_type type, const int64_t * ne, size_t * out);

// Recompute offsets of all tensor infos (writing) from their sizes and ctx->alignment.
void gguf_update_offsets(gguf_context * ctx);
