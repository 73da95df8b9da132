"""``mi400plan comm`` end to end: spellings, units, errors and exit codes, JSON rows."""

from __future__ import annotations

import json

import pytest

ROW_KEYS = {"op", "algorithm", "size_bytes", "group", "tier", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s"}


def data(res):
    env = json.loads(res.stdout)
    assert env["command"] == "comm"
    return env


@pytest.mark.parametrize("spelling", ["allreduce", "all-reduce", "all_reduce"])
def test_op_spellings(cli, spelling) -> None:
    res = cli(["comm", spelling, "--size", "32MB", "--group", "8", "--bw", "300GB/s", "--algo", "ring", "--json"])
    assert res.exit_code == 0, res.output
    row = data(res)["data"]["rows"][0]
    assert row["op"] == "all_reduce"
    # 2 x 7/8 x 32e6 B / 300e9 B/s = 186.67 us
    assert row["time_s"] == pytest.approx(186.667e-6, rel=1e-4)


@pytest.mark.parametrize("a,b", [("alltoall", "all-to-all"), ("allgather", "all-gather"),
                                 ("reducescatter", "reduce-scatter"), ("sendrecv", "send-recv")])
def test_both_spellings_agree(cli, a, b) -> None:
    args = ["--size", "1MiB", "--group", "8", "--fabric", "xgmi-mi300", "--json"]
    ra, rb = cli(["comm", a, *args]), cli(["comm", b, *args])
    assert ra.exit_code == rb.exit_code == 0
    assert data(ra)["data"]["rows"] == data(rb)["data"]["rows"]


def test_mib_differs_from_mb(cli) -> None:
    rows = {}
    for size in ("32MB", "32MiB"):
        res = cli(["comm", "allreduce", "--size", size, "--group", "8", "--bw", "300GB/s", "--algo", "ring", "--json"])
        rows[size] = data(res)["data"]["rows"][0]
    assert rows["32MB"]["size_bytes"] == 32_000_000
    assert rows["32MiB"]["size_bytes"] == 33_554_432
    # 2 x 7/8 x 33,554,432 / 300e9 = 195.73 us
    assert rows["32MiB"]["time_s"] == pytest.approx(195.734e-6, rel=1e-4)


def test_bits_vs_bytes_and_latency(cli) -> None:
    # 400 Gb/s = 50 GB/s; send-recv of 1 GB: 1e9 / 50e9 = 20 ms, plus 5 us latency
    res = cli(["comm", "sendrecv", "--size", "1GB", "--group", "2", "--bw", "400Gb/s", "--latency", "5us", "--json"])
    row = data(res)["data"]["rows"][0]
    assert row["time_s"] == pytest.approx(0.02 + 5e-6)
    assert row["busbw_bytes_per_s"] == pytest.approx(1e9 / (0.02 + 5e-6))


def test_json_keys_and_busbw(cli) -> None:
    res = cli(["comm", "all-to-all", "--size", "8GB", "--group", "8", "--fabric", "xgmi-mi350", "--json"])
    assert res.exit_code == 0
    env = data(res)
    row = env["data"]["rows"][0]
    assert ROW_KEYS <= set(row)
    assert row["tier"] == "scale_up" and row["algorithm"] == "direct"
    # busbw = algbw x 7/8, and algbw = S / t
    assert row["algbw_bytes_per_s"] == pytest.approx(8e9 / row["time_s"])
    assert row["busbw_bytes_per_s"] == pytest.approx(row["algbw_bytes_per_s"] * 7 / 8)
    # below 537.6 GB/s x efficiency
    sys = env["data"]["systems"][0]["scale_up"]
    assert row["busbw_bytes_per_s"] <= sys["bw_per_dir_bytes_per_s"] * sys["efficiency"]


def test_size_range_table(cli) -> None:
    res = cli(["comm", "allreduce", "--size", "1KiB..8GiB", "--group", "8", "--fabric", "xgmi-mi350", "--json"])
    rows = data(res)["data"]["rows"]
    # 1 KiB doubling to 8 GiB: 2^10 .. 2^33 -> 24 sizes
    assert [r["size_bytes"] for r in rows] == [2**k for k in range(10, 34)]
    assert rows[0]["bound"] == "latency" and rows[-1]["bound"] == "bandwidth"
    text = cli(["comm", "allreduce", "--size", "1KiB..8GiB", "--group", "8", "--fabric", "xgmi-mi350"])
    assert text.exit_code == 0
    assert "busbw" in text.stdout and "8.0 GiB" in text.stdout


def test_sku_comparison_shows_the_cliff(cli) -> None:
    res = cli(["comm", "allreduce", "--size", "8GB", "--group", "9", "--stride", "8",
               "--sku", "gb200", "--sku", "mi355x", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["system"]: r for r in data(res)["data"]["rows"]}
    assert rows["gb200"]["tier"] == "scale_up"
    assert rows["mi355x"]["tier"] == "scale_out"
    # 900 GB/s x 0.8 vs 50 GB/s x 0.9 nominal efficiencies: 720 / 45 = 16x at large sizes
    assert rows["mi355x"]["relative_to_fastest"] == pytest.approx(720 / 45, rel=0.01)
    contiguous = cli(["comm", "allreduce", "--size", "8GB", "--group", "72", "--sku", "mi355x", "--json"])
    assert data(contiguous)["data"]["rows"][0]["tier"] == "hierarchical"


def test_several_fabrics_side_by_side(cli) -> None:
    res = cli(["comm", "allreduce", "--size", "64MB", "--group", "8", "--fabric", "xgmi-mi300",
               "--fabric", "nvlink4-hgx8"])
    assert res.exit_code == 0
    assert "Comparison" in res.stdout and "xgmi-mi300" in res.stdout and "nvlink4-hgx8" in res.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--size", "32XB", "--group", "8", "--bw", "300GB/s"], "unknown size unit"),
        (["--size", "32MB", "--group", "8", "--bw", "300GB"], "cannot read bandwidth"),
        (["--size", "32MB", "--group", "8", "--bw", "300GB/s", "--latency", "5 parsecs"], "cannot read time"),
        (["--size", "32MB", "--group", "1", "--bw", "300GB/s"], "--group"),
        (["--size", "32MB", "--group", "8"], "--fabric"),
        (["--size", "32MB", "--group", "6", "--bw", "300GB/s", "--algo", "rhd"], "power-of-two"),
        (["--size", "32MB", "--group", "16", "--fabric", "xgmi-mi300"], "--scale-out"),
    ],
)
def test_usage_errors_exit_2(cli, args, needle) -> None:
    res = cli(["comm", "allreduce", *args])
    assert res.exit_code == 2
    assert needle in res.output


