"""Profiles and suites: strict validation, lookup, env expansion, writing with comments kept."""

from __future__ import annotations

import tomllib

import pytest

from specdash.profile import (
    ProfileError,
    list_profiles,
    list_suites,
    load_profile,
    load_suite,
    parse_profile,
    profile_to_toml,
    write_new_file,
)


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_every_shipped_profile_and_suite_validates():
    names = [n for n, _ in list_profiles()]
    assert {"demo-eagle3", "demo-baseline", "kimi-k2.5-int4-eagle3-tp8", "kimi-k2.5-int4-baseline-tp8",
            "llama-3.1-8b-eagle3", "demo-wrong-algo", "demo-steps1-draft16"} <= set(names)
    for n in names:
        prof = load_profile(n)
        assert prof.name == n
        assert prof.path is not None and prof.path.read_text().startswith("#"), f"{n} needs a header comment"
    suites = dict(list_suites())
    assert {"seeds-five", "coding", "writing", "mixed"} <= set(suites)
    five = load_suite("seeds-five")
    assert len(five.prompts) == 5 and five.suite.max_tokens == 1024 and five.suite.temperature == 0
    assert "merge sort" in five.prompts[1].text


def test_kimi_preset_has_the_seeds_values():
    p = load_profile("kimi-k2.5-int4-eagle3-tp8")
    assert p.server.tp_size == 8 and p.server.mem_fraction_static == 0.85
    assert p.env == {
        "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_MAX_NCHANNELS": "16",
        "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1",
    }
    sp = p.speculative
    assert (sp.algorithm, sp.num_steps, sp.eagle_topk, sp.num_draft_tokens) == ("EAGLE3", 3, 4, 5)
    assert "--num-continuous-decode-steps" in p.server.extra_args and "--disable-custom-all-reduce" in p.server.extra_args


def test_unknown_key_names_file_key_and_nearest(tmp_path):
    p = _write(tmp_path, "bad.toml", 'name="x"\n[server]\nmodel_path="/m"\ntp_sise=2\n')
    with pytest.raises(ProfileError) as ei:
        load_profile(str(p))
    msg = str(ei.value)
    assert str(p) in msg and "server.tp_sise" in msg and "did you mean 'tp_size'" in msg


def test_unknown_top_level_section(tmp_path):
    p = _write(tmp_path, "bad.toml", 'name="x"\n[server]\nmodel_path="/m"\n[speculativ]\nalgorithm="EAGLE3"\n')
    with pytest.raises(ProfileError, match="did you mean 'speculative'"):
        load_profile(str(p))


def test_bad_values_and_missing_keys(tmp_path):
    with pytest.raises(ProfileError, match="missing required key 'server.model_path'"):
        parse_profile({"name": "x", "server": {}}, "p.toml")
    with pytest.raises(ProfileError, match="server.tp_size"):
        parse_profile({"name": "x", "server": {"model_path": "/m", "tp_size": 0}}, "p.toml")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(str(_write(tmp_path, "t.toml", "name = \n")))


def test_unknown_name_suggests(tmp_path):
    with pytest.raises(ProfileError, match="did you mean.*demo-eagle3"):
        load_profile("demo-eagle")


def test_unknown_name_suggests_only_close_names():
    # a typo or two: the one close name, not the ones that merely share a word (demo-tree, real-smol-eagle3)
    with pytest.raises(ProfileError) as typo:
        load_profile("demo-eagel3")
    msg = str(typo.value)
    assert msg.startswith("no profile named 'demo-eagel3' (searched ")
    assert "did you mean 'demo-eagle3'? `specdash profile list` lists the profiles found" in msg
    assert "demo-tree" not in msg and "real-smol-eagle3" not in msg
    # nothing close (cutoff 0.4 used to offer demo-adaptive, demo-tree, demo-real-smol): no guess, the listing command
    with pytest.raises(ProfileError) as far:
        load_profile("my-profile")
    msg = str(far.value)
    assert "did you mean" not in msg and "demo-" not in msg
    assert msg.endswith("then the current directory): `specdash profile list` lists the profiles found")
    # suites: the same rule; the few known suites are listed inline
    with pytest.raises(ProfileError, match=r"did you mean 'coding'\? known suites: coding, "):
        load_suite("codng")
    with pytest.raises(ProfileError) as suite:
        load_suite("my-suite")
    assert "did you mean" not in str(suite.value) and "known suites: " in str(suite.value)
    assert "seeds-five" in str(suite.value).split("known suites: ")[1].split(", ")


def test_env_and_home_expansion(tmp_path, monkeypatch):
    monkeypatch.setenv("MODELS", "/data/models")
    monkeypatch.setenv("HOME", "/home/u")
    prof = parse_profile({"name": "x", "server": {"model_path": "${MODELS}/llama"},
                          "speculative": {"algorithm": "eagle3", "draft_model_path": "~/drafts/d"}}, "p.toml")
    e = prof.expanded()
    assert e.server.model_path == "/data/models/llama"
    assert e.speculative.draft_model_path == "/home/u/drafts/d"
    assert e.speculative.algorithm == "EAGLE3"
    monkeypatch.delenv("MODELS")
    with pytest.raises(ProfileError, match=r"\$\{MODELS\} is used but not set"):
        prof.expanded()


def test_algorithm_none_means_off():
    prof = parse_profile({"name": "x", "server": {"model_path": "/m"}, "speculative": {"algorithm": "none"}})
    assert not prof.spec_enabled


