"""Extractors for build_corpus.py: plain English text from installed Debian 12 packages.

Every extractor yields Doc(package, kind, title, text). `text` is raw-ish plain text
(paragraphs separated by blank lines); build_corpus.py cleans, filters and deduplicates it.
Python 3 standard library only.
"""
from __future__ import annotations

import concurrent.futures
import gzip
import html
import html.parser
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator


@dataclass
class Doc:
    package: str  # Debian package the text came from (key for CORPUS.md)
    kind: str  # "description", "man page", "bible", "wordnet", "html"
    title: str
    text: str


def log(msg: str) -> None:
    print(f"corpus: {msg}", file=sys.stderr, flush=True)


def dpkg_files(package: str) -> list[str]:
    out = subprocess.run(["dpkg-query", "-L", package], check=True, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.startswith("/")]


def read_maybe_gz(path: str | Path) -> str:
    p = str(path)
    data = gzip.open(p, "rb").read() if p.endswith(".gz") else open(p, "rb").read()
    return data.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------
# Package descriptions (Translation-en index of the Debian archive).


def _description_to_text(package: str, short: str, long_lines: list[str]) -> str:
    """Debian control-file description syntax to plain paragraphs (policy 5.6.13)."""
    paras: list[list[str]] = [[]]
    cur_kind = ""  # "prose", "bullet", "verbatim"
    for raw in long_lines:
        s = raw[1:] if raw.startswith(" ") else raw
        if s.strip() == ".":
            if paras[-1]:
                paras.append([])
            cur_kind = ""
            continue
        lines = paras[-1]
        if re.match(r"\s*[-*+o] \S", s) and not (cur_kind == "prose" and not s.startswith(" ")):
            lines.append(s.strip())
            cur_kind = "bullet"
        elif s.startswith(" ") and cur_kind == "bullet" and lines:
            lines[-1] += " " + s.strip()
        elif s.startswith(" "):
            lines.append(s.rstrip())
            cur_kind = "verbatim"
        elif cur_kind == "prose" and lines:
            lines[-1] += " " + s.strip()
        else:
            lines.append(s.strip())
            cur_kind = "prose"
    body = "\n\n".join("\n".join(p) for p in paras if p)
    head = f"{package}: {short.strip()}"
    return head + ("\n\n" + body if body else "")


def iter_translation_records(path: str) -> Iterator[tuple[str, str, list[str]]]:
    text = read_maybe_gz(path)
    for rec in text.split("\n\n"):
        pkg, short, long_lines, in_desc = "", "", [], False
        for line in rec.split("\n"):
            if line.startswith("Package:"):
                pkg = line.split(":", 1)[1].strip()
                in_desc = False
            elif line.startswith("Description-en:") or line.startswith("Description:"):
                short = line.split(":", 1)[1]
                in_desc = True
            elif line.startswith(" ") and in_desc:
                long_lines.append(line)
            else:
                in_desc = False
        if pkg and short:
            yield pkg, short, long_lines


def extract_descriptions(translation_file: str | None) -> Iterator[Doc]:
    """One document per binary package. Prefers the archive's Translation-en index (long
    descriptions); falls back to `apt-cache dumpavail`."""
    seen: set[str] = set()
    if translation_file:
        records: Iterable[tuple[str, str, list[str]]] = iter_translation_records(translation_file)
    else:
        dump = subprocess.run(["apt-cache", "dumpavail"], check=True, capture_output=True, text=True).stdout
        tmp = dump.replace("\nDescription:", "\nDescription-en:")
        records = _records_from_text(tmp)
    for pkg, short, long_lines in records:
        if pkg in seen:
            continue
        seen.add(pkg)
        yield Doc("debian-archive-descriptions", "description", pkg, _description_to_text(pkg, short, long_lines))


def _records_from_text(text: str) -> Iterator[tuple[str, str, list[str]]]:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        name = f.name
    try:
        yield from iter_translation_records(name)
    finally:
        os.unlink(name)


# --------------------------------------------------------------------------------------------
# Man pages, rendered by man-db/groff as plain UTF-8 text.

_MAN_SECTION_RE = re.compile(r"^/usr/share/man/man[1-9]/[^/]+\.[1-9][^/]*$")


def man_pages_of(package: str) -> list[str]:
    pages = []
    for f in dpkg_files(package):
        if _MAN_SECTION_RE.match(f) and os.path.isfile(f) and not os.path.islink(f):
            pages.append(f)
    return sorted(pages)


