"""``--precision fp8`` under a stack whose ``fp8_recipe`` is MXFP8 prices as MXFP8 (``stack_precision``).

Hand-derived figures: B200's profile ceiling ``matmul_fp8`` nominal is 0.512 (profiles/accelerators/b200.toml),
and MXFP8 runs at 0.925 of per-tensor FP8 (the Megatron-Bridge 25.09 / 25.11 FP8-CS vs FP8-MX fit), so an
MXFP8-priced B200 runs its block GEMMs at 0.512 x 0.925 = 0.4736 of the FP8 peak.
"""

from __future__ import annotations

import json

import pytest

STACK = """name = "{name}"
display_name = "S"
framework = "F"
version = "1"
released = "2025-01-02"
release_source = ["R"]
vendors = ["NVIDIA", "AMD"]

[sources]
R = {{ title = "release note", date = "2025-01-02" }}

[settings]
attention_kernel = {{ value = "cudnn", status = "unverified" }}
moe_dispatcher = {{ value = "alltoall", status = "unverified" }}
cuda_graphs = {{ value = "none", status = "unverified" }}
fp8_recipe = {{ value = "{recipe}", status = "unverified" }}
zero3_gathering = {{ value = "fsdp_unit", status = "unverified" }}
"""


@pytest.fixture
def stacks(tmp_path, write_profile):  # noqa: ANN001, ANN201
    for name, recipe in (("mx", "mxfp8"), ("cs", "current"), ("bw", "blockwise")):
        write_profile(tmp_path, "stacks", name, STACK.format(name=name, recipe=recipe))
    return tmp_path


def _sweep(cli, root, *extra: str) -> dict:  # noqa: ANN001
    res = cli(["sweep", "llama3.1-8b", "--gpus", "8", "--no-ranges", "--top", "1", "--profiles", str(root),
               "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)["data"]


def test_fp8_under_an_mxfp8_stack_prices_as_mxfp8(cli, stacks) -> None:
    mx = _sweep(cli, stacks, "--sku", "b200", "--stack", "mx", "--precision", "fp8")
    assert mx["efficiencies"][0]["matmul"] == pytest.approx(0.512 * 0.925)
    assert any("fp8 priced as mxfp8, the stack's recipe" in w for w in mx["warnings"])
    asked = _sweep(cli, stacks, "--sku", "b200", "--stack", "mx", "--precision", "mxfp8")
    assert mx["rows"][0]["step_time_s"] == asked["rows"][0]["step_time_s"]
    # per-tensor recipes (current scaling) and blockwise FP8 keep the per-tensor ceiling, 0.512
    for name in ("cs", "bw"):
        per_tensor = _sweep(cli, stacks, "--sku", "b200", "--stack", name, "--precision", "fp8")
        assert per_tensor["efficiencies"][0]["matmul"] == pytest.approx(0.512)
        assert not any("mxfp8" in w for w in per_tensor["warnings"])
        assert per_tensor["rows"][0]["step_time_s"] < mx["rows"][0]["step_time_s"]


def test_fit_says_fp8_is_priced_as_the_stacks_mxfp8(cli, stacks) -> None:
    res = cli(["fit", "llama3.1-8b", "--sku", "b200", "--profiles", str(stacks), "--stack", "mx",
               "--precision", "fp8"])
    assert res.exit_code == 0, res.output
    assert "fp8 priced as mxfp8, the stack's recipe (mx: fp8_recipe mxfp8)" in res.output
    assert "MXFP8 weights" in res.output  # the memory recipe is MXFP8's too (1.03125 B a cast copy)


def test_a_sku_without_mx_math_keeps_every_sku_per_tensor_and_says_why(cli, stacks) -> None:
    both = _sweep(cli, stacks, "--sku", "b200", "--sku", "h100", "--stack", "mx", "--precision", "fp8")
    eff = {e["sku"]: e["matmul"] for e in both["efficiencies"]}
    assert eff["b200"] == pytest.approx(0.512)
    note = [w for w in both["warnings"] if "per-tensor FP8 on every SKU" in w]
    assert note and "h100" in note[0] and "--precision mxfp8" in note[0]


def test_bundled_default_stacks_leave_fp8_per_tensor(catalog) -> None:
    from mi400plan.stack_precision import fp8_as

    accs = [catalog.get("accelerators", s).spec for s in ("b200", "gb200", "h100", "mi355x", "mi300x")]
    assert fp8_as(catalog, accs, "fp8", None) == ("fp8", None)
    assert fp8_as(catalog, accs, "bf16", None) == ("bf16", None)


def test_fit_largest_prices_the_stacks_mxfp8_too(cli, stacks) -> None:
    res = cli(["fit", "--largest", "--sku", "b200", "--gpus", "8", "--profiles", str(stacks), "--stack", "mx",
               "--precision", "fp8", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)["data"]
    assert data["precision"] == "mxfp8"
    assert any("fp8 priced as mxfp8, the stack's recipe" in w for w in data["warnings"])
