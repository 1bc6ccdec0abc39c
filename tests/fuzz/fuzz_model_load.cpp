// libFuzzer: model load (hparams, tensor shapes, vocab) from an arbitrary GGUF image.
// The bytes go to an in-memory file (memfd) so the real mmap loader path runs.
#include "llm.h"

#include <cstdint>
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
        llm_model_free(m);
    }
    close(fd);
    return 0;
}
