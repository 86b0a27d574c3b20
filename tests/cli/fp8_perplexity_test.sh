#!/usr/bin/env bash
# The bundled model quantized by `llmrt quantize --method fp8` keeps its held-out perplexity
# within 1% of the 16-bit model's, on the same chunks of models/llmrt-tiny/heldout_eval.txt.
#   tests/cli/fp8_perplexity_test.sh LLMRT_BIN MODEL_DIR [CHUNKS]
set -euo pipefail
bin=$1 model=$2 chunks=${3:-24}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" quantize --method fp8 --model "$model" --output "$tmp/fp8" >/dev/null
ppl() { "$bin" perplexity --model "$1" --file "$model/heldout_eval.txt" --context 512 --chunks "$chunks" --threads 2 \
  2>/dev/null | tail -1 | sed -E 's/.*PPL = ([0-9.]+).*/\1/'; }
base=$(ppl "$model")
fp8=$(ppl "$tmp/fp8")
python3 - "$base" "$fp8" <<'PY'
import sys
base, fp8 = float(sys.argv[1]), float(sys.argv[2])
print(f"perplexity: 16-bit {base:.4f}, fp8 {fp8:.4f} ({(fp8 / base - 1) * 100:+.2f}%)")
sys.exit(0 if fp8 <= base * 1.01 else 1)
PY