def test_unknown_op_exit_2(cli) -> None:
    res = cli(["comm", "allreduse", "--size", "1MB", "--group", "8", "--bw", "1GB/s"])
    assert res.exit_code == 2 and "allreduce/all-reduce" in res.output


def test_unknown_fabric_exit_3_with_suggestion(cli) -> None:
    res = cli(["comm", "allreduce", "--size", "1MB", "--group", "8", "--fabric", "xgmi-mi30"])
    assert res.exit_code == 3
    assert "did you mean" in res.output and "xgmi-mi300" in res.output
    js = cli(["comm", "allreduce", "--size", "1MB", "--group", "8", "--fabric", "xgmi-mi30", "--json"])
    env = json.loads(js.stdout)
    assert js.exit_code == 3 and env["status"] == "error" and env["errors"][0]["code"] == "unknown_name"


def test_not_disclosed_bandwidth_exit_3(cli) -> None:
    res = cli(["comm", "allreduce", "--size", "1MB", "--group", "8", "--fabric", "mi440x-8gpu"])
    assert res.exit_code == 3 and "not disclosed" in res.output


def test_scale_out_pairing(cli) -> None:
    res = cli(["comm", "allreduce", "--size", "1GB", "--group", "16", "--fabric", "xgmi-mi300",
               "--scale-out", "ib-ndr-400", "--json"])
    assert res.exit_code == 0
    row = data(res)["data"]["rows"][0]
    assert row["tier"] == "hierarchical" and row["domains"] == 2 and row["group_in_domain"] == 8


