#!/usr/bin/env bash
# Installs every Debian 12 package llmrt's build and tests need. Idempotent and
# non-interactive: runs `apt-get update` once, and only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libopenblas-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang libclang-rt-14-dev python3 python3-jinja2
  libboost-dev libsentencepiece-dev
  python3-dev pybind11-dev python3-pytest python3-numpy
)

# The server's client tests run the OpenAI Node SDK: Debian's nodejs and npm, unless a Node.js
# with npm is already installed (another vendor's nodejs package conflicts with Debian's npm).
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then packages+=(nodejs npm); fi
packages+=(curl gnuplot-nox)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
