#!/usr/bin/env bash
# Same-call A/B of llmrt-bench binaries and tuning flags on random checkpoints, alternating, so
# a change is measured against its peer (the previous commit's binary, or a switch) on one GPU
# in one call, with the bandwidth floor of each run (scripts/bench/summarize_arch.py: copy
# bandwidth from gpu_reference.py --skip-hf in the same call). Run on the GPU machine.
#
# usage: scripts/bench/device_ab.sh OUT_DIR PRESET...
#   PRESET    llama-8b (make_random_llama.py --preset 8b) or a make_random_arch.py preset
#   VARIANTS  (environment, required) variants separated by ';', each NAME|BINARY|FLAGS: e.g.
#             "new|/tmp/c/bin/llmrt-bench|;old|/tmp/c/bin/llmrt-bench-peer|;keys64|/tmp/c/bin/llmrt-bench|--cuda-tuning split_keys=64"
#   STEP      (environment) the llmrt-bench arguments of every run (default: batch-1 decode,
#             latency --input-len 128 --output-len 128 --warmup 2 --iters 5)
#   ROUNDS    (environment) passes over the variants per preset (default 2)
#   KEEP=1    (environment) keep each checkpoint in /tmp/ab_PRESET for a later call in the same
#             device call (one that finds it there reuses it)
# Prints one line per run (preset, variant, round, decode ms/token, TTFT ms; throughput runs:
# output tok/s), each variant's median, and summarize_arch.py's floor table. OUT_DIR keeps
# bench.jsonl (each run's JSON line, name VARIANT-rROUND), ckpt.jsonl and results.json; a later
# call into the same OUT_DIR adds to them.
set -u
out=${1:?OUT_DIR}
shift
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64
read -r -a step <<<"${STEP:-latency --input-len 128 --output-len 128 --warmup 2 --iters 5}"
mkdir -p "$out"
touch "$out/bench.jsonl" "$out/ckpt.jsonl"
IFS=';' read -r -a variants <<<"${VARIANTS:?VARIANTS=NAME|BINARY|FLAGS;...}"
for preset in "$@"; do
  dir=/tmp/ab_$preset
  if [[ ! -f $dir/config.json ]]; then
    if [[ $preset == llama-8b ]]; then
      python3 "$here/make_random_llama.py" "$dir" --preset 8b >"$out/make.log" 2>&1
    else
      python3 "$here/make_random_arch.py" "$dir" --preset "$preset" 2>"$out/make.log" >/dev/null
    fi || { echo "$preset: checkpoint failed"; tail -n 5 "$out/make.log"; continue; }
  fi
  grep -q "\"preset\": \"$preset\"" "$out/ckpt.jsonl" ||
    python3 "$here/make_random_arch.py" "$dir" --measure "$preset" >>"$out/ckpt.jsonl"
  [[ -f $out/results.json ]] ||
    python3 "$here/gpu_reference.py" --model "$dir" --out "$out/results.json" --skip-hf >"$out/reference.log" 2>&1
  for ((round = 1; round <= ${ROUNDS:-2}; ++round)); do
    for v in "${variants[@]}"; do
      IFS='|' read -r name bin flags <<<"$v"
      read -r -a extra <<<"$flags"
      rc=0
      timeout -k 10 300 "$bin" "${step[@]}" --model "$dir" --backend cuda "${extra[@]}" \
        >"$out/run.out" 2>"$out/run.log" || rc=$?
      python3 "$here/bench_line.py" "$rc" "$out/run.out" "$out/run.log" "preset=$preset" "name=$name-r$round" |
        tee -a "$out/bench.jsonl" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read()); r = d.get("results", {})
r = r[0] if isinstance(r, list) else r
if "error" in d: print(d["preset"], d["name"], "ERROR", d["error"], " | ".join(d["log_tail"]))
elif "decode_ms_per_token" in r: print(d["preset"], d["name"], "%.3f ms/token  TTFT %.2f ms" % (r["decode_ms_per_token"], r["ttft_ms_mean"]))
else: print(d["preset"], d["name"], "%.0f tok/s  ITL p50 %.2f ms" % (r.get("output_tokens_per_s", 0), r.get("itl_ms_p50", 0)))'
    done
  done
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$dir"
done
python3 - "$out/bench.jsonl" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    r = d.get("results", {})
    r = r[0] if isinstance(r, list) else r
    v = r.get("decode_ms_per_token", r.get("output_tokens_per_s"))
    cfg = d.get("config", {})
    key = (d["preset"], d["name"].rsplit("-r", 1)[0], f'{cfg.get("input_len")}/{cfg.get("output_len")}')
    if v is not None: runs.setdefault(key, []).append(v)
for (preset, variant, shape), vs in runs.items():
    print(f"median {preset} {shape} {variant}: {statistics.median(vs):.3f} over {len(vs)}")
EOF
python3 "$here/summarize_arch.py" "$out"
