#!/usr/bin/env bash
# End-to-end tests of llm-server on the shared stories260K (run by scripts/test.sh; CPU only):
#   1. tests/server/openai.test.mjs through the official openai npm client (chat, completions, streaming,
#      stop strings, max_tokens, prefix reuse, logprobs, seeds, greedy == main, concurrency)
#   2. the raw SSE format with curl
#   3. faults: malformed JSON, a 10 MB body, a prompt longer than a slot, an unknown model, a wrong API key,
#      a client that disconnects mid-stream; the server keeps serving after each
#   4. the web page in headless Chromium (tests/server/web.test.mjs)
#   5. a GGUF chat template the built-ins do not know, rendered by the Jinja engine
#   bash scripts/server-test.sh [BUILD_DIR]      # LLM_SCREENSHOT=docs/img/server-chat.png keeps the picture
# Needs node/npm and chromium (scripts/setup-deps.sh); npm installs tests/server's packages on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
export LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
model=$LLM_SHARED/models/stories260K.gguf
server=$build/bin/llm-server
for b in "$server" "$build/bin/main"; do
  [ -x "$b" ] || { echo "error: $b not built (cmake --build $build --target llm-server main)"; exit 1; }
done
[ -f "$model" ] || { echo "error: $model missing (LLM_SHARED)"; exit 1; }

W=$(mktemp -d /tmp/server-test.XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

# the npm packages (openai, puppeteer-core: no browser download, Debian's chromium is used)
if [ ! -d tests/server/node_modules/openai ] || [ ! -d tests/server/node_modules/puppeteer-core ]; then
  (cd tests/server && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi

start_server() {  # server flags; sets pid and url (the server picks a free port and prints it)
  "$server" --port 0 -t 2 "$@" > "$W/out" 2> "$W/log" &
  pid=$!
  local port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$W/log")
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$W/log"; echo "error: the server did not start"; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$W/log"; echo "error: no /health after 10 s"; exit 1; }
  url=http://127.0.0.1:$port
}
stop_server() {
  kill "$pid" && wait "$pid" 2>/dev/null || true
  pid=
}

key=test-key-$RANDOM$RANDOM
start_server -m "$model" -np 4 -c 2048 --chat-template llama2 --alias stories260K --api-key "$key"
echo "server on $url (pid $pid)"
export LLM_SERVER_URL=$url LLM_API_KEY=$key LLM_MAIN=$build/bin/main LLM_MODEL=$model

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; }

# 1. the openai client
if node --test --test-reporter=spec tests/server/openai.test.mjs > "$W/node" 2>&1; then
  ok "openai client tests ($(grep -c '^✔' "$W/node" || true) passed)"
else
  ko "openai client tests"; cat "$W/node"
fi

# 2. raw SSE: every event is one "data: {json}" line and a blank line, the last is "data: [DONE]"
auth=(-H "Authorization: Bearer $key" -H "Content-Type: application/json")
sse_ok() {  # file: the response body of a stream
  python3 - "$1" <<'EOF'
import json, sys
body = open(sys.argv[1], encoding="utf-8").read()
assert body.endswith("data: [DONE]\n\n"), "no [DONE] at the end"
events = body.split("\n\n")[:-1]
assert len(events) >= 3, events
for e in events[:-1]:
    assert e.startswith("data: ") and "\n" not in e, repr(e)
    json.loads(e[6:])
first = json.loads(events[0][6:])
last = json.loads(events[-2][6:])
choice = first["choices"][0]
if first["object"] == "chat.completion.chunk":
    assert choice["delta"]["role"] == "assistant", first
assert last["choices"][0]["finish_reason"] in ("stop", "length"), last
EOF
}
curl -sN "${auth[@]}" "$url/v1/chat/completions" -D "$W/h" -o "$W/sse" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"stream":true,"max_tokens":12}'
if grep -qi '^content-type: text/event-stream' "$W/h" && sse_ok "$W/sse"; then ok "SSE format (chat)"; else ko "SSE format (chat)"; head -c 600 "$W/sse"; fi
curl -sN "${auth[@]}" "$url/v1/completions" -o "$W/sse2" -d '{"prompt":"Once","stream":true,"max_tokens":12}'
if sse_ok "$W/sse2"; then ok "SSE format (completions)"; else ko "SSE format (completions)"; fi

