"""Profile schema rules: dated sources, capacities with their unit, usable capacity, rate bases.

Each rule is checked on a user profile written here (rejected with field and rule) and, where it
applies, on every bundled profile.
"""

from __future__ import annotations

import json
import re

import pytest

from mi400plan.errors import ProfileError
from mi400plan.profiles import KINDS, Catalog

_BUNDLED = Catalog.default([])
ENTRIES = [(kind, name) for kind in KINDS for name in _BUNDLED.names(kind)]

HEAD = 'name = "{name}"\ndisplay_name = "Test"\nvendor = "Test"\n\n'


def _gpu(memory: str, extra: str = "", sources: str = 'T = { title = "test sheet", date = "2026-11" }') -> str:
    return HEAD.format(name="tgpu") + f"[memory]\n{memory}\nhbm_bandwidth_tb_per_s = 1.0\n{extra}\n[sources]\n{sources}\n"


def _load(tmp_path, write_profile, text: str):
    write_profile(tmp_path, "accelerators", "tgpu", text)
    return Catalog.default([tmp_path]).get("accelerators", "tgpu").spec


# --- dated sources --------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "name"), ENTRIES, ids=[f"{k}/{n}" for k, n in ENTRIES])
def test_every_bundled_source_is_dated(kind, name) -> None:
    spec = _BUNDLED.get(kind, name).spec
    assert spec.undated_sources() == []
    for key, src in spec.sources.items():
        assert re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", src.date), (key, src.date)
        assert 1990 <= int(src.date[:4]) <= 2026


def test_show_prints_each_source_date(cli) -> None:
    r = cli(["profiles", "show", "h100", "--json"])
    assert r.exit_code == 0, r.output
    src = json.loads(r.stdout)["data"]["sources"]
    # nvidia-smi logs of the H100's usable memory, and the Llama 3 paper (arXiv v1, 31 July 2024)
    assert src["SMI"]["date"] == "2025" and "81559MiB" in src["SMI"]["title"]
    assert src["LL3"]["date"] == "2024-07-31"
    rows = {row["field"]: row for row in json.loads(r.stdout)["data"]["rows"]}
    assert rows["memory.hbm_capacity"]["unit"] == "GiB" and rows["memory.hbm_capacity"]["note"].startswith("vendor: '80 GB HBM3'")
    assert (rows["memory.hbm_usable"]["value"], rows["memory.hbm_usable"]["unit"]) == (81559, "MiB")
    table = cli(["profiles", "show", "h100", "--ascii"]).stdout
    assert "LL3 (2024-07-31): Llama Team" in " ".join(table.split())


