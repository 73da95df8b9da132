"""The bundled profile catalog, and the accelerator profiles checked against published arithmetic.

Expected numbers are written out by hand from shared/SPECS.md section 6 (vendor totals) and the
vendor datasheets; each test shows the arithmetic and compares it with what the profile states.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mi400plan.errors import MissingValueError, ProfileError, UnknownNameError
from mi400plan.profiles import KINDS, Catalog

_BUNDLED = Catalog.default([])
CATALOG_ENTRIES = [(kind, name) for kind in KINDS for name in _BUNDLED.names(kind)]
ACCELERATORS = _BUNDLED.names("accelerators")

TF = 1e12  # FLOP/s per TFLOP/s


def acc(catalog, name):
    return catalog.get("accelerators", name).spec


# --- every bundled profile parses -------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "name"), CATALOG_ENTRIES, ids=[f"{k}/{n}" for k, n in CATALOG_ENTRIES])
def test_bundled_profile_parses(catalog, kind, name):
    loaded = catalog.get(kind, name)
    assert loaded.spec.name == name
    assert loaded.origin == "bundled"
    assert Path(loaded.path).name == f"{name}.toml"


def test_catalog_has_the_required_accelerators():
    required = {
        "mi300x", "mi325x", "mi350x", "mi355x", "mi430x", "mi440x", "mi455x", "a100", "h100", "h200",
        "b200", "b300", "gb200", "gb300", "rubin", "tpu-v6e", "tpu7x",
    }  # fmt: skip
    assert required <= set(ACCELERATORS)


@pytest.mark.parametrize("name", ACCELERATORS)
def test_every_stated_number_has_a_source(catalog, name):
    """A number that is not 'n/d' must cite at least one key of [sources]."""
    from mi400plan.api.profiles import _explicit_estimates

    spec = acc(catalog, name)
    for est in _explicit_estimates(spec):
        if est.known:
            assert est.source, f"{name}: value {est.nominal} has no source"
            assert all(k in spec.sources for k in est.source)


# --- fabric names the other profiles rely on --------------------------------------------------------
FABRICS = {
    "mi300x": ("xgmi-mi300", "ib-ndr-400"),
    "mi325x": ("xgmi-mi300", "pollara-400"),
    "mi350x": ("xgmi-mi350", "pollara-400"),
    "mi355x": ("xgmi-mi350", "pollara-400"),
    "mi430x": ("ul4-mi430x", "vulcano-800"),
    "mi440x": ("mi440x-8gpu", "vulcano-800"),
    "mi455x": ("helios-ualoe72", "vulcano-800x3"),
    "a100": ("nvlink3-hgx8", "ib-hdr-200"),
    "h100": ("nvlink4-hgx8", "ib-ndr-400"),
    "h200": ("nvlink4-hgx8", "ib-ndr-400"),
    "b200": ("nvlink5-hgx8", "cx7-400"),
    "b300": ("nvlink5-hgx8", "cx8-800"),
    "gb200": ("nvlink5-nvl72", "cx7-400"),
    "gb300": ("nvlink5-nvl72", "cx8-800"),
    "rubin": ("nvlink6-nvl72", "cx9-1600"),
    "tpu-v6e": ("ici-v6e", "tpu-dcn"),
    "tpu7x": ("ici-tpu7x", "tpu-dcn"),
}


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_default_fabric_names(catalog, name):
    ic = acc(catalog, name).interconnect
    assert (ic.scale_up_fabric, ic.scale_out_fabric) == FABRICS[name]


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_default_fabrics_exist_in_catalog(catalog, name):
    if not catalog.names("fabrics"):
        pytest.skip("no fabric profiles bundled")
    for fabric in FABRICS[name]:
        assert catalog.resolve("fabrics", fabric) == fabric


# --- SPECS.md section 6 identities ------------------------------------------------------------------
def test_helios_totals(catalog):
    """Helios = 72 x MI455X. AMD: 31 TB HBM4, 2.9 EF FP4, 1.4 EF FP8; HBM 72 x 23.3 TB/s."""
    g = acc(catalog, "mi455x")
    # AMD's "432 GB" is 432 GiB of HBM4; its rack total counts in the same unit: 72 x 432 = 31,104 "GB"
    assert (g.memory.hbm_capacity.nominal, g.memory.hbm_capacity.unit) == (432, "GiB")
    assert g.hbm_bytes.nominal == 432 * 2**30 == 463_856_467_968
    assert 72 * g.memory.hbm_capacity.nominal == pytest.approx(31.1e3, rel=2e-3)
    bw = g.memory.bandwidth_bytes_per_s
    assert 72 * bw.nominal == pytest.approx(1.6776e15, rel=1e-4)  # 72 x 23.3 TB/s = 1,677.6 TB/s (not 1.41)
    assert not bw.is_range and bw.status == "disclosed"
    fp4 = g.compute.peak_flops("fp4")
    fp8 = g.compute.peak_flops("fp8")
    assert 72 * fp4.nominal == pytest.approx(2.8991e18, rel=1e-4)  # 72 x 40,265.3 TF: AMD's 2.9 EF
    assert 72 * fp8.nominal == pytest.approx(1.4496e18, rel=1e-4)  # 72 x 20,132.7 TF: AMD's 1.4 EF
    # The FP4 basis is settled (dense): no sparse-reading low bound.
    assert not fp4.is_range and fp4.status == "disclosed"
    assert g.compute.fp4_basis_note and g.compute.fp4_basis_note.startswith("Resolved")
    assert not g.compute.fp4_sparse_tflops.known
    tdp = g.power.tdp_w
    assert (tdp.lo, tdp.hi, tdp.status) == (1500, 2500, "estimate")
    # GPUs alone: 72 x 1.5-2.5 kW = 108-180 kW
    assert (72 * tdp.lo, 72 * tdp.hi) == (108_000, 180_000)


def test_helios_aliases_resolve(catalog):
    for alias in ("mi400x", "mi450x", "MI450X", " mi400x "):
        assert catalog.resolve("accelerators", alias) == "mi455x"
    assert catalog.get("accelerators", "mi450x").spec.name == "mi455x"
    assert catalog.resolve("accelerators", "vr200") == "rubin"
    assert catalog.resolve("accelerators", "ironwood") == "tpu7x"


def test_gb200_nvl72_totals(catalog):
    """NVIDIA GB200 NVL72: 13.4 TB HBM3e, 576 TB/s, 1,440 PF FP4 (s), 720 PF FP4 dense."""
    g = acc(catalog, "gb200")
    assert 72 * g.memory.hbm_capacity.nominal == pytest.approx(13.4e3, rel=2e-3)  # 72 x 186 "GB" = 13,392
    assert 72 * g.memory.bandwidth_bytes_per_s.nominal == pytest.approx(576e12)  # 72 x 8 TB/s
    assert 72 * g.compute.peak_flops("fp4", sparse=True).nominal == pytest.approx(1440e15)  # 72 x 20 PF
    assert 72 * g.compute.peak_flops("fp4").nominal == pytest.approx(720e15)  # 72 x 10 PF
    assert not g.hbm_bytes.is_range  # 186 GiB; 192 GiB is the physical stack capacity, not a bound


def test_gb300_nvl72_totals(catalog):
    g = acc(catalog, "gb300")
    assert 72 * g.memory.hbm_capacity.nominal == pytest.approx(20.7e3, rel=2e-3)  # 72 x 288 "GB" = 20,736
    assert 72 * g.compute.peak_flops("fp4").nominal == pytest.approx(1080e15)  # 72 x 15 PF dense


def test_mi355x_rack_totals(catalog):
    """AMD 128-GPU MI355X DLC rack: 36 TB HBM3E, 2.6 EF FP4 (a sparse figure CDNA 4 cannot run)."""
    g = acc(catalog, "mi355x")
    assert 128 * g.memory.hbm_capacity.nominal == pytest.approx(36.9e3, rel=2e-3)  # 128 x 288 "GB" = 36,864
    # AMD's 2.6 EF is 128 x 20.1 PF, a 2:4-sparse reading of MXFP4 that CDNA 4 has no instruction for;
    # the dense rate is 128 x 10,066.3 TF = 1.29 EF.
    assert not g.compute.peak_flops("fp4", sparse=True).known
    assert 128 * g.compute.peak_flops("fp4").nominal == pytest.approx(1.2885e18, rel=1e-3)


@pytest.mark.parametrize(
    ("name", "cus", "ghz", "flop_per_clk_per_cu", "expected_tflops"),
    [
        ("mi355x", 256, 2.4, 4096, 2516.6),  # 256 x 2.4e9 x 4096 = 2.5166e15
        ("mi350x", 256, 2.2, 4096, 2306.9),  # 256 x 2.2e9 x 4096 = 2.3069e15
        ("mi300x", 304, 2.1, 2048, 1307.4),  # 304 x 2.1e9 x 2048 = 1.3074e15
    ],
)
def test_amd_bf16_peak_is_cus_times_clock_times_flops(catalog, name, cus, ghz, flop_per_clk_per_cu, expected_tflops):
    g = acc(catalog, name)
    assert g.silicon.compute_units.nominal == cus
    assert g.silicon.peak_clock_mhz.nominal == ghz * 1000
    by_hand = cus * ghz * 1e9 * flop_per_clk_per_cu / TF
    assert by_hand == pytest.approx(expected_tflops, abs=0.05)
    assert g.compute.bf16_dense_tflops.nominal == pytest.approx(by_hand, abs=0.05)


def test_mi355x_bf16_settled_by_amd(catalog):
    """AMD's MI355X page: 2.5 PF BF16 dense, 5.0 PF with sparsity; S002's 2,300 misreading is no bound."""
    c = acc(catalog, "mi355x").compute
    assert (c.bf16_dense_tflops.low, c.bf16_dense_tflops.nominal, c.bf16_dense_tflops.status) == (None, 2516.6, "disclosed")
    assert c.bf16_sparse_tflops.nominal == 2 * 2516.6


def test_mi300x_xgmi_and_fp64_identities(catalog):
    """FP64 vector on CDNA 4: 256 CU x 2.4 GHz x 128 FLOP/clk = 78.6 TF (MI355X)."""
    assert 256 * 2.4e9 * 128 / TF == pytest.approx(78.6, abs=0.05)
    assert acc(catalog, "mi355x").compute.fp64_vector_dense_tflops.nominal == 78.6
    assert 256 * 2.2e9 * 128 / TF == pytest.approx(72.1, abs=0.05)
    assert acc(catalog, "mi350x").compute.fp64_vector_dense_tflops.nominal == 72.1


def test_tpu_v6e_pod(catalog):
    """Google: a 256-chip v6e pod is 234.9 PF BF16. 256 x 918 TF = 235,008 TF."""
    g = acc(catalog, "tpu-v6e")
    assert 256 * g.compute.peak_flops("bf16").nominal == pytest.approx(234.9e15, rel=1e-3)


def test_ironwood_pod(catalog):
    """Google: 9,216 chips, 42.5 EF FP8, '1.77 PB' HBM.

    9,216 x 4,614 TF = 42.52 EF. 9,216 x 192 GiB = 1,769,472 GiB: Google's "1.77 PB" counts
    in GiB (1.77 million GiB), which is 1.90e15 bytes, not 1.77e15.
    """
    g = acc(catalog, "tpu7x")
    assert 9216 * g.compute.peak_flops("fp8").nominal == pytest.approx(42.5e18, rel=1e-3)
    total = 9216 * g.hbm_bytes.nominal
    assert total / 2**30 == 1_769_472
    assert total == pytest.approx(1.8999e15, rel=1e-4)


def test_rubin_nvl72(catalog):
    """Vera Rubin NVL72: 2.5 EF NVFP4 training (72 x 35 PF dense), 3.6 EF 'inference' with adaptive
    compression (72 x 50 PF, its own key), 20.7 TB HBM4 (72 x 288 GB)."""
    g = acc(catalog, "rubin")
    fp4 = g.compute.peak_flops("fp4")
    assert fp4.lo == fp4.hi == 35_000e12  # dense NVFP4 only: the 50 PF figure is not dense math
    assert 72 * fp4.nominal == pytest.approx(2.52e18)  # 72 x 35 PF 'training' = 2.5 EF (NVIDIA)
    assert 72 * g.compute.fp4_compressed_tflops.nominal * 1e12 == pytest.approx(3.6e18)  # 72 x 50 PF
    assert 72 * g.memory.hbm_capacity.nominal == pytest.approx(20.7e3, rel=2e-3)  # 72 x 288 "GB" = 20,736


def test_a100_datasheet(catalog):
    """NVIDIA A100 80GB SXM datasheet: 312 / 624 (s) TF BF16, 2,039 GB/s, 80 GB, 400 W."""
    g = acc(catalog, "a100")
    assert g.compute.peak_flops("bf16").nominal == 312e12
    assert g.compute.peak_flops("fp16", sparse=True).nominal == 624e12
    assert g.memory.bandwidth_bytes_per_s.nominal == pytest.approx(2.039e12)
    assert g.hbm_bytes.nominal == 80 * 2**30  # "80 GB" HBM2e = 5 stacks x 16 GiB
    assert g.power.tdp_w.nominal == 400


# Pairs where sparse is not 2 x dense, with the reason (checked separately).
NOT_DOUBLE = {
    ("b300", "fp4"): "Blackwell Ultra: dense FP4 13.5 PF, sparse 18 PF (HGX 108 / 144 PF per 8)",
    ("gb300", "fp4"): "Blackwell Ultra: dense FP4 15 PF, sparse 20 PF (rack 1,080 / 1,440 PF)",
    ("trainium2", "fp8"): "AWS: 1,299 FP8 dense, 2,563 'FP8/FP16/BF16/TF32 sparse' (1.97 x, AWS's own figure)",
}


def _pairs():
    out = []
    for name in ACCELERATORS:
        c = _BUNDLED.get("accelerators", name).spec.compute
        for field in type(c).model_fields:
            if "_sparse_" in field:
                prec = field.split("_sparse_")[0]
                dense, sparse = getattr(c, field.replace("_sparse_", "_dense_")), getattr(c, field)
                if dense.known and sparse.known:
                    out.append((name, prec, dense, sparse))
    return out


@pytest.mark.parametrize(("name", "prec", "dense", "sparse"), _pairs(), ids=lambda x: x if isinstance(x, str) else "")
def test_sparse_is_twice_dense(name, prec, dense, sparse):
    if (name, prec) in NOT_DOUBLE:
        assert sparse.nominal < 2 * dense.nominal, NOT_DOUBLE[(name, prec)]
        return
    assert sparse.nominal == pytest.approx(2 * dense.nominal, rel=1e-3)
    if dense.low is not None or sparse.low is not None:
        assert sparse.lo == pytest.approx(2 * dense.lo, rel=1e-3)
        assert sparse.hi == pytest.approx(2 * dense.hi, rel=1e-3)


def test_b300_int8_from_the_per_gpu_table(catalog):
    """NVIDIA's per-GPU table as reproduced by Verda: B300 INT8 0.15 POPS dense = 150 TOPS; 2:4 sparse
    doubles it, 300 TOPS (the 307 TOPS datasheet reading was never read at its source)."""
    c = acc(catalog, "b300").compute
    assert c.int8_dense_tops.nominal == 0.15 * 1000 and c.int8_sparse_tops.nominal == 2 * 150


# --- units ------------------------------------------------------------------------------------------
def test_vendor_hbm_gb_is_binary_on_every_vendor(catalog):
    """Google's "192 GiB" (TPU7x) and AMD's "192 GB" (MI300X) are the same binary-sized HBM: 192 x 2**30 B.

    The MI300X computes with what rocm-smi reports, 205,822,885,888 B = 191.69 GiB (0.16 % below the
    stated 192 GiB); before binary units it was read as 192e9 B, 7.4 % below Google's figure."""
    tpu = acc(catalog, "tpu7x")
    assert tpu.memory.hbm_capacity_gb is None and tpu.memory.hbm_capacity.unit == "GiB"
    assert tpu.hbm_bytes.nominal == 192 * 2**30 == 206_158_430_208
    mi = acc(catalog, "mi300x")
    assert mi.memory.capacity_bytes.nominal == 192 * 2**30
    assert mi.hbm_bytes.nominal == 205_822_885_888
    assert 1 - mi.hbm_bytes.nominal / tpu.hbm_bytes.nominal == pytest.approx(0.00163, abs=1e-5)


