"""Producer and handler input at its edges: each bad value is refused at the call, naming the
argument, with nothing written; values stored before a bound existed still run."""

import json
import logging
import time

import pytest

from queues.engine import batch_ends, keys, registry, workflows
from queues.engine.batches import Batch
from queues.engine.config import Config
from queues.engine.errors import ConfigurationError, InvalidInput, InvalidTask, RateLimited, RetryLater
from queues.engine.queue import Queue
from queues.engine.registry import handler
from tests import engine_calls
from tests.conftest import wait_for

HUGE = 10**5000  # past the 4,300 digits Python prints


def _nothing(task):
    return None


@pytest.fixture
def handlers():
    """Register handlers for a test (``handlers("q", lock=...)``); removed at its end."""
    made = []

    def register(queue, **options):
        handler(queue, **options)(_nothing)
        made.append(queue)

    yield register
    for queue in made:
        registry._handlers.pop(queue, None)


@pytest.mark.parametrize("retries", [1001, 10**30])
def test_retries_past_a_thousand_are_refused_by_enqueue_handler_and_settings(client, retries):
    """retries above 1,000 (whose 2**attempt backoff is no finite number) is refused everywhere."""
    with pytest.raises(InvalidTask, match="retries must be at most 1,000"):
        Queue("t1").enqueue("x", retries=retries)
    with pytest.raises(ConfigurationError, match="retries must be an integer from 0 to 1,000"):
        handler("edge-retries", retries=retries)(_nothing)
    with pytest.raises(ConfigurationError, match="RETRIES must be an integer from 0 to 1,000"):
        Config.from_mapping({"RETRIES": retries})
    assert client.dbsize() == 0
    assert Queue("t1").get(Queue("t1").enqueue("x", retries=1000)).retries == 1000


def test_a_task_stored_with_thousands_of_retries_and_no_backoff_still_fails_in_the_end(client, workers):
    """Past 1,024 attempts a zero backoff doubled is NaN: the fail script kept its task active for good."""
    q = Queue("t1")
    task_id = q.enqueue(json.dumps({"fail": "always"}), retries=5, backoff=0)
    # as a task enqueued with retries=3000 was stored, on its 2,991st attempt
    client.hset(keys.task_key("t1", task_id), mapping={"r": 3000, "a": 2990})
    w = workers(["t1"])
    task = wait_for(lambda: (t := q.get(task_id)) and t.state == "failed" and t, message="the task to fail for good")
    assert task.attempt == 3001
    assert q.counts()["active"] == 0 and q.counts()["failed"] == 1
    out = w.output()  # the worker's line of each retry (its wait, capped as the script caps it), no error
    assert "error while running task" not in out and "OverflowError" not in out
    assert "attempt=3000/3001 retry_in=0s" in out


@pytest.mark.parametrize(
    "options",
    [
        {"meta": "a\ud800"},
        {"lock": "user:\ud800"},
        {"unique": "\udfff"},
        {"callback": "https://example.com/\ud800"},
        {"tags": ["fine", "bad\ud800"]},
        {"throttle": ("k\ud800", 10)},
        {"debounce": ("k\ud800", 10)},
    ],
)
def test_an_option_holding_a_lone_surrogate_is_refused_before_any_parent_is_linked(client, options):
    """A lone surrogate in an option's text was sent only after after= had linked the parents."""
    q = Queue("t1")
    parent = q.enqueue("parent", delay=100)
    before = sorted(client.keys("*"))
    name = next(iter(options))
    with pytest.raises(InvalidTask, match=f"{name}.*unpaired surrogate"):
        q.enqueue("child", after=[parent], **options)
    assert sorted(client.keys("*")) == before
    assert not client.exists(keys.links_key("t1", parent))


