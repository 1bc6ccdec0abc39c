// bench-chain - the floor of a decode step built from one kernel per op, on the GPU: the kernels of a Llama-2-7B
// decode layer (q/k/v, attention, wo, gate/up, the SwiGLU output's quantize, ffn_down) x 32 and the output matrix,
// each replaced by a streaming kernel that reads the same bytes and waits for the one ahead (cuda/chain-bench.cu),
// replayed as one CUDA graph. Prints per variant the step's time, its tokens a second and the share of the copy
// roofline (model bytes / copy bandwidth) that it reaches; bench's tg figure for the same model is measured against
// the same roofline, so the gap between them is what the real kernels lose to the chain.
//   bench-chain [reps=10]
#include "ggml.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"

namespace {

struct model_bytes {
    const char * name;
    double bpw; // bytes per weight of the layers' matrices
    size_t output; // the output matrix's bytes
};

// Llama-2-7B: n_embd 4096, n_ff 11008, 32 layers, vocab 32000; attention at a depth of ~64 (tg128's middle): K and V
// of 32 heads x 128 dims in f16 for 64 cells
struct layer_shape {
    size_t qkv, attn, wo, gate_up, quant, down;
};

layer_shape shape_of(double bpw) {
    const double e = 4096, f = 11008;
    layer_shape s;
    s.qkv = (size_t)(3 * e * e * bpw);
    s.attn = (size_t)(64 * 4096 * 2 * 2);
    s.wo = (size_t)(e * e * bpw);
    s.gate_up = (size_t)(2 * e * f * bpw);
    s.quant = (size_t)(f * 4);
    s.down = (size_t)(e * f * bpw);
    return s;
}

struct variant {
    const char * name;
    bool tiny;   // the attention and quantize kernels in the layer
    bool two;    // 2 blocks of 256 threads an SM instead of as many as fit
    int u;       // 16-byte loads in flight a thread
    bool pdl, early;
    bool one;    // one kernel for the whole step
    bool empty;  // 16 KB a kernel: the chain's latency alone
};

} // namespace

int main(int argc, char ** argv) {
    int reps = 10;
    if (argc > 2) {
        fprintf(stderr, "bench-chain: error: one argument at most (usage: bench-chain [reps=10])\n");
        return 1;
    }
    if (argc > 1) {
        char * end = nullptr;
        const long v = strtol(argv[1], &end, 10);
        if (end == argv[1] || *end != '\0' || v <= 0 || v > 100000) {
            fprintf(stderr, "bench-chain: error: reps '%s' is not an integer in [1, 100000]\n", argv[1]);
            return 1;
        }
        reps = (int)v;
    }
    if (ggml_backend_cuda_get_device_count() <= 0) {
        fprintf(stderr, "bench-chain: error: no CUDA device\n");
        return 1;
    }
    const double bw = ggml_backend_cuda_copy_bandwidth_gbs(0, 0, 10);
    if (bw <= 0) {
        fprintf(stderr, "bench-chain: error: copy bandwidth not measured\n");
        return 1;
    }
    const model_bytes models[] = {
        {"q4_0", 18.0 / 32, (size_t)(32000.0 * 4096 * 210 / 256)}, // output q6_K
        {"q8_0", 34.0 / 32, (size_t)(32000.0 * 4096 * 34 / 32)},
    };
    const variant variants[] = {
        {"6 kernels a layer, one wave each, U 4, PDL, early loads", true, false, 4, true, true, false, false},
        {"... U 2", true, false, 2, true, true, false, false},
        {"... U 8", true, false, 8, true, true, false, false},
        {"... 2 blocks an SM (16 warps, as the one-wave mat-vecs)", true, true, 4, true, true, false, false},
        {"... 2 blocks an SM, U 8", true, true, 8, true, true, false, false},
        {"... 2 blocks an SM, U 16 (the bytes in flight of the q4_0 q/k/v and gate/up kernels)", true, true, 16, true,
         true, false, false},
        {"... loads after the wait", true, false, 4, true, false, false, false},
        {"... no PDL", true, false, 4, false, false, false, false},
        {"4 kernels a layer (no attention, no quantize), U 4, PDL, early", false, false, 4, true, true, false, false},
        {"one kernel for the whole step, U 4", false, false, 4, false, false, true, false},
        {"6 kernels a layer of 16 KB each (the chain's latency alone), PDL", true, false, 4, true, true, false, true},
        {"... no PDL", true, false, 4, false, false, false, true},
    };
    printf("copy bandwidth %.1f GB/s\n\n", bw);
    printf("| model | variant | us a step | us a kernel | t/s | %% of the copy roofline |\n"
           "| --- | --- | --- | --- | --- | --- |\n");
    for (const model_bytes & m : models) {
        const layer_shape s = shape_of(m.bpw);
        const double weights = 32.0 * (s.qkv + s.wo + s.gate_up + s.down) + m.output;
        const double roof_us = weights / (bw * 1e3);
        for (const variant & v : variants) {
            std::vector<ggml_cuda_chain_step> steps;
            auto add = [&](size_t bytes) { steps.push_back({v.empty ? 16384 : bytes, v.two ? -2 : 0}); };
            add(s.qkv);
            if (v.tiny) steps.push_back({v.empty ? 16384 : s.attn, 64});
            add(s.wo);
            add(s.gate_up);
            if (v.tiny) steps.push_back({v.empty ? 16384 : s.quant, 43});
            add(s.down);
            ggml_cuda_chain_step tail = {v.empty ? 16384 : m.output, 0};
            double us;
            if (v.one) {
                const ggml_cuda_chain_step all = {(size_t)weights, 0};
                us = ggml_backend_cuda_chain_us(0, &all, 1, 1, nullptr, v.u, v.pdl, v.early, reps);
            } else {
                us = ggml_backend_cuda_chain_us(0, steps.data(), (int)steps.size(), 32, &tail, v.u, v.pdl, v.early,
                                                reps);
            }
            if (us <= 0) {
                fprintf(stderr, "bench-chain: error: the %s chain did not run\n", m.name);
                return 1;
            }
            const int n_kernels = v.one ? 1 : 32 * (int)steps.size() + 1;
            if (v.empty) {
                printf("| %s | %s | %.1f | %.2f | - | - |\n", m.name, v.name, us, us / n_kernels);
            } else {
                printf("| %s | %s | %.1f | %.2f | %.1f | %.1f |\n", m.name, v.name, us, us / n_kernels, 1e6 / us,
                       100.0 * roof_us / us);
            }
        }
    }
    return 0;
}
#else
int main() {
    fprintf(stderr, "bench-chain: error: built without CUDA (it measures a GPU)\n");
    return 1;
}
#endif
