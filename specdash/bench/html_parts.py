"""The report page's pieces: an escaped HTML table, a definition list, a figure, and the labels several
sections share (speculative settings, a sweep axis).  Every cell is escaped (:func:`specdash.bench.svg.esc`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specdash.bench.svg import esc, line_chart


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], *, left: int = 1) -> str:
    """An HTML table; the first ``left`` columns are left-aligned; cells are escaped."""
    def cell(tag: str, i: int, v: Any) -> str:
        cls = ' class="l"' if i < left else ""
        return f"<{tag}{cls}>{esc(v)}</{tag}>"

    out = ["<table>", "<tr>" + "".join(cell("th", i, h) for i, h in enumerate(head)) + "</tr>"]
    out += ["<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows]
    out.append("</table>")
    return "\n".join(out)


def dl(items: Sequence[tuple[str, Any]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items if v not in (None, "")) + "</dl>"


def figure(svg: str) -> str:
    return f"<figure>{svg}</figure>"


def stat(run: Mapping[str, Any], key: str, q: str) -> Any:
    return (run.get(key) or {}).get(q)


def settings_text(eff: Mapping[str, Any] | None) -> str:
    eff = eff or {}
    if not eff.get("speculative_algorithm"):
        return "no speculation"
    return (f"{eff['speculative_algorithm']}: steps {eff.get('speculative_num_steps')}, topk "
            f"{eff.get('speculative_eagle_topk')}, draft tokens {eff.get('speculative_num_draft_tokens')}")


def yes_no(v: Any) -> str | None:
    return None if v is None else ("yes" if v else "no")


def axis_col(var: str) -> str:
    """A table column's head for a sweep axis."""
    return "concurrency" if var == "concurrency" else "request rate (requests/s)"


def position_rows(run: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A RUN's ``accept_by_position`` entries (``{position, reached, accepted, rate}``, position 1 … steps;
    CONTRACTS "Additions (2026-12-02)"), sorted by position; ``[]`` when the RUN has none."""
    rows = [p for p in run.get("accept_by_position") or [] if isinstance(p, Mapping) and p.get("position") is not None]
    return sorted(rows, key=lambda p: p["position"])


def positions_chart(runs: Sequence[Mapping[str, Any]], labels: Sequence[str], *, width: int = 640,
                    height: int = 320) -> str:
    """Acceptance rate against draft position, one line per RUN."""
    series = [{"name": lab, "points": [(p["position"], p.get("rate")) for p in position_rows(r)]}
              for r, lab in zip(runs, labels)]
    return line_chart(series, title="acceptance by draft position", x_label="draft position",
                      y_label="P(accepted | reached)", width=width, height=height, x_ticks=True)
