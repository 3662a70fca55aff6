"""From test results to alerts: the policy that decides, and the Redis state it keeps.

This package owns everything between an evaluated window and an alert that may
page. The policy passes eligible p-values through the fleet's online FDR gate,
compares effects with their floors, folds each series' outcomes into episodes
(k-of-m persistence), writes alerts and groups them into incidents by root
cause, and marks inhibited or silenced alerts as not to notify. Alerts,
incidents, the gate's alpha-wealth counters and silences live in Redis under
keys this package writes.

``policy``    :class:`AlertPolicy`: the decision applied to one window (the only module that decides)
``store``     :class:`AlertStore`: alerts, alert series, incidents and the alert events stream
``lua``       the store's Lua scripts (one atomic step each)
``fdr``       :class:`FdrGate`: the online FDR gate's state in Redis, shared by replicas
``silences``  silences and the matchers they share with receivers
"""
