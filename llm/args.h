// args.h - command-line parameters of `main`, flag-compatible with llama.cpp where they overlap.
//
//   llm_cli_params p;
//   std::string err;
//   if (!llm_cli_parse(argc, argv, p, &err)) { fprintf(stderr, "error: %s\n", err.c_str()); return 1; }
#pragma once

#include "ggml.h"
#include "sampling.h"

#include <string>

struct llm_cli_params {
    std::string model;            // -m (empty: caller's default)
    std::string prompt;           // -p / -f
    std::string prompt_file;
    std::string system_prompt;    // -sys
    std::string chat_template;    // --chat-template llama2|llama3
    std::string dump_graph;       // --dump-graph PREFIX
    int  n_predict = -1;          // -n (-1: until EOS or context full)
    int  n_ctx = 0;               // -c (0: model's)
    bool n_ctx_set = false;       // -c given (else min(model's, 4096))
    int  n_batch = 512;           // -b
    int  n_threads = 0;           // -t (0: all cores)
    int  n_gpu_layers = 0;        // -ngl
    int  n_keep = 0;              // --keep (-1: the whole prompt)
    bool conversation = false;    // -cnv
    bool special = false;         // --special
    bool verbose_prompt = false;  // --verbose-prompt
    bool context_shift = false;   // --context-shift
    bool flash_attn = false;      // -fa
    ggml_type cache_type_k = GGML_TYPE_F16;  // -ctk (--cache-type sets both)
    ggml_type cache_type_v = GGML_TYPE_F16;  // -ctv (quantized: needs -fa)
    bool show_help = false;
    llm_sampler_params sampling;
};

// Parse argv (argv[0] is the program). Returns false with a one-line err naming the flag.
bool        llm_cli_parse(int argc, const char * const * argv, llm_cli_params & p, std::string * err);
std::string llm_cli_usage(const char * prog);
// Returns the byte offset of the first invalid UTF-8 sequence, or -1 if s is valid UTF-8.
long        llm_utf8_invalid_at(const std::string & s);
