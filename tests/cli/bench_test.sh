#!/usr/bin/env bash
# llmrt-bench's contract: each mode prints one JSON line {"mode", "config",
# "results"} on stdout with the documented keys and sane values; bad flags get
# a one-line error naming the flag, its value and the range, and exit code 2.
# Usage: bench_test.sh LLMRT_BENCH_BINARY MODEL_DIR
set -u
bin=$1
model=$2
source "$(dirname "$0")/expect.sh"

common=(--model "$model" --backend cpu --threads 1)

# Usage errors.
expect 2 "subcommand" -- "$bin"
expect 2 "--model" -- "$bin" latency --input-len 4
expect 2 "bogus" -- "$bin" latency "${common[@]}" --bogus
expect 2 "--input-len has value 0; expected an integer in \[1, " -- "$bin" latency "${common[@]}" --input-len 0
expect 2 "--output-len has value 1; expected an integer in \[2, " -- "$bin" latency "${common[@]}" --output-len 1
expect 2 "--cached-prefix needs --warmup >= 1" -- "$bin" latency "${common[@]}" --cached-prefix --warmup 0
expect 2 "--cached-prefix needs block reuse, which llmrt-bench turns off by default: add --enable-block-reuse" -- "$bin" latency "${common[@]}" --cached-prefix
expect 2 "--iters has value 0" -- "$bin" prefill "${common[@]}" --iters 0
expect 2 "--num-requests has value -3" -- "$bin" throughput "${common[@]}" --num-requests -3
# Engine flags: the option table's parsers, then EngineConfig::validate (the messages of the API).
expect 2 "field 'tokens_per_block' has value 24; expected a power of two" -- \
  "$bin" throughput "${common[@]}" --tokens-per-block 24
expect 2 "field 'free_gpu_memory_fraction' has value 1; expected a fraction in \(0, 1\)" -- \
  "$bin" throughput "${common[@]}" --kv-cache-free-gpu-memory-fraction 1
expect 2 "field 'max_batch_size' has value 0" -- "$bin" throughput "${common[@]}" --max-batch-size 0
expect 2 "--max-batch-size: 'x' is not an integer" -- "$bin" throughput "${common[@]}" --max-batch-size x
expect 2 "unknown option '--enable-block-reus', did you mean '--enable-block-reuse'" -- "$bin" throughput "${common[@]}" --enable-block-reus
expect 2 "field 'top_p' has value 0" -- "$bin" throughput "${common[@]}" --top-p 0
expect 2 "cuda_tuning: unknown key 'graph', did you mean 'graphs'" -- "$bin" throughput "${common[@]}" --cuda-tuning graph=off
expect 2 "--backend" -- "$bin" prefill "${common[@]}" --backend tpu
expect 2 "exceeds the max sequence length 512" -- "$bin" latency "${common[@]}" --input-len 500 --output-len 20
expect 1 "/nonexistent" -- "$bin" prefill --model /nonexistent --backend cpu

# Good runs: one JSON line each on stdout.
run() {
  local name=$1
  shift
  if ! "$bin" "$@" >"$tmp/$name.json" 2>"$tmp/$name.log"; then
    fail=$((fail + 1))
    echo "FAIL: $* -> exit $?: $(head -c 400 "$tmp/$name.log")"
    return
  fi
  pass=$((pass + 1))
}
run latency latency "${common[@]}" --input-len 16 --output-len 8 --warmup 1 --iters 3
run cached latency "${common[@]}" --input-len 100 --output-len 4 --warmup 1 --iters 2 --cached-prefix \
  --enable-block-reuse
run prefill prefill "${common[@]}" --input-len 16 --warmup 1 --iters 3
run throughput throughput "${common[@]}" --num-requests 4 --input-len 16 --output-len 8 --max-batch-size 2

# Requests from files and length distributions (throughput).
printf '{"prompt": "Once upon a time", "output_tokens": 5}\n{"input_ids": [5, 6, 7, 8], "output_len": 3}\n\n{"prompt": "The program reads"}\n{"input_ids": [9, 9]}\n' >"$tmp/d.jsonl"
cat >"$tmp/sg_data.json" <<'JSON'
[{"conversations": [{"from": "human", "value": "Hello there, how are you?"}, {"from": "gpt", "value": "I am fine, thank you very much."}]},
 {"conversations": [{"from": "human", "value": "only one turn"}]},
 {"conversations": [{"from": "human", "value": "Tell me a story"}, {"from": "gpt", "value": "Once"}]}]
