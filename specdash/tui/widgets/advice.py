"""The Suggestions panel (fed by :mod:`specdash.advisor`) and the status bar."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from specdash.results import output_tok_s
from specdash.tui.format import DASH, PlainTable, effective_line, num
from specdash.tui.session import ServerState
from specdash.tui.state import ViewState
from specdash.tui.widgets.launch import STATE_STYLE
from specdash.tui.widgets.live import live_numbers


def breakdown_text(run: dict) -> Text | None:
    """This run's accept length by category and by context length (prompt + completion tokens), when
    either has more than one group; None otherwise."""
    cats = run.get("by_category") or {}
    ctx = run.get("by_context") or []
    if run.get("accept_length") is None or (len(cats) < 2 and len(ctx) < 2):
        return None
    t = Text()
    if len(cats) > 1:
        t.append("This run by category: ", style="bold")
        t.append(" · ".join(f"{c} τ {num(g.get('accept_length'), 2)} (n={g['requests']})" for c, g in cats.items()))
        t.append("\n")
    if len(ctx) > 1:
        t.append("By context (prompt + completion tokens): ", style="bold")
        t.append(" · ".join(f"{g['context_tokens']} τ {num(g.get('accept_length'), 2)} (n={g['requests']})"
                            for g in ctx))
        t.append("\n")
    return t


def sweep_text(sweep: dict) -> Text:
    """The newest load sweep of the profile: speedup per concurrency (or request rate) with its interval
    and the break-even load (``specdash --bench --sweep``)."""
    from specdash.bench.points import axis_name, break_even_of, point_label, sweep_var

    var = sweep_var(sweep)
    t = Text()
    t.append("Concurrency sweep" if var == "concurrency" else "Request-rate sweep", style="bold")
    t.append(f" of {sweep.get('profile')} vs {sweep.get('baseline') or 'no baseline'} ({sweep.get('path')}):\n",
             style="dim")
    parts = []
    for p in sweep.get("sweep") or []:
        sp, ci = p.get("speedup"), p.get("ci95") or [None, None]
        x = point_label(var, p.get(var))
        if sp is None:
            parts.append(f"{x}: {num(output_tok_s(p), 0)} tok/s")
        else:
            parts.append(f"{x}: ×{sp:.2f} [{num(ci[0], 2)}, {num(ci[1], 2)}]")
    t.append("  " + "  ·  ".join(parts) + "\n")
    be, bci = break_even_of(sweep), sweep.get("break_even_ci95") or [None, None]
    if be is not None:
        nd, unit = (1, "") if var == "concurrency" else (2, " requests/s")
        t.append(f"  break-even {axis_name(var)} ≈ {be:.{nd}f}{unit} (95 % CI {num(bci[0], nd)} – {num(bci[1], nd)}): "
                 "above it, serve without speculation or with a schedule that drops to steps 0\n", style="bold yellow")
    t.append(f"  {sweep.get('note')}\n", style="dim")
    return t


def advice_renderable(view: ViewState):
    """The advisor's verdict, ranked suggestions (predicted tok/s with 95 % interval and
    why) and break-even, or a note saying what is still needed."""
    adv = view.advice
    if view.collapsed:
        return Text("Suggestions are withheld: post-launch verification reported VERIFY_COLLAPSE, a wiring "
                    "fault. Tuning steps / topk / draft tokens cannot fix it — fix the algorithm / draft "
                    "weights first (see the banner).", style="bold red")
    if adv is None:
        return Text(view.advice_note, style="dim")
    parts: list = [Text(adv.verdict, style="bold")]
    cur = f"current: {adv.current.label()}" if adv.current else "current: —"
    parts.append(Text(f"{cur} · measured {num(adv.current_tok_s, 1, ' tok/s')} · baseline "
                      f"{num(adv.baseline_tok_s, 1, ' tok/s')} · predictions at concurrency {adv.batch}",
                      style="dim"))
    tab = PlainTable(box=None, padding=(0, 1), show_edge=False, expand=True)
    tab.add_column("#", width=3)
    tab.add_column("steps / topk / draft tokens", ratio=2)
    tab.add_column("predicted tok/s [95 %]", ratio=2)
    tab.add_column("vs current", width=11)
    tab.add_column("vs baseline", width=11)
    tab.add_column("why", ratio=5)
    for i, s in enumerate(adv.suggestions, 1):
        st = s.settings
        tab.add_row(str(i), f"{st.steps} / {st.topk} / {st.draft_tokens}",
                    f"{s.predicted_tok_s:.0f} [{s.ci[0]:.0f}, {s.ci[1]:.0f}]",
                    f"×{s.speedup_vs_current:.2f}" if s.speedup_vs_current else DASH,
                    f"×{s.speedup_vs_baseline:.2f}" if s.speedup_vs_baseline else DASH, s.why)
    parts += [Text(""), tab]
    be = adv.break_even
    if be is not None and be.alpha is not None:
        parts.append(Text(f"\nbreak-even: first-position acceptance α ≥ {be.alpha:.3f} (now {be.current_alpha:.3f})"
                          + (f", accept length ≥ {be.accept_length:.2f}" if be.accept_length else ""), style="dim"))
    for n in adv.notes:
        parts.append(Text(f"note: {n}", style="dim"))
    parts.append(Text("\nApply one with t (tweak): set the three values and relaunch.", style="italic"))
    return Group(*parts)


class AdvicePanel(VerticalScroll):
    """Scrollable advisor output, below the dashboard's live tune (when one ran)."""

    def compose(self):
        yield Static(id="advice-tune")
        yield Static(id="advice-sweep")
        yield Static(id="advice-breakdown")
        yield Static(id="advice-body")

    def show(self, view: ViewState) -> None:
        """Render from ``view``."""
        from specdash.tui.livetune import tune_text

        box = self.query_one("#advice-tune", Static)
        box.display = view.tune is not None
        if view.tune is not None:
            box.update(Text(tune_text(view.tune)))
        bd = breakdown_text(view.snapshot.run)
        bbox = self.query_one("#advice-breakdown", Static)
        bbox.display = bd is not None
        if bd is not None:
            bbox.update(bd)
        sw = self.query_one("#advice-sweep", Static)
        sw.display = view.sweep is not None
        if view.sweep is not None:
            sw.update(sweep_text(view.sweep))
        self.query_one("#advice-body", Static).update(advice_renderable(view))


