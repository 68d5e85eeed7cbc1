"""The code's shape, checked so it stays true: one call layer for the Lua scripts
(the ``engine.commands`` package), one reader of Redis for what is shown (the ``engine.readmodel`` package),
which only reads, and engine modules that change each other's state through methods, not by
setting attributes."""

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
    assert missing == [], f"scripts with no function in queues/engine/commands/: {missing}"
    layer = ROOT / "queues" / "engine" / "commands"
    paths = [
        path
        for folder in ("queues", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "scripts.py"
        and layer not in path.parents
        # not the virtualenvs `make bench` and `make profile` make in bench/ (.venv, .venv-profile)
        and not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    ]
    callers = _lines(paths, re.compile(r"scripts\.(run|arun|run_pipelined)\("))
    assert callers == [], f"raw script calls outside queues/engine/commands/: {callers}"


def test_the_dashboard_and_the_api_read_redis_only_through_the_read_model():
    """No module of the dashboard or the HTTP API reads Redis itself: the readmodel package does, they format."""
    paths = sorted([*(ROOT / "queues" / "dashboard").rglob("*.py"), *(ROOT / "queues" / "api").rglob("*.py")])
    read = re.compile(
        r"\.(hgetall|hget|hmget|hexists|hlen|smembers|sismember|scard|lrange|llen|lindex|zrange\w*|zrev\w*|zcard"
        r"|zscore|zcount|exists|scan\w*|client_list|info|mget|xrange|xlen|ttl|pttl)\("
    )
    readers = _lines(paths, read)
    assert readers == [], f"direct reads of Redis outside queues/engine/readmodel/: {readers}"


#: The scripts the read model may run: ``counts`` reads a queue's counts at once and writes nothing.
READ_SCRIPTS = {"counts", "run_pipelined"}
#: Methods named like a write command that are Python's own when called so (``list.append(x)``,
#: ``list.sort(key=...)``, ``dict.copy()``, ``Event.set()``): (positional arguments, keywords
#: allowed).
_PYTHON_TWINS = {"append": (1, set()), "sort": (0, {"key", "reverse"}), "copy": (0, set()), "set": (0, set())}


def redis_write_methods(client):
    """The redis-py method names of every command the Redis server flags as a write (its COMMAND
    table, subcommands included: ``xgroup|create`` is ``xgroup_create``; DEL is ``delete``), and
    of the commands that change state without that flag (PUBLISH, scripts and functions)."""
    names = set()
    for name, info in client.command().items():
        if "write" in info["flags"]:
            names.add(name)
        for sub in info.get("subcommands") or []:
            if b"write" in sub[2]:
                names.add(sub[0].decode().replace("|", "_"))
    names = {n.replace("-", "_") for n in names} - {"del"}
    return names | {"delete", "publish", "spublish", "eval", "evalsha", "fcall", "script_load", "execute_command"}


def write_calls(source, writes):
    """``line name`` of each call in ``source`` of a method in ``writes`` (unless it is called as
    Python's twin of that name is), of a script of ``commands`` other than ``READ_SCRIPTS``, and
    of anything of ``scripts``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").rpartition(".")[2] in ("commands", "scripts"):
            found += [f"{node.lineno} {node.module}.{a.name}" for a in node.names if a.name not in READ_SCRIPTS]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            layer = node.value.id
            if layer == "scripts" or (layer == "commands" and node.attr not in READ_SCRIPTS):
                found.append(f"{node.lineno} {layer}.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in writes:
            twin = _PYTHON_TWINS.get(node.func.attr)
            keywords = {k.arg for k in node.keywords}
            if twin and len(node.args) == twin[0] and keywords <= twin[1]:
                continue
            found.append(f"{node.lineno} {node.func.attr}")
    return sorted(found, key=lambda hit: int(hit.split()[0]))


def test_the_read_model_sends_no_write_command(client):
    """No module of the readmodel package sends a Redis write command, nor runs a script but counts."""
    writes = redis_write_methods(client)
    found = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path in sorted((ROOT / "queues" / "engine" / "readmodel").rglob("*.py"))
        for hit in write_calls(path.read_text(), writes)
    ]
    assert found == [], f"writes in the read model (they belong to queues/engine/upkeep.py): {found}"


def test_the_write_finder_finds_writes_and_not_python_s_own_methods(client):
    """The checker above sees writes (a pipeline's, a client's, a write script) and not list.append or sort."""
    writes = redis_write_methods(client)
    assert {"hset", "srem", "delete", "set", "lpush", "zadd", "expire", "xgroup_create"} <= writes
    assert not {"get", "hgetall", "zrange", "lrange", "smembers", "exists", "pttl", "time"} & writes
    planted = (
        "p.hsetnx(k, 'm1', 3)\nclient.srem(k, n)\nclient.set(k, 1, nx=True, px=5)\ncommands.enqueue(q).run(c)\n"
        "from ..commands import push\nout.append(x)\nout.sort(key=len)\nevent.set()\ncommands.counts(q).run(c)\n"
    )
    assert write_calls(planted, writes) == [
        "1 hsetnx",
        "2 srem",
        "3 set",
        "4 commands.enqueue",
        "5 commands.push",
    ]


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


def _module_names():
    """Every module of ``queues/``: its dotted name and its path."""
    names = {}
    for path in sorted((ROOT / "queues").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph():
    """``{module: {imported module, ...}}`` for ``queues/``, imports inside functions included.
    ``from p import x`` is an edge to ``p.x`` when that is a module, else to ``p``."""
    names, graph = _module_names(), {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in names else base
                    if target in names and target != name:
                        edges.add(target)
    return graph


def import_cycles(graph):
    """The strongly connected components of ``graph`` with more than one module (Tarjan)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_queues_has_no_import_cycle():
    """No import cycle in queues/, counting imports inside functions (a cycle there is only hidden)."""
    cycles = import_cycles(import_graph())
    assert cycles == [], f"import cycles in queues/: {cycles}"


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    """The checker above sees a two-module cycle and a three-module one, and no cycle in a chain."""
    assert import_cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


MODULE_LINES_MAX = 500


def test_no_module_of_queues_is_over_500_lines():
    """Every module of queues/ is at most 500 lines."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in _module_names().values()
        if (n := len(path.read_text().splitlines())) > MODULE_LINES_MAX
    }
    assert long == {}, f"modules of queues/ over {MODULE_LINES_MAX} lines: {long}"


def _imports_in_functions(path):
    """The import statements of ``path`` that sit inside a function."""
    return [
        node
        for fn in ast.walk(ast.parse(path.read_text()))
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


def _says_why(lines, node):
    """True when the import ``node`` has a comment, or a comment line is just above it (or above the
    imports just above it)."""
    if any("#" in line for line in lines[node.lineno - 1 : node.end_lineno]):
        return True
    for line in reversed(lines[: node.lineno - 1]):
        if line.strip().startswith("#"):
            return True
        if not line.strip().startswith(("from ", "import ")):
            return False
    return False


def test_imports_inside_functions_outside_the_engine_say_why():
    """Outside the engine, an import inside a function has a comment on it or just above it."""
    # Why one is there: Django's app registry is not ready when the module is imported (models), an
    # optional or costly third-party package, the engine kept free of Django. Never to dodge an
    # import cycle (the cycle test above counts these imports too).
    silent = [
        f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}"
        for path in sorted((ROOT / "queues").rglob("*.py"))
        if "engine" not in path.relative_to(ROOT).parts
        for node in _imports_in_functions(path)
        if not _says_why(path.read_text().splitlines(), node)
    ]
    assert silent == [], f"imports inside functions with no comment saying why: {silent}"


#: The project around the package: none of it is in the wheel (tests/test_package.py).
NOT_IN_THE_WHEEL = ("worqr_site", "sample", "tests", "bench", "chaos", "scripts")


def test_the_package_imports_nothing_of_the_project_around_it():
    """No module of queues/ imports the demo site, the tests, the benchmarks or the chaos soak."""
    found = []
    for path in sorted((ROOT / "queues").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {name}"
                for name in names
                if name.split(".")[0] in NOT_IN_THE_WHEEL
            ]
    assert found == [], f"modules of the package importing the project around it: {found}"
