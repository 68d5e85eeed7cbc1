"""The code's shape, checked so it stays true: one call layer for the Lua scripts
(``engine.commands``), one reader of Redis for what is shown (``engine.readmodel``), and engine
modules that change each other's state through methods, not by setting attributes."""

import ast
import re
from pathlib import Path

from queues.engine import commands, scripts

ROOT = Path(__file__).resolve().parent.parent


def _lines(paths, pattern):
    """``path:line`` of each line of ``paths`` that ``pattern`` matches."""
    return [
        f"{path.relative_to(ROOT)}:{n}"
        for path in paths
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_each_script_has_its_function_in_commands_and_no_one_else_runs_scripts():
    """Every Lua script has its function in commands; no other module calls a script by its name."""
    # commands is the only place that knows each script's ARGV order (and parses its reply);
    # test_scripts.py tests the loader underneath, with no script call.
    missing = [name for name in scripts.load_all() if not callable(getattr(commands, name, None))]
    assert missing == [], f"scripts with no function in queues/engine/commands.py: {missing}"
    paths = [
        path
        for folder in ("queues", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name not in ("scripts.py", "commands.py")
        # not the virtualenvs `make bench` and `make profile` make in bench/ (.venv, .venv-profile)
        and not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    ]
    callers = _lines(paths, re.compile(r"scripts\.(run|arun|run_pipelined)\("))
    assert callers == [], f"raw script calls outside queues/engine/commands.py: {callers}"


def test_the_dashboard_and_the_api_read_redis_only_through_the_read_model():
    """No module of the dashboard or the HTTP API reads Redis itself: readmodel does, they format."""
    paths = sorted([*(ROOT / "queues" / "dashboard").rglob("*.py"), *(ROOT / "queues" / "api").rglob("*.py")])
    read = re.compile(
        r"\.(hgetall|hget|hmget|hexists|hlen|smembers|sismember|scard|lrange|llen|lindex|zrange\w*|zrev\w*|zcard"
        r"|zscore|zcount|exists|scan\w*|client_list|info|mget|xrange|xlen|ttl|pttl)\("
    )
    readers = _lines(paths, read)
    assert readers == [], f"direct reads of Redis outside queues/engine/readmodel.py: {readers}"


def test_engine_modules_set_no_attribute_of_another_object_s_parts():
    """In the engine, no a.b.c = ... and no x._private = ... on another object: they call methods."""
    found = []
    for path in sorted((ROOT / "queues" / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if not (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)):
                        continue
                    own = isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls")
                    if isinstance(sub.value, ast.Attribute) or (sub.attr.startswith("_") and not own):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(sub)}")
    assert found == [], f"attributes set from outside their object: {found}"
