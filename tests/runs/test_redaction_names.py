"""Issue 45 item 9: secrets stored under their names (settings keys, a ledger's numbers) and in figure
labels never reach the catalogue or the report's ledger copy."""
from __future__ import annotations

import json

import pytest

from kit import runs
from kit.redact import redact_json_text

PASSWORD, SERVICE, PROJECT = "Tr0ub4dor-and-3", "svc-9f8e7d6c5b4a", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KIT_RUNS_SHARED", raising=False)
    return tmp_path / "store"


def test_settings_are_redacted_by_their_key_names_and_figure_labels_too(store):
    r = runs.record("bench", settings={"DB_PASSWORD": PASSWORD, "MY_SERVICE_SECRET": SERVICE, "max_tokens": "512",
                                       "eos_token": "</s>"},
                    figures=[("p99_itl_ms", 12.5, "ms", f"key {PROJECT}"), (f"itl {PROJECT}", 1.0, "ms", None)])
    raw = b"".join(p.read_bytes() for p in store.rglob("*.parquet"))
    for secret in (PASSWORD, SERVICE, PROJECT):
        assert secret.encode() not in raw
    got = runs.get(r.run_id)
    settings = json.loads(got["settings"])
    assert settings["max_tokens"] == "512" and settings["eos_token"] == "</s>"   # not secrets: kept
    assert "REDACTED" in settings["DB_PASSWORD"] and "REDACTED" in settings["MY_SERVICE_SECRET"]
    assert got["figures"][0]["value"] == 12.5


def test_a_ledgers_db_password_is_masked_in_its_json_copy():
    ledger = {"hypotheses": [{"id": "H1", "numbers": {"db_password": PASSWORD, "p99_ms": 12.5, "token": "null"}}]}
    text, n = redact_json_text(json.dumps(ledger))
    assert PASSWORD not in text and n == 1
    assert json.loads(text)["hypotheses"][0]["numbers"]["p99_ms"] == 12.5
