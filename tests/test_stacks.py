"""Software stacks (``profiles/stacks``, ``mi400plan.stacks``): the default per vendor, the rules that
move the software-dependent efficiencies, overrides, and file:line:field errors for a bad stack file.

Expected numbers are written out by hand from the profiles' values: H100's measured attention
efficiency is 0.27 (low 0.22, high 0.31) and its expert host time 219 us (low 0, high 306 us); the
FlashAttention-3 paper's speed-up over FlashAttention-2 on H100 is 1.5-2.0x (nominal 1.75 here).
"""

from __future__ import annotations

import json

import pytest

from mi400plan.errors import ProfileError, UsageError
from mi400plan.stacks import StackRequest

US = 1e-6


def _hw(catalog, sku: str = "h100", case: str = "nominal", **req):  # noqa: ANN001, ANN202
    from mi400plan.hardware import build_sku

    name = req.pop("name", None)
    return build_sku(catalog, sku, "bf16", case=case, stack=StackRequest(name, req))


def test_every_bundled_stack_loads_and_the_kind_is_listed(catalog) -> None:
    from mi400plan.profiles import KINDS

    assert "stacks" in KINDS
    names = catalog.names("stacks")
    assert {"megatron-bridge-25.09", "megatron-bridge-25.11", "primus-megatron-1.0", "torchtitan", "deepspeed",
            "llm-foundry"} <= set(names)
    for n in names:
        spec = catalog.get("stacks", n).spec
        assert spec.released and spec.release_source and spec.settings.values()


def test_default_stack_is_the_newest_vendor_reference(catalog) -> None:
    from mi400plan.stacks import default_stack

    # 25.11 (2025-11) is newer than 25.09 (2025-09); both are NVIDIA's reference stack.
    assert default_stack(catalog, "NVIDIA").name == "megatron-bridge-25.11"
    assert default_stack(catalog, "AMD").name == "primus-megatron-1.0"
    assert default_stack(catalog, "Google") is None


def test_a_newer_user_reference_stack_becomes_the_default(tmp_path, write_profile) -> None:
    from mi400plan.profiles import Catalog
    from mi400plan.stacks import default_stack

    body = GOOD.replace('name = "s"', 'name = "mb-26.01"').replace('released = "2025-01-02"', 'released = "2026-01-15"')
    body = body.replace('vendors = ["NVIDIA"]', 'vendors = ["NVIDIA"]\nvendor_reference = true')
    write_profile(tmp_path, "stacks", "mb-26.01", body)
    assert default_stack(Catalog.default([tmp_path]), "NVIDIA").name == "mb-26.01"


def test_the_default_stack_leaves_the_profile_values(catalog) -> None:
    sku = _hw(catalog)
    assert sku.stack.name == "megatron-bridge-25.11" and sku.stack.overridden == ()
    assert sku.hw.attn_eff == pytest.approx(0.27)
    assert sku.hw.expert_host_s == pytest.approx(219 * US)
    assert sku.eff.stack == "megatron-bridge-25.11" and "default for NVIDIA" in sku.eff.stack_basis


def test_fa2_on_h100_divides_attention_by_the_fa3_speedup(catalog) -> None:
    # nominal 0.27 / 1.75 = 0.154286; pessimistic 0.22 / 2.0 = 0.11; optimistic 0.31 / 1.5 = 0.206667
    assert _hw(catalog, attention_kernel="fa2").hw.attn_eff == pytest.approx(0.27 / 1.75)
    assert _hw(catalog, case="pessimistic", attention_kernel="fa2").hw.attn_eff == pytest.approx(0.11)
    assert _hw(catalog, case="optimistic", attention_kernel="fa2").hw.attn_eff == pytest.approx(0.31 / 1.5)


def test_an_unmeasured_kernel_change_keeps_the_nominal_and_widens_the_range(catalog) -> None:
    # cudnn -> ck on H100: no benchmark; 0.27 kept, 0.22 x 0.75 = 0.165, 0.31 x 1.25 = 0.3875
    assert _hw(catalog, attention_kernel="ck").hw.attn_eff == pytest.approx(0.27)
    assert _hw(catalog, case="pessimistic", attention_kernel="ck").hw.attn_eff == pytest.approx(0.165)
    assert _hw(catalog, case="optimistic", attention_kernel="ck").hw.attn_eff == pytest.approx(0.3875)


