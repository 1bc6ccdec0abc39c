// perplexity - perplexity of a model over a text file, as llama.cpp's llama-perplexity computes it.
//
//   perplexity -m model.gguf -f wiki.test.raw -c 512 [-b 512] [-ngl 99] [-t 2] [--chunks N] [-fa] [-ctk T] [-ctv T]
//
// The whole text is tokenized (with BOS), cut into non-overlapping chunks of c tokens; the first token of
// each chunk is replaced by BOS; each chunk is decoded from an empty cache with logits for every token, and
// the second half of each chunk is scored: nll of token j+1 under the logits of token j. Prints the running
// estimate after every chunk ("[1]12.3456,[2]...") and "Final estimate: PPL = X +/- Y" (llama.cpp's error:
// ppl * sqrt(var(nll) / (count - 1))).
#include "llm.h"
#include "model-info.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct ppl_params {
    std::string model, file;
    int n_ctx = 512;
    int n_batch = 0;  // 0: n_ctx
    int n_gpu_layers = 0;
    llm_split_mode split_mode = LLM_SPLIT_LAYER;  // -sm
    std::vector<float> tensor_split;              // -ts
    int n_threads = 0;
    int n_chunks = -1;
    bool flash_attn = false;
    ggml_type type_k = GGML_TYPE_F16, type_v = GGML_TYPE_F16;
};

bool parse_int(const std::string & s, int & out) {
    char * end = nullptr;
    const long v = strtol(s.c_str(), &end, 10);
    if (s.empty() || *end || v < -1 || v > (1L << 30)) return false;
    out = (int) v;
    return true;
}

bool parse_args(int argc, char ** argv, ppl_params & p, std::string & err) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            printf("usage: %s -m MODEL -f TEXT [-c 512] [-b N] [-ngl N] [-sm none|layer|row] [-ts N0,N1..] [-t N] "
                   "[--chunks N] [-fa] [-ctk T] [-ctv T]\n"
                   "  -fa: flash attention; -ctk/-ctv: KV cache type of K/V (%s; a quantized V needs -fa)\n",
                   argv[0], llm_kv_type_names());
            exit(0);
        }
        if (a == "-fa" || a == "--flash-attn") {
            p.flash_attn = true;
            continue;
        }
        if (i + 1 >= argc) {
            err = "missing value for " + a;
            return false;
        }
        const std::string v = argv[++i];
        bool ok = true;
        if (a == "-m") p.model = v;
        else if (a == "-f") p.file = v;
        else if (a == "-c") ok = parse_int(v, p.n_ctx) && p.n_ctx >= 2;
        else if (a == "-b") ok = parse_int(v, p.n_batch) && p.n_batch > 0;
        else if (a == "-ngl") ok = parse_int(v, p.n_gpu_layers) && p.n_gpu_layers >= 0;
        else if (a == "-t") ok = parse_int(v, p.n_threads) && p.n_threads > 0;
        else if (a == "--chunks") ok = parse_int(v, p.n_chunks);
        else if (a == "-sm" || a == "--split-mode") ok = llm_split_mode_from_name(v, &p.split_mode);
        else if (a == "-ts" || a == "--tensor-split") ok = llm_tensor_split_parse(v, &p.tensor_split);
        else if (a == "-ctk" || a == "--cache-type-k" || a == "-ctv" || a == "--cache-type-v") {
            if (!llm_kv_type_from_name(v, a == "-ctk" || a == "--cache-type-k" ? &p.type_k : &p.type_v)) {
                err = "unknown cache type '" + v + "' for " + a + " (" + llm_kv_type_names() + ")";
                return false;
            }
        } else {
            err = "unknown argument " + a;
            return false;
        }
        if (!ok) {
            err = "invalid value '" + v + "' for " + a;
            return false;
        }
    }
    if (p.model.empty()) err = "no model given (-m)";
    else if (ggml_is_quantized(p.type_v) && !p.flash_attn)
        err = std::string("a quantized V cache (-ctv ") + ggml_type_name(p.type_v) + ") needs flash attention (-fa)";
    else if (p.file.empty()) err = "no text file given (-f)";
    return err.empty();
}

// log-softmax of logits at token `tok`, in double
double log_prob(const float * logits, int n_vocab, int tok) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp((double) logits[i] - mx);
    return (double) logits[tok] - mx - std::log(sum);
}

}  // namespace

