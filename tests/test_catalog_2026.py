"""The catalog at its November 2026 disclosures: the figures users plan with, checked by hand.

Each expected number is written out with its source; the test fails if a profile drifts from it.
"""

from __future__ import annotations

import json

import pytest

from mi400plan.errors import MissingValueError
from mi400plan.profiles import Catalog

_BUNDLED = Catalog.default([])
SKUS = _BUNDLED.names("accelerators")
GiB = 2**30


def acc(catalog, name):
    return catalog.get("accelerators", name).spec


# --- headline figures -----------------------------------------------------------------------------
def test_mi455x_at_its_2026_disclosures(catalog) -> None:
    """AMD MI455X product page (read 2026-08-06) and CDNA 5 / Helios blog (2026-08-04)."""
    g = acc(catalog, "mi455x")
    assert g.memory.bandwidth_bytes_per_s.nominal == 23.3e12 and not g.memory.hbm_bandwidth_tb_per_s.is_range
    assert 2.91 * 8.0 == pytest.approx(23.3, abs=0.03)  # "2.91x" MI355X's 8.0 TB/s
    assert g.hbm_bytes.nominal == 432 * GiB and not g.hbm_bytes.is_range  # the 288 GB low is gone
    c = g.compute
    # dense: BF16 5.0 PF, FP8 = FP6 = 20.1 PF = 4 x BF16, MXFP4 40.3 PF = 8 x BF16, FP32 315 TF
    assert c.bf16_dense_tflops.nominal == pytest.approx(5033.2) and c.bf16_sparse_tflops.nominal == pytest.approx(10066.3)
    assert c.fp8_dense_tflops.nominal == pytest.approx(4 * 5033.2, abs=0.1)
    assert c.fp6_dense_tflops.nominal == c.fp8_dense_tflops.nominal
    assert c.fp4_dense_tflops.nominal == pytest.approx(2 * 20_132.7, abs=0.2)
    assert not c.fp4_dense_tflops.is_range and c.fp4_dense_tflops.status == "disclosed"  # no 20 PF low
    assert c.fp32_dense_tflops.nominal == 315
    tdp = g.power.tdp_w
    assert tdp.status == "estimate" and (tdp.lo, tdp.hi) == (1500, 2500)
    assert g.architecture.startswith("CDNA 5")


def test_b300_usable_hbm_is_270_gib(catalog) -> None:
    """NVIDIA HGX B300 per GPU: "270 GB" usable of 288 physical (MLPerf system B300-SXM-270GB), 7.7 TB/s,
    up to 1,100 W. 270 GiB = 270 x 2^30 = 289,910,292,480 B."""
    g = acc(catalog, "b300")
    assert 270 * GiB == 289_910_292_480
    assert g.hbm_bytes.nominal == 289_910_292_480 and g.memory.capacity_basis == "usable"
    assert g.memory.capacity_bytes.nominal == 288 * GiB
    assert g.memory.bandwidth_bytes_per_s.nominal == 7.7e12 and g.power.tdp_w.nominal == 1100


def test_gb300_usable_279_and_gb200_hpc_figures(catalog) -> None:
    gb300 = acc(catalog, "gb300")
    assert gb300.hbm_bytes.nominal == 279 * GiB == 299_573_968_896
    gb200 = acc(catalog, "gb200")
    assert gb200.compute.fp64_matrix_dense_tflops.nominal == 40 and gb200.compute.fp32_dense_tflops.nominal == 80
    assert gb200.power.tdp_w.nominal == 1200 and gb200.power.tdp_w.status == "disclosed"
    assert not gb200.hbm_bytes.is_range  # 186 GiB; 192 is the physical stack capacity


def test_rubin_dense_fp4_and_its_compressed_figure(catalog) -> None:
    """Vera Rubin NVL72 per GPU: NVFP4 35 PF training (dense), 50 PF inference with adaptive
    compression (its own key), FP8 17.5 PF, BF16 4 PF, HBM4 up to 22 TB/s (NVIDIA) with about 20 TB/s
    reported for first shipments (TechPowerUp citing SemiAnalysis, 2026-03-03): a conflict, 20 to 22."""
    c = acc(catalog, "rubin").compute
    assert c.peak_flops("fp4").nominal == 35_000e12 and not c.fp4_dense_tflops.is_range
    assert c.fp4_compressed_tflops.nominal == 50_000 and c.fp4_compressed_tflops.basis == "compressed"
    assert c.peak_flops("fp8").nominal == 17_500e12 and c.peak_flops("bf16").nominal == 4_000e12
    g = acc(catalog, "rubin")
    bw = g.memory.bandwidth_bytes_per_s
    assert (bw.nominal, bw.lo, bw.hi, bw.status) == (22e12, 20e12, 22e12, "conflict")


