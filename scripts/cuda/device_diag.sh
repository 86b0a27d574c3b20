#!/usr/bin/env bash
# Second, short GPU-machine check: batched (n > 1) generation CPU vs CUDA, the
# dynamic-NTK goldens past max_position_embeddings, and compute-sanitizer on a
# batched run. Same carry as device_check.sh.
set -u
C=/tmp/llmrt-carry; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" "$C"
tar xJf .carry-cuda/carry.tar.xz -C "$C" || exit 2
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
M=$C/models/stories260K-hf
gen() { $C/bin/llmrt generate --model $M --prompt "Once upon a time" --ignore-eos --json --kv-cache-max-tokens 8192 "$@" |
  python3 -c "import json,sys; d=json.load(sys.stdin); print([o['token_ids'] for o in d['outputs']])"; }
for args in "--n 1 --temperature 0.8 --seed 7 --max-tokens 30" "--n 4 --temperature 0 --max-tokens 30" "--n 2 --temperature 0.8 --seed 7 --max-tokens 30" \
            "--n 4 --temperature 0.8 --seed 7 --max-tokens 30"; do
  a=$(gen --backend cpu $args); b=$(gen --backend cuda --dtype float32 $args)
  [[ "$a" == "$b" ]] && echo "same  $args" || { echo "DIFF  $args"; echo " cpu  $a"; echo " cuda $b"; }
done 2>&1 | tee "$OUT/batched.txt"
G=tests/data/golden/llama_dynamic_ntk
python3 - "$C/bin/llmrt" $G <<'PY' 2>&1 | tee "$OUT/ntk.txt"
import json, subprocess, sys
llmrt, g = sys.argv[1], sys.argv[2]
for i, c in enumerate(json.load(open(g + "/golden.json"))["cases"]):
    for be, dt in (("cpu", "auto"), ("cuda", "float32"), ("cuda", "bfloat16")):
        p = subprocess.run([llmrt, "generate", "--model", g, "--input-ids", ",".join(map(str, c["prompt_ids"])),
                            "--max-tokens", str(len(c["greedy_new_ids"])), "--ignore-eos", "--json", "--backend", be,
                            "--dtype", dt, "--max-seq-len", "128", "--kv-cache-max-tokens", "1024"],
                           capture_output=True, text=True)
        got = json.loads(p.stdout)["outputs"][0]["token_ids"] if p.returncode == 0 else p.stderr.strip()[-200:]
        print(f"case{i} {be}-{dt}: {'==' if got == c['greedy_new_ids'] else '!='} HF  {got if got != c['greedy_new_ids'] else ''}")
PY
SAN=/usr/local/cuda/bin/compute-sanitizer
timeout 150 $SAN --tool memcheck --leak-check full --error-exitcode 9 $C/bin/llmrt generate --model $M \
  --prompt "Once upon a time" --max-tokens 12 --backend cuda --n 4 --temperature 0.8 --seed 7 --tokens-per-block 4 \
  --kv-cache-max-tokens 1024 --max-num-tokens 3 --json > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|LEAK SUMMARY|Invalid|error" "$OUT/memcheck.log" | head -20
