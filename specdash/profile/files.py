"""Profile and suite files: TOML read (:mod:`tomllib`) and write (:mod:`tomlkit`), name lookup.

Lookup of a name: an existing path; the user's directory
``${XDG_CONFIG_HOME:-~/.config}/specdash/profiles``; the checkout's ``profiles/``; the
presets shipped inside the package (``specdash/_profiles``); for a profile, last, ``./NAME.toml``
(where ``profile import`` writes by default).  Suites are looked up the
same way under ``suites/``.  Writing never overwrites unless asked (:func:`write_new_file`),
and an existing file's comments survive an update (:func:`profile_to_toml`).
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path

from specdash.profile.schema import Profile, ProfileError, Suite, parse_profile, parse_suite


def read_toml(path: Path | str) -> dict:
    """A TOML file of the user's (a profile, a suite) as a dict: a regular file of at most
    :data:`specdash.bounded.TOML_BYTES`, UTF-8, nested at most :data:`specdash.bounded.JSON_MAX_DEPTH` levels.

    Raises:
        ProfileError: unreadable, not a regular file, too large, not UTF-8, not TOML or nested too deep —
            the message starts with the path.
    """
    from specdash.bounded import JSON_MAX_DEPTH, TOML_BYTES, InputError, json_depth_error, read_bytes

    try:
        data = read_bytes(path, limit=TOML_BYTES, what="TOML file")
    except InputError as exc:
        raise ProfileError(f"{path}: unreadable: {str(exc).removeprefix(f'TOML file {path}: ')}") from None
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: unreadable: {not_utf8(exc)}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise ProfileError(f"{path}: not valid TOML: values nested too deeply to read") from None
    if json_depth_error(doc, JSON_MAX_DEPTH) is not None:
        raise ProfileError(f"{path}: values nested more than {JSON_MAX_DEPTH} levels deep; a profile or suite "
                           "nests a few levels at most")
    return doc


_read_toml = read_toml


def not_utf8(exc: UnicodeDecodeError) -> str:
    """``not UTF-8 text (byte 0xff at offset 12); save it as UTF-8``."""
    bad = exc.object[exc.start:exc.start + 1]
    return (f"not UTF-8 text (byte 0x{bad.hex() or '??'} at offset {exc.start}); "
            "TOML and JSONL files must be UTF-8: save it as UTF-8")


def safe_name(name: str) -> str:
    """A profile name made safe for a file or directory name (``[A-Za-z0-9._-]``, others → ``-``;
    ``run`` when nothing is left)."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "run"


# --- lookup ------------------------------------------------------------------------------------


def user_profile_dir() -> Path:
    """``${XDG_CONFIG_HOME:-~/.config}/specdash/profiles``."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "specdash" / "profiles"


def preset_dirs() -> list[Path]:
    """Where presets are searched, in order: the user's directory, the checkout's
    ``profiles/`` (editable installs), the package's bundled copy."""
    pkg = Path(__file__).resolve().parent.parent  # specdash/
    dirs = [user_profile_dir(), pkg.parent / "profiles", pkg / "_profiles"]
    seen, out = set(), []
    for d in dirs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _find(name: str, sub: str, kind: str) -> Path:
    p = Path(os.path.expanduser(name))
    if p.suffix == ".toml" or os.sep in name:
        if p.is_file():
            return p
        if p.is_dir():
            raise ProfileError(f"{kind} file {name!r} is a directory, not a {kind} file: give the .toml file in it"
                               + (" (`specdash profile list` shows the profiles found)" if kind == "profile" else ""))
        raise ProfileError(f"{kind} file {name!r} does not exist")
    for d in preset_dirs():
        cand = (d / sub / f"{name}.toml") if sub else (d / f"{name}.toml")
        if cand.is_file():
            return cand
    here = Path.cwd() / f"{name}.toml"
    if not sub and here.is_file():  # `profile import --name X` writes ./X.toml: the name finds it
        return here
    known = sorted(n for n, _ in (list_suites() if sub else list_profiles()))
    near = close_names(name, known)
    searched = ", ".join(str(d / sub) for d in preset_dirs()) + ("" if sub else ", then the current directory")
    if sub:
        listing = f"known suites: {', '.join(known) or 'none'}"
    else:
        listing = "`specdash profile list` lists the profiles found"
    hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
    raise ProfileError(f"no {kind} named {name!r} (searched {searched}): {hint}{listing}")


#: How alike (:class:`difflib.SequenceMatcher` ratio) a known name must be to be suggested for an unknown one:
#: a typo or two (``demo-eagle`` → ``demo-eagle3`` 0.95, ``codng`` → ``coding`` 0.91) passes; a name
#: that merely shares a word (``demo-eagle`` → ``demo-tree`` 0.74, ``my-profile`` → ``demo-adaptive`` 0.43) does not.
CLOSE_NAME_CUTOFF = 0.8


def close_names(name: str, known: list[str], n: int = 3) -> list[str]:
    """The known names within a typo or two of ``name`` (at most ``n``, closest first); ``[]`` when none is."""
    return difflib.get_close_matches(name, known, n=n, cutoff=CLOSE_NAME_CUTOFF)