def test_undated_user_source_loads_with_a_warning(tmp_path, write_profile, cli) -> None:
    text = _gpu('hbm_capacity = { nominal = 10, unit = "GiB", source = ["T"] }', sources='T = "a bare title"')
    path = write_profile(tmp_path, "accelerators", "tgpu", text)
    spec = Catalog.default([tmp_path]).get("accelerators", "tgpu").spec
    assert spec.sources["T"].title == "a bare title" and spec.sources["T"].date is None
    r = cli(["profiles", "validate", str(path), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)["data"]
    assert data["failed"] == 0
    assert any("[sources] T carry no publication date" in w for w in data["warnings"])


@pytest.mark.parametrize("date", ["2026-13", "2026-02-30", "26-11-01", "Nov 2026"])
def test_malformed_source_date_is_rejected(tmp_path, write_profile, date) -> None:
    text = _gpu('hbm_capacity = { nominal = 10, unit = "GiB", source = ["T"] }', sources=f'T = {{ title = "x", date = "{date}" }}')
    with pytest.raises(ProfileError) as ei:
        _load(tmp_path, write_profile, text)
    assert ei.value.field == "sources.T" and date in ei.value.message


# --- capacity with its unit -----------------------------------------------------------------------
@pytest.mark.parametrize("value", ["80", '{ nominal = 80, status = "D", source = ["T"] }', '"n/d"'])
def test_capacity_without_unit_is_rejected(tmp_path, write_profile, cli, value) -> None:
    path = write_profile(tmp_path, "accelerators", "tgpu", _gpu(f"hbm_capacity = {value}"))
    r = cli(["profiles", "validate", str(path), "--json"])
    assert r.exit_code == 3, r.output
    issue = json.loads(r.stdout)["data"]["rows"][0]["issues"][0]
    assert issue["field"] == "memory.hbm_capacity" and issue["line"] == 6
    assert "a capacity needs its unit" in issue["message"] and 'unit = "GiB"' in issue["message"]


def test_capacity_units_convert_to_bytes(tmp_path, write_profile) -> None:
    # 80 GiB = 80 x 2^30 = 85,899,345,920 B stated; 81,559 MiB = 81,559 x 2^20 = 85,520,809,984 B usable
    spec = _load(
        tmp_path, write_profile,
        _gpu('hbm_capacity = { nominal = 80, unit = "GiB", source = ["T"] }\n'
             'hbm_usable = { nominal = 81559, unit = "MiB", status = "measured", source = ["T"] }'),
    )
    assert spec.memory.capacity_bytes.nominal == 85_899_345_920
    assert spec.hbm_bytes.nominal == 85_520_809_984 and spec.memory.capacity_basis == "usable"


def test_usable_above_stated_capacity_is_rejected(tmp_path, write_profile) -> None:
    text = _gpu('hbm_capacity = { nominal = 80, unit = "GB", source = ["T"] }\n'
                'hbm_usable = { nominal = 81559, unit = "MiB", source = ["T"] }')  # 85.5e9 > 80e9
    with pytest.raises(ProfileError) as ei:
        _load(tmp_path, write_profile, text)
    assert ei.value.field == "memory" and "exceeds the stated capacity" in ei.value.message


# --- published usable capacities are what fit uses ------------------------------------------------
USABLE = {
    # sku: (bytes fit must use, arithmetic, where it is published)
    "h100": (81_559 * 2**20, "81,559 MiB x 2^20 = 85,520,809,984 B", "nvidia-smi 'NVIDIA H100 80GB HBM3'"),
    "b200": (183_359 * 2**20, "183,359 MiB x 2^20 = 192,265,846,784 B", "nvidia-smi 'NVIDIA B200', driver 570.172.08"),
    "mi300x": (205_822_885_888, "205,822,885,888 B", "rocm-smi 'VRAM Total Memory (B)'"),
    "h200": (143_771 * 2**20, "143,771 MiB x 2^20 = 150,754,820,096 B", "nvidia-smi 'NVIDIA H200' (SXM, 700 W)"),
    "a100": (81_920 * 2**20, "81,920 MiB x 2^20 = 85,899,345,920 B = 80 GiB", "nvidia-smi 'NVIDIA A100-SXM4-80GB'"),
    # B300 and GB300: NVIDIA's own per-GPU usable figures, 270 GB and 279 GB (GiB-sized)
    "b300": (270 * 2**30, "270 x 2^30 = 289,910,292,480 B", "NVIDIA datasheet; MLPerf system B300-SXM-270GB"),
    "gb300": (279 * 2**30, "279 x 2^30 = 299,573,968,896 B", "NVIDIA Blackwell Ultra datasheet"),
}


@pytest.mark.parametrize("sku", sorted(USABLE))
def test_fit_uses_the_driver_reported_capacity(catalog, sku) -> None:
    from mi400plan.api.fit import fit

    expected, _arith, _where = USABLE[sku]
    assert 81_559 * 2**20 == 85_520_809_984 and 183_359 * 2**20 == 192_265_846_784
    assert 143_771 * 2**20 == 150_754_820_096 and 81_920 * 2**20 == 80 * 2**30
    row = fit(catalog, "llama3.1-8b", [sku], "infer", reserve="0").rows[0]
    assert row.capacity_bytes == expected
    assert catalog.get("accelerators", sku).spec.memory.capacity_basis == "usable"


# --- rate bases -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('fp4_dense_tflops = { nominal = 50000, basis = "sparse", source = ["T"] }', "fp4_dense_tflops"),
        ('fp4_dense_tflops = { nominal = 50000, basis = "compressed", source = ["T"] }', "fp4_dense_tflops"),
        ('fp4_sparse_tflops = { nominal = 50000, basis = "dense", source = ["T"] }', "fp4_sparse_tflops"),
    ],
)
def test_declared_basis_must_match_the_key(tmp_path, write_profile, cli, line, field) -> None:
    text = _gpu('hbm_capacity = { nominal = 10, unit = "GiB", source = ["T"] }', extra=f"\n[compute]\n{line}\n")
    path = write_profile(tmp_path, "accelerators", "tgpu", text)
    r = cli(["profiles", "validate", str(path), "--json"])
    assert r.exit_code == 3, r.output
    issue = json.loads(r.stdout)["data"]["rows"][0]["issues"][0]
    assert issue["field"] == "compute" and f"compute.{field} declares basis" in issue["message"]
    assert "rule:" in issue["message"]


def test_compressed_rate_has_its_own_key(tmp_path, write_profile) -> None:
    text = _gpu(
        'hbm_capacity = { nominal = 10, unit = "GiB", source = ["T"] }',
        extra='\n[compute]\nfp4_dense_tflops = { nominal = 35000, basis = "dense", source = ["T"] }\n'
        'fp4_compressed_tflops = { nominal = 50000, basis = "compressed", source = ["T"] }\n',
    )
    c = _load(tmp_path, write_profile, text).compute
    assert c.peak_flops("fp4").nominal == 35_000e12  # the planner reads the dense key only
    assert c.fp4_compressed_tflops.nominal == 50_000


@pytest.mark.parametrize("name", _BUNDLED.names("accelerators"))
def test_no_bundled_dense_key_holds_a_sparse_or_compressed_rate(name) -> None:
    c = _BUNDLED.get("accelerators", name).spec.compute
    for key in type(c).model_fields:
        est = getattr(c, key)
        if "_dense_" in key and getattr(est, "basis", None) is not None:
            assert est.basis == "dense", (name, key)
        if "_dense_" in key and est.note:
            words = est.note.lower()
            assert "with sparsity" not in words and "adaptive compression" not in words, (name, key, est.note)
