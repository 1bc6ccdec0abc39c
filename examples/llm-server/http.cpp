// http.cpp - the routes of llm-server (cpp-httplib): OpenAI endpoints with SSE streaming, tokenize,
// health, metrics, the web page; Bearer auth, CORS, JSON errors.
#include "args.h"  // llm_utf8_invalid_at
#include "oai.h"
#include "server.h"

#include "index.html.h"  // generated at build time from public/index.html: srv_index_html[], srv_index_html_len

#include <httplib.h>

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <random>
#include <thread>

using httplib::DataSink;
using httplib::Request;
using httplib::Response;

static void send_json(Response & res, int status, const json & j) {
    res.status = status;
    res.set_content(oai_dump(j), "application/json; charset=utf-8");
}

static void send_error(Response & res, int status, const std::string & type, const std::string & msg) {
    send_json(res, status, oai_error_json(status, type, msg));
}

// same time whatever the first differing byte
static bool key_matches(const std::string & given, const std::string & key) {
    unsigned diff = given.size() != key.size();
    for (size_t i = 0; i < given.size(); ++i) diff |= (unsigned char) given[i] ^ (unsigned char) key[i % key.size()];
    return diff == 0;
}

static std::string random_suffix() {
    static std::atomic<uint64_t> salt{std::random_device{}()};
    uint64_t x = salt.fetch_add(0x9E3779B97F4A7C15ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    char buf[17];
    snprintf(buf, sizeof(buf), "%016llx", (unsigned long long) x);
    return buf;
}

// what a streaming response keeps between the content provider's calls
struct srv_stream {
    srv_stream(oai_request req, const srv_state & st, const std::string & id, std::shared_ptr<srv_task> task) :
        r(std::move(req)), out(r, st, id), task(std::move(task)) {}
    oai_request               r;
    oai_response              out;  // refers to r
    std::shared_ptr<srv_task> task;
    bool                      done = false;
};

static void handle_completion(const srv_state & st, oai_kind kind, const Request & req, Response & res) {
    oai_request r;
    try {
        r = oai_parse(req.body, kind, st);
    } catch (const oai_error & e) {
        send_error(res, e.status, e.type, e.what());
        return;
    }
    std::shared_ptr<srv_task> task = st.sched.submit(r.req);
    const std::string id = (kind == OAI_CHAT ? "chatcmpl-" : "cmpl-") + random_suffix();
    if (!r.stream) {
        oai_response out(r, st, id);
        srv_event ev;
        for (;;) {
            if (!task->pop(ev, std::chrono::milliseconds(1000))) continue;
            out.add(ev);
            if (ev.final) break;
        }
        if (!ev.error.empty()) {
            send_error(res, 500, "server_error", ev.error);
        } else {
            send_json(res, 200, out.final_json());
        }
        return;
    }
    // SSE: one "data: {json}\n\n" per chunk, then "data: [DONE]\n\n". Not compressed: a compressor
    // would hold the chunks back.
    const_cast<Request &>(req).headers.erase("Accept-Encoding");
    auto s = std::make_shared<srv_stream>(std::move(r), st, id, task);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [s](size_t, DataSink & sink) {
            srv_event ev;
            while (!s->task->pop(ev, std::chrono::milliseconds(100))) {
                if (!sink.is_writable()) {  // the client is gone
                    s->task->cancel();
                    return false;
                }
            }
            std::string data;
            for (const json & j : s->out.chunks(ev)) data += "data: " + oai_dump(j) + "\n\n";
            if (ev.final) data += "data: [DONE]\n\n";
            if (!data.empty() && !sink.write(data.data(), data.size())) {
                s->task->cancel();
                return false;
            }
            if (ev.final) {
                s->done = true;
                sink.done();
            }
            return true;
        },
        [s](bool) {
            if (!s->done) s->task->cancel();  // the connection ended before the last event
        });
}

static const json * body_field(const json & body, const char * key) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

