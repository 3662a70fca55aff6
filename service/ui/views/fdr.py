"""The fleet FDR gate of one epoch, slot by slot."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from detectors.fdr.epoch import EpochSpending
from service.alerting.fdr import epochs, slot_use, spending
from service.ui.views.common import Ctx


@dataclass(frozen=True)
class SlotLine:
    """A run of consecutive slots with the same counts (a window longer than a slot is
    granted the same in each slot it spans)."""

    slot: int
    last_slot: int
    start: int
    submitted: int
    granted: int
    capacity: int
    discoveries: int
    reward: int
    spent: float
    wealth: float
    level_one: float


@dataclass(frozen=True)
class FdrView:
    params: EpochSpending
    epoch: int | None
    epochs: list[int]
    slots: list[SlotLine]


async def fdr_view(ctx: Ctx, epoch: int | None) -> FdrView:
    """The fleet FDR gate of one epoch (default: the latest kept): per slot, tests submitted
    and granted against the capacity, discoveries, the reward earlier discoveries give, alpha spent and
    the level a one-test window would face."""
    params = spending(ctx.settings)
    kept = await epochs(ctx.store.r)
    if epoch is None and kept:
        epoch = kept[-1]
    lines = []
    if epoch is not None:
        uses = await slot_use(ctx.store.r, epoch)
        disc = {u.slot: u.discoveries for u in uses}
        for u in uses:
            reward = sum(d for s, d in disc.items() if s <= u.slot - params.reward_lag_slots)
            capacity = max(u.capacity, 1)
            spent = params.alpha / params.slots * min(u.granted, capacity) / capacity
            prev = lines[-1] if lines else None
            if (
                prev is not None
                and prev.last_slot == u.slot - 1
                and (prev.submitted, prev.granted, prev.capacity, prev.discoveries, prev.reward)
                == (u.submitted, u.granted, u.capacity, u.discoveries, reward)
            ):
                lines[-1] = dataclasses.replace(
                    prev, last_slot=u.slot, spent=prev.spent + spent,
                    wealth=params.wealth(u.slot, u.granted, capacity)
                )
                continue
            lines.append(
                SlotLine(
                    u.slot,
                    u.slot,
                    epoch * params.epoch_seconds + u.slot * params.slot_seconds,
                    u.submitted,
                    u.granted,
                    u.capacity,
                    u.discoveries,
                    reward,
                    spent,
                    params.wealth(u.slot, u.granted, capacity),
                    params.level(1, 1, reward, capacity),
                )
            )
    return FdrView(params, epoch, kept, lines)