int main(int argc, char ** argv) {
    ppl_params pp;
    std::string err;
    if (!parse_args(argc, argv, pp, err)) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    std::ifstream f(pp.file, std::ios::binary);
    if (!f) {
        fprintf(stderr, "error: cannot open '%s'\n", pp.file.c_str());
        return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();

    llm_model_params mp;
    mp.n_gpu_layers = pp.n_gpu_layers;
    mp.split_mode = pp.split_mode;
    mp.tensor_split = pp.tensor_split;
    llm_model * model = llm_model_load(pp.model.c_str(), mp, &err);
    if (!model) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    const llm_vocab & vocab = llm_model_get_vocab(model);
    if (vocab.n_vocab() == 0) {
        fprintf(stderr, "error: %s has no tokenizer\n", pp.model.c_str());
        llm_model_free(model);
        return 1;
    }
    const int n_vocab = llm_model_hparams(model).n_vocab;
    const int n_ctx = pp.n_ctx;
    const std::vector<int32_t> tokens = llm_tokenize(vocab, text, true, false);
    if ((int) tokens.size() < 2 * n_ctx) {
        fprintf(stderr, "error: you need at least %d tokens to evaluate perplexity with a context of %d (the text has %zu)\n",
                2 * n_ctx, n_ctx, tokens.size());
        llm_model_free(model);
        return 1;
    }
    int n_chunk = (int) tokens.size() / n_ctx;
    if (pp.n_chunks >= 0 && pp.n_chunks < n_chunk) n_chunk = pp.n_chunks;

    llm_context_params cp;
    cp.n_ctx = n_ctx;
    cp.n_batch = pp.n_batch > 0 ? std::min(pp.n_batch, n_ctx) : n_ctx;
    cp.n_threads = pp.n_threads;
    cp.all_logits = true;
    cp.flash_attn = pp.flash_attn;
    cp.type_k = pp.type_k;
    cp.type_v = pp.type_v;
    llm_context * ctx = llm_context_new(model, cp, &err);
    if (!ctx) {
        fprintf(stderr, "error: %s\n", err.c_str());
        llm_model_free(model);
        return 1;
    }
    fprintf(stderr, "%s: model %s\n", __func__, llm_model_desc_ftype(model).c_str());
    llm_type_summary_print(stderr, llm_model_type_summary(model), "  ");
    const llm_perf mem = llm_get_perf(ctx);
    fprintf(stderr, "%s: %zu tokens, %d chunks of %d, batch %d; KV cache K %s %.2f MiB, V %s %.2f MiB%s\n", __func__,
            tokens.size(), n_chunk, n_ctx, cp.n_batch, ggml_type_name(cp.type_k), mem.kv_k_bytes / 1048576.0,
            ggml_type_name(cp.type_v), mem.kv_v_bytes / 1048576.0, cp.flash_attn ? ", flash attention" : "");

    const int first = n_ctx / 2;
    const bool add_bos = vocab.add_bos && vocab.bos >= 0;
    double nll = 0, nll2 = 0;
    long count = 0;
    const int64_t t0 = ggml_time_us();
    for (int ic = 0; ic < n_chunk; ++ic) {
        std::vector<int32_t> chunk(tokens.begin() + (size_t) ic * n_ctx, tokens.begin() + (size_t) (ic + 1) * n_ctx);
        if (add_bos) chunk[0] = vocab.bos;
        llm_kv_clear(ctx);
        if (!llm_decode(ctx, chunk.data(), n_ctx, &err)) {
            fprintf(stderr, "\nerror: chunk %d: %s\n", ic + 1, err.c_str());
            llm_context_free(ctx);
            llm_model_free(model);
            return 1;
        }
        // score with the original tokens (the BOS replacement only changes the input)
        const int32_t * orig = tokens.data() + (size_t) ic * n_ctx;
        for (int j = first; j < n_ctx - 1; ++j) {
            const double v = -log_prob(llm_get_logits_ith(ctx, j), n_vocab, orig[j + 1]);
            nll += v;
            nll2 += v * v;
            ++count;
        }
        if (ic == 0) {
            const double t = (ggml_time_us() - t0) / 1e6;
            fprintf(stderr, "%s: %.2f seconds per pass - ETA %.2f minutes\n", __func__, t, t * n_chunk / 60.0);
        }
        printf("[%d]%.4lf,", ic + 1, std::exp(nll / count));
        fflush(stdout);
    }
    printf("\n");
    const double mean = nll / count;
    const double ppl = std::exp(mean);
    double var = nll2 / count - mean * mean;
    if (var > 0 && count > 1) {
        printf("Final estimate: PPL = %.4lf +/- %.5lf\n", ppl, std::sqrt(var / (count - 1)) * ppl);
    } else {
        printf("Final estimate: PPL = %.4lf\n", ppl);
    }
    llm_context_free(ctx);
    llm_model_free(model);
    return 0;
}
