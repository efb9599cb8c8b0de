"""Profile, suite, tweak, save-preset, live-tune and leftover-server flows of the dashboard (a mixin of the app).

Kept apart from ``app.py`` so that file stays about layout, redraw and the server/load
workers.  Every flow ends in the same :class:`~specdash.tui.session.Session` calls the
tests drive.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual import work

from specdash.tui.widgets.launch import launch_preview_renderable


class FlowsMixin:
    """Actions behind ``p`` (profile), ``u`` (suite), ``t`` (tweak), ``w`` (save preset) and ``a``
    (live tune), and the question about servers an earlier, killed specdash left running."""

    def action_live_tune(self) -> None:
        """Ask, then run ``tune --live`` on the chosen profile (:mod:`specdash.tui.livetune`)."""
        why = self.live_tune.unavailable()
        if why:
            self.notify(why, title="live tune", severity="warning")
            return
        self.live_tune_worker()

    @work(exclusive=True, group="tune")
    async def live_tune_worker(self) -> None:
        """Confirm, stop the dashboard's server, run the live tune, then offer its best settings."""
        from specdash.profile import ProfileError
        from specdash.tui.screens.dialogs import ConfirmScreen

        s, lt = self.session, self.live_tune
        stop = " It stops the running server first (the tune launches its own, one at a time)." if (
            s.server_running) else ""
        yes = await self.push_screen_wait(ConfirmScreen(
            f"Live-tune {s.profile.name} with suite {s.suite.name} at concurrency {s.load.concurrency}?\n"
            f"A baseline launch without speculation, then up to {lt.chain_launches} SGLang adaptive launches that "
            f"each measure two chain step tiers at this load, and a final A/B ({lt.budget} exploration launches "
            f"at most).{stop} The winner is saved as a new preset.", yes="Tune", no="Cancel"))
        if not yes:
            return
        self.action_show_tab("advice")
        self.refresh_bindings()
        status = await lt.run()
        self._drawn.clear()
        self.refresh_bindings()
        if status.error:
            self.notify(status.error, title="live tune stopped", severity="error", timeout=10)
            return
        changes = lt.best_changes()
        if changes is None:
            self.notify("live tune finished: the starting settings were best", title="live tune", timeout=5)
            return
        apply = await self.push_screen_wait(ConfirmScreen(
            f"Live tune finished: best steps {changes['num_steps']} / topk {changes['eagle_topk']} / draft tokens "
            f"{changes['num_draft_tokens']}.\nApply them to {s.profile.name} in this dashboard (then l launches "
            "with them)?", yes="Apply", no="Keep the current ones"))
        if apply:
            try:
                s.set_profile(s.tweaked(changes), source_text=s.source_text)
            except ProfileError as exc:
                self.notify(str(exc), title="live tune", severity="error")
                return
            self._refresh_profile()
            self.notify("best settings applied: press l to launch with them", timeout=5)

    @work(exclusive=True, group="leftovers")
    async def leftovers_worker(self) -> None:
        """Servers left by an earlier specdash that was killed (SIGKILL cannot clean up):
        offer to stop them (each started server leaves a record in the state directory)."""
        from specdash.sglang.leftovers import find_leftovers, kill_leftover
        from specdash.tui.screens.dialogs import ConfirmScreen

        records = await asyncio.to_thread(find_leftovers)
        if not records:
            return
        lines = "\n".join(f"  pid {r['pid']} ({' '.join(r.get('argv') or [])}) — {len(r['alive_pids'])} process(es)"
                          for r in records)
        stop = await self.push_screen_wait(ConfirmScreen(
            f"Servers started by an earlier specdash are still running:\n{lines}\nStop them?",
            yes="Stop them", no="Leave them"))
        if stop:
            for r in records:
                await asyncio.to_thread(kill_leftover, r)
            self.notify(f"stopped {len(records)} leftover server(s)", timeout=3)

    def action_choose_profile(self) -> None:
        """Open the profile picker."""
        from specdash.profile import list_profiles, user_profile_dir
        from specdash.tui.screens.picker import ProfilePicker

        cur = self.session.profile.name if self.session.profile else None

        def chosen(path: str | None) -> None:
            if path:
                self.use_profile(path)
                self.action_show_tab("launch")

        self.push_screen(ProfilePicker(list_profiles(), user_dir=user_profile_dir(), current=cur), chosen)

    def action_choose_suite(self) -> None:
        """Choose the load suite."""
        from specdash.profile import ProfileError, list_suites, load_suite
        from specdash.tui.screens.dialogs import ChoiceScreen

        def chosen(name: str | None) -> None:
            if not name:
                return
            try:
                self.session.suite = load_suite(name)
                self.session.load.suite = self.session.suite.name
                self._drawn.clear()
            except ProfileError as exc:
                self.notify(str(exc), severity="error")

        cur = self.session.suite.name if self.session.suite else None
        self.push_screen(ChoiceScreen("Suite for the load driver", [(n, n) for n, _ in list_suites()],
                                      current=cur), chosen)

    def action_tweak(self) -> None:
        """Open the tweak form for the speculative settings."""
        from specdash.tui.screens.tweak import TweakScreen

        s = self.session
        if s.profile is None:
            self.notify("pick a profile first (p)", severity="warning")
            return
        spec = s.profile.speculative.model_dump() if s.profile.speculative else {}

        def preview(changes: dict) -> Any:
            return launch_preview_renderable(s.preview_launch(s.tweaked(changes)))

        self.push_screen(TweakScreen(spec, preview, title=f"Tweak {s.profile.name}"), self._tweaked)

    def _tweaked(self, result: Any) -> None:
        from specdash.profile import ProfileError

        if result is None:
            return
        try:
            prof = self.session.tweaked(result.changes)
        except ProfileError as exc:
            self.notify(str(exc), title="tweak", severity="error")
            return
        self.session.set_profile(prof, source_text=self.session.source_text)
        self._refresh_profile()
        if result.action == "relaunch":
            self.launch_worker(force=self.config.force)
        elif result.action == "save":
            self.action_save_preset()
        else:
            self.notify("settings applied: press l (or r) to launch with them", timeout=3)

    def action_save_preset(self) -> None:
        """Save the current settings as a new preset."""
        self.save_worker()

    @work(exclusive=True, group="save")
    async def save_worker(self) -> None:
        """Ask for a name; ask again before overwriting; write the TOML."""
        from specdash.profile import ProfileError
        from specdash.tui.screens.dialogs import ConfirmScreen, PromptScreen

        s = self.session
        if s.profile is None:
            self.notify("pick a profile first (p)", severity="warning")
            return
        directory = self.config.preset_dir
        name = await self.push_screen_wait(PromptScreen(
            "Save the current settings as a preset named:", suggested_name(s.profile),
            hint=f"written to {s.preset_path('NAME', directory).parent}/NAME.toml (comments of the source kept)"))
        if not name:
            return
        path = s.preset_path(name, directory)
        force = False
        if path.exists():
            force = await self.push_screen_wait(ConfirmScreen(f"{path} exists.\nOverwrite it?", yes="Overwrite",
                                                              no="Keep it", danger=True))
            if not force:
                self.notify("not saved", timeout=3)
                return
        try:
            out = s.save_preset(name, directory=directory, force=force)
        except ProfileError as exc:
            self.notify(str(exc), title="save", severity="error")
            return
        self.notify(f"saved {out}", title="preset saved", timeout=3)


def suggested_name(profile: Any) -> str:
    """A preset name that says what changed: ``<name>-s<steps>-k<topk>-d<draft tokens>``."""
    sp = profile.speculative
    if sp is None or not sp.algorithm:
        return f"{profile.name}-copy"
    base = profile.name.split("-s")[0] if "-s" in profile.name and profile.name[-1].isdigit() else profile.name
    return f"{base}-s{sp.num_steps or 'a'}-k{sp.eagle_topk or 'a'}-d{sp.num_draft_tokens or 'a'}"