JSON
run dataset throughput "${common[@]}" --dataset "$tmp/d.jsonl" --num-requests 3 --output-len 7 --csv "$tmp/d.csv"
run sharegpt throughput "${common[@]}" --dataset "$tmp/sg_data.json"
run dist1 throughput "${common[@]}" --num-requests 12 --input-len 32 --input-len-dist normal --input-len-spread 8 \
  --output-len 8 --output-len-dist uniform --output-len-spread 4 --csv "$tmp/dist1.csv"
run dist2 throughput "${common[@]}" --num-requests 12 --input-len 32 --input-len-dist normal --input-len-spread 8 \
  --output-len 8 --output-len-dist uniform --output-len-spread 4 --csv "$tmp/dist2.csv"
run conc throughput "${common[@]}" --num-requests 12 --input-len 16 --output-len 16 --concurrency 3
run sweep throughput "${common[@]}" --num-requests 6 --input-len 8 --output-len 8 --concurrency 1,3 --csv "$tmp/sweep.csv"
run rate throughput "${common[@]}" --num-requests 8 --input-len 16 --output-len 4 --request-rate 20 --csv "$tmp/rate.csv"
if command -v gnuplot >/dev/null 2>&1; then
  run plotrun throughput "${common[@]}" --num-requests 4 --input-len 8 --output-len 4 --plot "$tmp/run.png"
  run plotsweep throughput "${common[@]}" --num-requests 4 --input-len 8 --output-len 4 --concurrency 1,2 --plot "$tmp/sweep.png"
  for png in run sweep; do
    expect 0 "" -- python3 -c "import sys; sys.exit(open(sys.argv[1], 'rb').read(8) != b'\\x89PNG\\r\\n\\x1a\\n')" "$tmp/$png.png"
  done
else
  expect 1 "--plot needs gnuplot" -- "$bin" throughput "${common[@]}" --num-requests 2 --input-len 8 --output-len 4 --plot "$tmp/run.png"
fi
expect 2 "--concurrency has value 5000" -- "$bin" throughput "${common[@]}" --concurrency 1,5000
expect 2 "--concurrency has value -1" -- "$bin" throughput "${common[@]}" --concurrency -1
expect 2 "--request-rate has value -2" -- "$bin" throughput "${common[@]}" --request-rate -2
printf '{"prompt": 3}\n' >"$tmp/bad.jsonl"
expect 2 'bad.jsonl:1: needs "prompt"' -- "$bin" throughput "${common[@]}" --dataset "$tmp/bad.jsonl"
printf '{"input_ids": [1, 2]}\n{"prompt": "x"\n' >"$tmp/bad2.jsonl"
expect 2 "bad2.jsonl:2: " -- "$bin" throughput "${common[@]}" --dataset "$tmp/bad2.jsonl"
printf '{"input_ids": [1, 2], "output_tokens": 0}\n' >"$tmp/bad3.jsonl"
expect 2 'bad3.jsonl:1: "output_tokens" must be an integer' -- "$bin" throughput "${common[@]}" --dataset "$tmp/bad3.jsonl"
echo '[1]' >"$tmp/bad_sg.json"
expect 2 "bad_sg.json: conversation 0: expected an object" -- "$bin" throughput "${common[@]}" --dataset "$tmp/bad_sg.json"
printf '{"input_ids": [[[[[[[[[[1]]]]]]]]]]}\n' >"$tmp/deep.jsonl"
expect 2 "deep.jsonl:1: " -- "$bin" throughput "${common[@]}" --dataset "$tmp/deep.jsonl"
expect 2 "/nonexistent.jsonl" -- "$bin" throughput "${common[@]}" --dataset /nonexistent.jsonl
expect 2 "input-len-dist" -- "$bin" throughput "${common[@]}" --input-len-dist gamma

if python3 - "$tmp" <<'PY'; then
import json, sys
d = sys.argv[1]
errors = []

def load(name):
    lines = [l for l in open(f"{d}/{name}.json").read().splitlines() if l.strip()]
    if len(lines) != 1:
        errors.append(f"{name}: {len(lines)} stdout lines, expected 1")
    return json.loads(lines[-1])

