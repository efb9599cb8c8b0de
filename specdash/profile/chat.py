"""Chat templates for raw-text suites: a chat model is never benchmarked on untemplated text unknowingly.

A suite with ``api = "chat"`` goes through ``/v1/chat/completions``: the server applies the target's
template (SGLang ``entrypoints/openai/serving_chat.py``), and the run records ``prompt_format = "chat API"``.
A suite with ``api = "generate"`` sends text to ``/generate``; its ``chat_template`` option says what text:

* ``"auto"`` (the default): when the target's tokenizer directory (the profile's ``--tokenizer-path``, else
  ``model_path``, when it is a local directory) holds a chat template — ``chat_template.jinja`` or the
  ``"chat_template"`` of ``tokenizer_config.json``, the two places Hugging Face transformers stores it (the
  ``.jinja`` file wins, as in ``PreTrainedTokenizerBase.from_pretrained``) — every prompt is rendered with it
  client-side (a ``text`` becomes one ``user`` message; ``messages`` are used as given) with
  ``add_generation_prompt=True``, and the rendered text is sent (``prompt_format = "chat-template (client)"``).
  Without a template (the simulator's ``sim:…`` models, a hub id, a base model) the text goes as written
  (``"raw"``).
* ``"none"``: the text as written, always (``"raw"``); when the target has a template the run warns that
  a chat model gets untemplated text.
* ``"require"``: as ``"auto"``, but a target without a template found is an error.

Rendering uses ``transformers`` when it is installed (``AutoTokenizer.apply_chat_template(messages,
add_generation_prompt=True, tokenize=False)``), else ``jinja2`` the way transformers compiles a template
(``utils/chat_template_utils.py``: an ``ImmutableSandboxedEnvironment`` with ``trim_blocks``,
``lstrip_blocks`` and ``loopcontrols``; ``raise_exception``, ``strftime_now`` and a ``tojson`` that keeps
non-ASCII; rendered with ``messages``, ``tools=None``, ``documents=None``, ``add_generation_prompt`` and the
special tokens of ``tokenizer_config.json`` — ``bos_token``, ``eos_token``, …).  Both are imported inside
the function that renders, never at module import.

BOS: templates such as Llama 3's begin with ``{{ bos_token }}``, and SGLang tokenizes a ``/generate``
``text`` with ``tokenizer.encode(text)`` — ``add_special_tokens=True``, transformers' default — so a
tokenizer that adds BOS itself would give the prompt two (transformers' chat-templating guide warns of
exactly this: text from ``apply_chat_template(tokenize=False)`` is to be tokenized with
``add_special_tokens=False``; its ``tokenize=True`` path does so, and SGLang's own chat route tokenizes
through it, one BOS).  Sending ``input_ids`` instead would need a request without ``text`` (SGLang's
``GenerateReqInput`` refuses both at once) and ties the run to a client-side tokenizer; so the text is kept
and, when the rendered text starts with the BOS token *and* the tokenizer adds BOS on encode, that one
leading BOS string is stripped: the server's encode puts it back, and the token sequence is the template's.
Whether the tokenizer adds BOS is read from ``tokenizer.json`` (``encode("")`` through ``tokenizers``)
or, without it, ``tokenizer_config.json``'s ``add_bos_token``.

:func:`apply_prompt_format` returns the suite to send and the record kept in ``manifest.json``
(``prompt_format``: format, template source path and SHA-256, renderer, BOS handling, warning).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdash.profile.schema import Profile, ProfileError, Prompt, Suite

CLIENT = "chat-template (client)"
RAW = "raw"
CHAT_API = "chat API"
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


@dataclass
class ChatTemplate:
    """A target's chat template as found on disk: the ``directory``, the ``source`` file (with
    ``#chat_template`` for the field of ``tokenizer_config.json``), the template text and the
    special tokens the template is rendered with."""

    directory: Path
    source: str
    template: str
    special: dict[str, Any] = field(default_factory=dict)
    add_bos: bool = False

    @property
    def sha256(self) -> str:
        """SHA-256 of the template text (what the manifest records)."""
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()


def tokenizer_dir(profile: Profile | None) -> tuple[Path | None, str]:
    """The target's local tokenizer directory (the profile's ``--tokenizer-path``, else ``model_path``;
    a ``tokenizer.json`` path stands for its directory) and, when there is none, why."""
    from specdash.profile.datasets import _profile_tokenizer_path
    from specdash.profile.schema import expand_path

    if profile is None:
        return None, "no profile (an attached server): the target's template is unknown"
    if profile.server.model_path == "(attached)":  # launch.attached_profile: --url without --profile
        return None, "an attached server without --profile: the tokenizer /server_info names is read once it answers"
    if profile.server.launcher == "sim":
        return None, "the simulator has no tokenizer"
    src = expand_path(_profile_tokenizer_path(profile), where=f"{profile.path or profile.name}: tokenizer") or ""
    if src.startswith("sim:"):
        return None, "the simulator has no tokenizer"
    p = Path(os.path.expanduser(src))
    if p.is_file():
        p = p.parent
    if not p.is_dir():
        return None, f"{src} is not a local directory (a hub id?): whether it has a chat template is unknown"
    return p, ""


def _token_text(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):  # {"__type": "AddedToken", "content": …}
        return v["content"]
    return None


def _inside(path: Path, directory: Path) -> bool:
    """Whether ``path`` resolves (symlinks followed) inside ``directory`` — or, for a snapshot of the Hugging
    Face cache (``…/models--owner--name/snapshots/<revision>``, whose files are symlinks to ``../../blobs/``),
    inside that repository's ``blobs/``."""
    real, base = path.resolve(), directory.resolve()
    if real.is_relative_to(base):
        return True
    if base.parent.name == "snapshots" and base.parent.parent.name.startswith(("models--", "datasets--")):
        return real.is_relative_to(base.parent.parent / "blobs")
    return False


