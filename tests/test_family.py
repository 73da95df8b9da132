"""Family templates: the dense template reproduces Llama 3 8B exactly and follows Meta's FFN rule;
the ladder grows; the MoE template keeps the dense model's active FFN parameters."""

from __future__ import annotations

import pytest

from mi400plan.errors import UsageError
from mi400plan.family import FamilyTemplate, ffn_dim, layers_for
from mi400plan.params import count_params


def test_dense_template_at_4096_is_llama3_8b(catalog):
    m = FamilyTemplate().model(4096)
    assert (m.num_layers, m.ffn_dim, m.attention.num_heads, m.attention.num_kv_heads) == (32, 14336, 32, 8)
    # Llama 3.1 8B: 8,030,261,248 parameters (HF safetensors), the same count as the bundled profile
    assert count_params(m).total == count_params(catalog.get("models", "llama3.1-8b").spec).total
    assert count_params(m).total == 8_030_261_248


@pytest.mark.parametrize(
    ("width", "ffn"),
    [
        # int(8 x 4096 / 3) = 10922; x 1.3 = 14198.6; up to a multiple of 1024: 14 x 1024 = 14336
        (4096, 14336),
        # int(8 x 8192 / 3) = 21845; x 1.3 = 28398.5; up to a multiple of 4096: 7 x 4096 = 28672
        (8192, 28672),
        # int(8 x 2048 / 3) = 5461; x 1.3 = 7099.3; up to 1024: 7 x 1024 = 7168
        (2048, 7168),
    ],
)
def test_ffn_rule_by_hand(width, ffn):
    assert ffn_dim(width) == ffn


def test_depth_follows_aspect_ratio_128():
    assert layers_for(4096) == 32
    assert layers_for(16384) == 128
    assert layers_for(1024) == 8


def test_the_ladder_grows_strictly():
    t = FamilyTemplate()
    sizes = [count_params(t.model(w)).total for w in t.widths()[:24]]
    assert all(b > a for a, b in zip(sizes, sizes[1:]))


def test_moe_template_keeps_active_ffn_and_multiplies_total():
    dense = FamilyTemplate().model(4096)
    moe = FamilyTemplate("moe", experts=16, top_k=2).model(4096)
    assert moe.moe is not None and moe.moe.expert_ffn_dim == 14336 // 2
    d, m = count_params(dense), count_params(moe)
    ffn_dense = 3 * 4096 * 14336 * 32  # SwiGLU: three d x ffn matrices per layer
    # routed FFN: 16 experts x 3 x 4096 x 7168 per layer; router 4096 x 16 per layer
    ffn_moe_total = 16 * 3 * 4096 * 7168 * 32 + 4096 * 16 * 32
    assert m.total - d.total == ffn_moe_total - ffn_dense
    assert m.active - d.active == 4096 * 16 * 32  # only the routers are extra per token


@pytest.mark.parametrize(("experts", "top_k"), [(1, 1), (8, 0), (8, 8)])
def test_bad_moe_family_is_a_usage_error(experts, top_k):
    with pytest.raises(UsageError):
        FamilyTemplate("moe", experts=experts, top_k=top_k)


def test_width_off_the_ladder_is_a_usage_error():
    with pytest.raises(UsageError):
        FamilyTemplate().model(5000)


def test_family_names_resolve_in_the_model_lookup(catalog) -> None:
    from mi400plan.errors import UsageError
    from mi400plan.family import FamilyTemplate

    # d_model 8192: 8192 / 128 = 64 layers; FFN 4096 x ceil(1.3 x 21845 / 4096) = 4096 x 7 = 28,672 (Llama 3 70B's)
    spec = catalog.get("models", "dense-d8192-l64").spec
    assert (spec.hidden_size, spec.num_layers, spec.ffn_dim, spec.attention.num_heads) == (8192, 64, 28672, 64)
    moe = catalog.get("models", "moe-e64-k8-d4096-l32").spec
    assert moe.moe.num_experts == 64 and moe.moe.top_k == 8 and moe.num_layers == 32
    assert FamilyTemplate("moe", 64, 8).model(4096).name == "moe-e64-k8-d4096-l32"
    with pytest.raises(UsageError, match="dense-d8192-l64"):
        catalog.get("models", "dense-d8192-l60")
    with pytest.raises(UsageError, match="multiple of 1024"):
        catalog.get("models", "dense-d1000-l8")


def test_family_name_is_accepted_by_other_commands(cli) -> None:
    for argv in (["sweep", "dense-d2048-l16", "--sku", "mi300x", "--gpus", "8", "--no-ranges", "--top", "1"],
                 ["fit", "dense-d2048-l16", "--sku", "mi300x", "--gpus", "8"],
                 ["serve", "dense-d2048-l16", "--sku", "mi355x", "--no-ranges", "--top", "1"]):
        r = cli(argv)
        assert r.exit_code == 0, (argv, r.output)
