// args.cpp - the `main` flag parser (see args.h). One table of options serves the parser and --help; every
// value is range-checked, and each error is one line that names the flag.
#include "args.h"

#include "llm.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>

namespace {

struct parser {
    int argc;
    const char * const * argv;
    int i = 1;
    std::string * err;
    bool no_conversation = false;  // -no-cnv given: -st does not turn chat mode on

    // one line: control bytes from the user's arguments (newlines, escape sequences) are shown as \xNN
    bool fail(const std::string & msg) {
        if (!err) return false;
        err->clear();
        for (const char c : msg) {
            if ((unsigned char) c < 0x20 || c == 0x7f) {
                char buf[8];
                snprintf(buf, sizeof(buf), "\\x%02x", (unsigned char) c);
                *err += buf;
            } else {
                *err += c;
            }
        }
        return false;
    }
    bool value(const std::string & flag, std::string & out) {
        if (i + 1 >= argc) return fail("missing value for " + flag);
        out = argv[++i];
        return true;
    }
    bool int_value(const std::string & flag, int & out, long lo, long hi) {
        std::string s;
        if (!value(flag, s)) return false;
        char * end = nullptr;
        errno = 0;
        const long v = std::strtol(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno == ERANGE) return fail("invalid integer '" + s + "' for " + flag);
        if (v < lo || v > hi) {
            return fail("value " + s + " for " + flag + " out of range [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
        }
        out = (int) v;
        return true;
    }
    bool float_value(const std::string & flag, float & out, double lo, double hi) {
        std::string s;
        if (!value(flag, s)) return false;
        char * end = nullptr;
        errno = 0;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
            return fail("invalid number '" + s + "' for " + flag);
        }
        if (v < lo || v > hi) {
            std::ostringstream os;
            os << "value " << s << " for " << flag << " out of range [" << lo << ", " << hi << "]";
            return fail(os.str());
        }
        out = (float) v;
        return true;
    }
    // FILE: its path into path, its bytes into text (strip_newline: one trailing '\n' dropped, as llama.cpp's -f)
    bool file_value(const std::string & flag, const char * what, std::string & path, std::string & text,
                    bool strip_newline) {
        if (!value(flag, path)) return false;
        std::ifstream f(path, std::ios::binary);
        std::ostringstream ss;
        if (f) ss << f.rdbuf();
        if (!f || f.bad()) return fail(std::string("cannot read ") + what + " file '" + path + "' (" + flag + ")");
        text = ss.str();
        if (strip_newline && !text.empty() && text.back() == '\n') text.pop_back();
        return true;
    }
    // [on|off|auto] (llama.cpp's words: on/enabled/true/1, off/disabled/false/0, auto/-1). The value is optional:
    // a bare flag (last, or followed by another flag) means on, as the older `-fa` did.
    bool switch_value(const std::string & flag, llm_cli_switch & out) {
        if (i + 1 < argc) {
            const std::string v = argv[i + 1];
            if (v == "on" || v == "enabled" || v == "true" || v == "1") {
                out = LLM_CLI_SWITCH_ON;
            } else if (v == "off" || v == "disabled" || v == "false" || v == "0") {
                out = LLM_CLI_SWITCH_OFF;
            } else if (v == "auto" || v == "-1") {
                out = LLM_CLI_SWITCH_AUTO;
            } else if (!v.empty() && v[0] != '-') {
                return fail("unknown value '" + v + "' for " + flag + " (on, off, auto)");
            } else {
                out = LLM_CLI_SWITCH_ON;
                return true;
            }
            ++i;
            return true;
        }
        out = LLM_CLI_SWITCH_ON;
        return true;
    }
};

enum cli_group { CLI_GROUP_COMMON, CLI_GROUP_SAMPLING, CLI_GROUP_MAIN };

using cli_handler = std::function<bool(parser & ps, const std::string & flag, llm_cli_params & p)>;

struct cli_opt {
    std::vector<std::string> names;  // the positive forms first, then "--no-..." ones
    const char * value;              // what follows the flag in --help ("N", "FNAME"), nullptr for none
    cli_group group;
    std::string help;                // ends with the default where there is one
    cli_handler handle;
};

// A negative form ("--no-mmap", "-no-cnv") of a two-way flag.
bool is_negative(const std::string & flag) { return flag.rfind("--no-", 0) == 0 || flag.rfind("-no-", 0) == 0; }

const char * on_off(bool b) { return b ? "enabled" : "disabled"; }

std::string fmt_float(float v) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.2f", v);
    return buf;
}

