// oai.cpp - OpenAI request parsing and response JSON (see oai.h).
#include "oai.h"

#include "vocab.h"

#include <chrono>
#include <cmath>

static long unix_now() {
    return (long) std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

[[noreturn]] static void bad_request(const std::string & msg) {
    throw oai_error(400, "invalid_request_error", msg);
}

json oai_error_json(int status, const std::string & type, const std::string & message) {
    json e;
    e["error"] = {{"message", message}, {"type", type}, {"code", status}};
    return e;
}

std::string oai_dump(const json & j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// ---- request fields ----------------------------------------------------------------------------------

static const json * field(const json & body, const char * key) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

static double get_number(const json & body, const char * key, double def, double lo, double hi) {
    const json * v = field(body, key);
    if (!v) return def;
    if (!v->is_number()) bad_request(std::string("'") + key + "' must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
        bad_request(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return x;
}

static long long get_int(const json & body, const char * key, long long def, long long lo, long long hi) {
    const json * v = field(body, key);
    if (!v) return def;
    if (!v->is_number_integer() && !v->is_number_unsigned()) bad_request(std::string("'") + key + "' must be an integer");
    const bool too_big = v->is_number_unsigned() && v->get<unsigned long long>() > (unsigned long long) hi;
    const long long x = too_big ? hi : v->get<long long>();
    if (too_big || x < lo || x > hi) {
        bad_request(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return x;
}

static bool get_bool(const json & body, const char * key, bool def) {
    const json * v = field(body, key);
    if (!v) return def;
    if (!v->is_boolean()) bad_request(std::string("'") + key + "' must be true or false");
    return v->get<bool>();
}

// message content: a string, or OpenAI's array of parts of which the text ones count
static std::string message_content(const json & c) {
    if (c.is_null()) return "";
    if (c.is_string()) return c.get<std::string>();
    if (c.is_array()) {
        std::string s;
        for (const auto & part : c) {
            if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
                !part["text"].is_string()) {
                bad_request("message content parts must be {\"type\": \"text\", \"text\": \"...\"}");
            }
            s += part["text"].get<std::string>();
        }
        return s;
    }
    bad_request("message 'content' must be a string or an array of text parts");
}

static std::vector<int32_t> tokens_of(const json & p, const llm_vocab & vocab) {
    std::vector<int32_t> toks;
    for (const auto & t : p) {
        if (!t.is_number_integer() || !vocab.valid_id(t.get<int32_t>())) {
            bad_request("'prompt' token ids must be integers in [0, " + std::to_string(vocab.n_vocab()) + ")");
        }
        toks.push_back(t.get<int32_t>());
    }
    return toks;
}

oai_request oai_parse(const std::string & text, oai_kind kind, const srv_state & st) {
    json body;
    try {
        body = json::parse(text);
    } catch (const json::parse_error & e) {
        bad_request(std::string("the body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) bad_request("the body must be a JSON object");
    oai_request r;
    r.kind = kind;
    const srv_params & p = st.params;

    if (const json * m = field(body, "model")) {
        if (!m->is_string()) bad_request("'model' must be a string");
        const std::string name = m->get<std::string>();
        if (!name.empty() && name != p.alias) {
            throw oai_error(404, "not_found_error", "model '" + name + "' does not exist (this server has '" + p.alias + "')");
        }
    }
    if (get_int(body, "n", 1, 1, 1) != 1) bad_request("'n' must be 1");

    // the prompt
    const llm_vocab & vocab = st.vocab;
    std::vector<int32_t> prompt;
    if (kind == OAI_CHAT) {
        const json * msgs = field(body, "messages");
        if (!msgs || !msgs->is_array() || msgs->empty()) bad_request("'messages' must be a non-empty array");
        std::vector<llm_chat_msg> chat;
        for (const auto & m : *msgs) {
            if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
                bad_request("each message must be an object with a string 'role'");
            }
            std::string role = m["role"].get<std::string>();
            if (role == "developer") role = "system";
            if (role != "system" && role != "user" && role != "assistant") {
                bad_request("message role '" + role + "' is not one of system, developer, user, assistant");
            }
            chat.push_back({role, message_content(m.contains("content") ? m["content"] : json())});
        }
        bool add_bos = true;
        if (st.jinja_template.empty()) {
            r.prompt_text = llm_chat_apply(st.tmpl, chat, true);
        } else {
            nlohmann::json msgs_j = nlohmann::json::array();
            for (const auto & m : chat) msgs_j.push_back({{"role", m.role}, {"content", m.content}});
            const std::string bos = vocab.valid_id(vocab.bos) ? vocab.token_text(vocab.bos) : "";
            const std::string eos = vocab.valid_id(vocab.eos) ? vocab.token_text(vocab.eos) : "";
            std::string err;
            if (!llm_chat_apply_jinja(st.jinja_template, msgs_j, nullptr, true, bos, eos, &r.prompt_text, &err)) {
                bad_request("the chat template failed on these messages: " + err);
            }
            add_bos = bos.empty() || r.prompt_text.rfind(bos, 0) != 0;  // the template wrote BOS itself
        }
        prompt = llm_tokenize(vocab, r.prompt_text, add_bos, true);
    } else {
        const json * pr = field(body, "prompt");
        if (!pr) bad_request("'prompt' is required");
        if (pr->is_array() && pr->size() == 1 && (*pr)[0].is_string()) pr = &(*pr)[0];
        if (pr->is_string()) {
            r.prompt_text = pr->get<std::string>();
            prompt = llm_tokenize(vocab, r.prompt_text, true, true);
        } else if (pr->is_array() && !pr->empty() && (*pr)[0].is_number()) {
            prompt = tokens_of(*pr, vocab);
        } else {
            bad_request("'prompt' must be a string, an array of one string or an array of token ids");
        }
    }
    if (prompt.empty()) prompt.push_back(vocab.bos >= 0 ? vocab.bos : 0);

    // sampling (defaults: llm_sampler_params, as main's)
    llm_sampler_params & sp = r.req.sampling;
    sp.temp = (float) get_number(body, "temperature", sp.temp, 0.0, 100.0);
    sp.top_p = (float) get_number(body, "top_p", sp.top_p, 0.0, 1.0);
    sp.top_k = (int32_t) get_int(body, "top_k", sp.top_k, -1, 1 << 30);
    sp.min_p = (float) get_number(body, "min_p", sp.min_p, 0.0, 1.0);
    sp.repeat_penalty = (float) get_number(body, "repeat_penalty", sp.repeat_penalty, 0.0, 100.0);
    sp.repeat_last_n = (int32_t) get_int(body, "repeat_last_n", sp.repeat_last_n, -1, 1 << 30);
    const long long seed = get_int(body, "seed", -1, -(1LL << 62), 1LL << 62);
    sp.seed = seed < 0 ? 0xFFFFFFFFu : (uint32_t) seed;  // negative: a random one
    if (sp.repeat_last_n < 0) sp.repeat_last_n = st.sched.n_slot_ctx();

    // length: max_tokens / max_completion_tokens (OpenAI), n_predict (llama.cpp, -1: no limit)
    long long n_predict = p.n_predict;
    if (field(body, "n_predict")) n_predict = get_int(body, "n_predict", -1, -1, 1 << 30);
    if (field(body, "max_completion_tokens")) n_predict = get_int(body, "max_completion_tokens", -1, 1, 1 << 30);
    if (field(body, "max_tokens")) n_predict = get_int(body, "max_tokens", -1, 1, 1 << 30);
    if (n_predict == 0) bad_request("'max_tokens' must be at least 1");
    r.req.n_predict = (int) n_predict;

    if (const json * s = field(body, "stop")) {
        if (s->is_string()) {
            r.req.stop.push_back(s->get<std::string>());
        } else if (s->is_array() && s->size() <= 16) {
            for (const auto & x : *s) {
                if (!x.is_string()) bad_request("'stop' must be a string or an array of strings");
                r.req.stop.push_back(x.get<std::string>());
            }
        } else {
            bad_request("'stop' must be a string or an array of at most 16 strings");
        }
        std::erase_if(r.req.stop, [](const std::string & x) { return x.empty(); });
    }

    // logprobs: chat {logprobs: true, top_logprobs: N}; completions {logprobs: N}; llama.cpp {n_probs: N}
    int n_probs = -1;
    if (kind == OAI_CHAT) {
        if (get_bool(body, "logprobs", false)) n_probs = (int) get_int(body, "top_logprobs", 0, 0, 20);
    } else if (field(body, "logprobs")) {
        n_probs = (int) get_int(body, "logprobs", 0, 0, 20);
    }
    if (field(body, "n_probs")) n_probs = std::max(n_probs, (int) get_int(body, "n_probs", 0, 0, 20));
    r.req.n_probs = n_probs;
    r.logprobs = n_probs >= 0;

    r.stream = get_bool(body, "stream", false);
    if (const json * so = field(body, "stream_options")) {
        if (!so->is_object()) bad_request("'stream_options' must be an object");
        r.include_usage = get_bool(*so, "include_usage", false);
    }

    // does it fit in a slot? (llama.cpp's rule: a slot holds n_ctx / np positions)
    const int n_slot = st.sched.n_slot_ctx();
    const long long n_prompt = (long long) prompt.size();
    if (n_predict > 0 ? n_prompt + n_predict > n_slot : n_prompt >= n_slot) {
        bad_request("the request needs " + std::to_string(n_prompt) + " prompt tokens" +
                    (n_predict > 0 ? " + " + std::to_string(n_predict) + " to generate" : std::string(" and room to generate")) +
                    ", but a slot holds " + std::to_string(n_slot) + " tokens (-c " + std::to_string(st.sched.n_ctx()) +
                    " / -np " + std::to_string(st.sched.n_slots()) + ")");
    }
    r.req.prompt = std::move(prompt);
    return r;
}

// ---- responses ---------------------------------------------------------------------------------------

oai_response::oai_response(const oai_request & r, const srv_state & st, std::string id) :
    r_(r), st_(st), id_(std::move(id)), created_(unix_now()) {
    lp_content_ = json::array();
    if (r_.kind == OAI_COMPLETION) {
        lp_content_ = {{"tokens", json::array()}, {"token_logprobs", json::array()},
                       {"top_logprobs", json::array()}, {"text_offset", json::array()}};
    }
}

static json bytes_of(const std::string & s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back((int) c);
    return b;
}

json oai_response::logprobs_json(const std::vector<srv_token_info> & toks) {
    if (r_.kind == OAI_CHAT) {
        json content = json::array();
        for (const auto & t : toks) {
            const std::string piece = llm_token_to_piece(st_.vocab, t.id, false);
            json top = json::array();
            for (const auto & a : t.top) {
                const std::string pa = llm_token_to_piece(st_.vocab, a.id, false);
                top.push_back({{"token", pa}, {"logprob", a.logprob}, {"bytes", bytes_of(pa)}});
            }
            content.push_back({{"id", t.id}, {"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)},
                               {"top_logprobs", top}});
        }
        return {{"content", content}};
    }
    json lp = {{"tokens", json::array()}, {"token_logprobs", json::array()},
               {"top_logprobs", json::array()}, {"text_offset", json::array()}};
    for (const auto & t : toks) {
        const std::string piece = llm_token_to_piece(st_.vocab, t.id, false);
        json top = json::object();
        for (const auto & a : t.top) top[llm_token_to_piece(st_.vocab, a.id, false)] = a.logprob;
        lp["tokens"].push_back(piece);
        lp["token_logprobs"].push_back(t.logprob);
        lp["top_logprobs"].push_back(top);
        lp["text_offset"].push_back(text_offset_);
        text_offset_ += piece.size();
    }
    return lp;
}

json oai_response::usage_json(const srv_event & ev) const {
    return {{"prompt_tokens", ev.n_prompt},
            {"completion_tokens", ev.timings.predicted_n},
            {"total_tokens", ev.n_prompt + ev.timings.predicted_n}};
}

json oai_response::timings_json(const srv_event & ev) const {
    const srv_timings & t = ev.timings;
    return {{"cache_n", t.cache_n},
            {"prompt_n", t.prompt_n},
            {"prompt_ms", t.prompt_ms},
            {"prompt_per_second", t.prompt_ms > 0 ? 1e3 * t.prompt_n / t.prompt_ms : 0.0},
            {"predicted_n", t.predicted_n},
            {"predicted_ms", t.predicted_ms},
            {"predicted_per_second", t.predicted_ms > 0 ? 1e3 * t.predicted_n / t.predicted_ms : 0.0}};
}

json oai_response::chunk_base() const {
    return {{"id", id_},
            {"object", r_.kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", st_.params.alias},
            {"system_fingerprint", "llm-server"}};
}

std::vector<json> oai_response::chunks(const srv_event & ev) {
    std::vector<json> out;
    auto choice = [&](const std::string & text, const std::vector<srv_token_info> & toks, const json & finish) {
        json c = {{"index", 0}};
        if (r_.kind == OAI_CHAT) {
            json delta = json::object();
            if (!sent_role_) {
                delta["role"] = "assistant";
                sent_role_ = true;
            }
            if (!text.empty() || finish.is_null()) delta["content"] = text;
            c["delta"] = delta;
        } else {
            c["text"] = text;
        }
        c["logprobs"] = r_.logprobs && !toks.empty() ? logprobs_json(toks) : json();
        c["finish_reason"] = finish;
        json j = chunk_base();
        j["choices"] = json::array({c});
        return j;
    };
    if (r_.kind == OAI_CHAT && !sent_role_) {  // the role comes first, alone
        out.push_back(choice("", {}, json()));
    }
    if (!ev.text.empty() || !ev.tokens.empty()) out.push_back(choice(ev.text, ev.tokens, json()));
    if (ev.final && ev.error.empty()) {
        json last = choice("", {}, ev.finish_reason);
        last["usage"] = usage_json(ev);
        last["timings"] = timings_json(ev);
        out.push_back(last);
        if (r_.include_usage) {
            json u = chunk_base();
            u["choices"] = json::array();
            u["usage"] = usage_json(ev);
            out.push_back(u);
        }
    } else if (ev.final) {
        out.push_back(oai_error_json(500, "server_error", ev.error));
    }
    return out;
}

void oai_response::add(const srv_event & ev) {
    text_ += ev.text;
    if (r_.logprobs && !ev.tokens.empty()) {
        json lp = logprobs_json(ev.tokens);
        if (r_.kind == OAI_CHAT) {
            for (auto & x : lp["content"]) lp_content_.push_back(std::move(x));
        } else {
            for (const char * k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
                for (auto & x : lp[k]) lp_content_[k].push_back(std::move(x));
            }
        }
    }
    if (ev.final) final_ = ev;
}

json oai_response::final_json() const {
    json c = {{"index", 0}};
    if (r_.kind == OAI_CHAT) {
        c["message"] = {{"role", "assistant"}, {"content", text_}};
        c["logprobs"] = r_.logprobs ? json{{"content", lp_content_}} : json();
    } else {
        c["text"] = text_;
        c["logprobs"] = r_.logprobs ? lp_content_ : json();
    }
    c["finish_reason"] = final_.finish_reason;
    return {{"id", id_},
            {"object", r_.kind == OAI_CHAT ? "chat.completion" : "text_completion"},
            {"created", created_},
            {"model", st_.params.alias},
            {"system_fingerprint", "llm-server"},
            {"choices", json::array({c})},
            {"usage", usage_json(final_)},
            {"timings", timings_json(final_)}};
}
