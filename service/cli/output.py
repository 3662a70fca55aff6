"""How the CLI prints: tables (rich) for people, the API's JSON with ``--json`` for scripts."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import typer
from pydantic import BaseModel
from rich import box
from rich.console import Console
from rich.table import Table

#: Width of tables written to a pipe or a file (a terminal's own width is used otherwise):
#: wide enough that no column is cut.
PIPE_WIDTH = 250


def render(renderable: Any) -> None:
    """Print a rich renderable on stdout, without the padding rich leaves at line ends."""
    width = None if sys.stdout.isatty() else PIPE_WIDTH
    con = Console(file=io.StringIO(), width=width, highlight=False, color_system=None)
    with con.capture() as captured:
        con.print(renderable)
    typer.echo("\n".join(line.rstrip() for line in captured.get().rstrip("\n").split("\n")))


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout; a pydantic model (e.g. an alert the API answered)
    as the fields it was given."""
    typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS,
                            default=_given).decode())


def _given(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def when(t: Any) -> str:
    """A time for a table: Unix seconds (number or numeric string) or ISO 8601, as UTC
    ``YYYY-MM-DD HH:MM:SS``; ``-`` for none.

    Examples
    --------
    >>> when(1_700_006_400), when("1700006400.5"), when("2024-05-01T12:00:00Z"), when(None)
    ('2023-11-15 00:00:00', '2023-11-15 00:00:00', '2024-05-01 12:00:00', '-')
    """
    if t is None or t == "":
        return "-"
    try:
        moment = datetime.fromtimestamp(float(t), UTC)
    except (TypeError, ValueError):
        try:
            moment = datetime.fromisoformat(str(t)).astimezone(UTC)
        except ValueError:
            return str(t)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def cell(value: Any) -> str:
    """One table cell: ``-`` for None, numbers short, mappings ``k=v`` joined, lists joined.

    Examples
    --------
    >>> cell(None), cell(0.123456), cell({"team": "payments"}), cell(["a", "b"]), cell(True)
    ('-', '0.1235', 'team=payments', 'a, b', 'yes')
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={cell(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value) or "-"
    return str(value)


Column = tuple[str, Callable[[Any], Any]]


def table(rows: Iterable[Any], columns: Sequence[Column], empty: str) -> None:
    """Rows as a table with one column per ``(header, getter)``; ``empty`` when none."""
    rows = list(rows)
    if not rows:
        typer.echo(empty)
        return
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header, _get in columns:
        t.add_column(header, overflow="fold")
    for row in rows:
        t.add_row(*(cell(get(row)) for _h, get in columns))
    render(t)


def fields(pairs: Iterable[tuple[str, Any]]) -> None:
    """A two-column table of ``name  value``."""
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    for name, value in pairs:
        t.add_row(name, cell(value))
    render(t)


def show(value: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    """``value`` as JSON with ``--json``, else through ``human``."""
    if as_json:
        print_json(value)
    else:
        human(value)


def floors_text(floors: dict[str, Any] | None) -> str:
    """A model's effect floors (``floors`` of GET /v1/models/{id} and its status) on one line.

    Examples
    --------
    >>> floors_text({"configured": {"psi": 0.2}, "learned": None})
    'psi=0.2; none learned'
    >>> floors_text({"configured": {"psi": 0.2}, "learned": {"windows": 9, "window_seconds": 300,
    ...              "note": None, "floors": {"amount": {"psi": {"floor": 0.31}}}}})
    'psi=0.2; learned from 9 windows of 300 s: amount psi=0.31'
    """
    if not floors:
        return "-"
    learned = floors.get("learned")
    if learned is None:
        tail = "none learned"
    else:
        tail = f"learned from {learned['windows']} windows of {learned['window_seconds']} s"
        picked = [f"{f} {c}={cell(v['floor'])}" for f, checks in learned["floors"].items()
                  for c, v in checks.items() if v["floor"] > 0]
        tail += (": " + ", ".join(picked)) if picked else f" ({learned.get('note') or 'all 0: noise only'})"
    return f"{cell(floors['configured'])}; {tail}"
