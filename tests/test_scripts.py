"""The script loader and the call layer: declared keys and includes are checked, key names built
in Lua are the ones keys.py builds, reply codes and histogram bounds are defined once."""

import pytest

from queues import Queue
from queues.engine import commands, durations, keys, scripts
from queues.engine.codes import Code
from queues.engine.errors import InvalidState, StaleLease, TaskNotFound
from tests.engine_calls import take


def _lua_dir(tmp_path, files):
    (tmp_path / "includes").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_every_script_loads_and_compiles_on_redis(client):
    """Every script file passes the loader's checks and Redis compiles it."""
    loaded = scripts.load_all()
    assert {
        "enqueue",
        "start",
        "finish",
        "fail",
        "stop",
        "release",
        "cancel",
        "delete",
        "retry",
        "register",
        "heartbeat",
        "unregister",
        "pause",
        "purge",
        "drop",
        "wake",
        "counts",
    } <= set(loaded)
    for script in loaded.values():
        assert client.script_load(script.source) == script.sha
        assert "@@" not in script.source, f"{script}: a placeholder was left unfilled"


def test_a_wrong_key_count_is_refused_with_the_file_named(tmp_path):
    """A script whose name's key count differs from its declared keys does not load."""
    d = _lua_dir(tmp_path, {"x-2.lua": "-- Keys: pending\n@@task@@\nreturn 1\n"})
    with pytest.raises(scripts.ScriptError, match=r"x-2\.lua: declares 1 keys but its name says 2"):
        scripts.build(d / "x-2.lua", d)


def test_helpers_nothing_uses_are_left_out_of_a_built_script(tmp_path):
    """Only the include helpers a script uses (or that helpers it uses use) go into its source."""
    # a word that merely starts with a helper's name does not keep it.
    helpers = (
        "local function used(x)\n  return inner(x)\nend\n"
        "local function inner(x) return x end\n"
        "local function unused(x)\n  return only_for_unused(x)\nend\n"
        "local function only_for_unused(x) return x end\n"
        "local function pad(x) return x end\n"
        "local function itself(n)\n  if n > 0 then return itself(n - 1) end\n  return 0\nend\n"
    )
    d = _lua_dir(tmp_path, {"x-1.lua": "-- Keys: pending\n-- @include h\nlocal padding = 1\nreturn used(padding)\n"})
    (d / "includes" / "h.lua").write_text(helpers)
    source = scripts.build(d / "x-1.lua", d).source
    defined = [
        line.split("(")[0].removeprefix("local function ") for line in source.split("\n") if "local function" in line
    ]
    assert defined == ["used", "inner"]


def test_an_unknown_include_is_refused_with_the_file_named(tmp_path):
    """An include that does not exist stops the loader with the include's name."""
    d = _lua_dir(tmp_path, {"x-1.lua": "-- Keys: pending\n-- @include nothere\nreturn 1\n"})
    with pytest.raises(scripts.ScriptError, match=r"x-1\.lua: unknown include 'nothere'"):
        scripts.build(d / "x-1.lua", d)


def test_a_key_used_but_not_declared_is_refused(tmp_path):
    """Code (its own or an include's) that touches a key the script does not declare is refused."""
    d = _lua_dir(tmp_path, {"x-1.lua": "-- Keys: pending\n-- @include h\nreturn 1\n"})
    (d / "includes" / "h.lua").write_text("local function f() return redis.call('LLEN', K.front) end\n")
    with pytest.raises(scripts.ScriptError, match="uses keys it does not declare: front"):
        scripts.build(d / "x-1.lua", d)


@pytest.mark.parametrize(
    "text,message",
    [
        ("-- Keys: pending bogus\nreturn 1\n", "unknown or repeated key kinds"),
        ("-- Keys: pending pending\nreturn 1\n", "unknown or repeated key kinds"),
        ("return 1\n", "must declare its keys once"),
        ("-- Keys: pending\nreturn @@nosuch@@\n", "unknown placeholder @@nosuch@@"),
        ("-- Keys: pending\nreturn K['pending']\n", "never K"),
    ],
)
def test_malformed_scripts_are_refused(tmp_path, text, message):
    """Unknown or repeated key kinds, a missing key list, an unknown placeholder and dynamic key indexing each ..."""
    # ... stop the loader with a message saying so.
    count = len(text.split("\n")[0].split()) - 2 if text.startswith("-- Keys:") else 1
    name = f"x-{count}.lua"
    d = _lua_dir(tmp_path, {name: text})
    with pytest.raises(scripts.ScriptError, match=message):
        scripts.build(d / name, d)


