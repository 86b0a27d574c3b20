#!/usr/bin/env python3
"""One line of a device bench's bench.jsonl: llmrt-bench's JSON line (the last `{...}` line of its
stdout) with the given labels added, or, when it failed, an error line with the labels and the
tail of its log.

usage: bench_line.py EXIT_CODE STDOUT_FILE LOG_FILE KEY=VALUE..."""
import json
import sys


def main():
    rc, out_path, log_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    labels = dict(a.split("=", 1) for a in sys.argv[4:])
    line = None
    for l in open(out_path, errors="replace"):
        l = l.strip()
        if l.startswith("{"):
            try:
                line = json.loads(l)
            except ValueError:
                pass
    if rc == 0 and line is not None:
        line.update(labels)
        print(json.dumps(line))
    else:
        tail = open(log_path, errors="replace").read().splitlines()[-5:]
        print(json.dumps({**labels, "error": f"exit {rc}", "log_tail": tail}))


if __name__ == "__main__":
    main()