def test_narrow_terminal_keeps_whole_numbers(cli, monkeypatch) -> None:  # noqa: ANN001
    # At 80 columns the fast..slow range and the hierarchical path used to end in "...".
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(["comm", "allreduce", "--size", "32MB", "--group", "1000", "--sku", "mi355x"])
    assert r.exit_code == 0, r.output
    assert "\u2026" not in r.stdout
    assert "125x8" in r.stdout  # 1000 GPUs = 125 domains x 8 GPUs
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("32.0 MB"))
    assert any(".." in tok and tok[0].isdigit() and tok[-1].isdigit() for tok in line.split())


def test_rows_name_the_sku_like_fit_and_rack(cli) -> None:  # noqa: ANN001
    # fit and rack rows call the accelerator "sku"; comm rows now do too (system stays for fabrics).
    rows = json.loads(cli(["comm", "allreduce", "--size", "32MB", "--group", "8", "--sku", "mi355x",
                           "--fabric", "nvlink5-nvl72", "--json"]).stdout)["data"]["rows"]
    by = {r["system"]: r for r in rows}
    assert by["mi355x"]["sku"] == "mi355x" and by["nvlink5-nvl72"]["sku"] is None


def test_scale_out_fabric_alone_is_labelled_scale_out(cli) -> None:  # noqa: ANN001
    # --fabric pollara-400 is a scale-out tier (400 Gb/s = 50 GB/s per direction); its rows used to say scale_up.
    r = cli(["comm", "allreduce", "--size", "32MB", "--group", "8", "--fabric", "pollara-400", "--json"])
    row = json.loads(r.stdout)["data"]["rows"][0]
    assert row["tier"] == "scale_out"
    assert row["busbw_bytes_per_s"] <= 400e9 / 8  # never above the per-GPU NIC rate


def test_op_shown_with_the_cli_spelling_and_hint_without_duplicates(cli) -> None:  # noqa: ANN001
    r = cli(["comm", "allreduce", "--size", "32MB", "--group", "8", "--bw", "300GB/s"])
    assert "all-reduce, group 8" in r.stdout and "all_reduce" not in r.stdout
    r = cli(["comm", "bogus", "--size", "32MB", "--group", "8", "--bw", "300GB/s"])
    assert r.exit_code == 2 and "broadcast/broadcast" not in r.output and "all-to-all" in r.output


def test_csv_columns_are_the_json_row_fields(cli, csv_matches_json) -> None:  # noqa: ANN001
    header, json_keys, _ = csv_matches_json(
        ["comm", "allreduce", "--size", "1MiB..4MiB", "--group", "16", "--sku", "mi355x", "--fabric", "pollara-400"])
    assert sorted(header) == sorted(json_keys) and "busbw_bytes_per_s" in header and "sku" in header


def test_all_to_all_on_a_torus_says_it_is_not_modelled(cli) -> None:  # noqa: ANN001
    # auto (no --algo) finds no valid algorithm: the message must not blame an algorithm choice
    # ("algorithm None") or tell the user to leave --algo at auto, which they did.
    res = cli(["comm", "all-to-all", "--size", "1MB", "--group", "16", "--fabric", "ici-v6e"])
    assert res.exit_code == 2
    out = " ".join(res.output.split())
    assert "all_to_all is not modelled on a torus tier" in out
    assert "None" not in out and "leave --algo at auto" not in out
    assert "--bw" in out


