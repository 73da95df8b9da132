"""Output hygiene: JSON and CSV name bundled profiles ``<bundled>/...`` as the tables do (no install
path), CSV counts are integers, and a ``--reserve`` that takes the whole HBM warns."""

from __future__ import annotations

import csv
import io
import json

import pytest

from mi400plan.profiles import bundled_root

ROOT = str(bundled_root())


@pytest.mark.parametrize("args", [
    ["profiles", "list"], ["profiles", "show", "mi300x"], ["profiles", "validate"],
    ["fit", "llama3.1-8b", "--sku", "mi300x"], ["rack", "helios"],
])
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_no_install_path_in_json_or_csv(cli, args, fmt):
    r = cli([*args, "--format", fmt])
    assert r.exit_code == 0, r.output
    assert ROOT not in r.stdout
    if args[:2] == ["profiles", "list"] and fmt == "json":
        rows = json.loads(r.stdout)["data"]["rows"]
        assert rows and all(row["path"] == f"<bundled>/{row['kind']}/{row['name']}.toml" for row in rows)
    if args[0] == "fit" and fmt == "json":
        row = json.loads(r.stdout)["data"]["rows"][0]
        assert row["profile"] == "<bundled>/accelerators/mi300x.toml"


def test_user_profiles_keep_their_own_path(cli, tmp_path):
    d = tmp_path / "accelerators"
    d.mkdir()
    (d / "mi300x.toml").write_text((bundled_root() / "accelerators" / "mi300x.toml").read_text())
    rows = json.loads(cli(["profiles", "list", "--json", "--profiles", str(tmp_path)]).stdout)["data"]["rows"]
    mine = next(r for r in rows if r["name"] == "mi300x")
    assert mine["path"] == str(d / "mi300x.toml") and mine["origin"] == "user"


def test_csv_counts_are_integers(cli):
    r = cli(["serve", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert rows[0]["gpus"] == "8"  # was "8.0": the model keeps a float (disaggregated pools can be fractional)
    assert rows[0]["concurrency"].isdigit() and rows[0]["layout.tp"].isdigit()
    assert rows[0]["memory_bytes.total"].isdigit()
    assert "." in rows[0]["tokens_per_s_per_gpu"]  # rates stay as they are


def test_a_reserve_larger_than_the_hbm_warns(cli):
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--reserve", "1.5TB", "--json"])
    warnings = json.loads(r.stdout)["data"]["warnings"]
    hit = [w for w in warnings if w.startswith("--reserve '1.5TB'")]
    # 1.5 TB = 1.5e12 B = 1,500.0 GB = 1,397.0 GiB; MI300X's usable 205,822,885,888 B = 205.8 GB
    assert len(hit) == 1 and "1,500.0 GB = 1,397.0 GiB" in hit[0]
    assert "mi300x (205.8 GB" in hit[0] and "h100 (" in hit[0]
    table = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--reserve", "1.5TB"])
    assert "warning: --reserve '1.5TB'" in " ".join(table.output.split())
    ok = json.loads(cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--reserve", "4GiB", "--json"]).stdout)
    assert not any("--reserve" in w for w in ok["data"]["warnings"])


class _Row:
    def __init__(self, gb: float) -> None:
        self.memory_bytes = type("M", (), {"total": gb * 1e9})()


def test_pareto_table_drops_near_duplicate_layouts():
    from mi400plan.render.sweep import distinct_front

    front = [_Row(x) for x in (74.8, 65.6, 62.9, 62.0, 61.6, 48.3, 46.1, 45.5)]
    # 62.0 and 61.6 save under 3 % on 62.9 (62.9 x 0.97 = 61.01); 45.5 is the end of the front and
    # replaces 46.1, which it barely undercuts
    kept = [r.memory_bytes.total / 1e9 for r in distinct_front(front)]
    assert kept == [74.8, 65.6, 62.9, 48.3, 45.5]
    assert [r.memory_bytes.total / 1e9 for r in distinct_front(front[:1])] == [74.8]


def test_sweep_pareto_table_says_what_it_left_out(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    args = ["sweep", "gpt3-175b", "--sku", "a100", "--gpus", "1024", "--no-ranges", "--pareto"]
    out = cli(args).stdout
    table = out.split("Trade-off front", 1)[1].split("Each layout", 1)[0]
    mems = [float(line.split(" GB")[0].split()[-1]) for line in table.splitlines() if " GB " in line]
    assert len(mems) >= 5
    assert all(b <= 0.97 * a for a, b in zip(mems[:-2], mems[1:-1]))
    assert "left out: each saves under 3% memory" in " ".join(out.split())
    full = json.loads(cli([*args, "--json"]).stdout)["data"]["pareto"]
    assert len(full) > len(mems)  # the JSON keeps the whole front


@pytest.mark.parametrize("args", [
    ["serve", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8"],
    ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8", "--no-ranges"],
])
def test_serve_and_sweep_warn_about_a_reserve_larger_than_the_hbm(cli, args):
    warnings = json.loads(cli([*args, "--reserve", "1.5TB", "--json"]).stdout)["data"]["warnings"]
    assert any(w.startswith("--reserve '1.5TB'") and "mi300x (205.8 GB" in w for w in warnings), warnings
    ok = json.loads(cli([*args, "--reserve", "4GiB", "--json"]).stdout)["data"]["warnings"]
    assert not any("--reserve" in w for w in ok)
