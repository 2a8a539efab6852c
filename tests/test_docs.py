"""Every section the repository cites in its design notes exists.

Code, tests, benchmarks, samples, the README and the notes cite a note's section as
``docs/fence.md §4.4``; a list goes on after the first one (``docs/fence.md §4.2, §4.6
and §3.1``), and so does a range (``docs/reduction.md §4.4–§4.13``). Inside a note a
bare ``§X`` is one of its own sections. The PTX ISA's sections are written
``PTX ISA §X`` or ``ISA §X`` and are not checked here. Any other ``§`` is an error: a
reference that does not say which note it means, or one to a document the repository
does not have. A section exists when its note has a heading numbered so
(``### 4.4 A fence another thread ran``); a note named without a section must exist too.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: what is scanned: the package sources, tests, benchmarks, samples, notes and top-level files
SCANNED = ("ptxkit", "cfg", "generators", "tests", "benchmarks", "samples", "docs", ".ci", ".github")
SUFFIXES = {".py", ".md", ".ptx", ".toml", ".yaml", ".yml", ".cfg", ".txt", ""}

NUMBER = r"\d+(?:\.\d+)*"
ITEM = rf"§{NUMBER}(?:\s*[–-]\s*§{NUMBER})?"  # one section, or a range of them
GROUP = re.compile(
    rf"(?P<source>docs/(?P<note>[\w-]+)\.md|\b(?:PTX\s+)?ISA(?:\s+\d+\.\d+)?)\s+"
    rf"(?P<items>{ITEM}(?:(?:,\s*|\s+and\s+|,\s+and\s+|\s+or\s+){ITEM})*)"
)
SECTION = re.compile(rf"§({NUMBER})")
MENTION = re.compile(r"docs/([\w-]+)\.md")
HEADING = re.compile(rf"^#{{1,6}}\s+({NUMBER})\.?\s", re.MULTILINE)


def scanned_files() -> list[Path]:
    files = [p for p in ROOT.glob("*") if p.is_file() and p.suffix in SUFFIXES - {""}]
    for top in SCANNED:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return sorted(files)


@functools.cache
def sections(note: str) -> frozenset[str]:
    """The section numbers of ``docs/<note>.md`` (empty when there is no such note).

    >>> sorted(sections("fence"))[:3]
    ['1', '2', '2.1']
    """
    path = DOCS / f"{note}.md"
    return frozenset(HEADING.findall(path.read_text()) if path.is_file() else ())


def references(text: str, own_note: str | None):
    """``(offset, note or None, number)`` for every ``§`` in `text`; note None marks the
    ISA, ``""`` a bare reference outside a note.

    >>> [(n, s) for _, n, s in references("docs/fence.md §4.2, §4.6 and §3.1; PTX ISA §8; see §2", None)]
    [('fence', '4.2'), ('fence', '4.6'), ('fence', '3.1'), (None, '8'), ('', '2')]
    >>> [(n, s) for _, n, s in references("as §4.4–§4.13 say", "reduction")]
    [('reduction', '4.4'), ('reduction', '4.13')]
    """
    owner = {}
    for group in GROUP.finditer(text):
        note = group["note"]  # None for the ISA
        for section in SECTION.finditer(group["items"]):
            owner[group.start("items") + section.start()] = note
    found = []
    for section in SECTION.finditer(text):
        note = owner.get(section.start(), own_note if own_note is not None else "")
        found.append((section.start(), note, section.group(1)))
    return found


def problems_in(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: what is wrong`` for each reference in `path` to a note or section that
    does not exist, and each ``§`` that does not say what it cites."""
    text = path.read_text(errors="replace")
    if "§" not in text and "docs/" not in text:
        return []
    relative = path.relative_to(root).as_posix()
    own = path.stem if path.parent == DOCS and path.suffix == ".md" else None
    found = []

    def where(offset: int) -> str:
        return f"{relative}:{text.count(chr(10), 0, offset) + 1}"

    for offset, note, number in references(text, own):
        if note is None:
            continue
        if note == "":
            found.append(f"{where(offset)}: §{number} does not say which note it cites (write docs/<note>.md §{number}, "
                         f"or PTX ISA §{number})")
        elif not (DOCS / f"{note}.md").is_file():
            found.append(f"{where(offset)}: docs/{note}.md does not exist")
        elif number not in sections(note):
            found.append(f"{where(offset)}: docs/{note}.md has no section {number}")
    for mention in MENTION.finditer(text):
        if not (DOCS / f"{mention[1]}.md").is_file():
            found.append(f"{where(mention.start())}: docs/{mention[1]}.md does not exist")
    return sorted(set(found))


def test_every_cited_section_exists():
    here = Path(__file__).resolve()  # its examples of dangling references are meant
    problems = [problem for path in scanned_files() if path != here for problem in problems_in(path)]
    assert not problems, "\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("see docs/fence.md §99", "docs/fence.md has no section 99"),
        ("see docs/nowhere.md §1", "docs/nowhere.md does not exist"),
        ("the design is in docs/nowhere.md", "docs/nowhere.md does not exist"),
        ("as reduction.md §2.3 says", "§2.3 does not say which note it cites"),
        ("docs/fence.md §4.4 and §4.99", "docs/fence.md has no section 4.99"),
    ],
)
def test_a_dangling_reference_is_reported(tmp_path, text, problem):
    path = tmp_path / "module.py"
    path.write_text(f'"""Line one.\n\n{text}.\n"""\n')
    found = problems_in(path, tmp_path)
    assert any(problem in line for line in found), found
    assert found[0].startswith("module.py:3: ")


def test_headings_are_read_as_sections():
    assert {"1", "2.1", "4.4", "8"} <= sections("fence")
    assert {"2.3", "2.12", "3.2", "4.13"} <= sections("reduction")
