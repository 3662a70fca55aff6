"""The alert policy applied to one evaluated window.

1. Eligible results (checks that may alert, decided, with a p-value) pass the
   fleet FDR gate (``service.alerting.fdr``); a discovery whose effect clears its floor
   is a *breach*, every other eligible result is healthy.
2. Each (feature, check) series records the window's outcome in Redis and
   folds its recent outcomes into alert episodes (k-of-m persistence, evidence
   while firing, auto-resolve; ``detectors.policy.persistence``).
3. An episode is written as an alert (compare-and-set on the series' sequence
   number), joins the open incident of its root-cause key
   (``detectors.policy.grouping``), and is marked not-to-notify when inhibited
   by a data-quality alert on the same feature or matched by a silence.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from detectors.performance.slices import base_check
from detectors.policy.floor import clears_floor, eligible
from detectors.policy.grouping import DATA_QUALITY_CHECKS, group_key, inhibited
from detectors.policy.persistence import (
    Episode,
    ImmediateRule,
    Outcome,
    PersistenceConfig,
    episodes,
    settled_prefix,
)
from detectors.policy.severity import highest, severity
from detectors.policy.silence import Silence
from detectors.result import TestResult
from service import metrics
from service.alerting.fdr import FEATURES, FdrGate, GateDecision, spending
from service.alerting.models import Alert, Evidence, IncidentRecord
from service.alerting.silences import muted_now
from service.alerting.store import AlertStore, series_field
from service.profiles.keys import status_key
from service.registry import ModelConfig
from service.settings import Settings

log = logging.getLogger("fleetwatch.alerting")

MAX_EVIDENCE = 50


def digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def alert_id(model_id: str, feature: str, check: str, first_member: str) -> str:
    """Deterministic alert id: one series' episode that began at ``first_member``."""
    return digest(model_id, feature, check, first_member)


@dataclass(frozen=True)
class WindowRef:
    """The window being applied."""

    model_id: str
    member: str
    start: int
    length: int
    version: str


def immediate_rule(settings: Settings) -> ImmediateRule:
    """The deployment's rule for paging at the first window (``FLEETWATCH_IMMEDIATE_*``)."""
    return ImmediateRule(effect_ratio=settings.immediate_effect_ratio,
                         quality_effect_ratio=settings.immediate_quality_effect_ratio,
                         p_ratio=settings.immediate_p_ratio)


def outcomes_of(elig: Sequence[TestResult], decision: GateDecision, window: WindowRef,
                rule: ImmediateRule, looked: Mapping[str, float] | None = None) -> dict[str, list[Any]]:
    """Per series field, the window's outcome as stored:
    [start, member, breach, effect, p, floor, immediate, looked_at] (``looked``: per field,
    the event time of the first look that found it overwhelming, :func:`first_looks`)."""
    out = {}
    for r, found in zip(elig, decision.discoveries, strict=True):
        breach = bool(found) and clears_floor(r)
        now = breach and rule.applies(r.check, r.effect_size, r.floor, r.p_value, decision.level)
        field = series_field(r.feature, r.check)
        out[field] = [window.start, window.member, int(breach), r.effect_size, r.p_value, r.floor, int(now),
                      (looked or {}).get(field) if breach else None]
    return out


def first_looks(looks: Sequence[tuple[float, Sequence[TestResult]]], alerting: dict[str, frozenset[str]],
                rule: ImmediateRule, level: float) -> dict[str, float]:
    """Per series field, the event time of the first of a window's looks (``looks``: each
    look's time and test results) whose breach is overwhelming at ``level``, the window's
    own FDR level."""
    out: dict[str, float] = {}
    for at, results in sorted(looks, key=lambda lk: lk[0]):
        for r in eligible(list(results), alerting):
            if clears_floor(r) and rule.applies(r.check, r.effect_size, r.floor, r.p_value, level):
                out.setdefault(series_field(r.feature, r.check), round(at, 3))  # ms: stored as JSON
    return out


