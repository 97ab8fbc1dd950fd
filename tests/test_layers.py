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
    "selector": 1, "selector.lexer": 1, "selector.tree": 1, "selector.parser": 1,
    "server": 1, "server.config": 1, "server.processes": 1, "server.embedded": 1,
    "io.routing": 1,
    # 2: operations as plain data, and the readers' state machines (no I/O)
    "ops": 2, "ops.base": 2, "ops.channels": 2, "ops.durables": 2, "ops.cleanup": 2,
    "ops.exclusive": 2, "ops.shared": 2, "ops.sessions": 2, "ops.flows": 2, "ops.server_info": 2,
    "ops.audit": 2,
    # 3: sending (io/ and its asyncio twin io/aio/), and the memory:// store
    "io": 3, "io.transport": 3, "io.cluster": 3, "io.recovery": 3, "io.connections": 3,
    "io.executor": 3, "io.leases": 3, "io.runtime": 3, "io.context": 3, "memory": 3,
    "io.aio": 3, "io.aio.transport": 3, "io.aio.connections": 3, "io.aio.cluster": 3,
    "io.aio.executor": 3, "io.aio.runtime": 3, "io.aio.context": 3,
    # 4: readers and stores over a context
    "reading": 4, "fetching": 4, "exclusive": 4, "shared": 4, "consumer": 4, "subscription": 4,
    "retention": 4, "publishing": 4, "dead_letters": 4, "audit": 4,
    "sessions": 4, "sessions.store": 4, "sessions.delivery": 4, "sessions.core": 4,
    "aio.readers": 4, "aio.consumer": 4,
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
                getattr(v, "__isabstractmethod__", False) for v in vars(cls).values())  # fmt: skip
            if declares and not inspect.isabstract(cls):
                loose.append(f"{cls.__module__}.{cls.__qualname__}")
    assert loose == []


def test_only_the_asyncio_client_imports_the_asyncio_client() -> None:
    """`durables.aio` is opt-in: the sync library never loads it (nor redis.asyncio). The
    pytest plugin (`testing`) is no part of the library: it has fixtures of both clients; the
    web console (`durables.console`, an asyncio program of its own) is built on it."""
    users = [m for m, targets in graph().items() if not m.startswith(("aio", "console"))
             and any(t == "aio" or t.startswith("aio.") for t in targets)
             and m != "testing"]  # fmt: skip
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
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
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
    done = subprocess.run([sys.executable, "-c", probe, *importable("durables")],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"


LOCKING_MODULES = ("sessions.core", "sessions.delivery", "sessions.store", "session", "aio.session",
                   "reading", "exclusive", "shared", "consumer", "aio.readers")  # fmt: skip


def test_no_reader_or_session_lock_is_held_across_a_round_trip() -> None:
    """A flow yields at each round trip (or outage waited out): a lock held over a `yield`
    stalls every other thread that wants it (the heartbeat telling the session its lease
    is gone) for as long as the server takes, an outage too."""
    held = []
    for name in LOCKING_MODULES:
        tree = ast.parse(modules()[name].read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.With | ast.AsyncWith):
                continue
            if not any("lock" in ast.unparse(item.context_expr) for item in node.items):
                continue
            inner = [n for stmt in node.body for n in ast.walk(stmt)]
            if any(isinstance(n, ast.Yield | ast.YieldFrom | ast.Await) for n in inner):
                held.append(f"durables.{name} line {node.lineno}")
    assert held == []
