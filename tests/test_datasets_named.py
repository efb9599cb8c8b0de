"""Named workloads: hub datasets from a local Hugging Face cache (offline mode honoured), SPEED-Bench
subsets and Spec-Bench with their categories kept, and request fields beyond temperature.

The hub cache is built as ``huggingface_hub`` lays it out (``datasets--owner--name/refs/main`` holding a
commit hash, ``snapshots/<hash>/…`` the files), and ``huggingface_hub.constants.HF_HUB_CACHE`` points at
it, so ``snapshot_download(…, local_files_only=True)`` finds it as it finds a real download.  The
SPEED-Bench fixture has the real card's ``configs`` layout (``qualitative/test-*``) and row schema
(``question_id``, ``category``, ``turns`` …); its data files are JSON Lines here (the real ones are
Parquet, read by the same code through pyarrow: the Parquet variant runs where pyarrow is installed).
"""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from specdash.cli import main
from specdash.profile import ProfileError, parse_suite
from specdash.profile.datasets import describe, load_dataset_suite, spec_bench, speed_bench
from specdash.profile.datasets.hub import HubSource, parse_source
from tests.test_bench import sim_profile

pytest.importorskip("huggingface_hub", reason="hub datasets are read through huggingface_hub")

COMMIT = "0123456789abcdef0123456789abcdef01234567"

SPEED_CARD = """---
license: other
configs:
- config_name: qualitative
  data_files:
  - split: test
    path: qualitative/test-*
- config_name: throughput_1k
  data_files:
  - split: test
    path: throughput_1k/test-*
---
# SPEED-Bench (test fixture)
"""


def _qid(i: int) -> str:
    return f"{i:032x}"


QUALITATIVE = [
    {"question_id": _qid(1), "category": "coding", "sub_category": "python", "turns": [
        "Write a Python function that returns the n-th Fibonacci number.", "Now make it iterative."],
     "source": "x", "src_id": "1", "difficulty": "easy", "multiturn": True},
    {"question_id": _qid(2), "category": "math", "sub_category": "algebra",
     "turns": ["Solve 3x + 5 = 20 and explain each step."], "source": "x", "src_id": "2", "difficulty": "easy",
     "multiturn": False},
    {"question_id": _qid(3), "category": "writing", "sub_category": "story",
     "turns": ["Write a four-line poem about the sea."], "source": "x", "src_id": "3", "difficulty": "easy",
     "multiturn": False},
    {"question_id": _qid(4), "category": "rag", "sub_category": "news", "turns": [speed_bench.PLACEHOLDER],
     "source": "x", "src_id": "4", "difficulty": "hard", "multiturn": False},
    {"question_id": _qid(5), "category": "coding", "sub_category": "sql",
     "turns": ["Write an SQL query that lists the ten newest orders."], "source": "x", "src_id": "5",
     "difficulty": "easy", "multiturn": False},
]
THROUGHPUT = [{"question_id": _qid(10 + i), "category": cat, "sub_category": "", "turns": [f"{cat} prompt {i} " * 20],
               "source": "x", "src_id": str(i), "difficulty": "", "multiturn": False}
              for i, cat in enumerate(("low_entropy", "mixed", "high_entropy", "mixed"))]

