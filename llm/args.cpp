// args.cpp - the `main` flag parser (see args.h). Every value is range-checked.
#include "args.h"

#include "llm.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace {

struct parser {
    int argc;
    const char * const * argv;
    int i = 1;
    std::string * err;

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
};

}  // namespace

bool llm_cli_parse(int argc, const char * const * argv, llm_cli_params & p, std::string * err) {
    parser ps{argc, argv, 1, err};
    for (; ps.i < argc; ++ps.i) {
        const std::string a = argv[ps.i];
        bool ok = true;
        if (a == "-h" || a == "--help") {
            p.show_help = true;
        } else if (a == "-m" || a == "--model") {
            ok = ps.value(a, p.model);
        } else if (a == "-p" || a == "--prompt") {
            ok = ps.value(a, p.prompt);
        } else if (a == "-f" || a == "--file") {
            ok = ps.value(a, p.prompt_file);
            if (ok) {
                std::ifstream f(p.prompt_file, std::ios::binary);
                if (!f) return ps.fail("cannot read prompt file '" + p.prompt_file + "'");
                std::ostringstream ss;
                ss << f.rdbuf();
                p.prompt = ss.str();
            }
        } else if (a == "-sys" || a == "--system" || a == "--system-prompt") {
            ok = ps.value(a, p.system_prompt);
        } else if (a == "--chat-template") {
            ok = ps.value(a, p.chat_template);
            if (ok && p.chat_template != "llama2" && p.chat_template != "llama3") {
                return ps.fail("unknown chat template '" + p.chat_template + "' (llama2, llama3)");
            }
        } else if (a == "--dump-graph") {
            ok = ps.value(a, p.dump_graph);
        } else if (a == "-ctk" || a == "--cache-type-k" || a == "-ctv" || a == "--cache-type-v" ||
                   a == "--cache-type") {
            std::string name;
            ggml_type t;
            ok = ps.value(a, name);
            if (ok && !llm_kv_type_from_name(name, &t)) {
                return ps.fail("unknown cache type '" + name + "' for " + a + " (" + llm_kv_type_names() + ")");
            }
            if (ok && a != "-ctv" && a != "--cache-type-v") p.cache_type_k = t;
            if (ok && a != "-ctk" && a != "--cache-type-k") p.cache_type_v = t;
        } else if (a == "-n" || a == "--n-predict") {
            ok = ps.int_value(a, p.n_predict, -1, 1 << 30);
        } else if (a == "-c" || a == "--ctx-size") {
            ok = ps.int_value(a, p.n_ctx, 0, 1 << 24);
            p.n_ctx_set = true;
        } else if (a == "-b" || a == "--batch-size") {
            ok = ps.int_value(a, p.n_batch, 1, 1 << 16);
        } else if (a == "-t" || a == "--threads") {
            ok = ps.int_value(a, p.n_threads, 1, 1024);
        } else if (a == "-ngl" || a == "--n-gpu-layers" || a == "--gpu-layers") {
            ok = ps.int_value(a, p.n_gpu_layers, 0, 1 << 20);
        } else if (a == "--keep") {
            ok = ps.int_value(a, p.n_keep, -1, 1 << 24);
        } else if (a == "-s" || a == "--seed") {
            std::string s;
            ok = ps.value(a, s);
            if (ok) {
                char * end = nullptr;
                errno = 0;
                const long long v = std::strtoll(s.c_str(), &end, 10);
                if (s.empty() || *end || errno == ERANGE || v < -1 || v > 0xFFFFFFFFLL) {
                    return ps.fail("invalid seed '" + s + "' for " + a + " (0 .. 4294967295, or -1 for random)");
                }
                p.sampling.seed = v == -1 ? 0xFFFFFFFFu : (uint32_t) v;
            }
        } else if (a == "--temp") {
            ok = ps.float_value(a, p.sampling.temp, 0.0, 100.0);
        } else if (a == "--top-k") {
            ok = ps.int_value(a, p.sampling.top_k, 0, 1 << 24);
        } else if (a == "--top-p") {
            ok = ps.float_value(a, p.sampling.top_p, 0.0, 1.0);
        } else if (a == "--min-p") {
            ok = ps.float_value(a, p.sampling.min_p, 0.0, 1.0);
        } else if (a == "--repeat-penalty") {
            ok = ps.float_value(a, p.sampling.repeat_penalty, 0.0, 100.0);
            if (ok && p.sampling.repeat_penalty == 0.0f) return ps.fail("--repeat-penalty must be > 0");
        } else if (a == "--repeat-last-n") {
            ok = ps.int_value(a, p.sampling.repeat_last_n, -1, 1 << 24);
        } else if (a == "-cnv" || a == "--conversation") {
            p.conversation = true;
        } else if (a == "--special") {
            p.special = true;
        } else if (a == "--verbose-prompt") {
            p.verbose_prompt = true;
        } else if (a == "--context-shift") {
            p.context_shift = true;
        } else if (a == "-fa" || a == "--flash-attn") {
            p.flash_attn = true;
        } else {
            return ps.fail("unknown argument '" + a + "' (see --help)");
        }
        if (!ok) return false;
    }
    if (ggml_is_quantized(p.cache_type_v) && !p.flash_attn) {
        return ps.fail(std::string("a quantized V cache (-ctv ") + ggml_type_name(p.cache_type_v) +
                       ") needs flash attention (-fa)");
    }
    return true;
}

std::string llm_cli_usage(const char * prog) {
    std::ostringstream os;
    os << "usage: " << prog << " [options]\n"
       << "  -m FILE              model GGUF\n"
       << "  -p TEXT | -f FILE    prompt\n"
       << "  -n N                 tokens to generate (-1: until end of text)\n"
       << "  -c N                 context size (default: the model's, at most 4096; 0: the model's)\n"
       << "  -b N                 batch size for prompt processing (512)\n"
       << "  -t N                 threads\n"
       << "  -ngl N               layers on the GPU (> n_layer: output too)\n"
       << "  -s SEED              random seed (-1: random)\n"
       << "  --temp T --top-k K --top-p P --min-p P --repeat-penalty R --repeat-last-n N\n"
       << "  -cnv                 conversation (chat) mode; -sys TEXT system prompt\n"
       << "  --chat-template llama2|llama3\n"
       << "  --special            parse special tokens in the prompt\n"
       << "  --verbose-prompt     print the prompt tokens\n"
       << "  -ctk T, -ctv T       KV cache type of K / V: f16 (default), f32, q8_0, q4_0; a quantized V needs -fa\n"
       << "                       (also --cache-type-k T, --cache-type-v T; --cache-type T sets both)\n"
       << "  --context-shift      when the context is full, keep --keep N tokens and drop half the rest\n"
       << "  -fa                  fused attention\n"
       << "  --dump-graph PREFIX  write PREFIX.prompt.{dot,json} and PREFIX.decode.{dot,json}\n";
    return os.str();
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