def positive(name, res, keys):
    for k in keys:
        v = res.get(k)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            errors.append(f"{name}: results.{k} = {v!r}, expected a positive number")

lat = load("latency")
pre = load("prefill")
thr = load("throughput")
for name, j in (("latency", lat), ("prefill", pre), ("throughput", thr)):
    if j.get("mode") != name:
        errors.append(f"{name}: mode = {j.get('mode')!r}")
    for k in ("model", "backend", "max_batch_size", "max_num_tokens", "model_config", "input_len"):
        if k not in j.get("config", {}):
            errors.append(f"{name}: config.{k} missing")

r = lat["results"]
positive("latency", r, ["ttft_ms_mean", "ttft_ms_p50", "decode_ms_per_token", "decode_tokens_per_s", "itl_ms_p50",
                        "itl_ms_p90", "itl_ms_p99", "e2e_ms_mean"])
if len(r.get("iter_ttft_ms", [])) != 3:
    errors.append(f"latency: {len(r.get('iter_ttft_ms', []))} iterations recorded, expected 3")
if abs(r["decode_tokens_per_s"] * r["decode_ms_per_token"] - 1000) > 1e-6 * 1000:
    errors.append("latency: decode_tokens_per_s != 1000 / decode_ms_per_token")
if not r["itl_ms_p50"] <= r["itl_ms_p90"] <= r["itl_ms_p99"]:
    errors.append("latency: ITL percentiles not ordered")
if r["engine_stats"]["generated_tokens"] != 3 * 8:
    errors.append(f"latency: {r['engine_stats']['generated_tokens']} tokens generated, expected 24")
if lat["config"].get("cached_prefix") is not False or r["engine_stats"]["kv_reused_blocks"] != 0:
    errors.append("latency: fresh prompts reused blocks or cached_prefix is not false")
cached = load("cached")
r = cached["results"]
if cached["config"].get("cached_prefix") is not True:
    errors.append("cached: config.cached_prefix is not true")
# Both measured runs find the warm-up's prompt cached (every whole block but the last token's).
if not r["engine_stats"]["kv_reused_blocks"] >= 2:
    errors.append(f"cached: {r['engine_stats']['kv_reused_blocks']} blocks reused, expected >= 2")
positive("cached", r, ["ttft_over_itl"])
if abs(r["ttft_over_itl"] - r["ttft_ms_mean"] / r["decode_ms_per_token"]) > 1e-9 * r["ttft_over_itl"]:
    errors.append("cached: ttft_over_itl != ttft_ms_mean / decode_ms_per_token")

r = pre["results"]
positive("prefill", r, ["prefill_ms_mean", "prefill_ms_min", "prefill_tokens_per_s", "model_flops",
                        "model_tflops_per_s", "linear_flops", "attention_flops"])
# Bundled model: 6 layers, hidden 384, 6 heads x 64, 2 KV heads, intermediate 1024, vocab 8192.
layer = 384 * (384 + 2 * 128) + 384 * 384 + 3 * 384 * 1024
want_linear = 2 * 16 * 6 * layer + 2 * 8192 * 384
want_attn = 4 * 6 * 6 * 64 * 16 * 17 / 2
if r["linear_flops"] != want_linear or r["attention_flops"] != want_attn:
    errors.append(f"prefill: flops {r['linear_flops']} + {r['attention_flops']}, expected {want_linear} + {want_attn}")
if r["prefill_ms_min"] > r["prefill_ms_mean"]:
    errors.append("prefill: min > mean")

r = thr["results"]
positive("throughput", r, ["wall_s", "output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "ttft_ms_mean",
                           "ttft_ms_p50", "ttft_ms_p99", "itl_ms_mean", "itl_ms_p50", "itl_ms_p99", "e2e_ms_mean",
                           "e2e_ms_p99"])
if r["output_tokens"] != 4 * 8:
    errors.append(f"throughput: output_tokens = {r['output_tokens']}, expected 4 * 8 = 32")
if r["input_tokens"] != 4 * 16:
    errors.append(f"throughput: input_tokens = {r['input_tokens']}, expected 64")
if abs(r["output_tokens_per_s"] * r["wall_s"] - 32) > 1e-6 * 32:
    errors.append("throughput: output_tokens_per_s != output_tokens / wall_s")
