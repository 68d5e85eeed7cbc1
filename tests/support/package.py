"""The package's and the guides' test helpers."""

import re

from tests.conftest import ROOT

README_SECTION = "## Use worqr in your own project"


def readme_files():
    """The files README's "Use worqr in your own project" shows: {path: (text, append?)}."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(README_SECTION) :]
    section = section[: section.index("\n## ", 1)]
    files = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        header, _, body = block.partition("\n")
        match = re.fullmatch(r"# (\S+): (add at the end|replaces the generated file|a new file)", header)
        assert match, f"a README block without a '# <file>: <what to do with it>' header: {header!r}"
        files[match[1]] = (body, match[2] == "add at the end")
    return files, section
