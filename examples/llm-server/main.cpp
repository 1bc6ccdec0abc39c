// llm-server - an OpenAI-compatible HTTP server with continuous batching over -np slots.
//   llm-server -m model.gguf -np 4 -c 8192 --port 8080 [--api-key KEY]
//   curl http://127.0.0.1:8080/v1/chat/completions -d '{"messages": [{"role": "user", "content": "Hi"}]}'
// The web chat is at http://127.0.0.1:8080/. docs/serving.md describes the endpoints and flags.
#include "server.h"

#include "model-info.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

static int fail(const std::string & msg) {
    fprintf(stderr, "error: %s\n", msg.c_str());
    return 1;
}

std::string srv_params_usage(const char * prog) {
    std::string u = "usage: ";
    u += prog;
    u += R"( -m MODEL.gguf [options]

  -m,   --model FILE         GGUF model
        --alias NAME         model name in the API (default: the file's basename)
        --host ADDR          address to listen on (default: 127.0.0.1)
        --port N             port (default: 8080; 0: any free port, printed at start)
        --api-key KEY        require "Authorization: Bearer KEY" (all but / and /health)
  -np,  --parallel N         slots: requests decoded together (1..64, default: 1)
  -c,   --ctx-size N         KV cache cells shared by the slots, n_ctx / np each (default: 4096)
  -b,   --batch-size N       most tokens per step: decodes first, then prompt chunks (default: 512)
  -n,   --n-predict N        default max_tokens (-1: until end of text or the slot is full)
        --chat-template NAME llama2 | llama3 (default: from the model's tokenizer.chat_template)
        --jinja              render the model's Jinja chat template (also used, without the flag,
                             when the built-in templates do not recognise it)
  -t,   --threads N          CPU threads (default: all)
  -ngl, --n-gpu-layers N     layers on the GPU
  -sm,  --split-mode MODE    several GPUs: none (-mg's alone), layer (default: consecutive layers, by -ts) or row
                             (tensor parallelism: every layer's heads and FFN columns split, NCCL all-reduces)
  -ts,  --tensor-split N0,N1 each GPU's share of the layers, or with -sm row of each layer (default: free memory)
  -mg,  --main-gpu N         the GPU with -sm none, or the one with the output with -sm row (default 0)
  -nr,  --no-repack          CPU weights as stored in the file (default: q4_0, q4_K, q6_K in 8-row groups on AVX2)
  -fa,  --flash-attn [on|off|auto]  fused attention (default auto: on where the backend has the kernel)
  -ctk, --cache-type-k TYPE  K cache type: )";
    u += llm_kv_type_names();
    u += R"(
  -ctv, --cache-type-v TYPE  V cache type (quantized needs -fa)
        --max-body BYTES     larger request bodies get 413 (default: 8388608)
        --threads-http N     HTTP worker threads (default: max(32, 2 * np + 8))
  -h,   --help
)";
    return u;
}

bool srv_params_parse(int argc, const char * const * argv, srv_params & p, std::string * err) {
    auto need = [&](int & i) -> const char * {
        if (i + 1 >= argc) {
            *err = std::string(argv[i]) + " needs a value";
            return nullptr;
        }
        return argv[++i];
    };
    auto to_int = [&](const char * flag, const char * v, long lo, long hi, int * out) {
        char * end = nullptr;
        const long x = strtol(v, &end, 10);
        if (!*v || *end || x < lo || x > hi) {
            *err = std::string(flag) + ": '" + v + "' is not an integer in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]";
            return false;
        }
        *out = (int) x;
        return true;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char * v = nullptr;
        if (a == "-h" || a == "--help") {
            p.show_help = true;
        } else if (a == "-fa" || a == "--flash-attn") {  // bare -fa = on; else on|off|auto|1|0
            p.flash_attn = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-') {
                const std::string w = argv[++i];
                if (w == "on" || w == "1" || w == "true") p.flash_attn = 1;
                else if (w == "off" || w == "0" || w == "false") p.flash_attn = 0;
                else if (w == "auto") p.flash_attn = -1;
                else {
                    *err = "bad value for -fa: '" + w + "' (on, off or auto)";
                    return false;
                }
            }
        } else if (a == "--jinja") {
            p.jinja = true;
        } else if (a == "-m" || a == "--model") {
            if (!(v = need(i))) return false;
            p.model = v;
        } else if (a == "--alias") {
            if (!(v = need(i))) return false;
            p.alias = v;
        } else if (a == "--host") {
            if (!(v = need(i))) return false;
            p.host = v;
        } else if (a == "--api-key") {
            if (!(v = need(i))) return false;
            p.api_key = v;
        } else if (a == "--chat-template") {
            if (!(v = need(i))) return false;
            p.chat_template = v;
            if (llm_chat_template_from_name(p.chat_template) == LLM_CHAT_TEMPLATE_UNKNOWN) {
                *err = "--chat-template: '" + p.chat_template + "' is not one of llama2, llama3";
                return false;
            }
        } else if (a == "-ctk" || a == "--cache-type-k" || a == "-ctv" || a == "--cache-type-v") {
            if (!(v = need(i))) return false;
            ggml_type & t = (a == "-ctk" || a == "--cache-type-k") ? p.type_k : p.type_v;
            if (!llm_kv_type_from_name(v, &t)) {
                *err = a + ": '" + v + "' is not one of " + llm_kv_type_names();
                return false;
            }
        } else if (a == "--port") {
            if (!(v = need(i)) || !to_int("--port", v, 0, 65535, &p.port)) return false;
        } else if (a == "-np" || a == "--parallel") {
            if (!(v = need(i)) || !to_int("-np", v, 1, 64, &p.n_parallel)) return false;
        } else if (a == "-c" || a == "--ctx-size") {
            if (!(v = need(i)) || !to_int("-c", v, 1, 1 << 24, &p.n_ctx)) return false;
        } else if (a == "-b" || a == "--batch-size") {
            if (!(v = need(i)) || !to_int("-b", v, 1, 1 << 20, &p.n_batch)) return false;
        } else if (a == "-n" || a == "--n-predict") {
            if (!(v = need(i)) || !to_int("-n", v, -1, 1 << 24, &p.n_predict)) return false;
            if (p.n_predict == 0) {
                *err = "-n: 0 tokens; use -1 for no limit";
                return false;
            }
        } else if (a == "-t" || a == "--threads") {
            if (!(v = need(i)) || !to_int("-t", v, 0, 1024, &p.n_threads)) return false;
        } else if (a == "-ngl" || a == "--n-gpu-layers" || a == "--gpu-layers") {
            if (!(v = need(i)) || !to_int("-ngl", v, 0, 1 << 20, &p.n_gpu_layers)) return false;
        } else if (a == "-sm" || a == "--split-mode") {
            if (!(v = need(i))) return false;
            if (!llm_split_mode_from_name(v, &p.split_mode)) {
                *err = std::string("-sm: unknown split mode '") + v + "' (none, layer, row)";
                return false;
            }
        } else if (a == "-ts" || a == "--tensor-split") {
            if (!(v = need(i))) return false;
            if (!llm_tensor_split_parse(v, &p.tensor_split)) {
                *err = std::string("-ts: bad value '") + v + "' (non-negative numbers: 3,1)";
                return false;
            }
        } else if (a == "-mg" || a == "--main-gpu") {
            if (!(v = need(i)) || !to_int("-mg", v, 0, 1023, &p.main_gpu)) return false;
        } else if (a == "--no-repack" || a == "-nr" || a == "--repack") {
            p.use_repack = a == "--repack";
        } else if (a == "--threads-http") {
            if (!(v = need(i)) || !to_int("--threads-http", v, 1, 4096, &p.n_http_threads)) return false;
        } else if (a == "--max-body") {
            int mb = 0;
            if (!(v = need(i)) || !to_int("--max-body", v, 1, 1 << 30, &mb)) return false;
            p.max_body = (size_t) mb;
        } else {
            *err = "unknown flag '" + a + "' (--help lists them)";
            return false;
        }
    }
    if (!p.show_help && p.model.empty()) {
        *err = "no model given (-m FILE.gguf)";
        return false;
    }
    if (p.n_ctx < p.n_parallel) {
        *err = "-c " + std::to_string(p.n_ctx) + " gives less than one cell per slot (-np " + std::to_string(p.n_parallel) + ")";
        return false;
    }
    return true;
}