def _confined(path: Path, directory: Path) -> Path:
    """``path`` when it resolves inside ``directory`` (:func:`_inside`), else a ProfileError: what a template
    renders is sent as every prompt, so a ``chat_template.jinja`` or ``tokenizer_config.json`` that is a
    symlink to some other file is not read unless the profile names a template file itself."""
    if not _inside(path, directory):
        raise ProfileError(
            f"{path} resolves to {path.resolve()}, outside the model directory {directory} (a symlink): what a "
            "chat template renders is sent as every prompt, so specdash reads templates only from inside the "
            "model directory (or its Hugging Face cache blobs). If that file is the template you mean, name it "
            "explicitly: add \"--chat-template\", \"PATH\" to [server] extra_args (SGLang's own flag, which the "
            "chat API uses too), or set chat_template = \"none\" in the suite")
    return path


def _read_template_file(path: Path) -> str:
    from specdash.bounded import CHAT_TEMPLATE_BYTES, InputError, read_text

    try:
        return read_text(path, limit=CHAT_TEMPLATE_BYTES, what="chat template")
    except InputError as exc:
        raise ProfileError(str(exc)) from None


def explicit_template(profile: Profile | None) -> Path | None:
    """The template file the profile names itself — SGLang's ``--chat-template PATH`` in ``[server] extra_args``,
    when PATH is an existing file (a built-in template name such as ``chatml`` is the server's business) — or
    None.  An explicitly named file is read wherever it is."""
    if profile is None:
        return None
    args = list(profile.server.extra_args)
    for i, a in enumerate(args):
        val = args[i + 1] if a == "--chat-template" and i + 1 < len(args) else (
            a.split("=", 1)[1] if a.startswith("--chat-template=") else None)
        if val:
            p = Path(os.path.expanduser(val))
            if p.is_file() or (p.exists() and not p.is_dir()):
                return p
    return None


