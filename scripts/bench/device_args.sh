# Sourced by the device_*_bench.sh scripts with their arguments: BUILD_DIR OUT_DIR [...] into
# $build (absolute), $out (made, absolute), $here (scripts/bench) and $bin (llmrt-bench); a
# call with fewer than ${min_args:-2} arguments prints $usage and exits 2.
set -u
if [[ $# -lt ${min_args:-2} ]]; then
  echo "usage: $0 ${usage:-BUILD_DIR OUT_DIR}" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" || exit 2
out=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bin/llmrt-bench
