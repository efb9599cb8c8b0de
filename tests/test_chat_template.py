"""Chat templates for raw-text suites (specdash/profile/chat.py): rendered client-side, BOS not doubled,
raw text on a chat model warned about, the simulator unchanged."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import httpx
import pytest

from specdash.profile import ProfileError, parse_suite
from specdash.profile.chat import (
    CHAT_API,
    CLIENT,
    RAW,
    apply_prompt_format,
    find_chat_template,
    prompt_messages,
)
from specdash.profile.datasets import load_dataset_suite, sim_count
from specdash.profile.schema import parse_profile

pytest.importorskip("jinja2", reason="jinja2 renders the template when transformers is absent")
tokenizers = pytest.importorskip("tokenizers", reason="the tokenizers library is not installed")

# A Llama-3-like template in one line: BOS first, role headers, a generation prompt.
ONE_LINE = ("{{ bos_token }}{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + '<|end|>\\n' }}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}")
# A multi-line template as chat_template.jinja holds one: trim_blocks / lstrip_blocks decide its whitespace.
MULTI_LINE = """{% for message in messages %}
    {% if message['role'] == 'system' %}
<<SYS>>{{ message['content'] }}<</SYS>>
    {% else %}
[{{ message['role'] }}] {{ message['content'] }}
    {% endif %}
{% endfor %}
{% if add_generation_prompt %}
[assistant]
{% endif %}
"""


def _tokenizer_dir(path: Path, *, template: str | None = ONE_LINE, jinja: str | None = None,
                   adds_bos: bool = True) -> Path:
    """A word-level tokenizer (``<s>`` as BOS, added on encode when ``adds_bos``) with a tokenizer_config.json."""
    from tokenizers import models, pre_tokenizers, processors, trainers

    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["hello world what is two plus two be brief"],
                            trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
    if adds_bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    cfg = {"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>"}
    if template is not None:
        cfg["chat_template"] = template
    (path / "tokenizer_config.json").write_text(json.dumps(cfg))
    if jinja is not None:
        (path / "chat_template.jinja").write_text(jinja)
    return path


def _profile(model_path: str, launcher: str = "sglang"):
    return parse_profile({"name": "t", "server": {"launcher": launcher, "model_path": model_path}})


def _suite(*prompts: dict, **suite) -> object:
    return parse_suite({"suite": {"name": "s", **suite}, "prompts": list(prompts)})


def test_text_prompt_rendered_with_the_tokenizer_config_template_and_bos_not_doubled(tmp_path):
    d = _tokenizer_dir(tmp_path / "model")
    sent, rec = apply_prompt_format(_profile(str(d)), _suite({"text": "what is two plus two"}, {"text": "hello"}))
    assert rec["format"] == CLIENT and rec["option"] == "auto"
    # the template's own BOS is stripped: the server's encode (add_special_tokens) puts it back
    assert [p.text for p in sent.prompts] == ["<|user|>\nwhat is two plus two<|end|>\n<|assistant|>\n",
                                              "<|user|>\nhello<|end|>\n<|assistant|>\n"]
    t = rec["template"]
    assert t["source"] == f"{d / 'tokenizer_config.json'}#chat_template"
    assert t["sha256"] == hashlib.sha256(ONE_LINE.encode()).hexdigest()
    assert t["bos_token"] == "<s>" and t["tokenizer_adds_bos"] is True and t["bos_stripped"] == 2
    assert t["renderer"].startswith(("jinja2 ", "transformers "))
    # what the server tokenizes: exactly one BOS, first (unstripped it would have been two)
    tok = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    bos = tok.token_to_id("<s>")
    ids = tok.encode(sent.prompts[0].text).ids
    assert ids[0] == bos and ids.count(bos) == 1
    assert tok.encode("<s>" + sent.prompts[0].text).ids.count(bos) == 2


def test_messages_prompt_rendered_as_given_and_the_jinja_file_wins(tmp_path):
    d = _tokenizer_dir(tmp_path / "model", jinja=MULTI_LINE)
    suite = _suite({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                    "category": "chat"})
    assert suite.prompts[0].text == "Hi"  # a raw-text fallback: the first user message
    sent, rec = apply_prompt_format(_profile(str(d)), suite)
    assert sent.prompts[0].text == "<<SYS>>Be brief.<</SYS>>\n[user] Hi\n[assistant]\n"
    assert sent.prompts[0].category == "chat" and sent.prompts[0].messages == suite.prompts[0].messages
    assert rec["template"]["source"] == str(d / "chat_template.jinja")
    assert rec["template"]["sha256"] == hashlib.sha256(MULTI_LINE.encode()).hexdigest()
    assert rec["template"]["bos_stripped"] == 0
    assert suite.prompts[0].text == "Hi"  # the suite given is not changed


def test_bos_kept_when_the_tokenizer_does_not_add_it(tmp_path):
    d = _tokenizer_dir(tmp_path / "model", adds_bos=False)
    sent, rec = apply_prompt_format(_profile(str(d / "tokenizer.json")), _suite({"text": "hello"}))
    assert sent.prompts[0].text == "<s><|user|>\nhello<|end|>\n<|assistant|>\n"
    assert rec["template"]["tokenizer_adds_bos"] is False and rec["template"]["bos_stripped"] == 0


def test_none_keeps_raw_text_and_warns_on_a_chat_model(tmp_path):
    d = _tokenizer_dir(tmp_path / "model")
    suite = _suite({"text": "hello"}, chat_template="none")
    sent, rec = apply_prompt_format(_profile(str(d)), suite)
    assert sent.prompts[0].text == "hello" and rec["format"] == RAW
    assert "chat model" in rec["warning"] and "untemplated" in rec["warning"]
    assert rec["template"]["sha256"] == hashlib.sha256(ONE_LINE.encode()).hexdigest()


def test_base_model_simulator_and_chat_api(tmp_path):
    base = _tokenizer_dir(tmp_path / "base", template=None)
    sent, rec = apply_prompt_format(_profile(str(base)), _suite({"text": "hello"}))
    assert sent.prompts[0].text == "hello" and rec["format"] == RAW and "warning" not in rec
    assert "no chat template" in rec["note"]
    sim = _profile("sim:llama-3.1-8b", launcher="sim")
    suite = _suite({"text": "hello"})
    sent, rec = apply_prompt_format(sim, suite)
    assert sent is suite and rec == {"format": RAW, "option": "auto", "note": "the simulator has no tokenizer"}
    with pytest.raises(ProfileError, match=r'chat_template = "require", but the simulator has no tokenizer'):
        apply_prompt_format(sim, _suite({"text": "hello"}, chat_template="require"))
    d = _tokenizer_dir(tmp_path / "chat")
    chat = _suite({"text": "hello"}, api="chat")
    sent, rec = apply_prompt_format(_profile(str(d)), chat)
    assert sent is chat and rec["format"] == CHAT_API
    hub, rec = apply_prompt_format(_profile("meta-llama/Llama-3.1-8B-Instruct"), _suite({"text": "hello"}))
    assert hub.prompts[0].text == "hello" and rec["format"] == RAW and "not a local directory" in rec["note"]


def test_tokenizer_path_flag_and_named_templates(tmp_path):
    d = _tokenizer_dir(tmp_path / "tok", template=[{"name": "tool_use", "template": "T"},
                                                    {"name": "default", "template": "D{{ messages[0].content }}"}])
    ct = find_chat_template(d)
    assert ct.template == "D{{ messages[0].content }}" and ct.source.endswith("#chat_template[default]")
    prof = parse_profile({"name": "t", "server": {"model_path": str(tmp_path / "weights"),
                                                  "extra_args": ["--tokenizer-path", str(d)]}})
    sent, rec = apply_prompt_format(prof, _suite({"text": "hello"}))
    assert sent.prompts[0].text == "Dhello" and rec["format"] == CLIENT


def test_jsonl_messages_kept_and_sent_to_the_chat_api(tmp_path):
    f = tmp_path / "d.jsonl"
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    f.write_text(json.dumps({"messages": msgs}) + "\n" + json.dumps({"prompt": "plain"}) + "\n")
    suite, _ = load_dataset_suite(str(f))
    assert suite.prompts[0].text == "Hi"
    assert prompt_messages(suite.prompts[0]) == [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": "Hi"}]
    assert suite.prompts[1].messages is None
    assert prompt_messages(suite.prompts[1]) == [{"role": "user", "content": "plain"}]
    rnd, _ = load_dataset_suite("random:in=20,out=8", num_prompts=2)
    assert rnd.suite.chat_template == "none"  # exact token counts are of raw text


@pytest.mark.parametrize("option", ["auto", "none"])
def test_bench_run_records_the_prompt_format(tmp_path, option):
    """An attached server (the simulator) run for a profile whose model directory has a chat template:
    the server receives the rendered text (its prompt_tokens count it), the manifest and summary say so;
    with chat_template = "none" the progress output warns."""
    from specdash.bench.runner import ProfileRun, RunOptions
    from specdash.sim.testing import SimProcess

    d = _tokenizer_dir(tmp_path / "model")
    suite = _suite({"text": "what is two plus two"}, name="s", max_tokens=16, warmup=0, chat_template=option)
    said: list[str] = []
    with SimProcess(["--model-path", "sim:llama-3.1-8b", "--enable-metrics", "--time-scale", "8"]) as sim:
        pr = ProfileRun(_profile(str(d)), suite, RunOptions(url=sim.url, out_dir=tmp_path / "runs",
                                                            preflight=False, progress=said.append))
        run = asyncio.run(pr.run())
        httpx.get(sim.url + "/health", timeout=5)
    rd = Path(run["run_dir"])
    manifest = json.loads((rd / "manifest.json").read_text())
    summary = json.loads((rd / "summary.json").read_text())
    rec = json.loads((rd / "requests.jsonl").read_text().splitlines()[0])
    runs = summary["runs"] if isinstance(summary, dict) else summary
    sent = "<|user|>\nwhat is two plus two<|end|>\n<|assistant|>\n" if option == "auto" else "what is two plus two"
    assert rec["prompt_tokens"] == sim_count(sent)
    assert manifest["prompt_format"]["template"]["sha256"] == hashlib.sha256(ONE_LINE.encode()).hexdigest()
    warnings = [s for s in said if "warning:" in s and "untemplated" in s]
    if option == "auto":
        assert manifest["prompt_format"]["format"] == CLIENT and runs[0]["prompt_format"] == CLIENT
        assert runs[0]["prompt_format_warning"] is None and not warnings
        assert any("chat template rendered client-side" in s for s in said)
    else:
        assert manifest["prompt_format"]["format"] == RAW and runs[0]["prompt_format"] == RAW
        assert "untemplated" in runs[0]["prompt_format_warning"] and len(warnings) == 1


def test_transformers_is_used_when_installed(tmp_path, monkeypatch):
    """With transformers importable, AutoTokenizer.apply_chat_template renders (add_generation_prompt=True,
    tokenize=False, the template found); a directory it cannot load falls back on jinja2."""
    import sys
    import types

    import specdash.profile.chat as chat

    calls = []

    class Tok:
        def apply_chat_template(self, messages, **kw):
            calls.append((messages, kw))
            return "<s>HF:" + messages[0]["content"]

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(path):
            if path.endswith("broken"):
                raise ValueError("Unrecognized model")
            return Tok()

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(AutoTokenizer=AutoTokenizer))
    monkeypatch.setattr(chat, "_HF_CACHE", {})
    d = _tokenizer_dir(tmp_path / "model")
    sent, rec = apply_prompt_format(_profile(str(d)), _suite({"text": "hello"}))
    assert sent.prompts[0].text == "HF:hello" and rec["template"]["bos_stripped"] == 1
    assert rec["template"]["renderer"].startswith("transformers")
    assert calls == [([{"role": "user", "content": "hello"}],
                      {"add_generation_prompt": True, "tokenize": False, "chat_template": ONE_LINE})]
    broken = _tokenizer_dir(tmp_path / "broken")
    sent, rec = apply_prompt_format(_profile(str(broken)), _suite({"text": "hello"}))
    assert sent.prompts[0].text == "<|user|>\nhello<|end|>\n<|assistant|>\n"
    assert rec["template"]["renderer"].startswith("jinja2 ")


def test_a_template_that_fails_is_a_profile_error(tmp_path):
    d = _tokenizer_dir(tmp_path / "model", template="{% if messages[0].role != 'system' %}"
                       "{{ raise_exception('a system message first') }}{% endif %}")
    with pytest.raises(ProfileError, match=r"tokenizer_config.json#chat_template: failed to render: a system "
                                           r"message first"):
        apply_prompt_format(_profile(str(d)), _suite({"text": "hello"}))
    (d / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ProfileError, match=r"tokenizer_config.json: not valid JSON"):
        apply_prompt_format(_profile(str(d)), _suite({"text": "hello"}))


def test_messages_without_a_user_turn_say_so():
    """From a newcomer's try: a system-only chat was refused as "text: Field required"."""
    with pytest.raises(ProfileError) as e:
        parse_suite({"suite": {"name": "s"}, "prompts": [{"text": "fine"},
                                                         {"messages": [{"role": "system", "content": "Be brief."}]}]})
    msg = str(e.value)
    assert "prompts.1" in msg and "no user message" in msg and "roles: system" in msg and 'role = "user"' in msg
    ok = parse_suite({"suite": {"name": "s"}, "prompts": [
        {"messages": [{"role": "system", "content": "Be brief."}], "text": "the raw form"}]})
    assert ok.prompts[0].text == "the raw form"


