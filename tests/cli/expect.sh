# Shared by the CLI contract tests (sourced): a scratch directory removed on exit,
# pass/fail counters and `expect`.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# expect CODE PATTERN -- command...: exit code CODE and PATTERN in stderr+stdout.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -eq $code ]] && grep -qE -- "$pattern" <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $* -> exit $rc (want $code), output: $(head -c 400 <<<"$out")"
  fi
}
