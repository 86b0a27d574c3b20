#!/usr/bin/env bash
# Packs what scripts/cuda/device_check.sh needs into .carry-cuda/carry.tar.xz (git-ignored;
# pass it in the device tool's `carry`). Usage: stage_carry.sh <build dir>
set -eu
B=${1:?build dir}
root=$(cd "$(dirname "$0")/../.." && pwd)
C=$root/.carry-cuda
rm -rf "$C"; mkdir -p "$C/bin" "$C/models"
cp "$B/bin/llmrt" "$C/bin/"
[[ -x "$B/bin/llmrt-bench" ]] && cp "$B/bin/llmrt-bench" "$C/bin/"
cp "$B/tests/backend/backend_ops_test" "$B/tests/runtime/device_sampling_test" "$B/tests/executor/executor_tests" "$C/"
# libsentencepiece.so.0 when the build links it (Debian has no static archive): the binaries look
# in $ORIGIN/lib and $ORIGIN/../lib first, i.e. $C/lib for bin/* and for the tests at the top.
sp=$(ldd "$B/bin/llmrt" | awk '/libsentencepiece/ {print $3}')
if [[ -n $sp ]]; then mkdir -p "$C/lib" && cp -L "$sp" "$C/lib/"; fi
cp -r "$root/../shared/testdata/models/stories260K-hf" "$C/models/"
# Its greedy references (the executor tests read them as LLMRT_SHARED_TESTDATA/references/...).
mkdir -p "$C/references" && cp "$root/../shared/testdata/references/stories260K-hf.greedy.json" "$C/references/"
strip "$C"/bin/* "$C/backend_ops_test" "$C/device_sampling_test" "$C/executor_tests"
# Static OpenBLAS makes the binaries large: ship them compressed (the tree may carry 64 MiB).
(cd "$C" && tar cJf ../carry.tar.xz . && rm -rf ./* && mv ../carry.tar.xz .)
du -sh "$C"
