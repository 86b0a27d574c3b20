#!/usr/bin/env bash
# Sampling on the GPU vs on the host, on the GPU machine (one device call):
#   usage: scripts/bench/sampling_bench.sh BUILD_DIR OUT_DIR
# Makes the random Llama-3-8B-shaped checkpoint (as device_bench.sh does) unless
# MODEL_DIR holds one, then runs llmrt-bench latency 128/128 and throughput
# 512 x 128/128 greedy, sampled on the GPU (temperature 0.8, top-k 50, top-p 0.95)
# and sampled on the host (--cuda-tuning sampling=off). One JSON line per run
# (with "name") goes to OUT_DIR/sampling_bench.jsonl.
set -u
build=$(cd "$1" && pwd) || exit 2
out=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
model=${MODEL_DIR:-/tmp/llama8b}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[[ -f $model/config.json ]] || python3 "$here/make_random_llama.py" "$model" --preset 8b >&2 || exit 3
SAMPLED="--temperature 0.8 --top-k 50 --top-p 0.95"
run() {  # NAME ARGS...
  local name=$1
  shift
  echo "== $name" >&2
  local line
  line=$(timeout 240 "$build/bin/llmrt-bench" "$@" --model "$model" --backend cuda 2>"$out/$name.log" |
         grep '^{' | tail -1)
  python3 -c 'import json,sys; d=json.loads(sys.argv[2]) if sys.argv[2] else {"error": "failed"}; d["name"]=sys.argv[1]; print(json.dumps(d))' \
    "$name" "$line" | tee -a "$out/sampling_bench.jsonl" | cut -c1-400
}
run lat_greedy latency --input-len 128 --output-len 128 --warmup 2 --iters 3
run lat_sampled_gpu latency --input-len 128 --output-len 128 --warmup 2 --iters 3 $SAMPLED
run lat_sampled_host latency --input-len 128 --output-len 128 --warmup 2 --iters 3 $SAMPLED --cuda-tuning sampling=off
run tp_greedy throughput --num-requests 512 --input-len 128 --output-len 128 --max-batch-size 512
run tp_sampled_gpu throughput --num-requests 512 --input-len 128 --output-len 128 --max-batch-size 512 $SAMPLED
run tp_sampled_host throughput --num-requests 512 --input-len 128 --output-len 128 \
  --max-batch-size 512 $SAMPLED --cuda-tuning sampling=off
