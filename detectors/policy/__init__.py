"""Alert policy: which gated test results become alerts, and how alerts group.

``floor`` (effect floor and eligibility), ``persistence`` (k-of-m windows,
auto-resolve: alert episodes from a series of window outcomes), ``severity``,
``grouping`` (incidents by declared lineage), ``inhibition`` and ``silence``
(matchers). Pure functions and small classes: no clock, no I/O.
"""
