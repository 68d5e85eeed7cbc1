"""The failure history's grouping by message shape (``dashboard/failures.py``) stays linear in the
size of the messages: a message is any text a handler or a webhook receiver chose (issue 32)."""

import random
import re
import time

from queues.dashboard.failures import group_failures, message_shape
from queues.engine.task import Task
from queues.webhooks import DeliveryFailed, judge

#: The pattern the shapes were found with before: the reference for what is a quoted string.
QUOTED_BEFORE = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")


def best_of(runs, func, *args):
    """The least CPU time this thread spent in one of ``runs`` calls: the work of the call itself,
    which the rest of the machine does not stretch (a thread waiting for a core counts nothing; wall
    time under a CPU hog once gave 59 ms to a 4 ms call, in each of three tries)."""
    best = float("inf")
    for _ in range(runs):
        started = time.thread_time()
        func(*args)
        best = min(best, time.thread_time() - started)
    return best


def webhook_error(body):
    """The error a failed delivery records when the receiver answers HTTP 500 with ``body``."""
    task = Task(id="hooks-0123456789abcdef", queue="hooks", payload="{}", state="active")
    try:
        judge(task, "https://hooks.example.com/in", 500, {}, body)
    except DeliveryFailed as exc:
        return f"DeliveryFailed: {exc}"
    raise AssertionError("a 500 reply was judged a success")


def test_shapes_replace_the_quoted_strings_the_former_pattern_found():
    """On 3,000 random texts of quotes, backslashes, newlines and letters the shape is the former pattern's."""
    rng = random.Random(32)
    for _ in range(3000):
        text = "".join(rng.choice("''\"\"\\\\\nab ") for _ in range(rng.randrange(0, 40)))
        expected = re.sub(r"\s+", " ", QUOTED_BEFORE.sub("'…'", text)).strip()[:300]
        assert message_shape(text) == expected, repr(text)


def test_an_unclosed_run_of_escaped_quotes_costs_what_plain_text_of_its_size_costs():
    """8,000 characters of \\' (unclosed) are shaped within 20 times the time of 8,000 plain characters."""
    # Quadratic before: each of the 4,000 quotes was tried again up to the end (about 1 s here,
    # against 1 ms for the plain text); linear now (about 1.4 times the plain text's time). Measured
    # against plain text of the same size in the same run, in CPU time (best_of).
    escaped, plain = "\\'" * 4000, "ab 12 " * 1333
    for text in (escaped, '\\"' * 4000, "'" + "\\'" * 4000, escaped + '"' + escaped):
        assert best_of(3, message_shape, text) < 20 * max(best_of(3, message_shape, plain), 1e-4), text[:20]


def test_a_webhook_receivers_500_bodies_group_in_time_linear_in_their_size():
    """100 failures quoting a 500 reply of escaped quotes group within 5 times the time of plain replies."""
    # A receiver chooses its reply, so this needs no handler's help; the delivery quotes 1 KiB.
    quotes = [{"error": webhook_error(b"\\'" * 2000), "failed_at": i} for i in range(100)]
    plain = [{"error": webhook_error(b"ab 12 " * 700), "failed_at": i} for i in range(100)]
    assert len(quotes[0]["error"]) > 1000
    assert best_of(3, group_failures, quotes) < 5 * best_of(3, group_failures, plain)
    assert [g["count"] for g in group_failures(quotes)] == [100]
