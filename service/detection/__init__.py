"""The detector worker: every closed window through the drift, data-quality and proxy checks.

This package owns the detection stage. The worker reads ``{fw}:windows`` in a
Redis consumer group, loads the window's profile and its baseline (the
reference, the previous windows or the same hour of past weeks), runs the
catalog of :mod:`detectors` on them, keeps each window's results, and hands
them to the alert policy (:mod:`service.alerting`). Only profiles are read,
never raw records.

``detector``  :class:`Detector`, the worker role
"""
