"""Start the simulator as a subprocess for tests (``with SimProcess([...]) as sim: sim.url``).

The process runs ``python -m specdash.sim --port <free port> <args>`` in its own process
group with ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` (the virtual EAGLE3 heads were
trained at 2048 tokens, as the real ones), collects its log lines in a thread and waits
for ``/health`` 200.  ``stop()`` sends SIGTERM and returns the exit code and how long the
process took to go away.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

#: The five benchmark prompts of the suite ``seeds-five`` (``profiles/suites/seeds-five.toml``).
SEEDS_FIVE = [
    "Explain the theory of general relativity in simple terms.",
    "Write a Python function that implements merge sort with detailed comments.",
    "What are the main causes of climate change and what can we do about it?",
    "Describe the process of photosynthesis step by step.",
    "Compare and contrast machine learning and traditional programming approaches.",
]


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1 (:func:`specdash.sglang.process.free_port`: outside
    the range outgoing connections take theirs from)."""
    from specdash.sglang.process import free_port as pick

    return pick("127.0.0.1")


class SimProcess:
    """A simulator subprocess (see the module docstring)."""

    def __init__(self, args: list[str], *, env: dict[str, str] | None = None, ready_timeout: float = 30.0,
                 wait_ready: bool = True) -> None:
        self.args = list(args)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ)
        self.env.setdefault("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "1")
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env.update(env or {})
        self.ready_timeout = ready_timeout
        self.wait_ready = wait_ready
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None

    @property
    def lines(self) -> list[str]:
        """Log lines so far (stdout and stderr together)."""
        with self._lock:
            return list(self._lines)

    def wait_for_lines(self, pred, timeout: float = 10.0, quiet_s: float = 0.2) -> list[str]:
        """The log lines once ``pred(lines)`` holds and no new line came for ``quiet_s`` seconds.

        The lines reach :attr:`lines` through a reader thread, so on a loaded machine the last
        ones can lag the HTTP answer that caused them; a test reads the log through this.
        Returns the lines at ``timeout`` even when ``pred`` never held (the assertion then says why).
        """
        deadline = time.monotonic() + timeout
        seen, since = -1, time.monotonic()
        while True:
            now_lines = self.lines
            if len(now_lines) != seen:
                seen, since = len(now_lines), time.monotonic()
            if (pred(now_lines) and time.monotonic() - since >= quiet_s) or time.monotonic() >= deadline:
                return now_lines
            time.sleep(0.02)

    def _reader(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._lock:
                self._lines.append(raw.rstrip("\n"))

    def start(self) -> SimProcess:
        """Launch; with ``wait_ready`` block until ``/health`` answers 200.

        Raises:
            RuntimeError: the process exited or did not become ready in time (log attached).
        """
        argv = [sys.executable, "-m", "specdash.sim", "--host", "127.0.0.1", "--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=self.env, start_new_session=True)
        threading.Thread(target=self._reader, daemon=True).start()
        if self.wait_ready:
            self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        with httpx.Client(timeout=2.0) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    time.sleep(0.1)
                    raise RuntimeError(f"simulator exited with {self.proc.returncode}:\n" + "\n".join(self.lines))
                try:
                    if c.get(self.url + "/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("simulator not ready in time:\n" + "\n".join(self.lines))

    def wait(self, timeout: float = 30.0) -> int:
        """Wait for the process to exit by itself; returns its exit code."""
        assert self.proc is not None
        self.returncode = self.proc.wait(timeout)
        time.sleep(0.05)
        return self.returncode

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> tuple[int | None, float]:
        """Signal the process (its group on timeout) and wait: ``(exit code, seconds it took)``."""
        if self.proc is None or self.proc.poll() is not None:
            return (self.proc.returncode if self.proc else None), 0.0
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.returncode = self.proc.wait(5)
        return self.returncode, time.monotonic() - t0

    def __enter__(self) -> SimProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# -- tiny real checkpoints (config.json + safetensors at small shapes) ---------------------------

def make_target(path: Path, *, hidden: int = 64, layers: int = 8, arch: str = "LlamaForCausalLM",
                vocab: int = 32000, max_pos: int = 4096, mtp_layers: int = 0) -> Path:
    """A tiny target directory (the simulator reads its config.json): see
    :func:`specdash.checkpoint.tiny.tiny_target`, here with SGLang-like vocabulary defaults."""
    from specdash.checkpoint.tiny import tiny_target

    return tiny_target(path, hidden=hidden, layers=layers, arch=arch, vocab=vocab, inter=2 * hidden,
                       max_pos=max_pos, mtp_layers=mtp_layers)


def make_draft(path: Path, *, hidden: int = 64, prefix: str = "midlayer", lm_head: bool = True,
               d2t: str | None = "offsets", fc_mult: int = 3, arch: str = "LlamaForCausalLMEagle3",
               vocab: int = 32000, draft_vocab: int | None = 8000, extra_cfg: dict | None = None,
               max_pos: int = 4096) -> Path:
    """A tiny EAGLE3 (or EAGLE) draft: :func:`specdash.checkpoint.tiny.tiny_draft` with the
    simulator tests' defaults (32000-token vocabulary, 8000-token draft vocabulary)."""
    from specdash.checkpoint.tiny import tiny_draft

    return tiny_draft(path, hidden=hidden, layer_prefix=prefix, lm_head=lm_head, d2t=d2t, fc_mult=fc_mult,
                      arch=arch, vocab=vocab, draft_vocab=draft_vocab, inter=2 * hidden, extra_cfg=extra_cfg,
                      max_pos=max_pos, draft_vocab_in_config="value" if draft_vocab else "null")