def gate_record(elig: Sequence[TestResult], decision: GateDecision) -> dict[str, Any]:
    """What the FDR gate answered for one window, as the dashboard's window view shows it:
    the batch level, the capacity granted, the reward, and per eligible test whether it was
    discovered and whether it breached (discovered and over its floor)."""
    return {"level": decision.level, "granted": decision.granted, "rewarded": decision.rewarded,
            "tests": [{"feature": r.feature, "check": r.check, "discovered": bool(found),
                       "breach": bool(found) and clears_floor(r)}
                      for r, found in zip(elig, decision.discoveries, strict=True)]}


def _outcome(raw: list[Any]) -> Outcome:
    start, member, breach, effect, p, floor, *rest = raw  # outcomes stored before: no flags
    looked = rest[1] if len(rest) > 1 else None
    return Outcome(int(start), member, bool(breach), float(effect), float(p), float(floor),
                   bool(rest and rest[0]), None if looked is None else float(looked))


class AlertPolicy:
    """Gate, persistence, grouping, inhibition and silences for one deployment."""

    def __init__(self, alerts: AlertStore, gate: FdrGate,
                 immediate: ImmediateRule | None = None) -> None:
        self.alerts = alerts
        self.gate = gate
        self.immediate = immediate or ImmediateRule()

    @classmethod
    def for_settings(cls, r: Any, settings: Settings, family: str = FEATURES) -> AlertPolicy:
        """The policy of a deployment on ``r``: its FDR gate for ``family`` (the detector's
        tests, or the label joiner's :data:`~service.alerting.fdr.PERFORMANCE` tests) and its
        immediate-paging rule."""
        return cls(AlertStore(r, role="detector"), FdrGate(r, spending(settings, family), family),
                   immediate_rule(settings))

    async def apply(self, window: WindowRef, results: Sequence[TestResult],
                    alerting: dict[str, frozenset[str]], model: ModelConfig,
                    silences: list[Silence], now: float,
                    fdr_weights: Mapping[str, float] | None = None,
                    looks: Sequence[tuple[float, Sequence[TestResult]]] = ()) -> list[Alert]:
        """Apply one evaluated window (``results`` empty: the window could not be
        tested, but it is released all the same); the alerts it created or changed.
        ``fdr_weights`` (check name -> weight, absent: 1) weight the window's tests in
        the FDR gate. ``looks``: the window's looks while it was open (each one's event time
        and look test results): a breach of this window that one of them found overwhelming
        at the window's level fired, if its episode fires at this window, at that look's
        time (the alert's ``fired_at``), however late the detector read the look.

        Windows are folded in order: a window is *released* once every earlier
        window of the model has been applied, and the episodes that the windows
        released now touch are written.
        """
        elig = eligible(list(results), alerting)
        outcomes: dict[str, list[Any]] = {}
        looked_here = await self._looked(window.model_id, window.member)
        if elig:
            weights = [fdr_weights.get(base_check(r.check), 1.0) for r in elig] if fdr_weights else None
            decision = await self.gate.gate(f"{window.model_id}\0{window.member}", window.start,
                                            window.length, [r.p_value for r in elig], weights,
                                            model_id=window.model_id)
            outcomes = outcomes_of(elig, decision, window, self.immediate,
                                   first_looks(looks, alerting, self.immediate, decision.level))
            await self.alerts.put_gate(window.model_id, window.member, gate_record(elig, decision))
            # the model's status points at its last gated window's record
            await self.alerts.r.hset(status_key(window.model_id), "last_fdr_window", window.member)
        # A series the close could not decide (no eligible result) keeps what its looks saw.
        outcomes = {**looked_here, **outcomes}
        recorded = await self.alerts.record(window.model_id, window.start, window.member, outcomes)
        lo, hi = window.start, recorded.released_before
        if lo >= hi:
            return []  # an earlier window is still pending; it will release this one
        # Data-quality series first, so drift alerts of this window see their inhibitors.
        fields = sorted(recorded.series, key=lambda f: f.split("\0")[1] not in DATA_QUALITY_CHECKS)
        changed = []
        folded: dict[str, Outcome] = {}  # every episode's alert id -> where it fired (for the looks)
        # the latest window released now (a window still open has no outcome yet)
        upto = max([window.start, *(o[0] for v in recorded.series.values() for o in v["o"] or []
                                    if o[0] < hi)])
        for field in fields:
            feature, check = field.split("\0")
            history = [o for o in map(_outcome, recorded.series[field]["o"] or [])
                       if o.window_start < hi]
            for ep in episodes(history, model.persistence):
                folded[alert_id(window.model_id, feature, check, ep.first.member)] = ep.fired
                if _touches(ep, lo, hi):
                    alert = await self._write(window, feature, check, ep, recorded.seq, model,
                                              silences, now)
                    if alert is not None:
                        changed.append(alert)
            await self._settle(window.model_id, field, history, model.persistence)
        return changed + await self._confirm_looks(window, upto, folded, recorded.seq, now)

    async def _looked(self, model_id: str, member: str) -> dict[str, list[Any]]:
        """Per series field, the outcome that a look at window ``member`` fired an alert on."""
        registered = await self.alerts.looks(model_id)
        return {f: o for m, _start, f, o in registered.values() if m == member}

    async def release(self, model_id: str, start: int, member: str) -> None:
        """Release a window the policy failed on (so it does not hold back the model's later
        windows), with what its looks saw as its outcomes, as :meth:`apply` keeps them when
        the close decides nothing: an alert a look fired is then confirmed or resolved by the
        fold of the later windows, not withdrawn as if the window had closed without the
        breach. A look registry that does not parse releases the window without them."""
        try:
            outcomes = await self._looked(model_id, member)
        except (ValueError, TypeError):
            log.exception("model=%s: the looks at window %s do not parse: released without them",
                          model_id, member)
            outcomes = {}
        await self.alerts.record(model_id, start, member, outcomes)

    async def look(self, window: WindowRef, results: Sequence[TestResult],
                   alerting: dict[str, frozenset[str]], model: ModelConfig,
                   silences: list[Silence], now: float, at: float,
                   prior_end: int = 0) -> list[Alert] | str:
        """Apply a look at the open window ``window``: the look tests of the records it
        gathered since its previous look (:class:`detectors.quality.looks.LookPlan`), their
        evidence there at event time ``at``. The alerts it fired or changed, or why it
        could decide nothing: ``"applied"`` (the policy has applied the window: its close
        decided), ``"behind"`` (an earlier window of the model, up to ``prior_end``, is not
        applied yet, so the series' fold is incomplete; the window's close reads the look
        again, :meth:`apply`'s ``looks``),
        ``"no_gated_window"`` (no level to compare with yet).

        A breach fires here only when it is overwhelming (:class:`ImmediateRule`) at the FDR
        level of the model's last gated window, a level fixed before the look's p-values
        were seen, and only when the series' fold with this breach as the window's outcome
        fires at this window (a series already firing has nothing new to page). The alert
        is the one the window's own episode would be (same id), so when the window closes
        with the breach its close updates it, and when it closes without it the alert is
        resolved then (:meth:`_confirm_looks`).
        """
        elig = [r for r in eligible(list(results), alerting) if clears_floor(r)]
        if not elig:
            return []
        fields = [series_field(r.feature, r.check) for r in elig]
        state = await self.alerts.look_state(window.model_id, window.member, window.start, prior_end,
                                             fields)
        if state.applied:
            return "applied"
        if state.level is None:
            return "no_gated_window"
        if state.behind:
            return "behind"
        overwhelming = [(r, f) for r, f in zip(elig, fields, strict=True)
                        if self.immediate.applies(r.check, r.effect_size, r.floor, r.p_value, state.level)]
        changed = []
        for r, field in overwhelming:
            # every other window's outcome, as the close's fold will have them (a window of
            # another version or length at the same or a later start included)
            history = [o for o in map(_outcome, state.series.get(field, [])) if o.member != window.member]
            seen = Outcome(window.start, window.member, True, r.effect_size, r.p_value, r.floor, True,
                           round(at, 3))
            ep = next((e for e in episodes([*history, seen], model.persistence)
                       if e.fired.member == window.member), None)
            if ep is None:
                continue  # the series fires already
            aid = alert_id(window.model_id, r.feature, r.check, ep.first.member)
            await self.alerts.register_look(window.model_id, aid, window.member, window.start, field,
                                            [window.start, window.member, 1, r.effect_size, r.p_value,
                                             r.floor, 1, round(at, 3)])
            alert = await self._write(window, r.feature, r.check, ep, state.seq, model, silences, now)
            if alert is not None:
                changed.append(alert)
        if changed and (await self.alerts.look_state(window.model_id, window.member, window.start,
                                                     prior_end, [])).applied:
            # The window's close was applied while this look wrote: alerts the close did not
            # write after it (still at this look's seq) are not confirmed by it.
            stale = [a for a in changed if a.seq == state.seq]
            for a in stale:
                await self._withdraw(a.id, window, state.seq, now)
            changed = [a for a in changed if a.seq != state.seq]
        return changed

    async def _confirm_looks(self, window: WindowRef, upto: int, folded: dict[str, Outcome], seq: int,
                             now: float) -> list[Alert]:
        """Resolve the alerts that looks fired in the windows released now (starting at or
        before ``upto``) and that no episode of the fold holds (their windows closed without
        the breach); an episode that fired at another window than its look's keeps that
        window's time, not the look's; forget the looks of those windows. The alerts resolved."""
        looks = await self.alerts.looks(window.model_id)
        released = {aid: member for aid, (member, start, _f, _o) in looks.items() if start <= upto}
        out = []
        for aid, member in released.items():
            fired = folded.get(aid)
            if fired is None:
                if (alert := await self._withdraw(aid, window, seq, now)) is not None:
                    out.append(alert)
            elif fired.member != member:
                await self.alerts.clear_fired_at(aid)
                if fired.looked_at is not None:
                    await self.alerts.set_fired_at(aid, fired.looked_at)
        await self.alerts.forget_looks(window.model_id, list(released))
        return out

    async def _withdraw(self, aid: str, window: WindowRef, seq: int, now: float) -> Alert | None:
        """Resolve an alert a look fired whose window closed without the breach."""
        stored = await self.alerts.alert(aid)
        if stored is None or stored.state == "resolved":
            return None
        start = stored.fired_window_start
        resolved = stored.model_copy(update={"state": "resolved", "resolved_window_start": start,
                                             "seq": seq, "updated_at": now})
        if await self.alerts.upsert(resolved) != 3:
            return None
        log.info("alert resolved model=%s feature=%s check=%s: a look at window %s fired it and the "
                 "window closed without the breach", stored.model_id, stored.feature, stored.check,
                 window.member)
        metrics.ALERTS_RESOLVED.inc()
        await self.alerts.clear_fired_at(aid)  # should its episode fire later, it fires then
        await self.alerts.set_open(resolved, False)
        if stored.check in DATA_QUALITY_CHECKS:
            await self.alerts.set_quality_span(stored.model_id, aid, stored.feature, stored.window_start,
                                               start + window.length)
        await self.alerts.emit("resolved", aid, stored.incident_id)
        return resolved

    async def _settle(self, model_id: str, field: str, history: list[Outcome],
                      persistence: PersistenceConfig) -> None:
        cut = settled_prefix(history, persistence)
        if cut:
            ordered = sorted(history, key=lambda o: (o.window_start, o.member))
            await self.alerts.settle(model_id, field, ordered[cut - 1].window_start)

    async def _write(self, window: WindowRef, feature: str, check: str, ep: Episode, seq: int,
                     model: ModelConfig, silences: list[Silence], now: float) -> Alert | None:
        m = window.model_id
        aid = alert_id(m, feature, check, ep.first.member)
        firing = ep.resolved is None
        sev = highest([severity(o.effect_size, o.floor, model.tier) for o in ep.evidence])
        source = model.source_of(feature)
        group = group_key(m, feature, check, source)
        quality = check in DATA_QUALITY_CHECKS
        last = ep.evidence[-1]
        # The episode's event-time span: first breach to the end of its last breach.
        end = last.window_start + window.length
        # Inhibited by a data-quality alert on the feature whose breaches overlap in event
        # time (not by what happens to fire when this model's windows are released).
        inhibitors = [] if quality else [
            a for a, (f, lo, hi) in (await self.alerts.quality_spans(m)).items()
            if inhibited(check, feature, {f}) and lo < end and ep.first.window_start < hi]
        alert = muted_now(Alert(
            id=aid, model_id=m, model_version=ep.first.member.split(":", 2)[2],
            feature=feature, check=check,
            state="firing" if firing else "resolved",
            severity=sev, owner=model.owner, tier=model.tier, routing=model.routing,
            group_key=group, source=source, incident_id=None,
            window_start=ep.first.window_start,
            window_end=ep.first.window_start + int(ep.first.member.split(":", 1)[0]),  # its true length
            window_start_local=model.local_time(ep.first.window_start),
            fired_window_start=ep.fired.window_start,
            last_window_start=last.window_start,
            resolved_window_start=None if firing else ep.resolved.window_start,
            effect_size=last.effect_size, floor=last.floor, p_value=last.p_value,
            evidence_count=len(ep.evidence),
            evidence=[Evidence(window_start=o.window_start, effect_size=o.effect_size,
                               p_value=o.p_value) for o in ep.evidence[-MAX_EVIDENCE:]],
            inhibited_by=inhibitors,
            seq=seq, created_at=now, updated_at=now,
            silenced_by=[], notify=True,  # as muted_now makes them
        ), silences, now)
        status = await self.alerts.upsert(alert)
        if status == 0:
            return None
        if ep.fired.looked_at is not None:  # a look at its window saw it first
            await self.alerts.set_fired_at(aid, ep.fired.looked_at)
        refired = status == 3 and firing  # a look's alert withdrawn at its close, firing again
        if status == 1 or refired:
            # per-slice checks count under their catalog name: a bounded label set
            metrics.ALERTS_RAISED.labels(check=base_check(check), severity=sev).inc()
            if not alert.notify:
                metrics.ALERTS_SUPPRESSED.labels(
                    reason="inhibited" if inhibitors else "silenced").inc()
            log.info("alert fired model=%s feature=%s check=%s severity=%s window=%s effect=%.3g p=%.2e",
                     m, feature, check, sev, window.member, last.effect_size, last.p_value)
        stored = await self.alerts.alert(aid)
        assert stored is not None
        joined = stored.incident_id
        # Named by its key and the first breach, whichever replica opens it.
        new_id = digest(group, str(ep.first.window_start))
        incident = await self.alerts.join(
            group, aid, (ep.first.window_start, end), model.persistence.m * window.length,
            IncidentRecord(id=new_id, group_key=group, source=source, title=_title(group),
                           created_at=now), joined)
        if joined is None:  # also an episode that fired and resolved in one release
            await self.alerts.set_incident(aid, incident)
            stored = stored.model_copy(update={"incident_id": incident})
        await self.alerts.set_open(stored, firing)
        if quality:
            await self.alerts.set_quality_span(m, aid, feature, ep.first.window_start,
                                               None if firing else end)
        if status == 1 or refired:
            await self.alerts.emit("fired", aid, incident)
        if status in (1, 3) and not firing:
            metrics.ALERTS_RESOLVED.inc()
            await self.alerts.emit("resolved", aid, incident)
        return stored


