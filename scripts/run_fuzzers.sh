#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, the `fuzz` CMake preset) and runs each
# twice: a normal pass of small inputs (-max_len from max_len below, 4 KB for
# most) from the seed corpora in fuzz/corpus/<fuzzer>/, then a shorter
# large-input pass (-max_len 1100000) from seeds of 1 MiB and more that
# fuzz/make_large_seeds.py writes into the build directory at run time (deep
# nesting, huge arrays, long strings and names, huge headers), so every parser
# is fuzzed on the inputs a 4 KB limit never reaches.
#
#   scripts/run_fuzzers.sh [SECONDS]   # normal pass SECONDS (default 20) per fuzzer
#
# Environment: LLMRT_JOBS (build jobs, default 2); LLMRT_FUZZ_BUILD_DIR (build
# somewhere other than the preset's build/fuzz); LLMRT_FUZZ_LARGE_SECONDS (the
# large pass, default 2*SECONDS/3, at least 10: running its ~20 megabyte seeds once
# takes most of that); LLMRT_FUZZERS (run only these,
# space-separated). Exits non-zero when a fuzzer finds a crash, a sanitizer
# error or a timeout; the reproducer is kept under
# <build>/fuzz-artifacts/<fuzzer>[-large]/ and the log in <build>/fuzz-<fuzzer>[-large].log.
# Re-run one input with: <build>/fuzz/<fuzzer> <reproducer file>
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-20}
large_secs=${LLMRT_FUZZ_LARGE_SECONDS:-$((secs * 2 / 3 > 10 ? secs * 2 / 3 : 10))}
jobs=${LLMRT_JOBS:-2}

# Registering a fuzzer: add it to `fuzzers`, give its normal-pass max_len and (optionally) its
# dictionary, and, for a large-input pass, the kind of seeds fuzz/make_large_seeds.py writes
# for it (json, config, generation_config, safetensors, tokenizer, stream, chat_template, tiktoken, properties; a new kind is a
# function there).
fuzzers=(safetensors_header_fuzzer config_json_fuzzer generation_config_fuzzer)
declare -A max_len=([safetensors_header_fuzzer]=4096 [config_json_fuzzer]=4096 [generation_config_fuzzer]=4096)
declare -A dict=([safetensors_header_fuzzer]=fuzz/safetensors.dict [config_json_fuzzer]=fuzz/config_json.dict
                 [generation_config_fuzzer]=fuzz/generation_config.dict)
declare -A large_seeds=([safetensors_header_fuzzer]=safetensors [config_json_fuzzer]=config
                        [generation_config_fuzzer]=generation_config)
large_max_len=1100000
# The JSON-lines request reader (llmrt/request_json.h); its large pass runs on the generic JSON seeds.
fuzzers+=(jsonl_request_fuzzer)
max_len[jsonl_request_fuzzer]=4096 dict[jsonl_request_fuzzer]=fuzz/jsonl_request.dict large_seeds[jsonl_request_fuzzer]=json
# The tokenizer: tokenizer.json loading, and streaming detokenization against decode() on real tokenizers.
fuzzers+=(tokenizer_json_fuzzer stream_detokenizer_fuzzer)
max_len[tokenizer_json_fuzzer]=4096 dict[tokenizer_json_fuzzer]=fuzz/tokenizer_json.dict large_seeds[tokenizer_json_fuzzer]=tokenizer
max_len[stream_detokenizer_fuzzer]=4096 large_seeds[stream_detokenizer_fuzzer]=stream
# tiktoken BPE files (qwen.tiktoken): the line parser, then encode / decode with the ranks it read.
fuzzers+=(tiktoken_file_fuzzer)
max_len[tiktoken_file_fuzzer]=4096 dict[tiktoken_file_fuzzer]=fuzz/tiktoken.dict large_seeds[tiktoken_file_fuzzer]=tiktoken
# Chat templates: Jinja source (+ NUL + JSON context) parsed and rendered.
fuzzers+=(chat_template_fuzzer)
max_len[chat_template_fuzzer]=4096 dict[chat_template_fuzzer]=fuzz/chat_template.dict large_seeds[chat_template_fuzzer]=chat_template
# The server's request bodies (tools/serve/openai_api.cpp; first byte: completions or chat); large pass on JSON seeds.
fuzzers+=(openai_request_fuzzer)
max_len[openai_request_fuzzer]=4096 dict[openai_request_fuzzer]=fuzz/openai_request.dict large_seeds[openai_request_fuzzer]=json
# LMI configuration for `llmrt serve`: serving.properties (and OPTION_* lines) through the option table.
fuzzers+=(serving_config_fuzzer)
max_len[serving_config_fuzzer]=4096 dict[serving_config_fuzzer]=fuzz/serving_config.dict large_seeds[serving_config_fuzzer]=properties

if [[ -n "${LLMRT_FUZZERS:-}" ]]; then read -r -a fuzzers <<<"$LLMRT_FUZZERS"; fi

if [[ -n "${LLMRT_FUZZ_BUILD_DIR:-}" ]]; then
  build=$LLMRT_FUZZ_BUILD_DIR
  cmake --preset fuzz -B "$build" >/dev/null
  cmake --build "$build" -j "$jobs" --target "${fuzzers[@]}"
else
  build=build/fuzz
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs" --target "${fuzzers[@]}"
fi

# run_pass FUZZER LABEL SECONDS MAX_LEN CORPUS... : one libFuzzer run; new inputs go to the
# first corpus directory (a work directory: the seed corpora stay untouched).
status=0
run_pass() {
  local f=$1 label=$2 t=$3 len=$4
  shift 4
  local art="$build/fuzz-artifacts/$label/" log="$build/fuzz-$label.log"
  local extra=()
  [[ -n "${dict[$f]:-}" ]] && extra+=(-dict="${dict[$f]}")
  [[ $len -gt 4096 ]] && extra+=(-len_control=0)  # mutate at full size from the start
  mkdir -p "$1" "$art"
  echo "== $label for ${t}s (max_len $len)"
  if "$build/fuzz/$f" -max_total_time="$t" -max_len="$len" -timeout=10 -rss_limit_mb=2048 "${extra[@]}" \
      -artifact_prefix="$art" -print_final_stats=1 "$@" >"$log" 2>&1; then
    grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log" || true
    echo "   OK"
  else
    echo "FAIL: $label found a problem (log: $log, reproducer under $art)"
    tail -n 40 "$log"
    status=1
  fi
}

declare -A made=()
for f in "${fuzzers[@]}"; do
  run_pass "$f" "$f" "$secs" "${max_len[$f]:-4096}" "$build/fuzz-corpus/$f" "fuzz/corpus/$f"
  kind=${large_seeds[$f]:-}
  [[ -z $kind ]] && continue
  # Seeds are written afresh once per run (about 20 MB per kind); the large pass's own
  # finds are not kept from run to run, so the build directory does not grow.
  seeds="$build/fuzz-large-seeds/$kind"
  if [[ -z ${made[$kind]:-} ]]; then
    rm -rf "$seeds"
    python3 fuzz/make_large_seeds.py "$kind" "$seeds"
    made[$kind]=1
  fi
  rm -rf "$build/fuzz-corpus-large/$f"
  run_pass "$f" "$f-large" "$large_secs" "$large_max_len" "$build/fuzz-corpus-large/$f" "$seeds"
done
exit $status