def load_profile(name_or_path: str) -> Profile:
    """Read and validate a profile by name or path (see module docstring for the search order).

    Raises:
        ProfileError: not found, invalid TOML, invalid keys or values.
    """
    path = _find(name_or_path, "", "profile")
    return parse_profile(_read_toml(path), path)


def load_suite(name_or_path: str) -> Suite:
    """Read and validate a suite by name (``profiles/suites/NAME.toml``) or path.

    Raises:
        ProfileError: not found or invalid.
    """
    path = _find(name_or_path, "suites", "suite")
    return parse_suite(_read_toml(path), path)


def _list(sub: str) -> list[tuple[str, Path]]:
    out: dict[str, Path] = {}
    for d in preset_dirs():
        base = d / sub if sub else d
        if base.is_dir():
            for f in sorted(base.glob("*.toml")):
                out.setdefault(f.stem, f)
    return sorted(out.items())


def list_profiles() -> list[tuple[str, Path]]:
    """All profiles found (name, path); user profiles shadow presets of the same name."""
    return _list("")


def profile_entries() -> list[dict]:
    """``specdash profile list --json``: ``[{"name", "path", "source", "valid", "error"}]`` — every profile a
    name finds, in lookup order (:func:`load_profile`): ``source`` = ``"user"`` (your profile directory),
    ``"builtin"`` (the presets: the checkout's ``profiles/`` or the package's copy), ``"file"`` (a ``*.toml``
    profile in the current directory, found by name after both — what ``profile import`` writes there;
    other TOML files there, without a ``[server]`` table, are not listed); ``valid`` / ``error``: whether it
    parses and validates, else the first line of why.  Names shadowed by an earlier one are left out."""
    user = user_profile_dir()
    out: dict[str, dict] = {}
    for name, path in _list(""):
        out[name] = {"name": name, "path": str(path), "source": "user" if path.parent == user else "builtin"}
    cwd = Path.cwd()
    if cwd not in preset_dirs():
        for f in sorted(cwd.glob("*.toml")):
            if f.stem in out:
                continue
            try:
                data = _read_toml(f)
            except ProfileError:
                continue
            if isinstance(data.get("server"), dict):
                out[f.stem] = {"name": f.stem, "path": str(f), "source": "file"}
    for e in out.values():
        try:
            parse_profile(_read_toml(Path(e["path"])), Path(e["path"]))
            e.update(valid=True, error=None)
        except ProfileError as exc:
            e.update(valid=False, error=str(exc).splitlines()[0])
    return sorted(out.values(), key=lambda e: e["name"])


def list_suites() -> list[tuple[str, Path]]:
    """All suites found (name, path)."""
    return _list("suites")


# --- writing -----------------------------------------------------------------------------------


def profile_to_toml(profile: Profile, *, header: str = "", base_text: str | None = None) -> str:
    """Serialise a profile with tomlkit.

    With ``base_text`` (the source profile's file), that document is updated in place so
    its comments survive; otherwise a fresh document is written with ``header`` as a
    leading comment block.
    """
    import tomlkit

    data = profile.model_dump(exclude_none=True, exclude_defaults=False)
    if not data.get("env"):
        data.pop("env", None)
    if not data.get("nodes"):
        data.pop("nodes", None)
    for node in data.get("nodes") or []:  # [[nodes]] tables without empty env / extra_args
        for key in ("env", "extra_args"):
            if not node.get(key):
                node.pop(key, None)
    if not data.get("gpu_exporters"):
        data.pop("gpu_exporters", None)
    for section in data.values():  # [server] extra_args = [], ssh_options = [] … are the defaults: not written
        if isinstance(section, dict):
            for key in [k for k, v in section.items() if v == [] or v == {}]:
                del section[key]
    if profile.server.launcher != "sim":
        data.pop("sim", None)
    if base_text is not None:
        doc = tomlkit.parse(base_text)
        _merge(doc, data)
        for key in list(doc.keys()):
            if key not in data:
                del doc[key]
    else:
        doc = tomlkit.document()
        for line in header.strip().splitlines():
            doc.add(tomlkit.comment(line.lstrip("# ").rstrip()))
        if header.strip():
            doc.add(tomlkit.nl())
        for k, v in data.items():
            doc[k] = v
    return tomlkit.dumps(doc)


def _merge(doc, data: dict) -> None:
    for k, v in data.items():
        if isinstance(v, dict) and k in doc and hasattr(doc[k], "keys"):
            _merge(doc[k], v)
            for sub in list(doc[k].keys()):
                if sub not in v:
                    del doc[k][sub]
        else:
            doc[k] = v


def write_new_file(path: Path, text: str, *, force: bool = False) -> Path:
    """Write ``text`` to ``path``, refusing to overwrite unless ``force``.  A profile that holds a
    literal API key (``api_key = "…"`` that is not a ``${VAR}`` reference) is written with mode 0600:
    only its owner can read the key.

    Raises:
        ProfileError: the file exists and ``force`` is False.
    """
    path = Path(path)
    if path.exists() and not force:
        raise ProfileError(f"{path} already exists; choose another name/--out, or pass --force to overwrite")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    secret = re.search(r'(?m)^\s*(admin_)?api_key\s*=\s*["\'](?!\$\{)[^"\']+["\']', text) is not None
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    if secret:
        os.chmod(tmp, 0o600)  # an existing .tmp kept its old mode
    tmp.replace(path)
    return path
