"""Running roles: the one registry of roles, the infrastructure they run on and the
Redis-outage policy every role follows.

The CLI (one sub-command per role, ``fleetwatch run`` for all), the demo, the simulator
and the tests start roles through this package only, so a role is started, stopped and
configured the same way everywhere.

``roles``           ``ROLES`` (name, sub-command, runner of each role), ``start_roles``, ``run_roles``
``infrastructure``  the configured or embedded broker and Redis, signals, the metrics port
``outage``          ``RedisOutage``: wait, count and retry while Redis cannot serve
``redis_client``    ``connect``: the one Redis client of every role, standalone or Redis Cluster
                    (``redis_cluster``), and what both answer alike (``mget``, ``run_scripts``)

Nothing is imported here: a role imports :mod:`service.runtime.outage` without pulling in
the others.
"""