const char * switch_name(llm_cli_switch s) {
    return s == LLM_CLI_SWITCH_ON ? "on" : s == LLM_CLI_SWITCH_OFF ? "off" : "auto";
}

cli_handler set_flag(bool llm_cli_params::*m) {
    return [m](parser &, const std::string & flag, llm_cli_params & p) {
        p.*m = !is_negative(flag);
        return true;
    };
}
cli_handler set_string(std::string llm_cli_params::*m) {
    return [m](parser & ps, const std::string & flag, llm_cli_params & p) { return ps.value(flag, p.*m); };
}
cli_handler set_int(int llm_cli_params::*m, long lo, long hi) {
    return [=](parser & ps, const std::string & flag, llm_cli_params & p) { return ps.int_value(flag, p.*m, lo, hi); };
}

// a value converted by parse(value, &field); what: the error, %s the value then the flag
template <typename T>
cli_handler set_parsed(T llm_cli_params::*m, bool (*parse)(const std::string &, T *), const char * what) {
    return [=](parser & ps, const std::string & flag, llm_cli_params & p) {
        std::string v;
        if (!ps.value(flag, v)) return false;
        if (parse(v, &(p.*m))) return true;
        std::string msg = what;
        msg.replace(msg.find("%s"), 2, v);
        msg.replace(msg.rfind("%s"), 2, flag); // after the value (which may hold a %s)
        return ps.fail(msg);
    };
}

