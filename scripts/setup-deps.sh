#!/usr/bin/env bash
# Installs what the build and the tests need from Debian's packages (only what is missing).
# The CUDA toolkit is not installed here: it is used when found at /usr/local/cuda.
set -euo pipefail
pkgs=(cmake g++ make doctest-dev nlohmann-json3-dev python3-numpy python3-pytest python3-jinja2 python3-jsonschema graphviz curl libcpp-httplib-dev chromium "$@")
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)  # llm-server's tests (a NodeSource nodejs brings its own npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || {
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}"
}
