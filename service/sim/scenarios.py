"""Named simulator scenarios: ``fleetwatch bench --scenario NAME`` and the demo's short run.

==========  ==========================================================================
``short``   50 models, 2 days: the scenario ``fleetwatch demo`` runs after its replay
            (about a minute on 2 cores); the corpus holds one incident of most kinds.
``default`` 200 models, 2 days: the scenario ``fleetwatch simulate`` runs by default and
            the README quotes (about 5 minutes).
``week``    200 models, 9 days, the first 7 incident-free: the incidents fall where
            every seasonal slot has a past week, so the volume test compares a window
            with the same hour of the past week (in two days: the same hour on a past
            day of its kind, or the line through the trailing hours; about 25 minutes).
``fleet``   1,000 models, 2 days: a fleet of the size the service is built for (about
            25 minutes).
==========  ==========================================================================

Examples
--------
>>> scenario("week").days, scenario("week").control_days
(9, 7)
>>> scenario("nope")
Traceback (most recent call last):
...
KeyError: "unknown scenario 'nope'; known: short, default, week, fleet"
"""

from __future__ import annotations

from service.sim.streams import SimOptions

SCENARIOS: dict[str, SimOptions] = {
    "short": SimOptions(models=50, days=2),
    "default": SimOptions(),
    "week": SimOptions(days=9, control_days=7),
    "fleet": SimOptions(models=1000, days=2),
}


def scenario(name: str) -> SimOptions:
    """The options of scenario ``name``.

    Raises
    ------
    KeyError
        If ``name`` is not in :data:`SCENARIOS` (the message lists the known names).
    """
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
