#!/usr/bin/env bash
# `llmrt serve` as a user runs it, on the bundled model: LMI configuration (serving.properties,
# OPTION_* variables, --print-config, errors), then a server on an ephemeral loopback port spoken
# to by curl (raw SSE), the official OpenAI Node SDK, and Python's standard library (with the load
# test), and SIGTERM (exit 0).
#   serve_cli_test.sh LLMRT_BIN MODEL_DIR SOURCE_DIR WORK_DIR [LOAD_SECONDS] [CLIENTS] [LLMRT_BENCH_BIN]
set -uo pipefail
bin=$1 model=$2 src=$3 work=$4 load_seconds=${5:-120} clients=${6:-256} bench=${7:-$(dirname "$1")/llmrt-bench}
mkdir -p "$work"
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
expect() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# ---- LMI configuration ----
cat >"$work/serving.properties" <<EOF
engine=MPI
option.tensor_parallel_degree=max
option.rolling_batch=trtllm
option.model_id=$model
# LMI's quick start values
option.max_rolling_batch_size=64
option.max_input_len=256
option.max_output_len=128
option.enable_kv_cache_reuse=true
option.trust_remote_code=true
option.mystery_knob=1
EOF
out=$(OPTION_MAX_INPUT_LEN=100 OPTION_DTYPE=fp32 "$bin" serve --config "$work/serving.properties" --max-batch-size 8 --print-config 2>"$work/cfg.err")
expect "print-config: exit 0" "[[ $? == 0 ]]"
expect "print-config: flag over properties" "grep -q '^max_batch_size = 8  (--max-batch-size)' <<<\"\$out\""
expect "print-config: properties over environment" "grep -q '^max_input_len = 256  (.*serving.properties:7 (option.max_input_len))' <<<\"\$out\""
expect "print-config: environment" "grep -q '^dtype = float32  (OPTION_DTYPE (option.dtype))' <<<\"\$out\""
expect "print-config: LMI default" "grep -q '^kv_cache_config.free_gpu_memory_fraction = 0.95  (LMI default' <<<\"\$out\""
expect "print-config: library default" "grep -q '^kv_cache_config.host_cache_size = 0  (default)' <<<\"\$out\""
expect "print-config: max_output_len" "grep -q '^serve.max_output_len = 128' <<<\"\$out\""
expect "print-config: tensor_parallel_degree max" "grep -q '^tensor_parallel_size = 0  (.*serving.properties:2 (option.tensor_parallel_degree))' <<<\"\$out\""
expect "warning: unknown key" "grep -q 'unknown key option.mystery_knob' '$work/cfg.err'"
expect "warning: trust_remote_code" "grep -q 'option.trust_remote_code is ignored' '$work/cfg.err'"
# Environment only (HF_MODEL_ID names a local directory).
out=$(HF_MODEL_ID=$model OPTION_MAX_ROLLING_BATCH_SIZE=16 "$bin" serve --print-config 2>/dev/null)
expect "environment only" "grep -q '^max_batch_size = 16  (OPTION_MAX_ROLLING_BATCH_SIZE' <<<\"\$out\" && grep -q \"^model = $model  (HF_MODEL_ID\" <<<\"\$out\""
# Bad values: one line naming key, value, source and what is expected; exit 2.
printf 'option.max_rolling_batch_size=lots\n' >"$work/bad.properties"
err=$("$bin" serve "$model" --config "$work/bad.properties" --print-config 2>&1 >/dev/null); rc=$?
expect "bad value: exit 2" "[[ $rc == 2 ]]"
expect "bad value: names source, key and value" "grep -q 'bad.properties:1: option.max_rolling_batch_size: .*lots' <<<\"\$err\""
out=$(OPTION_TENSOR_PARALLEL_DEGREE=4 OPTION_USE_CUSTOM_ALL_REDUCE=false "$bin" serve "$model" --print-config 2>/dev/null); rc=$?
expect "tensor_parallel_degree 4 maps onto tensor_parallel_size" "[[ $rc == 0 ]] && grep -q '^tensor_parallel_size = 4  (OPTION_TENSOR_PARALLEL_DEGREE (option.tensor_parallel_degree))' <<<\"\$out\""
expect "use_custom_all_reduce maps onto cuda_tuning" "grep -q '^cuda_tuning = custom_all_reduce=off  (OPTION_USE_CUSTOM_ALL_REDUCE' <<<\"\$out\""
err=$(OPTION_TENSOR_PARALLEL_DEGREE=two "$bin" serve "$model" --print-config 2>&1 >/dev/null); rc=$?
expect "tensor_parallel_degree two refused" "[[ $rc == 2 ]] && grep -q 'OPTION_TENSOR_PARALLEL_DEGREE: option.tensor_parallel_degree: .*a positive integer or max' <<<\"\$err\""
err=$(OPTION_QUANTIZE=gptq "$bin" serve "$model" --print-config 2>&1 >/dev/null); rc=$?
expect "quantize gptq refused" "[[ $rc == 2 ]] && grep -q 'expected fp8, smoothquant or awq' <<<\"\$err\""
out=$(OPTION_QUANTIZE=awq OPTION_AWQ_CALIB_SIZE=8 "$bin" serve "$model" --print-config 2>/dev/null); rc=$?
expect "quantize awq calibrates at start" "[[ $rc == 0 ]] && grep -q '^quantization = awq  (OPTION_QUANTIZE' <<<\"\$out\" && grep -q '^calibration_size = 8  (OPTION_AWQ_CALIB_SIZE' <<<\"\$out\" && grep -q '^calibration_file = .*calibration.txt' <<<\"\$out\""
out=$(OPTION_QUANTIZE=fp8 "$bin" serve "$model" --print-config 2>/dev/null); rc=$?
expect "quantize fp8 maps onto quantization" "[[ $rc == 0 ]] && grep -q 'quantization.*fp8.*OPTION_QUANTIZE' <<<\"\$out\""
err=$(HF_MODEL_ID=meta-llama/Llama-3-8B "$bin" serve --print-config 2>&1 >/dev/null); rc=$?
expect "hub ids refused" "[[ $rc == 2 ]] && grep -q 'HF_MODEL_ID: option.model_id: .*local model directory' <<<\"\$err\""

