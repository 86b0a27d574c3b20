#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, the `fuzz` CMake preset) and runs each
# for a short time, starting from the seed corpora in fuzz/corpus/<fuzzer>/.
#
#   scripts/run_fuzzers.sh [SECONDS]        # default 20 seconds per fuzzer
#
# Environment: LLMRT_JOBS (build jobs, default 2); LLMRT_FUZZ_BUILD_DIR (build
# somewhere other than the preset's build/fuzz). Exits non-zero when a fuzzer
# finds a crash, a sanitizer error or a timeout; the reproducer is kept under
# <build>/fuzz-artifacts/<fuzzer>/ and the log in <build>/fuzz-<fuzzer>.log.
# Re-run one input with: <build>/fuzz/<fuzzer> <reproducer file>
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-20}
jobs=${LLMRT_JOBS:-2}
fuzzers=(safetensors_header_fuzzer config_json_fuzzer)
declare -A max_len=([safetensors_header_fuzzer]=4096 [config_json_fuzzer]=4096)
declare -A dict=([safetensors_header_fuzzer]=fuzz/safetensors.dict [config_json_fuzzer]=fuzz/config_json.dict)

if [[ -n "${LLMRT_FUZZ_BUILD_DIR:-}" ]]; then
  build=$LLMRT_FUZZ_BUILD_DIR
  cmake --preset fuzz -B "$build" >/dev/null
  cmake --build "$build" -j "$jobs" --target "${fuzzers[@]}"
else
  build=build/fuzz
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs" --target "${fuzzers[@]}"
fi

status=0
for f in "${fuzzers[@]}"; do
  work="$build/fuzz-corpus/$f"   # new inputs go here; the seed corpus stays untouched
  art="$build/fuzz-artifacts/$f/"
  log="$build/fuzz-$f.log"
  mkdir -p "$work" "$art"
  echo "== $f for ${secs}s (max_len ${max_len[$f]})"
  if "$build/fuzz/$f" -max_total_time="$secs" -max_len="${max_len[$f]}" -timeout=10 -rss_limit_mb=2048 \
      -dict="${dict[$f]}" -artifact_prefix="$art" -print_final_stats=1 "$work" "fuzz/corpus/$f" >"$log" 2>&1; then
    grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log" || true
    echo "   OK"
  else
    echo "FAIL: $f found a problem (log: $log, reproducer under $art)"
    tail -n 40 "$log"
    status=1
  fi
done
exit $status
