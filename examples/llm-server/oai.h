// oai.h - the OpenAI API surface of llm-server: request bodies of /v1/chat/completions and
// /v1/completions -> srv_request (prompt tokens, sampling, stop strings, logprobs), and the scheduler's
// events -> OpenAI JSON (whole responses, SSE chunks, errors).
//
//   oai_request r = oai_parse(body, OAI_CHAT, st);        // throws oai_error (status, type, message)
//   std::shared_ptr<srv_task> t = st.sched.submit(r.req);
//   oai_response out(r, st, "chatcmpl-1");
//   ... out.chunks(ev) for every event (streaming), or out.add(ev) then out.final_json() ...
#pragma once

#include "server.h"
#include "slots.h"

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

enum oai_kind {
    OAI_CHAT,        // /v1/chat/completions
    OAI_COMPLETION,  // /v1/completions
};

// bad input: the HTTP status, OpenAI's error type ("invalid_request_error", ...) and a one-line message
struct oai_error : std::runtime_error {
    oai_error(int status, std::string type, const std::string & msg) :
        std::runtime_error(msg), status(status), type(std::move(type)) {}
    int         status;
    std::string type;
};

struct oai_request {
    oai_kind    kind = OAI_CHAT;
    bool        stream = false;
    bool        include_usage = false;  // stream_options.include_usage: a last chunk with usage only
    bool        logprobs = false;       // the response carries logprobs (req.n_probs >= 0)
    std::string prompt_text;            // the formatted prompt (chat: after the template)
    srv_request req;
};

// Parses and validates a request body; throws oai_error (400 malformed, 404 unknown model).
oai_request oai_parse(const std::string & body, oai_kind kind, const srv_state & st);

// {"error": {"message", "type", "code"}}
json        oai_error_json(int status, const std::string & type, const std::string & message);
// JSON text that never throws on invalid UTF-8 (replaced by U+FFFD)
std::string oai_dump(const json & j);

// Builds the response of one request from its events.
class oai_response {
  public:
    oai_response(const oai_request & r, const srv_state & st, std::string id);
    // streaming: the SSE payloads (JSON objects) one event gives, in order; the final event adds the
    // finish chunk (and the usage chunk if asked for); the caller ends with "data: [DONE]"
    std::vector<json> chunks(const srv_event & ev);
    // non-streaming: collect events, then the whole response
    void add(const srv_event & ev);
    json final_json() const;

  private:
    json logprobs_json(const std::vector<srv_token_info> & toks);  // advances text_offset_
    json usage_json(const srv_event & ev) const;
    json timings_json(const srv_event & ev) const;
    json chunk_base() const;

    const oai_request & r_;
    const srv_state &   st_;
    std::string         id_;
    long                created_;
    bool                sent_role_ = false;
    std::string         text_;        // non-streaming: all text
    json                lp_content_;  // non-streaming chat logprobs.content / completion logprobs
    size_t              text_offset_ = 0;
    srv_event           final_;
};
