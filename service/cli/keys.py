"""``fleetwatch keys create|list|revoke``: API keys (admin scope; docs/api.md, "API security")."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.connection import ApiKey, ApiUrl, Json, Offset, api, segment
from service.cli.output import print_json, show, table, when

app = typer.Typer(help="API keys (admin scope): create, list, revoke.", no_args_is_help=True)


@app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="What the key is for, who holds it", show_default=False)],
    scope: Annotated[str, typer.Option(help="read, write (implies read) or admin (implies write)")] = "read",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the token")] = False,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Create an API key (POST /v1/keys). Its token is printed once and never shown again:
    store it now (e.g. as FLEETWATCH_API_KEY of the model server or the shell)."""
    with api(url, api_key) as client:
        key = client.request("POST", "/keys", body={"name": name, "scope": scope})
    if quiet:
        typer.echo(key["token"])
    elif as_json:
        print_json(key)
    else:
        typer.echo(f"key {key['id']} ({key['scope']}) for {key['name']!r}; its token, shown once:\n"
                   f"{key['token']}")


@app.command("list")
def list_keys(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Keys per page")] = 100,
    offset: Offset = 0,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """API keys, newest first, never their tokens (GET /v1/keys)."""
    with api(url, api_key) as client:
        keys = client.get("/keys", limit=limit, offset=offset)
    show(keys, as_json, lambda ks: table(ks, [
        ("ID", lambda k: k["id"]), ("NAME", lambda k: k["name"]), ("SCOPE", lambda k: k["scope"]),
        ("CREATED", lambda k: when(k["created_at"])), ("BY", lambda k: k.get("created_by")),
        ("LAST USED", lambda k: when(k.get("last_used_at"))),
        ("REVOKED", lambda k: when(k.get("revoked_at")) if k["revoked"] else None)], "no keys"))


@app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="Key id", show_default=False)],
           url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False) -> None:
    """Revoke an API key now (DELETE /v1/keys/{id}); it stays listed as revoked."""
    with api(url, api_key) as client:
        key = client.request("DELETE", f"/keys/{segment(key_id)}")
    show(key, as_json, lambda k: typer.echo(f"key {k['id']} ({k['name']!r}) revoked"))
