"""specdash's NVML readings vs ``nvidia-smi`` taken at the same moment (issue #4, "Real parts").

Reads every device through :func:`specdash.collect.gpu.read_gpus` and, immediately before and
after, ``nvidia-smi --query-gpu=memory.used,memory.total,utilization.gpu --format=csv``; prints
JSON with both readings, their differences, and the server processes found on each device
(NVML compute processes matched to the SGLang server's process tree with psutil).

Usage: ``python benchmarks/h200/nvml_compare.py [SERVER_PID]``
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdash.collect.gpu import nvml_status, read_gpus


def smi() -> list[dict]:
    """nvidia-smi's CSV as dicts (MiB and %)."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,name,memory.used,memory.total,utilization.gpu", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=True).stdout
    rows = []
    for r in csv.reader(io.StringIO(out)):
        idx, name, used, total, util = (x.strip() for x in r)
        rows.append({"index": int(idx), "name": name, "memory_used_mib": float(used),
                     "memory_total_mib": float(total), "utilization_pct": float(util)})
    return rows


def main() -> None:
    server_pid = int(sys.argv[1]) if len(sys.argv) > 1 else None
    tree = set()
    if server_pid:
        import psutil

        try:
            p = psutil.Process(server_pid)
            tree = {p.pid} | {c.pid for c in p.children(recursive=True)}
        except psutil.Error:
            pass
    s1 = smi()
    t0 = time.time()
    ours = read_gpus()
    t1 = time.time()
    s2 = smi()
    res = {"nvml_status": nvml_status(), "read_ms": (t1 - t0) * 1000, "devices": []}
    for g in ours:
        a = next(r for r in s1 if r["index"] == g.index)
        b = next(r for r in s2 if r["index"] == g.index)
        res["devices"].append({
            "index": g.index, "name": g.name,
            "specdash": {"memory_used_mib": g.memory_used_mib, "memory_total_mib": g.memory_total_mib,
                         "utilization_pct": g.utilization_pct},
            "nvidia_smi_before": a, "nvidia_smi_after": b,
            "memory_used_diff_mib": g.memory_used_mib - (a["memory_used_mib"] + b["memory_used_mib"]) / 2,
            "memory_total_diff_mib": g.memory_total_mib - a["memory_total_mib"],
            "processes": [{"pid": p.pid, "used_mib": p.used_mib, "name": p.name, "in_server_tree": p.pid in tree}
                          for p in g.processes],
        })
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
