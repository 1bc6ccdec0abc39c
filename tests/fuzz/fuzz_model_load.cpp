// libFuzzer: model load (hparams, tensor shapes, vocab) from an arbitrary GGUF image, then a context
// and a two-step decode on whatever loaded (a model that passed validation must build and run its
// graph without asserting). The bytes go to an in-memory file (memfd) so the real mmap loader path runs.
#include "fuzz_log_errors.h"
#include "ggml.h"
#include "llm.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const int fd = memfd_create("fuzz-model", 0);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        const ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) break;
        off += (size_t) w;
    }
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    llm_model_params mp;
    std::string err;
    llm_model * m = llm_model_load(path.c_str(), mp, &err);
    if (m) {
        const llm_vocab & v = llm_model_get_vocab(m);
        std::vector<int32_t> ids = llm_tokenize(v, "Hello world <s>", true, true);
        (void) llm_detokenize(v, ids);
        llm_context_params cp;
        cp.n_ctx = 8;
        cp.n_batch = 4;
        cp.n_threads = 1;
        cp.flash_attn = size & 1;
        llm_context * ctx = llm_context_new(m, cp, &err);
        if (ctx) {
            const int32_t n_vocab = llm_model_hparams(m).n_vocab;
            int32_t toks[3] = {0, n_vocab > 1 ? 1 : 0, n_vocab - 1};
            if (llm_decode(ctx, toks, 3, &err)) {
                (void) llm_get_logits(ctx);
                toks[0] = llm_argmax_last(ctx);
                if (toks[0] < 0 || toks[0] >= n_vocab) __builtin_trap();
                (void) llm_decode(ctx, toks, 1, &err);
            }
            llm_context_free(ctx);
        }
        llm_model_free(m);
    }
    close(fd);
    return 0;
}
