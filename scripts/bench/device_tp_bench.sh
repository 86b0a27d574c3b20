#!/usr/bin/env bash
# Tensor-parallel collectives on one GPU, in one device call, on a random Llama-3-8B-shaped
# checkpoint: what TP=1 costs when its collectives run through a communicator (a group of one:
# --cuda-tuning tp1_collectives=on, with the custom kernels, then with NCCL) against the plain
# path, for batch-1 decode and 512 x 128/128. (A group of one exchanges nothing: what is measured
# is the tensor-parallel step structure, the fused norm chain split around the all-reduces.)
#
# usage: scripts/bench/device_tp_bench.sh BUILD_DIR OUT_DIR
#   BUILD_DIR  an unpacked build folder holding bin/llmrt-bench (CUDA build)
#   OUT_DIR    bench.jsonl (llmrt-bench lines with "name"), <name>.log
# Environment: RUN_TIMEOUT (seconds per run, 300); BENCH_FLAGS (appended to every llmrt-bench command); ROUNDS (latency rounds, 2);
# NCCL_LIB_DIR (where
# libnccl.so.2 is; default: found under python's site-packages).
source "$(dirname "$0")/device_args.sh"
nccl_dir=${NCCL_LIB_DIR:-$(dirname "$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -n 1)")}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
export PYTHONUNBUFFERED=1
read -r -a extra <<<"${BENCH_FLAGS:-}"
start=$SECONDS
note() { echo "[device_tp_bench $((SECONDS - start))s] $*" >&2; }
note "libnccl.so.2 from ${nccl_dir:-nowhere}"
dir=/tmp/tp_llama8b
touch "$out/bench.jsonl"

bench() {
  local name=$1
  shift
  note "$name: $*"
  local t0=$SECONDS rc=0
  timeout -k 10 "${RUN_TIMEOUT:-300}" "$bin" "$@" --model "$dir" --backend cuda "${extra[@]}" >"$out/$name.out" 2>"$out/$name.log" || rc=$?
  note "$name: exit $rc in $((SECONDS - t0)) s"
  python3 "$here/bench_line.py" "$rc" "$out/$name.out" "$out/$name.log" "name=$name" >>"$out/bench.jsonl"
}

note "making $dir"
python3 "$here/make_random_llama.py" "$dir" --preset 8b >"$out/make.log" 2>&1 || { tail -n 5 "$out/make.log" >&2; exit 1; }
declare -A modes=([plain]="" [custom]="tp1_collectives=on" [nccl]="tp1_collectives=on,custom_all_reduce=off")
for round in $(seq 1 "${ROUNDS:-2}"); do  # (interleaved: drift shows as a difference between rounds)
  for m in plain custom nccl; do
    tuning=()
    [[ -n ${modes[$m]} ]] && tuning=(--cuda-tuning "${modes[$m]}")
    bench "latency_${m}_${round}" latency --input-len 128 --output-len 128 --warmup 2 --iters 5 "${tuning[@]}"
  done
done
for m in plain custom nccl; do
  tuning=()
  [[ -n ${modes[$m]} ]] && tuning=(--cuda-tuning "${modes[$m]}")
  bench "throughput_${m}" throughput --num-requests 512 --max-batch-size 512 --max-num-tokens 8192 \
    --input-len 128 --output-len 128 --warmup 1 "${tuning[@]}"
done
rm -rf "$dir"
