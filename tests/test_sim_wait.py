"""The simulator waits for the pipeline while it makes progress, and stops when it stalls."""

from __future__ import annotations

import asyncio
import time

import pytest

from service.sim.run import _wait


def _countdown(values: list[int]):
    it = iter(values)

    async def remaining() -> int:
        return next(it, values[-1])
    return remaining


def test_a_slow_pipeline_is_waited_for_past_the_stall_limit_while_it_progresses():
    t0 = time.monotonic()
    # one item done every 0.25 s poll, 2 s in all, with a stall limit of 0.6 s
    asyncio.run(_wait(_countdown(list(range(8, -1, -1))), 0.6, "items"))
    assert time.monotonic() - t0 > 0.6 * 2


def test_a_stalled_pipeline_raises_with_what_is_left():
    # progress to 5, then up and down without a new low: no progress
    with pytest.raises(TimeoutError, match=r"no progress in 0.6 s: items \([56] left\)"):
        asyncio.run(_wait(_countdown([9, 7, 5, 6, 5, 6, 5, 6, 5, 6]), 0.6, "items"))
