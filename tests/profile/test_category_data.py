"""Roles, layer kinds and operation families are data (``categories.toml``): attribution, placement and
the structural diff read the same entries, and a new category is one entry, its family included."""
from __future__ import annotations

import pandas as pd

import kit
from kit.profile.analyses._structure import UNPLACED_GEMM, families
from kit.profile.attribution._categories import layer_kind, role_of, structure


def test_every_packaged_category_has_a_structural_family():
    named = {r.category for r in kit.profile.default_rules()} | {"other"}
    table = structure().category_family
    assert sorted(named - set(table)) == []
    assert all(inside and outside for inside, outside in table.values())


def test_every_role_family_and_anchor_names_a_known_role_and_category():
    s, rules = structure(), kit.profile.default_rules()
    roles = {r.role for r in rules if "module" in r.on and r.role}
    cats = {r.category for r in rules}
    assert {r for r, _ in s.families} <= roles and set(s.anchors) <= roles and set(s.kind_order) <= roles
    assert {c for _, c in s.families} <= cats | {"*", "gemm:before", "gemm:after"}
    assert set(s.anchors.values()) <= cats


def test_roles_are_read_by_one_rule_the_suffix():
    # a Qwen2MoeAttention is attention, not MoE (the suffix decides, never a substring)
    assert role_of("Qwen2MoeAttention") == "attention"
    assert role_of("Qwen2MoeSparseMoeBlock") == "moe"
    assert role_of("Qwen3NextGatedDeltaNet") == "ssm"
    assert role_of("FalconH1Mixer") == "ssm"
    assert role_of("Qwen2RotaryEmbedding") == "rope" and role_of("VocabParallelEmbedding") == "embedding"
    assert role_of("Qwen2DecoderLayer") == "" and role_of(None) == ""
    assert layer_kind({"mlp", "attention", "norm"}) == "attention+mlp"
    assert layer_kind({"moe", "ssm"}) == "ssm+moe" and layer_kind({"norm"}) == "other"


def _kernels(categories, block="", layer=0) -> pd.DataFrame:
    n = len(categories)
    return pd.DataFrame({"category": categories, "block": [block] * n, "layer": [layer] * n, "step": [0] * n,
                         "start_us": [float(i) for i in range(n)], "module": [""] * n})


def test_a_category_the_table_does_not_describe_is_its_own_family_not_other():
    # a user's rule may name a new category: the structural diff shows it by name, never as "other"
    fam = families(_kernels(["my-new-op", "quantization", "convolution", "other"]))
    assert fam.tolist() == ["my-new-op", "quantization", "convolution", "other"]


def test_families_come_from_the_block_role_and_the_place_around_the_anchor():
    k = _kernels(["gemm", "attention", "gemm", "kv-cache write"], block="LlamaAttention")
    assert families(k).tolist() == ["qkv proj", "attention", "o proj", "attention"]
    outside = _kernels(["elementwise", "allreduce"], layer=-1)
    assert families(outside).tolist() == ["setup (masks, positions)", "all-reduce"]
    # a GEMM outside the layers is unplaced until the lm-head rule names it (by shape and place)
    assert structure().family_of_category("gemm", in_layer=False) == UNPLACED_GEMM
