// test_rope_numpy.cpp - ROPE with Llama 3.1's rope scaling (rope_freqs.weight, as gguf-py's llama3_rope_freqs
// writes it, the same factors llama.cpp's converter computes) at long-context positions 65536 .. 131071, against
// the float64 numpy reference of gguf-py (reference.rope_normal, the one reference_forward.py uses).
#include "ggml.h"
#include "llm_test_util.h"

#include "doctest_cstr.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

const char * k_script = R"PY(
import sys
import numpy as np
sys.path.insert(0, sys.argv[1] + "/gguf-py")
from gguf.llama import llama3_rope_freqs
from gguf.reference import rope_normal
hd, nh, nt, base = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
raw = open(sys.argv[2] + "/in.bin", "rb").read()
x = np.frombuffer(raw, dtype=np.float32, count=nt * nh * hd).reshape(nt, nh, hd).astype(np.float64)
pos = np.frombuffer(raw, dtype=np.int32, offset=4 * nt * nh * hd, count=nt)
ff = llama3_rope_freqs(hd, base)
assert ff.min() == 1.0 and ff.max() == 8.0  # some frequencies scaled, some not
ff.astype(np.float32).tofile(sys.argv[2] + "/ff.bin")
rope_normal(x, pos, hd, base, ff.astype(np.float64)).tofile(sys.argv[2] + "/want_ff.bin")
rope_normal(x, pos, hd, base, None).tofile(sys.argv[2] + "/want.bin")
)PY";

std::vector<char> read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("rope: llama3 rope_freqs at positions 65536..131071 equal the numpy reference (and differ without them)") {
    require_python();
    const int hd = 128, nh = 4, nt = 9;
    const float base = 500000.0f;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x((size_t) hd * nh * nt);
    for (float & v : x) v = u(rng);
    std::vector<int32_t> pos(nt);
    for (int i = 0; i < nt; ++i) pos[i] = 65536 + (int32_t) (rng() % 65536);
    pos[0] = 65536;
    pos[nt - 1] = 131071;
    const std::string dir = tmp().path;
    {
        std::ofstream f(dir + "/in.bin", std::ios::binary);
        f.write((const char *) x.data(), x.size() * sizeof(float));
        f.write((const char *) pos.data(), pos.size() * sizeof(int32_t));
        std::ofstream s(dir + "/rope_ref.py");
        s << k_script;
    }
    int rc;
    const std::string cmd = std::string(k_python) + " " + dir + "/rope_ref.py " LLM_SOURCE_DIR " " + dir + " " +
                            std::to_string(hd) + " " + std::to_string(nh) + " " + std::to_string(nt) + " 500000";
    const std::string out = run_cmd(cmd, &rc);
    REQUIRE_MESSAGE(rc == 0, cmd << "\n" << out);
    const std::vector<char> ffb = read_file(dir + "/ff.bin"), want_ff = read_file(dir + "/want_ff.bin"),
                            want = read_file(dir + "/want.bin");
    REQUIRE(ffb.size() == hd / 2 * sizeof(float));
    REQUIRE(want_ff.size() == x.size() * sizeof(double));
    REQUIRE(want.size() == x.size() * sizeof(double));

    ggml_context * ctx = ggml_init({size_t(16) << 20, nullptr, false});
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, nh, nt);  // [head_dim, n_head, n_tokens]
    ggml_tensor * p = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, nt);
    ggml_tensor * ff = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, hd / 2);
    std::memcpy(a->data, x.data(), ggml_nbytes(a));
    std::memcpy(p->data, pos.data(), ggml_nbytes(p));
    std::memcpy(ff->data, ffb.data(), ggml_nbytes(ff));
    ggml_tensor * y_ff = ggml_rope_ext(ctx, a, p, ff, hd, GGML_ROPE_TYPE_NORMAL, base, 1.0f);
    ggml_tensor * y = ggml_rope_ext(ctx, a, p, nullptr, hd, GGML_ROPE_TYPE_NORMAL, base, 1.0f);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y_ff);
    ggml_build_forward_expand(gf, y);
    ggml_graph_compute_with_ctx(ctx, gf, 2);

    // max |got - want| over all values (|x| <= 1; float cos/sin of the exactly reduced angle: ~1e-7)
    auto max_err = [&](const ggml_tensor * t, const std::vector<char> & w) {
        const double * wd = (const double *) w.data();
        double e = 0;
        for (size_t i = 0; i < x.size(); ++i) e = std::max(e, std::fabs((double) ((const float *) t->data)[i] - wd[i]));
        return e;
    };
    const double e_ff = max_err(y_ff, want_ff), e = max_err(y, want), e_cross = max_err(y, want_ff);
    MESSAGE("rope at 64k+ positions: max abs err " << e_ff << " with rope_freqs, " << e << " without; ignoring the "
                                                   << "factors would be off by " << e_cross);
    CHECK(e_ff < 1e-5);
    CHECK(e < 1e-5);
    CHECK(e_cross > 0.1);  // the factors matter at these positions: the test would see them ignored
    ggml_free(ctx);
}
