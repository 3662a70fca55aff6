"""What each dashboard page shows, read from profiles, results and the alert store.

Nothing here reads raw events: window profiles (``service.profiles.store``), the detector's stored
test results per window, alerts and incidents (``service.alerting.store``), the FDR gate's
counters (``service.alerting.fdr``) and the notification outbox (``service.paging.outbox``). Each page
builds a small frozen dataclass the template renders; one module per page:

``common``        the page context (:class:`Ctx`) and what every page shows alike
``fleet``         the fleet overview: every model filtered, sorted, one page of rows
``model``         a model: per feature status and effect history, outputs, volume, performance
``feature``       a feature: each check's effect over time, the distribution beside the reference
``distribution``  a feature's reference and window distributions, from their two profiles
``window``        "why did this page?": every test of a window, the gate's answer, persistence
``incident``      an incident: its alerts on a timeline, its notifications, a silence's matchers
``fdr``           the fleet FDR gate of one epoch, slot by slot
"""