SPEC_BENCH = [
    {"question_id": 81, "category": "mt_bench", "turns": ["Compose an engaging travel blog post about Hawaii.",
                                                           "Rewrite it starting every sentence with A."]},
    {"question_id": 161, "category": "translation", "turns": ["Translate German to English: Guten Morgen."]},
    {"question_id": 241, "category": "summarization", "turns": ["Summarize: The cat sat on the mat all day."]},
    {"question_id": 321, "category": "qa", "turns": ["Who wrote the novel Moby-Dick?"]},
    {"question_id": 401, "category": "math_reasoning", "turns": ["A train goes 60 km in 45 minutes; its speed?"]},
    {"question_id": 481, "category": "rag", "turns": ["Using the passage, name the capital: Paris is in France."]},
]


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def hub_dataset(cache: Path, repo_id: str, files: dict[str, str | bytes], commit: str = COMMIT) -> Path:
    """A dataset repository in a hub cache laid out as huggingface_hub does; returns the snapshot."""
    repo = cache / ("datasets--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    snap = repo / "snapshots" / commit
    for rel, content in files.items():
        f = snap / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(content if isinstance(content, bytes) else content.encode())
    return snap


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as hc

    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    return root


@pytest.fixture
def speed_cache(hub_cache):
    hub_dataset(hub_cache, "nvidia/SPEED-Bench", {
        "README.md": SPEED_CARD,
        "qualitative/test-00000-of-00001.jsonl": _jsonl(QUALITATIVE),
        "throughput_1k/test-00000-of-00001.jsonl": _jsonl(THROUGHPUT)})
    return hub_cache


@pytest.fixture
def spec_bench_cache(hub_cache):
    p = spec_bench.cache_path()
    p.parent.mkdir(parents=True)
    p.write_text(_jsonl(SPEC_BENCH))
    return p


# --- hub sources ---------------------------------------------------------------------------------


def test_hub_source_forms():
    assert parse_source("hf:nvidia/SPEED-Bench:qualitative:test@abc") == HubSource(
        "nvidia/SPEED-Bench", "qualitative", "test", "abc")
    assert parse_source("acme/tiny") == HubSource("acme/tiny")
    assert parse_source("acme/tiny::train") == HubSource("acme/tiny", None, "train")
    assert parse_source("mixed-50") is None and parse_source("data/rows.jsonl") is None
    with pytest.raises(ProfileError, match=r"hf:OWNER/NAME\[:CONFIG\[:SPLIT\]\]"):
        parse_source("hf:not an id")


def test_a_hub_dataset_is_read_from_the_cache_by_its_card(hub_cache):
    card = ("---\nconfigs:\n- config_name: chat\n  default: true\n  data_files:\n  - split: train\n    path: chat/train.jsonl"
            "\n  - split: test\n    path: chat/test-*.jsonl\n- config_name: code\n  data_files: code/*.jsonl\n---\n")
    snap = hub_dataset(hub_cache, "acme/tiny", {
        "README.md": card,
        "chat/train.jsonl": _jsonl([{"prompt": "train row", "category": "t"}]),
        "chat/test-0.jsonl": _jsonl([{"prompt": "hello there", "category": "greet", "id": "g1"}]),
        "chat/test-1.jsonl": _jsonl([{"messages": [{"role": "user", "content": "add 2 and 3"}], "category": "math"}]),
        "code/rows.jsonl": _jsonl([{"text": "write a loop", "category": "code"}] * 2)})
    suite, rec = load_dataset_suite("acme/tiny")  # the default config; its test split over train
    assert [p.text for p in suite.prompts] == ["hello there", "add 2 and 3"]
    assert [p.category for p in suite.prompts] == ["greet", "math"] and suite.prompts[0].id == "g1"
    assert (rec["format"], rec["repo_id"], rec["config"], rec["split"]) == ("hub", "acme/tiny", "chat", "test")
    assert rec["splits"] == ["train", "test"] and rec["revision"] == COMMIT and rec["offline"] is True
    assert rec["files"] == ["chat/test-0.jsonl", "chat/test-1.jsonl"] and rec["snapshot"] == str(snap)
    assert rec["categories"] == {"greet": 1, "math": 1}
    suite, rec = load_dataset_suite("hf:acme/tiny:chat:train")
    assert [p.text for p in suite.prompts] == ["train row"]
    suite, rec = load_dataset_suite("hf:acme/tiny:code")  # a bare data_files string: one train split
    assert rec["split"] == "train" and len(suite.prompts) == 2 and suite.name == "acme-tiny-code"
    with pytest.raises(ProfileError, match=r"no configuration 'nope' \(its card lists chat, code\)"):
        load_dataset_suite("hf:acme/tiny:nope")
    with pytest.raises(ProfileError, match=r"no split 'dev' \(splits: train, test\)"):
        load_dataset_suite("hf:acme/tiny:chat:dev")


def test_a_card_without_configs_follows_the_file_names(hub_cache):
    hub_dataset(hub_cache, "acme/plain", {
        "README.md": "# no front matter\n",
        "data/train-00000-of-00001.jsonl": _jsonl([{"prompt": "a training prompt"}]),
        "data/test-00000-of-00001.jsonl": _jsonl([{"prompt": "a test prompt", "category": "c"}])})
    suite, rec = load_dataset_suite("acme/plain")
    assert [p.text for p in suite.prompts] == ["a test prompt"] and rec["split"] == "test"
    assert sorted(rec["splits"]) == ["test", "train"]


def test_several_configurations_and_none_asked_is_an_error(hub_cache):
    hub_dataset(hub_cache, "nvidia/SPEED-Bench", {"README.md": SPEED_CARD})
    with pytest.raises(ProfileError, match=r"2 configurations \(qualitative, throughput_1k\) and none is the default"):
        load_dataset_suite("nvidia/SPEED-Bench")


def test_offline_and_not_cached_says_where_it_looked_and_how_to_fetch(hub_cache):
    with pytest.raises(ProfileError) as e:
        load_dataset_suite("hf:acme/absent:main")
    msg = str(e.value)
    assert "not in the local Hugging Face cache" in msg and str(hub_cache) in msg and "HF_HUB_OFFLINE=1" in msg
    assert "`hf download acme/absent --repo-type dataset`" in msg


def test_offline_via_datasets_variable_too(hub_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(ProfileError, match=r"offline mode is on \(HF_DATASETS_OFFLINE=1\)"):
        load_dataset_suite("acme/absent")


def test_online_and_not_cached_downloads_only_the_configuration_asked(hub_cache, monkeypatch):
    """Not offline: the card first, then only the data files its configuration names (allow_patterns)."""
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    calls = []
    remote = {"README.md": SPEED_CARD, "qualitative/test-00000-of-00001.jsonl": _jsonl(QUALITATIVE),
              "throughput_1k/test-00000-of-00001.jsonl": _jsonl(THROUGHPUT)}

    def fake(repo_id, *, repo_type, revision, local_files_only=False, allow_patterns=None):
        calls.append((repo_id, repo_type, local_files_only, allow_patterns))
        if local_files_only:
            from huggingface_hub.errors import LocalEntryNotFoundError

            raise LocalEntryNotFoundError("not cached")
        import fnmatch

        files = {k: v for k, v in remote.items() if any(fnmatch.fnmatch(k, p) for p in allow_patterns)}
        return str(hub_dataset(hub_cache, repo_id, files))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    suite, rec = load_dataset_suite("speed_bench:throughput_1k")
    assert calls == [("nvidia/SPEED-Bench", "dataset", True, None),
                     ("nvidia/SPEED-Bench", "dataset", False, ["README.md"]),
                     ("nvidia/SPEED-Bench", "dataset", False, ["README.md", "throughput_1k/test-*"])]
    assert len(suite.prompts) == 4 and rec["offline"] is False
    snap = Path(rec["snapshot"])
    assert not (snap / "qualitative").exists()  # the other subset was not fetched


# --- SPEED-Bench ---------------------------------------------------------------------------------


def test_speed_bench_qualitative_keeps_its_categories_and_drops_placeholders(speed_cache):
    suite, rec = load_dataset_suite("speed_bench")
    texts = [p.text for p in suite.prompts]
    assert texts == [QUALITATIVE[i]["turns"][0] for i in (0, 1, 2, 4)]  # the placeholder row is left out
    assert [p.category for p in suite.prompts] == ["coding", "math", "writing", "coding"]
    assert [p.id for p in suite.prompts] == [_qid(i) for i in (1, 2, 3, 5)]
    assert (rec["subset"], rec["config"], rec["split"], rec["placeholders"]) == ("qualitative", "qualitative", "test", 1)
    assert rec["categories"] == {"coding": 2, "math": 1, "writing": 1} and rec["rows"] == 4
    assert suite.suite.max_tokens == speed_bench.DEFAULT_MAX_TOKENS == 4096
    line = describe(rec)
    assert "1 placeholder row(s) left out" in line and "categories coding 2, math 1, writing 1" in line
    suite, rec = load_dataset_suite("speed_bench:qualitative", categories=["coding"])
    assert [p.category for p in suite.prompts] == ["coding", "coding"] and rec["other_category"] == 2
    with pytest.raises(ProfileError, match=r"no row of category stem \(its categories: coding, math, writing\)"):
        load_dataset_suite("speed_bench", categories=["stem"])


def test_speed_bench_throughput_subset_and_bad_subset(speed_cache):
    suite, rec = load_dataset_suite("speed_bench:throughput_1k", num_prompts=3, seed=1)
    assert len(suite.prompts) == 3 and {p.category for p in suite.prompts} <= {"low_entropy", "mixed", "high_entropy"}
    assert rec["files"] == ["throughput_1k/test-00000-of-00001.jsonl"]
    with pytest.raises(ProfileError, match=r"no subset 'throughput_4k'; choose one of qualitative, throughput_1k"):
        load_dataset_suite("speed_bench:throughput_4k")


def test_speed_bench_all_placeholders_says_how_to_prepare(hub_cache):
    hub_dataset(hub_cache, "nvidia/SPEED-Bench", {"README.md": SPEED_CARD,
                                                   "qualitative/test-0.jsonl": _jsonl([QUALITATIVE[3]] * 2)})
    with pytest.raises(ProfileError, match=r"all 2 row\(s\) are placeholders.*prepare.py"):
        load_dataset_suite("speed_bench")


def test_speed_bench_parquet_as_published(hub_cache):
    pa = pytest.importorskip("pyarrow", reason="SPEED-Bench's Parquet files need pyarrow")
    import pyarrow.parquet as pq

    snap = hub_dataset(hub_cache, "nvidia/SPEED-Bench", {"README.md": SPEED_CARD})
    (snap / "qualitative").mkdir()
    pq.write_table(pa.Table.from_pylist(QUALITATIVE), snap / "qualitative" / "test-00000-of-00001.parquet")
    suite, rec = load_dataset_suite("speed_bench")
    assert [p.category for p in suite.prompts] == ["coding", "math", "writing", "coding"] and rec["placeholders"] == 1


# --- Spec-Bench ----------------------------------------------------------------------------------


def test_spec_bench_from_the_cache_and_from_a_path(spec_bench_cache, tmp_path):
    suite, rec = load_dataset_suite("spec_bench")
    assert [p.text for p in suite.prompts] == [r["turns"][0] for r in SPEC_BENCH]
    assert [p.category for p in suite.prompts] == [r["category"] for r in SPEC_BENCH]
    assert suite.prompts[0].id == "81" and rec["path"] == str(spec_bench_cache) and rec["downloaded"] is False
    assert rec["commit"] == spec_bench.COMMIT and rec["url"] == spec_bench.URL
    local = tmp_path / "question.jsonl"
    local.write_text(_jsonl(SPEC_BENCH[:2]))
    suite, rec = load_dataset_suite(f"spec_bench:{local}")
    assert len(suite.prompts) == 2 and rec["url"] is None
    with pytest.raises(ProfileError, match=r"spec_bench:/nope/q.jsonl: no such file"):
        load_dataset_suite("spec_bench:/nope/q.jsonl")


def test_spec_bench_offline_and_not_cached(hub_cache):
    with pytest.raises(ProfileError) as e:
        load_dataset_suite("spec_bench")
    msg = str(e.value)
    assert f"not cached at {spec_bench.cache_path()}" in msg and f"curl -L --create-dirs -o {spec_bench.cache_path()}" in msg
    assert spec_bench.URL in msg and "--dataset spec_bench:PATH" in msg


def _serve(body: bytes):
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_spec_bench_downloads_once_when_online(hub_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    srv = _serve(_jsonl(SPEC_BENCH).encode())
    try:
        monkeypatch.setattr(spec_bench, "URL", f"http://127.0.0.1:{srv.server_port}/question.jsonl")
        suite, rec = load_dataset_suite("spec_bench")
    finally:
        srv.shutdown()
    assert rec["downloaded"] is True and len(suite.prompts) == 6
    assert spec_bench.cache_path().read_text() == _jsonl(SPEC_BENCH)
    suite, rec = load_dataset_suite("spec_bench")  # the second time from the cache
    assert rec["downloaded"] is False


def test_spec_bench_download_of_a_page_that_is_not_jsonl_is_not_cached(hub_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    srv = _serve(b"<html>proxy says no</html>")
    try:
        monkeypatch.setattr(spec_bench, "URL", f"http://127.0.0.1:{srv.server_port}/question.jsonl")
        with pytest.raises(ProfileError, match=r"is not Spec-Bench.s JSON Lines.*nothing was cached"):
            load_dataset_suite("spec_bench")
    finally:
        srv.shutdown()
    assert not spec_bench.cache_path().exists()


# --- end to end on the simulator ------------------------------------------------------------------


def _bench(argv, capsys) -> tuple[int, dict | None, str]:
    rc = main(argv)
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if rc == 0 and out.out.strip() else None), out.err


def test_bench_spec_bench_offline_and_its_categories_in_the_report(spec_bench_cache, tmp_path, capsys):
    prof = sim_profile(tmp_path, "sb-e2e")
    rc, summary, err = _bench(["--bench", "--profile", str(prof), "--dataset", "spec_bench", "--max-tokens", "12",
                               "--out", str(tmp_path / "runs"), "--json"], capsys)
    assert rc == 0, err
    run = summary["runs"][0]
    assert run["requests"] == 6 and run["output_tokens"] == 72
    d = Path(run["run_dir"])
    recs = [json.loads(line) for line in (d / "requests.jsonl").read_text().splitlines()]
    assert sorted(r["category"] for r in recs) == sorted(r["category"] for r in SPEC_BENCH)
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["dataset"]["format"] == "spec_bench" and manifest["dataset"]["commit"] == spec_bench.COMMIT
    assert "; categories math_reasoning 1, mt_bench 1, qa 1, rag 1, summarization 1, translation 1" in err
    assert main(["report", str(d)]) == 0
    page = (d / "report.html").read_text()
    assert "Acceptance per category" in page
    for cat in ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"):
        assert f"<td class=\"l\">{cat}</td>" in page, cat


def test_bench_speed_bench_subset_with_a_category_filter(speed_cache, tmp_path, capsys):
    prof = sim_profile(tmp_path, "spb-e2e")
    rc, summary, err = _bench(["--bench", "--profile", str(prof), "--dataset", "speed_bench:qualitative",
                               "--dataset-category", "coding,math", "--max-tokens", "10",
                               "--out", str(tmp_path / "runs"), "--json"], capsys)
    assert rc == 0, err
    run = summary["runs"][0]
    d = Path(run["run_dir"])
    recs = [json.loads(line) for line in (d / "requests.jsonl").read_text().splitlines()]
    assert run["requests"] == 3 and sorted(r["category"] for r in recs) == ["coding", "coding", "math"]
    ds = json.loads((d / "manifest.json").read_text())["dataset"]
    assert ds["filters"]["categories"] == ["coding", "math"] and ds["repo_id"] == "nvidia/SPEED-Bench"
    assert main(["report", str(d)]) == 0
    page = (d / "report.html").read_text()
    assert '<td class="l">coding</td>' in page and '<td class="l">math</td>' in page
    assert '<td class="l">writing</td>' not in page


# --- request fields ------------------------------------------------------------------------------


def _suite(**fields):
    return parse_suite({"suite": {"name": "rf", **fields}, "prompts": [{"text": "hello"}]})


def test_request_fields_go_where_sglang_reads_them():
    from specdash.bench.load import request_extra, sampling_params

    s = _suite(temperature=0.7, top_p=0.9, top_k=20, sampling_seed=7,
               extra_request_body={"sampling_params": {"min_p": 0.05}, "return_logprob": False})
    assert sampling_params(s, 16) == {"max_new_tokens": 16, "temperature": 0.7, "ignore_eos": True, "top_p": 0.9,
                                      "top_k": 20, "sampling_seed": 7, "min_p": 0.05}
    assert request_extra(s, "generate") == {"return_logprob": False}
    assert request_extra(s, "chat") == {"top_p": 0.9, "top_k": 20, "seed": 7, "sampling_params": {"min_p": 0.05},
                                        "return_logprob": False}
    assert sampling_params(_suite(), 8) == {"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True}
    with pytest.raises(ProfileError, match="top_k must be -1"):
        _suite(top_k=0)


def test_bench_request_fields_reach_the_server(tmp_path, capsys):
    prof = sim_profile(tmp_path, "rf-e2e")
    base = ["--bench", "--profile", str(prof), "--max-tokens", "8", "--repeats", "1", "--out", str(tmp_path / "runs")]
    rc, summary, err = _bench([*base, "--top-p", "0.9", "--top-k", "20", "--sampling-seed", "7", "--temperature", "0.5",
                               "--extra-request-body", '{"sampling_params": {"min_p": 0.05}}', "--json"], capsys)
    assert rc == 0, err
    d = Path(summary["runs"][0]["run_dir"])
    assert json.loads((d / "manifest.json").read_text())["request_fields"] == {
        "temperature": 0.5, "top_p": 0.9, "top_k": 20, "sampling_seed": 7,
        "extra_request_body": {"sampling_params": {"min_p": 0.05}}}
    # the extra body's sampling_params land in sampling_params: a key SGLang does not know fails every request
    rc, _, err = _bench([*base, "--extra-request-body", '{"sampling_params": {"bogus": 1}}'], capsys)
    assert rc == 1 and "unknown field `bogus`" in err
    for bad, msg in (('[1, 2]', "must be a JSON object"), ('{oops', "is not valid JSON")):
        rc, _, err = _bench([*base, "--extra-request-body", bad], capsys)
        assert rc == 2 and msg in err
    rc, _, err = _bench([*base, "--top-p", "1.5"], capsys)
    assert rc == 2 and "--top-p: Input should be less than or equal to 1" in err
