#!/usr/bin/env bash
# Tensor parallelism over several GPUs of one host, in one device call: a random Llama-3 checkpoint
# made in the call (8B or 70B shapes), llmrt-bench at each tensor-parallel size asked for, and what
# the floors need — the copy bandwidth of one GPU and the all-reduce latency of the ranks
# (llmrt_collectives_bench: custom kernels against NCCL). scripts/bench/summarize_tp.py turns the
# output into docs/perf.md's tables.
#
# usage: scripts/bench/device_multi_gpu_bench.sh BUILD_DIR OUT_DIR
#   BUILD_DIR  an unpacked build folder holding bin/llmrt-bench and bin/llmrt_collectives_bench
#   OUT_DIR    bench.jsonl (llmrt-bench lines with "name", "preset", "tp"), collectives.jsonl,
#              copy.json, topo.txt, <name>.log
# Environment (defaults in brackets):
#   PRESET [8b]            make_random_llama.py preset (8b, 70b)
#   TPS ["1 2"]            tensor-parallel sizes
#   RUNS ["latency tp128 tp1000"]   latency: batch 1, 128/128; tp128: 512 x 128/128; tp1000: 256 x 1000/1000
#   CKPT_DIR [/tmp/ckpt]   where the checkpoint goes; with TMPFS=1 a tmpfs of TMPFS_SIZE [160g] is
#                          mounted there first (the 70B checkpoint is larger than some machines' disks)
#   COLLECTIVES [1]        run llmrt_collectives_bench for each tensor-parallel size above 1
#   RUN_TIMEOUT [300]      seconds per llmrt-bench run;  BENCH_FLAGS  appended to every run
source "$(dirname "$0")/device_args.sh"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
nccl_dir=${NCCL_LIB_DIR:-$(dirname "$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -n 1)")}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
preset=${PRESET:-8b}
dir=${CKPT_DIR:-/tmp/ckpt}
read -r -a extra <<<"${BENCH_FLAGS:-}"
start=$SECONDS
note() { echo "[multi_gpu_bench $((SECONDS - start))s] $*" >&2; }
touch "$out/bench.jsonl" "$out/collectives.jsonl"
nvidia-smi topo -m >"$out/topo.txt" 2>&1
nvidia-smi --query-gpu=index,name,memory.total --format=csv >>"$out/topo.txt" 2>&1
note "libnccl.so.2 from ${nccl_dir:-nowhere}; $(nvidia-smi -L | wc -l) GPUs"

# One GPU's copy bandwidth (bytes read + written), the decode floors' divisor.
python3 - >"$out/copy.json" <<'PY'
import json, torch
x = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda")
y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
torch.cuda.synchronize(); s.record()
for _ in range(20): y.copy_(x)
e.record(); torch.cuda.synchronize()
print(json.dumps({"copy_gbs": 2 * x.numel() * 2 * 20 / (s.elapsed_time(e) * 1e-3) / 1e9,
                  "gpu": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count()}))
PY
note "copy: $(cat "$out/copy.json")"

if [[ ${COLLECTIVES:-1} == 1 ]]; then
  for tp in ${TPS:-1 2}; do
    ((tp > 1)) || continue
    note "collectives at $tp ranks"
    timeout -k 10 120 "$build/bin/llmrt_collectives_bench" --ranks "$tp" >>"$out/collectives.jsonl" \
      2>"$out/collectives_$tp.log" || note "collectives at $tp ranks: exit $?"
  done
fi

if [[ ${TMPFS:-0} == 1 ]]; then
  mkdir -p "$dir" && mount -t tmpfs -o "size=${TMPFS_SIZE:-160g}" tmpfs "$dir" || note "cannot mount a tmpfs on $dir"
fi
note "making $dir ($preset)"
python3 "$here/make_random_llama.py" "$dir" --preset "$preset" >"$out/make.log" 2>&1 || { tail -n 5 "$out/make.log" >&2; exit 1; }
note "$(tail -n 1 "$out/make.log")"

bench() {
  local name=$1 tp=$2
  shift 2
  note "$name: $*"
  local t0=$SECONDS rc=0
  timeout -k 10 "${RUN_TIMEOUT:-300}" "$bin" "$@" --model "$dir" --backend cuda --tensor-parallel-size "$tp" \
    "${extra[@]}" >"$out/$name.out" 2>"$out/$name.log" || rc=$?
  note "$name: exit $rc in $((SECONDS - t0)) s"
  python3 "$here/bench_line.py" "$rc" "$out/$name.out" "$out/$name.log" "name=$name" "preset=$preset" "tp=$tp" \
    >>"$out/bench.jsonl"
}

for tp in ${TPS:-1 2}; do
  for run in ${RUNS:-latency tp128 tp1000}; do
    case $run in
      latency) bench "${preset}_tp${tp}_latency" "$tp" latency --input-len 128 --output-len 128 --warmup 2 --iters 5 ;;
      tp128) bench "${preset}_tp${tp}_512x128x128" "$tp" throughput --num-requests 512 --max-batch-size 512 \
        --max-num-tokens 8192 --input-len 128 --output-len 128 --warmup 1 ;;
      tp1000) bench "${preset}_tp${tp}_256x1000x1000" "$tp" throughput --num-requests 256 --max-batch-size 512 \
        --max-num-tokens 8192 --input-len 1000 --output-len 1000 ;;
    esac
  done
done
cp "$dir/config.json" "$out/config_$preset.json"
rm -rf "${dir:?}"/*
