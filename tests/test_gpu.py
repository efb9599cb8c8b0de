"""The NVML wrapper: v2 memory (what nvidia-smi shows), degradation without a driver."""

from __future__ import annotations

from types import SimpleNamespace

from specdash.collect import gpu


class FakeNVML:
    """Enough of pynvml for one device: v1 memory counts 614 MiB of driver reserve as used."""

    nvmlMemory_v2 = 0x02000028
    NVML_TEMPERATURE_GPU = 0

    class NVMLError(Exception):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        used = 72344 if version == self.nvmlMemory_v2 else 72958
        return SimpleNamespace(used=used * 2**20, total=143771 * 2**20)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=38)

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=1, usedGpuMemory=72334 * 2**20)]

    def nvmlDeviceGetPowerUsage(self, h):
        return 250000

    def nvmlDeviceGetUUID(self, h):
        return "GPU-x"

    def nvmlDeviceGetTemperature(self, h, kind):
        return 40


def test_reads_v2_memory_like_nvidia_smi(monkeypatch):
    monkeypatch.setattr(gpu, "_init", lambda: FakeNVML())
    (g,) = gpu.read_gpus()
    assert (g.name, g.memory_used_mib, g.memory_total_mib, g.utilization_pct) == ("NVIDIA H200", 72344, 143771, 38.0)
    assert g.memory_pct == 100 * 72344 / 143771
    assert g.processes[0].pid == 1 and g.processes[0].used_mib == 72334 and g.power_w == 250.0


def test_old_driver_without_v2_falls_back(monkeypatch):
    nv = FakeNVML()

    def v1_only(h, version=None):
        if version is not None:
            raise FakeNVML.NVMLError("Function Not Found")
        return SimpleNamespace(used=1000 * 2**20, total=2000 * 2**20)

    nv.nvmlDeviceGetMemoryInfo = v1_only
    monkeypatch.setattr(gpu, "_init", lambda: nv)
    assert gpu.read_gpus()[0].memory_used_mib == 1000


def test_without_driver_says_why(monkeypatch):
    monkeypatch.setattr(gpu, "_STATE", {"init": True, "error": "no NVIDIA driver (NVML Shared Library Not Found)",
                                        "nvml": None})
    assert gpu.read_gpus() == []
    assert gpu.nvml_status().startswith("no NVIDIA driver")
    assert gpu.gpu_snapshot() == {"status": "no NVIDIA driver (NVML Shared Library Not Found)", "devices": []}


def test_sim_payload():
    (g,) = gpu.gpus_from_sim({"devices": [{"index": 0, "name": "H100 (simulated)", "memory_used_mib": 70000.0,
                                           "memory_total_mib": 81559.0, "utilization_pct": 55.0,
                                           "processes": [{"pid": 9, "used_mib": 70000.0, "name": "specdash.sim"}]}]})
    assert g.simulated and g.memory_used_mib == 70000.0 and g.processes[0].name == "specdash.sim"
