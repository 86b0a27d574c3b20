#!/usr/bin/env bash
# Runs on the GPU machine (the device tool), from the repository root, with the
# build outputs carried in .carry-cuda/carry.tar.xz (bin/llmrt, backend_ops_test,
# models/stories260K-hf). Writes logs under $OUT. Prepare here with:
#   scripts/cuda/stage_carry.sh <build dir>
set -u
C=/tmp/llmrt-carry
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" "$C"
tar xJf .carry-cuda/carry.tar.xz -C "$C" || exit 2
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  ls -l /usr/local/cuda/lib64/libcublas.so* 2>&1 | head -3
  ldd $C/bin/llmrt | grep -E "cublas|not found"
} 2>&1 | tee "$OUT/env.txt"

echo "== backend_ops_test"
# Every op in six dtype modes, and in bf16 with one CudaTuning switch moved (the Tuned/* modes:
# scalar norm / RoPE kernels, RoPE outside the decode attention kernel, the matrix-vector kernel up
# to 8 rows with the norm split up to 8 rows or off) — in process, no variables.
$C/backend_ops_test --gtest_brief=0 > "$OUT/ops.log" 2>&1
echo "backend_ops_test rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|tests ran" "$OUT/ops.log" | head -40

echo "== device_sampling_test"
# The cuda_no_rowgroup mode: the one-CTA sampling kernel on the few-row cases (pending tokens included).
$C/device_sampling_test --gtest_brief=0 > "$OUT/sampling.log" 2>&1
echo "device_sampling_test rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|tests ran|us per step" "$OUT/sampling.log" | head -40

echo "== executor proofs on the GPU (policies, chunking, reuse, offload, cancellation, soak)"
# The CPU's executor tests, with the engine on the CUDA backend (tests/executor/executor_test_util.h).
for dt in float32 bfloat16 float16; do
  LLMRT_SHARED_TESTDATA=$C LLMRT_TEST_DATA=tests/data LLMRT_TEST_BACKEND=cuda LLMRT_TEST_DTYPE=$dt $C/executor_tests > "$OUT/executor_$dt.log" 2>&1
  echo "executor_tests cuda $dt rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|tests ran" "$OUT/executor_$dt.log" | head -20
done
# Overlap scheduling is on by default with CUDA ("auto"): the same proofs step by step.
LLMRT_SHARED_TESTDATA=$C LLMRT_TEST_DATA=tests/data LLMRT_TEST_BACKEND=cuda LLMRT_TEST_DTYPE=bfloat16 LLMRT_TEST_OVERLAP=off $C/executor_tests \
  > "$OUT/executor_bfloat16_nooverlap.log" 2>&1
echo "executor_tests cuda bfloat16 overlap off rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|tests ran" "$OUT/executor_bfloat16_nooverlap.log" | head -20

echo "== end to end"
python3 scripts/cuda/device_e2e.py $C/bin/llmrt tests/data/golden $C/models/stories260K-hf "$OUT" > "$OUT/e2e.log" 2>&1
echo "device_e2e rc=$?"; grep -E "FAIL|failures" "$OUT/e2e.log" | head -40
# A 6000-token prompt on a random head_dim-128 model: float32 vs HF and the CPU, bf16 top-1, the
# one-kernel RoPE decode path vs the two kernels at 6000+ keys.
python3 scripts/cuda/device_long_e2e.py $C/bin/llmrt "$OUT" > "$OUT/long_e2e.log" 2>&1
echo "device_long_e2e rc=$?"; grep -E "^(ok|FAIL|info)|failures" "$OUT/long_e2e.log" | head -20

SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
SAN=${SAN:-/usr/local/cuda/bin/compute-sanitizer}
if [[ -x $SAN && -z "${SKIP_SANITIZER:-}" ]]; then
  echo "== compute-sanitizer memcheck"
  for dt in float32 bfloat16 float16; do
    timeout 240 $SAN --tool memcheck --leak-check full --error-exitcode 9 $C/bin/llmrt generate --model $C/models/stories260K-hf \
      --prompt "Once upon a time" --max-tokens 24 --backend cuda --dtype $dt --temperature 0 --overlap on \
      > "$OUT/memcheck_$dt.log" 2>&1
    echo "memcheck generate $dt rc=$?"; grep -E "ERROR SUMMARY|LEAK SUMMARY" "$OUT/memcheck_$dt.log"
  done
  # Steps smaller than a KV block (this once hung, with or without the sanitizer).
  timeout 240 $SAN --tool memcheck --error-exitcode 9 $C/bin/llmrt generate --model $C/models/stories260K-hf \
    --prompt "Once upon a time" --max-tokens 24 --backend cuda --tokens-per-block 16 --kv-cache-max-tokens 2048 \
    --max-num-tokens 3 > "$OUT/memcheck_small_steps.log" 2>&1
  echo "memcheck generate small steps rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck_small_steps.log"
  timeout 240 $SAN --tool memcheck --error-exitcode 9 $C/backend_ops_test --gtest_filter='*/bf16:*/fp16:*/bf16_weights_fp16_kv' > "$OUT/memcheck_ops.log" 2>&1
  echo "memcheck ops(bf16, fp16) rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck_ops.log" | head
  # Released KV blocks (kNoKvBlock = -1) below the attention window: no kernel may load them.
  timeout 240 $SAN --tool memcheck --error-exitcode 9 $C/backend_ops_test --gtest_filter='*WindowedAttention*' \
    > "$OUT/memcheck_window.log" 2>&1
  echo "memcheck windowed attention rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck_window.log" | head
  timeout 240 $SAN --tool memcheck --error-exitcode 9 $C/device_sampling_test \
    --gtest_filter='*Penalties*/cuda:*BadRows*/cuda:*ManySeeds*/cuda:*Pending*/cuda:*Async*/cuda:*FewRows*/cuda' > "$OUT/memcheck_sampling.log" 2>&1
  echo "memcheck sampling rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck_sampling.log" | head
  # A sampled generation with logprobs (batch 1: the row-group sampling kernel, overlapped).
  timeout 240 $SAN --tool memcheck --leak-check full --error-exitcode 9 $C/bin/llmrt generate --model $C/models/stories260K-hf \
    --prompt "Once upon a time" --max-tokens 24 --backend cuda --temperature 0.8 --top-p 0.9 --logprobs 2 \
    > "$OUT/memcheck_sampled.log" 2>&1
  echo "memcheck generate sampled rc=$?"; grep -E "ERROR SUMMARY|LEAK SUMMARY" "$OUT/memcheck_sampled.log"
elif [[ -n "${SKIP_SANITIZER:-}" ]]; then
  echo "compute-sanitizer skipped (SKIP_SANITIZER)"
else
  echo "no compute-sanitizer at $SAN"
fi
