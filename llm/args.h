// args.h - command-line parameters of `main`, with llama.cpp's flag names, meanings and defaults where they
// overlap. A llama.cpp flag this program does not implement fails with "not supported: FLAG", any other
// unknown one with "unknown argument: FLAG".
//
//   llm_cli_params p;
//   std::string err;
//   if (!llm_cli_parse(argc, argv, p, &err)) { fprintf(stderr, "error: %s\n", err.c_str()); return 1; }
//   if (p.show_help) { fputs(llm_cli_usage(argv[0]).c_str(), stdout); return 0; }
#pragma once

#include "ggml.h"
#include "llm.h"
#include "sampling.h"

#include <string>
#include <vector>

// A flag that takes on|off|auto (-fa, --color).
enum llm_cli_switch { LLM_CLI_SWITCH_AUTO = -1, LLM_CLI_SWITCH_OFF = 0, LLM_CLI_SWITCH_ON = 1 };

struct llm_cli_params {
    // ---- model, context, backends
    std::string model;            // -m (empty: caller's default)
    int  n_ctx = 0;               // -c (0: model's)
    bool n_ctx_set = false;       // -c given (else min(model's, 4096))
    int  n_batch = 512;           // -b
    int  n_threads = 0;           // -t (0: all cores)
    int  n_gpu_layers = 0;        // -ngl
    int  main_gpu = 0;            // -mg
    llm_split_mode split_mode = LLM_SPLIT_LAYER;  // -sm
    std::vector<float> tensor_split;              // -ts
    int  n_keep = 0;              // --keep (-1: the whole prompt)
    int  n_parallel = 1;          // -np: sequences decoded at once (the server's slots; main decodes one)
    int use_mmap = -1;            // --mmap (1) / --no-mmap (0); -1: llm_model_params' default
    bool use_repack = true;       // --repack / --no-repack, -nr (llm_model_params::use_repack)
    bool use_mlock = false;       // --mlock (best effort: a warning if the system refuses)
    bool context_shift = false;   // --context-shift / --no-context-shift
    bool warmup = true;           // --warmup / --no-warmup: one decode before the prompt, then the cache is cleared
    bool verbose = false;         // -v: the loader's and context's log lines
    bool log_disable = false;     // --log-disable: no information lines, timings or library log (errors stay)
    llm_cli_switch flash_attn = LLM_CLI_SWITCH_AUTO;  // -fa on|off|auto (auto: llm_flash_attn_supported)
    ggml_type cache_type_k = GGML_TYPE_F16;          // -ctk (--cache-type sets both)
    ggml_type cache_type_v = GGML_TYPE_F16;          // -ctv (quantized: flash attention must not be off)

    // ---- prompt and output. With escape on (the default) the parser has already turned \n, \t, \xNN ... into
    // bytes in prompt, input_prefix, input_suffix and reverse_prompts; main does it to interactive input too.
    std::string prompt;           // -p / -f / -bf
    std::string prompt_file;
    std::string system_prompt;    // -sys / -sysf
    int  n_predict = -1;          // -n (-1: until EOS or context full)
    bool escape = true;           // -e / --no-escape
    bool special = false;         // -sp: parse special tokens in the prompt, print them in the output
    bool verbose_prompt = false;  // --verbose-prompt
    bool display_prompt = true;   // --display-prompt / --no-display-prompt
    llm_cli_switch color = LLM_CLI_SWITCH_AUTO;  // -co on|off|auto (auto: stdout is a terminal, NO_COLOR unset)
    std::string dump_graph;       // --dump-graph PREFIX

    // ---- interaction
    bool interactive = false;        // -i
    bool interactive_first = false;  // -if (implies -i): wait for input before generating
    bool multiline_input = false;    // -mli: an input line ending in '\' hands control back (instead of continuing)
    bool conversation = false;       // -cnv / -no-cnv (no automatic chat mode: off unless -cnv or -st)
    bool single_turn = false;        // -st: one chat turn, then exit (implies -cnv unless -no-cnv)
    std::vector<std::string> reverse_prompts;  // -r (repeatable): stop when the output ends with one
    std::string input_prefix;        // --in-prefix
    std::string input_suffix;        // --in-suffix
    bool input_prefix_bos = false;   // --in-prefix-bos

    // ---- chat templates, grammars: parsed and stored here; main does not use them yet
    std::string chat_template;         // --chat-template llama2|llama3
    std::string chat_template_file;    // --chat-template-file FILE
    std::string chat_template_source;  //   its contents (a Jinja template)
    bool jinja = false;                // --jinja / --no-jinja
    std::string grammar;               // --grammar GBNF, or the contents of --grammar-file
    std::string grammar_file;          // --grammar-file FILE
    std::string json_schema;           // -j SCHEMA, or the contents of -jf FILE
    std::string json_schema_file;      // -jf FILE

    // ---- sampling
    llm_sampler_params sampling;
    bool ignore_eos = false;      // --ignore-eos: end-of-generation tokens get logit -inf

    bool show_help = false;
};

// Parse argv (argv[0] is the program). Returns false with a one-line err naming the flag.
bool        llm_cli_parse(int argc, const char * const * argv, llm_cli_params & p, std::string * err);
// --help: flags grouped as llama.cpp's (common / sampling / example-specific), each with its forms and default.
std::string llm_cli_usage(const char * prog);
// True for a flag of llama.cpp's common/arg.cpp that this program does not implement (-md, --lora, ...).
bool        llm_cli_is_unsupported(const std::string & flag);
// llama.cpp's escape processing: \n \r \t \' \" \\ and \xNN become the byte; any other backslash stays as is.
std::string llm_process_escapes(const std::string & s);
// Returns the byte offset of the first invalid UTF-8 sequence, or -1 if s is valid UTF-8.
long        llm_utf8_invalid_at(const std::string & s);
