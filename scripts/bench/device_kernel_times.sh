#!/usr/bin/env bash
# Each kernel's own GPU time (Nsight Compute's gpu__time_duration: the kernel alone, serialized,
# without the overlap PDL gives it in a step) over a window of decode steps of one llmrt-bench
# run, averaged per kernel name. Where profile=on's spans carry ~3 µs of events each, this is
# the figure to set a kernel against its bytes. Run on the GPU machine.
# usage: scripts/bench/device_kernel_times.sh BINARY MODEL_DIR [LLMRT-BENCH FLAGS...]
#   SKIP    (environment) kernels launched before the window (default 3000: past the prefill and
#           the first decode steps), COUNT kernels in it (default 400)
#   TUNING  (environment) more --cuda-tuning switches, e.g. split_keys=64 (graphs=off is set)
set -u
bin=${1:?BINARY}
model=${2:?MODEL_DIR}
shift 2
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
[[ -n $ncu ]] || { echo "device_kernel_times: no ncu found"; exit 1; }
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
# graphs=off: Nsight Compute times kernels, not graph launches.
timeout -k 10 240 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  --launch-skip "${SKIP:-3000}" --launch-count "${COUNT:-400}" \
  "$bin" latency --input-len 128 --output-len 64 --warmup 0 --iters 1 --model "$model" --backend cuda \
  --cuda-tuning "graphs=off${TUNING:+,$TUNING}" "$@" >"$csv" 2>/dev/null || echo "device_kernel_times: ncu exit $?"
python3 - "$csv" <<'EOF'
import csv, re, statistics, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
times = {}
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = row["Kernel Name"].replace("(anonymous namespace)::", "")
    name = re.sub(r"\(.*", "", name)  # the name without its arguments
    name = re.sub(r"^(void )?(llmrt::)?(cuda::)?", "", name)
    times.setdefault(name, []).append(float(row["Metric Value"].replace(",", "")) / 1000.0)  # ns -> µs
total = sum(sum(v) for v in times.values())
print(f"{'kernel':72s} {'launches':>8s} {'mean µs':>9s} {'share':>6s}")
for name, v in sorted(times.items(), key=lambda kv: -sum(kv[1])):
    print(f"{name[:72]:72s} {len(v):8d} {statistics.mean(v):9.2f} {sum(v) / total:6.1%}")
EOF
