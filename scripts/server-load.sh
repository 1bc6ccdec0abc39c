#!/usr/bin/env bash
# Load test of llm-server on the CPU with the shared stories260K: 64 concurrent streaming clients, 200
# requests (tests/server/load.mjs). Each greedy answer must equal its prompt's sequential reference with
# the same token count; prints time to first token (p50/p99) and the aggregate tokens/s.
#   bash scripts/server-load.sh [BUILD_DIR]     # N_REQUESTS, CONCURRENCY, NP, CTX override the defaults
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
export LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
model=$LLM_SHARED/models/stories260K.gguf
server=$build/bin/llm-server
[ -x "$server" ] || { echo "error: $server not built (cmake --build $build --target llm-server)"; exit 1; }
np=${NP:-64} ctx=${CTX:-8192}
export N_REQUESTS=${N_REQUESTS:-200} CONCURRENCY=${CONCURRENCY:-64}

W=$(mktemp -d /tmp/server-load.XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
if [ ! -d tests/server/node_modules/openai ]; then
  (cd tests/server && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi

key=load-key-$RANDOM$RANDOM
cmd=("$server" -m "$model" -np "$np" -c "$ctx" --api-key "$key" --port 0 ${SERVER_ARGS:-})
"${cmd[@]}" > "$W/out" 2> "$W/log" &
pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$W/log")
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$W/log"; echo "error: the server did not start"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$W/log"; echo "error: no /health after 10 s"; exit 1; }
echo "server: ${cmd[*]/$key/KEY}"
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
LLM_SERVER_URL=http://127.0.0.1:$port LLM_API_KEY=$key node tests/server/load.mjs || rc=$?
echo "server log: $(grep -c 'llm-server: task' "$W/log") requests; $(grep -c 'error' "$W/log" || true) error lines"
exit $rc
