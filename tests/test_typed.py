"""The typed public API: a misspelt or mistyped enqueue option is caught by a type checker in the
caller's code, and at run time by a clear error that names it and writes nothing."""

import subprocess
import sys

import pytest

from queues import Queue
from queues.engine import keys
from queues.engine.errors import InvalidTask
from tests.conftest import ROOT


def test_a_misspelt_option_is_refused_by_name_and_writes_nothing(client):
    """`dealy=30` raises InvalidTask "unknown enqueue option 'dealy' (did you mean 'delay'?)", one task or many."""
    for call in (lambda q: q.enqueue("x", dealy=30), lambda q: q.enqueue_many(["x", "y"], retires=2)):
        with pytest.raises(
            InvalidTask, match=r"unknown enqueue option '(dealy|retires)' \(did you mean '(delay|retries)'\?\)"
        ):
            call(Queue("typo"))
    assert client.keys("*{typo}*") == [] and not client.sismember(keys.KNOWN_QUEUES, "typo")


def test_mypy_flags_a_misspelt_option_a_wrong_type_and_the_return_type(tmp_path):
    """A project's code checked by mypy against the installed annotations (py.typed)."""
    code = tmp_path / "uses_worqr.py"
    code.write_text(
        "from queues import Queue\n"
        'Queue("emails").enqueue("x", dealy=30)\n'
        'Queue("emails").enqueue("x", delay="soon")\n'
        'count: int = Queue("emails").enqueue_many(["x"])\n'
        'ok: str = Queue("emails").enqueue("x", delay=30, retries=2, tags=["a"], on_parent_failure="run")\n'
        "from queues import handler\n"
        '@handler("emails", retries="3", isolation="process")\n'
        "def send(task) -> int:\n"
        "    return 1\n"
        "kept: str = send(None)  # the decorator keeps the function's type\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--ignore-missing-imports",
            "--follow-imports=silent",
            str(code),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in lines] == ["2", "3", "4", "7", "10"], done.stdout
    assert 'Unexpected keyword argument "dealy"' in lines[0] and 'did you mean "delay"' in lines[0]
    assert 'Argument "delay"' in lines[1] and '"float"' in lines[1]
    assert '"list[str]"' in lines[2]
    assert 'Argument "retries" to "handler"' in lines[3]
    assert 'expression has type "int"' in lines[4]