# --- names, overrides and errors --------------------------------------------------------------------
def test_unknown_name_gives_close_matches(catalog):
    with pytest.raises(UnknownNameError) as ei:
        catalog.resolve("accelerators", "mi355")
    assert ei.value.matches[0] == "mi355x"
    assert "mi355x" in ei.value.message


MINIMAL = """\
name = "{name}"
display_name = "{display}"
vendor = "Test"

[memory]
hbm_capacity_gb = {capacity}
hbm_bandwidth_tb_per_s = {bandwidth}
"""


def test_user_profile_overrides_bundled(tmp_path, write_profile):
    p = write_profile(tmp_path, "accelerators", "mi300x", MINIMAL.format(name="mi300x", display="Lab MI300X", capacity=100, bandwidth=1.0))
    cat = Catalog.default([tmp_path])
    loaded = cat.get("accelerators", "mi300x")
    assert loaded.origin == "user"
    assert loaded.path == str(p)
    assert loaded.spec.hbm_bytes.nominal == 100e9
    # Other names still come from the bundled catalog.
    assert cat.get("accelerators", "mi355x").origin == "bundled"


def test_malformed_toml_gives_file_and_line(tmp_path, write_profile):
    text = 'name = "broken"\ndisplay_name = "B"\nvendor = "Test\n[memory]\n'  # line 3: unterminated string
    p = write_profile(tmp_path, "accelerators", "broken", text)
    with pytest.raises(ProfileError) as ei:
        Catalog.default([tmp_path]).get("accelerators", "broken")
    assert ei.value.path == str(p)
    assert ei.value.line == 3
    assert f"{p}:3" in ei.value.message


