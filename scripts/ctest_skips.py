#!/usr/bin/env python3
"""Summarizes the skipped tests of the last CTest run in a build directory, grouped by reason.

  python3 scripts/ctest_skips.py [BUILD_DIR] [--list]

Which tests were skipped comes from the JUnit file CTest writes with
`--output-junit Testing/Temporary/ctest-junit.xml` (scripts/test.sh asks for it; it is the only
record of a SKIP_RETURN_CODE skip), else from Testing/Temporary/LastTest.log (skips by
SKIP_REGULAR_EXPRESSION only, i.e. GoogleTest's). Reasons come from the tests' output in
LastTest.log: GoogleTest prints "<file>:<line>: Skipped" and then the reason; other tests' last
output line is taken. Tests that ran but skipped some of their own checks say so with a line
"NAME: N checks skipped (REASON)" (tests/cli/cli_test.sh), and a whole GoogleTest binary run as one
CTest test (executor_tests_overlap) lists "[  SKIPPED ]" cases: both are reported as skipped checks.
Reasons that name ../shared/testdata are grouped as one. Prints nothing else and always exits 0
(scripts/test.sh keeps CTest's exit status).
"""

import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

TESTING = re.compile(r"^\d+/\d+ Testing: (.+)$")
GTEST_SKIP = re.compile(r"^.*:\d+: Skipped$")
GTEST_SKIPPED_CASE = re.compile(r"^\[  SKIPPED \] (\S+) \(\d+ ms\)$")
CHECKS_SKIPPED = re.compile(r"^(\S+): (\d+) checks? skipped \((.*)\)$")
SHARED_ABSENT = "shared test data absent"


def read_log(path):
    """{test name: (output lines, skipped by the skip regex)} from LastTest.log."""
    tests = {}
    name, out, in_output, lines = None, [], False, []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        m = TESTING.match(line)
        if m:
            name, out, in_output = m.group(1), [], False
            tests[name] = (out, False)
        elif name is None:
            continue
        elif line == "Output:" and i + 1 < len(lines) and lines[i + 1].startswith("-----"):
            in_output = True
        elif line == "<end of output>":
            in_output = False
        elif in_output:
            if not line.startswith("-----") or out:
                out.append(line)
        elif line.startswith("Skip regular expression found in output"):
            tests[name] = (out, True)
    return tests


def read_junit(path):
    """The names of the tests the JUnit file marks skipped (not run, or skipped by a regex)."""
    skipped = set()
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            skipped.add(case.get("name"))
    return skipped


def gtest_reason(out, start=0):
    for i in range(start, len(out)):
        if GTEST_SKIP.match(out[i]):
            reason = []
            for line in out[i + 1:]:
                if line.startswith("[  SKIPPED ]"):
                    break
                if line.strip():
                    reason.append(line.strip())
            return " ".join(reason) or "(GTEST_SKIP without a message)"
    return None


def reason_of(out):
    reason = gtest_reason(out)
    if reason:
        return reason
    text = [line.strip() for line in out if line.strip()]
    return text[-1] if text else "(no output)"


def cache_value(build_dir, key):
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def grouper(shared):
    """Maps a reason to its group: every mention of ../shared/testdata is one group."""
    forms = {p for p in (shared, shared and os.path.normpath(shared)) if p}
    exists = bool(shared) and os.path.isdir(shared)
    shared_key = "%s: %s%s" % (SHARED_ABSENT, shared or "../shared/testdata",
                               "" if exists else " (a fresh clone without ../shared)")

    def group(reason):
        if reason.startswith(SHARED_ABSENT) or any(p in reason for p in forms) or re.match(r"^shared .*absent", reason):
            return shared_key
        return reason

    return group


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    show_list = "--list" in argv
    build_dir = args[0] if args else "build/release"
    tmp = os.path.join(build_dir, "Testing", "Temporary")
    log_path = os.path.join(tmp, "LastTest.log")
    junit_path = os.path.join(tmp, "ctest-junit.xml")
    if not os.path.exists(log_path):
        print("skipped: no CTest log at %s" % log_path)
        return 0
    tests = read_log(log_path)
    skipped = {n for n, (_, by_regex) in tests.items() if by_regex}
    if os.path.exists(junit_path) and os.path.getmtime(junit_path) >= os.path.getmtime(log_path) - 60:
        try:
            skipped = read_junit(junit_path)
        except ET.ParseError as e:
            print("(%s unreadable: %s; skips by return code not counted)" % (junit_path, e))
    group = grouper(cache_value(build_dir, "LLMRT_SHARED_TESTDATA"))

    by_reason = collections.defaultdict(list)
    for name in sorted(skipped):
        by_reason[group(reason_of(tests.get(name, ([], False))[0]))].append(name)
    checks = collections.defaultdict(list)  # reason -> ["cli: 3", ...]
    for name, (out, _) in sorted(tests.items()):
        if name in skipped:
            continue
        cases = collections.Counter()
        for i, line in enumerate(out):
            m = CHECKS_SKIPPED.match(line)
            if m:
                checks[group(m.group(3))].append((m.group(1), int(m.group(2)), "checks"))
            m = GTEST_SKIPPED_CASE.match(line)
            if m:
                j = i
                while j > 0 and not out[j].startswith("[ RUN      ]"):
                    j -= 1
                cases[group(gtest_reason(out, j) or "(no reason)")] += 1
        for reason, n in cases.items():
            checks[reason].append((name, n, "GoogleTest cases"))

    print("skipped: %d of %d tests" % (len(skipped), len(tests)))
    for reason, names in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print("  %4d  %s" % (len(names), reason))
        if show_list:
            for n in names:
                print("          %s" % n.split("  # GetParam() = ")[0])
    if checks:
        print("skipped inside tests that ran:")
        for reason, items in sorted(checks.items()):
            for name, n, what in items:
                print("  %4d  %s of %s: %s" % (n, what, name, reason))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:  # (piped into head)
        sys.stderr.close()
        sys.exit(0)
    except Exception as e:  # never turns a test run into a failure
        print("ctest_skips.py: %s" % e)
        sys.exit(0)
