// libFuzzer: SPM and BPE tokenize/detokenize of arbitrary bytes (special parsing on and off),
// and the streaming detokenizer over arbitrary id sequences.
#include "fuzz_log_errors.h"
#include "ggml.h"
#include "gguf.h"
#include "vocab.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

static llm_vocab * load(const char * rel) {
    const char * e = std::getenv("LLM_SHARED");
    const std::string path = std::string(e && *e ? e : "../shared") + "/models/" + rel;
    std::string err;
    gguf_context * g = gguf_init_from_file(path.c_str(), {true, nullptr}, &err);
    if (!g) {
        fprintf(stderr, "fuzz_tokenize: %s (set LLM_SHARED)\n", err.c_str());
        std::abort();
    }
    auto * v = new llm_vocab;
    if (!llm_vocab_load(*v, g, &err)) {
        fprintf(stderr, "fuzz_tokenize: %s\n", err.c_str());
        std::abort();
    }
    gguf_free(g);
    return v;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static llm_vocab * spm = load("ggml-vocab-llama-spm.gguf");
    static llm_vocab * bpe = load("ggml-vocab-llama-bpe.gguf");
    if (size == 0) return 0;
    const std::string_view text((const char *) data + 1, size - 1);
    const bool special = data[0] & 1;
    for (const llm_vocab * v : {spm, bpe}) {
        std::vector<int32_t> ids = llm_tokenize(*v, text, data[0] & 2, special);
        for (int32_t id : ids) {
            if (!v->valid_id(id)) std::abort();
        }
        (void) llm_detokenize(*v, ids, data[0] & 4, special);
        // the raw bytes as token ids too
        llm_detok_stream s(*v);
        for (size_t i = 0; i + 1 < size; i += 2) {
            (void) s.push((int32_t) (((uint32_t) data[i] << 8 | data[i + 1]) * 3 % (v->n_vocab() + 7)) - 3);
        }
        (void) s.flush();
    }
    return 0;
}
