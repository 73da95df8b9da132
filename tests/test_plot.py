"""``--plot PATH``: every plot renders to a valid PNG and SVG with the expected series, and the
option's contract (extension, --force, missing matplotlib, JSON untouched) holds.

The drawing tests need matplotlib (the ``plot`` extra; the ``test`` extra installs it, so CI runs
them); without it they are skipped and only the missing-extra behaviour is tested.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

GIB = 2**30
SVG_NS = "{http://www.w3.org/2000/svg}"

# command line, series labels the legend must carry
CASES = {
    "fit": (["fit", "llama3.1-70b", "--sku", "mi300x", "--sku", "h100", "--tp", "8"],
            ["weights", "gradients", "optimizer states", "activations", "usable HBM capacity"]),
    "fit-fewest": (["fit", "llama3.1-70b", "--sku", "mi300x", "--sku", "h100"],
                   ["memory per GPU at the fewest GPUs that fit", "usable HBM capacity", "mi300x: 8 GPUs (TP4 PP2)"]),
    "sweep-scaling": (["sweep", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--gpus", "64..128", "--top", "1"],
                      ["mi300x", "h100", "mi300x estimate range"]),
    "sweep-tradeoff": (["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--top", "8", "--no-ranges"],
                       ["mi300x", "mi300x HBM capacity"]),
    "serve": (["serve", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--no-ranges", "--interactivity", "50"],
              ["mi300x", "h100", "SLA: 50 tok/s/user"]),
    "serve-scenario": (["serve", "llama3.1-8b", "--sku", "mi300x", "--scenario", "server", "--output-len", "256",
                        "--no-ranges"], ["p99 TTFT limit 2 s", "p99 TPOT limit 200 ms", "mi300x answer", "solid: p99"]),
    "serve-offline": (["serve", "llama3.1-8b", "--sku", "mi300x", "--scenario", "offline", "--output-len", "256",
                       "--no-ranges"], ["mi300x answer", "steady-state model"]),
    "comm": (["comm", "all-reduce", "--size", "1MiB..64MiB", "--group", "8", "--sku", "mi300x", "--sku", "h100"],
             ["mi300x", "h100", "mi300x estimate range"]),
    "rack": (["rack", "gb200-nvl72", "helios"],
             ["GPUs", "CPUs and memory", "switch ASICs", "power conversion loss", "feeds' usable power"]),
}


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the PNG signature and IHDR chunk (PNG spec, sec. 5.2 and 11.2.2)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def svg_texts(data: bytes) -> list[str]:
    root = ET.fromstring(data)
    assert root.tag == f"{SVG_NS}svg"
    return ["".join(t.itertext()) for t in root.iter(f"{SVG_NS}text")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_plot_renders_png_and_svg_with_series(cli, tmp_path, case):
    pytest.importorskip("matplotlib")
    args, series = CASES[case]
    png, svg = tmp_path / "p.png", tmp_path / "p.svg"
    r = cli([*args, "--plot", str(png)])
    assert r.exit_code in (0, 4), r.output
    w, h = png_size(png.read_bytes())
    assert w > 600 and h > 400
    assert "plot written to" in r.stderr
    cli([*args, "--plot", str(svg)])
    texts = svg_texts(svg.read_bytes())
    for label in series:
        assert any(label in t for t in texts), (label, texts)
    assert any("mi400plan" in t for t in texts)  # the source footer


def test_fit_bars_stack_to_each_skus_total(cli):
    """The stacked bar of each SKU ends at its total (the sum of the parts in the JSON rows)."""
    pytest.importorskip("matplotlib")
    from mi400plan.api.fit import LayoutPins, fit
    from mi400plan.profiles import Catalog
    from mi400plan.render.plot import figure_for

    result = fit(Catalog.default([]), "llama3.1-70b", ["mi300x", "h100"], "train", layout=LayoutPins(tp=8))
    ax = figure_for(result).axes[0]
    ends: dict[float, float] = {}
    for bar in ax.patches:
        y = round(bar.get_y() + bar.get_height() / 2, 6)
        ends[y] = max(ends.get(y, 0.0), bar.get_x() + bar.get_width())
    rows = list(reversed(result.rows))  # first SKU on top
    m = rows[0].memory_bytes
    parts = m.weights + m.gradients + m.optimizer + m.activations + m.kv_cache + m.reserve
    assert parts == m.total
    assert ends[0.0] == pytest.approx(m.total / 1e9)  # GB, the fit table's unit
    assert ends[1.0] == pytest.approx(rows[1].memory_bytes.total / 1e9)


def test_comm_line_is_busbw_in_gb_per_s(cli):
    """Each point is the JSON row's busbw / 1e9 at its size (GB/s, decimal)."""
    pytest.importorskip("matplotlib")
    from mi400plan.api.comm import comm
    from mi400plan.profiles import Catalog
    from mi400plan.render.plot import figure_for

    result = comm(Catalog.default([]), "all-reduce", "1MiB..4MiB", "8", skus=["mi300x"])
    line = next(ln for ln in figure_for(result).axes[0].get_lines() if ln.get_label() == "mi300x")
    assert list(line.get_xdata()) == [2**20, 2**21, 2**22]
    assert list(line.get_ydata()) == pytest.approx([r.busbw_bytes_per_s / 1e9 for r in result.rows])