def test_user_dir_shadows_presets(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    d = tmp_path / "specdash" / "profiles"
    d.mkdir(parents=True)
    (d / "demo-eagle3.toml").write_text('name = "demo-eagle3"\ndescription = "mine"\n[server]\nmodel_path="/m"\n')
    assert load_profile("demo-eagle3").description == "mine"


def test_write_keeps_comments_and_refuses_overwrite(tmp_path):
    src = load_profile("demo-eagle3")
    text = src.path.read_text()
    changed = src.model_copy(deep=True)
    changed.speculative.eagle_topk = 4
    changed.speculative.num_draft_tokens = 8
    changed.name = "demo-eagle3-topk4"
    out = profile_to_toml(changed, base_text=text)
    assert out.splitlines()[0] == text.splitlines()[0]
    data = tomllib.loads(out)
    assert data["speculative"]["eagle_topk"] == 4 and data["name"] == "demo-eagle3-topk4"
    path = write_new_file(tmp_path / "p.toml", out)
    assert parse_profile(tomllib.loads(path.read_text()), path).speculative.num_draft_tokens == 8
    with pytest.raises(ProfileError, match="already exists"):
        write_new_file(path, out)
    write_new_file(path, out, force=True)


def test_suite_jsonl_prompts(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"text": "a", "category": "coding"}\n\n"b"\n')
    s = _write(tmp_path, "s.toml", '[suite]\nname="s"\nprompts_file="p.jsonl"\n')
    suite = load_suite(str(s))
    assert [p.text for p in suite.prompts] == ["a", "b"] and suite.prompts[0].category == "coding"
    (tmp_path / "p.jsonl").write_text('{"txt": "a"}\n')
    with pytest.raises(ProfileError, match=r"p.jsonl:1"):
        load_suite(str(s))
    empty = _write(tmp_path, "e.toml", '[suite]\nname="e"\n')
    with pytest.raises(ProfileError, match="no prompts"):
        load_suite(str(empty))


def test_variant_maker_and_preset_writer(tmp_path):
    from specdash.profile import profile_variant, write_preset

    src = load_profile("demo-eagle3")
    v = profile_variant(src, {"num_steps": 2, "eagle_topk": 1, "num_draft_tokens": 3, "extra_args": "--a 1"},
                        name="demo-s2")
    assert (v.name, v.speculative.num_steps, v.speculative.extra_args, v.path) == ("demo-s2", 2, ["--a", "1"], src.path)
    assert src.speculative.num_steps != 2  # the source is untouched
    assert profile_variant(src, None).speculative is None
    with pytest.raises(ProfileError, match="num_steps"):
        profile_variant(src, {"num_steps": -1})
    base = src.path.read_text()
    first = write_preset(v, "a/b", directory=tmp_path, note="Made by a test.", base_text=base, on_exists="number")
    second = write_preset(v, "a/b", directory=tmp_path, note="# Made by a test.", on_exists="number")
    assert (first.name, second.name) == ("a-b.toml", "a-b-2.toml")
    assert first.read_text().startswith("# Made by a test.\n# Simulator demo")
    assert second.read_text().startswith("# Made by a test.\n")
    assert load_profile(str(first)).name == "a/b" and load_profile(str(second)).speculative.num_steps == 2
    with pytest.raises(ProfileError, match="already exists"):
        write_preset(v, "a/b", directory=tmp_path, note="x")
    assert write_preset(v, "a/b", directory=tmp_path, note="x", description="d", on_exists="overwrite") == first
    assert load_profile(str(first)).description == "d"
    # defaults the source never wrote stay out (a newcomer found ssh_options = [] in a single-node preset)
    plain = write_preset(profile_variant(src, {"num_steps": 2, "eagle_topk": 1, "num_draft_tokens": 3}), "plain",
                         directory=tmp_path, note="x", base_text=base)
    for p in (plain, second):
        text = p.read_text()
        assert "ssh_options" not in text and "= []" not in text, text
    assert "extra_args = [" in second.read_text()  # set: written
    assert load_profile(str(plain)).model_dump(exclude={"name", "description"}) == \
        profile_variant(src, {"num_steps": 2, "eagle_topk": 1, "num_draft_tokens": 3}).model_dump(
            exclude={"name", "description"})


@pytest.mark.parametrize("env,words", [
    ('"A=B" = "1"', "name 'A=B' cannot be an environment variable"),
    ('"" = "1"', "name '' cannot be an environment variable"),
    ('X = "a\\u0000b"', "X: the value holds a NUL byte"),
])
def test_env_that_no_process_can_carry_is_refused_at_load(tmp_path, env, words):
    """Python's subprocess raises on these at launch (after the preflight); the profile says it first."""
    p = _write(tmp_path, "e.toml", f'name="x"\n[server]\nmodel_path="/m"\n[env]\n{env}\n')
    with pytest.raises(ProfileError) as ei:
        load_profile(str(p))
    assert str(p) in str(ei.value) and words in str(ei.value)


def test_a_written_profile_with_a_literal_api_key_is_private(tmp_path):
    import stat

    from specdash.profile.files import write_new_file

    p = write_new_file(tmp_path / "k.toml", 'name = "k"\n[server]\nmodel_path = "/m"\napi_key = "sk-1"\n')
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    q = write_new_file(tmp_path / "r.toml", 'name = "r"\n[server]\nmodel_path = "/m"\napi_key = "${KEY}"\n')
    import os

    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(q.stat().st_mode) == 0o666 & ~mask  # a reference is no secret: the usual mode


def test_a_directory_given_as_profile_or_suite_is_named_as_one(tmp_path):
    with pytest.raises(ProfileError, match=r"is a directory, not a profile file: give the \.toml file in it"):
        load_profile(str(tmp_path))
    with pytest.raises(ProfileError, match=r"is a directory, not a suite file"):
        load_suite(str(tmp_path))
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(str(tmp_path / "nope.toml"))