def test_other_audited_values(catalog) -> None:
    mi430x = acc(catalog, "mi430x")
    # AMD: "native FP64 ... 288 TFLOPS" names neither vector nor matrix, so neither key holds it
    assert not mi430x.compute.fp64_matrix_dense_tflops.known and not mi430x.compute.fp64_vector_dense_tflops.known
    assert "288 TF" in " ".join(mi430x.notes) and mi430x.year == 2027
    for name in ("mi355x", "mi350x"):  # CDNA 4 has no 2:4-sparse MX instruction
        c = acc(catalog, name).compute
        assert not c.fp4_sparse_tflops.known and not c.fp6_sparse_tflops.known
    assert acc(catalog, "b200").memory.bandwidth_bytes_per_s.nominal == 7.7e12
    assert acc(catalog, "tpu7x").memory.bandwidth_bytes_per_s.nominal == 7.37e12
    dcn = catalog.get("fabrics", "tpu-dcn").spec
    assert dcn.bw_per_gpu_per_dir_gb_per_s.nominal == 4 * 200 / 8 / 8  # 4 x 200 Gb/s per 8-chip host, in GB/s
    helios = catalog.get("fabrics", "helios-ualoe72").spec.switch
    assert (helios.switch_trays.nominal, helios.asics.nominal) == (6, 12)
    vr = catalog.get("racks", "vr200-nvl72").spec
    assert vr.switch_asics == vr.switch_asics_in_trays == 9 * 4
    assert (vr.power.shelves, vr.power.psus_per_shelf, vr.power.psu_rating_w.nominal) == (4, 6, 18_300)


def test_remaining_conflicts_say_who_disagrees() -> None:
    from mi400plan.api.profiles import _explicit_estimates

    for name in SKUS:
        for est in _explicit_estimates(_BUNDLED.get("accelerators", name).spec):
            if est.status == "conflict":
                assert est.note and est.source, (name, est)


# --- rack identities --------------------------------------------------------------------------------
def test_rack_totals_are_recomputed_from_the_per_gpu_figures(catalog) -> None:
    """Helios: 72 x 20,132.7 TF = 1,449.6 PF ~ AMD's 1.4 EF (two significant figures: within 50 PF);
    72 x 40,265.3 TF = 2,899.1 PF ~ 2.9 EF. Vera Rubin: 72 x 22 TB/s = 1,584 ~ 1,580 TB/s; 72 x 17.5 PF =
    1,260 PF. GB200: 72 x 8 TB/s = 576 TB/s."""
    from mi400plan.specs.rack import published_total_errors

    assert abs(72 * 20_132.7 / 1e3 - 1400) <= 50 and abs(72 * 40_265.3 / 1e3 - 2900) <= 50
    assert abs(72 * 22 - 1580) <= 5 and 72 * 17.5 == 1260 and 72 * 8 == 576
    for rack in ("helios", "helios-s000nics", "vr200-nvl72", "gb200-nvl72", "gb300-nvl72"):
        spec = catalog.get("racks", rack).spec
        assert spec.published is not None
        assert published_total_errors(spec, acc(catalog, spec.sku)) == []


def test_a_typed_total_that_no_longer_holds_is_reported(tmp_path, write_profile, cli) -> None:
    """The catalog's old Helios identity, 72 x 19.6 TB/s = 1.41 PB/s, against MI455X's 23.3 TB/s:
    72 x 23.3 = 1,677.6 TB/s, 277.6 TB/s off (the rule allows 50)."""
    from mi400plan.profiles import bundled_root

    text = (bundled_root() / "racks" / "helios.toml").read_text()
    text = text.replace("[published]\n", '[published]\nhbm_bandwidth_tb_per_s = { nominal = 1400, source = ["A9"] }\n', 1)
    path = write_profile(tmp_path, "racks", "helios", text)
    r = cli(["profiles", "validate", str(path), "--json"])
    assert r.exit_code == 3, r.output
    msgs = [i["message"] for row in json.loads(r.stdout)["data"]["rows"] for i in row["issues"]]
    assert any("published.hbm_bandwidth_tb_per_s = 1,400" in m and "72 x 23.3 = 1,677.6" in m for m in msgs), msgs