# ---- a running server ----
# (A KV cache of 8192 tokens: its pages are all touched early in the load test, so the RSS check
# measures leaks, not the first touch of a larger pool.)
cat >"$work/chatml.jinja" <<'EOF'
{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
EOF
key=test-key-123
LLMRT_API_KEY=$key "$bin" serve "$model" --port 0 --served-model-name tiny --chat-template "$work/chatml.jinja" \
  --threads 2 --max-batch-size 64 --kv-cache-event-buffer-size 1000 --kv-cache-max-tokens 8192 2>"$work/server.log" &
pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's|.*ready on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/server.log")
  [[ -n $port ]] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if [[ -z $port ]]; then
  bad "server started"; cat "$work/server.log"; exit 1
fi
ok "server ready on port $port"
base=http://127.0.0.1:$port
auth=(-H "Authorization: Bearer $key")

expect "curl: /health without a key" "[[ \$(curl -s -o /dev/null -w '%{http_code}' $base/health) == 200 ]]"
expect "curl: 401 without a key" "[[ \$(curl -s -o /dev/null -w '%{http_code}' $base/v1/models) == 401 ]]"
sse=$(curl -sN "${auth[@]}" -H 'Content-Type: application/json' $base/v1/completions \
  -d '{"model":"tiny","prompt":"Once upon a time","max_tokens":6,"temperature":0,"stream":true}')
expect "curl: SSE data lines" "[[ \$(grep -c '^data: {' <<<\"\$sse\") -ge 2 ]]"
expect "curl: SSE ends with [DONE]" "[[ \$(grep -v '^\$' <<<\"\$sse\" | tail -1) == 'data: [DONE]' ]]"
hdr=$(curl -s -D - -o /dev/null "${auth[@]}" -H 'Content-Type: application/json' $base/v1/completions \
  -d '{"model":"tiny","prompt":"x","max_tokens":2,"stream":true}')
expect "curl: event-stream, chunked" "grep -qi '^content-type: text/event-stream' <<<\"\$hdr\" && grep -qi '^transfer-encoding: chunked' <<<\"\$hdr\""
body=$(head -c 20000000 /dev/zero | tr '\0' 'a' | curl -s -o - -w '\n%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' \
  --data-binary @- $base/v1/completions)
expect "curl: 20 MB body -> 413" "[[ \$(tail -1 <<<\"\$body\") == 413 ]]"

# The OpenAI Node SDK, installed from the committed lock file.
if command -v npm >/dev/null && command -v node >/dev/null; then
  nodedir=$work/node
  mkdir -p "$nodedir"
  cp "$src/tests/serve/node/package.json" "$src/tests/serve/node/package-lock.json" "$nodedir/"
  if [[ ! -d $nodedir/node_modules/openai ]]; then
    (cd "$nodedir" && npm ci --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1) || { cat "$work/npm.log"; bad "npm ci openai"; }
  fi
  cp "$src/tests/serve/openai_sdk_test.mjs" "$nodedir/"
  if node "$nodedir/openai_sdk_test.mjs" "$base" "$key" tiny; then ok "openai node sdk"; else bad "openai node sdk"; fi
else
  bad "node and npm are needed for the OpenAI SDK test (scripts/setup.sh installs them)"
fi

# Python's standard library, and the load test.
if python3 "$src/tests/serve/stdlib_client_test.py" "$base" "$key" tiny "$pid" "$load_seconds" "$clients"; then
  ok "python stdlib client + load"
else
  bad "python stdlib client + load"
fi

# llmrt-bench serve against it: synthetic token-id prompts over a concurrency sweep with a plot,
# and a chat dataset.
if "$bench" serve --base-url "$base" --api-key "$key" --num-prompts 24 --input-len 16 --output-len 8 --range-ratio 0.5 \
     --concurrency 1,4 --slo-ttft-ms 60000 --json-out "$work/bench.json" --plot "$work/sweep.png" >"$work/bench.out" 2>"$work/bench.err"; then
  ok "llmrt-bench serve: exit 0"
else
  bad "llmrt-bench serve"; cat "$work/bench.err"
fi
expect "llmrt-bench serve: results" "python3 -c \"
import json, sys
r = json.load(open('$work/bench.json'))['results']
assert len(r) == 2 and all(x['completed'] == 24 and x['failed'] == 0 and x['ttft_ms']['p99'] > 0 and x['output_tokens'] > 0 for x in r), r
assert r[0]['goodput'] > 0
\""
expect "llmrt-bench serve: plot" "[[ -s '$work/sweep.png' ]] && head -c 8 '$work/sweep.png' | grep -q PNG"
printf '%s\n' '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}' '{"prompt": "Tell me", "max_tokens": 3}' >"$work/chat.jsonl"
expect "llmrt-bench serve: chat dataset" "\"$bench\" serve --base-url '$base' --api-key '$key' --endpoint /v1/chat/completions --dataset '$work/chat.jsonl' --concurrency 2 --warmup 0 2>/dev/null | grep -q '\"completed\":2'"

# SIGTERM: drain, exit 0.
kill -TERM $pid
wait $pid
rc=$?
expect "SIGTERM: exit 0" "[[ $rc == 0 ]]"
expect "SIGTERM: logged" "grep -q 'stopped' '$work/server.log'"

if ((fails)); then echo "serve_cli_test: $fails failed"; tail -20 "$work/server.log"; exit 1; fi
echo "serve_cli_test: all passed"
