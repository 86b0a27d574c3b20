#!/usr/bin/env bash
# The GPU benchmark driver: run it on the GPU machine inside one device call.
#
# usage: scripts/bench/device_bench.sh BUILD_DIR OUT_DIR
#   BUILD_DIR  an unpacked build folder holding bin/llmrt-bench (CUDA build)
#   OUT_DIR    where results go: bench.jsonl (one llmrt-bench JSON line per step, with
#              "name" added), results.json (gpu_reference.py), <step>.log (each step's
#              stderr), steps.tsv (name, exit code, seconds), summary.md (the table)
#
# Steps: make the random 8B checkpoint (scripts/bench/make_random_llama.py, numpy only),
# gpu_reference.py (copy bandwidth, GEMM rate, HF transformers), then llmrt-bench:
# latency 128/128, latency 2048/128, latency 2048/32 with the prompt cached (--cached-prefix),
# prefill 2048, throughput 512 x 128/128 and
# 256 x 1000/1000. Every step runs under `timeout`, and the whole script keeps to
# DEADLINE_S so the summary is printed before a 600 s device call ends.
#
# Environment (defaults in brackets):
#   MODEL_DIR [/tmp/llama8b]  PRESET [8b]     checkpoint location and preset (reused when complete)
#   SKIP_REF=1                skip gpu_reference.py entirely (no floors then)
#   SKIP_HF=1                 gpu_reference.py without HF transformers (copy + GEMM only)
#   SKIP_LONG=1               skip throughput 256 x 1000/1000
#   ABLATE [0]                1 = "graphs gemv flash", or a list of switches to compare, each run with
#                             --cuda-tuning <switch>=off (graphs gemv flash pdl mma_decode half_activations)
#                             (also: waves<N>; fp16 = the main steps with --dtype float16)
#                             (and "overlap": the same steps with --overlap off)
#                             (mma_decode: decode at prompt 2048 and 256 x 1000/1000 on the CUDA-core kernel)
#                             (waves<N>: decode at prompt 2048 with --cuda-tuning split_waves=N)
#   PROFILE=1                 per-op GPU times (--cuda-tuning profile=on: graphs off)
#   TP_MAX_BATCH [512]  TP_MAX_NUM_TOKENS [8192]   throughput steps' --max-batch-size / --max-num-tokens
#   KV_FRACTION               --kv-cache-free-gpu-memory-fraction for every llmrt-bench step
#   BENCH_FLAGS               extra flags appended to every llmrt-bench command
#   DEADLINE_S [570]          budget of the whole script in seconds
#   T_CKPT [300] T_REF [240] T_LAT [120] T_PRE [90] T_TP [180] T_TP_LONG [300]   per-step limits (s)
set -u
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR OUT_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
out=$2
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bin/llmrt-bench
model=${MODEL_DIR:-/tmp/llama8b}
preset=${PRESET:-8b}
deadline=${DEADLINE_S:-570}
tp_batch=${TP_MAX_BATCH:-512}
tp_tokens=${TP_MAX_NUM_TOKENS:-8192}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
start=$SECONDS
reserve=20  # seconds kept for the summary
: >"$out/steps.tsv"
touch "$out/bench.jsonl"

note() { echo "[device_bench $((SECONDS - start))s] $*" >&2; }

# limit NAME WANTED: the seconds step NAME may take (its own limit, capped by what is
# left of the deadline); prints 0 when too little is left to start it.
limit() {
  local left=$((deadline - (SECONDS - start) - reserve))
  local t=$2
  ((t > left)) && t=$left
  ((t < 15)) && t=0
  echo "$t"
}

# run_step NAME LIMIT_S CMD...: stdout -> NAME.out, stderr -> NAME.log; records steps.tsv.
run_step() {
  local name=$1 want=$2
  shift 2
  local t
  t=$(limit "$name" "$want")
  if [[ $t -eq 0 ]]; then
    note "$name: SKIPPED (deadline: $((SECONDS - start)) s used of $deadline)"
    printf '%s\tskipped\t0\n' "$name" >>"$out/steps.tsv"
    return 99
  fi
  note "$name (limit ${t}s): $*"
  local t0=$SECONDS rc
  timeout -k 10 "$t" "$@" >"$out/$name.out" 2>"$out/$name.log"
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$out/steps.tsv"
  if [[ $rc -ne 0 ]]; then
    note "$name: FAILED (exit $rc$([[ $rc -eq 124 || $rc -eq 137 ]] && echo ', timed out')); last lines of $name.log:"
    tail -n 5 "$out/$name.log" >&2
  else
    note "$name: ok in $((SECONDS - t0)) s"
  fi
  return $rc
}

