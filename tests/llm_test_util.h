// llm_test_util.h - helpers for the whole-model tests: temp dir, running the gguf-py scripts
// (random-weight models, the numpy reference forward pass), error measures.
#pragma once

#include "doctest_cstr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

// Debian's python3 with numpy (CI installs it); LLM_PYTHON overrides (e.g. on the GPU machine)
inline const char * const k_python = [] {
    const char * e = std::getenv("LLM_PYTHON");
    return e && *e ? e : "/usr/bin/python3";
}();

inline std::string run_cmd(const std::string & cmd, int * rc) {
    std::string out;
    FILE * f = popen((cmd + " 2>&1").c_str(), "r");
    if (!f) {
        *rc = -1;
        return out;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    *rc = pclose(f);
    return out;
}

// A temp dir for the test's files, removed at exit.
struct temp_dir {
    std::string path;
    temp_dir() {
        char tmpl[] = "/tmp/test_llm.XXXXXX";
        const char * p = mkdtemp(tmpl);
        REQUIRE(p != nullptr);
        path = p;
    }
    ~temp_dir() {
        int rc;
        run_cmd("rm -rf '" + path + "'", &rc);
    }
};

inline temp_dir & tmp() {
    static temp_dir d;
    return d;
}

inline void require_python() {
    // CI installs python3 + numpy; a missing interpreter is a failure, not a skip
    REQUIRE_MESSAGE(access(k_python, X_OK) == 0, k_python << " is required (set LLM_PYTHON)");
    int rc;
    const std::string out = run_cmd(std::string(k_python) + " -c 'import numpy'", &rc);
    REQUIRE_MESSAGE(rc == 0, "numpy is required for /usr/bin/python3: " << out);
}

// gen_random_llama.py --custom <args>; cached by name
inline std::string gen_model(const std::string & name, const std::string & args) {
    require_python();
    const std::string path = tmp().path + "/" + name + ".gguf";
    if (access(path.c_str(), R_OK) == 0) return path;
    int rc;
    const std::string cmd = std::string(k_python) + " " LLM_SOURCE_DIR "/gguf-py/scripts/gen_random_llama.py --custom " +
                            args + " --out " + path;
    const std::string out = run_cmd(cmd, &rc);
    REQUIRE_MESSAGE(rc == 0, cmd << "\n" << out);
    return path;
}

// float64 numpy reference logits, [n_tokens][n_vocab] as float32
inline std::vector<float> ref_logits(const std::string & model, const std::vector<int32_t> & toks, int n_vocab) {
    std::string list;
    for (size_t i = 0; i < toks.size(); ++i) list += (i ? "," : "") + std::to_string(toks[i]);
    const std::string out_path = tmp().path + "/ref.bin";
    int rc;
    const std::string cmd = std::string(k_python) + " " LLM_SOURCE_DIR "/gguf-py/scripts/reference_forward.py " +
                            model + " --tokens " + list + " --out-bin " + out_path;
    const std::string out = run_cmd(cmd, &rc);
    REQUIRE_MESSAGE(rc == 0, cmd << "\n" << out);
    std::vector<float> v(toks.size() * n_vocab);
    std::ifstream f(out_path, std::ios::binary);
    f.read((char *) v.data(), v.size() * sizeof(float));
    REQUIRE((size_t) f.gcount() == v.size() * sizeof(float));
    return v;
}

// max |a - b| / max |b| over one row
inline double rel_err(const float * a, const float * b, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; ++i) {
        num = std::max(num, (double) std::fabs(a[i] - b[i]));
        den = std::max(den, (double) std::fabs(b[i]));
    }
    return num / std::max(den, 1e-30);
}

inline std::vector<int32_t> random_tokens(int n, int n_vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto & x : t) x = (int32_t) (rng() % n_vocab);
    return t;
}

