#!/usr/bin/env bash
# Where the FP8 products' time goes in compute-bound steps, in one device call: cuBLASLt's FP8 GEMM
# forms against bf16 on the Llama-3-8B shapes (fp8_gemm_modes.cu), then per-op GPU times
# (--cuda-tuning profile=on) of 512 x 128/128 and of a 2048-token prefill, FP8 then bf16 products
# (QUANTS), on a random Llama-3-8B-shaped checkpoint. FUSED_AB=1 first times FP8 with the
# products' inputs quantized by the norms and SiLU·mul (fused_quantization, the default) and by
# each product (off): batch-1 latency and 512 x 128/128. Each result is written as it comes, so a
# call cut short keeps what ran. PREFILL=0 leaves the prefill profiles out; LONG=1 adds one of
# 256 x 1000/1000 per QUANTS entry.
# usage: scripts/bench/device_fp8_profile.sh BUILD_DIR OUT_DIR [GEMM_MODES_BINARY]
source "$(dirname "$0")/device_args.sh"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$SECONDS
note() { echo "[device_fp8_profile $((SECONDS - start))s] $*" >&2; }
modes=${3:-}
if [[ -n $modes ]]; then
  note "gemm modes"
  timeout -k 5 90 "$modes" >"$out/gemm_modes.txt" 2>&1 || note "gemm modes: exit $?"
fi
dir=${MODEL_DIR:-/tmp/fp8_llama8b}  # MODEL_DIR: an 8B checkpoint made earlier in the call (kept)
if [[ ! -f $dir/config.json ]]; then
  note "making $dir"
  python3 "$here/make_random_llama.py" "$dir" --preset 8b >"$out/make.log" 2>&1 || { tail -n 5 "$out/make.log" >&2; exit 1; }
fi
run() {  # NAME TIMEOUT ARGS...: one llmrt-bench run into NAME.out / NAME.log
  local name=$1 limit=$2
  shift 2
  note "$name"
  timeout -k 10 "$limit" "$bin" "$@" --model "$dir" --backend cuda >"$out/$name.out" 2>"$out/$name.log" ||
    note "$name: exit $?"
}
tput=(throughput --num-requests 512 --max-batch-size 512 --max-num-tokens 8192 --input-len 128 --output-len 128)
if [[ ${FUSED_AB:-0} == 1 ]]; then
  for t in on off; do
    run "latency_fp8_fused_$t" 120 latency --quantization fp8 --input-len 128 --output-len 128 --warmup 2 --iters 5 \
      --cuda-tuning "fused_quantization=$t"
    run "throughput_fp8_fused_$t" 200 "${tput[@]}" --quantization fp8 --warmup 1 --cuda-tuning "fused_quantization=$t"
  done
fi
for q in ${QUANTS:-fp8 none}; do
  run "profile_throughput_$q" 300 "${tput[@]}" --quantization "$q" --warmup 0 --cuda-tuning profile=on
  if [[ ${PREFILL:-1} == 1 ]]; then
    run "profile_prefill_$q" 200 prefill --quantization "$q" --input-len 2048 --warmup 1 --iters 2 --cuda-tuning profile=on
  fi
  if [[ ${LONG:-0} == 1 ]]; then
    run "profile_long_$q" 300 throughput --num-requests 256 --max-batch-size 512 --max-num-tokens 8192 \
      --input-len 1000 --output-len 1000 --quantization "$q" --warmup 0 --cuda-tuning profile=on
  fi
done
[[ -n ${MODEL_DIR:-} ]] || rm -rf "$dir"
note "done"
