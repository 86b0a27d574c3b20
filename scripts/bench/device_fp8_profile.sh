#!/usr/bin/env bash
# Where the FP8 products' time goes in compute-bound steps, in one device call: cuBLASLt's FP8 GEMM
# forms against bf16 on the Llama-3-8B shapes (fp8_gemm_modes.cu), then per-op GPU times
# (--cuda-tuning profile=on) of a 2048-token prefill and of 512 x 128/128, bf16 and FP8 products,
# on a random Llama-3-8B-shaped checkpoint. FUSED_AB=1 adds timing pairs (below).
# usage: scripts/bench/device_fp8_profile.sh BUILD_DIR OUT_DIR [GEMM_MODES_BINARY]
source "$(dirname "$0")/device_args.sh"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$SECONDS
note() { echo "[device_fp8_profile $((SECONDS - start))s] $*" >&2; }
modes=${3:-}
if [[ -n $modes ]]; then
  note "gemm modes"
  timeout -k 5 120 "$modes" >"$out/gemm_modes.txt" 2>&1 || note "gemm modes: exit $?"
fi
dir=/tmp/fp8_llama8b
note "making $dir"
python3 "$here/make_random_llama.py" "$dir" --preset 8b >"$out/make.log" 2>&1 || { tail -n 5 "$out/make.log" >&2; exit 1; }
for q in ${QUANTS:-none fp8}; do
  note "prefill $q"
  timeout -k 10 200 "$bin" prefill --model "$dir" --backend cuda --quantization "$q" --input-len 2048 --warmup 1 \
    --iters 2 --cuda-tuning profile=on >"$out/prefill_$q.out" 2>"$out/prefill_$q.log" || note "exit $?"
  note "throughput $q"
  timeout -k 10 300 "$bin" throughput --model "$dir" --backend cuda --quantization "$q" --num-requests 512 \
    --max-batch-size 512 --max-num-tokens 8192 --input-len 128 --output-len 128 --warmup 0 \
    --cuda-tuning profile=on >"$out/throughput_$q.out" 2>"$out/throughput_$q.log" || note "exit $?"
done
# Timing pairs without the profiler (FUSED_AB=1): FP8 with the products' inputs quantized by the
# norms and SiLU·mul (fused_quantization, the default) and by each product (off).
if [[ ${FUSED_AB:-0} == 1 ]]; then
  for t in fused_quantization=on fused_quantization=off; do
    note "latency fp8 $t"
    timeout -k 10 120 "$bin" latency --model "$dir" --backend cuda --quantization fp8 --input-len 128 --output-len 128 \
      --warmup 2 --iters 5 --cuda-tuning "$t" >"$out/latency_fp8_$t.out" 2>"$out/latency_fp8_$t.log" || note "exit $?"
    note "throughput fp8 $t"
    timeout -k 10 200 "$bin" throughput --model "$dir" --backend cuda --quantization fp8 --num-requests 512 \
      --max-batch-size 512 --max-num-tokens 8192 --input-len 128 --output-len 128 --warmup 1 --cuda-tuning "$t" \
      >"$out/throughput_fp8_$t.out" 2>"$out/throughput_fp8_$t.log" || note "exit $?"
  done
fi
rm -rf "$dir"
note "done"
