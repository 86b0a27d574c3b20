#!/usr/bin/env bash
# Batch-1 decode (and, for the MoE preset, batched decode and throughput) of 7B-class random
# checkpoints of other architectures against the bandwidth floor; run on the GPU machine inside
# one device call. docs/perf.md's "Other architectures" table comes from its summary.md.
#
# usage: scripts/bench/device_arch_bench.sh BUILD_DIR OUT_DIR PRESET...
#   BUILD_DIR  an unpacked build folder holding bin/llmrt-bench (CUDA build)
#   OUT_DIR    ckpt.jsonl (make_random_arch.py's lines), bench.jsonl (llmrt-bench lines with
#              "name" and "preset"), results.json (gpu_reference.py --skip-hf: copy bandwidth),
#              <preset>_<step>.log, summary.md (scripts/bench/summarize_arch.py)
#   PRESET     llama-8b (make_random_llama.py --preset 8b, the reference) or a make_random_arch.py
#              preset (gpt2-7b gptj-6b neox-7b falcon-7b mixtral-8l)
# Each checkpoint is made under /tmp, benchmarked, then deleted (the disk holds one at a time).
# Steps: latency --input-len 128 --output-len 128 --warmup 2 --iters 5; for mixtral-8l also
# throughput 64 x 128/128 (--max-batch-size 64) and 512 x 128/128 (--max-batch-size 512
# --max-num-tokens 8192). Environment: BENCH_FLAGS (appended to every llmrt-bench command);
# PEER_FLAGS (when set, each latency run again with these flags appended, as latency_128_128_peer:
# e.g. "--cuda-tuning mma_decode=off" for the kernel a change replaced); PROFILE=1 (also a per-op
# GPU time table: latency 128/32 with --cuda-tuning profile=on, in <preset>_profile_decode.log).
min_args=3 usage="BUILD_DIR OUT_DIR PRESET..." source "$(dirname "$0")/device_args.sh"
shift 2
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
read -r -a extra <<<"${BENCH_FLAGS:-}"
start=$SECONDS
note() { echo "[device_arch_bench $((SECONDS - start))s] $*" >&2; }
touch "$out/bench.jsonl" "$out/ckpt.jsonl"

# bench PRESET NAME ARGS...: one llmrt-bench run; its JSON line (or an error line) to bench.jsonl.
bench() {
  local preset=$1 name=$2
  shift 2
  note "$preset $name: $*"
  local t0=$SECONDS rc=0
  timeout -k 10 240 "$bin" "$@" --model "$dir" --backend cuda "${extra[@]}" \
    >"$out/${preset}_$name.out" 2>"$out/${preset}_$name.log" || rc=$?
  note "$preset $name: exit $rc in $((SECONDS - t0)) s"
  python3 "$here/bench_line.py" "$rc" "$out/${preset}_$name.out" "$out/${preset}_$name.log" "name=$name" "preset=$preset" >>"$out/bench.jsonl"
}

ref_done=0
for preset in "$@"; do
  dir=/tmp/arch_$preset
  note "making $preset in $dir"
  t0=$SECONDS
  if [[ $preset == llama-8b ]]; then
    python3 "$here/make_random_llama.py" "$dir" --preset 8b >"$out/${preset}_make.log" 2>&1 &&
      python3 "$here/make_random_arch.py" "$dir" --measure "$preset" >>"$out/ckpt.jsonl"
  else
    python3 "$here/make_random_arch.py" "$dir" --preset "$preset" 2>"$out/${preset}_make.log" >>"$out/ckpt.jsonl"
  fi
  rc=$?
  note "$preset made: exit $rc in $((SECONDS - t0)) s"
  if [[ $rc -ne 0 ]]; then
    tail -n 5 "$out/${preset}_make.log" >&2
    rm -rf "$dir"
    continue
  fi
  if [[ $ref_done -eq 0 ]]; then
    python3 "$here/gpu_reference.py" --model "$dir" --out "$out/results.json" --skip-hf >"$out/reference.log" 2>&1
    ref_done=1
  fi
  bench "$preset" latency_128_128 latency --input-len 128 --output-len 128 --warmup 2 --iters 5
  if [[ -n ${PEER_FLAGS:-} ]]; then
    read -r -a peer <<<"$PEER_FLAGS"
    bench "$preset" latency_128_128_peer latency --input-len 128 --output-len 128 --warmup 2 --iters 5 "${peer[@]}"
  fi
  if [[ ${PROFILE:-0} == 1 ]]; then
    bench "$preset" profile_decode latency --input-len 128 --output-len 32 --warmup 0 --iters 1 \
      --cuda-tuning profile=on
  fi
  if [[ $preset == mixtral-* ]]; then
    bench "$preset" throughput_64x128 throughput --num-requests 64 --max-batch-size 64 --input-len 128 \
      --output-len 128 --warmup 1
    bench "$preset" throughput_512x128 throughput --num-requests 512 --max-batch-size 512 \
      --max-num-tokens 8192 --input-len 128 --output-len 128 --warmup 1
  fi
  rm -rf "$dir"
done
python3 "$here/summarize_arch.py" "$out" | tee "$out/summary.md"
