// llm_test_util.h - helpers for the whole-model tests: temp dir, running the gguf-py scripts
// (random-weight models, the numpy reference forward pass), error measures.
#pragma once

#include "doctest_cstr.h"
#include "llm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <sys/wait.h>
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

// A model loaded with default parameters (use_mmap as given), and a context; both freed at scope exit.
struct model_ptr {
    llm_model * m = nullptr;
    explicit model_ptr(const std::string & path, int use_mmap = -1) {
        std::string err;
        llm_model_params mp;
        mp.use_mmap = use_mmap;
        m = llm_model_load(path.c_str(), mp, &err);
        REQUIRE_MESSAGE(m != nullptr, err);
    }
    ~model_ptr() { llm_model_free(m); }
};

struct ctx_ptr {
    llm_context * c = nullptr;
    ctx_ptr(llm_model * m, llm_context_params cp) {
        std::string err;
        if (cp.n_threads == 0) cp.n_threads = 2;
        c = llm_context_new(m, cp, &err);
        REQUIRE_MESSAGE(c != nullptr, err);
    }
    ~ctx_ptr() { llm_context_free(c); }
};

inline llm_context_params f32_params(int n_ctx, int n_batch, bool all_logits) {
    llm_context_params cp;
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.all_logits = all_logits;
    return cp;
}

// Logits of every token of toks: decoded in one llm_decode call (split by n_batch inside) when step == 0,
// else step tokens per call.
inline std::vector<float> cpp_logits(llm_model * m, const std::vector<int32_t> & toks, llm_context_params cp,
                                     int step = 0) {
    const int n_vocab = llm_model_hparams(m).n_vocab;
    cp.all_logits = true;
    ctx_ptr c(m, cp);
    std::vector<float> out(toks.size() * n_vocab);
    const int n = (int) toks.size();
    const int s = step > 0 ? step : n;
    std::string err;
    for (int i0 = 0; i0 < n; i0 += s) {
        const int nb = std::min(s, n - i0);
        REQUIRE_MESSAGE(llm_decode(c.c, toks.data() + i0, nb, &err), err);
        for (int i = 0; i < nb; ++i) {
            const float * l = llm_get_logits_ith(c.c, i);
            REQUIRE(l != nullptr);
            std::copy(l, l + n_vocab, out.begin() + (size_t) (i0 + i) * n_vocab);
        }
        REQUIRE(llm_get_logits_ith(c.c, nb) == nullptr);
        CHECK(llm_get_logits(c.c) == llm_get_logits_ith(c.c, nb - 1));
    }
    CHECK(llm_n_past(c.c) == n);
    return out;
}

inline double max_rel_err(const std::vector<float> & a, const std::vector<float> & b, int n_vocab,
                          int * worst = nullptr) {
    double e = 0;
    for (size_t r = 0; r < a.size() / n_vocab; ++r) {
        const double er = rel_err(a.data() + r * n_vocab, b.data() + r * n_vocab, n_vocab);
        if (er > e) {
            e = er;
            if (worst) *worst = (int) r;
        }
    }
    return e;
}

// a random f32 model quantized to `type` by the quantize tool ("" when the tool is not built: the case SKIPs)
inline std::string gen_quantized(const std::string & name, const std::string & args, const std::string & type) {
    const std::string tool = std::string(LLM_BINARY_DIR) + "/bin/quantize";
    if (access(tool.c_str(), X_OK) != 0) {
        MESSAGE("SKIP: " << tool << " not built (cmake --build <build dir> --target quantize)");
        return "";
    }
    const std::string f32 = gen_model(name + "_f32", args + " --outtype f32");
    const std::string out = tmp().path + "/" + name + ".gguf";
    if (access(out.c_str(), R_OK) == 0) return out;
    int status = 0;
    const std::string log = run_cmd("'" + tool + "' '" + f32 + "' '" + out + "' " + type + " 2", &status);
    REQUIRE_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "quantize " << type << " failed:\n" << log);
    return out;
}