def test_an_include_cycle_is_refused(tmp_path):
    """Two includes including each other stop the loader instead of looping."""
    d = _lua_dir(tmp_path, {"x-1.lua": "-- Keys: pending\n-- @include a\nreturn 1\n"})
    (d / "includes" / "a.lua").write_text("-- @include b\n")
    (d / "includes" / "b.lua").write_text("-- @include a\n")
    with pytest.raises(scripts.ScriptError, match="include cycle a -> b -> a"):
        scripts.build(d / "x-1.lua", d)


def test_the_keys_lua_builds_are_the_keys_keys_py_builds(client):
    """Task, lock, lock wait list, worker and kept-lock keys made by the scripts have exactly the names keys.py ..."""
    # ... gives them, and every queue key is worqr:{<queue>}:<kind>.
    q = Queue("names")
    holder, waiter = q.enqueue_many(["a", "b"], lock="L")
    (task,) = take(client, "names", "w-1")
    assert task.id == holder
    code = commands.fail(
        "names",
        "w-1",
        task.id,
        task.lease,
        "E: x",
        "",
        retries=0,
        backoff=1,
        backoff_max=1,
        jitter=0,
        history=5,
        keep=True,
    ).run(client)
    assert code == Code.FAILED
    expected = {
        keys.task_key("names", holder),
        keys.task_key("names", waiter),
        keys.lock_key("names", "L"),
        keys.lock_wait_key("names", "L"),
        keys.held_locks_key("names", "w-1"),
    }
    present = {k.decode() for k in client.scan_iter(match="worqr:{names}:*")}
    assert expected <= present
    assert keys.held_locks_key("names", "w-1") == "worqr:{names}:held:w-1"
    assert keys.lock_wait_key("names", "L") == "worqr:{names}:lockwait:L"
    queue_keys = {keys.queue_key("names", kind) for kind in keys.QUEUE_KINDS}
    assert present - expected <= queue_keys, present - expected - queue_keys


def test_histogram_bounds_are_defined_once(client):
    """The bounds the scripts count durations under are durations.BUCKETS, as '%g' text."""
    q = Queue("hist")
    q.enqueue("x")
    (task,) = take(client, "hist")
    commands.finish("hist", "w", [(task.id, task.lease, "", False)], result_ttl=0).run(client)
    fields = {k.decode() for k in client.hgetall(keys.queue_key("hist", "durations"))}
    allowed = {f"le:{durations.bound_text(b)}" for b in (*durations.BUCKETS, None)} | {"count", "sum"}
    assert fields <= allowed and "count" in fields and len(fields & allowed - {"count", "sum"}) == 1
    assert f"'{durations.bound_text(durations.BUCKETS[0])}'" in scripts.load_all()["finish"].source


def test_reply_codes_become_typed_errors_naming_script_queue_and_task():
    """A negative reply code turns into the typed error, with the script, queue and task named."""
    err = commands.error_for(Code.STALE, "finish", "emails", "emails-0123456789abcdef")
    assert isinstance(err, StaleLease) and str(err).startswith("finish: task emails-0123456789abcdef of queue emails")
    assert isinstance(commands.error_for(Code.UNKNOWN, "retry", "q", "q-1"), TaskNotFound)
    assert isinstance(commands.error_for(Code.ACTIVE, "delete", "q", "q-1"), InvalidState)
    assert commands.check(Code.COMPLETED, "finish", "q") is Code.COMPLETED
    with pytest.raises(InvalidState, match="delete: task q-1 of queue q: it is running: cancel it instead"):
        commands.check(Code.ACTIVE, "delete", "q", "q-1")
