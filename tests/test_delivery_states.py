"""A delivery's state machine (``queues.engine.worker.delivery``): its one owner changes its state
only along the allowed transitions, refuses the others, and queues the release of what Redis
kept for its handler once, after the handler's end. The worker's behaviour through these states
(timeouts, cancels, shutdown, reaping) is tested with real workers and Redis in test_worker.py,
test_lifecycle.py and test_heartbeat.py."""

import asyncio

import pytest

from queues.conf import build_config
from queues.engine.registry import HandlerSpec
from queues.engine.task import Task
from queues.engine.worker.capsule import Status
from queues.engine.worker.delivery import Deliveries, Delivery, Hold, IllegalTransition, State
from queues.engine.worker.reporter import Reporter


def _delivery(is_async=False, task_id="t1"):
    spec = HandlerSpec(queue="ds", func=lambda task: None, is_async=is_async, isolation="thread")
    return Delivery(Task(id=task_id, queue="ds", lease=3), spec)


def _moves(d):
    """Each transition method, by name, with the arguments it takes."""
    return {
        "launched": lambda: d.launched(_FakeHandle()),
        "report": d.report,
        "time_out": d.time_out,
        "finish": d.finish,
    }


class _FakeHandle:
    """A handler's handle as the processor holds it (a future): done or not."""

    def __init__(self, done=False):
        self._done = done

    def done(self):
        return self._done


#: From each state, the transitions its owner refuses.
REFUSED = {
    State.TAKEN: ["time_out"],
    State.RUNNING: ["launched"],
    State.TIMING_OUT: ["launched", "report", "time_out"],
    State.FINISHING: ["launched", "report", "time_out"],
    State.DONE: ["launched", "report", "time_out", "finish"],
}
#: A way to reach each state from TAKEN.
PATHS = {
    State.TAKEN: [],
    State.RUNNING: ["launched"],
    State.TIMING_OUT: ["launched", "time_out"],
    State.FINISHING: ["launched", "report"],
    State.DONE: ["launched", "report", "finish"],
}


def test_a_delivery_goes_from_taken_to_running_to_finishing_to_done():
    """The usual life: taken, its handler launched, its outcome reported, over; reported from FINISHING on."""
    d = _delivery()
    assert (d.state, d.reported, d.ended, d.hold) == (State.TAKEN, False, False, Hold.NOTHING)
    handle = _FakeHandle()
    d.launched(handle)
    assert (d.state, d.handle, d.reported) == (State.RUNNING, handle, False)
    d.report()
    assert (d.state, d.reported, d.ended) == (State.FINISHING, True, False)
    d.finish()
    assert (d.state, d.reported, d.ended) == (State.DONE, True, True)
    assert d.release_due() is False  # nothing was kept for it


@pytest.mark.parametrize("state", list(State), ids=[s.name for s in State])
def test_each_state_refuses_the_transitions_it_does_not_allow(state):
    """From every state, each transition it does not allow raises IllegalTransition and leaves the state as it was."""
    for name in REFUSED[state]:
        d = _delivery()
        for step in PATHS[state]:
            _moves(d)[step]()
        assert d.state is state
        with pytest.raises(IllegalTransition, match=rf"task t1 \(lease 3\): {state.value} -> "):
            _moves(d)[name]()
        assert d.state is state, name
    allowed = [name for name in ("launched", "report", "time_out", "finish") if name not in REFUSED[state]]
    for name in allowed:  # and the ones it allows go through
        d = _delivery()
        for step in PATHS[state]:
            _moves(d)[step]()
        _moves(d)[name]()
        assert d.state is not state


def test_a_timed_out_delivery_counts_as_reported_and_ends_only_through_finish():
    """A timeout takes a running delivery to TIMING_OUT: reported for everyone else (no second report), then DONE."""
    d = _delivery()
    d.launched(_FakeHandle())
    d.time_out()
    assert (d.state, d.reported) == (State.TIMING_OUT, True)
    with pytest.raises(IllegalTransition):
        d.report()
    d.finish()
    assert d.state is State.DONE


def test_what_was_kept_for_a_running_handler_is_released_once_after_its_end():
    """An outcome sent with keep holds the lock until the handler ends; then its release is due once, and never again."""
    d = _delivery()
    d.launched(_FakeHandle())
    d.report()
    assert d.report_sent(True) is True
    assert d.hold is Hold.KEPT
    assert d.release_due() is False  # its handler still runs
    d.finish()
    assert [d.release_due(), d.release_due()] == [True, False]
    assert d.hold is Hold.RELEASED
    d.refused()  # a refusal after the release changes nothing
    d.report_sent(True)
    assert (d.hold, d.release_due()) == (Hold.RELEASED, False)


def test_a_report_sent_again_after_the_handler_returned_keeps_nothing():
    """Keep is decided at each sending: sent again once the handler returned, nothing is kept and nothing released."""
    d = _delivery()
    d.launched(_FakeHandle())
    d.report()
    d.report_sent(True)
    d.report_sent(False)
    d.finish()
    assert (d.hold, d.release_due()) == (Hold.NOTHING, False)