static void handle_tokenize(const srv_state & st, const Request & req, Response & res) {
    json body;
    try {
        body = json::parse(req.body);
    } catch (const json::parse_error & e) {
        return send_error(res, 400, "invalid_request_error", std::string("the body is not valid JSON: ") + e.what());
    }
    const json * content = body.is_object() ? body_field(body, "content") : nullptr;
    if (!content || !content->is_string()) {
        return send_error(res, 400, "invalid_request_error", "'content' must be a string");
    }
    const json * add_special = body_field(body, "add_special");
    const json * parse_special = body_field(body, "parse_special");
    const json * with_pieces = body_field(body, "with_pieces");
    for (const json * f : {add_special, parse_special, with_pieces}) {
        if (f && !f->is_boolean()) {
            return send_error(res, 400, "invalid_request_error", "'add_special', 'parse_special' and 'with_pieces' are booleans");
        }
    }
    const std::vector<int32_t> toks = llm_tokenize(st.vocab, content->get<std::string>(), add_special && add_special->get<bool>(),
                                                   !parse_special || parse_special->get<bool>());
    json out = json::array();
    for (int32_t t : toks) {
        if (with_pieces && with_pieces->get<bool>()) {
            const std::string piece = llm_token_to_piece(st.vocab, t, true);
            json p;
            if (llm_utf8_invalid_at(piece) < 0) {
                p = piece;
            } else {  // a lone byte of a multi-byte character: its bytes
                p = json::array();
                for (unsigned char c : piece) p.push_back((int) c);
            }
            out.push_back({{"id", t}, {"piece", p}});
        } else {
            out.push_back(t);
        }
    }
    send_json(res, 200, {{"tokens", out}});
}

static void handle_detokenize(const srv_state & st, const Request & req, Response & res) {
    json body;
    try {
        body = json::parse(req.body);
    } catch (const json::parse_error & e) {
        return send_error(res, 400, "invalid_request_error", std::string("the body is not valid JSON: ") + e.what());
    }
    const json * toks = body.is_object() ? body_field(body, "tokens") : nullptr;
    if (!toks || !toks->is_array()) return send_error(res, 400, "invalid_request_error", "'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const auto & t : *toks) {
        if (!t.is_number_integer() || !st.vocab.valid_id(t.get<int32_t>())) {
            return send_error(res, 400, "invalid_request_error",
                              "'tokens' must hold ids in [0, " + std::to_string(st.vocab.n_vocab()) + ")");
        }
        ids.push_back(t.get<int32_t>());
    }
    send_json(res, 200, {{"content", llm_detokenize(st.vocab, ids, false, false)}});
}

