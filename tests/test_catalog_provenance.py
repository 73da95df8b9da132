"""Text rules of a profile (mi400plan/specs/provenance.py): numbers in a description agree with the
profile's fields, and no value cites an internal note. Expected matches are worked by hand below."""

from __future__ import annotations

import json

import pytest

from mi400plan.profiles import KINDS, Catalog, bundled_root
from mi400plan.specs.common import Source
from mi400plan.specs.provenance import description_errors, internal_citation_errors, is_internal_note

_BUNDLED = Catalog.default([])
ENTRIES = [(k, n) for k in KINDS for n in _BUNDLED.names(k)]


@pytest.mark.parametrize(("kind", "name"), ENTRIES, ids=[f"{k}/{n}" for k, n in ENTRIES])
def test_every_bundled_profile_follows_the_text_rules(kind, name) -> None:
    spec = _BUNDLED.get(kind, name).spec
    assert description_errors(spec) == [], name
    assert internal_citation_errors(spec) == [], name


def _with_description(kind: str, name: str, text: str):
    return _BUNDLED.get(kind, name).spec.model_copy(update={"description": text})


def test_description_numbers_match_within_the_digits_written() -> None:
    """b300: hbm_bandwidth_tb_per_s 7.7, hbm_capacity 288, hbm_usable 270, tdp_w 1,100."""
    ok = "288 GB (270 GB usable) at 7.7 TB/s, 1,100 W, 2,250 TFLOPS BF16, 1.1 kW"
    assert description_errors(_with_description("accelerators", "b300", ok)) == []
    # "8 TB/s" is 7.5-8.5 TB/s as written, so 7.7 fits; "8.0 TB/s" is 7.95-8.05 and 7.7 does not.
    assert description_errors(_with_description("accelerators", "b300", "at 8 TB/s")) == []
    errs = description_errors(_with_description("accelerators", "b300", "288 GB at 8.0 TB/s"))
    assert len(errs) == 1 and "'8.0 TB/s'" in errs[0] and "7.7" in errs[0]


def test_description_units_convert_to_the_fields_units() -> None:
    """ici-v5p: 600 GB/s per direction = 4,800 Gb/s (x 8); cx9-1600: 1,600 Gb/s = 1.6 Tb/s = 200 GB/s."""
    assert description_errors(_with_description("fabrics", "ici-v5p", "4,800 Gb/s ICI per chip")) == []
    assert description_errors(_with_description("fabrics", "cx9-1600", "1.6 Tb/s per GPU")) == []
    errs = description_errors(_with_description("fabrics", "cx9-1600", "800 Gb/s per GPU"))
    assert len(errs) == 1 and "800 Gb/s" in errs[0]


def test_a_figure_of_another_profile_or_kind_fails() -> None:
    """h100 carries no NVLink field: the fabric's 900 GB/s belongs in nvlink4-hgx8, not here."""
    errs = description_errors(_with_description("accelerators", "h100", "NVLink 4 at 900 GB/s"))
    assert len(errs) == 1 and "900 GB/s" in errs[0]
    # counts and years carry no unit and are not checked
    assert description_errors(_with_description("accelerators", "h100", "8 per board since 2022")) == []


def test_internal_notes_by_flag_or_by_title() -> None:
    assert is_internal_note(Source(title="anything", date="2026", internal=True))
    assert is_internal_note(Source(title="spec audit 2026-11 (shared/SPECS-AUDIT-2026-11.md)", date="2026-11-23"))
    assert not is_internal_note(Source(title="NVIDIA BCM manual, 'BCM Power Shelf Integration'", date="2026"))


def _b300_text(old: str, new: str) -> str:
    text = (bundled_root() / "accelerators" / "b300.toml").read_text()
    assert old in text
    return text.replace(old, new, 1)


def _messages(r) -> list[str]:
    return [i["message"] for row in json.loads(r.stdout)["data"]["rows"] for i in row["issues"]]


def test_validate_fails_a_description_that_contradicts_its_fields(tmp_path, write_profile, cli) -> None:
    text = _b300_text("at 7.7 TB/s, 1,100 W", "at 8.0 TB/s, 1,100 W")
    path = write_profile(tmp_path, "accelerators", "b300", text)
    r = cli(["profiles", "validate", str(path), "--json"])
    assert r.exit_code == 3, r.output
    assert any("description: '8.0 TB/s'" in m for m in _messages(r)), _messages(r)


def test_validate_fails_a_value_citing_an_internal_note(tmp_path, write_profile, cli) -> None:
    text = _b300_text("[sources]\n", '[sources]\nNOTE = { title = "our working summary", date = "2026-11-28", internal = true }\n')
    text = text.replace('tdp_w = { nominal = 1100, status = "D†", source = ["VD"]', 'tdp_w = { nominal = 1100, status = "D†", source = ["NOTE"]', 1)
    path = write_profile(tmp_path, "accelerators", "b300", text)
    r = cli(["profiles", "validate", str(path), "--json"])
    assert r.exit_code == 3, r.output
    assert any("power.tdp_w: cites [sources] NOTE, an internal note" in m for m in _messages(r)), _messages(r)


def test_an_internal_note_listed_but_not_cited_passes(tmp_path, write_profile, cli) -> None:
    text = _b300_text("[sources]\n", '[sources]\nNOTE = { title = "our working summary", date = "2026-11-28", internal = true }\n')
    path = write_profile(tmp_path, "accelerators", "b300", text)
    r = cli(["profiles", "validate", str(path), "--json"])
    assert r.exit_code == 0, r.output
