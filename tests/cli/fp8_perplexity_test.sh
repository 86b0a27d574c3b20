#!/usr/bin/env bash
# FP8 keeps the bundled model's held-out perplexity within 1% of the 32-bit model's, on the same
# chunks of models/llmrt-tiny/heldout_eval.txt: FP8 products quantized at load (--quantization
# fp8), the checkpoint `llmrt quantize --method fp8` writes (FP8 products without a flag, its
# weights requantized per row: within 0.05% of the flag's figure) and that checkpoint dequantized
# into 32-bit products (--quantization none: weight-only). On 8 of those chunks, the FP8 KV cache
# (--kv-cache-dtype fp8, scale 1: the model has no KV scales), and with the scales `llmrt quantize
# --kv-cache-scales` calibrates on the 32-bit model, run on that fp8 checkpoint's dequantized
# weights (--quantization none) against the same weights with a 32-bit cache. (Those three runs
# always take 8 chunks.)
#   tests/cli/fp8_perplexity_test.sh LLMRT_BIN MODEL_DIR [CHUNKS]
set -euo pipefail
bin=$1 model=$2 chunks=${3:-24}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" quantize --method fp8 --model "$model" --output "$tmp/fp8" >/dev/null
ppl() { "$bin" perplexity --model "$1" --file "$model/heldout_eval.txt" --context 512 --chunks "$chunks" --threads 2 \
  "${@:2}" 2>/dev/null | tail -1 | sed -E 's/.*PPL = ([0-9.]+).*/\1/'; }
base=$(ppl "$model")
jit=$(ppl "$model" --quantization fp8)
ckpt=$(ppl "$tmp/fp8")
weight_only=$(ppl "$tmp/fp8" --quantization none)
chunks=8
base8=$(ppl "$model")
kv=$(ppl "$model" --kv-cache-dtype fp8)
"$bin" quantize --method fp8 --kv-cache-scales --calib-size 8 --model "$model" --output "$tmp/fp8kv" >/dev/null
kv_wo=$(ppl "$tmp/fp8kv" --quantization none)
kv_cal=$(ppl "$tmp/fp8kv" --quantization none --kv-cache-dtype fp8)
python3 - "$base" "$jit" "$ckpt" "$weight_only" "$base8" "$kv" "$kv_wo" "$kv_cal" <<'PY'
import sys
base, jit, ckpt, wo, base8, kv, kv_wo, kv_cal = map(float, sys.argv[1:])
pct = lambda v, b=base: f"{v:.4f} ({(v / b - 1) * 100:+.2f}%)"
print(f"perplexity: 32-bit {base:.4f}; --quantization fp8 {pct(jit)}; fp8 checkpoint {pct(ckpt)}; "
      f"fp8 checkpoint weight-only {pct(wo)}")
print(f"8 chunks: 32-bit {base8:.4f}; --kv-cache-dtype fp8 {pct(kv, base8)}; calibrated KV scales: "
      f"weight-only {kv_wo:.4f}, with the fp8 cache {pct(kv_cal, kv_wo)}")
ok = all(v <= base * 1.01 for v in (jit, ckpt, wo)) and abs(ckpt / jit - 1) < 5e-4 and jit != base
ok = ok and kv <= base8 * 1.01 and kv != base8 and kv_cal <= kv_wo * 1.01 and kv_cal != kv_wo
sys.exit(0 if ok else 1)
PY
