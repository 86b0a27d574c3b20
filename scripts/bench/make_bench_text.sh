#!/usr/bin/env bash
# Builds a deterministic mixed text file (a few MB) for the tokenizer
# benchmarks from files every Debian system has: license texts, package
# copyright files, the Python standard library's sources, man pages rendered
# with `man -P cat` when man is installed, and tests/data/tokenizer/corpus.json
# (multilingual text, emoji, whitespace runs). Paragraphs are separated by
# blank lines; both benchmarks cut documents at those.
#
# Usage: scripts/bench/make_bench_text.sh OUT_FILE [SIZE_MB (default 4)]
set -eu  # no pipefail: `head` closing a pipe early is expected here
out=${1:?usage: make_bench_text.sh OUT_FILE [SIZE_MB]}
size_mb=${2:-4}
limit=$((size_mb * 1024 * 1024))
repo=$(cd "$(dirname "$0")/../.." && pwd)
export LC_ALL=C
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each source gets a share of the budget so the mix does not depend on which one is largest.
take() {  # take SHARE_PERCENT: stdin -> at most that share of the budget
  head -c $((limit * $1 / 100))
}

# 1. License texts (English prose).
find /usr/share/common-licenses -maxdepth 1 -type f 2>/dev/null | sort | xargs -r cat 2>/dev/null | take 15 > "$tmp/1" || true
# 2. Package copyright files (names from many languages, URLs, e-mail addresses).
find /usr/share/doc -maxdepth 2 -name copyright -type f 2>/dev/null | sort | xargs -r cat 2>/dev/null | take 25 > "$tmp/2" || true
# 3. Python standard library sources (code).
pydir=$(ls -d /usr/lib/python3* 2>/dev/null | sort | tail -n 1 || true)
if [ -n "$pydir" ]; then
  find "$pydir" -maxdepth 1 -name '*.py' -type f | sort | xargs -r cat 2>/dev/null | take 35 > "$tmp/3" || true
else
  : > "$tmp/3"
fi
# 4. Man pages rendered as text.
: > "$tmp/4"
if command -v man > /dev/null 2>&1; then
  for page in bash ls grep sed awk find tar ssh gcc make cp mv rm chmod; do
    MANWIDTH=80 man -P cat "$page" 2>/dev/null | col -b 2>/dev/null || true
    printf '\n\n'
  done | take 10 > "$tmp/4"
fi
# 5. Multilingual corpus texts, repeated to fill the rest.
: > "$tmp/5"
if command -v python3 > /dev/null 2>&1 && [ -f "$repo/tests/data/tokenizer/corpus.json" ]; then
  python3 - "$repo/tests/data/tokenizer/corpus.json" > "$tmp/5.one" <<'PY'
import json, sys
for case in json.load(open(sys.argv[1], encoding="utf-8")):
    text = case["text"].replace("\x00", "")
    if text.strip():
        sys.stdout.write(text.strip("\n") + "\n\n")
PY
  used=$(cat "$tmp"/1 "$tmp"/2 "$tmp"/3 "$tmp"/4 | wc -c)
  rest=$((limit - used))
  if [ "$rest" -gt 0 ] && [ -s "$tmp/5.one" ]; then
    while [ "$(wc -c < "$tmp/5")" -lt "$rest" ]; do cat "$tmp/5.one" >> "$tmp/5"; done
    head -c "$rest" "$tmp/5" > "$tmp/5.cut" && mv "$tmp/5.cut" "$tmp/5"
  fi
fi
for i in 1 2 3 4 5; do cat "$tmp/$i"; printf '\n\n'; done > "$tmp/all"
# Cut at the budget, then drop a trailing partial UTF-8 character.
head -c "$limit" "$tmp/all" | python3 -c 'import sys; d=sys.stdin.buffer.read(); sys.stdout.buffer.write(d.decode("utf-8","ignore").encode("utf-8"))' > "$out"
echo "$out: $(wc -c < "$out") bytes, $(grep -c '' "$out") lines"