// The options of `main`. d: default parameters, for the help text.
std::vector<cli_opt> cli_options(const llm_cli_params & d) {
    const llm_sampler_params & ds = d.sampling;
    std::vector<cli_opt> o;
    // ---- common
    o.push_back({{"-h", "--help", "--usage"}, nullptr, CLI_GROUP_COMMON, "print usage and exit",
                 [](parser &, const std::string &, llm_cli_params & p) { return p.show_help = true; }});
    o.push_back({{"-v", "--verbose", "--log-verbose"}, nullptr, CLI_GROUP_COMMON,
                 "log the loader's and the context's details (default: off)", set_flag(&llm_cli_params::verbose)});
    o.push_back({{"--log-disable"}, nullptr, CLI_GROUP_COMMON,
                 "no information lines, timings or library log on stderr; errors and the text stay",
                 set_flag(&llm_cli_params::log_disable)});
    o.push_back({{"--verbose-prompt"}, nullptr, CLI_GROUP_COMMON,
                 "print the prompt's (and each input's) tokens before generation (default: off)",
                 set_flag(&llm_cli_params::verbose_prompt)});
    o.push_back({{"-m", "--model"}, "FNAME", CLI_GROUP_COMMON, "model path (GGUF)", set_string(&llm_cli_params::model)});
    o.push_back({{"-p", "--prompt"}, "PROMPT", CLI_GROUP_COMMON, "prompt to start generation with",
                 set_string(&llm_cli_params::prompt)});
    o.push_back({{"-f", "--file"}, "FNAME", CLI_GROUP_COMMON,
                 "a file containing the prompt (one trailing newline dropped)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.file_value(flag, "prompt", p.prompt_file, p.prompt, true);
                 }});
    o.push_back({{"-bf", "--binary-file"}, "FNAME", CLI_GROUP_COMMON, "a file containing the prompt, byte for byte",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.file_value(flag, "prompt", p.prompt_file, p.prompt, false);
                 }});
    o.push_back({{"-e", "--escape", "--no-escape"}, nullptr, CLI_GROUP_COMMON,
                 "process escapes (\\n, \\r, \\t, \\', \\\", \\\\, \\xNN) in the prompt, --in-prefix, --in-suffix, "
                 "-r and interactive input (default: " +
                     std::string(d.escape ? "true" : "false") + ")",
                 set_flag(&llm_cli_params::escape)});
    o.push_back({{"-n", "--predict", "--n-predict"}, "N", CLI_GROUP_COMMON,
                 "number of tokens to predict (default: " + std::to_string(d.n_predict) +
                     ", -1 = until end of text or a full context)",
                 set_int(&llm_cli_params::n_predict, -1, 1 << 30)});
    o.push_back({{"-c", "--ctx-size"}, "N", CLI_GROUP_COMMON,
                 "size of the context (default: the model's, at most 4096; 0 = the model's)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     p.n_ctx_set = true;
                     return ps.int_value(flag, p.n_ctx, 0, 1 << 24);
                 }});
    o.push_back({{"-b", "--batch-size"}, "N", CLI_GROUP_COMMON,
                 "maximum tokens per prompt step (default: " + std::to_string(d.n_batch) + ")",
                 set_int(&llm_cli_params::n_batch, 1, 1 << 16)});
    o.push_back({{"-t", "--threads"}, "N", CLI_GROUP_COMMON, "CPU threads (default: all cores)",
                 set_int(&llm_cli_params::n_threads, 1, 1024)});
    o.push_back({{"--keep"}, "N", CLI_GROUP_COMMON,
                 "tokens of the prompt kept by a context shift (default: " + std::to_string(d.n_keep) +
                     ", -1 = all)",
                 set_int(&llm_cli_params::n_keep, -1, 1 << 24)});
    o.push_back({{"-fa", "--flash-attn"}, "[on|off|auto]", CLI_GROUP_COMMON,
                 std::string("flash attention (default: '") + switch_name(d.flash_attn) +
                     "'; auto: on unless a CUDA layer's head size "
                     "has no CUDA kernel; a bare -fa means on; a quantized V cache needs it)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.switch_value(flag, p.flash_attn);
                 }});
    const cli_handler cache_type = [](parser & ps, const std::string & flag, llm_cli_params & p) {
        std::string name;
        ggml_type t;
        if (!ps.value(flag, name)) return false;
        if (!llm_kv_type_from_name(name, &t)) {
            return ps.fail("unknown cache type '" + name + "' for " + flag + " (" + llm_kv_type_names() + ")");
        }
        if (flag != "-ctv" && flag != "--cache-type-v") p.cache_type_k = t;
        if (flag != "-ctk" && flag != "--cache-type-k") p.cache_type_v = t;
        return true;
    };
    o.push_back({{"-ctk", "--cache-type-k"}, "TYPE", CLI_GROUP_COMMON,
                 std::string("KV cache type for K: ") + llm_kv_type_names() + ", any case (default: " +
                     ggml_type_name(d.cache_type_k) + ")",
                 cache_type});
    o.push_back({{"-ctv", "--cache-type-v"}, "TYPE", CLI_GROUP_COMMON,
                 std::string("KV cache type for V, the same (default: ") + ggml_type_name(d.cache_type_v) + ")",
                 cache_type});
    o.push_back({{"--cache-type"}, "TYPE", CLI_GROUP_COMMON, "sets both -ctk and -ctv", cache_type});
    o.push_back({{"-ngl", "--gpu-layers", "--n-gpu-layers"}, "N", CLI_GROUP_COMMON,
                 "layers stored in VRAM (default: " + std::to_string(d.n_gpu_layers) + "; > n_layer: the output too)",
                 set_int(&llm_cli_params::n_gpu_layers, 0, 1 << 20)});
    o.push_back({{"-mg", "--main-gpu"}, "INDEX", CLI_GROUP_COMMON,
                 "the GPU for the offloaded layers with -sm none, or the one holding the output with -sm row "
                 "(default: " + std::to_string(d.main_gpu) + ")",
                 set_int(&llm_cli_params::main_gpu, 0, 1023)});
    o.push_back({{"-sm", "--split-mode"}, "{none,layer,row}", CLI_GROUP_COMMON,
                 "how the offloaded layers spread over several GPUs: none (all on -mg), layer (consecutive layers on "
                 "consecutive GPUs, by -ts; default), row (tensor parallelism: each layer's KV heads and FFN columns "
                 "split by -ts, the GPUs' partial sums added by NCCL all-reduces; layers past -ngl whole on the CPU)",
                 set_parsed(&llm_cli_params::split_mode, llm_split_mode_from_name,
                            "unknown split mode '%s' for %s (none, layer, row)")});
    o.push_back({{"-ts", "--tensor-split"}, "N0,N1,...", CLI_GROUP_COMMON,
                 "each GPU's share of the layers (-sm layer) or of each layer (-sm row), e.g. 3,1 (default: by free "
                 "memory)",
                 set_parsed(&llm_cli_params::tensor_split, llm_tensor_split_parse,
                            "bad value '%s' for %s (non-negative numbers: 3,1)")});
    o.push_back({{"--mmap", "--no-mmap"}, nullptr, CLI_GROUP_COMMON,
                 "CPU weights used in place from the memory-mapped file (--mmap) or read into memory (--no-mmap) "
                 "(default: read into memory when some layer runs on the CPU and the model takes at most half of the "
                 "available memory, else mapped)",
                 [](parser &, const std::string & flag, llm_cli_params & p) {
                     p.use_mmap = is_negative(flag) ? 0 : 1;
                     return true;
                 }});
    o.push_back({{"--repack", "--no-repack", "-nr"}, nullptr, CLI_GROUP_COMMON,
                 std::string("store CPU weights of types the CPU decodes faster repacked (q4_0, q4_K, q6_K on AVX2: "
                             "8-row groups) (default: ") + on_off(d.use_repack) + ")",
                 [](parser &, const std::string & flag, llm_cli_params & p) {
                     p.use_repack = !(is_negative(flag) || flag == "-nr");
                     return true;
                 }});
    o.push_back({{"--mlock"}, nullptr, CLI_GROUP_COMMON,
                 "keep the model in RAM (mlockall; a warning if the system refuses)",
                 set_flag(&llm_cli_params::use_mlock)});
    o.push_back({{"-np", "--parallel"}, "N", CLI_GROUP_COMMON,
                 "sequences decoded at once (default: " + std::to_string(d.n_parallel) + "; the server's slots)",
                 set_int(&llm_cli_params::n_parallel, 1, 64)});
    // ---- sampling
    o.push_back({{"-s", "--seed"}, "SEED", CLI_GROUP_SAMPLING, "RNG seed (default: -1, a random seed)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     std::string s;
                     if (!ps.value(flag, s)) return false;
                     char * end = nullptr;
                     errno = 0;
                     const long long v = std::strtoll(s.c_str(), &end, 10);
                     if (s.empty() || *end || errno == ERANGE || v < -1 || v > 0xFFFFFFFFLL) {
                         return ps.fail("invalid seed '" + s + "' for " + flag + " (0 .. 4294967295, or -1 for random)");
                     }
                     p.sampling.seed = v == -1 ? 0xFFFFFFFFu : (uint32_t) v;
                     return true;
                 }});
    o.push_back({{"--ignore-eos"}, nullptr, CLI_GROUP_SAMPLING,
                 "ignore end-of-generation tokens (their logits are -inf) and go on to -n",
                 set_flag(&llm_cli_params::ignore_eos)});
    o.push_back({{"--temp"}, "N", CLI_GROUP_SAMPLING, "temperature (default: " + fmt_float(ds.temp) + "; 0 = greedy)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.float_value(flag, p.sampling.temp, 0.0, 100.0);
                 }});
    o.push_back({{"--top-k"}, "N", CLI_GROUP_SAMPLING,
                 "top-k sampling (default: " + std::to_string(ds.top_k) + ", 0 = disabled)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.int_value(flag, p.sampling.top_k, 0, 1 << 24);
                 }});
    o.push_back({{"--top-p"}, "N", CLI_GROUP_SAMPLING,
                 "top-p sampling (default: " + fmt_float(ds.top_p) + ", 1.0 = disabled)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.float_value(flag, p.sampling.top_p, 0.0, 1.0);
                 }});
    o.push_back({{"--min-p"}, "N", CLI_GROUP_SAMPLING,
                 "min-p sampling (default: " + fmt_float(ds.min_p) + ", 0.0 = disabled)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.float_value(flag, p.sampling.min_p, 0.0, 1.0);
                 }});
    o.push_back({{"--repeat-penalty"}, "N", CLI_GROUP_SAMPLING,
                 "penalize repeated tokens (default: " + fmt_float(ds.repeat_penalty) + ", 1.0 = disabled)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     if (!ps.float_value(flag, p.sampling.repeat_penalty, 0.0, 100.0)) return false;
                     if (p.sampling.repeat_penalty == 0.0f) return ps.fail("--repeat-penalty must be > 0");
                     return true;
                 }});
    o.push_back({{"--repeat-last-n"}, "N", CLI_GROUP_SAMPLING,
                 "last n tokens the penalty considers (default: " + std::to_string(ds.repeat_last_n) +
                     ", 0 = disabled, -1 = ctx_size)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.int_value(flag, p.sampling.repeat_last_n, -1, 1 << 24);
                 }});
    o.push_back({{"--grammar"}, "GRAMMAR", CLI_GROUP_SAMPLING, "BNF-like grammar to constrain generations",
                 set_string(&llm_cli_params::grammar)});
    o.push_back({{"--grammar-file"}, "FNAME", CLI_GROUP_SAMPLING, "file to read the grammar from",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.file_value(flag, "grammar", p.grammar_file, p.grammar, false);
                 }});
    o.push_back({{"-j", "--json-schema"}, "SCHEMA", CLI_GROUP_SAMPLING, "JSON schema to constrain generations",
                 set_string(&llm_cli_params::json_schema)});
    o.push_back({{"-jf", "--json-schema-file"}, "FILE", CLI_GROUP_SAMPLING, "file containing a JSON schema",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.file_value(flag, "JSON schema", p.json_schema_file, p.json_schema, false);
                 }});
    // ---- main
    o.push_back({{"-sys", "--system-prompt", "--system"}, "PROMPT", CLI_GROUP_MAIN, "system prompt (chat mode)",
                 set_string(&llm_cli_params::system_prompt)});
    o.push_back({{"-sysf", "--system-prompt-file"}, "FNAME", CLI_GROUP_MAIN,
                 "a file containing the system prompt (one trailing newline dropped)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     std::string path;
                     return ps.file_value(flag, "system prompt", path, p.system_prompt, true);
                 }});
    o.push_back({{"--display-prompt", "--no-display-prompt"}, nullptr, CLI_GROUP_MAIN,
                 std::string("print the prompt before the generated text (default: ") +
                     (d.display_prompt ? "true" : "false") + ")",
                 set_flag(&llm_cli_params::display_prompt)});
    o.push_back({{"-co", "--color"}, "[on|off|auto]", CLI_GROUP_MAIN,
                 std::string("color the prompt (yellow) and the user's input (green) apart from the generated text "
                             "(default: '") +
                     switch_name(d.color) + "'; auto: stdout is a terminal, NO_COLOR unset, TERM not dumb)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) { return ps.switch_value(flag, p.color); }});
    o.push_back({{"-sp", "--special"}, nullptr, CLI_GROUP_MAIN,
                 "special tokens: parsed in the prompt, printed in the output (default: off)",
                 set_flag(&llm_cli_params::special)});
    o.push_back({{"-i", "--interactive"}, nullptr, CLI_GROUP_MAIN,
                 "interactive: when generation stops (-r, end of text, -n), read a line from stdin and go on; "
                 "EOF ends; a line ending in '\\' continues on the next, one ending in '/' submits without newline",
                 set_flag(&llm_cli_params::interactive)});
    o.push_back({{"-if", "--interactive-first"}, nullptr, CLI_GROUP_MAIN,
                 "interactive, and wait for input right after the prompt (default: off)",
                 set_flag(&llm_cli_params::interactive_first)});
    o.push_back({{"-mli", "--multiline-input"}, nullptr, CLI_GROUP_MAIN,
                 "input lines go on until one ends in '\\' (instead of a '\\' continuing the line)",
                 set_flag(&llm_cli_params::multiline_input)});
    o.push_back({{"-r", "--reverse-prompt"}, "PROMPT", CLI_GROUP_MAIN,
                 "stop generating when the output ends with PROMPT (repeatable); interactive and chat modes "
                 "hand control back to the user, otherwise the program ends",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     std::string s;
                     if (!ps.value(flag, s)) return false;
                     if (s.empty()) return ps.fail("empty reverse prompt for " + flag);
                     p.reverse_prompts.push_back(s);
                     return true;
                 }});
    o.push_back({{"--in-prefix"}, "STRING", CLI_GROUP_MAIN, "string to prefix user inputs with (default: empty)",
                 set_string(&llm_cli_params::input_prefix)});
    o.push_back({{"--in-suffix"}, "STRING", CLI_GROUP_MAIN, "string to suffix after user inputs with (default: empty)",
                 set_string(&llm_cli_params::input_suffix)});
    o.push_back({{"--in-prefix-bos"}, nullptr, CLI_GROUP_MAIN, "prefix BOS to user inputs, before --in-prefix",
                 set_flag(&llm_cli_params::input_prefix_bos)});
    o.push_back({{"-cnv", "--conversation", "-no-cnv", "--no-conversation"}, nullptr, CLI_GROUP_MAIN,
                 "chat mode: each input line is a user message in the chat template; --in-prefix/--in-suffix "
                 "unused (default: off; unlike llama.cpp, not turned on by a model's chat template)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     p.conversation = !is_negative(flag);
                     ps.no_conversation = !p.conversation;
                     return true;
                 }});
    o.push_back({{"-st", "--single-turn"}, nullptr, CLI_GROUP_MAIN,
                 "chat for one turn, then exit (implies -cnv; the turn is -p if given, else one input line)",
                 set_flag(&llm_cli_params::single_turn)});
    o.push_back({{"--chat-template"}, "NAME", CLI_GROUP_MAIN,
                 "chat template: llama2 or llama3 (default: the model's, recognised from its metadata)",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     if (!ps.value(flag, p.chat_template)) return false;
                     if (p.chat_template != "llama2" && p.chat_template != "llama3") {
                         return ps.fail("unknown chat template '" + p.chat_template + "' (llama2, llama3)");
                     }
                     return true;
                 }});
    o.push_back({{"--chat-template-file"}, "FNAME", CLI_GROUP_MAIN, "a file containing a Jinja chat template",
                 [](parser & ps, const std::string & flag, llm_cli_params & p) {
                     return ps.file_value(flag, "chat template", p.chat_template_file, p.chat_template_source, false);
                 }});
    o.push_back({{"--jinja", "--no-jinja"}, nullptr, CLI_GROUP_MAIN,
                 std::string("use the Jinja template engine for chat (default: ") + on_off(d.jinja) + ")",
                 set_flag(&llm_cli_params::jinja)});
    o.push_back({{"--context-shift", "--no-context-shift"}, nullptr, CLI_GROUP_MAIN,
                 std::string("when the context is full, keep --keep N tokens and drop half the rest (default: ") +
                     on_off(d.context_shift) + ")",
                 set_flag(&llm_cli_params::context_shift)});
    o.push_back({{"--warmup", "--no-warmup"}, nullptr, CLI_GROUP_MAIN,
                 std::string("one empty decode before the prompt, then a cleared cache (default: ") +
                     on_off(d.warmup) + ")",
                 set_flag(&llm_cli_params::warmup)});
    o.push_back({{"--dump-graph"}, "PREFIX", CLI_GROUP_MAIN,
                 "write PREFIX.prompt.{dot,json} and PREFIX.decode.{dot,json}", set_string(&llm_cli_params::dump_graph)});
    return o;
}

}  // namespace

