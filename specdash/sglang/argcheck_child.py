"""Run one SGLang release's own argument parsing and validation on an argv — no model load, no GPU.

This file runs *in the profile's Python* (the interpreter that has SGLang), as ``python argcheck_child.py``,
and imports nothing of specdash.  It reads one JSON object on stdin::

    {"argv": [...], "gpu_memory_mib": 143771 | null, "stubs": ["triton", ...], "fields": [...],
     "standins": ["torchvision", ...]}

(the argv on stdin, never on a command line: it may hold ``--api-key``), then does what
``python -m sglang.launch_server`` does before any weights load: ``prepare_server_args(argv)``
(``srt/server_args.py``: argparse, then ``ServerArgs.__post_init__`` / ``resolve_once()`` with the
speculative, parallelism, memory and CUDA-graph hooks of ``srt/arg_groups/``) and
``server_args.check_server_args()`` (parallel sizes, LoRA, …; ``srt/entrypoints/engine.py`` calls it
next).  It prints one line ``SPECDASH_ARGCHECK <json>`` with ``status`` ``ok`` | ``refused`` |
``unavailable``, SGLang's version, the exception's type, message and the SGLang source line that raised
it, the values SGLang resolved for ``fields``, the WARNING lines it logged, and the modules stood in for.

No GPU is touched: ``get_device_memory_capacity`` answers ``gpu_memory_mib`` (from NVML when the caller
has it) instead of ``torch.cuda.mem_get_info``; with no CUDA device visible ``--device cuda`` is added so
the CUDA paths are judged, not the CPU ones.  ``stubs`` names modules that may be stood in for when they
are *not installed* (triton, torchvision, … that SGLang imports at module level but never calls while
parsing); an installed module always wins (the stand-in finder sits last on ``sys.meta_path``).
``standins`` names modules stood in for even where installed (first on ``sys.meta_path``): the caller's
choice to skip an import the check never runs (torchvision costs ~4.5 s of SGLang 0.5.14's import on a GPU
host, for ``decode_jpeg`` alone, which ``srt/utils/common.py`` calls only when decoding a request's image).
"""

import os
import sys

# This file sits beside specdash's own modules (secrets.py, logs.py, …): drop its folder from the path
# first, so SGLang's `from secrets import token_hex` finds the standard library.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import importlib.abc  # noqa: E402
import importlib.machinery  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

MARK = "SPECDASH_ARGCHECK "


class _StubBase:
    def __init__(self, *a, **k):
        pass

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{type(self).__name__}().{attr}")


class _StubMeta(type):
    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{cls.__name__}.{attr}")


class _Stub:
    """A stand-in value: decorators pass through, a call with no arguments raises (probes such as
    ``triton.runtime.driver.active.get_current_target()`` then take their 'not available' branch)."""

    def __init__(self, name):
        self._n = name

    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        if not a and not k:
            raise RuntimeError(f"{self._n} is a stand-in (module not installed)")
        return _Stub(self._n + "()")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{self._n}.{attr}")

    def __getitem__(self, k):
        return _Stub(self._n + "[]")

    def __mro_entries__(self, bases):
        return (object,)

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())


class _StubModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []
        self.__version__ = "0.0.0"

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        if attr.lstrip("_")[:1].isupper():
            cls = _StubMeta(attr, (_StubBase,), {"__module__": self.__name__})
            setattr(self, attr, cls)
            return cls
        return _Stub(f"{self.__name__}.{attr}")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = set(roots)
        self.used = set()

    def find_spec(self, name, path, target=None):
        root = name.split(".")[0]
        if root in self.roots:
            self.used.add(root)
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        pass


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        try:
            msg = record.getMessage()
        except Exception:
            msg = str(record.msg)
        if msg not in self.lines and len(self.lines) < 50:
            self.lines.append(msg)


def _raised_at(tb):
    """The innermost frame of the traceback inside the sglang package: ``sglang/….py:line in func``."""
    where = None
    for fr in traceback.extract_tb(tb):
        path = fr.filename.replace(os.sep, "/")
        i = path.rfind("/sglang/")
        if i >= 0:
            where = f"{path[i + 1:]}:{fr.lineno} in {fr.name}"
    return where


