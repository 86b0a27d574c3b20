#!/usr/bin/env bash
# The FP8 KV cache (--kv-cache-dtype fp8) against the bf16 one on a random Llama-3-8B-shaped
# checkpoint, in one device call, with bf16 and FP8 products: batch-1 decode at prompts of 128 and
# 3968 tokens (the KV bytes a step reads: 0.03 / 0.53 GB in bf16 at the mean context), offline
# throughput 512 x 128/128 and 256 x 1000/1000 (the KV-bound workload). docs/perf.md's FP8 KV
# table comes from its summary.md.
#
# usage: scripts/bench/device_kv_fp8_bench.sh BUILD_DIR OUT_DIR
#   OUT_DIR: config.json, results.json (copy bandwidth), bench.jsonl (llmrt-bench lines with "name",
#            "quantization", "kv"), <name>.log, summary.md (scripts/bench/summarize_kv_fp8.py)
# Environment: BENCH_FLAGS (appended to every llmrt-bench command); SKIP_LONG=1 drops 1000/1000;
# ONLY (an extended regex): only the runs whose name matches it.
source "$(dirname "$0")/device_args.sh"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
read -r -a extra <<<"${BENCH_FLAGS:-}"
start=$SECONDS
note() { echo "[device_kv_fp8_bench $((SECONDS - start))s] $*" >&2; }
dir=/tmp/kv_fp8_llama8b
touch "$out/bench.jsonl"

# bench NAME QUANTIZATION KV ARGS...: one llmrt-bench run; its JSON line (or an error line) to bench.jsonl.
bench() {
  local name=$1 q=$2 kv=$3
  shift 3
  [[ -n ${ONLY:-} && ! $name =~ $ONLY ]] && return
  note "$name: $*"
  local t0=$SECONDS rc=0
  timeout -k 10 300 "$bin" "$@" --model "$dir" --backend cuda --quantization "$q" --kv-cache-dtype "$kv" \
    "${extra[@]}" >"$out/$name.out" 2>"$out/$name.log" || rc=$?
  note "$name: exit $rc in $((SECONDS - t0)) s"
  python3 "$here/bench_line.py" "$rc" "$out/$name.out" "$out/$name.log" "name=$name" "quantization=$q" "kv=$kv" \
    >>"$out/bench.jsonl"
}

note "making $dir"
python3 "$here/make_random_llama.py" "$dir" --preset 8b >"$out/make.log" 2>&1 || { tail -n 5 "$out/make.log" >&2; exit 1; }
cp "$dir/config.json" "$out/config.json"
python3 "$here/gpu_reference.py" --model "$dir" --out "$out/results.json" --skip-hf >"$out/reference.log" 2>&1
for kv in auto fp8; do
  bench "latency128_none_${kv}" none "$kv" latency --input-len 128 --output-len 128 --warmup 2 --iters 5
  bench "latency3968_none_${kv}" none "$kv" latency --input-len 3968 --output-len 128 --warmup 1 --iters 3
done
for q in none fp8; do
  for kv in auto fp8; do
    bench "throughput128_${q}_${kv}" "$q" "$kv" throughput --num-requests 512 --max-batch-size 512 \
      --max-num-tokens 8192 --input-len 128 --output-len 128 --warmup 1
  done
done
if [[ ${SKIP_LONG:-0} != 1 ]]; then
  for run in "none auto" "none fp8" "fp8 fp8"; do
    read -r q kv <<<"$run"
    bench "throughput1000_${q}_${kv}" "$q" "$kv" throughput --num-requests 256 --max-batch-size 512 \
      --max-num-tokens 8192 --input-len 1000 --output-len 1000
  done
fi
rm -rf "$dir"
python3 "$here/summarize_kv_fp8.py" "$out" | tee "$out/summary.md"
