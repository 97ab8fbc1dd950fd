"""`python -m durables_bench.instructions`: the server's instructions per event, counted by
callgrind for the measured step alone, the same from run to run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from durables_bench import instructions

pytestmark = pytest.mark.skipif(
    os.environ.get("DURABLES_TEST_SERVER") == "redis",
    reason="the tool starts its own valkey whatever the suite runs against: once is enough",
)
needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed"
)


def test_a_dump_gives_its_summary_and_anything_else_is_refused() -> None:
    dump = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 406911887\ntotals: 1\n"
    assert instructions.summary(dump) == 406_911_887
    with pytest.raises(ValueError, match="no summary"):
        instructions.summary("events: Ir\n")


def test_without_valgrind_it_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert instructions.main(["--only", "publish_single"]) == 2
    assert "apt-get install valgrind" in capsys.readouterr().err


@needs_valgrind
@pytest.mark.slow
def test_the_count_is_the_measured_step_alone_and_repeats() -> None:
    first, second = (instructions.run(100, ["publish_single"]) for _ in range(2))
    per = {
        (c.variant, i): c.instructions / c.events
        for i, run in enumerate((first, second))
        for c in run
    }
    # an XADD round trip is some thousands of instructions, not the server's start-up
    # (hundreds of millions) or nothing; a publish script does more than a bare XADD
    assert 5_000 < per["raw", 0] < 60_000
    assert per["durables", 0] > 1.5 * per["raw", 0]
    # On a quiet machine two counts agree within 0.4 %. Beside busy neighbours (parallel
    # test workers on two cores) commands reach the server at other moments, and its event
    # loop wakes more or fewer times for them: two counts came 5 % apart there.
    for variant in ("durables", "raw"):
        assert per[variant, 1] == pytest.approx(per[variant, 0], rel=0.10)
    table = instructions.table(first).splitlines()
    assert table[2].startswith("| publish_single | durables |") and table[3].endswith("| 1.00 |")