def test_plot_refuses_to_overwrite_without_force(cli, tmp_path):
    target = tmp_path / "fit.png"
    target.write_bytes(b"keep")
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--plot", str(target)])
    assert r.exit_code == 2
    assert "already exists" in r.stderr and "--force" in r.stderr
    assert target.read_bytes() == b"keep"
    assert r.stdout == ""  # refused before any work


def test_plot_force_replaces(cli, tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "rack.svg"
    target.write_bytes(b"old")
    r = cli(["rack", "helios", "--plot", str(target), "--force"])
    assert r.exit_code == 0, r.output
    assert svg_texts(target.read_bytes())
    assert [p.name for p in tmp_path.iterdir()] == ["rack.svg"]  # no temporary file left behind


@pytest.mark.parametrize("name", ["plot.pdf", "plot", "plot.jpeg"])
def test_plot_extension_must_be_png_or_svg(cli, tmp_path, name):
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--plot", str(tmp_path / name)])
    assert r.exit_code == 2
    assert ".png or .svg" in r.stderr


def test_plot_without_matplotlib_names_the_extra(cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    r = cli(["comm", "all-reduce", "--size", "1MiB", "--group", "8", "--sku", "mi300x",
             "--plot", str(tmp_path / "c.png")])
    assert r.exit_code == 2
    assert "matplotlib" in r.stderr and "pip install 'mi400plan[plot]'" in r.stderr
    assert not (tmp_path / "c.png").exists()
    r = cli(["comm", "all-reduce", "--size", "1MiB", "--group", "8", "--sku", "mi300x",
             "--plot", str(tmp_path / "c.png"), "--json"])
    env = json.loads(r.stdout)
    assert r.exit_code == 2 and env["status"] == "error" and "mi400plan[plot]" in env["errors"][0]["hint"]


def test_plot_with_json_keeps_stdout_one_envelope(cli, tmp_path):
    pytest.importorskip("matplotlib")
    r = cli(["rack", "helios", "--plot", str(tmp_path / "r.png"), "--json"])
    env = json.loads(r.stdout)
    assert env["status"] == "ok"
    assert (tmp_path / "r.png").exists()


def test_matplotlib_is_imported_only_for_plot():
    code = (
        "import sys\n"
        "from mi400plan.cli import main\n"
        "try:\n"
        "    main(['fit', 'llama3.1-8b', '--sku', 'mi300x', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(str('matplotlib' in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.endswith("False")


def test_fit_all_skus_plots_each_skus_fitting_layout_sorted(cli):
    """--sku all on one GPU (nothing fits): one bar per SKU at its fewest-GPU fitting layout, sorted by
    GPUs then memory, in GB as the table (GiB on the top axis); SKUs without a capacity listed last."""
    pytest.importorskip("matplotlib")
    from mi400plan.api.fit import fit
    from mi400plan.profiles import Catalog
    from mi400plan.render.plot import figure_for

    result = fit(Catalog.default([]), "llama3.1-70b", ["all"], "train")
    assert len(result.rows) >= 27 and not any(r.fits for r in result.rows)
    fig = figure_for(result)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "memory per GPU on the most loaded rank (GB, 10^9 bytes)"
    assert any("GiB" in a.get_xlabel() for a in ax.child_axes)  # the secondary axis
    labels = [t.get_text() for t in ax.get_yticklabels()][::-1]  # top first
    fitting = sorted((r for r in result.rows if r.min_memory_bytes is not None),
                     key=lambda r: (r.min_gpus, r.min_memory_bytes, r.sku))
    assert labels[:len(fitting)] == [f"{r.sku}: {r.min_gpus:,} GPUs ({r.min_layout.replace('--tp ', 'TP').replace(' --pp ', ' PP')})"
                                     for r in fitting]
    gpus = [int(lab.split(": ")[1].split(" GPUs")[0].replace(",", "")) for lab in labels[:len(fitting)]]
    assert gpus == sorted(gpus) and gpus[0] < gpus[-1]
    widths = {round(b.get_y() + b.get_height() / 2): b.get_width() for b in ax.patches}
    top = len(labels) - 1
    assert widths[top] == pytest.approx(fitting[0].min_memory_bytes / 1e9)
    assert fig.get_size_inches()[1] >= 0.28 * len(labels)  # tall enough for 27 labelled bars


def test_one_size_sweep_plot_starts_at_zero_and_splits_the_step(cli):
    pytest.importorskip("matplotlib")
    from mi400plan.api.sweep import SweepReport, sweep
    from mi400plan.profiles import Catalog
    from mi400plan.render.plot import figure_for

    result = sweep(Catalog.default([]), "llama3.1-8b", ["mi300x"], gpus="64", report=SweepReport(top=4, ranges=False))
    ax, parts = figure_for(result).axes[:2]
    assert ax.get_ylim()[0] == 0 and ax.get_xlim()[0] == 0
    steps = [r.step_time_s for r in result.rows]
    note = " ".join(t.get_text() for t in ax.texts)
    assert "spread" in note and f"{min(steps):.4g}" in note
    assert ax.get_xlabel() == "memory per GPU (GB, 10^9 B)"  # the sweep table's unit
    best = min(result.rows, key=lambda r: r.rank)
    xs = [tuple(o.get_offsets()[0]) for o in ax.collections if len(o.get_offsets())]
    assert any(x == pytest.approx(best.memory_bytes.total / 1e9) for x, _ in xs)
    assert parts.get_xlabel() == "step time by part (s)"
    ends: dict[int, float] = {}
    for bar in parts.patches:
        y = round(bar.get_y() + bar.get_height() / 2)
        ends[y] = max(ends.get(y, 0.0), bar.get_x() + bar.get_width())
    best = result.rows[0]  # drawn on top, row len - 1; the parts shown cover at least 99 % of its step
    assert best.step_time_s * 0.99 <= ends[len(result.rows) - 1] <= best.step_time_s * (1 + 1e-9)


def test_identical_comm_curves_stay_distinguishable(cli):
    """MI350X and MI355X share one xGMI fabric: the same busbw curve. The second is drawn with another
    marker and dash pattern and labelled as the same, and its band is not drawn twice."""
    pytest.importorskip("matplotlib")
    from mi400plan.api.comm import comm
    from mi400plan.profiles import Catalog
    from mi400plan.render.plot import figure_for

    result = comm(Catalog.default([]), "all-reduce", "1MiB..64MiB", "8", skus=["mi350x", "mi355x"])
    ax = figure_for(result).axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    a, b = lines["mi350x"], lines["mi355x (same as mi350x)"]
    assert list(a.get_ydata()) == list(b.get_ydata())
    assert a.get_marker() != b.get_marker() and a.get_linestyle() != b.get_linestyle()
    bands = [c for c in ax.collections if "estimate range" in str(c.get_label())]
    assert [c.get_label() for c in bands] == ["mi350x estimate range"]


def test_readme_lists_every_plotting_command():
    from pathlib import Path

    readme = Path(__file__).resolve().parent.parent / "README.md"
    if not readme.exists():
        pytest.skip("README.md not next to the tests")
    text = readme.read_text()
    for command in ("fit", "sweep", "serve", "comm", "rack"):
        assert f"| `{command}` |" in text.split("## Examples")[0], command


def _scenario_result(name: str):  # noqa: ANN202
    from mi400plan.api.serve import ServeRequest, serve
    from mi400plan.api.serve_scenario import ScenarioRequest
    from mi400plan.profiles import Catalog

    req = ServeRequest(output_len="256", ranges=False, scenario=ScenarioRequest(name))
    return serve(Catalog.default([]), "llama3.1-8b", ["mi300x"], req)


def test_server_scenario_plot_draws_percentiles_against_the_searched_rates():
    """Two panels sharing the rate axis: TTFT in s and TPOT in ms (p99 solid, p50 dashed) at every rate the
    search ran, the MLPerf llama2-70b server limits (2 s, 200 ms: the reference for a model MLPerf does not
    run) as horizontal lines, and the answer starred at its rate and p99."""
    pytest.importorskip("matplotlib")
    from mi400plan.render.plot import figure_for

    result = _scenario_result("server")
    row = next(r for r in result.scenario_rows if r.rank == 1)
    assert row.meets and len(row.search) >= 3
    ttft_ax, tpot_ax = figure_for(result).axes[:2]
    assert ttft_ax.get_ylabel() == "TTFT (s)" and tpot_ax.get_ylabel() == "TPOT (ms)"
    assert tpot_ax.get_xlabel() == "Poisson arrival rate (requests/s per replica)"
    lines = {ax: {ln.get_label(): ln for ln in ax.get_lines()} for ax in (ttft_ax, tpot_ax)}
    assert list(lines[ttft_ax]["p99 TTFT limit 2 s"].get_ydata()) == [2.0, 2.0]
    assert list(lines[tpot_ax]["p99 TPOT limit 200 ms"].get_ydata()) == [200.0, 200.0]
    curve = next(ln for k, ln in lines[ttft_ax].items() if k.startswith("mi300x TP"))
    rates = sorted(p.requests_per_s for p in row.search)
    assert list(curve.get_xdata()) == rates
    star = next(ln for k, ln in lines[tpot_ax].items() if k.startswith("mi300x answer"))
    assert list(star.get_xdata()) == [row.requests_per_s]
    assert list(star.get_ydata()) == pytest.approx([row.tpot_s.p99 * 1e3])
    # the answer is the largest rate run that met both p99 limits; every faster run missed one
    for p in row.search:
        ok = p.ttft_s.p99 <= 2.0 and p.tpot_s.p99 <= 0.2
        assert p.meets == (ok and p.failed is None), p
        assert p.requests_per_s <= row.requests_per_s or not p.meets
    assert any(p.requests_per_s == row.requests_per_s and p.meets for p in row.search)
    # the legend hangs under the rate axis (outside both panels: it covers no curve) and names every series
    legend = tpot_ax.get_legend()
    assert legend is not None and legend.get_bbox_to_anchor().y1 < tpot_ax.get_window_extent().y0
    texts = [t.get_text() for t in legend.get_texts()]
    assert "p99 TTFT limit 2 s" in texts and "solid: p99" in texts and any(t.startswith("mi300x answer") for t in texts)


def test_a_log_rate_axis_reads_in_plain_numbers():
    """A rate search spanning more than 30x is drawn on a log axis labelled 0.2, 0.5, 1, 2, 5 (not 10^-1)."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from mi400plan.render import plots_scenario

    result = _scenario_result("server")
    row = next(r for r in result.scenario_rows if r.rank == 1)
    rows = [row.model_copy(update={"search": [p.model_copy(update={"requests_per_s": p.requests_per_s * f})
                                              for p, f in zip(row.search, [0.01] + [1.0] * (len(row.search) - 1))]})]
    fig = Figure(layout="constrained")
    plots_scenario._server(result, rows, fig, ("m", "lengths"))
    ax = fig.axes[1]
    assert ax.get_xscale() == "log"
    fmt = ax.xaxis.get_major_formatter()
    assert [fmt(v, 0) for v in (0.2, 0.5, 1.0, 2.0, 5.0)] == ["0.2", "0.5", "1", "2", "5"]
    assert ax.xaxis.get_minor_formatter()(0.3, 0) == ""


def test_offline_scenario_plot_draws_throughput_against_the_sequence_limits_tried():
    pytest.importorskip("matplotlib")
    from mi400plan.render.plot import figure_for

    result = _scenario_result("offline")
    row = next(r for r in result.scenario_rows if r.rank == 1)
    ax = figure_for(result).axes[0]
    assert ax.get_xlabel() == "scheduler limit: sequences in flight per replica (max_num_seqs)"
    assert ax.get_ylabel() == "output tokens/s per GPU" and ax.get_ylim()[0] == 0
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    star = next(ln for k, ln in lines.items() if k.startswith("mi300x answer"))
    assert list(star.get_xdata()) == [row.max_num_seqs]
    assert list(star.get_ydata()) == pytest.approx([row.tokens_per_s_per_gpu])
    # offline keeps the highest throughput of the limits tried: rate x 256 output tokens / GPUs per replica
    g = row.layout.tp * row.layout.pp
    assert row.tokens_per_s_per_gpu == pytest.approx(max(p.requests_per_s for p in row.search if p.meets) * 256 / g)
    assert row.max_num_seqs in {p.max_num_seqs for p in row.search}
