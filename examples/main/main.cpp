// main - generate text from a prompt, or chat (-cnv), with a Llama 2 / Llama 3 GGUF.
//   main -m model.gguf -p "Once upon a time" -n 128 --temp 0
//   main -m llama3.gguf -cnv -sys "You are brief."
// Timings go to stderr at the end (and on Ctrl-C); tokens stream to stdout.
#include "args.h"
#include "chat.h"
#include "llm.h"
#include "model-info.h"
#include "sampling.h"
#include "vocab.h"

#include <atomic>
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

struct generator {
    llm_context * ctx;
    const llm_vocab & vocab;
    llm_sampler & sampler;
    const llm_cli_params & params;
    int n_keep;

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

    bool decode(const std::vector<int32_t> & toks, std::string * err) {
        if (toks.empty()) return true;
        if (!ensure_room((int) toks.size(), err)) return false;
        return llm_decode(ctx, toks.data(), (int) toks.size(), err);
    }

    // sample and stream until EOG, n_predict or Ctrl-C; returns the generated ids (EOG included)
    std::vector<int32_t> run(int n_predict, std::string * err, bool * ok) {
        std::vector<int32_t> out;
        llm_detok_stream stream(vocab);
        *ok = true;
        for (int i = 0; n_predict < 0 || i < n_predict; ++i) {
            if (g_interrupted) break;
            const int32_t id = params.sampling.temp <= 0.0f && params.sampling.repeat_penalty == 1.0f
                                   ? llm_argmax_last(ctx)
                                   : sampler.sample(llm_get_logits(ctx), vocab.n_vocab());
            sampler.accept(id);
            out.push_back(id);
            if (vocab.is_eog(id)) break;
            const std::string piece = stream.push(id);
            fwrite(piece.data(), 1, piece.size(), stdout);
            fflush(stdout);
            if (n_predict >= 0 && i + 1 == n_predict) break;
            if (!params.context_shift && llm_n_past(ctx) >= llm_n_ctx(ctx)) {
                // a normal end, as in llama.cpp: the context is used up
                fprintf(stderr, "\n[context full: %d tokens; -c enlarges it, --context-shift keeps going]\n",
                        llm_n_ctx(ctx));
                break;
            }
            std::string e;
            if (!decode({id}, &e)) {
                *err = e;
                *ok = false;
                break;
            }
        }
        const std::string tail = stream.flush();
        fwrite(tail.data(), 1, tail.size(), stdout);
        fflush(stdout);
        return out;
    }
};

