"""Process life events for clients: flush at exit, restart after fork, flush on signals.

- At interpreter exit, every started client that was not closed is closed
  (flushing for at most its ``close_timeout``).
- After ``os.fork()``, in the child, every client drops the records it had
  buffered (the parent delivers those) and, if it was started, starts a new
  worker thread and producer: a pre-fork server's workers each log on their own.
- :func:`flush_on_signals` makes a signal (e.g. SIGTERM) flush before the
  process's previous handling of it.
"""

from __future__ import annotations

import atexit
import os
import signal
import weakref
from collections.abc import Iterable
from typing import Protocol


class _Client(Protocol):
    close_timeout: float

    def _close(self, timeout: float) -> None: ...
    def _after_fork(self) -> None: ...
    def flush(self, timeout: float) -> bool: ...


_every: weakref.WeakSet[_Client] = weakref.WeakSet()  # restarted in a forked child
_started: set[_Client] = set()  # closed at exit (held strongly until closed)
_installed = False


def track(client: _Client) -> None:
    """Restart ``client`` in forked children."""
    global _installed
    if not _installed:
        _installed = True
        atexit.register(_close_all)
        os.register_at_fork(after_in_child=_after_fork_in_child)
    _every.add(client)


def started(client: _Client) -> None:
    """Close ``client`` at interpreter exit unless it is closed before."""
    _started.add(client)


def closed(client: _Client) -> None:
    _started.discard(client)


def _close_all() -> None:
    for client in list(_started):
        client._close(client.close_timeout)


def _after_fork_in_child() -> None:
    _started.clear()
    for client in list(_every):
        client._after_fork()


def flush_on_signals(client: _Client, signals: Iterable[int] = (signal.SIGTERM,),
                     timeout: float = 5.0) -> None:
    """Flush ``client`` when one of ``signals`` arrives, then handle the signal as before.

    Parameters
    ----------
    client : sdk.Client
        A started synchronous client (its flush is safe in a signal handler:
        it takes no lock the interrupted code may hold and waits at most
        ``timeout``).
    signals : iterable of int
        Default: SIGTERM.
    timeout : float
        Seconds the flush may take.

    Raises
    ------
    ValueError
        If not called from the main thread (a Python restriction on signal handlers).

    Notes
    -----
    A previous Python handler is called after the flush; the default action
    (e.g. terminate) is restored and the signal re-raised; an ignored signal
    stays ignored.
    """
    for sig in signals:
        previous = signal.getsignal(sig)

        def handler(signum, frame, previous=previous):
            client.flush(timeout)
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)