def test_graph_scope_and_dispatcher_reach_the_hardware_not_the_host_constant(catalog) -> None:
    """The per-expert host time stays the profile's under any graph scope (219 us nominal, 306 us
    pessimistic); the scope and the dispatcher travel to the MoE terms (``moe_dispatch``), which drop the
    host term only where a full graph captures a capacity-padded MoE layer."""
    full = _hw(catalog, cuda_graphs="full")
    assert full.hw.expert_host_s == pytest.approx(219 * US)
    assert _hw(catalog, case="pessimistic", cuda_graphs="full").hw.expert_host_s == pytest.approx(306 * US)
    assert (full.hw.cuda_graphs, full.hw.moe_dispatcher) == ("full", "deepep")  # 25.11's dispatcher
    assert _hw(catalog, moe_dispatcher="alltoall").hw.moe_dispatcher == "alltoall"
    assert _hw(catalog).hw.cuda_graphs == "partial"


def test_the_stack_changes_the_priced_attention_time(catalog) -> None:
    """Flash attention time is FLOPs / (peak x efficiency x fill x keys / (keys + s_half)): FA2's is 1.75x the
    default's at the long-sequence rate, and at 8,192 keys FA2 (s_half 402) runs (8,192 + 402) / (8,192 + 387)
    as long again as cuDNN (s_half 387)."""
    from mi400plan.params import count_params
    from mi400plan.search import Workload, evaluate_one
    from mi400plan.specs.layout import train_recipe

    spec = catalog.get("models", "llama3.1-8b").spec
    wl = Workload(spec, count_params(spec), train_recipe("megatron"), 8192, 64)
    layout = dict(tp=1, pp=1, vpp=1, cp=1, ep=1, etp=1, zero=1, micro_batch=1, recompute=0, sp=0)
    base = evaluate_one(layout, wl, _hw(catalog).hw, 64)
    fa2 = evaluate_one(layout, wl, _hw(catalog, name="torchtitan").hw, 64)
    assert fa2["t_attention"] == pytest.approx(1.75 * (8192 + 402) / (8192 + 387) * base["t_attention"])
    assert fa2["t_compute"] == pytest.approx(base["t_compute"])  # GEMMs do not depend on the kernel
    assert fa2["step"] > base["step"]


def test_an_override_wins_over_the_named_stack(catalog) -> None:
    sku = _hw(catalog, name="torchtitan", attention_kernel="cudnn")
    assert sku.stack.name == "torchtitan" and sku.stack.settings["attention_kernel"] == "cudnn"
    assert sku.stack.overridden == ("attention_kernel",)
    assert sku.hw.attn_eff == pytest.approx(0.27)  # cuDNN is the default stack's generation: unchanged
    assert "attention kernel cudnn" in sku.stack.label()


def test_a_stack_for_another_vendor_and_overrides_without_a_stack_are_refused(catalog) -> None:
    with pytest.raises(UsageError, match="megatron-bridge-25.11 runs on NVIDIA"):
        _hw(catalog, sku="mi355x", name="megatron-bridge-25.11")
    with pytest.raises(UsageError, match="--cuda-graphs override a software stack"):
        _hw(catalog, sku="tpu7x", cuda_graphs="full")


GOOD = """name = "s"
display_name = "S"
framework = "F"
version = "1"
released = "2025-01-02"
release_source = ["R"]
vendors = ["NVIDIA"]

[sources]
R = { title = "release note", date = "2025-01-02" }

[settings]
attention_kernel = { value = "fa2", status = "unverified" }
moe_dispatcher = { value = "alltoall", status = "unverified" }
cuda_graphs = { value = "none", status = "unverified" }
fp8_recipe = { value = "delayed", status = "unverified" }
zero3_gathering = { value = "fsdp_unit", status = "unverified" }
"""