def test_a_report_refused_as_stale_after_the_end_releases_what_may_be_kept():
    """A report refused as stale after the delivery ended makes the release due (whoever took it may have kept its lock)."""
    d = _delivery()
    d.launched(_FakeHandle(done=True))
    d.report()
    d.report_sent(False)
    d.finish()
    assert d.release_due() is False
    d.refused()
    assert d.hold is Hold.KEPT
    assert [d.release_due(), d.release_due(), d.hold] == [True, False, Hold.RELEASED]


def _table(registered=True, concurrency=2):
    status = Status(grace=1.0)
    status.set_registered(registered)
    reporter = Reporter("w-states", build_config(), None, status.poke)
    return Deliveries(concurrency, status, reporter), status, reporter


def test_the_table_counts_free_slots_only_while_registered():
    """Free slots are the concurrency less what is held, and none while the worker is not registered."""
    table, status, _ = _table(concurrency=2)
    assert table.free_slots() == 2
    d = _delivery()
    table.add(d)
    assert (table.free_slots(), len(table), d.key in table) == (1, 1, True)
    status.set_registered(False)
    assert table.free_slots() == 0
    status.set_registered(True)
    d.finish()
    table.done(d)
    assert (table.free_slots(), len(table), status.changed.is_set()) == (2, 0, True)


def test_a_cancel_that_overtook_its_delivery_stops_it_before_it_starts():
    """A cancel heard before the delivery arrived is kept, and the delivery added later is cancelled at once."""
    table, _, _ = _table()
    assert table.cancel_task("ds", "early") == []
    assert ("ds", "early") in table.early_cancels
    d = _delivery(task_id="early")
    table.add(d)
    assert d.task.cancelled and ("ds", "early") not in table.early_cancels
    assert d.state is State.TAKEN  # the processor then reports it cancelled without starting it


def test_a_cancel_of_a_running_sync_handler_is_reported_at_once_and_an_async_one_is_cancelled():
    """A running sync handler can't be stopped: its cancel is reported now; an async one's handle is cancelled and reports itself."""
    table, _, reporter = _table()
    sync = _delivery(task_id="s")
    table.add(sync)
    sync.launched(_FakeHandle())
    assert table.cancel_task("ds", "s") == [sync]
    assert (sync.state, sync.task.cancelled) == (State.FINISHING, True)
    assert [(d.key, result) for d, result in reporter.acks["ds"]] == [(("s", 3), "")]
    table.cancel(sync)  # a second cancel reports nothing more
    assert len(reporter.acks["ds"]) == 1

    async def async_case():
        d = _delivery(is_async=True, task_id="a")
        table.add(d)
        handle = asyncio.ensure_future(asyncio.sleep(10))
        d.launched(handle)
        table.cancel_task("ds", "a")
        await asyncio.sleep(0)
        return d, handle

    d, handle = asyncio.run(async_case())
    assert (d.state, handle.cancelled(), len(reporter.acks["ds"])) == (State.RUNNING, True, 1)


def test_tasks_taken_back_from_a_worker_presumed_dead_are_stopped_in_those_queues_only():
    """Presumed dead in a queue: the unreported deliveries of that queue are asked to stop, the others run on."""
    table, _, _ = _table(concurrency=3)
    here, elsewhere = _delivery(task_id="here"), _delivery(task_id="other")
    elsewhere.task.queue = "ds-other"
    for d in (here, elsewhere):
        table.add(d)
        d.launched(_FakeHandle())
    table.taken_back(["ds"])
    assert (here.task.cancelled, elsewhere.task.cancelled) == (True, False)
    assert table.unreported() == [here, elsewhere]  # their outcomes are still theirs to report


@pytest.mark.parametrize(
    "fields",
    [
        [b"q-1", b"text \xc3\xa9", b"7", b"2", b"1.5", b"http://cb", b'{"m": 1}', b"4", b"", b"00-ab-cd-01", b"b1"],
        [b"q-2", b"\x00\xff", b"1", b"1", b"0", b"", b"", b"", b"b", b"", b""],
        [b"q-3", b"p", b"3", b"1", b"0", b"", b"", b"", b""],  # an older enqueue's hand-over: 9 fields
    ],
)
def test_a_delivery_s_task_is_the_task_its_fields_describe(fields):
    """task_from_fields builds the same Task as Task(...) with those fields (every other field its default)."""
    from queues.engine.commands import task_from_fields

    f = fields + [b""] * (11 - len(fields))
    expected = Task(
        id=f[0].decode(),
        queue="q",
        payload=f[1] if f[8] == b"b" else f[1].decode("utf-8", "surrogateescape"),
        state="active",
        attempt=int(f[3]),
        lease=int(f[2]),
        timeout=float(f[4]) if float(f[4]) > 0 else None,
        callback=f[5].decode() or None,
        meta=f[6].decode() or None,
        retries=int(f[7]) if f[7] else None,
        trace_context=f[9].decode() or None,
        batch_id=f[10].decode() or None,
    )
    task = task_from_fields("q", fields)
    assert task == expected and vars(task) == vars(expected)
    task.progress_value = 0.5  # its own fields, not the defaults'
    assert task_from_fields("q", fields).progress_value is None
