// gguf-info - print a GGUF file's header, key-values and tensor table.
//
//   gguf-info model.gguf
//
// Arrays are abbreviated to their first few items and a count; the tensor table ends with the
// per-type counts, the file type and the bits per weight, as llama.cpp's loader prints them. On a bad
// file it prints the loader's one-line error and exits 1.
#include "gguf.h"
#include "model-info.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

const size_t k_max_items = 5;    // array items shown
const size_t k_max_chars = 60;   // string bytes shown

// Quoted, escaped, cut at k_max_chars bytes.
std::string quote(const char * s, size_t len) {
    std::string out = "\"";
    for (size_t i = 0; i < len && i < k_max_chars; ++i) {
        const unsigned char c = (unsigned char) s[i];
        if (c == '"' || c == '\\') {
            out += '\\';
            out += (char) c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            snprintf(buf, sizeof(buf), "\\x%02x", c);
            out += buf;
        } else {
            out += (char) c;
        }
    }
    out += len > k_max_chars ? "\"..." : "\"";
    return out;
}

// One element of a fixed-size type at p.
std::string scalar(gguf_type t, const void * p) {
    char buf[64];
    switch (t) {
        case GGUF_TYPE_UINT8:   snprintf(buf, sizeof(buf), "%u", *(const uint8_t *) p); break;
        case GGUF_TYPE_INT8:    snprintf(buf, sizeof(buf), "%d", *(const int8_t *) p); break;
        case GGUF_TYPE_UINT16:  snprintf(buf, sizeof(buf), "%u", *(const uint16_t *) p); break;
        case GGUF_TYPE_INT16:   snprintf(buf, sizeof(buf), "%d", *(const int16_t *) p); break;
        case GGUF_TYPE_UINT32:  snprintf(buf, sizeof(buf), "%u", *(const uint32_t *) p); break;
        case GGUF_TYPE_INT32:   snprintf(buf, sizeof(buf), "%d", *(const int32_t *) p); break;
        case GGUF_TYPE_FLOAT32: snprintf(buf, sizeof(buf), "%g", (double) *(const float *) p); break;
        case GGUF_TYPE_BOOL:    snprintf(buf, sizeof(buf), "%s", *(const uint8_t *) p ? "true" : "false"); break;
        case GGUF_TYPE_UINT64:  snprintf(buf, sizeof(buf), "%" PRIu64, *(const uint64_t *) p); break;
        case GGUF_TYPE_INT64:   snprintf(buf, sizeof(buf), "%" PRId64, *(const int64_t *) p); break;
        case GGUF_TYPE_FLOAT64: snprintf(buf, sizeof(buf), "%.17g", *(const double *) p); break;
        default:                snprintf(buf, sizeof(buf), "?"); break;
    }
    return buf;
}

size_t elem_size(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
        default: return 8;
    }
}

std::string value(const gguf_context * g, int64_t id) {
    const gguf_type t = gguf_get_kv_type(g, id);
    if (t == GGUF_TYPE_STRING) {
        const char * s = gguf_get_val_str(g, id);
        return quote(s, strlen(s));
    }
    if (t != GGUF_TYPE_ARRAY) {
        // scalars: through the typed getters
        switch (t) {
            case GGUF_TYPE_UINT8:   { uint8_t v = gguf_get_val_u8(g, id); return scalar(t, &v); }
            case GGUF_TYPE_INT8:    { int8_t v = gguf_get_val_i8(g, id); return scalar(t, &v); }
            case GGUF_TYPE_UINT16:  { uint16_t v = gguf_get_val_u16(g, id); return scalar(t, &v); }
            case GGUF_TYPE_INT16:   { int16_t v = gguf_get_val_i16(g, id); return scalar(t, &v); }
            case GGUF_TYPE_UINT32:  { uint32_t v = gguf_get_val_u32(g, id); return scalar(t, &v); }
            case GGUF_TYPE_INT32:   { int32_t v = gguf_get_val_i32(g, id); return scalar(t, &v); }
            case GGUF_TYPE_FLOAT32: { float v = gguf_get_val_f32(g, id); return scalar(t, &v); }
            case GGUF_TYPE_BOOL:    { uint8_t v = gguf_get_val_bool(g, id); return scalar(t, &v); }
            case GGUF_TYPE_UINT64:  { uint64_t v = gguf_get_val_u64(g, id); return scalar(t, &v); }
            case GGUF_TYPE_INT64:   { int64_t v = gguf_get_val_i64(g, id); return scalar(t, &v); }
            case GGUF_TYPE_FLOAT64: { double v = gguf_get_val_f64(g, id); return scalar(t, &v); }
            default: return "?";
        }
    }
    const gguf_type at = gguf_get_arr_type(g, id);
    const size_t    n  = gguf_get_arr_n(g, id);
    std::string out = "[";
    for (size_t i = 0; i < n && i < k_max_items; ++i) {
        if (i) {
            out += ", ";
        }
        if (at == GGUF_TYPE_STRING) {
            out += quote(gguf_get_arr_str(g, id, i), gguf_get_arr_str_len(g, id, i));
        } else {
            out += scalar(at, (const char *) gguf_get_arr_data(g, id) + i * elem_size(at));
        }
    }
    out += n > k_max_items ? ", ...]" : "]";
    return out + " (" + std::to_string(n) + " items)";
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s FILE.gguf\n", argv[0]);
        return 2;
    }
    std::string err;
    gguf_context * g = gguf_init_from_file(argv[1], {true, nullptr}, &err);
    if (!g) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    printf("file:        %s\n", argv[1]);
    printf("version:     %u\n", gguf_get_version(g));
    printf("alignment:   %zu\n", gguf_get_alignment(g));
    printf("data offset: %zu\n", gguf_get_data_offset(g));
    printf("file size:   %zu\n", gguf_get_file_size(g));

    const int64_t n_kv = gguf_get_n_kv(g);
    printf("\n%" PRId64 " key-values:\n", n_kv);
    for (int64_t i = 0; i < n_kv; ++i) {
        const gguf_type t = gguf_get_kv_type(g, i);
        std::string type = gguf_type_name(t);
        if (t == GGUF_TYPE_ARRAY) {
            type += std::string("[") + gguf_type_name(gguf_get_arr_type(g, i)) + "]";
        }
        printf("  %4" PRId64 " %-40s %-9s = %s\n", i, gguf_get_key(g, i), type.c_str(), value(g, i).c_str());
    }

    const int64_t n_t = gguf_get_n_tensors(g);
    printf("\n%" PRId64 " tensors:\n", n_t);
    printf("  %4s %-40s %-5s %-26s %12s %12s\n", "#", "name", "type", "shape (ne)", "offset", "bytes");
    size_t total = 0;
    for (int64_t i = 0; i < n_t; ++i) {
        std::string shape = "[";
        for (int d = 0; d < gguf_get_tensor_n_dims(g, i); ++d) {
            shape += (d ? ", " : "") + std::to_string(gguf_get_tensor_ne(g, i, d));
        }
        shape += "]";
        const size_t size = gguf_get_tensor_size(g, i);
        total += size;
        printf("  %4" PRId64 " %-40s %-5s %-26s %12zu %12zu\n", i, gguf_get_tensor_name(g, i),
               ggml_type_name(gguf_get_tensor_type(g, i)), shape.c_str(), gguf_get_tensor_offset(g, i), size);
    }
    printf("  total tensor bytes: %zu\n", total);
    printf("\ntypes:\n");
    llm_type_summary_print(stdout, llm_type_summary_from_gguf(g), "  ");
    gguf_free(g);
    return 0;
}
