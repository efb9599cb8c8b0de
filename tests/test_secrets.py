"""The one redaction path: secret flags (all argparse spellings), secret env names, text and bytes."""

from __future__ import annotations

import json

from specdash.profile import parse_profile, redacted_profile_data
from specdash.sglang.secrets import (
    is_secret_env,
    is_secret_flag,
    redact_argv,
    redact_bytes,
    redact_env,
    redact_text,
    redact_url,
    secret_values,
)


def test_secret_flags_in_every_form_argparse_accepts():
    argv = ["python3", "-m", "sglang.launch_server", "--api-key", "k1", "--admin-api-key=k2",
            "--api-k", "k3", "--api_key", "k4", "--port", "30000", "--api-key="]
    assert secret_values(argv) == ["k1", "k2", "k3", "k4"]
    assert redact_argv(argv) == ["python3", "-m", "sglang.launch_server", "--api-key", "***",
                                 "--admin-api-key=***", "--api-k", "***", "--api_key", "***",
                                 "--port", "30000", "--api-key=***"]
    assert not any(is_secret_flag(w) for w in ("--", "-a", "--port", "--api-keys", "--model-path", "api-key"))


def test_env_names_and_free_text():
    env = {"HF_TOKEN": "hf_x", "OPENAI_API_KEY": "sk", "db_password": "p", "NCCL_ALGO": "Ring"}
    assert redact_env(env) == {"HF_TOKEN": "***", "OPENAI_API_KEY": "***", "db_password": "***", "NCCL_ALGO": "Ring"}
    assert is_secret_env("MY_SECRET") and not is_secret_env("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")
    # deny by default: a name that does not look secret is still hidden unless it is a known knob
    assert redact_env({"DB_PASS": "hunter2", "WANDB_CREDS": "x", "MY_SETTING": "1", "SGLANG_API_KEY": "sk",
                       "NCCL_IB_HCA": "mlx5_0", "CUDA_VISIBLE_DEVICES": "0,1", "HF_HOME": "/cache"}) == {
        "DB_PASS": "***", "WANDB_CREDS": "***", "MY_SETTING": "***", "SGLANG_API_KEY": "***",
        "NCCL_IB_HCA": "mlx5_0", "CUDA_VISIBLE_DEVICES": "0,1", "HF_HOME": "/cache"}
    assert redact_text("key=k1 and k1 again", ["k1", ""]) == "key=*** and *** again"
    assert redact_bytes(b"api_key='k1'\n", [b"k1", b""]) == b"api_key='***'\n"
    assert redact_url("http://user:pw@host:1/x") == "http://***@host:1/x"


def test_profile_data_hides_the_secrets_its_launch_hides():
    prof = parse_profile({
        "name": "p",
        "server": {"model_path": "/m", "api_key": "sk-1", "extra_args": ["--admin-api-key", "adm", "--tp", "2"]},
        "speculative": {"algorithm": "EAGLE3", "extra_args": ["--api-k=x"]},
        "env": {"HF_TOKEN": "hf", "NCCL_ALGO": "Ring"},
    })
    data = redacted_profile_data(prof)
    assert data["server"]["api_key"] == "***"
    assert data["server"]["extra_args"] == ["--admin-api-key", "***", "--tp", "2"]
    assert data["speculative"]["extra_args"] == ["--api-k=***"]
    assert data["env"] == {"HF_TOKEN": "***", "NCCL_ALGO": "Ring"}
    assert prof.server.api_key == "sk-1"  # the profile itself is untouched


def test_a_password_in_the_url_never_reaches_the_manifest():
    from specdash.launch import attached_profile, build_manifest

    m = build_manifest(attached_profile(), url="http://admin:hunter2@127.0.0.1:30000")
    assert m["url"] == "http://***@127.0.0.1:30000" and "hunter2" not in json.dumps(m, default=str)


def test_profile_import_keeps_a_secret_env_value_as_a_reference(tmp_path, monkeypatch, capsys):
    from specdash.cli import main
    from specdash.profile import build_launch, load_profile

    out = tmp_path / "p.toml"
    assert main(["profile", "import", "FOO_API_KEY=sekrit NCCL_ALGO=Ring python -m sglang.launch_server "
                 "--model-path /m", "--out", str(out)]) == 0
    assert "FOO_API_KEY is not written to the profile" in capsys.readouterr().out
    text = out.read_text()
    assert "sekrit" not in text and 'FOO_API_KEY = "${FOO_API_KEY}"' in text and 'NCCL_ALGO = "Ring"' in text
    monkeypatch.setenv("FOO_API_KEY", "from-the-environment")
    launch = build_launch(load_profile(str(out)).expanded())
    assert launch.env["FOO_API_KEY"] == "from-the-environment" and launch.redacted_env()["FOO_API_KEY"] == "***"
    monkeypatch.delenv("FOO_API_KEY")
    assert main(["profile", "show", str(out)]) == 2
    assert "env.FOO_API_KEY: ${FOO_API_KEY} is used but not set" in capsys.readouterr().err
