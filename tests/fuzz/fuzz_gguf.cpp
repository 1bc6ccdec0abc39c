// libFuzzer: GGUF open + validate from arbitrary bytes, then walk every KV and tensor info; a file
// that parses must re-serialize (gguf_get_meta_data) to bytes that parse again with the same KVs.
#include "ggml.h"
#include "gguf.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    std::string err;
    ggml_context * meta = nullptr;
    gguf_context * g = gguf_init_from_buffer(data, size, "fuzz", {false, &meta}, &err);
    if (!g) return 0;
    size_t sum = 0;
    for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
        sum += strlen(gguf_get_key(g, i));
        const gguf_type t = gguf_get_kv_type(g, i);
        if (t == GGUF_TYPE_STRING) sum += strlen(gguf_get_val_str(g, i));
        if (t == GGUF_TYPE_ARRAY) {
            const size_t n = gguf_get_arr_n(g, i);
            if (gguf_get_arr_type(g, i) == GGUF_TYPE_STRING) {
                for (size_t k = 0; k < n; ++k) sum += gguf_get_arr_str_len(g, i, k);
            } else if (n > 0) {
                sum += ((const uint8_t *) gguf_get_arr_data(g, i))[0];
            }
        }
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const uint8_t * p = (const uint8_t *) gguf_get_tensor_data(g, i);
        const size_t n = gguf_get_tensor_size(g, i);
        if (p && n) sum += p[0] + p[n - 1];  // every byte of the tensor must be inside the input
    }
    if (gguf_get_n_tensors(g) == 0) {  // round trip through the writer (no tensor data to append)
        const std::vector<uint8_t> again = gguf_get_meta_data(g);
        std::string err2;
        gguf_context * g2 = gguf_init_from_buffer(again.data(), again.size(), "fuzz-again", {true, nullptr}, &err2);
        if (!g2 || gguf_get_n_kv(g2) != gguf_get_n_kv(g)) {
            fprintf(stderr, "re-serialized GGUF does not parse: %s\n", err2.c_str());
            std::abort();
        }
        gguf_free(g2);
    }
    if (meta) {
        for (ggml_tensor * t = ggml_get_first_tensor(meta); t; t = ggml_get_next_tensor(meta, t)) sum += ggml_nbytes(t);
        ggml_free(meta);
    }
    gguf_free(g);
    return sum == 42 ? 0 : 0;
}
