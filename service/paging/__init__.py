"""Paging: notifications of alerts to on-call receivers, sent once each and never lost.

This package owns the path from an alert event to an HTTP request at a
receiver. The notifier consumes the alert events, decides per receiver and
group when to notify (group wait, group interval, repeat interval), renders
each receiver kind's payload and commits the notifications to an outbox in
Redis before any is sent, so a crash between deciding and delivering neither
loses nor repeats a page. Deliveries are retried with backoff, rate-limited
per receiver and refused for URLs that resolve to internal addresses.

``notifier``         :class:`Notifier`, the role: its consume, flush and delivery loops
``courier``          one delivery attempt: rate limit, SSRF guard, POST, retried or dead-lettered
``timing``           when a group is notified (group wait, interval, repeat; pure)
``lua``              the notifier's Lua scripts on notification groups
``kinds``            one module per receiver kind: config, payload, request, retryable answers
``outbox``           the outbox of notifications: claim, retry, rate limit
``payloads``         each receiver kind's payload, and the webhook signature
``receiver_config``  the receiver model (kind, URL, matchers, timing) and its validation
``receiver_store``   :class:`ReceiverStore`: receivers in Redis
``ssrf``             the guard that refuses internal and non-public receiver URLs
"""
