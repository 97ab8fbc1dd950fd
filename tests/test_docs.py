"""The docs check: every code block marked runnable in README.md and docs/*.md runs, each
against the test server in a namespace of its own, and fails the test if it fails; links
between the pages resolve; every test a page cites exists.

A runnable block is a fenced block whose info string is `python run`:

    ```python run
    import durables
    ...
    ```

It runs as a script with `DURABLES_URL` and `DURABLES_NAMESPACE` set (and a short
`DURABLES_BLOCK_S`, so closing is quick), so
`durables.connect()` reaches the test server. Blocks use `assert` to state what they
promise, so a block whose output drifts from the text fails too. A reader pastes them one
after another into one namespace: so they also run all in one, in a random order.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .servers import RedisProcess

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = re.compile(r"^```python run\n(.*?)^```$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CITED_TEST = re.compile(r"`(tests/test_\w+\.py)::(test_\w+)`")
PENDING = {"docs/asyncio.md"}
"""Pages being written beside these docs: a link to one is checked once it exists."""


def runnable_blocks() -> list[tuple[str, str]]:
    """(page:line, code) of every runnable block, in page order."""
    blocks = []
    for page in PAGES:
        text = page.read_text()
        for match in RUNNABLE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            blocks.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


BLOCKS = runnable_blocks()


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[at for at, _ in BLOCKS])
def test_a_runnable_block_runs(
    code: str, server: RedisProcess, namespace: str, tmp_path: Path
) -> None:
    if server.url.startswith("memory://"):  # the store is in this process: run it here
        run_in_process(code, server.url, namespace, tmp_path)
        return
    # As the server's administrator: some blocks show administration (CONFIG, ACL SETUSER),
    # which the limited user of a DURABLES_TEST_SECURE=1 run may not do
    url = f"redis://127.0.0.1:{server.port}/0"
    env = {
        **os.environ,
        "DURABLES_URL": url,
        "DURABLES_NAMESPACE": namespace,
        "DURABLES_BLOCK_S": "0.2",
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,  # no durables.toml of ours in the way
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"the block failed:\n{done.stderr}"


@pytest.mark.slow
def test_every_block_runs_beside_every_other_in_one_namespace_in_any_order(
    server: RedisProcess, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{server.port}/0"
    env = {
        **os.environ,
        "DURABLES_URL": url,
        "DURABLES_NAMESPACE": f"d{uuid.uuid4().hex[:8]}",
        "DURABLES_BLOCK_S": "0.2",
    }
    seed = random.randrange(1 << 30)
    failed = []
    for at, code in random.Random(seed).sample(BLOCKS, len(BLOCKS)):
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            failed.append(f"{at}: {done.stderr.strip().splitlines()[-1:]}")
    assert failed == [], f"in the order of seed {seed}"


def run_in_process(code: str, url: str, namespace: str, where: Path) -> None:
    """A block run as a script would be, but in this process (memory:// is in-process)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (("URL", url), ("NAMESPACE", namespace), ("BLOCK_S", "0.2")):
            patch.setenv(f"DURABLES_{name}", value)
        patch.chdir(where)
        exec(compile(code, "<block>", "exec"), {"__name__": "__main__"})


def test_most_api_blocks_are_runnable() -> None:
    """The check covers every page with Python on it, and most of its blocks."""
    assert len(BLOCKS) >= 30
    for page in ("README.md", "docs/api.md", "docs/concepts.md", "docs/operations.md"):
        assert any(at.startswith(page + ":") for at, _ in BLOCKS), page


def test_the_runnable_marker_is_found_however_the_block_ends() -> None:
    text = "x\n```python run\nprint(1)\n```\n```python\nnot run\n```\n```python run\nb\n```\n"
    assert [m.group(1) for m in RUNNABLE.finditer(text)] == ["print(1)\n", "b\n"]


def test_links_between_pages_resolve() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target).resolve()
            pending = str(path.relative_to(ROOT)) in PENDING if path.is_relative_to(ROOT) else False
            if not path.is_relative_to(ROOT):
                broken.append(f"{page.name}: {target} is outside the repository")
            elif not path.exists() and not pending:
                broken.append(f"{page.name}: {target}")
    assert broken == []


def test_every_page_is_linked_from_the_readme_and_the_docs_index() -> None:
    readme = (ROOT / "README.md").read_text()
    index = (ROOT / "docs" / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name == "README.md":
            assert "(docs/README.md)" in readme
            continue
        assert f"(docs/{page.name})" in readme, f"README does not link {page.name}"
        assert f"({page.name})" in index, f"docs/README.md does not link {page.name}"


def test_every_test_a_page_cites_exists() -> None:
    cited = [(page, m) for page in PAGES for m in CITED_TEST.findall(page.read_text())]
    assert len(cited) >= 20
    missing = []
    for page, (path, name) in cited:
        source = ROOT / path
        if not source.exists() or not re.search(
            rf"^(async )?def {name}\(", source.read_text(), re.MULTILINE
        ):
            missing.append(f"{page.name}: {path}::{name}")
    assert missing == []


def _section(page: str, title: str) -> str:
    text = (ROOT / page).read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_quick_start_creates_its_durable_before_producing_and_says_why() -> None:
    quick = _section("README.md", "Quick start")
    assert quick.index(".durable(") < quick.index(".publish(")
    assert "Create durables before producing" in quick and "durables create" in quick
    assert "durables server stop" in quick  # the embedded server keeps running
    concepts = _section("docs/concepts.md", "Durables and their kinds")
    assert "Create durables before producing" in concepts and "durables create" in concepts


def test_the_readme_sessions_say_a_restart_is_refused_until_the_lease_lapses_and_wait() -> None:
    sessions = " ".join(_section("README.md", "Durable client sessions").split())
    assert "SessionInUseError" in sessions and "wait=" in sessions
    assert "DurableInUseError" in sessions