def test_oneshot_is_not_an_alias_of_the_two_shot_direct_algorithm(cli) -> None:  # noqa: ANN001
    # one-shot all-reduce (a + (n-1) S/B: 7 x 32e6 / 300e9 = 746.7 us on 8 GPUs) is not the two-shot
    # "direct" cost (2a + 2 x 7/8 x 32e6 / 300e9 = 186.7 us); the name must not silently give the latter.
    res = cli(["comm", "allreduce", "--size", "32MB", "--group", "8", "--bw", "300GB/s", "--algo", "oneshot"])
    assert res.exit_code == 2 and "unknown algorithm" in res.output
    ok = cli(["comm", "allreduce", "--size", "32MB", "--group", "8", "--bw", "300GB/s", "--algo", "twoshot", "--json"])
    assert ok.exit_code == 0
    assert data(ok)["data"]["rows"][0]["time_s"] == pytest.approx(2 * 7 / 8 * 32e6 / 300e9, rel=1e-9)


def test_tpu7x_group_of_64_is_a_cube(cli) -> None:  # noqa: ANN001
    # 64 chips = 4x4x4 with wraparound: 600 GB/s x 0.8 nominal efficiency = 480 GB/s for the per-dimension
    # rings; all-reduce of 1 GB: 2 x 63/64 x 1e9 / 480e9 = 4.1016 ms + 2 x (3+3+3) steps x 1 us = 4.1196 ms
    res = cli(["comm", "allreduce", "--size", "1GB", "--group", "64", "--fabric", "ici-tpu7x", "--json"])
    assert res.exit_code == 0, res.output
    env = data(res)
    assert env["data"]["systems"][0]["torus_slice"] == "4x4x4 (wraparound: all)"
    assert env["data"]["rows"][0]["time_s"] == pytest.approx(2 * 63 / 64 * 1e9 / 480e9 + 18e-6, rel=1e-9)
    part = data(cli(["comm", "allreduce", "--size", "1GB", "--group", "48", "--fabric", "ici-tpu7x", "--json"]))
    assert part["data"]["systems"][0]["torus_slice"] == "4x4x3 (wraparound: dim 1, 2) in a 4x4x4 slice"
    text = cli(["comm", "allreduce", "--size", "1GB", "--group", "64", "--fabric", "ici-tpu7x"])
    assert "torus slice for the group: 4x4x4" in text.stdout


def test_partly_filled_node_is_shown_and_bounds_the_time(cli) -> None:  # noqa: ANN001
    # 12 MI355X = 8 + 4 over two 8-GPU nodes. Nominal: mesh 76.8 GB/s x 0.8 per link, 1 us; NIC 50 GB/s x 0.9, 5 us.
    # Inside, the 4-GPU node (3 links): 1 us + 3/4 x 8e9 / (3 x 61.44e9) = 32.553 ms, twice (reduce-scatter,
    # all-gather); across, 8e9 / 4 = 2e9 per NIC: 2 x 5 us + 2 x 1/2 x 2e9 / 45e9 = 44.454 ms. Total 109.56 ms.
    res = cli(["comm", "allreduce", "--size", "8GB", "--group", "12", "--sku", "mi355x", "--json"])
    env = data(res)
    row = env["data"]["rows"][0]
    inner = 1e-6 + 3 / 4 * 8e9 / (3 * 76.8e9 * 0.8)
    cross = 2 * 5e-6 + 2 * 1 / 2 * 2e9 / 45e9
    assert row["time_s"] == pytest.approx(2 * inner + cross, rel=1e-9)
    assert (row["domains"], row["group_in_domain"], row["group_in_domain_min"]) == (2, 8, 4)
    assert any("hold 4 to 8 members" in w for w in env["data"]["warnings"])
    text = cli(["comm", "allreduce", "--size", "8GB", "--group", "12", "--sku", "mi355x"])
    assert "2x(4..8)" in text.stdout
