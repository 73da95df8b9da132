"""Accelerators, fabrics and racks users compare in 2026: Trainium2/3, TPU v5p, TPU 8t, Gaudi 3,
MI350P, H800, HGX Rubin NVL8, and the HGX 8-GPU server racks.

Each profile validates and cites dated sources; the key figures follow from the vendor's disclosed
numbers by the arithmetic written here (per-direction conversions, peak identities); ``comm`` and
``sweep`` run on every one of them.
"""

from __future__ import annotations

import json

import pytest

from mi400plan.profiles import Catalog

CAT = Catalog.default([])

ACCELERATORS = ["trainium2", "trainium3", "tpu-v5p", "tpu8t", "gaudi3", "mi350p", "h800", "rubin-hgx", "tpu8i", "maia200"]
FABRICS = [
    "neuronlink-v3-trn2", "neuronlink-v4-trn3", "efa-trn2", "ici-v5p", "tpu-dcn-v5p", "ici-tpu8t",
    "virgo-tpu8t", "gaudi3-roce-hls8", "gaudi3-roce-scaleout", "nvlink4-h800-hgx8", "nvlink6-hgx8",
    "pcie5-x16-8card", "ici-tpu8i", "maia200-ethernet", "maia200-scaleout", "pcie-x16-crescent-island",
]
RACKS = ["hgx-h100", "hgx-b200", "hgx-b300"]
NEW = [("accelerators", n) for n in ACCELERATORS] + [("fabrics", n) for n in FABRICS] + [("racks", n) for n in RACKS]


def acc(name: str):
    return CAT.get("accelerators", name).spec


def fab(name: str):
    return CAT.get("fabrics", name).spec


