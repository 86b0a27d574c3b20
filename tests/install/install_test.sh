#!/usr/bin/env bash
# `cmake --install` gives a usable llmrt: the commands run from the prefix with the installed
# default model, and a project built with find_package(llmrt) links and generates.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { tail -20 "$tmp/install.log"; fail "cmake --install"; }
for f in bin/llmrt bin/llmrt-bench include/llmrt/llm.h include/llmrt/engine_config.h lib/cmake/llmrt/llmrtConfig.cmake \
         lib/libllmrt_core.a share/llmrt/models/llmrt-tiny/config.json; do
  [[ -e $tmp/prefix/$f ]] || fail "missing after install: $f"
done
# The installed command finds the installed model without --model, from anywhere.
out=$(cd "$tmp" && "$tmp/prefix/bin/llmrt" generate --prompt "This package provides" --max-tokens 4 --json --threads 1 \
      --backend cpu 2>&1) || fail "installed llmrt generate: $out"
grep -q '"token_ids"' <<<"$out" || fail "installed llmrt generate printed no result: $out"

cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/consumer.log" 2>&1 || { tail -20 "$tmp/consumer.log"; fail "configure consumer"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { tail -30 "$tmp/consumer.log"; fail "build consumer"; }
"$tmp/consumer/consumer" "$tmp/prefix/share/llmrt/models/llmrt-tiny" || fail "consumer run"
echo "install_test: installed commands, headers, library and CMake package work"
