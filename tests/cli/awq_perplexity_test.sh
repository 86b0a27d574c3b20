#!/usr/bin/env bash
# `llmrt quantize --method awq` on the bundled model: an AutoAWQ GEMM checkpoint (quant_method awq,
# 4 bits, group 128; qweight / qzeros / scales in place of the product matrices) that llmrt runs as
# it loads (4-bit weights; the CPU computes with them dequantized) within 6% of the 32-bit
# held-out perplexity on the same chunks; bad group sizes are one-line errors.
#   tests/cli/awq_perplexity_test.sh LLMRT_BIN MODEL_DIR [CHUNKS]
set -euo pipefail
bin=$1 model=$2 chunks=${3:-24}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" quantize --method awq --model "$model" --output "$tmp/awq" --calib-size 16 --threads 2 >/dev/null
python3 - "$tmp/awq" <<'PY'
import json, struct, sys
d = sys.argv[1]
q = json.load(open(f"{d}/config.json"))["quantization_config"]
assert q["quant_method"] == "awq" and q["bits"] == 4 and q["group_size"] == 128 and q["version"] == "gemm", q
assert q["producer"].startswith("llmrt quantize --method awq --group-size 128 (16 samples"), q
raw = open(f"{d}/model.safetensors", "rb").read()
hdr = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
names = [n for n in hdr if n != "__metadata__"]
assert not any(n.endswith("_proj.weight") for n in names), "a product matrix was left unquantized"
q0 = hdr["model.layers.0.self_attn.q_proj.qweight"]
assert q0["dtype"] == "I32" and q0["shape"] == [384, 384 // 8], q0
assert hdr["model.layers.0.mlp.down_proj.scales"]["dtype"] == "F16"
PY
if "$bin" quantize --method awq --model "$model" --output "$tmp/bad" --group-size 100 2>"$tmp/err"; then
  echo "group size 100 was accepted" >&2; exit 1
fi
grep -q "in_features % --group-size (100) == 0" "$tmp/err"
[[ ! -e "$tmp/bad" ]]  # checked before calibrating: nothing written
ppl() { "$bin" perplexity --model "$1" --file "$model/heldout_eval.txt" --context 512 --chunks "$chunks" --threads 2 \
  "${@:2}" 2>/dev/null | tail -1 | sed -E 's/.*PPL = ([0-9.]+).*/\1/'; }
base=$(ppl "$model")
awq=$(ppl "$tmp/awq")
python3 - "$base" "$awq" <<'PY'
import sys
base, awq = map(float, sys.argv[1:])
print(f"perplexity: 32-bit {base:.4f}; awq checkpoint {awq:.4f} ({(awq / base - 1) * 100:+.2f}%)")
sys.exit(0 if base < awq <= base * 1.06 else 1)
PY
