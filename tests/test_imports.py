"""Import hygiene (DESIGN.md): headless paths never load Textual or torch."""

from __future__ import annotations

import subprocess
import sys


def test_headless_modules_do_not_import_textual_or_torch():
    code = (
        "import sys\n"
        "import specdash.cli, specdash.profile, specdash.launch, specdash.commands.errors\n"
        "import specdash.sglang.client, specdash.sglang.command, specdash.sglang.logs, specdash.sglang.metrics\n"
        "import specdash.sglang.process, specdash.sglang.versions\n"
        "import specdash.collect.stream, specdash.collect.gpu, specdash.collect.live, specdash.collect.proc\n"
        "import specdash.bench.runner, specdash.bench.ab, specdash.bench.compare, specdash.bench.report\n"
        "import specdash.bench.stats, specdash.bench.tune, specdash.advisor\n"
        "import specdash.commands.bench, specdash.commands.tune, specdash.commands.profile\n"
        "import specdash.commands.doctor, specdash.commands.draft\n"
        "import specdash.eagle3.rules, specdash.eagle3.verify, specdash.eagle3.convert, specdash.checkpoint.reader\n"
        "import specdash.sim.server\n"
        "print(sorted(m for m in ('textual', 'torch', 'sglang', 'textual_plotext') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
