"""Low-precision training recipes (``mi400plan.lowp``): bytes, casts, GEMM peaks, refusals, CLI.

Every expected number below is worked out by hand from the formats' definitions (OCP MX v1.0: an 8-bit
E8M0 scale per 32 elements; NVFP4: an 8-bit E4M3 scale per 16) and the step-time formulas, never read
back from the code.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mi400plan import gemm, lowp
from mi400plan.specs.layout import train_recipe, with_bf16_gemm_share

DATA = Path(__file__).parent / "data" / "train_calibration_mxfp8.csv"


def test_weight_copy_bytes_of_a_stated_matrix() -> None:
    # An 8192 x 8192 weight: NVFP4 = 4 bits + 8 bits / 16 = 4.5 bits an element -> 8192^2 x 4.5 / 8 B.
    n = 8192 * 8192
    assert n * lowp.NVFP4_BYTES == 37_748_736
    # MXFP8 = 8 + 8 / 32 = 8.25 bits -> 69,206,016 B; MXFP4 = 4.25 bits -> 35,651,584 B.
    assert n * lowp.MXFP8_BYTES == 69_206_016
    assert n * lowp.MXFP4_BYTES == 35_651_584


def test_recipe_memory_per_block_weight() -> None:
    # NVFP4 with no BF16-kept layers: bf16 working copy 2 B + row-wise and column-wise copies 2 x 0.5625.
    r = with_bf16_gemm_share(train_recipe("megatron", precision="nvfp4"), 0.0)
    assert r.gemm_weight_bytes == pytest.approx(3.125)
    assert r.gemm_input_bytes == pytest.approx(0.5625)
    # The default keeps 15 % of the layers BF16 (no narrow copies there): 2 + 1.125 x 0.85 = 2.95625 B,
    # and their saved GEMM inputs are 16-bit: 0.85 x 0.5625 + 0.15 x 2 = 0.778125 B.
    d = train_recipe("megatron", precision="nvfp4")
    assert d.gemm_weight_bytes == pytest.approx(2.95625)
    assert d.gemm_input_bytes == pytest.approx(0.778125)
    # MXFP8: 2 + 2 x 1.03125 = 4.0625 B; the optimizer side is the BF16 recipe's (fp32 master + Adam: 12 B).
    m = train_recipe("megatron", precision="mxfp8")
    assert m.gemm_weight_bytes == pytest.approx(4.0625)
    assert m.optimizer_state_bytes(4096) == 12.0 and m.grad_bytes == 4.0
    # MXFP8 with --fp8-params (Megatron-Bridge's MXFP8 preset gathers the MXFP8 tensors): 2 x 1.03125 B.
    assert train_recipe("megatron", precision="mxfp8", fp8_params=True).gemm_weight_bytes == pytest.approx(2.0625)
    assert train_recipe("megatron", precision="fp4").gemm_format == "mxfp4"  # fp4 names MXFP4 in training


def test_cast_bytes_per_element() -> None:
    # MXFP8: read BF16 (2) once, write both scaled copies: 2 + 2 x 1.03125 = 4.0625.
    assert lowp.RECIPES["mxfp8"].cast_bytes == pytest.approx(4.0625)
    # NVFP4: amax pass 2, row-wise cast 2 + 0.5625, Hadamard-and-cast column-wise 2 + 0.5625 = 7.125.
    assert lowp.RECIPES["nvfp4"].cast_bytes == pytest.approx(7.125)
    # MXFP4: no tensor scale, so no amax pass: 2 x (2 + 0.53125) = 5.0625.
    assert lowp.RECIPES["mxfp4"].cast_bytes == pytest.approx(5.0625)
    assert lowp.RECIPES["fp8"].cast_bytes == gemm.FP8_CAST_BYTES_TRAIN == 6.0


def test_linear_layer_time_ratio_by_hand() -> None:
    """One 16384 x 8192 x 8192 linear layer, forward + backward, at FP8 and at NVFP4 on a part with an FP8 peak
    of 4.5 PF, an FP4 peak of 9 PF, ceiling 0.5, 6 TB/s achievable HBM, no wave model and no overhead.

    GEMMs: 3 x 2 x 16384 x 8192 x 8192 = 6.597e12 FLOP. FP8: / (4.5e15 x 0.5) = 2.9320 ms; casts
    (16384 x 8192 + 16384 x 8192 elements) x 6 B / 6e12 = 0.26844 ms: 3.2005 ms. NVFP4: 1.4660 ms +
    2.6844e8 x 7.125 / 6e12 = 0.31877 ms: 1.7848 ms. Ratio 0.5577."""
    m, n, k = 16384, 8192, 8192
    fp8 = gemm.GemmSku(4.5e15, 0.5, 6e12, 0, 0.0, 1.0)
    fp4 = gemm.GemmSku(9e15, 0.5, 6e12, 0, 0.0, lowp.NVFP4_BYTES, lowp.RECIPES["nvfp4"].cast_bytes)
    t8 = sum(gemm.train_gemm_seconds(m, n, k, fp8))
    t4 = sum(gemm.train_gemm_seconds(m, n, k, fp4))
    assert t8 == pytest.approx(3.2005e-3, rel=1e-4)
    assert t4 == pytest.approx(1.7848e-3, rel=1e-4)
    assert t4 / t8 == pytest.approx(0.5577, rel=1e-3)


def test_hardware_peaks_and_ceilings(catalog) -> None:  # noqa: ANN001
    from mi400plan.hardware import build_sku

    # GB200: FP8 5,000 TFLOP/s, FP4 10,000; matmul_fp8 0.512 (profile); MXFP8 and FP4 at 0.512 x 0.925.
    fp8 = build_sku(catalog, "gb200", "fp8").hw
    mx = build_sku(catalog, "gb200", "mxfp8").hw
    nv = build_sku(catalog, "gb200", "nvfp4").hw
    assert fp8.peak_flops == mx.peak_flops == 5000e12 and nv.peak_flops == 10000e12
    assert mx.matmul_eff == pytest.approx(0.512 * 0.925) and nv.matmul_eff == pytest.approx(0.512 * 0.925)
    assert (mx.operand_bytes, mx.cast_bytes) == (pytest.approx(1.03125), pytest.approx(4.0625))
    # The LM head (and the BF16-kept layers) price at the BF16 peak, 2,500 TFLOP/s.
    assert nv.head_gemm_sku().peak_flops == 2500e12 and nv.head_gemm_sku().operand_bytes == 2.0
    # MI355X runs MXFP4 at its FP4 peak, 10,066.3 TFLOP/s.
    assert build_sku(catalog, "mi355x", "mxfp4").hw.peak_flops == pytest.approx(10066.3e12)


@pytest.mark.parametrize("sku,precision,text", [
    ("mi355x", "nvfp4", "does not run NVFP4"),
    ("h100", "nvfp4", "no FP4 tensor math"),
    ("mi300x", "mxfp4", "no FP4 tensor math"),
    ("h100", "mxfp8", "no block-scaled (MX) tensor math"),
    ("mi300x", "mxfp8", "no block-scaled (MX) tensor math"),
])
def test_refusals_exit_2_naming_the_flag(cli, sku: str, precision: str, text: str) -> None:  # noqa: ANN001
    for args in (["sweep", "llama3.1-8b", "--sku", sku, "--gpus", "8", "--no-ranges"],
                 ["fit", "llama3.1-8b", "--sku", sku, "--tp", "8"],
                 ["budget", "--sku", sku, "--gpus", "8", "--days", "10d"]):
        r = cli([*args, "--precision", precision])
        assert r.exit_code == 2 and "--precision" in r.output and text in r.output, r.output
        assert "Traceback" not in r.output


def test_runs_where_the_math_exists(cli) -> None:  # noqa: ANN001
    for sku, precision in (("gb200", "nvfp4"), ("gb300", "mxfp4"), ("mi355x", "mxfp4"), ("mi355x", "mxfp8"),
                           ("b200", "mxfp8"), ("h100", "fp8")):
        r = cli(["fit", "llama3.1-8b", "--sku", sku, "--precision", precision, "--tp", "8", "--json"])
        assert r.exit_code == 0, r.output


def test_several_skus_leave_out_those_without_the_math(cli) -> None:  # noqa: ANN001
    r = cli(["fit", "llama3.1-8b", "--sku", "gb200", "--sku", "mi355x", "--precision", "nvfp4", "--tp", "8", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)["data"]
    assert [row["sku"] for row in data["rows"]] == ["gb200"]
    assert any("left out mi355x" in w for w in data["warnings"])
    r = cli(["sweep", "llama3.1-8b", "--sku", "gb200,h100", "--gpus", "8", "--no-ranges", "--precision", "nvfp4"])
    assert r.exit_code == 0 and "h100 has no FP4 tensor math" in " ".join(r.output.split())


def test_step_time_orders_and_memory(cli) -> None:  # noqa: ANN001
    """Same pinned layout on GB200: NVFP4 steps faster than MXFP8, MXFP8 slower than per-tensor FP8 (its
    GEMMs at 0.925 of the FP8 ceiling); the FP4 weight copies take less memory than the FP8 ones."""
    base = ["sweep", "llama3.1-8b", "--sku", "gb200", "--gpus", "8", "--no-ranges", "--tp", "1", "--pp", "1",
            "--micro-batch", "2", "--zero", "1", "--global-batch", "128", "--json"]
    got = {}
    for p in ("fp8", "mxfp8", "nvfp4"):
        r = cli([*base, "--precision", p])
        row = json.loads(r.stdout)["data"]["rows"][0]
        got[p] = (row["step_time_s"], row["memory_bytes"]["total"])
    assert got["nvfp4"][0] < got["fp8"][0] < got["mxfp8"][0]
    assert got["nvfp4"][1] < got["fp8"][1]


def test_bf16_gemm_share_flag(cli) -> None:  # noqa: ANN001
    r = cli(["fit", "llama3.1-8b", "--sku", "gb200", "--tp", "8", "--bf16-gemm-share", "0.5"])
    assert r.exit_code == 2 and "--bf16-gemm-share" in r.output and "--precision" in r.output
    r = cli(["fit", "llama3.1-8b", "--sku", "gb200", "--tp", "8", "--precision", "nvfp4", "--bf16-gemm-share", "2"])
    assert r.exit_code == 2 and "--bf16-gemm-share" in r.output and "Traceback" not in r.output
    out = cli(["fit", "llama3.1-8b", "--sku", "gb200", "--tp", "8", "--precision", "nvfp4"], env={"COLUMNS": "200"})
    assert "15% of the block linear layers kept BF16 (--bf16-gemm-share)" in out.stdout


def test_calibration_pairs_come_only_from_the_allowed_releases() -> None:
    """The MXFP8 factor is fitted on Megatron-Bridge 25.09 / 25.11 only, >= 3 points (7 pairs), each pair
    one layout run both ways; the measured ratios are the published figures (e.g. GB300 Llama 3 8B,
    25.11: 36,108 / 37,556 = 0.9614)."""
    with DATA.open() as f:
        rows = list(csv.DictReader(f))
    pairs = list(zip(rows[::2], rows[1::2]))
    assert len(pairs) == 7
    for a, b in pairs:
        assert (a["precision"], b["precision"]) == ("fp8", "mxfp8")
        assert a["source_date"] in ("2025-09", "2025-11") and a["source_date"] == b["source_date"]
        same = ("sku", "model", "gpus", "seq", "gbs", "mbs", "tp", "pp", "vp", "cp", "ep", "fsdp")
        assert all(a[k] == b[k] for k in same)
    gb300 = next(b for a, b in pairs if a["id"].startswith("nemo2511-gb300"))
    assert float(gb300["tokens_per_s_per_gpu"]) / 37556 == pytest.approx(0.9614, abs=1e-4)
    lo, nom, hi = lowp.MXFP8_OVER_FP8.triple("MXFP8")
    assert lo < nom < hi


def test_fp8_mx_validation_rows_are_priced_as_mxfp8() -> None:
    from mi400plan.validate import bundled_text, read_rows

    rows = {r["id"]: r for r in read_rows(bundled_text())}
    # Megatron-Bridge 25.11 lists these as FP8-MX (DeepSeek-V3 on B200/GB200/GB300, Qwen3 235B on B200).
    for rid in ("nemo2511-b200-deepseekv3", "nemo2511-gb200-deepseekv3-fp8", "nemo2511-gb300-deepseekv3-fp8",
                "nemo2511-b200-qwen3-235b"):
        assert rows[rid]["precision"] == "mxfp8"
    assert rows["nemo2602-gb300-llama3-70b-nvfp4"]["tokens_per_s_per_gpu"] == "6798"


def test_mxfp8_factor_reproduces_the_calibration_pairs(catalog) -> None:  # noqa: ANN001
    """Each pair priced both ways at its published layout: the predicted MXFP8 / FP8-CS throughput ratio is
    within 3 % of the published one on every pair (calibration target: <= 3 % mean)."""
    from mi400plan.hardware import build_sku
    from mi400plan.search import iter_rows, search
    from mi400plan.validate import row_options, row_workload

    def step(r: dict[str, str]) -> float:
        wl, hw = row_workload(catalog, r), build_sku(catalog, r["sku"], r["precision"]).hw
        for split in (False, True):
            res = search(wl, hw, int(r["gpus"]), row_options(r, split), top_k=1)
            if res.top["tp"].size:
                return float(next(iter_rows(res.top))["step"])
        raise AssertionError(r["id"])

    with DATA.open() as f:
        rows = list(csv.DictReader(f))
    errs = []
    for a, b in zip(rows[::2], rows[1::2]):
        measured = float(b["tokens_per_s_per_gpu"]) / float(a["tokens_per_s_per_gpu"])
        errs.append(abs(step(a) / step(b) / measured - 1.0))
    assert max(errs) < 0.03 and sum(errs) / len(errs) < 0.015, errs
