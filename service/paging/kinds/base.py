"""The interface of a receiver kind: what one kind of destination needs and expects.

Each kind is one module of :mod:`service.paging.kinds` with one :class:`Kind` instance,
registered in :data:`service.paging.kinds.KINDS`. A kind says

- which credentials a receiver of it takes (:attr:`Kind.needs`: ``secret``,
  ``routing_key``, ``api_key``, each ``required``, ``optional`` or refused) and its
  default URL, which :class:`~service.paging.receiver_config.ReceiverSpec` validates;
- how a :class:`~service.paging.payloads.Notice` looks to it (:meth:`Kind.render`, pure,
  without credentials: the body is stored in the outbox and shown by the API);
- the HTTP request of one attempt (:meth:`Kind.request`: where, with which headers and
  credentials);
- which answers are worth retrying (:meth:`Kind.retryable`);
- whether its URL is itself a credential (:attr:`Kind.secret_url`: the API then hides
  its path).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from service.paging.payloads import Notice

if TYPE_CHECKING:
    from service.paging.outbox import OutboxItem
    from service.paging.receiver_config import Receiver

Need = Literal["required", "optional"]
#: The credential fields of a receiver; a kind refuses those it does not name in ``needs``.
CREDENTIALS: tuple[str, ...] = ("secret", "routing_key", "api_key")
#: Answers any kind retries besides 5xx: request timeout, too early, too many requests.
GENERIC_RETRYABLE = frozenset({408, 425, 429})


@dataclass(frozen=True)
class Delivery:
    """One attempt's HTTP request: ``POST url`` with ``content`` and ``headers``."""

    url: str
    content: bytes
    headers: dict[str, str] = field(default_factory=dict)


class Kind:
    """A receiver kind (subclass per kind; one instance is registered).

    Attributes
    ----------
    name : str
        The ``kind`` of a receiver.
    needs : mapping of str to {"required", "optional"}
        Its credential fields; every other one of :data:`CREDENTIALS` is refused.
    default_url : str or None
        The URL when the receiver gives none (None: the URL is required).
    secret_url : bool
        The URL is the credential (Slack, Teams): the API shows only its host.
    retry_status : frozenset of int
        Answers below 500 worth retrying; every 5xx is retried unless
        :meth:`retryable` says otherwise.
    """

    name: ClassVar[str]
    needs: ClassVar[Mapping[str, Need]] = {}
    default_url: ClassVar[str | None] = None
    secret_url: ClassVar[bool] = False
    retry_status: ClassVar[frozenset[int]] = GENERIC_RETRYABLE

    def render(self, n: Notice) -> dict[str, Any] | None:
        """The JSON body of ``n``, without credentials; None: this kind has no such
        notification (nothing is sent)."""
        raise NotImplementedError

    def request(self, receiver: Receiver, item: OutboxItem, now: float) -> Delivery:
        """The request of one attempt at ``item`` (``now``: Unix seconds): by default
        ``POST`` the stored body as it is to the receiver's URL. The caller adds the
        delivery id header."""
        return Delivery(receiver.url or "", item.body.encode(), {"Content-Type": "application/json"})

    def retryable(self, status: int) -> bool:
        """Whether an HTTP answer ``status`` (not 2xx) is worth another attempt.

        Examples
        --------
        >>> k = Kind()
        >>> [k.retryable(s) for s in (400, 408, 429, 500, 503)]
        [False, True, True, True, True]
        """
        return status in self.retry_status or status >= 500


__all__ = ["CREDENTIALS", "Delivery", "GENERIC_RETRYABLE", "Kind", "Need"]