@pytest.mark.parametrize(
    ("old", "new", "line", "field"),
    [
        ('cuda_graphs = { value = "none"', 'cuda_graphs = { value = "sometimes"', 15, "settings.cuda_graphs.value"),
        ('fp8_recipe = { value = "delayed", status = "unverified" }', 'fp8_recipe = { value = "delayed" }', 16,
         "settings.fp8_recipe"),
        ('vendors = ["NVIDIA"]', 'vendors = ["NVIDIA"]\nvendor_refrence = true', 8, "vendor_refrence"),
    ],
)
def test_a_bad_stack_file_names_file_line_and_field(tmp_path, write_profile, old, new, line, field) -> None:
    from mi400plan.profiles import Catalog

    path = write_profile(tmp_path, "stacks", "s", GOOD.replace(old, new))
    with pytest.raises(ProfileError) as err:
        Catalog.default([tmp_path]).get("stacks", "s")
    assert err.value.path == str(path) and err.value.line == line and err.value.field == field


def test_the_good_file_loads(tmp_path, write_profile) -> None:
    from mi400plan.profiles import Catalog

    write_profile(tmp_path, "stacks", "s", GOOD)
    assert Catalog.default([tmp_path]).get("stacks", "s").spec.settings.values()["cuda_graphs"] == "none"


def test_sweep_json_and_fit_text_name_the_stack(cli) -> None:
    res = cli(["sweep", "llama3.1-8b", "--sku", "h100", "--sku", "mi355x", "--gpus", "64", "--no-ranges", "--json"])
    assert res.exit_code == 0, res.output
    eff = {e["sku"]: e for e in json.loads(res.output)["data"]["efficiencies"]}
    assert eff["h100"]["stack"] == "megatron-bridge-25.11" and eff["mi355x"]["stack"] == "primus-megatron-1.0"
    res = cli(["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "64", "--no-ranges", "--stack", "torchtitan",
               "--cuda-graphs", "full"])
    assert res.exit_code == 0, res.output
    assert "software stack torchtitan" in res.output and "cuda graphs full" in res.output
    res = cli(["fit", "llama3.1-8b", "--sku", "h100", "--gpus", "8"])
    assert res.exit_code == 0 and "software stack: megatron-bridge-25.11" in res.output


def test_a_bad_stack_flag_is_a_usage_error(cli) -> None:
    res = cli(["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "64", "--cuda-graphs", "sometimes"])
    assert res.exit_code == 2
    res = cli(["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "64", "--stack", "nosuch"])
    assert res.exit_code != 0 and "unknown software stack 'nosuch'" in res.output


def test_a_runs_stack_reaches_the_priced_hardware(catalog) -> None:
    """A calibrate run is priced on the stack profile its ``stack`` names (name or alias) with its single
    settings on top; a ``stack`` naming no profile is a label (``validate`` groups by it) and the run uses
    calibrate's --stack, else the vendor default. H100 attention: 0.27, or 0.27 / 1.75 on FA2."""
    from mi400plan.api.calibrate import _prepare
    from mi400plan.measurements import MeasuredRun, RunEntry

    def attn(stack: str | None = None, default: str | None = None, **kw: str) -> float:
        run = MeasuredRun(model="llama3.1-8b", sku="h100", seq_len=8192, global_batch=64, dp=8, step_time_s=10.0,
                          stack=stack, **kw)
        _, prepared = _prepare(catalog, RunEntry(run, "runs.toml", 1), {}, default)
        return _hw(catalog, name=prepared.stack.name, **prepared.stack.overrides).hw.attn_eff

    assert attn() == pytest.approx(0.27)
    assert attn("torchtitan") == pytest.approx(0.27 / 1.75)
    assert attn("Megatron-Core") == pytest.approx(0.27)  # a label: the vendor default
    assert attn("Megatron-Core", default="torchtitan") == pytest.approx(0.27 / 1.75)
    assert attn("megatron-bridge-25.11", default="torchtitan") == pytest.approx(0.27)  # the run's own wins
    assert attn(attention_kernel="fa2") == pytest.approx(0.27 / 1.75)
    assert attn("torchtitan", attention_kernel="cudnn") == pytest.approx(0.27)
