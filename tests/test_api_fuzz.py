"""Property-based fuzzing of POST /api/tasks: whatever the body, the answer is 201 or a JSON
4xx (never a 500), and Redis holds either one complete task or nothing at all."""

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from queues.engine import keys, task
from queues.models import AuditLog
from tests.support.api import Api, make_token

pytestmark = pytest.mark.django_db

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
numbers = st.one_of(
    st.integers(min_value=-5, max_value=100),
    st.floats(min_value=-1, max_value=1e13),
    st.sampled_from([0, 0.0, 1e-300, 10**30, 315360000, 315360001]),
    json_values,
)
queues = st.one_of(
    st.sampled_from(["t1", "orders", "a.b-c@d+e", "x" * 200, "x" * 201, "bad:q", "{q}", " q"]),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,20}", fullmatch=True),
    st.text(max_size=25),
    json_values,
)
callbacks = st.one_of(
    st.sampled_from(
        [
            "http://127.0.0.1:8080/hook",
            "https://localhost/x?y=1",
            "http://10.0.0.1/",
            "ftp://127.0.0.1/",
            "http://127.0.0.1:0/",
            "http://[::1/",
            "http://u:p@127.0.0.1/",
            "http://127.0.0.1/\n",
            "javascript:alert(1)",
        ]
    ),
    st.text(max_size=40),
    json_values,
)
payloads = st.one_of(st.text(max_size=200), st.sampled_from(["", "x" * 1000, "é" * 501]), json_values)
FIELDS = {
    "queue": queues,
    "topic": queues,
    "payload": payloads,
    "content": payloads,
    "delay": numbers,
    "retries": numbers,
    "retry": numbers,
    "timeout": numbers,
    "backoff": numbers,
    "callback": callbacks,
}
VALID = {
    "delay": st.one_of(st.integers(0, 1000), st.floats(0, 1e6)),
    "retries": st.integers(0, 10),
    "timeout": st.floats(0.001, 100),
    "backoff": st.floats(0, 10),
    "callback": st.sampled_from(["http://127.0.0.1:8080/hook", "https://localhost/x?y=1"]),
}
good_queues = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,20}", fullmatch=True)
valid_bodies = st.tuples(
    st.just(("queue", "payload")),
    good_queues,
    st.text(max_size=200),
    st.fixed_dictionaries({}, optional=VALID),
).map(lambda t: {t[0][0]: t[1], t[0][1]: t[2], **t[3]})
wild_bodies = st.fixed_dictionaries({}, optional=FIELDS).flatmap(
    lambda known: st.dictionaries(st.text(max_size=8), json_values, max_size=2).map(lambda extra: {**extra, **known})
)
mutated_bodies = st.tuples(valid_bodies, st.one_of(st.sampled_from(list(FIELDS)), st.text(max_size=8))).flatmap(
    lambda t: FIELDS.get(t[1], json_values).map(lambda value: {**t[0], t[1]: value})
)
bodies = st.one_of(valid_bodies, mutated_bodies, wild_bodies)


def _raw(body):
    """Encode with NaN/Infinity as Python writes them (invalid JSON the server must refuse)."""
    return json.dumps(body)


@pytest.fixture
def setup(settings, conn):
    from queues.engine import connection

    settings.WORQR = {**settings.WORQR, "CALLBACK_ALLOWED_HOSTS": ["127.0.0.1", "localhost"]}
    connection.configure(conn.config.with_(max_payload_bytes=1000), conn.url)
    return Api(make_token("enqueue_task"))


def check_redis(client, response, sent):
    if response.status_code != 201:
        assert client.dbsize() == 0, client.keys("*")
        return
    tid = response.json()["id"]
    queue = keys.queue_from_task_id(tid)
    task_keys = client.keys("worqr:*:task:*")
    assert [k.decode() for k in task_keys] == [keys.task_key(queue, tid)]
    h = client.hgetall(keys.task_key(queue, tid))
    assert b"c" in h
    payload = sent.get("payload", sent.get("content"))
    assert task.payload_from_hash(h).decode() == payload
    if h.get(b"s", b"pending") == b"pending":  # a pending task is written without "s"
        assert client.lrange(keys.queue_key(queue, "pending"), 0, -1) == [tid.encode()]
    else:
        assert h[b"s"] == b"delayed" and client.zscore(keys.queue_key(queue, "delayed"), tid) is not None


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(body=bodies)
def test_create_body_fuzz(setup, client, body):
    """Generated create bodies are either accepted (exactly one task written, audited) or refused cleanly ..."""
    # ... (nothing written).
    client.flushall()
    before = AuditLog.objects.count()
    r = setup.post("/api/tasks", _raw(body))
    assert r.status_code in (201, 400, 413), (r.status_code, r.content, body)
    event(f"HTTP {r.status_code}")
    assert r["Content-Type"] == "application/json" and (r.status_code == 201 or r.json()["error"])
    check_redis(client, r, body)
    assert AuditLog.objects.count() == before + (r.status_code == 201)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(str.encode),
        st.tuples(
            st.sampled_from(['{"queue": "t1", "payload": ', '{"topic": "t1", "content": ', "[", '{"queue": ']),
            st.sampled_from(['"\\ud800"}', '"\\udc80"}', '"ok"}', '"x"', "1e999}", "-0}", '"\\u0000"}', "{}"]),
        ).map(lambda parts: "".join(parts).encode()),
    )
)
def test_raw_body_fuzz(setup, client, raw):
    """Arbitrary raw bodies never cause a 500 and write nothing unless accepted."""
    client.flushall()
    r = setup.post("/api/tasks", raw)
    assert r.status_code in (201, 400, 413) or (r.status_code == 415 and not raw), (r.status_code, r.content, raw)
    if r.status_code == 201:
        assert len(client.keys("worqr:*:task:*")) == 1
    else:
        assert client.dbsize() == 0