def _is_so_stub(path: str) -> bool:
    """A page that only says `.so other.3` (an alias): skip it, the target is rendered."""
    try:
        src = read_maybe_gz(path)
    except OSError:
        return True
    lines = [l for l in src.splitlines() if l.strip() and not l.startswith(('.\\"', "'\\\"", '\\"'))]
    return len(lines) <= 2 and any(l.startswith(".so ") for l in lines)


def render_man(path: str) -> str:
    env = dict(os.environ)
    env.update(MANWIDTH="1000", MANROFFOPT="-rHY=0", GROFF_NO_SGR="1", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    env.pop("MAN_KEEP_FORMATTING")
    man = subprocess.run(["man", "-E", "UTF-8", "-P", "cat", "-l", path], capture_output=True, env=env, timeout=120)
    if man.returncode != 0:
        return ""
    col = subprocess.run(["col", "-bx"], input=man.stdout, capture_output=True, env=env, timeout=120)
    return col.stdout.decode("utf-8", errors="replace")


def clean_man_text(text: str) -> str:
    lines = text.split("\n")
    # Drop the running header (first non-empty line) and footer (last non-empty line).
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) >= 2:
        lines = lines[1:-1]
    out = []
    for line in lines:
        line = line.rstrip()
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if stripped:
            # man indents body text by 7 columns and nested blocks by further multiples of ~7;
            # keep the nesting, at 4 columns a level.
            lvl = max(0, indent - 7)
            line = " " * min(12, (lvl * 4 + 3) // 7) + re.sub(r" {3,}", "  ", stripped)
        out.append(line)
    return "\n".join(out)


def extract_man_pages(packages: list[str], jobs: int = 2) -> Iterator[Doc]:
    for pkg in packages:
        pages = [p for p in man_pages_of(pkg) if not _is_so_stub(p)]
        log(f"man pages: {pkg}: rendering {len(pages)} pages")
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            for path, txt in zip(pages, ex.map(render_man, pages)):
                if not txt.strip():
                    continue
                name = os.path.basename(path)
                name = re.sub(r"\.gz$", "", name)
                m = re.match(r"(.+)\.([1-9][a-z]*)$", name)
                title = f"{m.group(1)}({m.group(2)})" if m else name
                yield Doc(pkg, "man page", title, clean_man_text(txt))


# --------------------------------------------------------------------------------------------
# The King James Bible, read with the `bible` program of bible-kjv (bible-kjv-text's data).


def extract_bible() -> Iterator[Doc]:
    out = subprocess.run(["bible", "-l", "100000", "Gen1:1-Rev22:21"], check=True, capture_output=True).stdout
    text = out.decode("utf-8", errors="replace")
    chapter, verses = "", []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        m = re.match(r"^ +(\d+) +(.*)$", raw)  # verses are indented, headings ("1 Samuel 3") are not
        if m and chapter:
            verses.append(m.group(2).strip())
        elif not raw.startswith(" ") and re.match(r"^[1-3]? ?[A-Z][A-Za-z ]+ \d+$", line):
            if chapter and verses:
                yield Doc("bible-kjv-text", "bible", chapter, chapter + "\n\n" + "\n".join(verses))
            chapter, verses = line, []
        elif verses:
            verses[-1] += " " + line
    if chapter and verses:
        yield Doc("bible-kjv-text", "bible", chapter, chapter + "\n\n" + "\n".join(verses))


# --------------------------------------------------------------------------------------------
# WordNet 3.0 glosses: one line per synset ("word, word (noun): gloss"), 40 synsets a document.

_POS_NAME = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}


def extract_wordnet(directory: str = "/usr/share/wordnet", per_doc: int = 40) -> Iterator[Doc]:
    for pos in ("noun", "verb", "adj", "adv"):
        path = os.path.join(directory, f"data.{pos}")
        entries = []
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue  # license header
                fields, gloss = line.split("|", 1)
                parts = fields.split()
                n_words = int(parts[3], 16)
                words = []
                for i in range(n_words):
                    w = parts[4 + 2 * i]
                    w = re.sub(r"\((a|p|ip)\)$", "", w).replace("_", " ")
                    if w not in words:
                        words.append(w)
                gloss = gloss.strip()
                if not gloss:
                    continue
                entries.append(f"{', '.join(words)} ({_POS_NAME[pos]}): {gloss}")
        for i in range(0, len(entries), per_doc):
            chunk = entries[i : i + per_doc]
            yield Doc("wordnet-base", "wordnet", f"wordnet {pos} {i // per_doc}", "\n".join(chunk))