int srv_http_run(srv_state & st) {
    const srv_params & p = st.params;
    httplib::Server svr;
    // every streaming request holds a worker for its whole length: room for all slots and a queue
    const int n_workers = p.n_http_threads > 0 ? p.n_http_threads : std::max(32, 2 * p.n_parallel + 8);
    svr.new_task_queue = [n_workers] { return new httplib::ThreadPool((size_t) n_workers); };
    svr.set_payload_max_length(p.max_body);
    svr.set_default_headers({{"Access-Control-Allow-Origin", "*"}, {"Server", "llm-server"}});

    svr.set_pre_routing_handler([&st](const Request & req, Response & res) {
        const std::string & key = st.params.api_key;
        if (key.empty() || req.method == "OPTIONS" || req.path == "/" || req.path == "/index.html" ||
            req.path == "/health") {
            return httplib::Server::HandlerResponse::Unhandled;
        }
        std::string given = req.get_header_value("Authorization");
        given = given.rfind("Bearer ", 0) == 0 ? given.substr(7) : req.get_header_value("X-Api-Key");
        if (key_matches(given, key)) return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, 401, "authentication_error", "invalid or missing API key (Authorization: Bearer KEY)");
        return httplib::Server::HandlerResponse::Handled;
    });
    // statuses set by the library itself (404 route, 413 body too large, 400 bad request line): JSON too
    svr.set_error_handler([](const Request & req, Response & res) {
        if (!res.body.empty()) return;
        switch (res.status) {
            case 404: send_error(res, 404, "not_found_error", "no route for " + req.method + " " + req.path); break;
            case 413: send_error(res, 413, "invalid_request_error", "the request body is too large"); break;
            default: send_error(res, res.status, res.status >= 500 ? "server_error" : "invalid_request_error", "HTTP " + std::to_string(res.status));
        }
    });
    svr.set_exception_handler([](const Request &, Response & res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception & e) {
            what = e.what();
        } catch (...) {
        }
        send_error(res, 500, "server_error", what);
    });
    svr.set_logger([](const Request & req, const Response & res) {
        if (res.status >= 400) fprintf(stderr, "llm-server: %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });

    svr.Options(".*", [](const Request &, Response & res) {
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
        res.set_header("Access-Control-Max-Age", "86400");
    });
    auto page = [](const Request &, Response & res) {
        res.set_content((const char *) srv_index_html, srv_index_html_len, "text/html; charset=utf-8");
    };
    svr.Get("/", page);
    svr.Get("/index.html", page);
    svr.Get("/health", [&st](const Request &, Response & res) {
        const srv_stats & s = st.sched.stats();
        send_json(res, 200, {{"status", "ok"},
                             {"slots_idle", st.sched.n_slots() - s.requests_processing.load()},
                             {"slots_processing", s.requests_processing.load()}});
    });
    auto models = [&st](const Request &, Response & res) {
        const llm_hparams & hp = llm_model_hparams(st.model);
        json m = {{"id", st.params.alias},
                  {"object", "model"},
                  {"created", st.t_start},
                  {"owned_by", "llm-server"},
                  {"meta",
                   {{"n_vocab", hp.n_vocab},
                    {"n_ctx_train", hp.n_ctx_train},
                    {"n_ctx", st.sched.n_ctx()},
                    {"n_ctx_slot", st.sched.n_slot_ctx()},
                    {"n_slots", st.sched.n_slots()},
                    {"n_params", llm_model_n_params(st.model)},
                    {"size", llm_model_size(st.model)},
                    {"chat_template", llm_chat_template_name(st.tmpl)}}}};
        send_json(res, 200, {{"object", "list"}, {"data", json::array({m})}});
    };
    svr.Get("/v1/models", models);
    svr.Get("/models", models);
    svr.Get("/metrics", [&st](const Request &, Response & res) {
        res.set_content(srv_metrics_text(st), "text/plain; version=0.0.4");
    });
    auto chat = [&st](const Request & req, Response & res) { handle_completion(st, OAI_CHAT, req, res); };
    auto text = [&st](const Request & req, Response & res) { handle_completion(st, OAI_COMPLETION, req, res); };
    svr.Post("/v1/chat/completions", chat);
    svr.Post("/chat/completions", chat);
    svr.Post("/v1/completions", text);
    svr.Post("/completions", text);
    svr.Post("/tokenize", [&st](const Request & req, Response & res) { handle_tokenize(st, req, res); });
    svr.Post("/detokenize", [&st](const Request & req, Response & res) { handle_detokenize(st, req, res); });

    int port = p.port;
    if (port == 0) {
        port = svr.bind_to_any_port(p.host);
        if (port < 0) {
            fprintf(stderr, "error: cannot listen on %s (any port)\n", p.host.c_str());
            return 1;
        }
    } else if (!svr.bind_to_port(p.host, port)) {
        fprintf(stderr, "error: cannot listen on %s:%d (in use, or not an address of this machine)\n", p.host.c_str(), port);
        return 1;
    }
    // SIGINT/SIGTERM (blocked in every thread by main) stop the server; SIGUSR1 only wakes this thread up
    std::thread sig_thread([&svr] {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGUSR1);
        int sig = 0;
        sigwait(&set, &sig);
        if (sig != SIGUSR1) fprintf(stderr, "llm-server: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        svr.stop();
    });
    fprintf(stderr, "llm-server: listening on http://%s:%d (%d slots of %d tokens, %d HTTP workers)\n", p.host.c_str(),
            port, st.sched.n_slots(), st.sched.n_slot_ctx(), n_workers);
    const bool ok = svr.listen_after_bind();
    kill(getpid(), SIGUSR1);  // ends sig_thread if no signal did
    sig_thread.join();
    st.sched.stop();
    return ok ? 0 : 1;
}
