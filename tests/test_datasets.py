"""``--dataset``: each format through the loader, random prompts of exact token counts, sampling,
clear errors for bad inputs, and one bench end to end on the simulator."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from specdash.cli import main
from specdash.profile import ProfileError, parse_profile
from specdash.profile.datasets import (
    DEFAULT_MAX_TOKENS,
    list_datasets,
    load_dataset_suite,
    resolve_dataset,
    sim_count,
    token_counter,
)
from specdash.sim.text import count_tokens
from tests.test_bench import sim_profile

ROWS = [
    {"prompt": "Write a merge sort in Python.", "category": "coding", "id": "a"},
    {"text": "Explain photosynthesis.", "category": "science"},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there!"}],
     "category": "chat"},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "Sum 2 and 3."}]}], "category": "math"},
]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _texts(suite) -> list[str]:
    return [p.text for p in suite.prompts]


# --- formats -----------------------------------------------------------------------------------


def test_sharegpt_json_takes_the_first_human_turn(tmp_path):
    data = [
        {"id": "c1", "conversations": [{"from": "human", "value": "What is a monad?"},
                                        {"from": "gpt", "value": "A monoid in …"},
                                        {"from": "human", "value": "Simpler please."}], "category": "chat"},
        {"conversations": [{"from": "system", "value": "You are kind."},
                           {"from": "gpt", "value": "Hi!"}, {"from": "human", "value": "Tell me a joke."}]},
        {"conversations": [{"from": "gpt", "value": "only the model speaks"}]},          # no human turn
        {"conversations": [{"role": "user", "content": "role/content turns work too"}], "category": "misc"},
    ]
    f = tmp_path / "sharegpt.json"
    f.write_text(json.dumps(data))
    suite, rec = load_dataset_suite(str(f))
    assert _texts(suite) == ["What is a monad?", "Tell me a joke.", "role/content turns work too"]
    assert [p.category for p in suite.prompts] == ["chat", None, "misc"]
    assert suite.prompts[0].id == "c1"
    assert rec["format"] == "sharegpt" and rec["rows"] == 4 and rec["skipped"] == 1 and rec["num_prompts"] == 3
    assert suite.name == "sharegpt" and suite.path == f and suite.suite.max_tokens == DEFAULT_MAX_TOKENS
    assert suite.suite.api == "generate" and suite.suite.temperature == 0


def test_jsonl_prompt_text_and_messages(tmp_path):
    f = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    suite, rec = load_dataset_suite(str(f))
    assert _texts(suite) == ["Write a merge sort in Python.", "Explain photosynthesis.", "Hello there!", "Sum 2 and 3."]
    assert [p.category for p in suite.prompts] == ["coding", "science", "chat", "math"]
    assert [p.id for p in suite.prompts] == ["a", "1", "2", "3"]
    assert rec["format"] == "jsonl" and rec["skipped"] == 0


def test_a_json_list_of_prompt_objects_and_a_json_file_holding_json_lines(tmp_path):
    f = tmp_path / "list.json"
    f.write_text(json.dumps(ROWS))
    assert len(load_dataset_suite(str(f))[0].prompts) == 4
    g = write_jsonl(tmp_path / "lines.json", ROWS)
    suite, rec = load_dataset_suite(str(g))
    assert rec["format"] == "jsonl" and len(suite.prompts) == 4


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (Parquet datasets need it)")
    import pyarrow.parquet as pq

    f = tmp_path / "d.parquet"
    pq.write_table(pa.table({"prompt": ["one two", "three four", "five"], "category": ["a", "b", "a"],
                             "extra": [1, 2, 3]}), f)
    suite, rec = load_dataset_suite(str(f))
    assert _texts(suite) == ["one two", "three four", "five"] and [p.category for p in suite.prompts] == ["a", "b", "a"]
    assert rec["format"] == "parquet"
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"question": ["x"]}), bad)
    with pytest.raises(ProfileError, match=r"no column named prompt.*columns: question"):
        load_dataset_suite(str(bad))


def test_parquet_without_pyarrow_says_how_to_install_it(tmp_path, monkeypatch):
    f = tmp_path / "d.parquet"
    f.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ProfileError, match=r"d\.parquet.*pip install pyarrow"):
        load_dataset_suite(str(f))


def test_hugging_face_dataset_directory(tmp_path):
    datasets = pytest.importorskip("datasets", reason="the datasets library is not installed")
    ds = datasets.Dataset.from_list([{"text": "alpha beta", "category": "x"}, {"text": "gamma", "category": "y"}])
    ds.save_to_disk(str(tmp_path / "hf"))
    suite, rec = load_dataset_suite(str(tmp_path / "hf"))
    assert _texts(suite) == ["alpha beta", "gamma"] and rec["format"] == "hf-dir" and suite.name == "hf"
    datasets.DatasetDict({"test": ds.select([1]), "train": ds.select([0])}).save_to_disk(str(tmp_path / "hfd"))
    suite, rec = load_dataset_suite(str(tmp_path / "hfd"))
    assert _texts(suite) == ["alpha beta"] and rec["split"] == "train"


def test_hugging_face_directory_without_the_library_or_not_a_dataset(tmp_path, monkeypatch):
    d = tmp_path / "hf"
    d.mkdir()
    with pytest.raises(ProfileError, match=r"not a Hugging Face dataset saved with save_to_disk"):
        load_dataset_suite(str(d))
    (d / "state.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ProfileError, match=r"pip install datasets"):
        load_dataset_suite(str(d))


def test_mixed_50_resolves_by_name():
    assert "mixed-50" in dict(list_datasets())
    assert resolve_dataset("mixed-50").name == "mixed-50.jsonl"
    suite, rec = load_dataset_suite("mixed-50")
    assert len(suite.prompts) == 50 and len(set(_texts(suite))) == 50
    cats = [p.category for p in suite.prompts]
    assert {c: cats.count(c) for c in set(cats)} == {c: 10 for c in
                                                      ("coding", "math", "chat", "summarisation", "writing")}
    assert rec["source"] == "mixed-50" and suite.name == "mixed-50"


# --- sampling ----------------------------------------------------------------------------------


def test_num_prompts_and_seed_sample_deterministically_in_file_order():
    a, rec = load_dataset_suite("mixed-50", num_prompts=7, seed=3)
    b, _ = load_dataset_suite("mixed-50", num_prompts=7, seed=3)
    c, _ = load_dataset_suite("mixed-50", num_prompts=7, seed=4)
    assert _texts(a) == _texts(b) and _texts(a) != _texts(c)
    ids = [int(p.id.rsplit("-", 1)[1]) for p in a.prompts]
    assert len(ids) == 7 and ids == sorted(ids)
    assert rec["num_prompts"] == 7 and rec["rows"] == 50 and rec["seed"] == 3
    assert len(load_dataset_suite("mixed-50", num_prompts=500)[0].prompts) == 50


def test_input_token_filters_use_the_targets_counting(tmp_path):
    prof = parse_profile({"name": "s", "server": {"launcher": "sim", "model_path": "sim:llama-3.1-8b"}})
    rows = [{"prompt": "x" * n} for n in (10, 40, 80, 200)]
    f = write_jsonl(tmp_path / "len.jsonl", rows)
    suite, rec = load_dataset_suite(str(f), profile=prof, min_input_tokens=12, max_input_tokens=30)
    assert [len(t) for t in _texts(suite)] == [40, 80]
    assert all(12 <= count_tokens(t) <= 30 for t in _texts(suite))
    assert rec["filtered_out"] == 2 and rec["token_count"]["method"] == "simulator"
    with pytest.raises(ProfileError, match=r"no prompt has between 500 and ∞ input tokens.*widen"):
        load_dataset_suite(str(f), profile=prof, min_input_tokens=500)


# --- random ------------------------------------------------------------------------------------


def _word_level_tokenizer(path: Path) -> Path:
    tokenizers = pytest.importorskip("tokenizers", reason="the tokenizers library is not installed")
    from tokenizers import models, pre_tokenizers, processors, trainers

    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    corpus = ["the quick brown fox jumps over the lazy dog", "a small model drafts tokens and a large one verifies",
              "speculative decoding accepts several tokens per verify round"]
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>"]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return path / "tokenizer.json"


def _byte_bpe_tokenizer(path: Path) -> Path:
    tokenizers = pytest.importorskip("tokenizers", reason="the tokenizers library is not installed")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["the quick brown fox jumps over the lazy dog"] * 5 + ["draft verify accept reject round token"] * 3
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|bos|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return path / "tokenizer.json"


@pytest.mark.parametrize("make", [_word_level_tokenizer, _byte_bpe_tokenizer], ids=["wordlevel-bos", "byte-bpe"])
def test_random_prompts_have_exactly_n_tokens_under_the_tokenizer(tmp_path, make):
    from tokenizers import Tokenizer

    f = make(tmp_path / "tok")
    tok = Tokenizer.from_file(str(f))
    for n in (3, 17, 64):
        suite, rec = load_dataset_suite(f"random:in={n},out=9,tokenizer={f.parent}", num_prompts=6, seed=5)
        assert [len(tok.encode(t).ids) for t in _texts(suite)] == [n] * 6
        assert suite.suite.max_tokens == 9 and suite.suite.ignore_eos and {p.category for p in suite.prompts} == {"random"}
        assert rec["token_count"]["method"] == "tokenizer" and rec["input_tokens"] == n
    again, _ = load_dataset_suite(f"random:in=17,out=9,tokenizer={f}", num_prompts=6, seed=5)
    other, _ = load_dataset_suite(f"random:in=17,out=9,tokenizer={f}", num_prompts=6, seed=6)
    first, _ = load_dataset_suite(f"random:in=17,out=9,tokenizer={f}", num_prompts=6, seed=5)
    assert _texts(again) == _texts(first) != _texts(other)


def test_random_uses_the_profiles_local_model_directory(tmp_path):
    from tokenizers import Tokenizer

    f = _word_level_tokenizer(tmp_path / "model")
    prof = parse_profile({"name": "real", "server": {"model_path": str(tmp_path / "model")}})
    suite, rec = load_dataset_suite("random:in=12,out=4", profile=prof, num_prompts=3)
    tok = Tokenizer.from_file(str(f))
    assert [len(tok.encode(t).ids) for t in _texts(suite)] == [12, 12, 12]
    assert rec["token_count"]["tokenizer"] == str(f)
    via_flag = parse_profile({"name": "real", "server": {"model_path": "org/remote-model",
                                                         "extra_args": ["--tokenizer-path", str(tmp_path / "model")]}})
    assert token_counter(via_flag).method == "tokenizer"


def test_random_on_the_simulator_matches_its_token_count_and_says_what_is_estimated_elsewhere():
    sim = parse_profile({"name": "s", "server": {"launcher": "sim", "model_path": "sim:llama-3.1-8b"}})
    for n in (2, 3, 10, 128, 1000):
        suite, rec = load_dataset_suite(f"random:in={n},out=5", profile=sim, num_prompts=4, seed=1)
        assert [count_tokens(t) for t in _texts(suite)] == [n] * 4
        assert rec["token_count"]["method"] == "simulator" and "exact on the simulator" in rec["token_count"]["note"]
    assert len(load_dataset_suite("random:in=8,out=5", profile=sim)[0].prompts) == 100     # default count
    assert sim_count("abc") == count_tokens("abc")
    real = parse_profile({"name": "r", "server": {"model_path": "org/not-local"}})
    _, rec = load_dataset_suite("random:in=20,out=5", profile=real, num_prompts=2)
    assert rec["token_count"]["method"] == "estimate"
    assert "ESTIMATE" in rec["token_count"]["note"] and "tokenizer=PATH" in rec["token_count"]["note"]
    _, rec = load_dataset_suite("random:in=20,out=5", num_prompts=2)
    assert "attached server" in rec["token_count"]["note"]


# --- bad inputs --------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "match"), [
    ('{"data": []}', r"the JSON is a dict with keys data, not a list"),
    ("[1, 2", r"not valid JSON"),
    ("", r"the file is empty"),
    ("[]", r"no usable prompt in 0 row\(s\) \(the dataset is empty\)"),
    ('[{"question": "x", "answer": "y"}]', r"no usable prompt in 1 row\(s\) \(the first row has keys question, answer\)"),
])
def test_wrong_shapes_name_the_file_and_the_expected_shape(tmp_path, content, match):
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(ProfileError, match=match) as info:
        load_dataset_suite(str(f))
    assert str(f) in str(info.value)


def test_bad_jsonl_line_and_missing_file(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"prompt": "ok"}\n{"prompt": oops}\n')
    with pytest.raises(ProfileError, match=r"bad\.jsonl:2: not a JSON object"):
        load_dataset_suite(str(f))
    with pytest.raises(ProfileError, match=r"'nope\.jsonl' does not exist.*known datasets: .*mixed-50"):
        load_dataset_suite("nope.jsonl")
    with pytest.raises(ProfileError, match=r"--num-prompts must be at least 1"):
        load_dataset_suite("mixed-50", num_prompts=0)


@pytest.mark.parametrize(("spec", "match"), [
    ("random:out=5", r"in= is missing"),
    ("random:in=abc,out=5", r"in=abc is not a positive whole number"),
    ("random:in=5,out=5,len=3", r"'len=3' is not in=N, out=M or tokenizer=PATH"),
    ("random:in=1,out=5", r"in=1 leaves no room for text"),
    ("random:in=5,out=5,tokenizer=/no/such/dir", r"not a tokenizer\.json file"),
])
def test_bad_random_specs(spec, match):
    sim = parse_profile({"name": "s", "server": {"launcher": "sim", "model_path": "sim:llama-3.1-8b"}})
    with pytest.raises(ProfileError, match=match):
        load_dataset_suite(spec, profile=sim)


def test_cli_usage_errors_exit_2_without_a_traceback(tmp_path, capsys):
    prof = sim_profile(tmp_path, "ds-usage")
    f = write_jsonl(tmp_path / "d.jsonl", ROWS)
    cases = [
        (["--dataset", str(f), "--suite", "coding"], "--dataset replaces --suite"),
        (["--num-prompts", "3"], "--num-prompts applies to --dataset"),
        (["--dataset", str(f), "--num-prompts", "0"], "--num-prompts must be at least 1"),
        (["--dataset", str(tmp_path / "missing.jsonl")], "missing.jsonl"),
    ]
    for extra, needle in cases:
        rc = main(["--bench", "--profile", str(prof), "--out", str(tmp_path / "runs"), "--json", *extra])
        out = capsys.readouterr()
        assert rc == 2, (extra, out.err)
        assert needle in out.err and "Traceback" not in out.err and out.out == ""


# --- end to end --------------------------------------------------------------------------------


def test_bench_with_a_jsonl_dataset_on_the_simulator(tmp_path, capsys):
    prof = sim_profile(tmp_path, "ds-e2e")
    f = write_jsonl(tmp_path / "d.jsonl", ROWS)
    rc = main(["--bench", "--profile", str(prof), "--dataset", str(f), "--num-prompts", "3", "--max-tokens", "16",
               "--out", str(tmp_path / "runs"), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    run = json.loads(out.out)["runs"][0]
    assert run["requests"] == 3 and run["output_tokens"] == 48
    d = Path(run["run_dir"])
    records = [json.loads(line) for line in (d / "requests.jsonl").read_text().splitlines()]
    cats = [r["category"] for r in records]
    assert len(records) == 3 and set(cats) <= {"coding", "science", "chat", "math"} and len(set(cats)) == 3
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["suite"] == "d" and manifest["suite_path"] == str(f)
    assert manifest["dataset"]["source"] == str(f) and manifest["dataset"]["num_prompts"] == 3
    assert manifest["dataset"]["format"] == "jsonl" and manifest["dataset"]["seed"] == 0
    assert f"dataset {f} (jsonl" in out.err


def test_resume_of_a_dataset_run_keeps_its_sample(tmp_path, capsys):
    from specdash.commands import bench as bench_command

    prof = sim_profile(tmp_path, "ds-resume")
    base = ["--bench", "--profile", str(prof), "--max-tokens", "8", "--out", str(tmp_path / "runs")]
    assert main([*base, "--dataset", "mixed-50", "--num-prompts", "3", "--seed", "2", "--json"]) == 0
    run_dir = json.loads(capsys.readouterr().out)["runs"][0]["run_dir"]
    assert main([*base, "--resume", run_dir, "--dataset", "mixed-50", "--num-prompts", "4", "--seed", "2"]) == 2
    err = capsys.readouterr().err
    assert "another sample would shift the prompt indices" in err and "--num-prompts 3, --seed 2" in err
    if hasattr(bench_command, "resume_complete"):  # `--resume RUNDIR` alone: the dataset flags from the manifest
        assert main(["--bench", "--resume", run_dir]) == 0
        assert "already complete (3 requests)" in capsys.readouterr().err
