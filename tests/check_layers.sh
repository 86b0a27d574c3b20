#!/usr/bin/env bash
# Fails when a source file includes a header from a layer it may not depend on,
# or when CUDA headers appear outside src/backend/cuda. Layers depend downward only.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

# layer -> layers it may include (besides itself and llmrt/ public headers)
declare -A allowed=(
  [core]=""
  [loader]="core"
  [tokenizer]="core"
  [template]="core"
  [sampling]="core"
  [kv]="core"
  [backend]="core"
  [model]="core loader backend"
  [sched]="core kv"
  [runtime]="core loader tokenizer template sampling kv backend model"
  [executor]="core loader tokenizer template sampling kv backend model sched runtime"
  [api]="core loader tokenizer template sampling kv backend model sched runtime executor"
)
layers="core loader tokenizer template sampling kv backend model sched runtime executor api"
fail=0
for layer in $layers; do
  [[ -d src/$layer ]] || continue
  ok="$layer ${allowed[$layer]}"
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include[[:space:]]*"([^"]+)".*/\1/' <<<"${line#*:}")
    top=${inc%%/*}
    [[ $inc == */* ]] || continue          # same-folder include
    [[ $top == llmrt ]] && continue        # public API
    if [[ " $layers " == *" $top "* && " $ok " != *" $top "* ]]; then
      echo "layering: $file includes \"$inc\" but $layer may only use: ${ok}"
      fail=1
    fi
  done < <(grep -rnE '^[[:space:]]*#include[[:space:]]*"' "src/$layer" --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' | sed -E 's/^([^:]+):[0-9]+:/\1:/')
done
# Front ends (the CLI and server in tools/, the Python extension in python/src) use the public API only.
for front in tools python/src; do
  [[ -d $front ]] || continue
  while IFS= read -r line; do
    echo "layering: front end includes an internal header: $line"; fail=1
  done < <(grep -rnE '^[[:space:]]*#include[[:space:]]*"(core|loader|tokenizer|template|sampling|kv|backend|model|sched|runtime|executor|api)/' "$front" || true)
done
# CUDA headers only in src/backend/cuda.
while IFS= read -r line; do
  echo "layering: CUDA header outside src/backend/cuda: $line"; fail=1
done < <(grep -rnE '^[[:space:]]*#include[[:space:]]*[<"](cuda|cublas|cuda_runtime|cuda_bf16|cuda_fp16|nccl)[^">]*[">]' src include tools python/src 2>/dev/null | grep -v '^src/backend/cuda/' || true)
if [[ $fail == 0 ]]; then echo "layering: OK"; fi
exit $fail
