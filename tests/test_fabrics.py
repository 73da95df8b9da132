"""Fabric profiles: every bundled tier loads, states its direction, and passes its identities."""

from __future__ import annotations

import pytest

from mi400plan.errors import MissingValueError

SCALE_UP = [
    "xgmi-mi300", "xgmi-mi350", "ul4-mi430x", "mi440x-8gpu", "helios-ualoe72", "ifoe64", "ifoe128",
    "nvlink3-hgx8", "nvlink4-hgx8", "nvlink5-hgx8", "nvlink5-nvl72", "nvlink6-nvl72", "ici-v6e", "ici-tpu7x",
]
SCALE_OUT = [
    "pollara-400", "vulcano-800", "vulcano-800x2", "vulcano-800x3", "cx7-400", "ib-ndr-400", "ib-hdr-200",
    "cx8-800", "cx9-1600", "uec-800", "tpu-dcn",
]


def fab(catalog, name):
    return catalog.get("fabrics", name).spec


def test_every_referenced_name_is_bundled(catalog) -> None:
    names = set(catalog.names("fabrics"))
    assert set(SCALE_UP + SCALE_OUT) <= names


@pytest.mark.parametrize("name", SCALE_UP)
def test_scale_up_tiers(catalog, name) -> None:
    assert fab(catalog, name).tier == "scale_up"


@pytest.mark.parametrize("name", SCALE_OUT)
def test_scale_out_tiers(catalog, name) -> None:
    assert fab(catalog, name).tier == "scale_out"


def test_every_bundled_fabric_is_consistent(catalog) -> None:
    bad = {n: fab(catalog, n).consistency_errors() for n in catalog.names("fabrics")}
    assert {n: e for n, e in bad.items() if e} == {}


def test_every_fabric_has_latency_and_efficiency_with_status(catalog) -> None:
    for f in (x.spec for x in catalog.all("fabrics")):
        assert f.hop_latency_us.known and f.efficiency.known, f.name
        assert f.efficiency.status in ("assumed", "estimate", "measured", "disclosed"), f.name


def test_ifoe64_identities(catalog) -> None:
    f = fab(catalog, "ifoe64")
    # 72 lanes x 200 Gb/s = 14,400 Gb/s = 14,400 / 8 GB/s = 1,800 GB/s per GPU per direction
    assert f.lanes_per_gpu.nominal * f.lane_gbit_per_s.nominal / 8 == pytest.approx(1800.0)
    assert f.bw_per_gpu_per_dir_gb_per_s.nominal == 1800.0
    # 18 ASICs x 51.2 Tb/s = 921.6 Tb/s aggregate per direction
    assert f.switch.asics.nominal * f.switch.asic_capacity_tbit_per_s.nominal == pytest.approx(921.6)
    assert f.switch.aggregate_tbit_per_s_per_dir.nominal == 921.6
    # 64 GPUs x 4 lanes x 200 Gb/s = 51,200 Gb/s = 51.2 Tb/s per ASIC
    assert f.domain_size.nominal * f.switch.lanes_per_gpu_per_asic.nominal * 200 / 1000 == pytest.approx(51.2)
    assert f.consistency_errors() == []


def test_ifoe128_identities(catalog) -> None:
    f = fab(catalog, "ifoe128")
    # 128 x 2 x 200 Gb/s = 51.2 Tb/s per ASIC; 36 x 51.2 = 1,843.2 Tb/s
    assert 128 * 2 * 200 / 1000 == pytest.approx(f.switch.asic_capacity_tbit_per_s.nominal)
    assert 36 * 51.2 == pytest.approx(f.switch.aggregate_tbit_per_s_per_dir.nominal)
    assert f.consistency_errors() == []


def test_broken_identity_is_reported(catalog) -> None:
    f = fab(catalog, "ifoe64")
    bad_switch = f.switch.model_copy(update={"asics": f.switch.asics.model_copy(update={"nominal": 16.0})})
    broken = f.model_copy(update={"switch": bad_switch})
    errs = broken.consistency_errors()
    # 16 x 51.2 = 819.2 != 921.6, and 16 x 4 = 64 lanes != 72
    assert any("aggregate" in e and "819.2" in e for e in errs)
    assert any("lanes_per_gpu" in e and "64" in e for e in errs)
    x = fab(catalog, "xgmi-mi300")
    wrong = x.model_copy(update={"links_per_gpu": x.links_per_gpu.model_copy(update={"nominal": 6.0})})
    # 6 x 64 = 384 GB/s != 448 GB/s; a full mesh of 8 needs 7 links
    errs = wrong.consistency_errors()
    assert any("384" in e and "448" in e for e in errs)
    assert any("domain_size - 1" in e for e in errs)


def test_xgmi_per_gpu_bandwidth_is_links_times_link(catalog) -> None:
    # seed 004 table: MI300X 448 GB/s = 7 x 64; MI355X 537.6 GB/s = 7 x 76.8 (per direction)
    assert fab(catalog, "xgmi-mi300").bw_per_gpu_per_dir_gb_per_s.nominal == pytest.approx(7 * 64)
    assert fab(catalog, "xgmi-mi350").bw_per_gpu_per_dir_gb_per_s.nominal == pytest.approx(7 * 76.8)


