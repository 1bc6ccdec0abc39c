// server.h - llm-server, an OpenAI-compatible HTTP server over one llm_context shared by -np slots.
// main.cpp parses the flags and loads the model, slots.* run the continuous-batching scheduler,
// oai.* turn OpenAI requests into tasks and tasks' output into OpenAI JSON, http.cpp holds the routes,
// metrics.cpp the Prometheus text.
//
//   srv_params p;            // from srv_params_parse(argc, argv, p, &err)
//   srv_state st{...};       // model, vocab, template, scheduler
//   return srv_http_run(st); // blocks until SIGINT/SIGTERM
#pragma once

#include "chat.h"
#include "ggml.h"
#include "llm.h"
#include "slots.h"

#include <cstddef>
#include <string>

struct srv_params {
    std::string model;                  // -m
    std::string alias;                  // --alias (default: the model file's basename)
    std::string host = "127.0.0.1";     // --host
    int         port = 8080;            // --port
    std::string api_key;                // --api-key: Bearer token for everything but /health and /
    std::string chat_template;          // --chat-template llama2|llama3 ("": detect from the GGUF)
    bool        jinja = false;          // --jinja: render the GGUF's Jinja template
    int         n_parallel = 1;         // -np: slots (sequences) in the context
    int         n_ctx = 4096;           // -c: cells of the KV cache, shared by all slots (n_ctx / np each)
    int         n_batch = 512;          // -b: most tokens per step (decodes + prompt chunks)
    int         n_predict = -1;         // -n: default max_tokens (-1: until EOG or the slot is full)
    int         n_threads = 0;          // -t
    int         n_gpu_layers = 0;       // -ngl
    llm_split_mode split_mode = LLM_SPLIT_LAYER;  // -sm
    std::vector<float> tensor_split;              // -ts
    int         main_gpu = 0;           // -mg
    bool        use_repack = true;      // --no-repack / -nr: CPU weights as in the file (llm_model_params)
    int         flash_attn = -1;        // -fa [on|off|auto]: 1, 0, -1 (auto: on where the backend has the kernel)
    ggml_type   type_k = GGML_TYPE_F16; // -ctk
    ggml_type   type_v = GGML_TYPE_F16; // -ctv
    size_t      max_body = 8u << 20;    // --max-body: larger request bodies get 413
    int         n_http_threads = 0;     // --threads-http (0: 2 * np + 8, at least 32)
    bool        show_help = false;
};

// Returns false with a one-line err naming the flag.
bool        srv_params_parse(int argc, const char * const * argv, srv_params & p, std::string * err);
std::string srv_params_usage(const char * prog);

struct srv_state {
    const srv_params & params;
    llm_model *        model;
    const llm_vocab &  vocab;
    llm_chat_template  tmpl;
    std::string        jinja_template;  // non-empty: chat prompts are rendered from it (llm_chat_apply_jinja)
    srv_scheduler &    sched;
    long               t_start = 0;     // unix seconds, for /v1/models "created"
};

int         srv_http_run(srv_state & st);             // serves until SIGINT/SIGTERM; returns the exit code
std::string srv_metrics_text(const srv_state & st);   // Prometheus text exposition format