# --- every new profile validates, with dated sources ----------------------------------------------
@pytest.mark.parametrize(("kind", "name"), NEW, ids=[f"{k}/{n}" for k, n in NEW])
def test_new_profile_validates_with_dated_sources(cli, kind, name) -> None:
    loaded = CAT.get(kind, name)
    r = cli(["profiles", "validate", str(loaded.path), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["data"]["failed"] == 0
    spec = loaded.spec
    assert spec.sources and spec.undated_sources() == []
    if kind in ("fabrics", "racks"):
        assert spec.consistency_errors() == []


@pytest.mark.parametrize("name", ACCELERATORS)
def test_new_accelerator_fabrics_exist(name) -> None:
    ic = acc(name).interconnect
    assert fab(ic.scale_up_fabric).tier == "scale_up"
    assert fab(ic.scale_out_fabric).tier == "scale_out"


# --- per-direction bandwidth from the vendor's stated figure ------------------------------------
GB = 1e9
PER_DIR = {
    # H800 datasheet: NVLink 400 GB/s, bidirectional -> / 2
    "nvlink4-h800-hgx8": 400 * GB / 2,
    # Rubin NVLink 6: 3.6 TB/s per GPU, bidirectional -> / 2
    "nvlink6-hgx8": 3.6e12 / 2,
    # Gaudi 3: 21 of 24 x 200 GbE ports in the 8-card all-to-all; bits -> bytes
    "gaudi3-roce-hls8": 21 * 200e9 / 8,
    "gaudi3-roce-scaleout": 3 * 200e9 / 8,
    # TPU v5p: 4,800 Gbps per chip, one direction (v5e: 1,600 Gbps = 400 GBps bidir / 2 x 8)
    "ici-v5p": 4800e9 / 8,
    "tpu-dcn-v5p": 50e9 / 8,
    # TPU 8t: double TPU7x's 1.2 TB/s bidirectional, per direction
    "ici-tpu8t": 2 * 1.2e12 / 2,
    # AWS: 1.28 / 2.56 TB/s per chip, direction unstated, read as bidirectional
    "neuronlink-v3-trn2": 1.28e12 / 2,
    "neuronlink-v4-trn3": 2.56e12 / 2,
    # trn2.48xlarge: 3.2 Tb/s EFAv3 shared by 16 chips
    "efa-trn2": 3.2e12 / 16 / 8,
    # PCIe 5.0 x16: 16 lanes x 32 GT/s, bits -> bytes (AMD: 128 GB/s bidirectional)
    "pcie5-x16-8card": 16 * 32e9 / 8,
    # TPU 8i: 19.2 Tb/s bidirectional per chip (Cloud Next 2026), bits -> bytes, / 2
    "ici-tpu8i": 19.2e12 / 8 / 2,
    # Maia 200: 2.8 TB/s bidirectional scale-up per chip, / 2
    "maia200-ethernet": 2.8e12 / 2,
    # Crescent Island: PCIe 5.0 x16 assumed (no link disclosed), as for the MI350P card
    "pcie-x16-crescent-island": 16 * 32e9 / 8,
}


@pytest.mark.parametrize("name", sorted(PER_DIR))
def test_per_direction_bandwidth_follows_from_the_stated_figure(name) -> None:
    assert fab(name).bw_per_dir_bytes_per_s.nominal == pytest.approx(PER_DIR[name], rel=1e-9)


def test_unstated_direction_keeps_the_per_direction_reading_as_the_high_end() -> None:
    # If AWS meant 1.28 / 2.56 TB/s per direction, that is the optimistic end of the range.
    assert fab("neuronlink-v3-trn2").bw_per_gpu_per_dir_gb_per_s.hi == 1280
    assert fab("neuronlink-v4-trn3").bw_per_gpu_per_dir_gb_per_s.hi == 2560


# --- peak identities --------------------------------------------------------------------------------
def test_mi350p_is_half_an_mi350x() -> None:
    p, x = acc("mi350p"), acc("mi350x")
    # 128 CU x 2.2 GHz x 4,096 FLOP/clk/CU (CDNA 4 dense BF16) = 1,153.4 TFLOP/s; AMD rounds to 1.15 PF
    assert 128 * 2.2e9 * 4096 / 1e12 == pytest.approx(p.compute.bf16_dense_tflops.nominal, rel=0.005)
    assert p.compute.bf16_dense_tflops.nominal == pytest.approx(x.compute.bf16_dense_tflops.nominal / 2, rel=0.005)
    assert p.compute.fp8_dense_tflops.nominal == 2 * p.compute.bf16_dense_tflops.nominal
    assert p.compute.fp4_dense_tflops.nominal == 4 * p.compute.bf16_dense_tflops.nominal
    assert not p.compute.fp4_sparse_tflops.known  # no 2:4 MX sparsity on CDNA 4
    assert p.memory.capacity_bytes.nominal == 144 * 2**30
    # 8 Gb/s x 4,096 bits / 8 = 4.096 TB/s, quoted 4 TB/s
    assert 8e9 * 4096 / 8 / 1e12 == pytest.approx(p.memory.hbm_bandwidth_tb_per_s.nominal, rel=0.025)


def test_trainium_peaks() -> None:
    t3 = acc("trainium3").compute
    assert 8 * 315 == pytest.approx(t3.fp8_dense_tflops.nominal, rel=0.002)  # 8 NeuronCore-v4 x 315
    t2 = acc("trainium2").compute
    assert t2.fp8_dense_tflops.nominal == pytest.approx(2 * t2.bf16_dense_tflops.nominal, rel=0.03)
    # AWS's one sparse figure (2,563) is above 2 x BF16 dense (1,334): it cannot be a BF16 2:4 rate
    assert 2563 > 2 * t2.bf16_dense_tflops.nominal and not t2.bf16_sparse_tflops.known
    assert acc("trainium2").memory.capacity_bytes.nominal == 96 * 2**30


def test_gaudi3_shipped_versus_announced() -> None:
    bf16 = acc("gaudi3").compute.bf16_dense_tflops
    # 1,835 TFLOP/s at the 1.75 GHz specification clock; shipping MMEs run at 1.6 GHz
    assert bf16.nominal == pytest.approx(1835 * 1600 / 1750, abs=0.5)
    assert bf16.hi == 1835 and bf16.status == "conflict"
    assert acc("gaudi3").compute.fp8_dense_tflops.nominal == bf16.nominal  # FP8 at the BF16 rate


def test_tpu8t_pod_roll_ups() -> None:
    t = acc("tpu8t")
    pod = fab("ici-tpu8t").domain_size.nominal
    assert pod * t.compute.fp4_dense_tflops.nominal * 1e12 == pytest.approx(121e18, rel=0.005)  # 121 EF FP4
    assert pod * 216e9 == pytest.approx(2.07e15, rel=0.005)  # "two petabytes" of HBM
    assert t.compute.fp8_dense_tflops.status == "estimate" and t.compute.fp8_dense_tflops.hi == 12600


def test_h800_is_an_h100_with_cut_nvlink_and_fp64() -> None:
    h8, h1 = acc("h800"), acc("h100")
    for key in ("bf16_dense_tflops", "fp8_dense_tflops", "fp8_sparse_tflops"):
        assert getattr(h8.compute, key).nominal == getattr(h1.compute, key).nominal
    assert h8.compute.fp64_matrix_dense_tflops.nominal == 1
    assert fab("nvlink4-h800-hgx8").bw_per_gpu_bidir_gb_per_s.nominal == 400
    assert fab(h1.interconnect.scale_up_fabric).bw_per_gpu_bidir_gb_per_s.nominal == 900


def test_rubin_hgx_carries_the_rubin_gpu_figures() -> None:
    hgx, nvl = acc("rubin-hgx"), acc("rubin")
    assert hgx.memory == nvl.memory and hgx.compute == nvl.compute, (
        "rubin-hgx is the rubin GPU on an 8-GPU board: copy [memory] and [compute] from rubin.toml"
    )
    assert fab(hgx.interconnect.scale_up_fabric).domain_size.nominal == 8
    # the board's NVLink total: 8 x 3.6 TB/s = 28.8 TB/s
    assert 8 * fab("nvlink6-hgx8").bw_per_gpu_bidir_gb_per_s.nominal == 28800


def test_v5p_slices_up_to_the_largest_single_slice() -> None:
    f = fab("ici-v5p")
    assert f.domain_size.nominal == 16 * 16 * 24 == 6144
    assert all(s.wrap == [s.chips >= 64] * 3 for s in f.torus_slices)


# --- comm: hand-computed ring all-reduce wire times --------------------------------------------
def _comm(cli, fabric: str, group: int, size: str = "1GB") -> dict:
    r = cli(["comm", "all-reduce", "--size", size, "--group", str(group), "--fabric", fabric, "--algo", "ring", "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["data"]["rows"][0]


def test_comm_allreduce_h800_nvlink(cli) -> None:
    # switched: 2 (n-1) alpha + 2 (n-1)/n S / (B x eff); B = 200 GB/s, eff 0.8, alpha 1 us, n = 8
    t = 2 * 7 * 1e-6 + 2 * 7 / 8 * 1e9 / (200e9 * 0.8)
    assert t == pytest.approx(0.0109515)
    assert _comm(cli, "nvlink4-h800-hgx8", 8)["time_s"] == pytest.approx(t, rel=1e-9)


def test_comm_allreduce_trn3_ultraserver(cli) -> None:
    # 144 chips, B = 1,280 GB/s, eff 0.8, alpha 1.5 us
    t = 2 * 143 * 1.5e-6 + 2 * 143 / 144 * 1e9 / (1280e9 * 0.8)
    assert _comm(cli, "neuronlink-v4-trn3", 144)["time_s"] == pytest.approx(t, rel=1e-9)


def test_comm_allreduce_gaudi3_mesh_ring_uses_one_peer_link(cli) -> None:
    # full mesh: a ring sends to one peer per step over one 3 x 200 GbE bundle, 75 GB/s; eff 0.8; alpha 2 us
    t = 2 * 7 * 2e-6 + 2 * 7 / 8 * 1e9 / (75e9 * 0.8)
    assert _comm(cli, "gaudi3-roce-hls8", 8)["time_s"] == pytest.approx(t, rel=1e-9)


@pytest.mark.parametrize("sku", ACCELERATORS)
def test_comm_runs_on_every_new_sku(cli, sku) -> None:
    r = cli(["comm", "all-reduce", "--size", "256MB", "--group", "64", "--sku", sku, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["data"]["rows"][0]["time_s"] > 0


# --- sweep returns ranked layouts on every new SKU ------------------------------------------------
@pytest.mark.parametrize("sku", ACCELERATORS)
def test_sweep_smoke_on_every_new_sku(cli, sku) -> None:
    precision = "bf16" if acc(sku).compute.bf16_dense_tflops.known else "fp8"
    r = cli(["sweep", "llama3-70b", "--sku", sku, "--gpus", "64", "--top", "3", "--precision", precision, "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["data"]["rows"]
    assert len(rows) == 3 and [row["rank"] for row in rows] == [1, 2, 3]
    steps = [row["step_time_s"] for row in rows]
    assert steps == sorted(steps) and all(row["sku"] == sku for row in rows)


# DGX maximum system power per 8-GPU server x 4 servers: H100 10.2 kW, B200 14.3 kW (datasheets).
# Validation points, not fitted: the component model must bracket them within its estimate range.
DGX_RACK_W = {"hgx-h100": 4 * 10_200, "hgx-b200": 4 * 14_300}


@pytest.mark.parametrize("rack", RACKS)
def test_hgx_rack_gpu_power_and_dgx_reference(cli, rack) -> None:
    r = cli(["rack", rack, "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["data"]["rows"][0]
    spec = CAT.get("racks", rack).spec
    tdp = acc(spec.sku).power.tdp_w.nominal
    assert row["gpus"] == 32 and row["scale_up_world"] == 8 and row["gpu_power_w"]["nominal"] == tdp
    if rack in DGX_RACK_W:
        assert row["reference"]["reference_w"]["nominal"] == DGX_RACK_W[rack]
        lo, hi = row["wall_power_range_w"]["low"], row["wall_power_range_w"]["high"]
        assert lo <= DGX_RACK_W[rack] <= hi


# --- roadmap entries: marked as such wherever they are shown ---------------------------------------
ROADMAP = [("accelerators", "rubin-ultra"), ("accelerators", "mi500"), ("accelerators", "crescent-island"), ("fabrics", "nvlink7-nvl576"),
           ("fabrics", "ual-mi500"), ("racks", "rubin-ultra-nvl576")]


@pytest.mark.parametrize(("kind", "name"), ROADMAP, ids=[n for _, n in ROADMAP])
def test_roadmap_entry_validates_and_says_so(cli, kind, name) -> None:
    loaded = CAT.get(kind, name)
    assert loaded.spec.roadmap and loaded.spec.undated_sources() == []
    r = cli(["profiles", "validate", str(loaded.path), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["data"]["failed"] == 0
    show = cli(["profiles", "show", name, "--kind", kind, "--json"])
    assert json.loads(show.stdout)["data"]["roadmap"] == loaded.spec.roadmap
    assert "ROADMAP (announced, not shipping)" in cli(["profiles", "show", name, "--kind", kind]).stdout
    rows = json.loads(cli(["profiles", "list", "--kind", kind, "--json"]).stdout)["data"]["rows"]
    assert {r["name"]: r["roadmap"] for r in rows}[name] == loaded.spec.roadmap


def test_shipping_profiles_are_not_roadmap_entries() -> None:
    for kind, name in NEW:
        assert CAT.get(kind, name).spec.roadmap is None


def test_rubin_ultra_per_package_figures_from_the_rack_totals() -> None:
    ru = acc("rubin-ultra")
    assert ru.compute.fp8_dense_tflops.nominal == pytest.approx(5e18 / 144 / 1e12, rel=1e-4)  # 5 EF FP8 / 144
    assert ru.memory.hbm_bandwidth_tb_per_s.nominal == pytest.approx(4.6e15 / 144 / 1e12, rel=0.002)
    assert not ru.compute.fp4_dense_tflops.known  # the 100 PF FP4 is an inference figure
    # NVLink 7: 1.5 PB/s per rack, bidirectional, over 144 packages, per direction
    assert fab("nvlink7-nvl576").bw_per_dir_bytes_per_s.nominal == pytest.approx(1.5e15 / 144 / 2, rel=1e-3)


def test_mi500_discloses_nothing_and_sweep_says_so(cli) -> None:
    m = acc("mi500")
    assert not (m.compute.bf16_dense_tflops.known or m.memory.capacity_bytes.known or m.power.tdp_w.known)
    r = cli(["sweep", "llama3-70b", "--sku", "mi500", "--gpus", "256", "--json"])
    assert r.exit_code == 3 and "not disclosed" in r.output


def test_sweep_on_a_roadmap_sku_warns(cli) -> None:
    r = cli(["sweep", "llama3-70b", "--sku", "rubin-ultra", "--gpus", "128", "--precision", "fp8", "--top", "2", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)["data"]
    assert data["rows"] and any(w.startswith("rubin-ultra is a roadmap entry") for w in data["warnings"])


def test_roadmap_rack_stops_on_the_undisclosed_power_and_shows_the_flag_when_given(cli, tmp_path, write_profile) -> None:
    r = cli(["rack", "rubin-ultra-nvl576", "--json"])
    assert r.exit_code == 3 and "tdp_w is not disclosed" in r.output
    with open(CAT.get("accelerators", "rubin-ultra").path) as fh:
        text = fh.read()
    text = text.replace('tdp_w = { status = "n/d", source = ["NV25"], note = "rack about 600 kW; per-package power not given" }',
                        'tdp_w = { nominal = 3600, status = "estimate", source = ["NV25"] }')
    write_profile(tmp_path, "accelerators", "rubin-ultra", text)
    # the power shelves are not public either: a user gives them too
    with open(CAT.get("racks", "rubin-ultra-nvl576").path) as fh:
        rack = fh.read()
    rack = rack.replace('psu_rating_w = { status = "n/d", source = ["NV800"], note = "Kyber\'s power-shelf layout is not published" }',
                        'psu_rating_w = { nominal = 700000, status = "estimate", source = ["P"] }')
    assert "700000" in rack
    write_profile(tmp_path, "racks", "rubin-ultra-nvl576", rack)
    r = cli(["rack", "rubin-ultra-nvl576", "--profiles", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["data"]["rows"][0]["roadmap"].startswith("NVIDIA roadmap")
    table = cli(["rack", "rubin-ultra-nvl576", "--profiles", str(tmp_path)]).stdout
    assert "[ROADMAP:" in " ".join(table.split())


def test_tpu8t_64_chip_group_is_one_wrapped_cube(cli) -> None:
    # 4 x 4 x 4 with wraparound in all three dimensions: a ring per dimension, the full 1.2 TB/s per
    # direction usable; bandwidth term 2 (n-1)/n S / (B x eff) with S = 1 GiB, n = 64, eff 0.8
    row = _comm(cli, "ici-tpu8t", 64, size="1GiB")
    assert row["bandwidth_term_s"] == pytest.approx(2 * 63 / 64 * 2**30 / (1200e9 * 0.8), rel=1e-9)


def test_fit_marks_roadmap_entries(cli) -> None:
    one = json.loads(cli(["fit", "llama3-70b", "--sku", "rubin-ultra", "--json"]).stdout)["data"]
    assert any(w.startswith("rubin-ultra is a roadmap entry") for w in one["warnings"])
    every = json.loads(cli(["fit", "llama3-70b", "--sku", "all", "--json"]).stdout)["data"]
    assert "roadmap entries (announced, not shipping): crescent-island, mi500, rubin-ultra" in every["warnings"]


# --- 2026 parts buyers compare: TPU 8i, Maia 200, Crescent Island ---------------------------------
def test_tpu8i_per_chip_figures() -> None:
    """Google deep-dive table (via SemiAnalysis): 288 GB, 8.6 TB/s, 10.1 PF FP4; Cloud Next: a pod of
    1,152 chips delivers 11.6 EF FP8, so FP8 per chip = 11.6e18 / 1,152 = 10.07e15."""
    t = acc("tpu8i")
    assert t.hbm_bytes.nominal == 288 * 2**30 and t.memory.bandwidth_bytes_per_s.nominal == 8.6e12
    assert t.compute.peak_flops("fp4").nominal == 10.1e15
    assert t.compute.peak_flops("fp8").nominal == pytest.approx(11.6e18 / 1152, rel=1e-4)
    assert fab("ici-tpu8i").domain_size.nominal == 1152


def test_maia200_is_cloud_only_with_microsofts_figures() -> None:
    m = acc("maia200")
    assert m.compute.peak_flops("fp4").nominal == 10_145e12 and m.compute.peak_flops("fp8").nominal == 5_072e12
    assert m.hbm_bytes.nominal == 216 * 2**30 and m.power.tdp_w.nominal == 750
    assert not m.compute.bf16_dense_tflops.known
    assert "Cloud-only" in m.description and fab("maia200-ethernet").domain_size.nominal == 6144


def test_crescent_island_memory_estimate_spans_its_bus_readings() -> None:
    """640-bit bus x 10.7 Gb/s / 8 = 856 GB/s; Tom's Hardware's estimate 684 GB/s; no compute figure."""
    c = acc("crescent-island")
    bw = c.memory.bandwidth_bytes_per_s
    assert (bw.lo, bw.hi, bw.status) == (684e9, 640 * 10.7e9 / 8, "estimate")
    assert c.hbm_bytes.nominal == 160 * 2**30 and c.power.tdp_w.nominal == 350
    assert not any(c.compute.peak_flops(p).known for p in ("bf16", "fp8", "fp4"))


APPROXIMATED = {"tpu8i": "ici-tpu8i", "maia200": "maia200-ethernet", "crescent-island": "pcie-x16-crescent-island"}


@pytest.mark.parametrize("sku", sorted(APPROXIMATED))
def test_every_result_on_an_approximated_fabric_names_it(cli, sku) -> None:
    fabric = APPROXIMATED[sku]
    want = f"fabric {fabric} is an approximation: {fab(fabric).approximation}"
    runs = [["fit", "llama3-70b", "--sku", sku], ["comm", "all-reduce", "--size", "64MB", "--group", "8", "--sku", sku]]
    if acc(sku).compute.peak_flops("fp8").known:
        runs.append(["sweep", "llama3-70b", "--sku", sku, "--gpus", "64", "--top", "1", "--precision", "fp8"])
        runs.append(["serve", "llama3-70b", "--sku", sku])
    for args in runs:
        r = cli([*args, "--json"])
        assert r.exit_code == 0, (args, r.output)
        assert want in json.loads(r.stdout)["data"]["warnings"], args
        assert fabric in cli(args).output


def test_fabrics_without_an_approximation_add_no_warning(cli) -> None:
    r = cli(["fit", "llama3-70b", "--sku", "tpu8t", "--json"])
    assert not any("is an approximation" in w for w in json.loads(r.stdout)["data"]["warnings"])
