"""The library's layers: no import circle, no module importing one above it, every module
importable on its own. The layer table is the one `docs/architecture.md` explains. The
benchmark (`durables_bench`) ships beside the library, not in it: the library never imports
it nor the CLI, and the benchmark keeps the same rules within itself."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durables

ROOT = Path(durables.__file__).parent
_BENCH = importlib.util.find_spec("durables_bench")
assert _BENCH is not None and _BENCH.submodule_search_locations
PACKAGES = {"durables": ROOT, "durables_bench": Path(_BENCH.submodule_search_locations[0])}
"""The library, and the benchmark beside it (found without importing it)."""
BESIDE = ("durables_bench", "durables_cli")
"""Programs shipped beside the library, which it never imports."""

LAYERS: dict[str, int] = {
    # 0: the error tree
    "errors": 0,
    # 1: pure foundations: names, keys, ids, settings, selectors, events, records, replies
    "ids": 1, "names": 1, "keys": 1, "settings": 1, "cache": 1, "records": 1, "urls": 1,
    "producers": 1, "events": 1, "reply_parsers": 1, "first_contact": 1, "scripts": 1,
    "server_health": 1, "permissions": 1, "verdicts": 1, "attachments": 1, "options": 1,
    "key_hash": 1,
    "selector": 1, "selector.lexer": 1, "selector.tree": 1, "selector.parser": 1,
    "server": 1, "server.config": 1, "server.processes": 1, "server.embedded": 1,
    "io.routing": 1,
    # 2: operations as plain data, and the readers' state machines (no I/O)
    "ops": 2, "ops.base": 2, "ops.channels": 2, "ops.durables": 2, "ops.cleanup": 2,
    "ops.sessions": 2, "ops.flows": 2, "ops.server_info": 2, "ops.audit": 2,
    "readers.exclusive.cursor": 2, "readers.shared.handout": 2,
    "readers.shared.handout_replies": 2, "readers.shared.ledger": 2,
    "readers.shared.handout_ops": 2,
    # 3: sending (io/ and its asyncio twin io/aio/), and the memory:// store
    "io": 3, "io.transport": 3, "io.cluster": 3, "io.recovery": 3, "io.connections": 3,
    "io.executor": 3, "io.leases": 3, "io.runtime": 3, "io.context": 3, "memory": 3,
    "io.aio": 3, "io.aio.transport": 3, "io.aio.connections": 3, "io.aio.cluster": 3,
    "io.aio.executor": 3, "io.aio.runtime": 3, "io.aio.context": 3,
    # 4: readers and stores over a context
    "readers": 4, "readers.base": 4, "readers.fetching": 4,
    "readers.exclusive": 4, "readers.exclusive.reader": 4,
    "readers.shared": 4, "readers.shared.reader": 4,
    "consumer": 4, "subscription": 4, "aio.consumer": 4,
    "retention": 4, "publishing": 4, "dead_letters": 4, "audit": 4,
    "sessions": 4, "sessions.store": 4, "sessions.delivery": 4, "sessions.core": 4,
    # 5: the public objects
    "durable": 5, "channel": 5, "session": 5, "housekeeping": 5, "figures": 5,
    "aio.durable": 5, "aio.channel": 5, "aio.session": 5,
    # 6: the front door
    "client": 6, "": 6, "aio.client": 6, "aio": 6,
    # 7: programs built on the public API
    "spark": 7, "metrics": 7, "testing": 7, "console": 7,
}  # fmt: skip


@functools.cache
def modules(package: str = "durables") -> dict[str, Path]:
    """A package's modules by their name inside it ("" for the package itself)."""
    root = PACKAGES[package]
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def module_names(package: str = "durables") -> Iterator[tuple[str, Path]]:
    yield from modules(package).items()


def layer(module: str) -> int:
    """A module's layer: its own entry, else its package's (spark.*, console.*)."""
    probe = module
    while probe not in LAYERS:
        if "." not in probe:
            raise AssertionError(f"durables.{module} has no layer: add it to LAYERS and the docs")
        probe = probe.rsplit(".", 1)[0]
    return LAYERS[probe]


def _resolve(
    module: str, is_package: bool, node: ast.ImportFrom, package: str = "durables"
) -> list[str]:
    """The modules of `package` an `import from` names (relative or absolute)."""
    if node.level:
        base = module.split(".") if module else []
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        stem = ".".join(base + ([node.module] if node.module else []))
    elif node.module and (node.module == package or node.module.startswith(f"{package}.")):
        stem = node.module.removeprefix(package).lstrip(".")
    else:
        return []
    found = []
    for alias in node.names:
        child = f"{stem}.{alias.name}" if stem else alias.name
        found.append(child if child in modules(package) else stem)
    return found


