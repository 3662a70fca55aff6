"""The CLI's connection to the fleetwatch API: where it is, which key it sends, and how a
refusal becomes a message and an exit code.

Where the API is: ``--url`` (after the subcommand, else before it: ``fleetwatch --url U
status``), else ``FLEETWATCH_API_URL``, else the ``FLEETWATCH_API_URL`` line of the
endpoints file ``fleetwatch run`` writes (``<FLEETWATCH_DATA_DIR>/endpoints.env``, by
default ``.fleetwatch/endpoints.env``), else ``http://127.0.0.1:8000``. The key:
``--api-key`` (after the subcommand, else before it), else ``FLEETWATCH_API_KEY`` (the
endpoints file holds no key).

Exit codes: 0 done; 1 the API refused the request (its error body is printed: code,
message, field); 2 a usage error (a bad option, matcher or column, before any request);
3 the API could not be reached.
"""

from __future__ import annotations

import os
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import httpx
import orjson
import typer

from service.endpoints import API_URL, read_endpoints

DEFAULT_URL = "http://127.0.0.1:8000"
API_KEY = "FLEETWATCH_API_KEY"
DATA_DIR = "FLEETWATCH_DATA_DIR"
TIMEOUT_SECONDS = 30.0
REFUSED, UNREACHABLE = 1, 3

# No envvar= on these options: the environment comes after a --url / --api-key given before
# the subcommand (:class:`GlobalOptions`), so :func:`api_url` and :func:`key_to_send` read it.
ApiUrl = Annotated[str | None, typer.Option(
    "--url", show_default=False,
    help="fleetwatch API; default: FLEETWATCH_API_URL, else the endpoints file of `fleetwatch run` "
         "(FLEETWATCH_DATA_DIR/endpoints.env), else http://127.0.0.1:8000")]
ApiKey = Annotated[str | None, typer.Option(
    "--api-key", show_default=False,
    help="API key (when the API requires keys): read scope to read, write scope to change; "
         "default: FLEETWATCH_API_KEY")]
Offset = Annotated[int, typer.Option(min=0, help="Items to skip (paging, with --limit)")]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer (for scripts)")]


@dataclass(frozen=True)
class GlobalOptions:
    """``--url`` and ``--api-key`` given before the subcommand."""

    url: str | None = None
    api_key: str | None = None


#: Set by the root command for the length of one invocation (:func:`before_subcommand`).
_GLOBAL: ContextVar[GlobalOptions | None] = ContextVar("fleetwatch_global_options", default=None)


def before_subcommand(ctx: typer.Context, options: GlobalOptions) -> None:
    """Keep ``options`` for the subcommand of ``ctx`` (until that invocation closes)."""
    token = _GLOBAL.set(options)
    ctx.call_on_close(lambda: _GLOBAL.reset(token))


def global_options() -> GlobalOptions:
    """The options given before the subcommand running now (none outside one)."""
    return _GLOBAL.get() or GlobalOptions()


def api_url(url: str | None) -> str:
    """The API URL to use: ``url`` (the subcommand's ``--url``) if given, else ``--url``
    before the subcommand, else ``FLEETWATCH_API_URL``, else the endpoints file's, else
    :data:`DEFAULT_URL`."""
    url = url or global_options().url or os.environ.get(API_URL)
    if url:
        return url.rstrip("/")
    data_dir = Path(os.environ.get(DATA_DIR) or ".fleetwatch")
    return read_endpoints(data_dir).get(API_URL, DEFAULT_URL).rstrip("/")


def key_to_send(key: str | None) -> str | None:
    """The API key to send: ``key`` (the subcommand's ``--api-key``), else ``--api-key``
    before the subcommand, else ``FLEETWATCH_API_KEY``, else none."""
    return key or global_options().api_key or os.environ.get(API_KEY) or None


def fail(message: str, code: int = REFUSED) -> typer.Exit:
    """Print ``error: message`` on stderr; the exception to raise (exit ``code``)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def refusal(status: int, body: bytes, api_key: str | None) -> str:
    """One line for an error answer of the API (its body ``{"code", "message", "field"}``).

    Examples
    --------
    >>> refusal(404, b'{"code": "model_not_found", "message": "unknown model \\'x\\'", '
    ...         b'"field": "model_id"}', None)
    "HTTP 404 model_not_found: unknown model 'x' (field model_id)"
    >>> refusal(401, b'{"code": "unauthenticated", "message": "an API key is required"}', None)
    'HTTP 401 unauthenticated: an API key is required; pass --api-key or set FLEETWATCH_API_KEY'
    """
    try:
        err = orjson.loads(body)
    except orjson.JSONDecodeError:
        err = None
    if not isinstance(err, dict) or "message" not in err:
        return f"HTTP {status}: {body[:500].decode('utf-8', 'replace')}"
    line = f"HTTP {status} {err.get('code')}: {err['message']}"
    if err.get("field"):
        line += f" (field {err['field']})"
    if status == 401 and not api_key:
        line += f"; pass --api-key or set {API_KEY}"
    return line


class Api:
    """Requests to the fleetwatch API (httpx), each answered JSON or ended with an exit.

    Parameters
    ----------
    url : str, optional
        From ``--url`` / ``FLEETWATCH_API_URL``; see :func:`api_url`.
    api_key : str, optional
        Sent as ``X-API-Key``.
    """

    def __init__(self, url: str | None, api_key: str | None) -> None:
        self.url = api_url(url)
        self.api_key = key_to_send(api_key)
        headers = {"X-API-Key": self.api_key} if self.api_key else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_SECONDS)

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                body: Any = None, ok: tuple[int, ...] = (200, 201, 202)) -> Any:
        """``method path`` (``path`` under ``/v1``); its JSON answer.

        Raises
        ------
        typer.Exit
            1 when the API answers an error (printed), 3 when it cannot be reached.
        """
        params = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            r = self.http.request(method, f"/v1{path}", params=params,
                                  content=None if body is None else orjson.dumps(body),
                                  headers={"Content-Type": "application/json"} if body is not None else None)
        except httpx.HTTPError as exc:
            raise fail(f"the API at {self.url} cannot be reached ({exc}); is `fleetwatch run` running? "
                       f"(--url, {API_URL})", UNREACHABLE) from None
        if r.status_code not in ok:
            raise fail(refusal(r.status_code, r.content, self.api_key))
        return r.json()

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def close(self) -> None:
        self.http.close()


@contextmanager
def api(url: str | None, api_key: str | None) -> Iterator[Api]:
    """An :class:`Api` for one command."""
    client = Api(url, api_key)
    try:
        yield client
    finally:
        client.close()


@contextmanager
def sdk_errors(client: Api) -> Iterator[None]:
    """The SDK's HTTP errors (urllib) as the CLI's: printed, exit 1 or 3."""
    try:
        yield
    except urllib.error.HTTPError as exc:
        raise fail(refusal(exc.code, exc.read(), client.api_key)) from None
    except urllib.error.URLError as exc:
        raise fail(f"the API at {client.url} cannot be reached ({exc.reason})", UNREACHABLE) from None


def segment(value: str) -> str:
    """``value`` as one percent-encoded path segment (a model id may hold spaces, '#', ...).

    Examples
    --------
    >>> segment("fraud v2")
    'fraud%20v2'
    """
    return quote(value, safe="")