async def resolve_by_user(alerts: AlertStore, alert: Alert, by: str, comment: str | None,
                          now: float) -> None:
    """A user resolved ``alert``: record it and end its episode, so that a later breach
    of the series is a new alert, and stop inhibiting (the alert stays in its incident)."""
    await alerts.resolve(alert, {"resolved_by": by, "resolved_at": repr(now),
                                 "resolve_comment": comment or ""})
    await alerts.emit("resolved", alert.id, alert.incident_id)
    await alerts.settle(alert.model_id, series_field(alert.feature, alert.check), None)
    if alert.check in DATA_QUALITY_CHECKS:  # inhibits no later breach
        length = alert.window_end - alert.window_start
        await alerts.set_quality_span(alert.model_id, alert.id, alert.feature, alert.window_start,
                                      alert.last_window_start + length)


def _touches(ep: Episode, lo: float, hi: float) -> bool:
    """Does releasing the windows starting in ``[lo, hi)`` change ``ep`` (its span meets them)?"""
    end = ep.resolved.window_start if ep.resolved is not None else math.inf
    return ep.first.window_start < hi and end >= lo


def _title(group: str) -> str:
    kind, _, name = group.partition(":")
    return {"source": f"upstream source {name} failing",
            "feature": f"feature {name} failing",
            "model": f"model {name.replace(':', ' ')} failing"}[kind]