class StatusBar(Static):
    """One line: server state, profile, URL, effective settings, load, headline numbers."""

    def show(self, view: ViewState) -> None:
        """Render from ``view``; toggles ``-stale`` when polls are failing."""
        st = view.server_state
        t = Text()
        t.append(f" {st.value.upper()} ", style="reverse " + STATE_STYLE.get(st, ""))
        name = view.profile.name if view.profile is not None else (view.url or "no profile")
        t.append(f" {name}", style="bold")
        if view.simulated:
            t.append(" [simulated]", style="magenta")
        info = view.snapshot.server_info
        if info:
            t.append(f" · {effective_line(info)}")
        tier = view.snapshot.tier
        if tier is not None and tier.adaptive:
            t.append(f" · adaptive: now steps {tier.steps}", style="yellow")
        if st in (ServerState.READY, ServerState.ATTACHED):
            n = live_numbers(view)
            t.append(f" · {n['server_tok_s']} tok/s · τ {n['accept_length']}")
        if view.tune is not None and view.tune.running:
            t.append(f" · live tune running ({view.tune.elapsed_s:.0f} s)", style="bold yellow")
        ld = view.load
        if ld.running:
            t.append(f" · load {'loop' if ld.loop else 'once'} ×{ld.concurrency} ({ld.done} done)", style="green")
        else:
            t.append(f" · load idle (conc {ld.concurrency}, suite {ld.suite or DASH})", style="dim")
        if ld.error:
            t.append(f" · load error: {ld.error}", style="red")
        stale = view.snapshot.stale
        self.set_class(bool(stale), "-stale")
        if stale:
            t.append(f" · STALE: {', '.join(sorted(stale))}", style="bold red")
        self.update(t)