# --- every SKU plans at every precision it discloses ------------------------------------------------
def _disclosed_precisions(name: str) -> list[str]:
    c = _BUNDLED.get("accelerators", name).spec.compute
    out = ["bf16"]
    out += [p for p in ("fp8", "fp4") if c.peak_flops(p).known]
    return out


CASES = [(n, p) for n in SKUS for p in _disclosed_precisions(n)]


@pytest.mark.parametrize(("sku", "precision"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_fit_and_sweep_never_stop_on_a_disclosed_value(catalog, sku, precision) -> None:
    """fit and sweep run on every SKU at BF16 and every disclosed precision; when one stops on a
    missing value, that value really is "n/d" in the profile (the message names it)."""
    from mi400plan.api.fit import fit
    from mi400plan.api.sweep import SweepReport, sweep
    from mi400plan.specs.layout import TrainOptions

    spec = acc(catalog, sku)
    fit_prec = precision if precision in ("bf16", "fp8") else "fp8"
    row = fit(catalog, "llama3.1-8b", [sku], "train", precision=fit_prec).rows[0]
    assert (row.verdict == "unknown") == (not spec.hbm_bytes.known)
    if precision == "fp4":
        return  # training sweeps run at bf16 / fp8; the FP4 peak is read by serve
    try:
        res = sweep(catalog, "llama3.1-8b", [sku], gpus="8", options=TrainOptions(precision=precision),
                    report=SweepReport(ranges=False, top=3))
    except MissingValueError as exc:
        assert "not disclosed" in exc.message
        undisclosed = {"bf16": spec.compute.bf16_dense_tflops, "fp8": spec.compute.fp8_dense_tflops}[precision]
        assert not undisclosed.known or not spec.hbm_bytes.known, exc.message
        return
    assert res.rows, f"{sku} {precision}: no layout"


def test_sweep_llama3_70b_on_1024_mi455x_ranks_layouts(cli) -> None:
    r = cli(["sweep", "llama3-70b", "--sku", "mi455x", "--gpus", "1024", "--json", "--no-ranges"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["data"]["rows"]
    assert len(rows) >= 3
    times = [row["step_time_s"] for row in rows]
    assert times == sorted(times) and all(t > 0 for t in times)
    assert all(row["gpus"] == 1024 for row in rows)


# --- profiles list --specs ---------------------------------------------------------------------------
def test_spec_sheet_fits_100_columns_and_states_its_units(cli, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    r = cli(["profiles", "list", "--specs"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(ln) <= 100 for ln in lines)
    row = next(ln for ln in lines if ln.split()[:1] == ["mi455x"])
    # 432 GiB = 463.9 GB; 23.30 TB/s; 5.03 / 20.13 / 40.27 PF; 1,750 W (estimate); 72 GPUs; 1,800 GB/s
    assert row.split() == ["mi455x", "463.9", "23.30", "5.03", "20.13", "40.27", "1,750", "~", "72", "1,800"]
    h100 = next(ln for ln in lines if ln.split()[:1] == ["h100"])
    assert h100.split()[1:3] == ["85.5", "u"]  # 81,559 MiB usable = 85.52 GB
    data = json.loads(cli(["profiles", "list", "--specs", "--json"]).stdout)["data"]
    by = {s["name"]: s for s in data["specs"]}
    assert set(by) == set(SKUS)
    assert by["rubin"]["fp4_dense_flops"] == 35_000e12 and by["rubin"]["tdp_w"] is None
    assert by["b300"]["hbm_bytes"] == 270 * GiB and by["b300"]["hbm_basis"] == "usable"
    assert by["tpu7x"]["scale_up_domain"] == 9216 and "hbm_bytes" in by["tpu7x"]["uncertain"]


def test_spec_sheet_rejects_another_kind(cli) -> None:
    r = cli(["profiles", "list", "--specs", "--kind", "racks"])
    assert r.exit_code == 2 and "accelerators only" in r.output