st = r["engine_stats"]
if st["generated_tokens"] != 32 or st["steps"] <= 0:
    errors.append(f"throughput: engine_stats {st}")
# Two at a time (--max-batch-size 2): at least two rounds of 8 steps.
if st["steps"] < 16:
    errors.append(f"throughput: {st['steps']} steps with --max-batch-size 2, expected >= 16")
if not r["e2e_ms_p99"] >= r["e2e_ms_mean"] >= r["ttft_ms_mean"]:
    errors.append("throughput: end-to-end latency below time to first token")

# Dataset: three requests (the first three lines; the blank one skipped), their own output lengths
# (the third takes --output-len 7), prompts as their tokens; one CSV row each.
r = load("dataset")["results"]
if r["num_requests"] != 3 or r["output_tokens"] != 5 + 3 + 7:
    errors.append(f"dataset: {r['num_requests']} requests, {r['output_tokens']} output tokens; expected 3, 15")
rows = open(f"{d}/d.csv").read().splitlines()
if rows[0] != "concurrency,request,input_tokens,output_tokens,ttft_ms,itl_ms_mean,e2e_ms" or len(rows) != 4:
    errors.append(f"dataset: csv {rows[:2]}... ({len(rows)} lines)")
elif [int(x.split(",")[3]) for x in rows[1:]] != [5, 3, 7] or int(rows[2].split(",")[2]) != 4:
    errors.append(f"dataset: csv rows {rows[1:]}")
# ShareGPT: the one-turn conversation is skipped; outputs as long as the replies' tokens.
r = load("sharegpt")["results"]
if r["num_requests"] != 2 or r["output_tokens"] < 2:
    errors.append(f"sharegpt: {r['num_requests']} requests, {r['output_tokens']} output tokens")
# Distributions: lengths vary, within [1, 2 * mean], and the seed repeats them.
a, b = (open(f"{d}/dist{i}.csv").read() for i in (1, 2))
ins = [int(x.split(",")[2]) for x in a.splitlines()[1:]]
outs = [int(x.split(",")[3]) for x in a.splitlines()[1:]]
if [x.split(",")[2:4] for x in a.splitlines()[1:]] != [x.split(",")[2:4] for x in b.splitlines()[1:]]:
    errors.append("dist: the same --prompt-seed gave other lengths")
if len(set(ins)) < 3 or not all(1 <= v <= 64 for v in ins) or len(set(outs)) < 2 or not all(4 <= v <= 12 for v in outs):
    errors.append(f"dist: lengths {ins} / {outs}")

# --concurrency 3: 12 requests of 16 tokens never more than 3 at a time, so at least 4 rounds
# of 16 steps; every token counted.
r = load("conc")["results"]
if r["output_tokens"] != 12 * 16 or r["engine_stats"]["steps"] < 4 * 16:
    errors.append(f"concurrency: {r['output_tokens']} tokens in {r['engine_stats']['steps']} steps")
# --concurrency 1,3: a sweep, one results object per level in order; more steps at 1.
r = load("sweep")["results"]
if not isinstance(r, list) or [x["concurrency"] for x in r] != [1, 3] or any(x["output_tokens"] != 48 for x in r) \
        or not r[0]["engine_stats"]["steps"] > r[1]["engine_stats"]["steps"]:
    errors.append(f"sweep: {r if not isinstance(r, list) else [(x['concurrency'], x['engine_stats']['steps']) for x in r]}")
if len(open(f"{d}/sweep.csv").read().splitlines()) != 1 + 2 * 6:
    errors.append("sweep: csv rows")
# --request-rate 20: Poisson arrivals spread 8 requests over time (a few hundred ms), so fewer
# than 60 requests/s; TTFT counts from each request's own submission.
r = load("rate")["results"]
if r["output_tokens"] != 8 * 4 or not r["requests_per_s"] < 60 or not r["ttft_ms_p50"] < r["wall_s"] * 1000 / 2:
    errors.append(f"rate: {r['requests_per_s']} requests/s, TTFT p50 {r['ttft_ms_p50']} ms, wall {r['wall_s']} s")

for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors else 0)
PY
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  for f in "$tmp"/*.json; do echo "$f: $(head -c 2000 "$f")"; done
fi

echo "bench_test: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