# --------------------------------------------------------------------------------------------
# HTML documentation (Sphinx / DocBook output) to plain text.

_BLOCK_PARA = {"p", "div", "section", "article", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote",
               "dl", "ul", "ol", "table", "figure", "main", "header", "footer", "aside", "hr", "caption"}
_BLOCK_LINE = {"li", "dt", "dd", "tr", "br", "th"}
_VOID = {"br", "img", "hr", "meta", "link", "input", "col", "area", "base", "wbr", "source", "embed", "param", "track"}
_SKIP_TAGS = {"script", "style", "head", "nav", "noscript", "svg", "button", "form", "title"}
_SKIP_CLASSES = {"sphinxsidebar", "related", "footer", "headerlink", "navheader", "navfooter", "toc",
                 "sphinxsidebarwrapper", "breadcrumbs", "mobile-nav", "menu-wrapper", "clearer", "copybutton"}


class _HtmlText(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, skip, main)
        self.main_parts: list[str] = []
        self.all_parts: list[str] = []
        self.pre = 0
        self.saw_main = False

    def _state(self) -> tuple[bool, bool]:
        if not self.stack:
            return False, False
        return self.stack[-1][1], self.stack[-1][2]

    def _emit(self, s: str) -> None:
        skip, main = self._state()
        if skip:
            return
        self.all_parts.append(s)
        if main:
            self.main_parts.append(s)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        skip, main = self._state()
        if tag in _BLOCK_PARA:
            self._emit("\n\n")
        elif tag in _BLOCK_LINE:
            self._emit("\n")
        elif tag in ("td",):
            self._emit("  ")
        if tag in _VOID:
            return
        new_skip = skip or tag in _SKIP_TAGS or bool(classes & _SKIP_CLASSES) or a.get("role") == "navigation"
        new_main = main or a.get("role") == "main" or "body" in classes and tag == "div"
        if new_main and not main:
            self.saw_main = True
        if tag == "pre":
            self.pre += 1
        self.stack.append((tag, new_skip, new_main))

    def handle_startendtag(self, tag, attrs):
        if tag in _BLOCK_LINE or tag in _BLOCK_PARA:
            self._emit("\n")

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        if not any(t == tag for t, _, _ in self.stack):
            return
        while self.stack:
            t, _, _ = self.stack[-1]
            if t == "pre":
                self.pre = max(0, self.pre - 1)
            if tag in _BLOCK_PARA:
                self._emit("\n\n")
            self.stack.pop()
            if t == tag:
                break
        if tag in _BLOCK_LINE:
            self._emit("\n")

    def handle_data(self, data):
        if self.pre:
            self._emit(data.replace("\r", ""))
        else:
            self._emit(re.sub(r"\s+", " ", data))

    def text(self) -> str:
        parts = self.main_parts if self.saw_main and "".join(self.main_parts).strip() else self.all_parts
        s = "".join(parts).replace("\u00b6", "")
        # Tidy: strip line ends, at most one blank line in a row, drop leading spaces created by
        # collapsed inline whitespace (but keep indentation inside <pre>, which starts lines itself).
        lines = [l.rstrip() for l in s.split("\n")]
        out, blank = [], False
        for l in lines:
            if not l.strip():
                if out and not blank:
                    out.append("")
                blank = True
                continue
            blank = False
            out.append(l if l.startswith("    ") else l.lstrip(" ") if l.startswith(" ") and not l.startswith("  ") else l)
        return "\n".join(out).strip()


def html_to_text(src: str) -> str:
    p = _HtmlText()
    p.feed(src)
    p.close()
    return p.text()


def extract_html(package: str, files: list[str]) -> Iterator[Doc]:
    for path in files:
        try:
            src = read_maybe_gz(path)
        except OSError:
            continue
        txt = html_to_text(src)
        if txt:
            yield Doc(package, "html", os.path.relpath(path, "/usr/share"), txt)


def html_files(package: str, exclude: Iterable[str] = ()) -> list[str]:
    ex = [re.compile(e) for e in exclude]
    out = []
    for f in dpkg_files(package):
        if not re.search(r"\.html?(\.gz)?$", f) or not os.path.isfile(f) or os.path.islink(f):
            continue
        if "/_sources/" in f or "/_static/" in f or any(e.search(f) for e in ex):
            continue
        out.append(f)
    return sorted(out)