def test_attached_run_without_profile_renders_with_the_servers_tokenizer(tmp_path):
    """``--url`` alone: the chat template is the one of the tokenizer /server_info names (when that directory
    is on this machine too); a server whose tokenizer is not here says so instead of "(attached)"."""
    from specdash.bench.runner import ProfileRun, RunOptions
    from specdash.launch import attached_profile
    from specdash.sim.testing import SimProcess

    d = _tokenizer_dir(tmp_path / "model")
    suite = _suite({"text": "what is two plus two"}, name="s", max_tokens=8, warmup=0)
    for tok, want in ((str(d), CLIENT), ("/nowhere/tok", RAW)):
        said: list[str] = []
        with SimProcess(["--model-path", "sim:llama-3.1-8b", "--tokenizer-path", tok, "--time-scale", "8"]) as sim:
            pr = ProfileRun(attached_profile(), suite, RunOptions(url=sim.url, out_dir=tmp_path / "runs",
                                                                  preflight=False, progress=said.append))
            run = asyncio.run(pr.run())
        rd = Path(run["run_dir"])
        fmt = json.loads((rd / "manifest.json").read_text())["prompt_format"]
        rec = json.loads((rd / "requests.jsonl").read_text().splitlines()[0])
        assert fmt["format"] == want, fmt
        if want == CLIENT:
            assert fmt["tokenizer_from"] == "server_info" and fmt["template"]["source"].startswith(str(d))
            assert rec["prompt_tokens"] == sim_count("<|user|>\nwhat is two plus two<|end|>\n<|assistant|>\n")
        else:
            assert "/nowhere/tok" in fmt["note"] and "(attached)" not in " ".join(said), said