bool llm_cli_parse(int argc, const char * const * argv, llm_cli_params & p, std::string * err) {
    const std::vector<cli_opt> opts = cli_options(llm_cli_params());
    std::unordered_map<std::string, const cli_opt *> by_name;
    for (const cli_opt & o : opts) {
        for (const std::string & n : o.names) by_name[n] = &o;
    }
    parser ps{argc, argv, 1, err};
    for (; ps.i < argc; ++ps.i) {
        std::string a = argv[ps.i];
        if (a.rfind("--", 0) == 0) {
            for (char & c : a) c = c == '_' ? '-' : c;  // --n_predict == --n-predict, as in llama.cpp
        }
        const auto it = by_name.find(a);
        if (it == by_name.end()) {
            return ps.fail((llm_cli_is_unsupported(a) ? "not supported: " : "unknown argument: ") + a);
        }
        if (!it->second->handle(ps, a, p)) return false;
    }
    if (p.interactive_first) p.interactive = true;
    if (p.single_turn && !ps.no_conversation) p.conversation = true;
    if (p.escape) {
        p.prompt = llm_process_escapes(p.prompt);
        p.input_prefix = llm_process_escapes(p.input_prefix);
        p.input_suffix = llm_process_escapes(p.input_suffix);
        for (std::string & r : p.reverse_prompts) r = llm_process_escapes(r);
    }
    if (ggml_is_quantized(p.cache_type_v) && p.flash_attn == LLM_CLI_SWITCH_OFF) {
        return ps.fail(std::string("a quantized V cache (-ctv ") + ggml_type_name(p.cache_type_v) +
                       ") needs flash attention (-fa on or auto)");
    }
    return true;
}

