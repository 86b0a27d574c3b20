#!/usr/bin/env bash
# Packs what scripts/bench/device_multi_gpu_tests.sh and device_multi_gpu_bench.sh need into
# .carry-cuda/carry.tar.xz (git-ignored; pass .carry-cuda in the device tool's `carry`):
# bin/llmrt-bench, bin/llmrt_collectives_bench, tests/backend_ops_test,
# tests/tensor_parallel_engine_test and lib/libsentencepiece.so.0. The binaries share their CUDA
# code, so one solid xz stream with a large window keeps the archive near 10 MB.
# PEER=<an llmrt-bench binary> adds it as bin/llmrt-bench-peer (scripts/bench/device_ab.sh's peer).
# Usage: stage_tp_carry.sh <build dir>
set -eu
B=${1:?build dir}
root=$(cd "$(dirname "$0")/../.." && pwd)
C=$root/.carry-cuda
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/tests" "$stage/lib" "$C"
cp "$B/bin/llmrt-bench" "$B/bin/llmrt_collectives_bench" "$stage/bin/"
[[ -n ${PEER:-} ]] && cp "$PEER" "$stage/bin/llmrt-bench-peer"
cp "$B/tests/backend/backend_ops_test" "$B/tests/runtime/tensor_parallel_engine_test" "$stage/tests/"
sp=$(ldd "$B/bin/llmrt-bench" | awk '/libsentencepiece/ {print $3}')
[[ -n $sp ]] && cp -L "$sp" "$stage/lib/"
strip "$stage"/bin/* "$stage"/tests/*
rm -f "$C/carry.tar.xz"
(cd "$stage" && tar cf - . | xz -9e -T2 >"$C/carry.tar.xz")
du -sh "$C/carry.tar.xz"
