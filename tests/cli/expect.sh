# Shared by the CLI contract tests (sourced): a scratch directory removed on exit,
# pass/fail/skipped counters, `expect` and `skip_checks`.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
skipped=0
skip_reasons=""
counting_only=0

# skip_checks REASON FUNCTION: counts FUNCTION's `expect` checks as skipped (REASON) without running
# them. The test then prints "NAME: N checks skipped (REASONS)", which scripts/ctest_skips.py reports.
skip_checks() {
  counting_only=1
  "$2"
  counting_only=0
  skip_reasons+="${skip_reasons:+; }$1"
}

# expect CODE PATTERN -- command...: exit code CODE and PATTERN in stderr+stdout.
expect() {
  if [[ $counting_only == 1 ]]; then
    skipped=$((skipped + 1))
    return 0
  fi
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
