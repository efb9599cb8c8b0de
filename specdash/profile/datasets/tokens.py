"""How prompt tokens are counted for ``--dataset``'s length filters and ``random:`` prompts.

:func:`token_counter` picks, in order: an explicit ``tokenizer.json`` (``random:…,tokenizer=PATH``); the
simulator's own rule on a ``launcher = "sim"`` profile (exact there); the profile's ``--tokenizer-path``
or ``model_path`` when it is a local directory with ``tokenizer.json`` (through the ``tokenizers``
library, imported only then); else an *estimate* by the simulator's rule, and the record says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdash.profile.schema import Profile, ProfileError, expand_path


@dataclass
class TokenCounter:
    """How prompt tokens are counted: ``method`` = ``tokenizer`` (``count`` is exact for that
    tokenizer), ``simulator`` (exact on the simulator) or ``estimate``; ``note`` says which."""

    method: str
    count: Callable[[str], int]
    note: str
    tokenizer: str | None = None
    pool: tuple[str, ...] = ()

    def record(self) -> dict:
        """The counter as the manifest records it."""
        return {"method": self.method, "tokenizer": self.tokenizer, "note": self.note}


def sim_count(text: str) -> int:
    """The simulator's prompt token count of ``text``: ``1 + ceil(len / 3.6)`` (BOS included),
    the rule of ``specdash/sim/text.py`` (which this floor cannot import)."""
    return 1 + (-(-len(text or "") * 10 // 36))





def _profile_tokenizer_path(profile: Profile) -> str | None:
    args = list(profile.server.extra_args)
    for i, a in enumerate(args):
        if a == "--tokenizer-path" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--tokenizer-path="):
            return a.split("=", 1)[1]
    return profile.server.model_path


def _tokenizer_file(path: str) -> Path | None:
    p = Path(os.path.expanduser(path))
    if p.is_file() and p.name.endswith(".json"):
        return p
    if p.is_dir() and (p / "tokenizer.json").is_file():
        return p / "tokenizer.json"
    return None


def token_counter(profile: Profile | None, tokenizer: str | None = None) -> TokenCounter:
    """How this target's prompt tokens are counted (see the module docstring for the order).

    Raises:
        ProfileError: ``tokenizer`` was given but is not a ``tokenizer.json`` (or a directory
            with one), or ``tokenizers`` is not installed for it.
    """
    if tokenizer is not None:
        f = _tokenizer_file(expand_path(tokenizer, where="random: tokenizer") or "")
        if f is None:
            raise ProfileError(f"random: tokenizer={tokenizer}: not a tokenizer.json file nor a directory holding "
                               "one (the target model's directory usually has it)")
        return _tokenizers_counter(f, required=True)
    if profile is not None and profile.server.launcher == "sim":
        return TokenCounter("simulator", sim_count, "the simulator's own rule, 1 + ceil(characters / 3.6) "
                            "(BOS included): exact on the simulator")
    src = None
    if profile is not None:
        src = expand_path(_profile_tokenizer_path(profile), where=f"{profile.path or profile.name}: tokenizer")
        f = _tokenizer_file(src) if src and not src.startswith("sim:") else None
        if f is not None:
            counter = _tokenizers_counter(f, required=False)
            if counter is not None:
                return counter
            why = f"the tokenizers library is not installed (pip install tokenizers) to read {f}"
        else:
            why = f"no tokenizer.json at {src}"
    else:
        why = "no profile to find the target's tokenizer in (an attached server)"
    return TokenCounter("estimate", sim_count, f"an ESTIMATE, 1 + ceil(characters / 3.6) per prompt, since {why}; "
                        "pass random:…,tokenizer=PATH (a tokenizer.json) for exact counts")


def _tokenizers_counter(f: Path, *, required: bool) -> TokenCounter | None:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        if not required:
            return None
        raise ProfileError(f"counting tokens with {f} needs the tokenizers library, which is not installed: "
                           "pip install tokenizers (or pip install 'specdash[datasets]')") from None
    from specdash.bounded import DATASET_BYTES, InputError, check_file

    try:
        check_file(f, limit=DATASET_BYTES, what="tokenizer")  # never a FIFO or a device
        tok = Tokenizer.from_file(str(f))
    except InputError as exc:
        raise ProfileError(str(exc)) from None
    except Exception as exc:  # the library's error for a file it cannot parse
        raise ProfileError(f"{f}: not a tokenizer the tokenizers library can read ({exc})") from None

    def count(text: str) -> int:
        return len(tok.encode(text).ids)

    return TokenCounter("tokenizer", count, f"the tokenizer {f} (special tokens it adds, e.g. BOS, included)",
                        tokenizer=str(f), pool=_vocab_words(tok))


def _vocab_words(tok: Any) -> tuple[str, ...]:
    """Plain alphabetic words of a tokenizer's vocabulary (byte-level ``Ġ`` / SentencePiece ``▁``
    markers stripped), sorted: the material of random prompts."""
    words = set()
    for piece in tok.get_vocab(with_added_tokens=False):
        w = piece.lstrip("Ġ▁")
        if len(w) >= 2 and w.isascii() and w.isalpha():
            words.add(w.lower())
    return tuple(sorted(words))


