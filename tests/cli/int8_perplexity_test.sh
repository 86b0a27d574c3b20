#!/usr/bin/env bash
# INT8 (W8A8) on the bundled model's held-out text, on the same chunks of
# models/llmrt-tiny/heldout_eval.txt as the 32-bit figure: INT8 products quantized at load
# (--quantization int8), the checkpoint `llmrt quantize --method int8` writes (INT8 products
# without a flag: within 0.05% of the flag's figure) and the SmoothQuant checkpoint (`--method
# smoothquant`, calibrated on the model's calibration.txt: within 3%, its weights not the plain
# int8 ones, and dequantized into 32-bit products within 1%: the smoothing itself is lossless);
# `--quantization smoothquant` (calibrated at load, same settings) gives that checkpoint's figure.
#   tests/cli/int8_perplexity_test.sh LLMRT_BIN MODEL_DIR [CHUNKS]
set -euo pipefail
bin=$1 model=$2 chunks=${3:-24}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" quantize --method int8 --model "$model" --output "$tmp/int8" >/dev/null
"$bin" quantize --method smoothquant --model "$model" --output "$tmp/sq" --calib-size 16 --threads 2 >/dev/null
grep -q '"producer": "llmrt quantize --method smoothquant --alpha 0.8 (16 samples' "$tmp/sq/config.json"
ppl() { "$bin" perplexity --model "$1" --file "$model/heldout_eval.txt" --context 512 --chunks "$chunks" --threads 2 \
  "${@:2}" 2>/dev/null | tail -1 | sed -E 's/.*PPL = ([0-9.]+).*/\1/'; }
base=$(ppl "$model")
jit=$(ppl "$model" --quantization int8)
ckpt=$(ppl "$tmp/int8")
sq=$(ppl "$tmp/sq")
sq_weights=$(ppl "$tmp/sq" --quantization none)
# --quantization smoothquant calibrates at load with the same settings: the same checkpoint, the same figure.
sq_load=$(ppl "$model" --quantization smoothquant --calibration-size 16 --quantization-cache-dir "$tmp/cache")
[[ $(ls "$tmp/cache") == smoothquant-* ]]
python3 - "$base" "$jit" "$ckpt" "$sq" "$sq_weights" "$sq_load" <<'PY'
import sys
base, jit, ckpt, sq, sqw, sq_load = map(float, sys.argv[1:])
pct = lambda v: f"{v:.4f} ({(v / base - 1) * 100:+.2f}%)"
print(f"perplexity: 32-bit {base:.4f}; --quantization int8 {pct(jit)}; int8 checkpoint {pct(ckpt)}; "
      f"smoothquant checkpoint {pct(sq)}; smoothquant weight-only {pct(sqw)}")
print(f"--quantization smoothquant (calibrated at load) {pct(sq_load)}")
ok = (jit <= base * 1.03 and ckpt <= base * 1.03 and sq <= base * 1.03 and sqw <= base * 1.01
      and abs(ckpt / jit - 1) < 5e-4 and jit != base and sq != ckpt and sq_load == sq)
sys.exit(0 if ok else 1)
PY