@pytest.mark.parametrize("call", ["enqueue", "enqueue_many", "after"])
def test_a_payload_holding_a_lone_surrogate_is_an_invalid_task(client, call):
    """A text payload holding a surrogate that stands for no byte raises InvalidTask, not UnicodeEncodeError."""
    q = Queue("t1")
    parent = q.enqueue("parent", delay=100)
    before = sorted(client.keys("*"))
    with pytest.raises(InvalidTask, match=r"payload: .*unpaired surrogate \(U\+D800\) at position 1"):
        if call == "enqueue":
            q.enqueue("a\ud800")
        elif call == "enqueue_many":
            q.enqueue_many(["fine", "a\ud800"], retries=1)
        else:
            q.enqueue_many(["a\ud800"], after=[parent])
    assert sorted(client.keys("*")) == before
    assert q.enqueue(b"\xff".decode("utf-8", "surrogateescape"))  # an escaped byte is a payload's own


def test_meta_is_bounded(client):
    """meta is text kept with its task: at most 65,536 characters, as no payload is unbounded."""
    q = Queue("t1")
    with pytest.raises(InvalidTask, match="meta must be a string of at most 65,536 characters"):
        q.enqueue("x", meta="m" * 65537)
    assert client.dbsize() == 0
    task_id = q.enqueue("x", meta="m" * 65536)
    assert q.get(task_id).meta == "m" * 65536


def test_integers_too_long_to_print_get_a_readable_error(client):
    """An int past 4,300 digits made the error message itself raise a bare ValueError."""
    q = Queue("t1")
    for options in ({"delay": HUGE}, {"retries": HUGE}, {"timeout": HUGE}, {"backoff": HUGE}, {"expires": HUGE}):
        with pytest.raises(InvalidTask, match=r"not an integer of [\d,]+ bits"):
            q.enqueue("x", **options)
    with pytest.raises(InvalidInput, match="concurrency must be an integer from 1 to 1000000, not an integer of"):
        q.set_limits(concurrency=HUGE)
    with pytest.raises(InvalidInput, match="rate window must be .* not an integer of"):
        q.set_limits(rate=(5, HUGE))
    with pytest.raises(ConfigurationError, match="timeout must be .* not an integer of"):
        handler("edge-huge", timeout=HUGE)(_nothing)
    with pytest.raises(ConfigurationError, match="must be a finite number, not an integer of"):
        Config.from_mapping({"BACKOFF": HUGE})
    for exc in (lambda: RetryLater(HUGE), lambda: RateLimited(HUGE)):
        with pytest.raises(InvalidInput, match="not an integer of"):
            exc()
    assert client.dbsize() == 0


@pytest.mark.parametrize("lock", ["", "k" * 201, "user:\ud800"])
def test_a_handler_lock_key_every_enqueue_would_refuse_is_refused_at_registration(lock):
    """A handler's lock key is checked as it registers, not at each enqueue of its queue."""
    with pytest.raises(ConfigurationError, match="handler 'edge-lock': lock must be a function or a key"):
        handler("edge-lock", lock=lock)(_nothing)
    assert registry.get_handler("edge-lock") is None


def _raising_lock(task):
    return {"a": "x"}[task.payload]


@pytest.mark.parametrize("payload", ["b", b"a"])
def test_a_lock_function_that_fails_is_an_invalid_task_naming_the_queue(client, handlers, payload):
    """A handler's lock function that raises (or gives no key) refuses the enqueue, as a partition function does."""
    handlers("edge-lockfn", lock=_raising_lock)
    with pytest.raises(InvalidTask, match="queue 'edge-lockfn': the handler's lock function raised KeyError"):
        Queue("edge-lockfn").enqueue(payload)
    assert client.dbsize() == 0


def test_a_batch_callback_its_queue_s_handler_refuses_is_refused_when_the_batch_opens(client, handlers):
    """Batch() checks each callback with its queue's handler; it used to fail in every worker's sweep."""
    handlers("edge-cb", lock=_raising_lock)
    with pytest.raises(InvalidTask, match="on_complete: queue 'edge-cb': the handler's lock function raised"):
        Batch(on_complete=("edge-cb", "b"))
    with pytest.raises(InvalidTask, match="on_success: payload: .*unpaired surrogate"):
        Batch(on_success=("t1", "\ud800"))
    with pytest.raises(InvalidTask, match="description: .*unpaired surrogate"):
        Batch(description="\ud800")
    assert client.dbsize() == 0


