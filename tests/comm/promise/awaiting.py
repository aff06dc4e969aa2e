"""Awaiting a future on an event loop while proving the loop keeps running meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


async def await_counting_ticks(
    awaitable: Awaitable[Any], ready: Callable[[], bool], pause_s: float = 0.005
) -> tuple[Any, int]:
    """``awaitable``'s value, and how many times a ticker ran on the loop until ``ready()``:
    a future that blocked the loop would leave the ticker at one tick or none."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while not ready():
            ticks += 1
            await asyncio.sleep(pause_s)

    value, _ = await asyncio.gather(awaitable, ticker())
    return value, ticks
