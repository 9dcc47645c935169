"""kit.models: the AllReduce cost model against published measurements, and the speculative model.

Published all-reduce latencies (../shared/reference/serving-formats.md section 6.2):

* haohervchb/sglang-V100 PR #2, 4xV100 behind a PLX switch, no NVLink, NCCL vs one-shot:
  4 KB 19.4 vs 4.0 us, 32 KB 24.2 vs 11.8, 128 KB 51.8 vs 44.5, 384 KB 83.5 vs 120.3.
* sglang PR #32479, 8x RTX 6000D over PCIe: NCCL 45 us for 4 KB and 344 us for 64 KB.

The link's alpha/beta are fitted on TWO NCCL points of the 4-GPU sweep (4 KB and 384 KB); the model
must then reproduce the other two NCCL points and all four one-shot points (a different algorithm,
same link) within 25 %.
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

from kit import models as M
from kit.errors import ModelError
from tests.conftest import TEST_DATA

KB = 1024
V100_NCCL = {4: 19.4, 32: 24.2, 128: 51.8, 384: 83.5}
V100_ONESHOT = {4: 4.0, 32: 11.8, 128: 44.5, 384: 120.3}


@pytest.fixture(scope="module")
def v100_link():
    return M.fit([4 * KB, 384 * KB], [V100_NCCL[4], V100_NCCL[384]], n=4, algorithm="ring", name="4xV100-PLX")


@pytest.mark.parametrize("size_kb", [32, 128])
def test_ring_reproduces_the_other_nccl_points(v100_link, size_kb):
    pred = M.allreduce_time_us(size_kb * KB, 4, v100_link, "ring")
    assert pred == pytest.approx(V100_NCCL[size_kb], rel=0.25)


@pytest.mark.parametrize("size_kb", [4, 32, 128, 384])
def test_oneshot_reproduces_published_points_from_the_nccl_fit(v100_link, size_kb):
    pred = M.allreduce_time_us(size_kb * KB, 4, v100_link, "oneshot")
    assert pred == pytest.approx(V100_ONESHOT[size_kb], rel=0.25)


def test_fit_values_and_exactness(v100_link):
    # two points -> exact: 6 alpha + 1.5 S / beta through both
    assert M.allreduce_time_us(4 * KB, 4, v100_link) == pytest.approx(19.4)
    assert M.allreduce_time_us(384 * KB, 4, v100_link) == pytest.approx(83.5)
    assert v100_link.alpha_us == pytest.approx(3.12, abs=0.01)
    assert v100_link.beta_gbps == pytest.approx(9.11, abs=0.01)
    assert v100_link.fitted and v100_link.fit_points == 2 and v100_link.fit_max_error == pytest.approx(0, abs=1e-9)
    assert repr(v100_link) == "LinkModel(4xV100-PLX: alpha 3.12 us/step, beta 9.11 GB/s, fitted on 2 points)"


def test_eight_gpu_pcie_nccl_fit_and_decode_budget():
    link = M.fit(pd.DataFrame({"size_bytes": [4 * KB, 64 * KB], "time_us": [45.0, 344.0]}), n=8)
    assert M.allreduce_time_us(4 * KB, 8, link) == pytest.approx(45.0)
    assert M.allreduce_time_us(64 * KB, 8, link) == pytest.approx(344.0)
    # hidden 4096 x bf16 at bs=1 = 8 KB per all-reduce; 2 per layer x 60 layers
    cost = M.allreduce_cost(tp=8, hidden_size=4096, layers=60, link=link, step_time_ms=30.0)
    per_call = 45.0 + (344.0 - 45.0) * (8 * KB - 4 * KB) / (60 * KB)
    assert cost.message_bytes == 8192 and cost.calls_per_step == 120
    assert cost.per_call_us == pytest.approx(per_call)
    assert cost.per_step_us == pytest.approx(120 * per_call)
    assert cost.share == pytest.approx(120 * per_call / 30000.0)


def test_fit_needs_two_sizes_and_positive_terms():
    with pytest.raises(ModelError, match="at least 2 distinct message sizes"):
        M.fit([4096, 4096], [10.0, 11.0], n=4)
    with pytest.raises(ModelError, match="non-positive"):
        M.fit([4096, 65536], [50.0, 10.0], n=4)
    with pytest.raises(ModelError, match="size_bytes and time_us"):
        M.fit(pd.DataFrame({"bytes": [1, 2]}), n=4)


def test_presets_cite_sources():
    assert set(M.LINKS) == {"pcie4", "pcie5", "nvlink_h100", "nvlink_h200"}
    for lm in M.LINKS.values():
        assert lm.alpha_us > 0 and lm.beta_gbps > 0 and not lm.fitted
        assert "beta:" in lm.source and "alpha:" in lm.source
    assert M.LINKS["pcie5"].beta_gbps == 63.0 and M.LINKS["nvlink_h100"].beta_gbps == 450.0
    with pytest.raises(ModelError, match="unknown link preset 'nvlink9'"):
        M.link("nvlink9")


def test_allreduce_cost_by_hand_on_a_preset():
    # 8-GPU ring over pcie5: 14 alpha + 1.75 S / beta, S = 8 tokens x 8192 x 2 B = 128 KiB
    c = M.allreduce_cost(tp=8, hidden_size=8192, layers=80, tokens_per_step=8, link="pcie5")
    lat = 14 * 2.2
    bw = 1.75 * 131072 / (63.0 * 1e3)
    assert (c.latency_term_us, c.bandwidth_term_us) == (pytest.approx(lat), pytest.approx(bw))
    assert c.per_step_us == pytest.approx(160 * (lat + bw))
    assert c.per_token_us == pytest.approx(160 * (lat + bw) / 8)
    assert c.bound == "latency-bound"
    assert c.crossover_bytes == pytest.approx(lat * 63.0e3 / 1.75)
    assert c.by_algorithm_us["oneshot"] == pytest.approx(2.2 + 7 * 131072 / 63.0e3)
    big = M.allreduce_cost(tp=8, hidden_size=8192, layers=80, tokens_per_step=4096, link="pcie5")
    assert big.bound == "bandwidth-bound"
    assert repr(c).startswith("AllReduceCost(TP8 ring over pcie5: 128.0 KiB x 160 calls/step -> ")
    assert "latency-bound" in repr(c) and c.share is None


def test_allreduce_cost_bad_parameters():
    with pytest.raises(ModelError, match="at least 2 GPUs"):
        M.allreduce_cost(tp=1, hidden_size=4096, layers=32)
    with pytest.raises(ModelError, match="must be positive"):
        M.allreduce_cost(tp=4, hidden_size=0, layers=32)
    with pytest.raises(ModelError, match="unknown all-reduce algorithm"):
        M.allreduce_cost(tp=4, hidden_size=4096, layers=32, algorithm="tree")


# --------------------------------------------------------------------------- speculative

def test_expected_tokens_iid_and_per_position():
    assert M.expected_tokens(0.42, 3) == pytest.approx(1 + 0.42 + 0.42 ** 2 + 0.42 ** 3)
    assert M.expected_tokens(1.0, 3) == 4.0 and M.expected_tokens(0.0, 5) == 1.0
    assert M.expected_tokens(per_position=[0.708, 0.583, 0.333]) == pytest.approx(2.624)
    with pytest.raises(ModelError):
        M.expected_tokens(1.2, 3)


def test_issue_example_42_percent_k3_c015():
    est = M.spec_estimate(0.42, k=3, c=0.15)
    assert est.expected_tokens == pytest.approx(1.6705, abs=1e-4)
    assert est.speedup == pytest.approx(1.6705 / 1.45, abs=1e-4)  # "expected x1.2" (1.15)
    assert est.verdict == "speed-up"
    assert repr(est) == ("SpecEstimate(42% at k=3, c=0.15 (assumed) -> 1.67 tokens/verify, expected x1.15 "
                         "(speed-up); break-even acceptance 31.7%; basis: i.i.d. acceptance)")


def test_break_even():
    for k, c in ((1, 0.1), (3, 0.15), (7, 0.05), (4, 0.5)):
        a = M.break_even(k, c)
        assert M.expected_tokens(a, k) == pytest.approx(1 + k * c, abs=1e-9)
        assert M.speedup(a, k, c) == pytest.approx(1.0, abs=1e-9)
    assert M.break_even(1, 0.1) == pytest.approx(0.1)  # k=1: 1 + a = 1 + c
    assert M.break_even(3, 1.0) is None and M.break_even(3, 0.0) == 0.0
    assert M.spec_estimate(0.2, k=3, c=0.15).verdict == "slow-down"


def test_acceptance_for_length_inverts_expected_tokens():
    a = M.acceptance_for_length(2.2, 2)
    assert M.expected_tokens(a, 2) == pytest.approx(2.2)
    with pytest.raises(ModelError):
        M.acceptance_for_length(5.0, 3)


def test_spec_from_parsed_summary():

    import kit.logs as L

    s = L.spec_summary(TEST_DATA / "logs" / "vllm_0.34_current.log")
    est = s.speedup(0.1)
    assert est.basis == "measured length" and est.k == 3
    assert est.expected_tokens == pytest.approx(1 + 99 / 54)
    assert est.speedup == pytest.approx((1 + 99 / 54) / 1.3)
    assert est.acceptance == pytest.approx(99 / 162)
    assert M.spec_from_summary(s, 0.1, c_measured=True).c_measured is True


def test_speedup_curves_table():
    df = M.speedup_curves(0.15, ks=range(1, 8), points=11)
    assert list(df.columns) == ["k", "acceptance", "expected_tokens", "speedup"]
    assert len(df) == 77 and sorted(df["k"].unique()) == list(range(1, 8))
    top = df[(df["k"] == 7) & (df["acceptance"] == 1.0)]
    assert top["speedup"].iloc[0] == pytest.approx(8 / (1 + 7 * 0.15))
    assert math.isclose(df[(df["k"] == 2) & (df["acceptance"] == 0.0)]["speedup"].iloc[0], 1 / 1.3)


def test_drafter_cost_inverts_the_speedup_model():
    from kit.models import drafter_cost, spec_estimate

    for a, k, c in [(0.42, 3, 0.15), (0.7, 5, 0.05), (0.2, 1, 0.3)]:
        e = spec_estimate(a, k=k, c=c)
        assert drafter_cost(e.expected_tokens, k, e.speedup) == pytest.approx(c, rel=1e-9)
    # a drafter slower than free: a speed-up above the acceptance length clips to c = 0
    assert drafter_cost(1.5, 3, 2.0) == 0.0
    with pytest.raises(ModelError, match="positive speed-up"):
        drafter_cost(1.5, 3, 0.0)


def test_result_objects_have_html_views():
    """SpecSummary, SpecEstimate, AllReduceCost, Job and hosts render as HTML in a notebook (issue 16)."""
    import kit
    from kit import models
    from kit.logs import spec_summary
    from kit.remote import Job
    from tests.conftest import SAMPLE

    summary = spec_summary(SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log", version="0.5.9")
    est = models.spec_from_summary(summary, c=0.2, c_measured=True)
    cost = models.allreduce_cost(tp=8, hidden_size=4096, layers=52, link=models.link("pcie5"), step_time_ms=15.7)
    host = kit.connect("local")
    job = Job(host, 12345, "/tmp/x.log")
    group = kit.hosts(["local", "local"])
    for obj, words in ((summary, ["mean acceptance length", "1.6"]), (est, ["break-even acceptance length", "x"]),
                       (cost, ["AllReduceCost", "per token"]), (job, ["12345", "/tmp/x.log"]),
                       (host, ["LocalHost", "local"]), (group, ["HostGroup of 2 hosts"])):
        page = obj._repr_html_()
        assert page.startswith("<div>") and all(w in page for w in words), (type(obj).__name__, page)
        assert obj._repr_html_() == page  # deterministic
