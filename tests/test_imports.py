"""Import hygiene: headless paths never load Textual or torch."""

from __future__ import annotations

import subprocess
import sys


def test_headless_modules_do_not_import_textual_or_torch():
    code = (
        "import sys\n"
        "import specdash.cli, specdash.profile, specdash.launch, specdash.commands.errors\n"
        "import specdash.sglang.client, specdash.sglang.speculative, specdash.sglang.cmdline, specdash.sglang.logs\n"
        "import specdash.sglang.metrics, specdash.sglang.process, specdash.sglang.versions, specdash.sglang.records\n"
        "import specdash.sglang.sse, specdash.sglang.transport, specdash.sglang.launchspec, specdash.sglang.secrets\n"
        "import specdash.collect.stream, specdash.collect.gpu, specdash.collect.live, specdash.collect.proc\n"
        "import specdash.bench.runner, specdash.bench.ab, specdash.bench.compare, specdash.bench.report\n"
        "import specdash.bench.stats, specdash.bench.tune, specdash.advisor\n"
        "import specdash.commands.bench, specdash.commands.tune, specdash.commands.profile\n"
        "import specdash.commands.doctor, specdash.commands.draft\n"
        "import specdash.eagle3.doctor, specdash.eagle3.verify, specdash.eagle3.convert, specdash.checkpoint.reader\n"
        "import specdash.sim.server\n"
        "print(sorted(m for m in ('textual', 'torch', 'sglang', 'textual_plotext') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_sglang_package_imports_only_itself_and_checkpoint():
    """``specdash.sglang`` speaks only SGLang: no import of a specdash layer above it (``specdash.bounded``,
    the bounded readers of outside input, is the floor below ``checkpoint``)."""
    import ast
    from pathlib import Path

    pkg = Path(__file__).resolve().parents[1] / "specdash" / "sglang"
    bad = []
    for path in sorted(pkg.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{path.name}: {n}" for n in names
                    if n.split(".")[0] == "specdash" and not n.startswith(("specdash.sglang", "specdash.checkpoint",
                                                                           "specdash.bounded"))]
    assert bad == []
