#!/usr/bin/env bash
# The tensor-parallel proofs on a machine of several GPUs, in one device call (run from the
# repository root: the tests read tests/data and models/ there):
#   - the CUDA collectives between separate GPUs (custom kernels, NCCL, abort);
#   - the engine at 2 and 4 ranks against one rank: every golden architecture in float32, the
#     bundled model batched / chunked / reused / paused, host offload, cancellation;
#   - compute-sanitizer memcheck on a short TP=2 generation (llmrt-bench latency on the bundled model).
#
# usage: scripts/bench/device_multi_gpu_tests.sh BUILD_DIR OUT_DIR
#   BUILD_DIR  an unpacked build folder: bin/llmrt-bench, tests/backend_ops_test,
#              tests/tensor_parallel_engine_test (CUDA build)
#   OUT_DIR    <step>.log, steps.tsv (step, exit code, seconds)
# The test binaries were built with this checkout's absolute path for tests/data: LLMRT_TEST_DATA
# is not read from the environment, so BUILD_TREE (the build machine's checkout path, default
# /work/main) is linked to the current directory when it does not exist.
source "$(dirname "$0")/device_args.sh"
export NCCL_NVLS_ENABLE=0
nccl_dir=${NCCL_LIB_DIR:-$(dirname "$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -n 1)")}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tree=${BUILD_TREE:-/work/main}
[[ -e $tree ]] || { mkdir -p "$(dirname "$tree")" && ln -s "$PWD" "$tree"; }
start=$SECONDS
: >"$out/steps.tsv"
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc=0
  echo "[multi_gpu_tests $((SECONDS - start))s] $name: $*" >&2
  timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$out/steps.tsv"
  echo "[multi_gpu_tests $((SECONDS - start))s] $name: exit $rc in $((SECONDS - t0)) s" >&2
  grep -E '^\[  (PASSED|FAILED|  SKIPPED) ' "$out/$name.log" | sort | uniq -c | head -n 20 >&2
}
nvidia-smi -L >&2
# Ranks sharing a GPU (a machine of one) need eager kernel loading; separate GPUs run as users do.
(($(nvidia-smi -L | wc -l) < 2)) && export CUDA_MODULE_LOADING=EAGER
step collectives 120 "$build/tests/backend_ops_test" --gtest_filter='CudaCollectives.*'
step engine 300 "$build/tests/tensor_parallel_engine_test" --gtest_filter='*Cuda*:*Golden*'
step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin" latency --model models/llmrt-tiny \
  --backend cuda --tensor-parallel-size 2 --input-len 24 --output-len 16 --warmup 0 --iters 1
tail -n 5 "$out/memcheck.log" >&2