std::string llm_cli_usage(const char * prog) {
    const std::vector<cli_opt> opts = cli_options(llm_cli_params());
    std::ostringstream os;
    os << "usage: " << prog << " -m FNAME [options]\n";
    const char * titles[] = {"common params", "sampling params", "example-specific params"};
    for (int g = CLI_GROUP_COMMON; g <= CLI_GROUP_MAIN; ++g) {
        os << "\n----- " << titles[g] << " -----\n\n";
        for (const cli_opt & o : opts) {
            if (o.group != g) continue;
            std::string forms;
            for (const std::string & n : o.names) forms += (forms.empty() ? "" : ", ") + n;
            if (o.value) forms += std::string(" ") + o.value;
            const size_t col = 34, width = 120;
            // the help text, word-wrapped into the column right of the forms (its own '\n's kept)
            std::vector<std::string> lines;
            std::istringstream paragraphs(o.help);
            std::string para;
            while (std::getline(paragraphs, para)) {
                std::istringstream words(para);
                std::string w, cur;
                while (words >> w) {
                    if (!cur.empty() && col + cur.size() + 1 + w.size() > width) {
                        lines.push_back(cur);
                        cur.clear();
                    }
                    cur += (cur.empty() ? "" : " ") + w;
                }
                lines.push_back(cur);
            }
            if (forms.size() + 4 > col) {  // at least two spaces before the help
                os << "  " << forms << "\n";
            } else {
                os << "  " << forms << std::string(col - 2 - forms.size(), ' ') << lines[0] << "\n";
                lines.erase(lines.begin());
            }
            for (const std::string & l : lines) os << std::string(col, ' ') << l << "\n";
        }
    }
    os << "\nllama.cpp flags this program does not implement (--lora, -md, -hf, ...) fail with 'not supported'.\n";
    return os.str();
}

std::string llm_process_escapes(const std::string & s) {
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\' || i + 1 == s.size()) {
            out += s[i];
            continue;
        }
        const char c = s[i + 1];
        const char simple = c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c == '\'' || c == '"' || c == '\\' ? c : 0;
        if (simple) {
            out += simple;
            ++i;
        } else if (c == 'x' && i + 3 < s.size() && hex(s[i + 2]) >= 0 && hex(s[i + 3]) >= 0) {
            out += (char) (hex(s[i + 2]) * 16 + hex(s[i + 3]));
            i += 3;
        } else {
            out += '\\';  // unknown escape: the backslash stays, the next character is copied as usual
        }
    }
    return out;
}

long llm_utf8_invalid_at(const std::string & s) {
    const auto * b = (const unsigned char *) s.data();
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = b[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return (long) i;
        if (i + len > n) return (long) i;
        for (size_t k = 1; k < len; ++k) {
            if ((b[i + k] & 0xC0) != 0x80) return (long) i;
            cp = (cp << 6) | (b[i + k] & 0x3F);
        }
        // overlong, surrogates, out of range
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF)) {
            return (long) i;
        }
        i += len;
    }
    return -1;
}