def test_helios_direction_and_seed000_conflict(catalog) -> None:
    f = fab(catalog, "helios-ualoe72")
    assert f.bw_per_gpu_per_dir_gb_per_s.nominal == 1800.0
    assert f.bw_per_gpu_bidir_gb_per_s.nominal == 3600.0
    assert f.bidir_converted is True
    conflict = [c for c in f.conflicts if c.field == "bw_per_gpu_per_dir_gb_per_s"]
    assert conflict and "S000" in conflict[0].source and "bidirectional" in conflict[0].claim


def test_nvlink_per_dir_is_half_the_bidir_quote(catalog) -> None:
    # NVIDIA quotes bidirectional: 600 (A100), 900 (H100), 1,800 (B200/GB200), 3,600 (Rubin) GB/s
    for name, bidir in [("nvlink3-hgx8", 600), ("nvlink4-hgx8", 900), ("nvlink5-nvl72", 1800), ("nvlink6-nvl72", 3600)]:
        f = fab(catalog, name)
        assert f.bidir_converted
        assert f.bw_per_gpu_per_dir_gb_per_s.nominal == bidir / 2
    # A100: 12 links x 25 GB/s per direction = 300 GB/s
    a100 = fab(catalog, "nvlink3-hgx8")
    assert a100.links_per_gpu.nominal * a100.link_bw_per_dir_gb_per_s.nominal == 300.0


def test_nic_tiers_bits_to_bytes(catalog) -> None:
    # 400 Gb/s / 8 = 50 GB/s; 3 x 800 Gb/s / 8 = 300 GB/s; 200 Gb/s / 8 = 25 GB/s
    assert fab(catalog, "pollara-400").bw_per_dir_bytes_per_s.nominal == 50e9
    assert fab(catalog, "vulcano-800x3").bw_per_dir_bytes_per_s.nominal == 300e9
    assert fab(catalog, "ib-hdr-200").bw_per_dir_bytes_per_s.nominal == 25e9


def test_torus_dims(catalog) -> None:
    v6e = fab(catalog, "ici-v6e")
    assert v6e.torus_dims == [16, 16] and 16 * 16 == v6e.domain_size.nominal
    tpu7 = fab(catalog, "ici-tpu7x")
    assert tpu7.torus_unit_dims == [4, 4, 4]
    assert tpu7.domain_size.nominal == 9216 == 144 * 4 * 4 * 4


def test_not_disclosed_bandwidth_refuses(catalog) -> None:
    for name in ("mi440x-8gpu", "ul4-mi430x"):
        with pytest.raises(MissingValueError):
            fab(catalog, name).bw_per_gpu_per_dir_gb_per_s.require("bandwidth")


def test_torus_without_dims_is_a_profile_error(tmp_path) -> None:
    from mi400plan.errors import ProfileError
    from mi400plan.profiles import load_file

    p = tmp_path / "t.toml"
    p.write_text(
        'name = "t"\ndisplay_name = "t"\ntier = "scale_up"\ntopology = "torus"\n'
        "domain_size = 16\nbw_per_gpu_per_dir_gb_per_s = 100\n"
    )
    with pytest.raises(ProfileError, match="torus_dims"):
        load_file("fabrics", p)


def test_torus_slice_lists(catalog) -> None:
    # TPU7x: 4 x 4 x 4 = 64 chips is one cube, a torus in every dimension; smaller slices have no
    # wraparound; every listed slice fits the 9,216-chip pod
    tpu7 = fab(catalog, "ici-tpu7x")
    by_size = {s.chips: s for s in tpu7.torus_slices}
    assert by_size[64].shape == [4, 4, 4] and all(by_size[64].wrap)
    assert by_size[128].shape == [4, 4, 8] and all(by_size[128].wrap)
    assert by_size[32].shape == [2, 4, 4] and not any(by_size[32].wrap)
    assert 4 * 4 * 4 == 64 and 2 * 4 * 4 == 32 and 16 * 24 * 24 == 9216 == max(by_size)
    assert by_size[64].label() == "4x4x4 (wraparound: all)"
    # v6e: 2x2 .. 16x16; only the 16 x 16 pod wraps
    v6e = fab(catalog, "ici-v6e")
    assert [s.shape for s in v6e.torus_slices] == [[2, 2], [2, 4], [4, 4], [4, 8], [8, 8], [8, 16], [16, 16]]
    assert [any(s.wrap) for s in v6e.torus_slices] == [False] * 6 + [True]
    assert v6e.torus_slices[-1].label() == "16x16 (wraparound: all)"


@pytest.mark.parametrize(
    "slices,needle",
    [
        ('[{ shape = [4, 4, 4], wrap = [true, true, true] }]', "needs 2 dimensions"),
        ('[{ shape = [4, 4], wrap = [true] }]', "one true/false per dimension"),
        ('[{ shape = [4, 1], wrap = [true, true] }]', "cannot wrap around"),
        ('[{ shape = [8, 8], wrap = [false, false] }]', "more than the 16-chip torus"),
        ('[{ shape = [2, 2], wrap = [false, false], source = ["Q"] }]', "source keys"),
    ],
)
def test_bad_torus_slices_are_profile_errors(tmp_path, slices, needle) -> None:
    from mi400plan.errors import ProfileError
    from mi400plan.profiles import load_file

    p = tmp_path / "t.toml"
    p.write_text(
        'name = "t"\ndisplay_name = "t"\ntier = "scale_up"\ntopology = "torus"\ntorus_dims = [4, 4]\n'
        f"domain_size = 16\nbw_per_gpu_per_dir_gb_per_s = 100\ntorus_slices = {slices}\n"
    )
    with pytest.raises(ProfileError, match=needle):
        load_file("fabrics", p)
