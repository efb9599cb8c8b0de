"""Regenerate ``screenshots/report.png``: headless Chromium's first screen (1280 × 900) of ``specdash report``
for a ``demo-eagle3`` concurrency sweep against its baseline on the simulator, and ``report-full.png``, the
whole page.

    python scripts/report_screenshot.py [--sweep 1,4,16,64,256] [--max-tokens 128] [--keep DIR]

Needs Chromium on PATH (``apt-get install chromium``).  The sweep runs on the simulator (a minute or two on two
cores); ``--keep DIR`` keeps its run directories there instead of a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from specdash.bench.svg import browser
    from specdash.cli import main as specdash

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", default="1,4,16,64,256")
    ap.add_argument("--max-tokens", default="128")
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()
    exe = browser()
    if exe is None:
        print("no Chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="specdash-shot-") as tmp:
        runs = Path(args.keep or tmp) / "runs"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = specdash(["--bench", "--profile", "demo-eagle3", "--sweep", f"concurrency={args.sweep}",
                           "--max-tokens", args.max_tokens, "--out", str(runs), "--json"])
        if rc != 0:
            return rc
        payload = json.loads(out.getvalue())
        spec_dir = next(d for d in payload["run_dirs"] if not d.endswith("-baseline"))
        page = Path(tmp) / "report.html"
        if specdash(["report", spec_dir, "--out", str(page)]) != 0:
            return 1
        for name, size in (("report.png", "1280,900"), ("report-full.png", "1280,4200")):
            dest = ROOT / "screenshots" / name
            subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--window-size={size}", f"--user-data-dir={tmp}/profile", f"--screenshot={dest}",
                            page.as_uri()], capture_output=True, timeout=120, check=True)
            print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