def test_a_callback_refused_at_the_batch_s_end_stays_due_and_the_cancel_that_ended_it_returns(client, handlers, caplog):
    """A callback the handler (changed since the batch opened) refuses is logged and kept due; the cancel returns."""
    batch = Batch(on_complete=("edge-cb", "b"))
    task_id = batch.enqueue("t1", "x")
    batch.close()
    handlers("edge-cb", lock=_raising_lock)
    with caplog.at_level(logging.ERROR, logger="worqr"):
        assert Queue("t1").cancel(task_id)
    assert "its complete callback is not enqueued" in caplog.text
    assert client.zscore(keys.BATCHES_DUE, batch.id) is not None
    now = int(time.time() * 1000) + 10_000
    batch_ends.sweep(client, now)  # tried again, put back in line (not in the way of the others)
    assert client.zscore(keys.BATCHES_DUE, batch.id) == now
    registry._handlers.pop("edge-cb")  # the handler fixed: the next sweep enqueues it
    batch_ends.sweep(client, now + 10_000)
    assert client.zscore(keys.BATCHES_DUE, batch.id) is None
    assert Queue("edge-cb").counts()["enqueued"] == 1


def test_a_callback_refused_for_six_days_is_given_up_before_its_sibling_could_fire_twice(client, handlers, caplog):
    """A callback refused for 6 days is given up, logged: past the 7 days of the once keys, the other callback would be enqueued again."""
    batch = Batch(on_success=("edge-ok", "fine"), on_complete=("edge-cb", "b"))
    batch.enqueue("t1", "x")
    batch.close()
    handlers("edge-ok")
    handlers("edge-cb", lock=_raising_lock)
    finished = int(time.time() * 1000)
    with caplog.at_level(logging.ERROR, logger="worqr"):
        engine_calls.finish(client, engine_calls.take(client, "t1")[0])  # its only task completes
        workflows.drain_all(client, "t1")  # the batch is told: it succeeded; its complete callback refused
        assert client.zscore(keys.BATCHES_DUE, batch.id) is not None
        assert Queue("edge-ok").counts()["enqueued"] == 1
        batch_ends.sweep(client, finished + batch_ends.GIVE_UP_MS - 60_000)  # still tried
        assert client.zscore(keys.BATCHES_DUE, batch.id) is not None
        batch_ends.sweep(client, finished + batch_ends.GIVE_UP_MS + 60_000)
    assert client.zscore(keys.BATCHES_DUE, batch.id) is None
    assert "giving its callbacks up, 6 days after it finished" in caplog.text
    assert Queue("edge-ok").counts()["enqueued"] == 1 and Queue("edge-cb").counts()["enqueued"] == 0


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"FAILURE_HISTORY": 10**30}, "FAILURE_HISTORY must be an integer from 1 to 10,000"),
        ({"FAILURE_HISTORY": 0}, "FAILURE_HISTORY must be an integer from 1 to 10,000"),
        ({"BACKOFF_JITTER": 1e300}, "BACKOFF_JITTER must be a fraction from 0 to 1"),
        ({"BACKOFF_JITTER": -2}, "BACKOFF_JITTER must be a fraction from 0 to 1"),
        ({"BACKOFF": 1e300}, "BACKOFF and BACKOFF_MAX must be from 0 to"),
        ({"BACKOFF_MAX": 1e300}, "BACKOFF and BACKOFF_MAX must be from 0 to"),
    ],
)
def test_settings_the_scripts_cannot_use_are_refused(setting, message):
    """FAILURE_HISTORY past what LTRIM takes made every failure's script stop midway; the backoffs are bounded."""
    with pytest.raises(ConfigurationError, match=message):
        Config.from_mapping(setting)


def test_retry_later_takes_what_float_takes_and_refuses_the_rest():
    """RetryLater takes a Retry-After header's text or a Decimal, as float() does; text that is no number, or a huge int, is refused readably."""
    from decimal import Decimal

    assert RetryLater("30").seconds == 30.0 and RetryLater(Decimal("2.5")).seconds == 2.5
    assert RetryLater(-3).seconds == 0.0
    for bad in ("soon", None, HUGE):
        with pytest.raises(InvalidInput, match="RetryLater: the wait must be a finite number of seconds"):
            RetryLater(bad)
