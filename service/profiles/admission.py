"""Which models' records the aggregator takes: a registered model's, or one created by its
records within the implicit-creation budgets (``implicit_models_per_minute``,
``implicit_models_max``); and counting dead letters only for models that exist."""

from __future__ import annotations

import time

from service.profiles.refusals import Blame
from service.profiles.store import Store
from service.runtime.outage import RedisOutage
from service.settings import Settings


class Admission:
    """One aggregator's admission of models; the models admitted are remembered (a model
    is never deleted while its records stream)."""

    def __init__(self, settings: Settings, store: Store, outage: RedisOutage) -> None:
        self.settings = settings
        self.store = store
        self.outage = outage
        self.admitted: set[str] = set()  # models registered or created

    async def refused(self, model_ids: set[str]) -> dict[str, str]:
        """The models of ``model_ids`` whose records are refused, with the reason: models
        never registered beyond the implicit-creation budgets (``implicit_models_per_minute``,
        ``implicit_models_max``). Registered and created models are remembered."""
        new = [m for m in model_ids if m not in self.admitted]
        if not new:
            return {}
        s = self.settings
        outcomes = await self.outage.call(lambda: self.store.admit_models(
            new, s.implicit_models_per_minute, s.implicit_models_max, time.time()), "admit models")
        refused = {}
        for m, outcome in outcomes.items():
            if outcome in ("known", "created"):
                self.admitted.add(m)
            else:
                limit = ("implicit_models_per_minute" if outcome == "refused_rate"
                         else "implicit_models_max")
                refused[m] = f"model {m!r} is not registered and {limit} is reached: register it first"
        return refused

    async def count_blamed(self, blamed: list[Blame], refused: dict[str, str]) -> None:
        """Count each dead letter of ``blamed`` for its model, if that model exists (registered,
        or created by its records): a message naming a model that does not exist (a key that
        is no model, a model refused by the implicit-creation budgets) is counted only on
        /metrics, so garbage cannot grow the per-model counters."""
        unknown = sorted({b.model_id for b in blamed} - self.admitted - refused.keys())
        existing = (await self.outage.call(lambda: self.store.existing_models(unknown), "existing models")
                    if unknown else set())
        for b in blamed:
            if b.model_id in self.admitted or b.model_id in existing:
                b.state.count_dead(b.model_id, b.reason, b.n)
