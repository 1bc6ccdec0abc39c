// test_util.h - helpers shared by the tests: where the shared data lives, seeded random fill.
#pragma once

#include <cstdlib>
#include <random>
#include <string>

// LLM_SHARED (env) or the default ../shared beside the checkout.
inline std::string llm_shared_dir() {
    const char * e = std::getenv("LLM_SHARED");
    return e && *e ? std::string(e) : std::string(LLM_SHARED_DEFAULT);
}
inline std::string llm_shared_path(const std::string & rel) { return llm_shared_dir() + "/" + rel; }