def imports(module: str, path: Path, package: str = "durables") -> set[str]:
    """Every module of `package` that `module` imports, TYPE_CHECKING blocks included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.update(_resolve(module, path.name == "__init__.py", node, package))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(f"{package}."):
                    found.add(alias.name.removeprefix(package).lstrip("."))
    found.discard(module)
    return found


def graph(package: str = "durables") -> dict[str, set[str]]:
    return {module: imports(module, path, package) for module, path in module_names(package)}


def test_no_module_imports_one_above_it() -> None:
    upward = [
        f"durables.{m or '__init__'} (layer {layer(m)}) imports durables.{t} (layer {layer(t)})"
        for m, targets in graph().items()
        for t in targets
        if layer(t) > layer(m)
    ]
    assert upward == []


@pytest.mark.parametrize("package", PACKAGES)
def test_there_is_no_import_cycle(package: str) -> None:
    edges = graph(package)
    state: dict[str, int] = {}  # 1 on the path, 2 done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


@pytest.mark.parametrize("package", PACKAGES)
def test_the_library_imports_nothing_inside_functions(package: str) -> None:
    """Imports of our own modules sit at the top (optional third-party ones may be lazy)."""
    late = []
    for module, path in module_names(package):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (
                    node.level > 0 or (node.module or "").startswith("durables")
                ):
                    late.append(f"{package}.{module}:{node.lineno}")
    assert late == []


NEEDS_SPARK = ("durables.spark", "durables_bench.spark_bare")
"""Modules that need the optional pyspark and pyarrow (the memory:// pass has neither)."""


def importable(package: str) -> list[str]:
    """The full names of a package's modules, but those that need Spark."""
    names = [f"{package}.{m}" if m else package for m, _ in module_names(package)]
    return [name for name in names if not name.startswith(NEEDS_SPARK)]


def test_every_class_that_declares_abstract_methods_is_abstract() -> None:
    """A class with `@abstractmethod`s that is not an ABC can be made without them, and
    the missing method fails only when called."""
    loose = []
    for name in [*importable("durables"), *importable("durables_bench")]:
        for cls in vars(importlib.import_module(name)).values():
            ours = isinstance(cls, type) and cls.__module__.startswith("durables")
            declares = ours and any(
                getattr(v, "__isabstractmethod__", False) for v in vars(cls).values()
            )
            if declares and not inspect.isabstract(cls):
                loose.append(f"{cls.__module__}.{cls.__qualname__}")
    assert loose == []


def test_only_the_asyncio_client_imports_the_asyncio_client() -> None:
    """`durables.aio` is opt-in: the sync library never loads it (nor redis.asyncio). The
    pytest plugin (`testing`) is no part of the library: it has fixtures of both clients; the
    web console (`durables.console`, an asyncio program of its own) is built on it."""
    users = [
        m
        for m, targets in graph().items()
        if not m.startswith(("aio", "console"))
        and any(t == "aio" or t.startswith("aio.") for t in targets)
        and m != "testing"
    ]
    assert users == []


def test_the_layer_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a low module that imports the client is reported."""
    fake = tmp_path / "keys.py"
    fake.write_text("from .client import Client\n", encoding="utf-8")
    assert imports("keys", fake) == {"client"}
    assert layer("client") > layer("keys")


ALONE = """
import importlib, os, sys, types
import click, pydantic, pydantic_settings, redis, rich  # third-party, loaded once
root, names = sys.argv[1], sys.argv[2:]
failed = []
for name in names:
    pid = os.fork()
    if pid == 0:  # a child with none of durables imported yet
        try:
            if name.startswith("durables."):
                # the package without its __init__ (which imports everything): the module
                # gets exactly what it imports itself
                package = types.ModuleType("durables")
                package.__path__ = [root]
                sys.modules["durables"] = package
            importlib.import_module(name)
        except BaseException as exc:
            print(f"{name}: {exc!r}", flush=True)
            os._exit(1)
        os._exit(0)
    if os.waitpid(pid, 0)[1] != 0:
        failed.append(name)
sys.exit(1 if failed else 0)
"""


def test_each_module_imports_alone() -> None:
    """Each module in a fresh process of its own (forked before any of durables is loaded),
    so a module that only works after another was imported first is found. The benchmark's
    are imported whole: they are built on the library's public package."""
    names = [n for n in importable("durables") if n != "durables"] + importable("durables_bench")
    done = subprocess.run(
        [sys.executable, "-c", ALONE, str(ROOT), *names],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_the_library_imports_neither_the_benchmark_nor_the_cli() -> None:
    """They ship beside it, as programs on top: no library module names them, and importing
    every one of them loads neither."""
    named = [
        f"durables.{module}:{node.lineno}"
        for module, path in module_names()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.Import) and any(a.name.startswith(BESIDE) for a in node.names))
        or (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(BESIDE))
    ]
    assert named == []
    probe = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({BESIDE!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *importable("durables")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]"


LOCKING = (
    "readers",
    "sessions",
    "session",
    "aio.session",
    "consumer",
    "aio.consumer",
    "subscription",
)
"""Where a reader's or a session's lock is taken: these modules and those inside these
packages (every module of `readers/`, each checked on its own)."""


def locking_modules() -> list[str]:
    return [m for m in modules() if m in LOCKING or m.startswith(tuple(p + "." for p in LOCKING))]


WAITING = frozenset(
    {"drive", "run", "run_all", "send", "execute", "recover", "sleep", "pause", "wait", "join"}
)
"""Calls that wait on the server or the clock: a flow driven (`executor.drive`), operations
sent (`run`, `run_all`, `send`, a pipeline's `execute`), an outage waited out (`recover`), a
sleep or pause, a wait on an event or a thread."""

PURE = "state"
"""A reader's state machine (`self.state`): layer 2, so without I/O (the layer test keeps it
so); what it is called for under a lock only changes state and builds operations."""


def _called(call: ast.Call) -> tuple[str, str]:
    """(receiver, name) of a call: ("self.reader", "commit"), ("", "sleep") for `sleep()`."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return ast.unparse(func.value), func.attr
    return "", ast.unparse(func)


def _waits(call: ast.Call, known: frozenset[str]) -> bool:
    """Whether `call` waits: one of `WAITING`, or a method `known` to make a round trip,
    on anything but a state machine."""
    receiver, name = _called(call)
    if receiver.rsplit(".", 1)[-1] == PURE:
        return False
    return name in WAITING or name in known


FUNCTION = ast.FunctionDef | ast.AsyncFunctionDef
PLAIN = frozenset(name for kind in (set, list, dict, threading.Thread) for name in dir(kind))
"""Names of containers' and threads' own methods (`set.add`, `Thread.start`): a method of
ours by the same name is no reason to suspect every call of it."""


def _sends(call: ast.Call, mine: set[str]) -> bool:
    """Whether `call` has an executor send or drive, or is a method of the same class that
    does (`mine`)."""
    receiver, name = _called(call)
    return (receiver.endswith("executor") and name in WAITING) or (
        receiver == "self" and name in mine
    )


@functools.cache
def round_trips() -> frozenset[str]:
    """Methods of the library that make a round trip: their body has an executor drive a
    flow or send (`self.executor.drive(...)`, `self._executor.run(...)`), directly or
    through another method of their class (`self.flush()`). A reader's `commit` that drives
    its flow is a round trip wherever it is called."""
    found: set[str] = set()
    for _, path in module_names():
        for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(cls, ast.ClassDef):
                continue
            calls = {
                fn.name: [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
                for fn in cls.body
                if isinstance(fn, FUNCTION)
            }
            mine: set[str] = set()
            while more := {
                m
                for m, made in calls.items()
                if m not in mine and any(_sends(c, mine) for c in made)
            }:
                mine |= more
            found |= mine
    return frozenset(name for name in found if not name.startswith("__") and name not in PLAIN)


def held_across_waits(name: str, source: str, waiting: frozenset[str]) -> list[str]:
    """Where in `source` a `with ...lock...:` body waits: a `yield` or `await` (a flow's
    round trip, an outage waited out), or a call that waits (`WAITING`, `waiting`)."""
    held = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.With | ast.AsyncWith):
            continue
        if not any("lock" in ast.unparse(item.context_expr) for item in node.items):
            continue
        for inner in (n for stmt in node.body for n in ast.walk(stmt)):
            if isinstance(inner, ast.Yield | ast.YieldFrom | ast.Await):
                held.append(f"durables.{name} line {inner.lineno}: {type(inner).__name__}")
            elif isinstance(inner, ast.Call) and _waits(inner, waiting):
                held.append(f"durables.{name} line {inner.lineno}: {ast.unparse(inner.func)}()")
    return held


def test_no_reader_or_session_lock_is_held_across_a_round_trip() -> None:
    """A reader's or a session's lock guards its state, and is held only to change it: the
    round trip goes outside it. Held over a `yield` (a flow's round trip), an `await`, or a
    call that waits (a flow driven, an operation sent, a sleep), it stalls every other thread
    that wants it (a fetch behind a listener's acknowledgement, the heartbeat telling the
    session its lease is gone) for as long as the server takes, an outage too."""
    waiting = round_trips()
    held = [
        where
        for name in locking_modules()
        for where in held_across_waits(name, modules()[name].read_text(), waiting)
    ]
    assert not held, "a lock held across a round trip: " + "; ".join(held)


def test_the_lock_check_catches_a_wait_under_a_lock() -> None:
    """The checker itself: a round trip, a drive, a sleep or a yield under a lock is reported;
    a state change under it, and the send after it, are not."""
    source = """
def ack(self, event):
    with self.lock:
        self.reader.commit([event])
        self.executor.drive(self.sending(ops))
        time.sleep(0.1)
        yield from send(ops)
    with self.lock:
        ops = self.state.commit([event])
    self.executor.drive(self.sending(ops))
"""
    held = held_across_waits("fake", source, frozenset({"commit"}))
    found = [h.split(": ")[1] for h in held]
    assert found == [
        "self.reader.commit()",
        "self.executor.drive()",
        "time.sleep()",
        "YieldFrom",
        "send()",
    ]