# bench NAME LIMIT_S ARGS...: one llmrt-bench run; its JSON line goes to bench.jsonl with
# "name" added (or an {"name", "error"} line when it failed).
bench() {
  local name=$1 want=$2
  shift 2
  local extra=()
  [[ -n ${KV_FRACTION:-} ]] && extra+=(--kv-cache-free-gpu-memory-fraction "$KV_FRACTION")
  # shellcheck disable=SC2206
  [[ -n ${BENCH_FLAGS:-} ]] && extra+=(${BENCH_FLAGS})
  run_step "$name" "$want" "$bin" "$@" --model "$model" --backend cuda "${extra[@]}"
  local rc=$?
  python3 - "$name" "$rc" "$out/$name.out" "$out/$name.log" >>"$out/bench.jsonl" <<'PY'
import json, sys
name, rc, out_path, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
line = None
try:
    lines = [l for l in open(out_path).read().splitlines() if l.startswith("{")]
    line = json.loads(lines[-1]) if lines else None
except Exception:
    line = None
if rc == 0 and line is not None:
    line["name"] = name
    print(json.dumps(line))
else:
    try:
        tail = open(log_path, errors="replace").read().splitlines()[-5:]
    except Exception:
        tail = []
    why = "skipped (deadline)" if rc == 99 else ("timed out" if rc in (124, 137) else f"exit {rc}")
    print(json.dumps({"name": name, "error": why, "log_tail": tail}))
PY
}

note "out: $out  model: $model  build: $build"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || note "nvidia-smi failed"

# 1. The random checkpoint (reused when a previous call completed it).
if [[ -f $model/.complete ]]; then
  note "checkpoint $model already complete"
  printf '%s\t%s\t%s\n' checkpoint reused 0 >>"$out/steps.tsv"
else
  rm -rf "$model"
  python3 -c 'import numpy' 2>/dev/null || note "python3 has no numpy: the checkpoint cannot be made"
  if run_step checkpoint "${T_CKPT:-300}" python3 "$here/make_random_llama.py" "$model" --preset "$preset"; then
    touch "$model/.complete"
    cat "$out/checkpoint.out" >&2
  fi
fi
if [[ ! -f $model/.complete ]]; then
  note "no checkpoint; stopping"
  exit 1
fi

# 2. Reference figures.
if [[ ${SKIP_REF:-0} != 1 ]]; then
  ref_flags=()
  [[ ${SKIP_HF:-0} == 1 ]] && ref_flags+=(--skip-hf)
  run_step reference "${T_REF:-240}" python3 "$here/gpu_reference.py" --model "$model" --out "$out/results.json" \
    "${ref_flags[@]}"
  # Its summary is on stderr.
  sed -n '/^device:/,$p' "$out/reference.log" >&2
fi

# 3. llmrt-bench.
if ! "$bin" --version >"$out/version.txt" 2>&1; then
  note "$bin does not run:"
  cat "$out/version.txt" >&2
  ldd "$bin" >&2 2>&1
