#!/usr/bin/env bash
# Serving against offline, on the GPU machine, in one device call (docs/perf.md "Serving"):
#  1. the random 8B checkpoint (make_random_llama.py) with a real Llama-3 tokenizer beside it;
#  2. offline: llmrt-bench throughput 512 x 128/128 and latency 128/128 (TTFT);
#  3. llmrt serve on the same flags: seconds from start to /health 200 (page cache as the
#     checkpoint left it, and again after dropping caches when allowed);
#  4. llmrt-bench serve against it: the same 512 x 128/128 at concurrency 512 (saturation) and
#     30 requests at concurrency 1 (low load: TTFT).
# usage: device_serve_bench.sh BUILD_DIR TOKENIZER_DIR OUT_DIR     (MODEL_DIR [/tmp/llama8b])
set -u
build=$(cd "$1" && pwd) tok=$(cd "$2" && pwd) out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
model=${MODEL_DIR:-/tmp/llama8b}
B=$build/bin/llmrt-bench L=$build/bin/llmrt
flags=(--backend cuda --max-batch-size 512 --max-num-tokens 8192 --disable-block-reuse)
note() { echo "[serve_bench $SECONDS s] $*" >&2; }

if [[ ! -f $model/config.json ]]; then
  note checkpoint
  timeout 300 python3 "$here/make_random_llama.py" "$model" --preset 8b >"$out/checkpoint.log" 2>&1 || { note "checkpoint failed"; exit 1; }
fi
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$model/"
nvidia-smi --query-gpu=name --format=csv,noheader >"$out/gpu.txt" 2>&1

note offline throughput
timeout 150 "$B" throughput --model "$model" "${flags[@]}" --num-requests 512 --input-len 128 --output-len 128 \
  >"$out/offline_tp.json" 2>"$out/offline_tp.log"
note offline latency
timeout 120 "$B" latency --model "$model" --backend cuda --input-len 128 --output-len 128 --warmup 2 --iters 5 \
  >"$out/offline_lat.json" 2>"$out/offline_lat.log"

start_server() {  # NAME: starts llmrt serve, waits for /health 200, writes NAME.ready_s
  local name=$1 t0=$SECONDS
  local ns0
  ns0=$(date +%s%N)
  "$L" serve "$model" --port 8000 "${flags[@]}" 2>"$out/$name.server.log" &
  pid=$!
  for _ in $(seq 1 1200); do
    if [[ $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health 2>/dev/null) == 200 ]]; then
      python3 -c "print(round(($(date +%s%N) - $ns0) / 1e9, 3))" >"$out/$name.ready_s"
      note "$name: ready in $(cat "$out/$name.ready_s") s"
      return 0
    fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  note "$name: not ready"; return 1
}

start_server warm || exit 1
note "serve saturation"
timeout 200 "$B" serve --base-url http://127.0.0.1:8000 --num-prompts 512 --input-len 128 --output-len 128 \
  --concurrency 512 --vocab-size 128256 --warmup 4 >"$out/serve_tp.json" 2>"$out/serve_tp.log"
note "serve low load"
timeout 120 "$B" serve --base-url http://127.0.0.1:8000 --num-prompts 30 --input-len 128 --output-len 128 \
  --concurrency 1 --vocab-size 128256 --warmup 2 >"$out/serve_lat.json" 2>"$out/serve_lat.log"
curl -s http://127.0.0.1:8000/metrics >"$out/metrics.txt"
kill -TERM $pid; wait $pid; echo "exit $?" >"$out/warm.exit"

if sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
  start_server cold && { kill -TERM $pid; wait $pid; }
else
  echo "drop_caches not permitted" >"$out/cold.ready_s"
fi
python3 - "$out" <<'PY'
import json, sys, os
o = sys.argv[1]
def last_json(p):
    try:
        return json.loads([l for l in open(p) if l.startswith('{')][-1])
    except Exception as e:
        return {"error": str(e)}
tp, lat = last_json(f"{o}/offline_tp.json"), last_json(f"{o}/offline_lat.json")
stp, slat = last_json(f"{o}/serve_tp.json"), last_json(f"{o}/serve_lat.json")
s = {"gpu": open(f"{o}/gpu.txt").read().strip(),
     "offline_output_tok_s": tp.get("results", {}).get("output_tokens_per_s"),
     "serve_output_tok_s": stp.get("results", {}).get("output_throughput"),
     "offline_ttft_ms_p50": lat.get("results", {}).get("ttft_ms_p50"),
     "serve_ttft_ms": slat.get("results", {}).get("ttft_ms"),
     "serve_tp": stp.get("results"), "serve_lat": slat.get("results"),
     "ready_s_warm": open(f"{o}/warm.ready_s").read().strip() if os.path.exists(f"{o}/warm.ready_s") else None,
     "ready_s_cold": open(f"{o}/cold.ready_s").read().strip() if os.path.exists(f"{o}/cold.ready_s") else None}
json.dump(s, open(f"{o}/summary.json", "w"), indent=1)
print(json.dumps({k: s[k] for k in ["gpu", "offline_output_tok_s", "serve_output_tok_s", "offline_ttft_ms_p50", "ready_s_warm", "ready_s_cold"]}))
print("serve ttft", json.dumps(s["serve_ttft_ms"]))
PY
