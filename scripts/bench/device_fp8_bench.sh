#!/usr/bin/env bash
# FP8 products (--quantization fp8) against bf16 on a random Llama-3-8B-shaped checkpoint, in one
# device call: batch-1 decode against each dtype's bandwidth floor, and offline throughput.
# docs/perf.md's FP8 table comes from its summary.md (scripts/bench/summarize_fp8.py).
#
# usage: scripts/bench/device_fp8_bench.sh BUILD_DIR OUT_DIR
#   BUILD_DIR  an unpacked build folder holding bin/llmrt-bench (CUDA build)
#   OUT_DIR    config.json (the checkpoint's), results.json (gpu_reference.py --skip-hf: copy
#              bandwidth), bench.jsonl (llmrt-bench lines with "name" and "quantization"),
#              <name>.log, summary.md
# Runs, each for bf16 (--quantization none), fp8 and int8 (QUANTS: the list; "awq" adds an AutoAWQ
# checkpoint of the same shapes, make_random_llama.py --awq, run with its 4-bit weights): latency 128/128 (--warmup 2 --iters 5);
# prefill of 2048 tokens (--warmup 1 --iters 5); throughput 8 x 128/128 (--max-batch-size 8) and
# 512 x 128/128 (--max-batch-size 512 --max-num-tokens 8192); with PROFILE=1 also an fp8 latency
# run with --cuda-tuning profile=on (the per-op table in fp8_profile.log).
# Environment: BENCH_FLAGS (appended to every llmrt-bench command).
source "$(dirname "$0")/device_args.sh"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
read -r -a extra <<<"${BENCH_FLAGS:-}"
start=$SECONDS
note() { echo "[device_fp8_bench $((SECONDS - start))s] $*" >&2; }
dir=/tmp/fp8_llama8b
touch "$out/bench.jsonl"

# bench NAME QUANTIZATION ARGS...: one llmrt-bench run; its JSON line (or an error line) to bench.jsonl.
bench() {
  local name=$1 q=$2
  shift 2
  note "$name: $*"
  local t0=$SECONDS rc=0 model=$dir flag=$q
  [[ $q == awq ]] && model=$awq_dir flag=auto
  timeout -k 10 300 "$bin" "$@" --model "$model" --backend cuda --quantization "$flag" "${extra[@]}" \
    >"$out/$name.out" 2>"$out/$name.log" || rc=$?
  note "$name: exit $rc in $((SECONDS - t0)) s"
  python3 "$here/bench_line.py" "$rc" "$out/$name.out" "$out/$name.log" "name=$name" "quantization=$q" >>"$out/bench.jsonl"
}

note "making $dir"
python3 "$here/make_random_llama.py" "$dir" --preset 8b >"$out/make.log" 2>&1 || { tail -n 5 "$out/make.log" >&2; exit 1; }
cp "$dir/config.json" "$out/config.json"
awq_dir=/tmp/awq_llama8b
if [[ " ${QUANTS:-} " == *" awq "* ]]; then
  note "making $awq_dir"
  python3 "$here/make_random_llama.py" "$awq_dir" --preset 8b --awq >"$out/make_awq.log" 2>&1 ||
    { tail -n 5 "$out/make_awq.log" >&2; exit 1; }
fi
python3 "$here/gpu_reference.py" --model "$dir" --out "$out/results.json" --skip-hf >"$out/reference.log" 2>&1
for q in ${QUANTS:-none fp8 int8}; do
  bench "latency_${q}" "$q" latency --input-len 128 --output-len 128 --warmup 2 --iters 5
done
for q in ${QUANTS:-none fp8 int8}; do
  bench "prefill_${q}" "$q" prefill --input-len 2048 --warmup 1 --iters 5
done
for q in ${QUANTS:-none fp8 int8}; do
  bench "throughput8_${q}" "$q" throughput --num-requests 8 --max-batch-size 8 --input-len 128 --output-len 128 \
    --warmup 1
done
for q in ${QUANTS:-none fp8 int8}; do
  bench "throughput_${q}" "$q" throughput --num-requests 512 --max-batch-size 512 --max-num-tokens 8192 \
    --input-len 128 --output-len 128 --warmup 1
done
if [[ ${PROFILE:-0} == 1 ]]; then
  note "fp8 profile"
  timeout -k 10 200 "$bin" latency --model "$dir" --backend cuda --quantization fp8 --input-len 128 --output-len 64 \
    --warmup 1 --iters 2 --cuda-tuning profile=on >/dev/null 2>"$out/fp8_profile.log"
fi
rm -rf "$dir" "$awq_dir"
python3 "$here/summarize_fp8.py" "$out" | tee "$out/summary.md"
