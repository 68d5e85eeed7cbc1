"""The typed public API: a misspelt or mistyped enqueue option is caught by a type checker in the
caller's code, and at run time by a clear error that names it and writes nothing."""

import subprocess
import sys

import pytest
from django.db import transaction

from queues import Batch, Queue, chain
from queues.engine import keys
from queues.engine.errors import InvalidTask
from queues.models import OutboxTask
from tests.conftest import ROOT


def test_a_misspelt_option_is_refused_by_name_and_writes_nothing(client):
    """`dealy=30` raises InvalidTask "unknown enqueue option 'dealy' (did you mean 'delay'?)", one task or many."""
    for call in (lambda q: q.enqueue("x", dealy=30), lambda q: q.enqueue_many(["x", "y"], retires=2)):
        with pytest.raises(
            InvalidTask, match=r"unknown enqueue option '(dealy|retires)' \(did you mean '(delay|retries)'\?\)"
        ):
            call(Queue("typo"))
    assert client.keys("*{typo}*") == [] and not client.sismember(keys.KNOWN_QUEUES, "typo")


def _in_transaction(call):
    with transaction.atomic():
        return call()


#: Each road an enqueue can take past ``Queue.enqueue_many``'s own check, given one option.
ROADS = {
    "durable": lambda **o: Queue("typo").enqueue("x", durable=True, **o),
    "on_commit in a transaction": lambda **o: _in_transaction(lambda: Queue("typo").enqueue("x", on_commit=True, **o)),
    "validate": lambda **o: Queue("typo").validate(["x"], **o),
    "Batch.enqueue": lambda **o: Batch().enqueue("typo", "x", **o),
    "Batch.enqueue_many": lambda **o: Batch().enqueue_many("typo", ["x", "y"], **o),
    "chain": lambda **o: chain([("typo", "x", o)]),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("road", ROADS)
def test_every_enqueue_road_refuses_a_misspelt_option_by_name(client, road):
    """The outbox, validate, a batch and a chain name a misspelt option too (not "prepare() got an unexpected ...")."""
    with pytest.raises(InvalidTask, match=r"unknown enqueue option 'dealy' \(did you mean 'delay'\?\)"):
        ROADS[road](dealy=30)
    assert client.keys("*{typo}*") == [] and not client.sismember(keys.KNOWN_QUEUES, "typo")
    assert not OutboxTask.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("road", ["durable", "on_commit in a transaction", "Batch.enqueue", "Batch.enqueue_many"])
@pytest.mark.parametrize("control", [{"expires": 60}, {"throttle": ("k", 5)}, {"debounce": ("d", 5)}])
def test_a_task_control_the_road_cannot_take_is_refused_by_name(client, road, control):
    """The outbox and a batch write tasks without the enqueue script's controls: InvalidTask names the control."""
    (name,) = control
    with pytest.raises(InvalidTask, match=rf"^{name}= can't be combined with "):
        ROADS[road](**control)
    assert client.keys("*{typo}*") == [] and not OutboxTask.objects.exists()


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
        "from queues import Batch\n"
        'Batch().enqueue("emails", "x", expires=60)  # a batch takes no task control\n'
        'purged: str = Queue("emails").purge()\n'
        'Queue("emails").run_now("emails-1", where="back")\n'
        "from queues import chain\n"
        'chain([("a", 1)])\n'
        'Queue("emails").get("emails-1").progress("half")  # a Task | None, then a float\n'
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
    assert [line.split(":")[1] for line in lines] == ["2", "3", "4", "7", "10", "12", "13", "14", "16", "17", "17"], (
        done.stdout
    )
    assert 'Unexpected keyword argument "dealy"' in lines[0] and 'did you mean "delay"' in lines[0]
    assert 'Argument "delay"' in lines[1] and '"float"' in lines[1]
    assert '"list[str]"' in lines[2]
    assert 'Argument "retries" to "handler"' in lines[3]
    assert 'expression has type "int"' in lines[4]
    assert 'Unexpected keyword argument "expires"' in lines[5]
    assert 'expression has type "int"' in lines[6] and '"where"' in lines[7]
    assert 'incompatible type "tuple[str, int]"' in lines[8]
    assert '"None" of "Task | None"' in " ".join(lines[9:11]) and 'Argument 1 to "progress"' in " ".join(lines[9:11])
