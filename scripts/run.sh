#!/usr/bin/env bash
# The README's main command: install, build the llmrt command, generate text.
# Extra arguments are passed to `llmrt generate` (they override the defaults).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target llmrt_cli
# Without --model, llmrt uses the bundled models/llmrt-tiny.
exec ./build/release/bin/llmrt generate --prompt "This package provides" --max-tokens 64 \
  --temperature 0.7 --top-p 0.9 --repetition-penalty 1.15 --seed 1 "$@"
