#!/usr/bin/env bash
# Golden cases for test_jinja: fetch the real chat templates (scripts/fetch-templates.sh) and render them, and
# the feature snippets, with Python's jinja2 (scripts/jinja_golden.py) into BUILD_DIR/jinja-golden. test_jinja
# reads that folder (or $LLM_JINJA_GOLDEN) and skips the golden cases when it is missing.
#   bash scripts/jinja-golden.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/jinja-golden.sh BUILD_DIR}
py=/usr/bin/python3
if ! $py -c 'import jinja2' 2>/dev/null; then
  echo "jinja-golden: Python's jinja2 is missing (apt-get install python3-jinja2); golden cases skipped"
  exit 0
fi
bash scripts/fetch-templates.sh "$build/templates" || echo "jinja-golden: fetching templates failed; feature cases only"
rm -rf "$build/jinja-golden"
$py scripts/jinja_golden.py "$build/templates" "$build/jinja-golden" | tail -1
