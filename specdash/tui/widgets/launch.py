"""The Launch panel: the profile, its effective argv and env (asked vs effective), the
preflight findings with fixes, the launch state and the start-up log until ready."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from specdash.tui.format import DASH, PlainTable
from specdash.tui.session import ServerState
from specdash.tui.state import ViewState
from specdash.tui.widgets.findings import render_findings

STATE_STYLE = {
    ServerState.IDLE: "dim", ServerState.STARTING: "bold yellow", ServerState.READY: "bold green",
    ServerState.STOPPING: "yellow", ServerState.FAILED: "bold red", ServerState.EXITED: "bold red",
    ServerState.STALLED: "bold red", ServerState.ATTACHED: "bold green",
}
SPEC_FIELDS = (
    ("speculative_algorithm", "algorithm"),
    ("speculative_num_steps", "steps"),
    ("speculative_eagle_topk", "topk"),
    ("speculative_num_draft_tokens", "draft tokens"),
)


def argv_text(argv: list[str]) -> Text:
    """The argv as a copy-pasteable command, one flag (and its value) per line."""
    t = Text()
    if not argv:
        return Text(DASH)
    words = list(argv)
    i = 0
    head = []
    while i < len(words) and not words[i].startswith("--"):
        head.append(words[i])
        i += 1
    t.append(" ".join(head), style="bold")
    while i < len(words):
        flag = words[i]
        val = []
        i += 1
        while i < len(words) and not words[i].startswith("--"):
            val.append(words[i])
            i += 1
        t.append(" \\\n    ")
        t.append(flag, style="cyan")
        if val:
            t.append(" " + " ".join(val))
    return t


def asked_effective_table(view: ViewState) -> PlainTable:
    """asked (profile) vs effective (SGLang's normalisation; read back once running)."""
    li = view.launch
    info = view.snapshot.server_info or {}
    tab = PlainTable(box=None, padding=(0, 2), show_edge=False, expand=False)
    tab.add_column("speculative", style="dim")
    tab.add_column("asked")
    tab.add_column("effective (SGLang rules)")
    tab.add_column("server reports" if info else "")
    for key, label in SPEC_FIELDS:
        asked = (li.asked.get(key) if li else None)
        eff = (li.effective.get(key) if li else None)
        got = info.get(key) if info else None
        style = "bold yellow" if (li and asked is not None and asked != eff) else ""
        row_got = "" if not info else (DASH if got in (None, "") else str(got))
        tab.add_row(label, DASH if asked is None else str(asked), Text(DASH if eff is None else str(eff), style=style),
                    row_got)
    return tab


class LaunchPanel(Horizontal):
    """Two columns: command (left), findings and start-up progress (right)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="launch-left"):
            yield Static(id="launch-profile")
            yield Static(id="launch-spec", classes="box")
            yield Static(id="launch-argv", classes="box")
        with VerticalScroll(id="launch-right"):
            yield Static(id="launch-preflight", classes="box")
            yield Static(id="launch-progress", classes="box")

    def show(self, view: ViewState) -> None:
        """Render every part from ``view``."""
        self.query_one("#launch-profile", Static).update(self._profile(view))
        spec = Group(Text("Speculative settings: asked vs effective", style="bold"), asked_effective_table(view),
                     *self._adjustments(view))
        self.query_one("#launch-spec", Static).update(spec)
        li = view.launch
        argv = Group(Text("Command (secrets redacted)", style="bold"),
                     argv_text(li.argv if li else []),
                     Text("env: " + (" ".join(f"{k}={v}" for k, v in li.env.items()) if li and li.env else "env: —"),
                          style="dim"),
                     Text(f"run directory: {li.run_dir}" if li and li.run_dir else "", style="dim"))
        if li and li.error:
            argv = Group(argv, Text(f"cannot build the launch: {li.error}", style="bold red"))
        self.query_one("#launch-argv", Static).update(argv)
        self.query_one("#launch-preflight", Static).update(self._preflight(view))
        self.query_one("#launch-progress", Static).update(self._progress(view))

    def _profile(self, view: ViewState) -> Text:
        t = Text()
        st = view.server_state
        t.append(f"● {st.value.upper()} ", style=STATE_STYLE.get(st, ""))
        t.append((view.state_detail or "").split("\n", 1)[0])  # a fault's log tail is in the Start-up box
        t.append("\n")
        if view.mode == "attach":
            t.append(f"attached to {view.url} — specdash did not start this server, so it is never stopped "
                     "from here\n", style="dim")
        prof = view.profile
        if prof is not None:
            t.append(prof.name, style="bold")
            if view.simulated:
                t.append("  [simulated]", style="magenta")
            if prof.description:
                t.append(f" — {prof.description}")
            if prof.path is not None:
                t.append(f"\n{prof.path.name}", style="dim")
        elif view.mode != "attach":
            t.append("no profile chosen — press p to pick one", style="yellow")
        if view.profile_error:
            t.append(f"\n{view.profile_error}", style="bold red")
        return t

    @staticmethod
    def _adjustments(view: ViewState) -> list:
        li = view.launch
        out = []
        if li is None:
            return out
        for a in li.adjustments:
            t = Text("  ↺ ", style="yellow")
            t.append(f"{a.field}: {a.asked} → {a.effective}", style="yellow")
            t.append(f"  ({a.reason})", style="dim")
            if a.log_line:
                t.append(f"\n      SGLang logs: “{a.log_line}”", style="dim")
            out.append(t)
        for r in li.rejections:
            t = Text("  ✖ SGLang refuses: ", style="bold red")
            t.append(r.message)
            if r.fix:
                t.append(f"\n      fix: {r.fix}", style="green")
            out.append(t)
        return out

    def _preflight(self, view: ViewState):
        head = Text("Preflight (specdash doctor)", style="bold")
        rep = view.preflight
        if view.profile_error:
            return Group(head, Text(view.profile_error, style="bold red"))
        if rep is None:
            return Group(head, Text("not run yet" if view.mode != "attach" else "not applicable when attached",
                                    style="dim"))
        ver = getattr(rep, "sglang_version", None)
        src = getattr(rep, "version_source", None)
        parts = [head, Text(f"judged against SGLang {ver} ({src})" if ver else "", style="dim")]
        if getattr(rep, "has_errors", False):
            parts.append(Text("Launch is blocked by errors: fix the profile (t to tweak), or press l and confirm "
                              "to launch anyway.", style="bold red"))
        return Group(*parts, render_findings(rep.findings, empty="no preflight findings"))

    def _progress(self, view: ViewState):
        head = Text("Start-up", style="bold")
        li = view.launch
        lines = view.startup_log
        status = Text()
        if li is not None and li.time_to_ready_s is not None:
            status.append(f"ready in {li.time_to_ready_s:.1f} s", style="bold green")
        elif view.server_state == ServerState.STARTING and li is not None and li.started_at is not None:
            status.append(f"starting… {max(0.0, view.now - li.started_at):.0f} s", style="yellow")
        elif view.server_state in (ServerState.FAILED, ServerState.EXITED, ServerState.STALLED):
            head, _, tail = (view.state_detail or "").partition("\n")  # the cause, then the server's last lines
            status.append(head, style="bold red")
            if tail:
                status.append("\n" + tail, style="red")
        else:
            status.append("not launched" if view.mode != "attach" else "attached", style="dim")
        body = Text("\n".join(lines[-14:]) if lines else "", style="dim", overflow="ellipsis", no_wrap=True)
        return Group(head, status, body)


def launch_preview_renderable(info) -> Group | Text:
    """What a tweaked profile would launch: asked vs effective, adjustments, rejections."""
    if info is None:
        return Text("no profile", style="dim")
    if info.error:
        return Text(f"cannot build the launch: {info.error}", style="bold red")
    from specdash.tui.state import ViewState

    view = ViewState(launch=info)
    parts: list = [Text("SGLang will run:", style="bold"), asked_effective_table(view)]
    parts += LaunchPanel._adjustments(view)
    if not info.adjustments and not info.rejections:
        parts.append(Text("  ✔ no silent adjustments", style="green"))
    return Group(*parts)
