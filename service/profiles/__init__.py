"""Window profiles: from prediction records on Kafka to sketch profiles in Redis.

This package owns the profile side of Redis and the stage that fills it. The
aggregator consumes ``fw.predictions``, keeps one open accumulator per model,
version and window, and on each watermark closes the windows that are due into
Redis profiles and announces them on the ``{fw}:windows`` stream; its Kafka
checkpoint lives in Redis beside the profiles, so a restart resumes where the
last flush left. Rollups merge closed windows into hour and day profiles, and
the reference turns a training set into a model's reference profile and bin
edges.

``aggregator``  the window loop: consume, accumulate, close, checkpoint
``store``       :class:`Store`: model configs, references, window profiles, checkpoints, status
``rollups``     hour and day profiles merged from closed windows
``evaluation``  a stored window tested: detector configuration in force, baseline, checks
                (the detector role and ``GET /v1/models/{id}/drift`` both use it)
``reference``   the reference profile (and bin edges) built from raw rows
``continuity``  whether a fetch continues the checkpoint's log or follows a gap or rewind
``log_watch``   the aggregator acting on it: a fetch dropped, a lost log read again
``control``     flush requests, the control records that travel on the prediction topic
"""
