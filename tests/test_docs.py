"""The user documentation, README.md and docs/*.md, holds together: every relative link and
``#anchor`` resolves (anchors as GitHub makes them from headings), every page and screenshot is
reachable, the README stays a front door (at most 800 lines), and no page carries development
history (issue or round numbers, commit hashes: history lives in git)."""

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_MAX_LINES = 800

FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the target ends at the first space or closing parenthesis.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+).*?\1")
HISTORY = [
    re.compile(r"round (two|three|four|five|[0-9])", re.I),
    re.compile(r"issue [0-9]+", re.I),
    # a commit hash: 7 to 12 hex digits standing alone, with at least one digit and one letter
    re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}\b"),
]


def pages():
    """README.md and every page of docs/."""
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def prose_lines(path):
    """(line number, text) of each line outside fenced code blocks."""
    inside = False
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line.strip()):
            inside = not inside
            continue
        if not inside:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading: its text as rendered, lower-cased, punctuation dropped
    (letters, digits, marks, ``_``, ``-`` and spaces stay), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = "".join(c for c in text if c.isalnum() or c in "_- " or unicodedata.category(c).startswith("M"))
    return kept.replace(" ", "-")


def anchors(path):
    """Every anchor GitHub gives the headings of ``path`` (repeats get -1, -2 ...)."""
    seen, found = {}, set()
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match[2])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path):
    """(line number, target) of each link and image of ``path``'s prose (code spans left out)."""
    for n, line in prose_lines(path):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            yield n, match[1]


def test_every_relative_link_and_anchor_in_the_docs_resolves():
    """Each relative link of README.md and docs/*.md names a file that exists, and each #anchor a heading of it."""
    broken = []
    for page in pages():
        for n, target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(ROOT)}:{n} {target}"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                broken.append(f"{where}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert broken == [], "broken links:\n" + "\n".join(broken)


def test_the_slugs_follow_github_s_rules():
    """Headings become anchors as GitHub makes them: code, punctuation and links dropped, repeats numbered."""
    assert slug('Isolated handlers: `isolation="process"`') == "isolated-handlers-isolationprocess"
    assert slug("Django Tasks backend, on_commit and metrics") == "django-tasks-backend-on_commit-and-metrics"
    assert slug("Workflows: after=, chains and batches") == "workflows-after-chains-and-batches"
    assert slug("Pub/sub: plain, not sharded") == "pubsub-plain-not-sharded"
    assert slug("See [the guide](docs/x.md) now") == "see-the-guide-now"
    assert slug("The pickup's floor") == "the-pickups-floor"


def test_every_docs_page_is_listed_in_the_readme_and_every_screenshot_shown():
    """The README links each page of docs/, and some page shows each screenshot of docs/screenshots/."""
    readme = {target.partition("#")[0] for _, target in links(ROOT / "README.md")}
    unlisted = [p.name for p in sorted(DOCS.glob("*.md")) if f"docs/{p.name}" not in readme]
    assert unlisted == [], f"docs pages the README does not link: {unlisted}"
    shown = {(page.parent / t).resolve() for page in pages() for _, t in links(page)}
    hidden = [p.name for p in sorted((DOCS / "screenshots").glob("*.png")) if p.resolve() not in shown]
    assert hidden == [], f"screenshots no page shows: {hidden}"


def test_the_readme_stays_a_front_door_of_at_most_800_lines():
    """README.md has at most 800 lines: topics live in docs/."""
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move a topic to docs/"


def test_no_user_doc_carries_development_history():
    """No issue numbers, 'round N' or commit hashes in README.md or docs/*.md: history lives in git."""
    found = [
        f"{page.relative_to(ROOT)}:{n}: {match[0]!r}"
        for page in pages()
        for n, line in enumerate(page.read_text().splitlines(), 1)
        for pattern in HISTORY
        for match in pattern.finditer(line)
    ]
    assert found == [], "development history in the user docs:\n" + "\n".join(found)


def test_the_readme_gives_the_fault_soak_s_figures_as_published():
    """README's "When a worker is presumed dead" gives the fault soak's figures that docs/chaos.md publishes."""
    chaos = (DOCS / "chaos.md").read_text()
    soak = chaos[chaos.index("The soak, `WORQR_SOAK=1") :]
    figures = [
        re.search(pattern, soak, re.S)[1]
        for pattern in (
            r"([\d,]+) tasks\s+acknowledged",
            r"([\d,]+) lost",
            r"([\d,]+) connection-kill\s+rounds",
            r"([\d,]+) pub/sub\s+rounds",
            r"([\d,]+) Redis\s+restarts",
            r"down ([\d.]+–[\d.]+) s",
        )
    ]
    readme = (ROOT / "README.md").read_text()
    section = " ".join(readme[readme.index("### When a worker is presumed dead") :].split("\n## ")[0].split())
    missing = [f for f in figures if f not in section]
    assert missing == [], f"the fault soak's figures missing from README (When a worker is presumed dead): {missing}"