else
  bench latency_128_128 "${T_LAT:-120}" latency --input-len 128 --output-len 128 --warmup 2 --iters 5
  bench latency_2048_128 "${T_LAT:-120}" latency --input-len 2048 --output-len 128 --warmup 2 --iters 5
  bench latency_2048_32_cached "${T_LAT:-120}" latency --input-len 2048 --output-len 32 --warmup 1 --iters 5 \
    --cached-prefix --enable-block-reuse
  bench prefill_2048 "${T_PRE:-90}" prefill --input-len 2048 --warmup 1 --iters 5
  bench throughput_512x128x128 "${T_TP:-180}" throughput --num-requests 512 --input-len 128 --output-len 128 \
    --max-batch-size "$tp_batch" --max-num-tokens "$tp_tokens"
  if [[ ${PROFILE:-0} == 1 ]]; then
    # Per-op GPU times (profile=on, graphs off): the table is in the step's .log.
    bench profile_decode_128 "${T_LAT:-120}" latency --input-len 128 --output-len 64 \
      --warmup 0 --iters 1 --cuda-tuning profile=on
    bench profile_prefill_2048 "${T_PRE:-90}" prefill --input-len 2048 --warmup 0 --iters 2 --cuda-tuning profile=on
  fi
  # Peers inside llmrt: the same step with one optimisation switched off (--cuda-tuning, see
  # docs/cuda-backend.md). ABLATE=1 is "graphs gemv flash"; ABLATE="pdl half_activations" names them.
  ablate=${ABLATE:-0}
  [[ $ablate == 1 ]] && ablate="graphs gemv flash"
  [[ $ablate == 0 ]] && ablate=""
  for off in $ablate; do
    case $off in
      graphs | gemv | pdl)
        bench "latency_128_128_no$off" "${T_LAT:-120}" latency --input-len 128 \
          --output-len 128 --warmup 2 --iters 3 --cuda-tuning "$off=off"
        [[ $off == pdl ]] && bench "latency_2048_128_no$off" "${T_LAT:-120}" latency \
          --input-len 2048 --output-len 128 --warmup 2 --iters 3 --cuda-tuning "$off=off"
        ;;
      flash | half_activations)
        bench "prefill_2048_no$off" "${T_PRE:-90}" prefill --input-len 2048 --warmup 1 \
          --iters 3 --cuda-tuning "$off=off"
        ;;
      mma_decode)  # the CUDA-core decode attention kernel instead of the tensor-core one
        bench "latency_2048_128_no$off" "${T_LAT:-120}" latency --input-len 2048 \
          --output-len 128 --warmup 2 --iters 3 --cuda-tuning "$off=off"
        [[ ${SKIP_LONG:-0} != 1 ]] && bench "throughput_256x1000x1000_no$off" \
          "${T_TP_LONG:-300}" throughput --num-requests 256 --input-len 1000 --output-len 1000 \
          --max-batch-size "$tp_batch" --max-num-tokens "$tp_tokens" --cuda-tuning "$off=off"
        ;;
      overlap)  # overlap scheduling off: step N+1 is prepared only once step N's tokens are back
        bench latency_128_128_nooverlap "${T_LAT:-120}" latency --input-len 128 --output-len 128 --warmup 2 \
          --iters 3 --overlap off
        bench throughput_512x128x128_nooverlap "${T_TP:-180}" throughput --num-requests 512 --input-len 128 \
          --output-len 128 --max-batch-size "$tp_batch" --max-num-tokens "$tp_tokens" --overlap off
        [[ ${SKIP_LONG:-0} != 1 ]] && bench throughput_256x1000x1000_nooverlap "${T_TP_LONG:-300}" throughput \
          --num-requests 256 --input-len 1000 --output-len 1000 --max-batch-size "$tp_batch" \
          --max-num-tokens "$tp_tokens" --overlap off
        ;;
      fp16)  # the same checkpoint computed in fp16 (--dtype float16: fp16 weights, products and cache)
        bench latency_128_128_fp16 "${T_LAT:-120}" latency --input-len 128 --output-len 128 --warmup 2 --iters 3 \
          --dtype float16
        bench latency_2048_128_fp16 "${T_LAT:-120}" latency --input-len 2048 --output-len 128 --warmup 2 \
          --iters 3 --dtype float16
        bench prefill_2048_fp16 "${T_PRE:-90}" prefill --input-len 2048 --warmup 1 --iters 3 --dtype float16
        bench throughput_512x128x128_fp16 "${T_TP:-180}" throughput --num-requests 512 --input-len 128 \
          --output-len 128 --max-batch-size "$tp_batch" --max-num-tokens "$tp_tokens" --dtype float16
        ;;
      waves[0-9]*)  # decode attention key splits aimed at N CTAs per SM instead of the default
        bench "latency_2048_128_$off" "${T_LAT:-120}" latency --input-len 2048 \
          --output-len 128 --warmup 2 --iters 3 --cuda-tuning "split_waves=${off#waves}"
        ;;
      *) note "ABLATE: unknown switch $off" ;;
    esac
  done
  if [[ ${SKIP_LONG:-0} != 1 ]]; then
    bench throughput_256x1000x1000 "${T_TP_LONG:-300}" throughput --num-requests 256 --input-len 1000 \
      --output-len 1000 --max-batch-size "$tp_batch" --max-num-tokens "$tp_tokens"
  fi
fi

# 4. The table.
ref_arg=()
[[ -f $out/results.json ]] && ref_arg=("$out/results.json")
python3 "$here/summarize.py" "$out/bench.jsonl" "${ref_arg[@]}" >"$out/summary.md" 2>"$out/summarize.log" ||
  note "summarize.py failed: $(tail -n 3 "$out/summarize.log")"
echo
cat "$out/summary.md"
echo
echo "steps (name, exit code, seconds):"
cat "$out/steps.tsv"
note "done in $((SECONDS - start)) s"