# 3. faults: each gives its status and an OpenAI error object, and the server goes on
err_ok() {  # name, want status, curl args...
  local name=$1 want=$2
  shift 2
  local got
  got=$(curl -s -o "$W/err" -w '%{http_code}' "$@" || true)
  if [ "$got" = "$want" ] && python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert e["message"] and e["type"] and e["code"] == int(sys.argv[2]), e' "$W/err" "$want" 2>/dev/null; then
    ok "$name -> $want"
  else
    ko "$name: wanted $want, got $got: $(head -c 300 "$W/err")"
  fi
}
still_serves() {
  local got
  got=$(curl -s "${auth[@]}" "$url/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0}' |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"]["completion_tokens"])' 2>/dev/null || true)
  if [ "$got" = 4 ]; then ok "  ...and a normal request still works"; else ko "  ...a normal request after it failed"; fi
}
err_ok "malformed JSON" 400 "${auth[@]}" "$url/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "Hi"}'
still_serves
head -c 10000000 /dev/zero | tr '\0' 'a' > "$W/big"
err_ok "10 MB body" 413 "${auth[@]}" "$url/v1/completions" --data-binary @"$W/big"
still_serves
python3 -c 'import json; print(json.dumps({"prompt": "Once upon a time " * 200, "max_tokens": 8}))' > "$W/long.json"
err_ok "prompt longer than a slot" 400 "${auth[@]}" "$url/v1/completions" --data-binary @"$W/long.json"
err_ok "prompt + max_tokens over a slot" 400 "${auth[@]}" "$url/v1/completions" -d '{"prompt":"Once","max_tokens":600}'
still_serves
err_ok "unknown model" 404 "${auth[@]}" "$url/v1/chat/completions" -d '{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}]}'
err_ok "wrong API key" 401 -H "Authorization: Bearer nope" "$url/v1/completions" -d '{"prompt":"Once"}'
err_ok "no API key" 401 "$url/v1/models"
err_ok "bad field type" 400 "${auth[@]}" "$url/v1/completions" -d '{"prompt":"Once","temperature":"hot"}'
err_ok "unknown route" 404 "${auth[@]}" "$url/v2/nothing"
still_serves
if curl -sf "$url/health" | grep -q '"status":"ok"'; then ok "/health needs no key"; else ko "/health"; fi
if [ "$(curl -s -o /dev/null -w '%{http_code}' -X OPTIONS -H 'Origin: http://example.test' \
        -H 'Access-Control-Request-Method: POST' "$url/v1/chat/completions")" = 204 ] &&
   curl -s -D - -o /dev/null "$url/health" | grep -qi '^access-control-allow-origin: \*'; then
  ok "CORS preflight and header"
else
  ko "CORS"
fi
# a client that leaves mid-stream: its slot is freed (requests_processing back to 0) within a second
metric() { curl -s "${auth[@]}" "$url/metrics" | sed -n "s/^llm_$1 //p"; }
cancelled0=$(metric requests_cancelled_total)
# (the client leaves after its first 300 bytes: head closes the pipe, curl's next write fails and it hangs up, long
# before the 400 tokens are done on any machine)
{ curl -sN "${auth[@]}" "$url/v1/completions" -d '{"prompt":"Once upon a time","stream":true,"max_tokens":400}' \
    2>/dev/null | head -c 300 > "$W/cut"; } || true
freed=no
for _ in $(seq 40); do
  if [ "$(metric requests_processing)" = 0 ] && [ "$(metric requests_cancelled_total)" = $((cancelled0 + 1)) ]; then
    freed=yes
    break
  fi
  sleep 0.1
done
if [ "$freed" = yes ] && grep -q '^data: ' "$W/cut"; then ok "a disconnected stream frees its slot"; else ko "disconnect: slot not freed"; fi
still_serves
metrics_ok() {
  local m k
  m=$(curl -s "${auth[@]}" "$url/metrics")
  for k in requests_total tokens_predicted_total prompt_tokens_total predicted_tokens_seconds requests_processing \
           requests_queued kv_cells_used; do
    grep -q "^llm_$k [0-9]" <<< "$m" || { echo "no llm_$k in /metrics"; return 1; }
  done
}
if metrics_ok; then
  ok "/metrics (Prometheus text)"
else
  ko "/metrics"
fi

# 4. the web page in Chromium
export LLM_SCREENSHOT=${LLM_SCREENSHOT:-$W/server-chat.png}
if node --test --test-reporter=spec tests/server/web.test.mjs > "$W/web" 2>&1 && [ -s "$LLM_SCREENSHOT" ]; then
  ok "web page in headless Chromium"
else
  ko "web page in headless Chromium"; cat "$W/web"
fi

echo "server log: $(grep -c 'llm-server: task' "$W/log") requests"
stop_server

# 5. a chat template the built-ins do not know (ChatML here) is rendered by the Jinja engine
/usr/bin/python3 tests/server/add_chat_template.py "$model" "$W/chatml.gguf" \
  "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
start_server -m "$W/chatml.gguf" -np 1 -c 512
chatml='<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'
want=$(curl -s "$url/tokenize" -d "{\"content\": \"$chatml\", \"add_special\": true}" |
       python3 -c 'import json, sys; print(len(json.load(sys.stdin)["tokens"]))' || true)
got=$(curl -s "$url/v1/chat/completions" \
        -d '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 2}' |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["usage"]["prompt_tokens"])' || true)
if grep -q 'chat template jinja' "$W/log" && [ -n "$got" ] && [ "$got" = "$want" ]; then
  ok "an unknown GGUF chat template is rendered as Jinja ($got prompt tokens)"
else
  ko "Jinja chat template: $got prompt tokens, the ChatML text has $want"
fi
stop_server
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
