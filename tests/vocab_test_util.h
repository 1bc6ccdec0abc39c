// vocab_test_util.h - the tokenizers of the shared GGUF files, loaded once per test program.
//
//   const llm_vocab * v = shared_vocab("models/stories260K.gguf");
//   if (!v) return;  // the shared data is missing: the case is skipped (a MESSAGE says why)
#pragma once

#include "gguf.h"
#include "test_util.h"
#include "vocab.h"

#include "doctest_cstr.h"
#include <map>
#include <memory>
#include <string>

// The vocab of a file under LLM_SHARED, loaded once; nullptr (with a MESSAGE) if the file cannot be read. A
// vocab that does not load fails the test.
inline const llm_vocab * shared_vocab(const std::string & rel) {
    static std::map<std::string, std::unique_ptr<llm_vocab>> cache;
    auto it = cache.find(rel);
    if (it != cache.end()) return it->second.get();
    std::string err;
    gguf_context * g = gguf_init_from_file(llm_shared_path(rel).c_str(), {true, nullptr}, &err);
    if (!g) {
        MESSAGE("skipping: cannot read " << rel << ": " << err);
        return nullptr;
    }
    auto v = std::make_unique<llm_vocab>();
    const bool ok = llm_vocab_load(*v, g, &err);
    gguf_free(g);
    REQUIRE_MESSAGE(ok, err);
    return (cache[rel] = std::move(v)).get();
}
