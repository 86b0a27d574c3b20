#!/usr/bin/env bash
# Builds llmrt and runs every test: the README's test command and what CI runs.
#   1. installs Debian packages (scripts/setup.sh)
#   2. Release build (CUDA backend compiled too when nvcc is present) and the full CTest suite,
#      followed by a summary of the skipped tests grouped by reason
#   3. the libFuzzer targets for a short time each (clang build)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
jobs=${LLMRT_JOBS:-2}

cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"

if [[ -x scripts/run_fuzzers.sh ]] || [[ -f scripts/run_fuzzers.sh ]]; then
  bash scripts/run_fuzzers.sh "${LLMRT_FUZZ_SECONDS:-10}"
fi

# CTest's summary, then the skipped tests by reason (scripts/ctest_skips.py); the exit status is CTest's.
status=0
ctest --preset release --timeout 900 --output-junit Testing/Temporary/ctest-junit.xml || status=$?
python3 scripts/ctest_skips.py build/release || true
exit "$status"
