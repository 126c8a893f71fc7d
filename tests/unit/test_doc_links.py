"""Links between the docs resolve, as a reader following them finds them.

Every relative Markdown link in README.md and docs/*.md (`[text](cli.md#rules)`) names a file that
exists and, for a `#anchor` into a Markdown file, a heading with that GitHub anchor; so does every
`docs/FILE.md#anchor` a `--help` text of the command line points to. A link into a heading that was
renamed (`## p4netem radio show [UE...]` has the anchor `p4netem-radio-show-ue`) silently lands at
the top of the page.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
HELP_SOURCES = [*sorted((REPO / "control-plane" / "p4netem" / "cli").glob("*.py")),
                *sorted((REPO / "studies" / "p4netem_studies" / "cli").glob("*.py"))]

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_DOC_REF = re.compile(r"\bdocs/([\w.-]+\.md)#([\w-]+)")


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase; punctuation other than `-` and `_` removed (the
    backticks, brackets, dots, slashes, ...); each space a `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a Markdown file's headings (a repeated one gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for m in _HEADING.finditer(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = github_anchor(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def broken(target: Path, anchor: str) -> str | None:
    if not target.exists():
        return f"no file {target.relative_to(REPO) if target.is_relative_to(REPO) else target}"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"no heading with anchor #{anchor} in {target.relative_to(REPO)}"
    return None


def test_github_anchor_matches_githubs_rule() -> None:
    assert github_anchor("`p4netem radio show [UE...]`") == "p4netem-radio-show-ue"
    assert github_anchor("`p4netem timeline check|run FILE`") == "p4netem-timeline-checkrun-file"
    assert github_anchor("Election id: primary only while writing") == "election-id-primary-only-while-writing"


def test_every_relative_link_in_the_docs_resolves() -> None:
    problems = []
    for doc in DOC_FILES:
        for m in _LINK.finditer(_FENCE.sub("", doc.read_text(encoding="utf-8"))):
            link = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
                continue
            path, _, anchor = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            if (why := broken(target, anchor)) is not None:
                problems.append(f"{doc.relative_to(REPO)}: ({link}): {why}")
    assert not problems, "\n".join(problems)


def test_every_docs_anchor_a_help_text_names_resolves() -> None:
    problems = []
    for source in HELP_SOURCES:
        for m in _DOC_REF.finditer(source.read_text(encoding="utf-8")):
            if (why := broken(REPO / "docs" / m.group(1), m.group(2))) is not None:
                problems.append(f"{source.relative_to(REPO)}: docs/{m.group(1)}#{m.group(2)}: {why}")
    assert not problems, "\n".join(problems)