int main(int argc, char ** argv) {
    // SIGINT/SIGTERM go to the HTTP layer's signal thread (sigwait): block them before any thread starts
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client that closed its socket is a failed write, not the end

    srv_params params;
    std::string err;
    if (!srv_params_parse(argc, argv, params, &err)) return fail(err);
    if (params.show_help) {
        printf("%s", srv_params_usage(argv[0]).c_str());
        return 0;
    }
    if (params.alias.empty()) {
        const size_t slash = params.model.find_last_of('/');
        params.alias = slash == std::string::npos ? params.model : params.model.substr(slash + 1);
    }

    llm_model_params mp;
    mp.n_gpu_layers = params.n_gpu_layers;
    mp.split_mode = params.split_mode;
    mp.tensor_split = params.tensor_split;
    mp.main_gpu = params.main_gpu;
    mp.use_repack = params.use_repack;
    mp.n_ctx_hint = params.n_ctx;  // a -c too large for the GPU fails before the weights upload
    mp.type_k_hint = params.type_k;
    mp.type_v_hint = params.type_v;
    llm_model * model = llm_model_load(params.model.c_str(), mp, &err);
    if (!model) return fail(err);
    const llm_vocab & vocab = llm_model_get_vocab(model);
    if (vocab.n_vocab() == 0) {
        llm_model_free(model);
        return fail(params.model + " has no tokenizer (tokenizer.ggml.model)");
    }

    // chat template: --chat-template, else the GGUF's tokenizer.chat_template: rendered as Jinja with --jinja
    // or when the built-in templates do not know it, else detected (Llama 3 / Llama 2)
    const std::string gguf_template = llm_model_meta(model, "tokenizer.chat_template");
    const bool        known = gguf_template.find("<|start_header_id|>") != std::string::npos ||
                       gguf_template.find("[INST]") != std::string::npos;
    llm_chat_template tmpl = params.chat_template.empty()
                                 ? llm_chat_detect(gguf_template, vocab.find_token("<|start_header_id|>") >= 0)
                                 : llm_chat_template_from_name(params.chat_template);
    std::string jinja_template;
    if (params.chat_template.empty() && !gguf_template.empty() && (params.jinja || !known)) {
        jinja_template = gguf_template;
    } else if (params.jinja) {
        fprintf(stderr, "llm-server: --jinja: %s; using the built-in %s template\n",
                params.chat_template.empty() ? "the model has no tokenizer.chat_template" : "--chat-template given",
                llm_chat_template_name(tmpl));
    }

    llm_context_params cp;
    cp.n_ctx = params.n_ctx;
    cp.n_batch = params.n_batch;
    cp.n_threads = params.n_threads;
    cp.type_k = params.type_k;
    cp.type_v = params.type_v;
    // auto: on where the backend has the kernel; a pool shared by many slots wants it (attention then reads each
    // sequence's own cells, not every cell)
    cp.flash_attn = params.flash_attn == 1 ||
                    (params.flash_attn == -1 && llm_flash_attn_supported(model, params.type_k, params.type_v));
    cp.n_seq_max = params.n_parallel;
    llm_context * ctx = llm_context_new(model, cp, &err);
    if (!ctx) {
        llm_model_free(model);
        return fail(err);
    }
    const int n_slot = llm_n_ctx(ctx) / params.n_parallel;
    fprintf(stderr, "llm-server: model %s (%s), n_ctx %d = %d slots x %d, n_batch %d, chat template %s\n",
            params.alias.c_str(), llm_model_desc_ftype(model).c_str(), llm_n_ctx(ctx), params.n_parallel, n_slot,
            params.n_batch, jinja_template.empty() ? llm_chat_template_name(tmpl) : "jinja (the GGUF's)");
    if (n_slot > llm_model_hparams(model).n_ctx_train) {
        fprintf(stderr, "llm-server: warning: a slot holds %d positions, more than the model was trained on (%d)\n",
                n_slot, llm_model_hparams(model).n_ctx_train);
    }

    int rc = 0;
    {
        srv_scheduler sched(ctx, vocab, {params.n_parallel, params.n_batch});
        sched.start();
        srv_state st{params, model, vocab, tmpl, jinja_template, sched,
                     (long) std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count()};
        rc = srv_http_run(st);
        sched.stop();
    }
    llm_context_free(ctx);
    llm_model_free(model);
    return rc;
}
