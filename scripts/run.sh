#!/usr/bin/env bash
# The README's main command: install, build the llmrt command, generate text.
# Extra arguments are passed to `llmrt generate` (they override the defaults).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target llmrt_cli
model=../shared/testdata/models/stories260K-hf
if [[ ! -f $model/config.json ]]; then
  echo "run.sh: $model is missing; pass --model DIR" >&2
fi
exec ./build/release/bin/llmrt generate --model "$model" --prompt "Once upon a time" --max-tokens 64 "$@"
