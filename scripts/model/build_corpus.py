#!/usr/bin/env python3
"""Assembles llmrt-tiny's English training corpus from installed Debian 12 packages.

Run by build_corpus.sh (which installs the packages and fetches the archive's
Translation-en index). Python 3 standard library only. Output:

  OUT/train.txt.gz, OUT/heldout.txt.gz  documents separated by two blank lines ("\\n\\n\\n");
                                        inside a document paragraphs are separated by one
                                        blank line and no document contains "\\n\\n\\n".
  OUT/stats.json                        sizes and composition
  CORPUS_MD                             per source package: version, text taken, license, bytes

Pipeline: extract -> clean (Unicode punctuation to ASCII, control characters, whitespace)
-> drop junk paragraphs (non-English, binary, tables of numbers, very long tokens) ->
drop non-English documents -> deduplicate paragraphs (exact, after case/whitespace
folding; first occurrence kept, in a fixed order) -> split long documents at paragraph
boundaries -> shuffle (fixed seed) -> every 100th document is held out.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_sources as cs  # noqa: E402

# Man pages are taken from these packages only (an explicit list keeps the corpus reproducible
# and free of third-party packages that happen to be installed).
MAN_PACKAGES = [
    "manpages", "manpages-dev", "perl-doc", "coreutils", "bash", "git-man", "util-linux", "tar", "grep",
    "sed", "findutils", "diffutils", "procps", "dpkg", "dpkg-dev", "apt", "man-db", "make", "openssl",
    "iproute2", "less", "curl", "wget", "openssh-client", "tmux", "e2fsprogs", "systemd",
]
# Man pages that are mostly machine-generated lists (D-Bus interface dumps, indexes, Unicode tables).
MAN_EXCLUDE = r"^(org\.freedesktop\..*|systemd\.directives|systemd\.index|perluniprops)\("
HTML_EXCLUDE = [r"/genindex[^/]*\.html$", r"/search\.html$", r"/py-modindex\.html$", r"/index(\.en)?\.html$",
                r"/whatsnew/changelog\.html$", r"/download\.html$"]
HTML_PACKAGES = ["python3.11-doc", "debian-policy", "developers-reference", "debian-reference-en", "maint-guide"]

SEPARATOR = "\n\n\n"
MAX_DOC_CHARS = 24000
MAX_PARA_CHARS = 40000  # a longer "paragraph" is a generated list or table
MIN_DOC_CHARS = 100
DEDUP_MIN_CHARS = 40

WHAT = {
    "debian-archive-descriptions": "package descriptions (short and long Description-en of every binary package)",
    "bible-kjv-text": "the King James Version Bible, one document per chapter, read with `bible` from bible-kjv",
    "wordnet-base": "WordNet 3.0 synset glosses (words, part of speech, definition, examples), 40 a document",
}
LICENSE_OVERRIDE = {
    "bible-kjv-text": "KJV text: public domain (copyright expired, per the copyright file); "
    "Bible Retrieval System data format: unrestricted use; Debian packaging GPL-2+",
    "python3.11-doc": "PSF-2.0 (Python Software Foundation License Version 2) for the documentation; "
    "see /usr/share/doc/python3.11-doc/copyright",
    "debian-archive-descriptions": "each description is part of its source package (debian/control) and is "
    "distributed under that package's license; all of Debian main is DFSG-free",
}

_CHAR_MAP = {
    "\u2010": "-", "\u2011": "-", "\u2212": "-", "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00a0": " ", "\u202f": " ", "\u2007": " ", "\u2008": " ",
    "\u2009": " ", "\u200a": " ", "\u2002": " ", "\u2003": " ", "\u2004": " ", "\u2005": " ", "\u2006": " ",
    "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": "", "\u00ad": "", "\u2022": "*", "\u2027": "-",
    "\u2032": "'", "\u2033": '"', "\u2026": "...", "\t": "    ", "\r": "", "\u00b6": "",
}
_TRANS = str.maketrans(_CHAR_MAP)
_CTRL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_STOP = set("the a an of and to in is it that for on with as are be by this or not from at which can".split())


def log(msg: str) -> None:
    print(f"corpus: {msg}", file=sys.stderr, flush=True)


def clean_text(text: str) -> str:
    text = unicodedata.normalize("NFC", text).translate(_TRANS)
    text = _CTRL_RE.sub("", text)
    out = []
    for line in text.split("\n"):
        line = line.rstrip()
        body = line.lstrip(" ")
        if not body:
            out.append("")
            continue
        indent = min(12, len(line) - len(body))
        out.append(" " * indent + re.sub(r" {2,}", " ", body))
    text = "\n".join(out).strip("\n")
    return re.sub(r"\n{3,}", "\n\n", text)


def paragraph_ok(p: str) -> bool:
    if "\ufffd" in p or len(p) > MAX_PARA_CHARS:
        return False
    n = len(p)
    non_ascii = sum(1 for c in p if ord(c) > 127)
    if non_ascii > max(2, 0.05 * n):
        return False  # non-English (or mostly symbols)
    toks = p.split()
    if not toks:
        return False
    if max(len(t) for t in toks) > 100:
        return False  # hashes, base64, minified code
    if n >= 40:
        visible = sum(1 for c in p if not c.isspace())
        letters = sum(1 for c in p if c.isalpha())
        if letters < 0.4 * visible:
            return False  # tables of numbers, hex dumps
    return True


def english_enough(text: str) -> bool:
    words = re.findall(r"[A-Za-z]+", text.lower())
    if len(words) < 50:
        return True
    return sum(1 for w in words if w in _STOP) >= 0.04 * len(words)


def split_long(title: str, text: str) -> list[tuple[str, str]]:
    if len(text) <= MAX_DOC_CHARS:
        return [(title, text)]
    pieces, cur, size = [], [], 0
    for para in text.split("\n\n"):
        if cur and size + len(para) + 2 > MAX_DOC_CHARS:
            pieces.append("\n\n".join(cur))
            cur, size = [], 0
        cur.append(para)
        size += len(para) + 2
    if cur:
        pieces.append("\n\n".join(cur))
    return [(f"{title} [part {i + 1}]", p) for i, p in enumerate(pieces)]


def pkg_version(pkg: str) -> str:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


def license_summary(pkg: str) -> str:
    if pkg in LICENSE_OVERRIDE:
        return LICENSE_OVERRIDE[pkg]
    path = f"/usr/share/doc/{pkg}/copyright"
    try:
        txt = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return "no copyright file found"
    if re.match(r"^Format:", txt):
        counts: collections.Counter[str] = collections.Counter()
        for para in re.split(r"\n\s*\n", txt):
            if re.search(r"^Files:", para, re.M):
                m = re.search(r"^License:[ \t]*(.*)$", para, re.M)
                if m and m.group(1).strip() and len(m.group(1).split()) <= 8:
                    counts[m.group(1).strip()] += 1
        if counts:
            names = [n for n, _ in counts.most_common()]
            more = f" and {len(names) - 6} more" if len(names) > 6 else ""
            return "; ".join(names[:6]) + more + f" (per Files: paragraphs of {path})"
    found = []
    for pat, name in [(r"GNU General Public License|GPL", "GPL"), (r"Lesser General|LGPL", "LGPL"),
                      (r"Artistic", "Artistic"), (r"BSD", "BSD"), (r"public domain", "public domain"),
                      (r"MIT|Permission is hereby granted", "MIT/Expat-style"), (r"Apache", "Apache")]:
        if re.search(pat, txt, re.I if name == "public domain" else 0):
            found.append(name)
    return ("mentions " + ", ".join(found) if found else "see file") + f" (not machine-readable: {path})"


def collect(args) -> list[cs.Doc]:
    docs: list[cs.Doc] = []

    def add(it, label):
        n0 = len(docs)
        docs.extend(it)
        log(f"{label}: {len(docs) - n0} documents, {sum(len(d.text) for d in docs[n0:]) / 1e6:.1f} MB raw")

    add(cs.extract_descriptions(args.translation), "descriptions")
    add(cs.extract_bible(), "bible")
    add(cs.extract_wordnet(), "wordnet")
    for pkg in HTML_PACKAGES:
        add(cs.extract_html(pkg, cs.html_files(pkg, HTML_EXCLUDE)), f"html {pkg}")
    add((d for d in cs.extract_man_pages(MAN_PACKAGES, jobs=args.jobs) if not re.match(MAN_EXCLUDE, d.title)),
        "man pages")
    return docs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (train.txt.gz, heldout.txt.gz, stats.json)")
    ap.add_argument("--corpus-md", required=True, help="where to write CORPUS.md")
    ap.add_argument("--translation", default=None, help="Translation-en index file (else apt-cache dumpavail)")
    ap.add_argument("--translation-origin", default="", help="one line saying where the index came from")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--heldout-every", type=int, default=100, help="every Nth shuffled document is held out")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()

    raw = collect(args)
    # Fixed processing order for deduplication (first occurrence wins), independent of how the
    # extractors happened to order things.
    order = {"description": 0, "bible": 1, "wordnet": 2, "html": 3, "man page": 4}
    raw.sort(key=lambda d: (order[d.kind], d.package, d.title))

    seen: set[bytes] = set()
    drop = collections.Counter()
    docs: list[tuple[str, str, str]] = []  # (package, title, text)
    for d in raw:
        text = clean_text(d.text)
        if not english_enough(text):
            drop["non-English document"] += 1
            continue
        kept = []
        for para in text.split("\n\n"):
            if not para.strip():
                continue
            if not paragraph_ok(para):
                drop["junk paragraph"] += 1
                continue
            if len(para) >= DEDUP_MIN_CHARS:
                key = hashlib.blake2b(re.sub(r"\s+", " ", para.lower()).strip().encode(), digest_size=16).digest()
                if key in seen:
                    drop["duplicate paragraph"] += 1
                    continue
                seen.add(key)
            kept.append(para)
        text = "\n\n".join(kept).strip("\n")
        if len(text) < MIN_DOC_CHARS:
            drop["short document"] += 1
            continue
        for title, piece in split_long(d.title, text):
            docs.append((d.package, title, piece))
    log(f"dropped: {dict(drop)}")

    rng = random.Random(args.seed)
    rng.shuffle(docs)
    train = [d for i, d in enumerate(docs) if i % args.heldout_every != args.heldout_every - 1]
    held = [d for i, d in enumerate(docs) if i % args.heldout_every == args.heldout_every - 1]

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name, part in (("train", train), ("heldout", held)):
        data = (SEPARATOR.join(t for _, _, t in part) + "\n").encode("utf-8")
        assert b"\n\n\n\n" not in data
        path = out / f"{name}.txt.gz"
        with open(path, "wb") as f, gzip.GzipFile(filename=f"{name}.txt", mode="wb", fileobj=f, mtime=0,
                                                   compresslevel=9) as gz:
            gz.write(data)
        sizes[name] = {"documents": len(part), "bytes": len(data), "gz_bytes": path.stat().st_size}
        log(f"{path}: {len(part)} documents, {len(data) / 1e6:.2f} MB, {path.stat().st_size / 1e6:.2f} MB gz")

    per_pkg: dict[str, dict] = {}
    for name, part in (("train", train), ("heldout", held)):
        for pkg, _, text in part:
            e = per_pkg.setdefault(pkg, {"documents": 0, "bytes": 0, "train_bytes": 0, "heldout_bytes": 0})
            n = len(text.encode("utf-8"))
            e["documents"] += 1
            e["bytes"] += n
            e[f"{name}_bytes"] += n
    raw_pkgs = collections.Counter(d.package for d in raw)
    kinds = {d.package: d.kind for d in raw}
    stats = {
        "format": "UTF-8 text; documents separated by two blank lines; paragraphs by one blank line",
        "separator": SEPARATOR,
        "seed": args.seed,
        "heldout_every": args.heldout_every,
        "splits": sizes,
        "dropped": dict(drop),
        "packages": per_pkg,
        "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n")

    total = sum(s["bytes"] for s in sizes.values())
    lines = [
        "# llmrt-tiny training corpus",
        "",
        "English text taken from Debian 12 (bookworm) packages by `scripts/model/build_corpus.sh`",
        f"(built {stats['built']}). Total {total / 1e6:.1f} MB of UTF-8 text in {sum(len(p) for p in (train, held))} "
        f"documents: train {sizes['train']['bytes'] / 1e6:.1f} MB, held-out {sizes['heldout']['bytes'] / 1e6:.2f} MB "
        f"(every {args.heldout_every}th document after a shuffle with seed {args.seed}).",
        "",
        "Processing: man pages rendered with man-db/groff (`man -l`, no hyphenation, unwrapped) and `col -bx`",
        "(generated pages skipped: D-Bus interface dumps `org.freedesktop.*`, `systemd.directives`, `systemd.index`,",
        "`perluniprops`);",
        "HTML reduced to its main text; Unicode punctuation folded to ASCII; control characters dropped;",
        "whitespace normalised; paragraphs that look non-English, binary or numeric dropped; paragraphs of",
        f"{DEDUP_MIN_CHARS}+ characters deduplicated exactly (case- and whitespace-folded); documents over",
        f"{MAX_DOC_CHARS} characters split at paragraph boundaries. Dropped: "
        + ", ".join(f"{v} {k}s" for k, v in sorted(drop.items())) + ".",
        "",
        "| package | version | text taken | license | bytes (train + held-out) |",
        "|---|---|---|---|---|",
    ]
    for pkg in sorted(per_pkg, key=lambda p: -per_pkg[p]["bytes"]):
        e = per_pkg[pkg]
        if pkg == "debian-archive-descriptions":
            name, version = "Debian archive index", args.translation_origin or "apt-cache dumpavail"
        else:
            name, version = f"`{pkg}`", pkg_version(pkg)
        kind = kinds[pkg]
        what = WHAT.get(pkg) or {
            "man page": f"{raw_pkgs[pkg]} man page{'s' if raw_pkgs[pkg] != 1 else ''} (English), rendered to text",
            "html": f"{raw_pkgs[pkg]} HTML documentation page{'s' if raw_pkgs[pkg] != 1 else ''}, as plain text",
        }[kind]
        lic = license_summary(pkg).replace("|", "/")
        lines.append(f"| {name} | {version} | {what} | {lic} | {e['bytes']:,} |")
    lines += [
        "",
        "The KJV text is read with the `bible` program of package `bible-kjv` "
        f"({pkg_version('bible-kjv')}); man pages are rendered with `man-db` ({pkg_version('man-db')}) "
        f"and `groff-base` ({pkg_version('groff-base')}).",
        "",
    ]
    Path(args.corpus_md).parent.mkdir(parents=True, exist_ok=True)
    Path(args.corpus_md).write_text("\n".join(lines))
    log(f"wrote {args.corpus_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
