// main - generate text from a prompt, go on with it interactively (-i), or chat (-cnv), with a Llama 2 / Llama 3
// GGUF. The flags are llama.cpp's (main --help).
//   main -m model.gguf -p "Once upon a time" -n 128 --temp 0
//   main -m model.gguf -p "User: Hi\nBob:" -i -r "User:" --in-prefix " " --in-suffix "Bob:"
//   main -m llama3.gguf -cnv -sys "You are brief."
// Timings go to stderr at the end (and on Ctrl-C); tokens stream to stdout. In interactive mode a Ctrl-C hands
// control back to the user, one at the input leaves; EOF on stdin ends with status 0.
#include "args.h"
#include "chat.h"
#include "console.h"
#include "llm.h"
#include "model-info.h"
#include "sampling.h"
#include "vocab.h"

#include <sys/mman.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

static std::atomic<int> g_interrupted{0};

static void on_sigint(int) {
    if (g_interrupted.fetch_add(1) >= 1) {
        std::_Exit(130);  // second Ctrl-C: leave at once
    }
}

static int fail(const std::string & msg) {
    fprintf(stderr, "error: %s\n", msg.c_str());
    return 1;
}

static void log_errors_only(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

// Why generation stopped.
enum gen_stop {
    GEN_STOP_N_PREDICT,       // -n tokens
    GEN_STOP_EOG,             // an end-of-generation token
    GEN_STOP_REVERSE_PROMPT,  // the output ends with a -r string
    GEN_STOP_CONTEXT_FULL,    // no room and no --context-shift
    GEN_STOP_INTERRUPTED,     // Ctrl-C
    GEN_STOP_ERROR,
};

struct generator {
    llm_context * ctx;
    const llm_vocab & vocab;
    llm_sampler & sampler;
    const llm_cli_params & params;
    int n_keep = 0;
    bool render_special = false;          // -sp outside chat mode: special tokens are printed
    std::vector<int32_t> pending;         // sampled (and printed) but not yet in the KV cache
    std::vector<int32_t> eog_ids;         // --ignore-eos: their logits become -inf
    std::vector<int32_t> reverse_ids;     // the -r strings that are one token (special tokens print as "")
    std::string printed;                  // the tail of the text printed since the last input
    std::vector<float> masked;            // logits with eog_ids masked
    int n_sampled = 0;
    double t_sample_ms = 0;

    generator(llm_context * ctx, const llm_vocab & vocab, llm_sampler & sampler, const llm_cli_params & params) :
        ctx(ctx), vocab(vocab), sampler(sampler), params(params) {
        render_special = params.special && !params.conversation;
        if (params.ignore_eos) {
            for (int32_t t = 0; t < vocab.n_vocab(); ++t) {
                if (vocab.is_eog(t)) eog_ids.push_back(t);
            }
        }
        for (const std::string & r : params.reverse_prompts) {
            const std::vector<int32_t> ids = llm_tokenize(vocab, r, false, true);
            if (ids.size() == 1) reverse_ids.push_back(ids[0]);
        }
    }

    // make room for n more tokens: context shift, or false with a message
    bool ensure_room(int n, std::string * err) {
        const int n_ctx = llm_n_ctx(ctx);
        if (llm_n_past(ctx) + n <= n_ctx) return true;
        if (!params.context_shift) {
            *err = "context is full (" + std::to_string(n_ctx) + " tokens); use -c to enlarge it or --context-shift";
            return false;
        }
        const int n_past = llm_n_past(ctx);
        const int n_left = n_past - n_keep;
        const int n_discard = n_left / 2;
        if (n_discard <= 0 || n_past - n_discard + n > n_ctx) {
            *err = "cannot shift the context: --keep " + std::to_string(n_keep) + " leaves no room";
            return false;
        }
        llm_kv_remove(ctx, n_keep, n_keep + n_discard);
        if (params.verbose_prompt) fprintf(stderr, "\n[context shift: dropped %d tokens]\n", n_discard);
        return true;
    }

    // evaluate the pending tokens and then toks
    bool feed(const std::vector<int32_t> & toks, std::string * err) {
        std::vector<int32_t> all = pending;
        all.insert(all.end(), toks.begin(), toks.end());
        pending.clear();
        if (all.empty()) return true;
        if (!ensure_room((int) all.size(), err)) return false;
        return llm_decode(ctx, all.data(), (int) all.size(), err);
    }

    int32_t pick() {
        const auto t0 = std::chrono::steady_clock::now();
        // greedy on the device when it can; a grammar (--grammar, --json-schema) always goes through the sampler
        const bool greedy =
            params.sampling.temp <= 0.0f && params.sampling.repeat_penalty == 1.0f && !sampler.has_grammar();
        int32_t id = greedy ? llm_argmax_last(ctx) : -1;
        if (id < 0 || (params.ignore_eos && vocab.is_eog(id))) {
            const int n = vocab.n_vocab();
            const float * logits = llm_get_logits(ctx);
            if (params.ignore_eos) {
                masked.assign(logits, logits + n);
                for (int32_t t : eog_ids) masked[t] = -INFINITY;
                logits = masked.data();
            }
            id = greedy ? llm_argmax(logits, n) : sampler.sample(logits, n);
        }
        n_sampled++;
        t_sample_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return id;
    }

    // Print a piece of generated text; true when the text printed since the last input now ends with a reverse
    // prompt (outside interactive mode within two more bytes, as llama.cpp allows for the token boundaries).
    bool print(int32_t id, const std::string & piece) {
        fwrite(piece.data(), 1, piece.size(), stdout);
        fflush(stdout);
        printed += piece;
        if (printed.size() > 4096) printed.erase(0, printed.size() - 2048);
        for (int32_t r : reverse_ids) {
            if (id == r) return true;
        }
        const size_t pad = params.interactive || params.conversation ? 0 : 2;
        for (const std::string & r : params.reverse_prompts) {
            const size_t from = printed.size() > r.size() + pad ? printed.size() - r.size() - pad : 0;
            if (printed.find(r, from) != std::string::npos) return true;
        }
        return false;
    }

    // sample and stream until one of gen_stop; out: the sampled ids (the EOG included). The last id is left in
    // `pending` (not evaluated yet) unless generation goes on from it.
    gen_stop run(int n_predict, std::vector<int32_t> & out, std::string * err) {
        out.clear();
        if (!feed({}, err)) return GEN_STOP_ERROR;
        llm_detok_stream stream(vocab, render_special);
        gen_stop stop = GEN_STOP_N_PREDICT;
        for (int i = 0; n_predict < 0 || i < n_predict; ++i) {
            if (g_interrupted) {
                stop = GEN_STOP_INTERRUPTED;
                break;
            }
            const int32_t id = pick();
            if (id < 0) {  // the grammar admits nothing the vocabulary can write
                *err = sampler.last_error();
                return GEN_STOP_ERROR;
            }
            sampler.accept(id);
            out.push_back(id);
            pending = {id};
            if (vocab.is_eog(id)) {
                stop = GEN_STOP_EOG;
                break;
            }
            if (print(id, stream.push(id))) {
                stop = GEN_STOP_REVERSE_PROMPT;
                break;
            }
            if (n_predict >= 0 && i + 1 == n_predict) break;
            if (!params.context_shift && llm_n_past(ctx) >= llm_n_ctx(ctx)) {
                // a normal end, as in llama.cpp: the context is used up
                fprintf(stderr, "\n[context full: %d tokens; -c enlarges it, --context-shift keeps going]\n",
                        llm_n_ctx(ctx));
                stop = GEN_STOP_CONTEXT_FULL;
                break;
            }
            if (!feed({}, err)) {
                stop = GEN_STOP_ERROR;
                break;
            }
        }
        const std::string tail = stream.flush();
        fwrite(tail.data(), 1, tail.size(), stdout);
        fflush(stdout);
        return stop;
    }
};

static void print_timings(llm_context * ctx, const generator & gen) {
    const llm_perf p = llm_get_perf(ctx);
    fprintf(stderr, "\n\nload time        = %10.2f ms\n", p.t_load_ms);
    fprintf(stderr, "sampling time    = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
            gen.t_sample_ms, gen.n_sampled, gen.n_sampled ? gen.t_sample_ms / gen.n_sampled : 0.0,
            gen.t_sample_ms > 0 ? 1e3 * gen.n_sampled / gen.t_sample_ms : 0.0);
    fprintf(stderr, "prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
            p.t_prompt_ms, p.n_prompt, p.n_prompt ? p.t_prompt_ms / p.n_prompt : 0.0,
            p.t_prompt_ms > 0 ? 1e3 * p.n_prompt / p.t_prompt_ms : 0.0);
    fprintf(stderr, "eval time        = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
            p.t_eval_ms, p.n_eval, p.n_eval ? p.t_eval_ms / p.n_eval : 0.0,
            p.t_eval_ms > 0 ? 1e3 * p.n_eval / p.t_eval_ms : 0.0);
}

static void print_tokens(const llm_vocab & vocab, const std::vector<int32_t> & toks) {
    fprintf(stderr, "prompt: %zu tokens\n", toks.size());
    for (int32_t t : toks) fprintf(stderr, "%6d -> '%s'\n", t, llm_token_to_piece(vocab, t, true).c_str());
}

// One input of the user (interactive or chat mode): false at EOF. Escapes are processed as in -p. A Ctrl-C while
// the program waits for it leaves at once (as a second Ctrl-C does).
static bool read_user_input(const llm_cli_params & params, bool color, std::string & line) {
    console_set_display(color, CONSOLE_DISPLAY_USER_INPUT);
    g_interrupted = 1;
    const bool got = console_read_input(std::cin, line, params.multiline_input);
    g_interrupted = 0;
    console_set_display(color, CONSOLE_DISPLAY_RESET);
    if (got && params.escape) line = llm_process_escapes(line);
    return got;
}

// Plain completion of the prompt; with -i, each stop hands control to the user and generation goes on after
// the input (in-prefix, the line, in-suffix), until EOF on stdin.
static int run_completion(generator & gen, const llm_cli_params & params, bool color) {
    llm_context * ctx = gen.ctx;
    const llm_vocab & vocab = gen.vocab;
    std::string err;
    std::vector<int32_t> toks = llm_tokenize(vocab, params.prompt, true, params.special);
    if (toks.empty()) toks.push_back(vocab.bos >= 0 ? vocab.bos : 0);
    if ((int) toks.size() >= llm_n_ctx(ctx)) {
        return fail("prompt is " + std::to_string(toks.size()) + " tokens, longer than the context (" +
                    std::to_string(llm_n_ctx(ctx)) + "); use -c to enlarge it");
    }
    if (params.verbose_prompt) print_tokens(vocab, toks);
    gen.n_keep = params.n_keep < 0 ? (int) toks.size() : std::min<int>(params.n_keep, (int) toks.size());
    if (params.display_prompt) {  // the prompt text itself is echoed, as llama.cpp does
        console_set_display(color, CONSOLE_DISPLAY_PROMPT);
        fputs(llm_detokenize(vocab, toks, true, params.special).c_str(), stdout);
        console_set_display(color, CONSOLE_DISPLAY_RESET);
        fflush(stdout);
    }
    if (!gen.feed(toks, &err)) return fail(err);
    for (int32_t t : toks) gen.sampler.accept(t, false);  // the repetition penalty sees the prompt (not the grammar)
    if (!params.dump_graph.empty()) {
        if (!llm_dump_graph(ctx, (int) std::min<size_t>(toks.size(), params.n_batch),
                            (params.dump_graph + ".prompt").c_str(), &err) ||
            !llm_dump_graph(ctx, 1, (params.dump_graph + ".decode").c_str(), &err)) {
            return fail(err);
        }
        fprintf(stderr, "graphs written to %s.prompt.{dot,json} and %s.decode.{dot,json}\n", params.dump_graph.c_str(),
                params.dump_graph.c_str());
    }
    // a prompt that already ends with a reverse prompt: the user speaks first (llama.cpp's chat-with-bob style)
    const std::string shown = llm_detokenize(vocab, toks, true, params.special);
    bool interacting = params.interactive_first;
    for (const std::string & r : params.reverse_prompts) {
        if (shown.size() >= r.size() && shown.compare(shown.size() - r.size(), r.size(), r) == 0) {
            if (!params.interactive) return 0;
            interacting = true;
        }
    }
    std::vector<int32_t> out;
    while (true) {
        if (interacting) {
            std::vector<int32_t> input;
            if (params.input_prefix_bos && vocab.bos >= 0) input.push_back(vocab.bos);
            if (!params.input_prefix.empty()) {
                fputs(params.input_prefix.c_str(), stdout);
                fflush(stdout);
            }
            std::string line;
            if (!read_user_input(params, color, line)) break;  // EOF: done
            if (!line.empty()) {  // an empty line hands control back without input
                if (!params.input_suffix.empty()) {
                    fputs(params.input_suffix.c_str(), stdout);
                    fflush(stdout);
                }
                if (llm_utf8_invalid_at(line) >= 0) {
                    fprintf(stderr, "error: input is not valid UTF-8; try again\n");
                    continue;
                }
                // as llama.cpp: special tokens are parsed in the prefix and suffix, not in what the user typed
                auto append = [&](const std::string & text, bool special) {
                    const std::vector<int32_t> t = llm_tokenize(vocab, text, false, special);
                    input.insert(input.end(), t.begin(), t.end());
                };
                append(params.input_prefix, true);
                append(line, false);
                append(params.input_suffix, true);
                if (params.verbose_prompt) print_tokens(vocab, input);
                if (!gen.feed(input, &err)) return fail(err);
                for (int32_t t : input) gen.sampler.accept(t, false);
            }
            gen.printed.clear();
            interacting = false;
        }
        const gen_stop stop = gen.run(params.n_predict, out, &err);
        if (stop == GEN_STOP_ERROR) {
            fprintf(stderr, "\n");
            return fail(err);
        }
        if (!params.interactive || stop == GEN_STOP_CONTEXT_FULL) break;
        if (stop == GEN_STOP_EOG && !params.reverse_prompts.empty()) {
            // as llama.cpp: the first reverse prompt follows the end of text, and the user goes on from there
            const std::string & r = params.reverse_prompts.front();
            fputs(r.c_str(), stdout);
            fflush(stdout);
            if (!gen.feed(llm_tokenize(vocab, r, false, true), &err)) return fail(err);
        } else if (stop == GEN_STOP_EOG) {
            fputs("\n", stdout);
        }
        interacting = true;
    }
    return 0;
}

// Chat: the whole history stays in the KV cache; each turn only evaluates what it adds.
static int run_chat(generator & gen, const llm_cli_params & params, bool color) {
    const llm_vocab & vocab = gen.vocab;
    std::string err;
    llm_chat_template tmpl = params.chat_template.empty()
                                 ? llm_chat_detect(vocab.chat_template, vocab.find_token("<|start_header_id|>") >= 0)
                                 : llm_chat_template_from_name(params.chat_template);
    // --jinja: the model's own template (tokenizer.chat_template, or --chat-template-file) rendered by llm/jinja;
    // else the built-in llama2/llama3 formats
    const std::string jinja_src = !params.chat_template_source.empty() ? params.chat_template_source
                                                                       : vocab.chat_template;
    const bool use_jinja = params.jinja && !jinja_src.empty();
    if (params.jinja && jinja_src.empty() && !params.log_disable) {
        fprintf(stderr, "warning: --jinja: the model has no chat template (tokenizer.chat_template); using %s\n",
                llm_chat_template_name(tmpl));
    }
    const std::string bos_text = vocab.bos >= 0 ? llm_token_to_piece(vocab, vocab.bos, true) : "";
    const std::string eos_text = vocab.eos >= 0 ? llm_token_to_piece(vocab, vocab.eos, true) : "";
    auto render = [&](const std::vector<llm_chat_msg> & msgs, bool add_assistant, std::string * out) {
        if (!use_jinja) {
            *out = llm_chat_apply(tmpl, msgs, add_assistant);
            return true;
        }
        nlohmann::ordered_json j = nlohmann::ordered_json::array();
        for (const auto & m : msgs) j.push_back({{"role", m.role}, {"content", m.content}});
        return llm_chat_apply_jinja(jinja_src, nlohmann::json(j), nullptr, add_assistant, bos_text, eos_text, out, &err);
    };
    if (!params.log_disable) {
        fprintf(stderr, "chat template: %s (Ctrl-D or an empty line at EOF ends)\n",
                use_jinja ? "jinja (the model's)" : llm_chat_template_name(tmpl));
    }
    std::vector<llm_chat_msg> history;
    std::vector<llm_chat_msg> pending;
    if (!params.system_prompt.empty()) pending.push_back({"system", params.system_prompt});
    bool first = true;
    std::string line;
    std::vector<int32_t> reply;
    while (!g_interrupted) {
        printf("\n> ");
        fflush(stdout);
        if (!params.prompt.empty() && first) {
            line = params.prompt;
            console_set_display(color, CONSOLE_DISPLAY_USER_INPUT);
            printf("%s\n", line.c_str());
            console_set_display(color, CONSOLE_DISPLAY_RESET);
        } else if (!read_user_input(params, color, line)) {
            break;
        }
        if (llm_utf8_invalid_at(line) >= 0) {
            fprintf(stderr, "error: input is not valid UTF-8; try again\n");
            continue;
        }
        pending.push_back({"user", line});
        std::string delta; // what the new messages add to the rendered history
        if (!llm_chat_delta(render, history, pending, true, &delta)) return fail("chat template: " + err);
        // a template that writes the BOS itself: the tokenizer does not add another
        const bool add_bos = first && !(use_jinja && !bos_text.empty() && delta.rfind(bos_text, 0) == 0);
        const std::vector<int32_t> toks = llm_tokenize(vocab, delta, add_bos, true);
        if (params.verbose_prompt) print_tokens(vocab, toks);
        if (first) gen.n_keep = (int) toks.size();
        if (!gen.feed(toks, &err)) return fail(err);
        first = false;
        history.insert(history.end(), pending.begin(), pending.end());
        pending.clear();
        gen.printed.clear();
        const gen_stop stop = gen.run(params.n_predict, reply, &err);
        if (stop == GEN_STOP_ERROR) return fail(err);
        if (params.single_turn) break;
        // the end-of-turn token goes into the cache too, so the next turn follows it as the template says; a
        // reply cut short (-n, -r, Ctrl-C) is closed with the template's end-of-turn token
        const int32_t end_of_turn = tmpl == LLM_CHAT_TEMPLATE_LLAMA3 && vocab.eot >= 0 ? vocab.eot : vocab.eos;
        if (!reply.empty() && vocab.is_eog(reply.back())) {
            reply.pop_back();
            if (!gen.feed({}, &err)) return fail(err);  // the EOG itself, pending
        } else if (end_of_turn >= 0 && !gen.feed({end_of_turn}, &err)) {
            return fail(err);
        }
        history.push_back({"assistant", llm_detokenize(vocab, reply, false, false)});
        if (stop == GEN_STOP_CONTEXT_FULL) break;
    }
    if (params.single_turn) printf("\n");
    return 0;
}

int main(int argc, char ** argv) {
    llm_cli_params params;
    std::string err;
    if (!llm_cli_parse(argc, argv, params, &err)) return fail(err);
    if (params.show_help) {
        printf("%s", llm_cli_usage(argv[0]).c_str());
        return 0;
    }
    if (params.model.empty()) return fail("no model given (-m FILE.gguf)");
    const long bad = llm_utf8_invalid_at(params.prompt);
    if (bad >= 0) return fail("prompt is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
    if (llm_utf8_invalid_at(params.system_prompt) >= 0) return fail("system prompt is not valid UTF-8");
    const bool info = !params.log_disable;
    if (!info) ggml_log_set(log_errors_only, nullptr);
    const bool color = console_use_color(params.color);

    std::signal(SIGINT, on_sigint);
    llm_model_params mp;
    mp.n_gpu_layers = params.n_gpu_layers;
    mp.main_gpu = params.main_gpu;
    mp.split_mode = params.split_mode;
    mp.tensor_split = params.tensor_split;
    mp.use_mmap = params.use_mmap;
    mp.use_repack = params.use_repack;
    mp.verbose = params.verbose;
    if (params.n_ctx_set) {  // a -c too large for the GPU fails before the weights upload
        mp.n_ctx_hint = params.n_ctx;
        mp.type_k_hint = params.cache_type_k;
        mp.type_v_hint = params.cache_type_v;
    }
    if (params.n_gpu_layers > 0) {  // weights are copied to the device once: show it
        mp.progress = [last = -1, info](float f) mutable {
            const int pct = (int) (f * 100.0f);
            if (info && pct / 5 != last / 5) {
                fprintf(stderr, "\rloading weights [%-20.*s] %3d%%", pct / 5, "####################", pct);
                if (pct >= 100) fprintf(stderr, "\n");
                last = pct;
            }
            return g_interrupted == 0;  // Ctrl-C cancels the load
        };
    }
    llm_model * model = llm_model_load(params.model.c_str(), mp, &err);
    if (!model) return fail(err);
    const llm_vocab & vocab = llm_model_get_vocab(model);
    if (vocab.n_vocab() == 0) {  // text in, text out: a vocab-less model (token ids only) cannot be used here
        llm_model_free(model);
        return fail(params.model + " has no tokenizer (tokenizer.ggml.model)");
    }
    if (params.use_mlock && mlockall(MCL_CURRENT) != 0) {  // best effort, as llama.cpp's --mlock
        fprintf(stderr, "warning: --mlock: mlockall failed (%s); the model may be paged out (see ulimit -l)\n",
                strerror(errno));
    }

    llm_context_params cp;
    // as llama.cpp: -c 0 takes the model's training context; the default is at most 4096 tokens
    cp.n_ctx = params.n_ctx_set ? params.n_ctx : std::min(4096, llm_model_hparams(model).n_ctx_train);
    cp.n_batch = params.n_batch;
    cp.n_threads = params.n_threads;
    cp.type_k = params.cache_type_k;
    cp.type_v = params.cache_type_v;
    cp.flash_attn = params.flash_attn == LLM_CLI_SWITCH_ON ||
                    (params.flash_attn == LLM_CLI_SWITCH_AUTO &&
                     llm_flash_attn_supported(model, params.cache_type_k, params.cache_type_v));
    llm_context * ctx = llm_context_new(model, cp, &err);
    if (!ctx) {
        llm_model_free(model);
        return fail(err);
    }
    llm_sampler sampler(params.sampling);  // picks the seed when -s is -1: print the one in use
    // constrained output: a GBNF grammar (--grammar, --grammar-file) or a JSON schema converted to one (-j, -jf)
    if ((!params.grammar.empty() && !sampler.set_grammar(params.grammar, vocab, &err)) ||
        (params.grammar.empty() && !params.json_schema.empty() &&
         !sampler.set_json_schema(params.json_schema, vocab, &err))) {
        llm_context_free(ctx);
        llm_model_free(model);
        return fail(err);
    }
    if (info) {
        fprintf(stderr, "model: %s, n_ctx %d, seed %u, flash attention %s%s\n", llm_model_desc_ftype(model).c_str(),
                llm_n_ctx(ctx), sampler.seed(), cp.flash_attn ? "on" : "off",
                params.flash_attn == LLM_CLI_SWITCH_AUTO ? " (auto)" : "");
        llm_type_summary_print(stderr, llm_model_type_summary(model), "  ");  // "- type q4_K: 6 tensors", BPW
        std::string weights;
        for (const auto & [name, bytes] : llm_model_buffer_sizes(model)) {
            weights += (weights.empty() ? "" : ", ") + name + " " + std::to_string(bytes >> 20) + " MiB";
        }
        const llm_perf mem = llm_get_perf(ctx);
        fprintf(stderr,
                "memory: weights %s; KV cache %zu MiB (K %s %.1f MiB, V %s %.1f MiB); compute buffers %zu MiB (planned "
                "for %d tokens)\n",
                weights.c_str(), mem.kv_bytes >> 20, ggml_type_name(cp.type_k), mem.kv_k_bytes / 1048576.0,
                ggml_type_name(cp.type_v), mem.kv_v_bytes / 1048576.0, mem.compute_buffer_bytes >> 20,
                params.n_batch);
    }
    if (params.warmup) {  // as llama.cpp: one step touches the weights and the kernels before the timed work
        const int32_t t = vocab.bos >= 0 ? vocab.bos : 0;
        if (!llm_decode(ctx, &t, 1, &err)) {
            llm_context_free(ctx);
            llm_model_free(model);
            return fail(err);
        }
        llm_kv_clear(ctx);
        llm_reset_perf(ctx);
    }

    generator gen(ctx, vocab, sampler, params);
    const int rc = params.conversation ? run_chat(gen, params, color) : run_completion(gen, params, color);
    if (g_interrupted) fprintf(stderr, "\n[interrupted]");
    if (info && llm_get_perf(ctx).n_prompt > 0) print_timings(ctx, gen);
    llm_context_free(ctx);
    llm_model_free(model);
    return rc;
}
