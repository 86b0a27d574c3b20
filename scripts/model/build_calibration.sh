#!/usr/bin/env bash
# Writes models/llmrt-tiny/calibration.txt: the default calibration text of `llmrt quantize
# --method smoothquant`, from the same kind of text the bundled model was trained on (Debian man
# pages rendered as scripts/model/build_corpus.sh renders them: man-db/groff, no hyphenation,
# unwrapped, col -bx, whitespace normalised). Pages of coreutils, grep, sed, tar and findutils
# (GPL-3+, see their /usr/share/doc/*/copyright). Needs man-db and those packages.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$root/models/llmrt-tiny/calibration.txt
pages=(ls cp mv sort cut chmod grep sed tar find date du df head tail wc tr uniq split stat)
: >"$out"
for p in "${pages[@]}"; do
  f=$(man -w "$p" 2>/dev/null | head -1)
  [[ -n "$f" ]] || { echo "build_calibration: no man page for $p" >&2; exit 1; }
  MANWIDTH=100000 MAN_KEEP_FORMATTING=0 man --nh --nj -l "$f" 2>/dev/null | col -bx |
    sed -E 's/[[:space:]]+/ /g; s/^ //; s/ $//' | awk 'NF' >>"$out"
  echo >>"$out"
done
echo "$out: $(wc -c <"$out") bytes from ${#pages[@]} man pages"
