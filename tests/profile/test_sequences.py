"""Edge cases of the op-sequence matcher (kit/profile/attribution/_sequences.py) on short op lists; the real
traces are in test_attribution_twins.py. Synthetic on purpose: each case is one rule behaviour."""
from __future__ import annotations

from kit.profile.attribution._categories import default_rules
from kit.profile.attribution._sequences import claim

RULES = [r for r in default_rules() if "sequence" in r.on]


def _cats(ops: str) -> list:
    got = claim([f"aten::{o}" for o in ops.split()], RULES)
    return [r.category if r else None for r in got]


def test_rmsnorm_then_rope_then_cache_cat_then_sdpa():
    ops = "to pow mean add rsqrt mul to mul linear mul neg cat mul add cat cat scaled_dot_product_attention"
    c = _cats(ops)
    assert c[:8] == ["norm"] * 8 and c[8] is None
    assert c[9:14] == ["rope"] * 5 and c[14:16] == ["kv-cache write"] * 2 and c[16] is None


def test_shape_ops_inside_a_claim_join_it_and_are_invisible_to_the_rules():
    c = _cats("to pow mean reshape add rsqrt mul to mul")
    assert c == ["norm"] * 9
    c = _cats("linear reshape contiguous reshape to exp neg cat to copy_ conv1d silu to linear")
    assert c[0] is None and c[-1] is None and set(c[1:-1]) == {"ssm"}   # projections stay GEMM


def test_router_claims_experts_up_to_the_residual_add():
    ops = ("linear softmax topk sum div_ to _grouped_mm silu mul _grouped_mm index_add_ add to pow mean add rsqrt "
           "mul to mul")
    c = _cats(ops)
    assert c[:11] == ["moe"] * 11 and c[11] is None and c[12:] == ["norm"] * 8


def test_sampling_softmax_is_not_attention_and_argmax_alone_is_left_to_its_op():
    assert _cats("linear div softmax multinomial") == [None, "sampling", "sampling", None]
    assert _cats("linear argmax") == [None, None]


def test_nothing_claimed_without_a_match():
    assert _cats("add mul cat") == [None, None, None]
    assert claim([], RULES) == []


def test_rules_match_whole_ops_only():
    """``copy_`` of the attention-input rule must not match the end of ``index_copy_`` (a static cache
    write right before SDPA)."""
    assert _cats("index_copy_ index_copy_ scaled_dot_product_attention") == [None, None, None]
    assert _cats("copy_ scaled_dot_product_attention")[0] == "attention"


def test_graph_kernels_read_as_the_ops_they_stand_for():
    from kit.profile.attribution._sequences import kernel_token

    token = kernel_token("void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda(...)")
    assert token == "rsqrt"
    assert kernel_token("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<"
                        "float, float, float, float>, unsigned int, float, 4, 4> >") == "mean"
    assert kernel_token("nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN") == "linear"
    assert kernel_token("triton_poi_fused_index_copy_transpose_unbind_view_2") == "?"
    assert kernel_token("some_custom_kernel") == "?"