static void print_timings(llm_context * ctx) {
    const llm_perf p = llm_get_perf(ctx);
    fprintf(stderr, "\n\nload time        = %10.2f ms\n", p.t_load_ms);
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

    std::signal(SIGINT, on_sigint);
    llm_model_params mp;
    mp.n_gpu_layers = params.n_gpu_layers;
    if (params.n_gpu_layers > 0) {  // weights are copied to the device once: show it
        mp.progress = [last = -1](float f) mutable {
            const int pct = (int) (f * 100.0f);
            if (pct / 5 != last / 5) {
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

    llm_context_params cp;
    // as llama.cpp: -c 0 takes the model's training context; the default is at most 4096 tokens
    cp.n_ctx = params.n_ctx_set ? params.n_ctx : std::min(4096, llm_model_hparams(model).n_ctx_train);
    cp.n_batch = params.n_batch;
    cp.n_threads = params.n_threads;
    cp.type_k = params.cache_type_k;
    cp.type_v = params.cache_type_v;
    cp.flash_attn = params.flash_attn;
    llm_context * ctx = llm_context_new(model, cp, &err);
    if (!ctx) {
        llm_model_free(model);
        return fail(err);
    }
    llm_sampler sampler(params.sampling);  // picks the seed when -s is -1: print the one in use
    fprintf(stderr, "model: %s, n_ctx %d, seed %u\n", llm_model_desc_ftype(model).c_str(), llm_n_ctx(ctx),
            sampler.seed());
    llm_type_summary_print(stderr, llm_model_type_summary(model), "  ");  // "- type q4_K: 6 tensors", BPW
    {
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

    int rc = 0;

    if (!params.conversation) {
        std::vector<int32_t> toks = llm_tokenize(vocab, params.prompt, true, params.special);
        if (toks.empty()) toks.push_back(vocab.bos >= 0 ? vocab.bos : 0);
        if ((int) toks.size() >= llm_n_ctx(ctx)) {
            rc = fail("prompt is " + std::to_string(toks.size()) + " tokens, longer than the context (" +
                      std::to_string(llm_n_ctx(ctx)) + "); use -c to enlarge it");
        } else {
            if (params.verbose_prompt) print_tokens(vocab, toks);
            const int n_keep = params.n_keep < 0 ? (int) toks.size() : std::min<int>(params.n_keep, (int) toks.size());
            generator gen{ctx, vocab, sampler, params, n_keep};
            // the prompt text itself is echoed, as llama.cpp does
            fputs(llm_detokenize(vocab, toks, true, params.special).c_str(), stdout);
            fflush(stdout);
            if (!gen.decode(toks, &err)) {
                rc = fail(err);
            } else {
                for (int32_t t : toks) sampler.accept(t);
                if (!params.dump_graph.empty()) {
                    std::string e;
                    if (!llm_dump_graph(ctx, (int) std::min<size_t>(toks.size(), params.n_batch),
                                        (params.dump_graph + ".prompt").c_str(), &e) ||
                        !llm_dump_graph(ctx, 1, (params.dump_graph + ".decode").c_str(), &e)) {
                        rc = fail(e);
                    } else {
                        fprintf(stderr, "graphs written to %s.prompt.{dot,json} and %s.decode.{dot,json}\n",
                                params.dump_graph.c_str(), params.dump_graph.c_str());
                    }
                }
                bool ok = true;
                if (rc == 0) gen.run(params.n_predict, &err, &ok);
                if (!ok) {
                    fprintf(stderr, "\n");
                    rc = fail(err);
                }
            }
        }
    } else {
        // chat: the whole history stays in the KV cache; each turn only evaluates what it adds
        llm_chat_template tmpl = params.chat_template.empty()
                                     ? llm_chat_detect(vocab.chat_template, vocab.find_token("<|start_header_id|>") >= 0)
                                     : llm_chat_template_from_name(params.chat_template);
        fprintf(stderr, "chat template: %s (Ctrl-D or an empty line at EOF ends)\n", llm_chat_template_name(tmpl));
        std::vector<llm_chat_msg> history;
        if (!params.system_prompt.empty()) history.push_back({"system", params.system_prompt});
        std::vector<llm_chat_msg> pending = history;
        history.clear();
        generator gen{ctx, vocab, sampler, params, 0};
        bool first = true;
        std::string line;
        while (!g_interrupted) {
            printf("\n> ");
            fflush(stdout);
            if (!params.prompt.empty() && first) {
                line = params.prompt;
                printf("%s\n", line.c_str());
            } else if (!std::getline(std::cin, line)) {
                break;
            }
            if (llm_utf8_invalid_at(line) >= 0) {
                fprintf(stderr, "error: input is not valid UTF-8; try again\n");
                continue;
            }
            pending.push_back({"user", line});
            const std::string delta = llm_chat_delta(tmpl, history, pending, true);
            std::vector<int32_t> toks = llm_tokenize(vocab, delta, first, true);
            if (params.verbose_prompt) print_tokens(vocab, toks);
            if (first) gen.n_keep = (int) toks.size();
            if (!gen.decode(toks, &err)) {
                rc = fail(err);
                break;
            }
            first = false;
            history.insert(history.end(), pending.begin(), pending.end());
            pending.clear();
            bool ok = true;
            std::vector<int32_t> reply = gen.run(params.n_predict, &err, &ok);
            if (!ok) {
                rc = fail(err);
                break;
            }
            // the end-of-turn token goes into the cache too, so the next turn follows it as the template
            // says; a reply cut short by -n or Ctrl-C is closed with the template's end-of-turn token
            int32_t end_of_turn = tmpl == LLM_CHAT_TEMPLATE_LLAMA3 && vocab.eot >= 0 ? vocab.eot : vocab.eos;
            if (!reply.empty() && vocab.is_eog(reply.back())) {
                end_of_turn = reply.back();
                reply.pop_back();
            }
            if (end_of_turn >= 0 && !gen.decode({end_of_turn}, &err)) {
                rc = fail(err);
                break;
            }
            history.push_back({"assistant", llm_detokenize(vocab, reply, false, false)});
        }
    }
    if (g_interrupted) fprintf(stderr, "\n[interrupted]");
    if (llm_get_perf(ctx).n_prompt > 0) print_timings(ctx);
    llm_context_free(ctx);
    llm_model_free(model);
    return rc;
}