def test_validation_error_gives_field_and_line(tmp_path, write_profile):
    text = MINIMAL.format(name="badbw", display="B", capacity=10, bandwidth='"fast"')
    # line 7 is hbm_bandwidth_tb_per_s
    assert text.splitlines()[6].startswith("hbm_bandwidth_tb_per_s")
    write_profile(tmp_path, "accelerators", "badbw", text)
    with pytest.raises(ProfileError) as ei:
        Catalog.default([tmp_path]).get("accelerators", "badbw")
    assert ei.value.field == "memory.hbm_bandwidth_tb_per_s"
    assert ei.value.line == 7


def test_undefined_source_key_is_an_error(tmp_path, write_profile):
    text = MINIMAL.format(name="nosrc", display="B", capacity='{ nominal = 10, source = ["Q9"] }', bandwidth=1)
    write_profile(tmp_path, "accelerators", "nosrc", text)
    with pytest.raises(ProfileError) as ei:
        Catalog.default([tmp_path]).get("accelerators", "nosrc")
    assert "Q9" in ei.value.message


def test_not_disclosed_value_raises_on_require(catalog):
    g = acc(catalog, "mi440x")
    bw = g.memory.bandwidth_bytes_per_s
    assert not bw.known and bw.status == "not_disclosed"
    with pytest.raises(MissingValueError) as ei:
        bw.require("MI440X HBM bandwidth")
    assert "not disclosed" in ei.value.message
    with pytest.raises(MissingValueError):
        acc(catalog, "mi430x").compute.peak_flops("bf16").require("MI430X BF16 peak")


@pytest.mark.parametrize(("dense", "sparse"), [(100, 50), (100, 100), (100, 250)])
def test_sparse_rate_outside_dense_to_twice_dense_is_rejected(tmp_path, write_profile, dense, sparse):
    """Rule: dense < sparse <= 2 x dense. 50 is below dense; 100 = dense means one key holds the
    other's figure (a sparse rate under the dense key); 250 > 2 x 100 is more than 2:4 sparsity gives."""
    text = MINIMAL.format(name="odd", display="Odd", capacity=10, bandwidth=1) + (
        f"\n[compute]\nbf16_dense_tflops = {dense}\nbf16_sparse_tflops = {sparse}\n"
    )
    write_profile(tmp_path, "accelerators", "odd", text)
    with pytest.raises(ProfileError) as ei:
        Catalog.default([tmp_path]).get("accelerators", "odd")
    assert ei.value.field == "compute" and "bf16_sparse_tflops" in ei.value.message
    assert "dense < sparse <= 2 x dense" in ei.value.message