def _value(v):
    import dataclasses

    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        try:
            v = dataclasses.asdict(v)
        except Exception:
            pass
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return repr(v)


def main():
    t0 = time.monotonic()
    req = json.loads(sys.stdin.read() or "{}")
    out = {"status": "unavailable", "python": sys.executable}
    finder = _StubFinder(req.get("stubs") or [])
    sys.meta_path.append(finder)  # last: installed modules win
    forced = _StubFinder(req.get("standins") or [])
    sys.meta_path.insert(0, forced)  # first: stood in for even where installed
    warn = _Warnings()
    try:
        import sglang

        out["sglang_version"] = getattr(sglang, "__version__", None)
        import sglang.srt.server_args as sa_mod
    except BaseException as exc:  # not importable here: say why
        out.update(exception=type(exc).__name__, message=str(exc)[:2000], where=_raised_at(exc.__traceback__))
        out["stubbed"] = sorted(finder.used | forced.used)
        out["seconds"] = round(time.monotonic() - t0, 2)
        print(MARK + json.dumps(out), flush=True)
        return
    out["import_seconds"] = round(time.monotonic() - t0, 2)
    mib = req.get("gpu_memory_mib")
    argv = list(req.get("argv") or [])
    torch = sys.modules.get("torch")  # SGLang's import brought it in (nothing of torch is imported here)
    try:
        cuda = bool(torch is not None and torch.cuda.is_available())
    except Exception:
        cuda = False
    if not cuda and not any(a == "--device" or a.startswith("--device=") for a in argv):
        argv = ["--device", "cuda", *argv]
        out["device_added"] = True
        mib = mib or 81559.0  # an 80 GB device when nothing else is known (said in the report)
        out["gpu_memory_assumed"] = req.get("gpu_memory_mib") is None
    if mib:
        def _capacity(device=None):
            return float(mib)
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("sglang") and hasattr(mod, "get_device_memory_capacity"):
                try:
                    mod.get_device_memory_capacity = _capacity
                except Exception:
                    pass
    out["argv_checked"] = argv
    logging.getLogger().addHandler(warn)
    original = logging.basicConfig

    def _basic_config(*a, **k):  # prepare_server_args reconfigures logging with force=True
        original(*a, **k)
        logging.getLogger().addHandler(warn)

    logging.basicConfig = _basic_config
    stages = out["stage_seconds"] = {}  # where the time after the import goes (s), stage by stage
    mods = len(sys.modules)

    def _stage(name, fn):
        t = time.monotonic()
        try:
            return fn()
        finally:
            stages[name] = round(time.monotonic() - t, 2)

    try:
        server_args = _stage("prepare_server_args", lambda: sa_mod.prepare_server_args(argv))
        if hasattr(server_args, "resolve_once"):
            _stage("resolve_once", server_args.resolve_once)
        if hasattr(server_args, "check_server_args"):
            _stage("check_server_args", server_args.check_server_args)
        view = server_args
        try:
            from sglang.srt.arg_groups.overrides import resolving_view

            view = resolving_view(server_args)
        except Exception:
            pass
        out["resolved"] = {f: _value(getattr(view, f, None)) for f in req.get("fields") or []}
        out["status"] = "ok"
    except SystemExit as exc:  # argparse: exit 2 after printing 'error: …' on stderr
        out.update(status="refused", exception="SystemExit", exit_code=exc.code, message="argparse exited")
    except BaseException as exc:
        out.update(status="refused", exception=type(exc).__name__, message=str(exc)[:4000],
                   where=_raised_at(exc.__traceback__))
    out["modules_imported_while_checking"] = len(sys.modules) - mods
    out["warnings"] = warn.lines
    out["stubbed"] = sorted(finder.used | forced.used)
    out["seconds"] = round(time.monotonic() - t0, 2)
    print(MARK + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
