"""Comments, docstrings and strings say what the code does now: they cite the paper, the method's README or the
code, never the working spec kept outside the repository, a tracker's issue numbers or the dates of past work."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("fedlab", "experiments", "benchmarks", "tests", "sweeps")
SKIP_PARTS = {".venv", "__pycache__", "node_modules", "site-packages"}

_MONTH = "(?:January|February|March|April|May|June|July|August|September|October|November|December)"
# built from pieces so that this file's own patterns are no citation
CITATION = re.compile("|".join((
    r"\b" + "SP" + r"EC\b",                                   # the working spec (its sections, its file)
    r"\b[Ii]" + r"ssues? #?\d+",                              # a tracker's issue, by number
    r"\(" + "#" + r"\d+\)",                                   # ... or as (#N)
    r"\b20\d\d-\d\d-\d\d\b",                                  # a calendar date
    r"\bas of (?:" + _MONTH + r"|20\d\d)\b",                  # "as of <month>" / "as of <year>"
)))

# Data, not prose: (file, a text of the line it is on, why it stays).
ALLOWED = (
    ("tests/experiments/test_evidence_engine.py", "abcdef0", "a spot-check record's date and the text it must render"),
    ("tests/unit/test_config_help.py", 'f.metadata.get("help"', "the pattern that keeps these citations out of config help"),
)


def _files() -> list[Path]:
    out = []
    for folder in FOLDERS:
        for ext in ("*.py", "*.yaml"):
            out += [p for p in (ROOT / folder).rglob(ext) if not SKIP_PARTS & set(p.relative_to(ROOT).parts)]
    return sorted(out)


def _python_texts(text: str):
    """(line, text) of every comment and string literal (docstrings, messages, f-string parts)."""
    kinds = {tokenize.COMMENT, tokenize.STRING}
    kinds |= {getattr(tokenize, n) for n in ("FSTRING_MIDDLE",) if hasattr(tokenize, n)}   # Python ≥ 3.12
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in kinds:
                yield tok.start[0], tok.string
    except (tokenize.TokenError, SyntaxError):         # not Python after all: every line
        yield from enumerate(text.splitlines(), 1)


def _yaml_comment(line: str) -> str:
    """The comment of one YAML line: from a `#` at its start or after a space, outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i:]
    return ""


def _yaml_texts(text: str):
    for n, line in enumerate(text.splitlines(), 1):
        yield n, _yaml_comment(line)


def citations(path: Path) -> list[tuple[int, str]]:
    """(line, the line's text) of every citation in one file's comments and strings."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = set()
    for start, chunk in (_python_texts(text) if path.suffix == ".py" else _yaml_texts(text)):
        for m in CITATION.finditer(chunk):
            n = start + chunk.count("\n", 0, m.start())
            found.add((n, lines[n - 1].strip() if n <= len(lines) else chunk))
    return sorted(found)


def _allowed(rel: str, line: str) -> bool:
    return any(rel == f and key in line for f, key, _ in ALLOWED)


def test_no_spec_issue_or_date_citations_in_code():
    bad = []
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        bad += [f"{rel}:{n}: {line}" for n, line in citations(path) if not _allowed(rel, line)]
    assert not bad, ("comments, docstrings and strings must say what the code does now — cite the paper or the "
                     "method's README, not the spec, an issue number or a date:\n" + "\n".join(bad))


def test_the_guard_sees_each_kind_of_citation(tmp_path):
    """Each kind is found in a comment, a docstring and a YAML comment; data and the paper's sections are not."""
    sp, iss, day, asof = "SP" + "EC", "iss" + "ue", "2026-11" + "-27", "as " + "of November"
    py = tmp_path / "m.py"
    py.write_text(f'"""Doc ({sp} §1)."""\nx = 1  # see {iss} 7\ny = "a"  # (' + '#12)\n'
                  f'z = 2  # probes {day}\nw = 3  # the default {asof}\n'
                  'fmt = "%Y-%m-%d"  # the paper §3.2, Eq. 4\nTASK_SPECS = {}\n')
    assert [n for n, _ in citations(py)] == [1, 2, 3, 4, 5]
    yml = tmp_path / "c.yaml"
    yml.write_text(f'# {sp}.md §3\nkey: "a # {day}"  # fine\nother: 1  # {iss} #3\n')
    assert [n for n, _ in citations(yml)] == [1, 3]


PAPER = re.compile(r"\bpaper (\d{3})\b")


def test_every_paper_the_code_cites_by_number_is_listed_in_the_docs():
    """`paper 002 §3.2` in a docstring names a paper by its number: docs/papers.md lists each such number with
    its title, so a citation resolves inside the repository."""
    listed = set(re.findall(r"^\| paper (\d{3}) \|", (ROOT / "docs" / "papers.md").read_text(), flags=re.M))
    cited = {}
    for path in _files() + sorted((ROOT / "fedlab").rglob("*.md")) + sorted((ROOT / "experiments").rglob("*.md")):
        for m in PAPER.finditer(path.read_text(encoding="utf-8")):
            cited.setdefault(m.group(1), path.relative_to(ROOT).as_posix())
    assert cited, "no file cites a paper by number: the pattern no longer matches how the code cites them"
    missing = {n: where for n, where in cited.items() if n not in listed}
    assert not missing, f"cited by number but not listed in docs/papers.md: {missing}"