def find_chat_template(directory: Path, *, explicit: Path | None = None) -> ChatTemplate | None:
    """The chat template stored in a tokenizer directory (None when it has none), or the file ``explicit``
    names (the profile's ``--chat-template``; the directory's special tokens still apply).

    Files are read bounded (:mod:`specdash.bounded`: a regular file, ``chat_template.jinja`` at most
    :data:`~specdash.bounded.CHAT_TEMPLATE_BYTES`, ``tokenizer_config.json`` at most
    :data:`~specdash.bounded.MODEL_JSON_BYTES` and nested at most :data:`~specdash.bounded.JSON_MAX_DEPTH`
    levels) and only from inside ``directory`` (:func:`_inside`; a symlink out of it is refused).

    Raises:
        ProfileError: ``tokenizer_config.json`` is not JSON, or its ``chat_template`` is of a shape
            transformers does not store; a template file is unreadable, too large or outside the directory.
    """
    from specdash.bounded import MODEL_JSON_BYTES, InputError, read_json

    cfg: dict = {}
    cfg_path = directory / "tokenizer_config.json"
    if cfg_path.is_file() or (cfg_path.exists() and not cfg_path.is_dir()):
        try:
            cfg = read_json(_confined(cfg_path, directory), limit=MODEL_JSON_BYTES, what="tokenizer config")
        except InputError as exc:
            raise ProfileError(f"{cfg_path}: not valid JSON ({exc})") from None
        if not isinstance(cfg, dict):
            raise ProfileError(f"{cfg_path}: not a JSON object")
    jinja = directory / "chat_template.jinja"
    template = source = None
    if explicit is not None:
        template, source = _read_template_file(explicit), str(explicit)
    elif jinja.is_file() or (jinja.exists() and not jinja.is_dir()):
        template, source = _read_template_file(_confined(jinja, directory)), str(jinja)
    elif cfg.get("chat_template") is not None:
        raw = cfg["chat_template"]
        if isinstance(raw, list):  # named templates [{name, template}]: transformers' default is "default"
            named = {t.get("name"): t.get("template") for t in raw if isinstance(t, dict)}
            raw = named.get("default")
            source = f"{cfg_path}#chat_template[default]"
        else:
            source = f"{cfg_path}#chat_template"
        if not isinstance(raw, str) or not raw.strip():
            raise ProfileError(f"{cfg_path}: chat_template is neither a template string nor a list with a "
                               "\"default\" {name, template} entry")
        template = raw
    if template is None:
        return None
    special = {k: t for k in _SPECIAL_KEYS if (t := _token_text(cfg.get(k))) is not None}
    extra = cfg.get("additional_special_tokens")
    if isinstance(extra, list):
        special["additional_special_tokens"] = [t for t in map(_token_text, extra) if t is not None]
    return ChatTemplate(directory, source, template, special, _adds_bos(directory, cfg, special.get("bos_token")))


def _adds_bos(directory: Path, cfg: dict, bos: str | None) -> bool:
    """Whether encoding text with special tokens (SGLang's ``tokenizer.encode(text)``) puts BOS first."""
    if not bos:
        return False
    tj = directory / "tokenizer.json"
    if tj.is_file():
        try:
            from tokenizers import Tokenizer

            from specdash.bounded import DATASET_BYTES, check_file

            check_file(_confined(tj, directory), limit=DATASET_BYTES, what="tokenizer")  # never a FIFO
            tok = Tokenizer.from_file(str(tj))
            ids, bos_id = tok.encode("").ids, tok.token_to_id(bos)
            return bool(ids) and bos_id is not None and ids[0] == bos_id
        except Exception:  # tokenizers missing or the file unreadable: fall back on the config
            pass
    return bool(cfg.get("add_bos_token", False))


def prompt_messages(prompt: Prompt) -> list[dict]:
    """The chat messages of a prompt: its ``messages`` as given, else its ``text`` as one user message."""
    if prompt.messages:
        return [m.model_dump() for m in prompt.messages]
    return [{"role": "user", "content": prompt.text}]


def render(ct: ChatTemplate, messages: list[dict], *, engine: str | None = None) -> str:
    """``messages`` rendered with the template, ``add_generation_prompt=True``, as text (BOS untouched).

    ``engine``: ``"transformers"`` or ``"jinja2"``; None: transformers when it is installed and loads
    the directory's tokenizer, else jinja2.

    Raises:
        ProfileError: neither library is installed, or the template fails on these messages.
    """
    return render_with(ct, messages, engine=engine)[0]


