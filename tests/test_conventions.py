"""The suite's own conventions, checked so they stay true as tests are added."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_says_in_its_docstring_what_it_checks():
    """Every test function has a one-line docstring saying what it checks (details go in comments)."""
    docs = {
        f"{path.name}:{node.lineno} {node.name}": (ast.get_docstring(node) or "").strip()
        for path in sorted(TESTS.glob("test_*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
    }
    missing = [name for name, doc in docs.items() if not doc]
    assert not missing, "tests without a docstring: " + ", ".join(missing)
    long = [name for name, doc in docs.items() if "\n" in doc]
    assert not long, "tests whose docstring is more than one line: " + ", ".join(long)
