"""The asyncio client's tasks stop when closed, even when a cancel is swallowed.

On Python 3.11 a cancel can meet a timeout firing at the same moment inside redis-py and
come out as a TimeoutError; a loop that catches that and goes on would hang `close()`
forever if it awaited the task once. These tests build such a task without a server.
"""

from __future__ import annotations

import asyncio

import pytest

import durables.io.aio.runtime as runtime
from durables.io.aio.runtime import AsyncHousekeeper, stop


async def swallows_first_cancel(log: list[str]) -> None:
    """A loop that takes the first cancel for a timeout and runs on, as above."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        log.append("swallowed")
    while True:
        await asyncio.sleep(0.01)


def test_stop_ends_a_task_whose_first_cancel_was_swallowed() -> None:
    async def main() -> tuple[list[str], bool]:
        log: list[str] = []
        task = asyncio.create_task(swallows_first_cancel(log))
        await asyncio.sleep(0)
        await asyncio.wait_for(stop([task], "test"), timeout=5)
        return log, task.cancelled()

    log, cancelled = asyncio.run(main())
    assert log == ["swallowed"] and cancelled


def test_stop_gives_up_on_a_task_that_will_not_end_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime, "RECANCEL_S", 0.01)
    cancels: list[int] = []

    async def stubborn(release: asyncio.Event) -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancels.append(1)

    async def main() -> bool:
        release = asyncio.Event()
        task = asyncio.create_task(stubborn(release))
        await asyncio.sleep(0)
        await asyncio.wait_for(runtime.stop([task], "test"), timeout=5)
        running = not task.done()
        release.set()
        task.cancel()  # leaves the loop now that it is released
        await asyncio.gather(task, return_exceptions=True)
        return running

    assert asyncio.run(main()) is True
    assert len(cancels) == runtime.STOP_TRIES + 1  # and the one that released it


def test_a_housekeeper_closed_while_its_cancel_is_swallowed_stops_its_loop() -> None:
    trims: list[str] = []

    async def trim(channel: str) -> int:
        trims.append(channel)
        return 0

    async def main() -> None:
        keeper = AsyncHousekeeper(trim, 0.05)
        keeper.touch("orders")
        await asyncio.sleep(0.12)
        await asyncio.wait_for(keeper.close(), timeout=5)

    asyncio.run(main())
    assert trims == ["orders"]