def render_with(ct: ChatTemplate, messages: list[dict], *, engine: str | None = None) -> tuple[str, str]:
    """:func:`render`, and the engine that rendered (``"transformers"`` / ``"jinja2"``).

    The rendered prompt is bounded: jinja2 renders it as a stream that is stopped past
    :data:`specdash.bounded.RENDERED_PROMPT_CHARS` characters, in a sandbox that also refuses a ``*`` / ``**``
    whose result would be larger (a template that loops or repeats a string cannot render gigabytes); before
    transformers renders a prompt (it builds the whole string), the same bounded render runs first."""
    if engine in (None, "transformers"):
        tok = None
        try:
            tok = _hf_tokenizer(ct)
        except ImportError:
            if engine == "transformers":
                raise ProfileError("rendering with transformers: it is not installed (pip install transformers)") from None
        except Exception as exc:  # a directory transformers cannot load (no tokenizer class, …)
            if engine == "transformers":
                raise ProfileError(f"transformers cannot load the tokenizer of {ct.directory}: {exc}") from None
        if tok is not None:
            _bounded_render(ct, messages)  # a template that would render gigabytes stops here
            try:
                return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                               chat_template=ct.template), "transformers"
            except Exception as exc:
                raise ProfileError(f"chat template {ct.source}: transformers failed to render: {exc}") from None
    return _bounded_render(ct, messages), "jinja2"


def _bounded_render(ct: ChatTemplate, messages: list[dict]) -> str:
    """The prompt rendered by jinja2 as a stream, stopped past :data:`specdash.bounded.RENDERED_PROMPT_CHARS`.

    Raises:
        ProfileError: jinja2 is missing, the template does not compile or fails, or renders too much.
    """
    from specdash.bounded import RENDERED_PROMPT_CHARS, size_text

    try:
        compiled = _jinja_template(ct.template)
    except ImportError:
        raise ProfileError("rendering the target's chat template needs transformers or jinja2, neither is "
                           "installed: pip install jinja2, or set chat_template = \"none\" in the suite") from None
    except Exception as exc:
        raise ProfileError(f"chat template {ct.source}: not a valid Jinja template: {exc}") from None
    parts, size = [], 0
    try:
        for chunk in compiled.generate(messages=messages, tools=None, documents=None, add_generation_prompt=True,
                                       **ct.special):
            size += len(chunk)
            if size > RENDERED_PROMPT_CHARS:
                raise _TooMuch
            parts.append(chunk)
    except _TooMuch:
        raise ProfileError(f"chat template {ct.source}: renders more than {size_text(RENDERED_PROMPT_CHARS)} "
                           "characters for one prompt (does it loop?); stopped rendering. Fix the template, or "
                           "set chat_template = \"none\" in the suite") from None
    except Exception as exc:
        if type(exc).__name__ == "SecurityError":
            raise ProfileError(f"chat template {ct.source}: {exc}; stopped rendering") from None
        raise ProfileError(f"chat template {ct.source}: failed to render: {exc}") from None
    return "".join(parts)


class _TooMuch(Exception):
    """A rendered prompt past the cap."""


_HF_CACHE: dict[str, Any] = {}


def _hf_tokenizer(ct: ChatTemplate):
    key = str(ct.directory)
    if key not in _HF_CACHE:
        from transformers import AutoTokenizer

        _HF_CACHE[key] = AutoTokenizer.from_pretrained(key)
    return _HF_CACHE[key]


@functools.lru_cache(maxsize=8)
def _jinja_template(text: str):
    """The template compiled as transformers compiles one (``_compile_jinja_template``), in a sandbox that
    also refuses a ``*`` / ``**`` whose result would exceed :data:`specdash.bounded.RENDERED_PROMPT_CHARS`
    (``'x' * 10**10``); compiled once per template text."""
    from datetime import datetime

    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    from specdash.bounded import RENDERED_PROMPT_CHARS

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**"])

        def call_binop(self, context, operator, left, right):
            sized = (str, bytes, list, tuple)
            if operator == "*":
                seq, n = (left, right) if isinstance(left, sized) else (right, left)
                if isinstance(seq, sized) and isinstance(n, int) and len(seq) * n > RENDERED_PROMPT_CHARS:
                    raise SecurityError(f"a repeat of {len(seq):,} × {n:,} items is larger than a prompt can be")
            if operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and \
                    right * math.log2(abs(left)) > 4096:
                raise SecurityError(f"{left} ** {right} is too large a number for a prompt")
            return super().call_binop(context, operator, left, right)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(text)


