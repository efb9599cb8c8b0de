"""Number and text formatting shared by the panels (no Textual import).

Outside text is never markup.  Rich parses a plain ``str`` given to a table cell, and Textual
parses one given to ``Static`` / ``Label`` / ``Option`` / ``Select`` / ``notify`` — so an exporter's GPU
name, a profile name, a server log line or an exception message holding ``[/x]`` raised
``MarkupError`` and took the dashboard down, and ``[link=…]`` or ``[bold`` changed what was shown.
The panels therefore hand outside strings over as :class:`rich.text.Text` (:func:`plain`), build
their tables with :class:`PlainTable`, and the app's ``notify`` never parses markup.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

DASH = "—"

#: SGLang's definitions (tokenizer_manager.py _calculate_spec_decoding_metrics), stated wherever the numbers appear.
ACCEPT_DEFINITIONS = (
    "accept length = Σ completion tokens ÷ Σ verify rounds (bonus token included); "
    "accept rate = accepted drafts ÷ (verify rounds × (draft tokens − 1)) (bonus excluded). "
    "Run-scoped: this run's requests only."
)

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}
SEVERITY_MARK = {"error": "✖", "warning": "▲", "info": "●"}


def num(v: float | None, nd: int = 1, unit: str = "") -> str:
    """``v`` with ``nd`` decimals and a unit, or an em dash for None."""
    if v is None:
        return DASH
    return f"{v:,.{nd}f}{unit}"


def pct(v: float | None, nd: int = 1) -> str:
    """A 0–1 fraction as percent."""
    return DASH if v is None else f"{100.0 * v:.{nd}f} %"


def dist(d: dict | None, key: str = "p50", nd: int = 1, unit: str = " ms") -> str:
    """One field of a ``{mean, p50, p90, p99}`` distribution."""
    if not d or d.get(key) is None:
        return DASH
    return f"{d[key]:,.{nd}f}{unit}"


def ago(seconds: float | None) -> str:
    """A short relative time (``3 s``, ``2 min``)."""
    if seconds is None:
        return DASH
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def finding_get(f: Any, key: str, default: Any = None) -> Any:
    """A finding's field, whether it is an object or a JSON dict."""
    if isinstance(f, dict):
        return f.get(key, default)
    return getattr(f, key, default)


def effective_line(d: dict | None) -> str:
    """``EAGLE3 steps 3 · topk 1 · draft tokens 4`` from an ``effective``/server-info dict."""
    d = d or {}
    algo = d.get("speculative_algorithm")
    if not algo:
        return "no speculation"
    return (f"{algo} steps {d.get('speculative_num_steps', DASH)} · topk {d.get('speculative_eagle_topk', DASH)}"
            f" · draft tokens {d.get('speculative_num_draft_tokens', DASH)}")


def plain(value: Any, style: str = "") -> Any:
    """``value`` shown verbatim: a ``str`` (or any non-renderable) becomes a :class:`Text` that
    Rich and Textual never parse as markup; a Rich renderable passes through unchanged."""
    if isinstance(value, str):
        return Text(value, style=style)
    if hasattr(value, "__rich_console__") or hasattr(value, "__rich__"):
        return value
    return Text(str(value), style=style)


class PlainTable(Table):
    """A :class:`rich.table.Table` whose ``str`` cells are shown verbatim (never parsed as markup:
    Rich's own ``add_row`` renders a ``str`` cell through ``Console.render_str`` with markup on)."""

    def add_row(self, *renderables: Any, **kw: Any) -> None:
        """:meth:`Table.add_row` with each ``str`` cell wrapped by :func:`plain` (None stays an empty cell)."""
        super().add_row(*(None if r is None else plain(r) for r in renderables), **kw)
