"""The README and docs/ speak of the product: no issue numbers of nico's own development, links only to
files the repository holds (no reference spec files, which it does not), and the runbook's count of
its sections right."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
NUMBERS |= {"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14}
NUMBERS |= {"fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20}


def test_no_issue_numbers() -> None:
    for path in DOCS:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not re.search(r"\b[Ii]ssue \d+", line), f"{path.name}:{number}: {line}"


def test_every_link_is_to_a_file_in_the_repository() -> None:
    for path in DOCS:
        text = path.read_text()
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:", target):
                assert (path.parent / target).exists(), f"{path.name}: {target}"
        assert not re.search(r"\bspec/[\w-]+\.md|\bnmx-c-2026\.md", text), f"{path.name} cites a spec file"


def test_the_runbook_counts_its_sections() -> None:
    text = (ROOT / "docs" / "runbook.md").read_text()
    sections = re.findall(r"^## \d+\. ", text, re.M)
    said = re.search(r"^(\w+) situations", text, re.M)
    assert said, "the runbook says how many situations it covers"
    assert NUMBERS[said[1].lower()] == len(sections)