def _renderer_name(engine: str) -> str:
    """``engine`` with its installed version (``jinja2 3.1.6``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{engine} {version('Jinja2' if engine == 'jinja2' else engine)}"
    except PackageNotFoundError:
        return engine


def strip_bos(text: str, ct: ChatTemplate) -> tuple[str, bool]:
    """``text`` without one leading BOS string when the server's encode adds BOS itself (see the module
    docstring); (text, stripped)."""
    bos = ct.special.get("bos_token")
    if bos and ct.add_bos and text.startswith(bos):
        return text[len(bos):], True
    return text, False


def apply_prompt_format(profile: Profile | None, suite: Suite, *, engine: str | None = None) -> tuple[Suite, dict]:
    """The suite to send and the ``prompt_format`` record (see the module docstring).

    The record: ``format`` (``raw`` / ``chat-template (client)`` / ``chat API``), ``option`` (the suite's
    ``chat_template``), ``template`` {source, sha256, renderer, bos_token, tokenizer_adds_bos,
    bos_stripped} when one was found, ``note`` (why raw) and ``warning`` (a chat model sent raw text).

    Raises:
        ProfileError: ``chat_template = "require"`` and no template was found, or rendering failed.
    """
    opt = suite.suite.chat_template
    if suite.suite.api == "chat":
        return suite, {"format": CHAT_API, "option": opt,
                       "note": "the server applies the target's chat template (/v1/chat/completions)"}
    directory, why = tokenizer_dir(profile)
    explicit = explicit_template(profile)
    ct = find_chat_template(directory, explicit=explicit) if directory is not None else None
    if ct is None:
        if directory is not None:
            why = f"{directory} has no chat template (no chat_template.jinja, no tokenizer_config.json chat_template)"
        if opt == "require":
            raise ProfileError(f"suite {suite.name}: chat_template = \"require\", but {why}")
        return suite, {"format": RAW, "option": opt, "note": why}
    info = {"source": ct.source, "sha256": ct.sha256, "bos_token": ct.special.get("bos_token"),
            "tokenizer_adds_bos": ct.add_bos}
    if opt == "none":
        return suite, {"format": RAW, "option": opt, "template": info,
                       "note": "the suite sets chat_template = \"none\"",
                       "warning": f"the target is a chat model (chat template {ct.source}) but suite {suite.name} "
                       "sends raw, untemplated text (chat_template = \"none\"); set chat_template = \"auto\" "
                       "or api = \"chat\" to benchmark it on templated prompts"}
    prompts, stripped, used = [], 0, set()
    for p in suite.prompts:
        text, by = render_with(ct, prompt_messages(p), engine=engine)
        text, cut = strip_bos(text, ct)
        stripped += cut
        used.add(by)
        prompts.append(p.model_copy(update={"text": text}))
    out = suite.model_copy(update={"prompts": prompts})
    out._path = suite.path
    info |= {"renderer": ", ".join(_renderer_name(e) for e in sorted(used)), "bos_stripped": stripped}
    return out, {"format": CLIENT, "option": opt, "template": info}


def describe(record: dict) -> str:
    """One line about a ``prompt_format`` record, for the bench's progress output."""
    fmt = record["format"]
    t = record.get("template") or {}
    if fmt == CLIENT:
        bos = f", leading BOS stripped from {t['bos_stripped']} (the server's tokenizer adds it)" if t.get(
            "bos_stripped") else ""
        return f"prompts: chat template rendered client-side ({t['source']}, sha256 {t['sha256'][:12]}, {t['renderer']}{bos})"
    if fmt == CHAT_API:
        return "prompts: chat API (the server applies the chat template)"
    return f"prompts: raw text ({record.get('note')})"
