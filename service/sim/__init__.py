"""Self-measurement: a simulated fleet with an injected-incident corpus, run through the real
pipeline and scored (MTTD per incident kind, alert precision and recall, false pages per
1,000 model-days).

- :mod:`service.sim.fleet` (pure): the fleet's models, features and sources;
- :mod:`service.sim.sampling` (pure): their seasonal traffic, scores and delayed labels;
- :mod:`service.sim.incidents` (pure): the incident corpus;
- :mod:`service.sim.magnitudes` (pure): a covariate shift's values and population PSI;
- :mod:`service.sim.injection` (pure): how each incident corrupts traffic;
- :mod:`service.sim.score` (pure): the scorecard of a policy's alerts;
- :mod:`service.sim.naive` (pure): the naive per-window policy fleetwatch is compared with;
- :mod:`service.sim.report` (pure): the scorecards against their targets, as a table;
- :mod:`service.sim.streams` (pure): the options, the scenario's registrations, hourly records and labels;
- :mod:`service.sim.children`: the roles the simulator runs as child processes;
- :mod:`service.sim.run`: the scenario through SDK -> Kafka -> aggregator -> Redis ->
  detector / label joiner -> API on an embedded broker and Redis (``fleetwatch simulate``).
"""
