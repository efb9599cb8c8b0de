#!/usr/bin/env python3
"""Extract per-release facts from SGLang's released wheels into ``specdash/sglang/facts/``.

Usage::

    python scripts/extract_sglang_facts.py                      # every release 0.5.10 … newest on the index
    python scripts/extract_sglang_facts.py --wheel sglang-0.5.14-….whl [--wheel …]   # wheels already on disk
    python scripts/extract_sglang_facts.py --since 0.5.10 --download-dir /tmp/wheels

Each wheel is fetched with ``pip download --no-deps sglang==X`` and read with :mod:`ast` only —
nothing of SGLang is imported.  One gzipped JSON file per release is written to
``specdash/sglang/facts/sglang-<release>.json.gz``, every fact with its provenance (``src`` =
``path/in/the/wheel.py:line``; the file names the release and the wheel).  A new SGLang release is a
re-run of this script, not a code change.

What is read (the doctor and the simulator consult nothing else for these facts):

``flags``
    every long option ``sglang serve`` / ``python -m sglang.launch_server`` accepts: the
    ``parser.add_argument("--…")`` calls in ``sglang/srt/server_args.py`` and
    ``sglang/srt/arg_groups/**.py``, and every ``A[T, "help"]`` / ``A[T, Arg(...)]`` field of the
    ``ServerArgs`` dataclass (0.5.14–0.5.19) and of the namespace classes of
    ``sglang/srt/arg_groups/fields/*.py`` (0.5.20+), which ``arg_utils.add_cli_args_from_dataclass``
    registers (flag = ``--`` + field name with ``_`` → ``-``, or ``Arg(cli_name=…)``, plus
    ``Arg(aliases=[…])``; ``Arg(no_cli=True)`` skipped).  Per flag: ``dest``, ``default`` (when it is a
    literal), ``choices`` (when they resolve to literals), ``kind`` (``bool`` for a store-true flag,
    ``list`` for ``nargs``), ``deprecated`` (the replacement the deprecation action names, or
    ``true``), ``removed`` (a ``DeprecatedAction`` with an ``error_message``: argparse stops with it).
``algorithms``
    the members of ``SpeculativeAlgorithm`` (``sglang/srt/speculative/spec_info.py``) and the aliases
    the speculative hook rewrites (``NEXTN`` → ``EAGLE``; ``_RESERVED_ALIASES``), plus the draft
    architectures that promote an algorithm (Gemma-4 assistant drafts → ``FROZEN_KV_MTP``) and the
    algorithm refused for them.
``models``
    every architecture a ``sglang/srt/models/*.py`` registers (``EntryClass``), with where the class (or
    a base it inherits, resolved through the module's imports) defines ``set_eagle3_layers_to_capture``
    (it can feed an EAGLE3 head) and ``get_embed_and_head``.
``draft_archs``
    the target architectures ``ModelConfig._config_draft_model`` (``sglang/srt/configs/model_config.py``)
    rewrites to a draft class when the target's own directory is loaded as the draft (bundled MTP /
    NextN layers), ``draft_path_defaults``: the targets whose missing draft path the speculative hook sets
    to the target's (``_handle_eagle_family``), and ``draft_default_src``: where the draft's model path falls back to the target's
    (``ModelConfig.from_server_args``: ``model_path=model_path or …model_path``).
``checks``
    refusals of the argument checks that specdash's own resolver mirrors, each with SGLang's message:
    LoRA with speculative decoding (the algorithms allowed; whether ``--speculative-adaptive`` is refused),
    DFLASH's ``--speculative-dflash-block-size`` against ``--speculative-num-draft-tokens``.
``adaptive``
    ``DEFAULT_ADAPTIVE_CONFIG`` and whether the shared logits buffer of CUDA-graph replays
    (``ModelRunner.max_decode_logits_rows``) is sized for the adaptive candidates' draft tokens.
``eagle3_loader``
    what ``LlamaForCausalLMEagle3`` (``sglang/srt/models/llama_eagle3.py``) does with
    ``tie_word_embeddings`` (``lm_head = embed_tokens``) and which config fields its classes read as
    plain attributes (a missing one raises ``AttributeError``) or through ``getattr`` with a default.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

#: Bumped whenever the output's shape or meaning changes (the loader refuses other versions).
EXTRACTOR_VERSION = 1
FACTS_DIR = Path(__file__).resolve().parents[1] / "specdash" / "sglang" / "facts"
FIRST_RELEASE = "0.5.10"

_DEPRECATION_ACTIONS = ("DeprecatedAction", "DeprecatedStoreTrueAction", "DeprecatedStoreConstAction",
                        "DeprecatedAliasStoreAction")


# --- the wheel ---------------------------------------------------------------------------------------
class Wheel:
    """The Python sources of one SGLang wheel (``sglang/**.py``), parsed on demand."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with zipfile.ZipFile(self.path) as zf:
            self.files = {n: zf.read(n).decode("utf-8", "replace") for n in zf.namelist()
                          if n.startswith("sglang/") and n.endswith(".py")}
            meta = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            self.metadata = zf.read(meta[0]).decode("utf-8", "replace") if meta else ""
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, name: str) -> ast.Module | None:
        if name not in self._trees:
            src = self.files.get(name)
            try:
                self._trees[name] = ast.parse(src) if src is not None else None
            except SyntaxError:
                self._trees[name] = None
        return self._trees[name]

    def glob(self, prefix: str, suffix: str = ".py") -> list[str]:
        return sorted(n for n in self.files if n.startswith(prefix) and n.endswith(suffix))

    @property
    def release(self) -> str:
        """``Version:`` of the wheel's ``*.dist-info/METADATA`` (else the file name's version).

        Raises:
            ValueError: neither names a version.
        """
        m = re.search(r"^Version:\s*(\S+)", self.metadata, re.M) or re.match(r"sglang-([^-]+)-", self.path.name)
        if not m:
            raise ValueError(f"{self.path.name}: no dist-info METADATA Version and not a sglang-<version>-….whl name")
        return m.group(1)


def _src(path: str, node: ast.AST) -> str:
    return f"{path}:{getattr(node, 'lineno', 0)}"


def _literal(node: ast.AST | None):
    """``(True, value)`` for a literal expression, else ``(False, None)``."""
    if node is None:
        return False, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _jsonable(value):
    if isinstance(value, (set, frozenset, tuple)):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value



def _top_level_assignments(tree: ast.Module) -> dict[str, ast.AST]:
    """``NAME = value`` and ``NAME: T = value`` at a module's top level: name -> value node."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out

def _module_constants(wheel: Wheel, path: str) -> dict[str, ast.AST]:
    """Top-level ``NAME = <expr>`` / ``NAME: T = <expr>`` of a module, plus names it imports from
    other ``sglang`` modules (resolved one level)."""
    tree = wheel.tree(path)
    if tree is None:
        return {}
    out = _top_level_assignments(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang."):
            other = node.module.replace(".", "/") + ".py"
            if other == path or other not in wheel.files:
                continue
            consts = None
            for alias in node.names:
                local = alias.asname or alias.name
                if local in out:
                    continue
                if consts is None:
                    ot = wheel.tree(other)
                    consts = _top_level_assignments(ot) if ot else {}
                if alias.name in consts:
                    out[local] = consts[alias.name]
    return out


def _eval(node: ast.AST | None, consts: dict[str, ast.AST], depth: int = 0):
    """A literal value of ``node``, following module constants, ``+`` of lists and ``list()/sorted()/set()``
    of literals; ``(False, None)`` when it does not reduce to a literal."""
    if node is None or depth > 6:
        return False, None
    ok, val = _literal(node)
    if ok:
        return True, val
    if isinstance(node, ast.Name) and node.id in consts:
        return _eval(consts[node.id], consts, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        ok1, a = _eval(node.left, consts, depth + 1)
        ok2, b = _eval(node.right, consts, depth + 1)
        if ok1 and ok2:
            try:
                return True, list(a) + list(b)
            except TypeError:
                return False, None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
            "list", "sorted", "set", "tuple", "frozenset") and len(node.args) == 1 and not node.keywords:
        ok, v = _eval(node.args[0], consts, depth + 1)
        if ok:
            try:
                return True, sorted(v) if node.func.id in ("sorted", "set", "frozenset") else list(v)
            except TypeError:
                return True, list(v)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                ok, v = _eval(e.value, consts, depth + 1)
                if not ok:
                    return False, None
                vals.extend(v)
                continue
            ok, v = _eval(e, consts, depth + 1)
            if not ok:
                return False, None
            vals.append(v)
        return True, vals
    return False, None


def _name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


# --- flags -------------------------------------------------------------------------------------------
def _flag_sources(wheel: Wheel) -> list[str]:
    return [p for p in ["sglang/srt/server_args.py", *wheel.glob("sglang/srt/arg_groups/")] if p in wheel.files]


def _dataclass_fields(wheel: Wheel) -> dict[str, tuple[str, ast.AnnAssign, ast.ClassDef]]:
    """Every annotated field of the ServerArgs dataclass and the ``arg_groups/fields`` namespaces."""
    out: dict[str, tuple[str, ast.AnnAssign, ast.ClassDef]] = {}
    for path in _flag_sources(wheel):
        tree = wheel.tree(path)
        if tree is None:
            continue
        for cls in tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            if path == "sglang/srt/server_args.py" and cls.name != "ServerArgs":
                continue
            if path != "sglang/srt/server_args.py" and "/fields/" not in path:
                continue
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    out.setdefault(node.target.id, (path, node, cls))
    return out


def _annotation_parts(ann: ast.AST) -> tuple[ast.AST, list[ast.AST]] | None:
    """``(type, metadata)`` of ``A[T, meta…]`` / ``Annotated[T, meta…]``, else None."""
    if isinstance(ann, ast.Subscript) and _name_of(ann.value) in ("A", "Annotated"):
        sl = ann.slice
        elts = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        if len(elts) >= 2:
            return elts[0], elts[1:]
    return None


def _type_info(tp: ast.AST) -> tuple[str, list | None]:
    """(kind, literal choices) of a field type: kind ``bool`` | ``list`` | ``value``."""
    inner = tp
    while isinstance(inner, ast.Subscript) and _name_of(inner.value) in ("Optional",):
        inner = inner.slice
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.BitOr):  # T | None
        left = inner.left if not (isinstance(inner.left, ast.Constant) and inner.left.value is None) else inner.right
        inner = left
    if isinstance(inner, ast.Subscript) and _name_of(inner.value) == "Union":
        elts = [e for e in (inner.slice.elts if isinstance(inner.slice, ast.Tuple) else [inner.slice])
                if not (isinstance(e, ast.Constant) and e.value is None)]
        if len(elts) == 1:
            inner = elts[0]
    name = _name_of(inner.value) if isinstance(inner, ast.Subscript) else _name_of(inner)
    if name == "bool":
        return "bool", None
    if name == "Literal" and isinstance(inner, ast.Subscript):
        ok, vals = _literal(inner.slice if isinstance(inner.slice, ast.Tuple) else ast.Tuple([inner.slice]))
        return "value", list(vals) if ok else None
    if name in ("List", "list"):
        return "list", None
    return "value", None


def _field_default(node: ast.AnnAssign, consts: dict[str, ast.AST]):
    """(known, value) of a dataclass / msgspec field default."""
    v = node.value
    if v is None:
        return True, None
    if isinstance(v, ast.Call) and _name_of(v.func) == "field":
        for kw in v.keywords:
            if kw.arg == "default":
                return _eval(kw.value, consts)
            if kw.arg == "default_factory":
                fac = _name_of(kw.value)
                return {"list": (True, []), "dict": (True, {})}.get(fac, (False, None))
        return False, None
    return _eval(v, consts)


def _put(flags: dict, name: str, entry: dict) -> None:
    if name not in flags:
        flags[name] = entry


def extract_flags(wheel: Wheel) -> dict[str, dict]:
    """The release's long options (see the module docstring), sorted by name."""
    flags: dict[str, dict] = {}
    fields = _dataclass_fields(wheel)
    consts_cache: dict[str, dict] = {}

    def consts_of(path: str) -> dict:
        if path not in consts_cache:
            consts_cache[path] = _module_constants(wheel, path)
        return consts_cache[path]

    def field_default(name: str):
        if name not in fields:
            return False, None
        path, node, _ = fields[name]
        return _field_default(node, consts_of(path))

    # 1. A[T, …] fields
    for fname, (path, node, _cls) in fields.items():
        parts = _annotation_parts(node.annotation)
        if parts is None:
            continue
        tp, meta = parts
        arg = None
        for m in meta:
            if isinstance(m, ast.Call) and _name_of(m.func) == "Arg":
                arg = {kw.arg: kw.value for kw in m.keywords if kw.arg}
                break
            if isinstance(m, ast.Constant) and isinstance(m.value, str):
                arg = {}
                break
        if arg is None:
            continue
        if _literal(arg.get("no_cli"))[1] is True:
            continue
        consts = consts_of(path)
        cli = _literal(arg.get("cli_name"))[1] or "--" + fname.replace("_", "-")
        ok_a, aliases = _literal(arg.get("aliases"))
        kind, lit_choices = _type_info(tp)
        ok_c, choices = _eval(arg.get("choices"), consts) if "choices" in arg else (lit_choices is not None,
                                                                                      lit_choices)
        ok_d, default = _field_default(node, consts)
        entry: dict = {"dest": fname}
        action = arg.get("action")
        if action is not None:
            kind = "bool" if _name_of(action) in ("store_true", "DeprecatedStoreTrueAction") else "value"
        if _literal(arg.get("nargs"))[1] in ("+", "*"):
            kind = "list"
        entry["kind"] = kind
        if ok_d:
            entry["default"] = _jsonable(default)
        if ok_c and choices is not None:
            entry["choices"] = _jsonable(choices)
        if action is not None and _name_of(action) in _DEPRECATION_ACTIONS:
            akw = arg.get("action_kwargs")
            ok_k, akw_v = _literal(akw)
            new = (akw_v or {}).get("new_flag") if ok_k and isinstance(akw_v, dict) else None
            entry["deprecated"] = new or True
        entry["src"] = _src(path, node)
        _put(flags, cli, entry)
        for alias in (aliases or []) if ok_a else []:
            _put(flags, alias, dict(entry, alias_of=cli))

    # 2. parser.add_argument("--…", …)
    for path in _flag_sources(wheel):
        tree = wheel.tree(path)
        if tree is None:
            continue
        consts = consts_of(path)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument"):
                continue
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            longs = [n for n in names if n.startswith("--")]
            if not longs:
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            action = kw.get("action")
            action_name = _name_of(action) if action is not None else None
            dest = _literal(kw.get("dest"))[1] or longs[0].lstrip("-").replace("-", "_")
            entry = {"dest": dest}
            if action_name in ("store_true", "store_false", "DeprecatedStoreTrueAction") or (
                    action_name == "DeprecatedAction" and "nargs" not in kw):
                entry["kind"] = "bool"
            elif _literal(kw.get("nargs"))[1] in ("+", "*"):
                entry["kind"] = "list"
            else:
                entry["kind"] = "value"
            d = kw.get("default")
            if d is not None:
                ok, val = _eval(d, consts)
                if not ok and isinstance(d, ast.Attribute) and _name_of(d.value) == "ServerArgs":
                    ok, val = field_default(d.attr)
                if not ok and isinstance(d, ast.Call) and _name_of(d.func) == "_declared_default" and d.args:
                    ok, val = field_default(str(_literal(d.args[0])[1]))
                if ok:
                    entry["default"] = _jsonable(val)
            elif action_name in ("store_true",):
                entry["default"] = False
            elif dest in fields:
                ok, val = field_default(dest)
                if ok:
                    entry["default"] = _jsonable(val)
            if "choices" in kw:
                ok, val = _eval(kw["choices"], consts)
                if ok:
                    entry["choices"] = _jsonable(val)
            if action_name in _DEPRECATION_ACTIONS:
                ok, msg = _literal(kw.get("error_message"))
                if action_name == "DeprecatedAction" and ok and msg:
                    entry["removed"] = msg
                else:
                    entry["deprecated"] = _literal(kw.get("new_flag"))[1] or True
            entry["src"] = _src(path, node)
            for i, name in enumerate(longs):
                _put(flags, name, dict(entry, alias_of=longs[0]) if i else entry)
    return dict(sorted(flags.items()))


# --- speculative algorithms --------------------------------------------------------------------------
def extract_algorithms(wheel: Wheel) -> dict:
    """Members of ``SpeculativeAlgorithm`` (``NONE`` left out), the aliases, and draft promotions."""
    path = "sglang/srt/speculative/spec_info.py"
    out: dict = {"names": [], "aliases": {}, "promotions": {}}
    tree = wheel.tree(path)
    for node in (tree.body if tree else []):
        if isinstance(node, ast.ClassDef) and node.name == "SpeculativeAlgorithm":
            out["src"] = _src(path, node)
            for n in node.body:
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    if n.targets[0].id.isupper() and n.targets[0].id != "NONE":
                        out["names"].append(n.targets[0].id)
    # aliases: `if <x>.speculative_algorithm == "A": <x>.speculative_algorithm = "B"` (0.5.10-style) and
    # `if speculative_algorithm == "A" or … : return "B"` (arg_groups/speculative_hook.py)
    for p in [q for q in ("sglang/srt/server_args.py", "sglang/srt/arg_groups/speculative_hook.py") if q in wheel.files]:
        tree = wheel.tree(p)
        for node in ast.walk(tree) if tree else []:
            if not isinstance(node, ast.If):
                continue
            cmp_names = []
            for c in ast.walk(node.test):
                if isinstance(c, ast.Compare) and "speculative_algorithm" in ast.unparse(c.left) and len(c.ops) == 1 \
                        and isinstance(c.ops[0], ast.Eq) and isinstance(c.comparators[0], ast.Constant):
                    cmp_names.append(c.comparators[0].value)
            if not cmp_names:
                continue
            target = None
            for b in node.body:
                if isinstance(b, ast.Assign) and "speculative_algorithm" in ast.unparse(b.targets[0]) \
                        and isinstance(b.value, ast.Constant):
                    target = b.value.value
                if isinstance(b, ast.Return) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
                    target = b.value.value
            if target:
                for a in cmp_names:
                    if a != target and a not in out["names"]:
                        out["aliases"].setdefault(a, {"to": target, "src": _src(p, node)})
            # promotions: a nested `if is_<x>_draft: return "Y"` whose flag comes from a tuple of archs
            for b in node.body:
                if isinstance(b, ast.If) and any(isinstance(x, ast.Return) and isinstance(x.value, ast.Constant)
                                                 for x in b.body):
                    ret = next(x.value.value for x in b.body if isinstance(x, ast.Return)
                               and isinstance(x.value, ast.Constant))
                    flag = ast.unparse(b.test)
                    archs = _archs_behind_flag(tree, flag)
                    for arch, src_node in archs:
                        out["promotions"][arch] = {"algorithm": ret, "from": sorted(set(cmp_names)),
                                                   "src": _src(p, b), "arch_src": _src(p, src_node)}
        # refusals of an algorithm for those archs: `if speculative_algorithm == "X" and is_<x>_draft: raise …`
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, ast.If) and any(isinstance(b, ast.Raise) for b in node.body):
                test = ast.unparse(node.test)
                m = re.match(r"^speculative_algorithm == '(\w+)' and (\w+)$", test)
                if m:
                    msg = _raise_message(next(b for b in node.body if isinstance(b, ast.Raise)))
                    for arch, _ in _archs_behind_flag(tree, m.group(2)):
                        out.setdefault("refused", {}).setdefault(arch, {})[m.group(1)] = {
                            "message": msg, "src": _src(p, node)}
    for p in wheel.glob("sglang/srt/speculative/spec_registry"):
        consts = _module_constants(wheel, p)
        ok, vals = _eval(consts.get("_RESERVED_ALIASES"), consts)
        if ok:
            node = consts["_RESERVED_ALIASES"]
            for a in vals:
                out["aliases"].setdefault(a, {"to": "EAGLE", "src": _src(p, node)})
    out["names"] = sorted(set(out["names"]))
    out["aliases"] = dict(sorted(out["aliases"].items()))
    return out


def _archs_behind_flag(tree: ast.Module, flag: str) -> list[tuple[str, ast.AST]]:
    """Architectures of ``flag = any(arch in ("A", "B") …)`` / ``flag = arch in (…)`` assignments."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == flag for t in node.targets):
            for c in ast.walk(node.value):
                if isinstance(c, (ast.Tuple, ast.List, ast.Set)):
                    ok, vals = _literal(c)
                    if ok:
                        out += [(v, node) for v in vals if isinstance(v, str) and v[:1].isupper()]
    return out


def _raise_message(node: ast.Raise | ast.Assert) -> str:
    """The message of ``raise E("…")`` / ``assert c, "…"`` as text (f-string fields as ``{expr}``)."""
    exc = node.msg if isinstance(node, ast.Assert) else node.exc
    if isinstance(exc, ast.Call) and exc.args:
        exc = exc.args[0]
    if exc is None:
        return ""
    return _str_text(exc)


def _str_text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                parts.append("{" + ast.unparse(v.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _str_text(node.left) + _str_text(node.right)
    return ast.unparse(node)


# --- model classes -----------------------------------------------------------------------------------
_CAPTURE = "set_eagle3_layers_to_capture"
_EMBED_HEAD = "get_embed_and_head"


def extract_models(wheel: Wheel) -> dict[str, dict]:
    """Registered architectures (``EntryClass``) → module and where the capture / embed-and-head methods
    are defined for that class (own or inherited)."""
    classes: dict[tuple[str, str], tuple[ast.ClassDef, list[tuple[str, str] | None]]] = {}
    entries: list[tuple[str, str, ast.AST]] = []
    mods = wheel.glob("sglang/srt/models/")
    for path in mods:
        tree = wheel.tree(path)
        if tree is None:
            continue
        mod = path[:-3].replace("/", ".")
        local: dict[str, tuple[str, str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang.srt.models"):
                for alias in node.names:
                    local[alias.asname or alias.name] = (node.module, alias.name)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                local[node.name] = (mod, node.name)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = [local.get(_name_of(b)) if isinstance(b, (ast.Name, ast.Attribute)) else None
                         for b in node.bases]
                # a base of the same name as the class (class LlamaModel(LlamaModel)) is the imported one
                bases = [b if b != (mod, node.name) else None for b in bases]
                classes[(mod, node.name)] = (node, bases)
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass"
                                                    for t in node.targets):
                vals = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                for v in vals:
                    name = _name_of(v) if isinstance(v, (ast.Name, ast.Attribute)) else None
                    if name:
                        tgt = local.get(name, (mod, name))
                        entries.append((tgt[0], tgt[1], node))
    memo: dict[tuple[str, str, str], str | None] = {}

    def where(key: tuple[str, str], method: str, seen: frozenset = frozenset()) -> str | None:
        if key in seen or key not in classes:
            return None
        mkey = (key[0], key[1], method)
        if mkey in memo:
            return memo[mkey]
        node, bases = classes[key]
        found = None
        for b in node.body:
            if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name == method:
                found = _src(key[0].replace(".", "/") + ".py", b)
                break
        if found is None:
            for base in bases:
                if base is not None:
                    found = where(base, method, seen | {key})
                    if found:
                        break
        memo[mkey] = found
        return found

    out: dict[str, dict] = {}
    for mod, name, _node in entries:
        if (mod, name) not in classes:
            continue
        cnode, _ = classes[(mod, name)]
        entry = {"module": mod.rsplit(".", 1)[-1], "src": _src(mod.replace(".", "/") + ".py", cnode)}
        cap = where((mod, name), _CAPTURE)
        if cap:
            entry["eagle3_capture"] = cap
        eh = where((mod, name), _EMBED_HEAD)
        if eh:
            entry["embed_and_head"] = eh
        out.setdefault(name, entry)
    return dict(sorted(out.items()))


# --- draft architectures (bundled MTP / NextN) -------------------------------------------------------
def extract_draft_archs(wheel: Wheel) -> tuple[dict[str, dict], str | None]:
    """``ModelConfig._config_draft_model``'s rewrites (target arch → draft arch) and where the draft's
    model path falls back to the target's."""
    path = "sglang/srt/configs/model_config.py"
    tree = wheel.tree(path)
    out: dict[str, dict] = {}
    fallback = None
    if tree is None:
        return out, None
    consts = _module_constants(wheel, path)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "model_path" and isinstance(node.value, ast.BoolOp) \
                and isinstance(node.value.op, ast.Or) and fallback is None:
            if ast.unparse(node.value.values[-1]).endswith("model_path"):
                fallback = _src(path, node.value)
        if not isinstance(node, ast.If) or "is_draft_model" not in ast.unparse(node.test):
            continue
        archs: list[str] = []
        for c in ast.walk(node.test):
            if isinstance(c, ast.Compare) and "architectures" in ast.unparse(c.left):
                for op, comp in zip(c.ops, c.comparators):
                    if isinstance(op, ast.Eq) and isinstance(comp, ast.Constant):
                        archs.append(comp.value)
                    elif isinstance(op, ast.In):
                        ok, vals = _eval(comp, consts)
                        if ok:
                            archs += [v for v in vals if isinstance(v, str)]
        if not archs:
            continue
        draft = None
        for b in node.body:
            for sub in ast.walk(b):
                if isinstance(sub, ast.Assign) and "architectures" in ast.unparse(sub.targets[0]):
                    ok, val = _literal(sub.value)
                    if ok and isinstance(val, str):
                        draft = draft or val
                    elif ok and isinstance(val, list) and val and isinstance(val[0], str):
                        draft = draft or val[0]
        if draft is None:
            continue
        for a in archs:
            out.setdefault(a, {"draft": draft, "src": _src(path, node)})
    return dict(sorted(out.items())), fallback


def extract_draft_path_defaults(wheel: Wheel) -> dict[str, str]:
    """Target architectures for which the speculative hook sets a missing ``--speculative-draft-model-path``
    to ``--model-path`` (``_handle_eagle_family``: ``if model_arch in [...]: … draft path = model_path``)."""
    out: dict[str, str] = {}
    for p in [q for q in ("sglang/srt/server_args.py", "sglang/srt/arg_groups/speculative_hook.py") if q in wheel.files]:
        tree = wheel.tree(p)
        for node in ast.walk(tree) if tree else []:
            if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                    and isinstance(node.test.ops[0], ast.In) and "arch" in ast.unparse(node.test.left)):
                continue
            body = "\n".join(ast.unparse(b) for b in node.body)
            if not re.search(r"speculative_draft_model_path\s*=\s*\S*model_path", body):
                continue
            ok, archs = _literal(node.test.comparators[0])
            if ok:
                for a in archs:
                    out.setdefault(a, _src(p, node))
    return dict(sorted(out.items()))


# --- checks the resolver mirrors ---------------------------------------------------------------------
def _functions(wheel: Wheel, paths: list[str]):
    for p in paths:
        tree = wheel.tree(p)
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield p, node


def extract_checks(wheel: Wheel) -> dict:
    """LoRA × speculative decoding and DFLASH block size refusals (message and source)."""
    paths = _flag_sources(wheel)
    checks: dict = {}
    for p, fn in _functions(wheel, paths):
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Raise, ast.Assert)):
                continue
            msg = _raise_message(node)
            if "LoRA" in msg and "compatible" in msg and "speculative" in msg and "lora_speculative" not in checks:
                allowed: list = []
                for c in ast.walk(fn):
                    if isinstance(c, ast.Compare) and "speculative_algorithm" in ast.unparse(c.left):
                        for op, comp in zip(c.ops, c.comparators):
                            if isinstance(op, (ast.In, ast.NotIn)):
                                ok, vals = _literal(comp)
                                if ok:
                                    allowed += [v for v in vals if isinstance(v, str)]
                    if isinstance(c, ast.Assign) and any("lora_spec_algorithms" in ast.unparse(t) for t in c.targets):
                        ok, vals = _literal(c.value)
                        if ok:
                            allowed += list(vals)
                    if isinstance(c, ast.Constant) and c.value == "NGRAM" and "NGRAM" not in allowed:
                        allowed.append("NGRAM")
                src_fn = ast.unparse(fn)
                checks["lora_speculative"] = {
                    "allowed": sorted(set(allowed)),
                    "adaptive_refused": "speculative_adaptive" in src_fn,
                    "message": msg, "src": _src(p, node)}
                if "speculative_adaptive" in src_fn:
                    for c in ast.walk(fn):
                        if isinstance(c, ast.Tuple) and len(c.elts) == 2 and "speculative_adaptive" in ast.unparse(
                                c.elts[0]):
                            checks["lora_speculative"]["adaptive_reason"] = _str_text(c.elts[1])
            if "dflash-block-size" in msg and "differ" in msg and "dflash_block_size_mismatch" not in checks:
                checks["dflash_block_size_mismatch"] = {"message": msg, "src": _src(p, node)}
    return checks


# --- adaptive ----------------------------------------------------------------------------------------
def extract_adaptive(wheel: Wheel) -> dict:
    out: dict = {}
    p = "sglang/srt/speculative/adaptive_spec_params.py"
    if p in wheel.files:
        consts = _module_constants(wheel, p)
        ok, val = _eval(consts.get("DEFAULT_ADAPTIVE_CONFIG"), consts)
        if ok:
            out["default_config"] = {"value": val, "src": _src(p, consts["DEFAULT_ADAPTIVE_CONFIG"])}
    for p2, fn in _functions(wheel, wheel.glob("sglang/srt/model_executor/")):
        if fn.name == "max_decode_logits_rows":
            body = ast.unparse(fn)
            out["shared_logits_buffer"] = {"sized_for_adaptive_candidates": "speculative_adaptive" in body,
                                           "src": _src(p2, fn)}
    for p3, fn in _functions(wheel, wheel.glob("sglang/srt/model_executor/graph_shared_output")):
        for node in ast.walk(fn):
            if isinstance(node, (ast.Raise, ast.Assert)) and "rows but caller" in _raise_message(node):
                out.setdefault("shared_logits_buffer", {})["message"] = _raise_message(node)
                out["shared_logits_buffer"]["message_src"] = _src(p3, node)
    return out


# --- the EAGLE3 draft loader -------------------------------------------------------------------------
def extract_eagle3_loader(wheel: Wheel) -> dict:
    """``LlamaForCausalLMEagle3``'s expectations of its ``config.json`` (``sglang/srt/models/llama_eagle3.py``).

    ``reads``: fields read as plain ``config.X`` attributes outside any ``hasattr(config, "X")`` guard
    (a missing one raises ``AttributeError`` unless the config class supplies it); ``untied_reads``: those
    read only in the ``else`` of ``if self.config.tie_word_embeddings`` (needed with untied heads only);
    ``optional``: ``getattr(config, "X", default)`` reads; ``tie_word_embeddings``: the assignment the
    tied branch makes (``self.lm_head = self.model.embed_tokens``).
    """
    p = "sglang/srt/models/llama_eagle3.py"
    tree = wheel.tree(p)
    if tree is None:
        return {}
    out: dict = {"src": p, "reads": {}, "untied_reads": {}, "optional": {}}
    guarded = {n.args[1].value for n in ast.walk(tree) if isinstance(n, ast.Call) and _name_of(n.func) == "hasattr"
               and len(n.args) == 2 and isinstance(n.args[1], ast.Constant)}
    untied: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("config.tie_word_embeddings"):
            for b in node.body:
                if isinstance(b, ast.Assign) and ast.unparse(b.targets[0]).endswith("lm_head"):
                    out["tie_word_embeddings"] = {"code": ast.unparse(b), "src": _src(p, b),
                                                  "test_src": _src(p, node)}
            for b in node.orelse:
                untied |= {id(x) for x in ast.walk(b)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "config" \
                and isinstance(node.ctx, ast.Load) and node.attr not in guarded:
            (out["untied_reads"] if id(node) in untied else out["reads"]).setdefault(node.attr, _src(p, node))
        if isinstance(node, ast.Call) and _name_of(node.func) == "getattr" and len(node.args) >= 2 and \
                isinstance(node.args[0], ast.Name) and node.args[0].id == "config" and \
                isinstance(node.args[1], ast.Constant):
            ok, dv = _literal(node.args[2]) if len(node.args) > 2 else (True, None)
            out["optional"].setdefault(node.args[1].value, {"default": _jsonable(dv) if ok else None,
                                                            "src": _src(p, node)})
    for k in ("reads", "untied_reads", "optional"):
        out[k] = dict(sorted(out[k].items()))
    return out


# --- one release -------------------------------------------------------------------------------------
def extract(wheel_path: str | Path) -> dict:
    """All facts of one wheel (see the module docstring for the fields)."""
    wheel = Wheel(wheel_path)
    draft_archs, fallback = extract_draft_archs(wheel)
    return {
        "extractor_version": EXTRACTOR_VERSION,
        "release": wheel.release,
        "wheel": wheel.path.name,
        "wheel_sha256": wheel.sha256,
        "flags": extract_flags(wheel),
        "algorithms": extract_algorithms(wheel),
        "models": extract_models(wheel),
        "draft_archs": draft_archs,
        "draft_default_src": fallback,
        "draft_path_defaults": extract_draft_path_defaults(wheel),
        "checks": extract_checks(wheel),
        "adaptive": extract_adaptive(wheel),
        "eagle3_loader": extract_eagle3_loader(wheel),
    }


def dumps(facts: dict) -> str:
    """The facts as committed: JSON, one top-level section per line block, flags and models one per line
    (diffs between releases stay readable)."""
    lines = ["{"]
    keys = list(facts)
    for i, k in enumerate(keys):
        v = facts[k]
        end = "," if i < len(keys) - 1 else ""
        if k in ("flags", "models", "draft_archs", "draft_path_defaults") and isinstance(v, dict) and v:
            lines.append(f"  {json.dumps(k)}: {{")
            items = list(v.items())
            for j, (name, entry) in enumerate(items):
                sep = "," if j < len(items) - 1 else ""
                lines.append(f"    {json.dumps(name)}: {json.dumps(entry, ensure_ascii=False, sort_keys=True)}{sep}")
            lines.append(f"  }}{end}")
        else:
            lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _vkey(v: str) -> tuple:
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?(.*)$", v)
    if not m:
        return (0,)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4) or 0), m.group(5))


def index_versions(python: str = sys.executable) -> list[str]:
    """The sglang releases on the package index (``pip index versions sglang``), final releases only."""
    out = subprocess.run([python, "-m", "pip", "index", "versions", "sglang"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    m = re.search(r"Available versions:\s*(.+)", out)
    if not m:
        raise SystemExit(f"pip index versions sglang printed no versions:\n{out}")
    return sorted((v.strip() for v in m.group(1).split(",") if re.match(r"^\d+\.\d+\.\d+(\.post\d+)?$", v.strip())),
                  key=_vkey)


def download(version: str, dest: Path, python: str = sys.executable) -> Path:
    """``pip download --no-deps sglang==version -d dest``; returns the wheel's path."""
    have = [p for p in dest.glob(f"sglang-{version}-*.whl")]
    if have:
        return have[0]
    subprocess.run([python, "-m", "pip", "download", "-q", "--no-deps", f"sglang=={version}", "-d", str(dest)],
                   check=True, timeout=1800)
    have = [p for p in dest.glob(f"sglang-{version}-*.whl")]
    if not have:
        raise SystemExit(f"pip download sglang=={version} left no wheel in {dest}")
    return have[0]


def write(facts: dict, out_dir: Path = FACTS_DIR) -> Path:
    """``out_dir/sglang-<release>.json.gz`` (gzip without a time stamp, so a re-run over the same wheel
    gives the same bytes; ``zcat`` shows the JSON)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"sglang-{facts['release']}.json.gz"
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(dumps(facts).encode("utf-8"))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", action="append", default=[], help="a wheel on disk (repeatable); no download")
    ap.add_argument("--since", default=FIRST_RELEASE, help=f"oldest release to extract (default {FIRST_RELEASE})")
    ap.add_argument("--download-dir", default=None, help="where wheels are kept (default: a temporary folder)")
    ap.add_argument("--out", default=str(FACTS_DIR), help="output folder (default specdash/sglang/facts)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    wheels = [Path(w) for w in args.wheel]
    tmp = None
    if not wheels:
        dest = Path(args.download_dir) if args.download_dir else Path(tmp := tempfile.mkdtemp(prefix="sglang-wheels-"))
        dest.mkdir(parents=True, exist_ok=True)
        versions = [v for v in index_versions() if _vkey(v) >= _vkey(args.since)]
        wheels = [download(v, dest) for v in versions]
    for w in wheels:
        facts = extract(w)
        path = write(facts, out)
        print(f"{facts['release']}: {len(facts['flags'])} flags, {len(facts['models'])} architectures "
              f"({sum(1 for m in facts['models'].values() if 'eagle3_capture' in m)} capture aux hidden states), "
              f"{len(facts['draft_archs'])} draft rewrites → {path}")
    if tmp:
        print(f"(wheels kept in {tmp})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
