"""``fit`` through the api and the CLI: verdicts with visible arithmetic, JSON contract, exit codes."""

from __future__ import annotations

import json

import pytest

from mi400plan.api.fit import LayoutPins, fit
from mi400plan.errors import LayoutError
from mi400plan.specs.layout import TrainOptions
from mi400plan.units import GB

ENVELOPE_KEYS = {"schema_version", "command", "status", "data", "errors"}
MEMORY_KEYS = {"weights", "gradients", "optimizer", "activations", "kv_cache", "reserve", "total", "fragmentation"}
ROW_KEYS = {"sku", "layout", "fits", "capacity_bytes", "headroom_bytes", "memory_bytes", "reason"}


def test_gpt3_175b_bf16_does_not_fit_one_mi300x(catalog) -> None:
    r = fit(catalog, "gpt3-175b", ["mi300x"], "infer", precision="bf16", seq=2048, reserve="0")
    row = r.rows[0]
    # 174,604,259,328 params x 2 B = 349.2 GB of weights alone (seed 000 says it fits in 192 GB: it does not).
    # vLLM pads the 50,257-token vocabulary to a multiple of 64: 50,304 rows, 47 x 12,288 = 577,536 padded
    # parameters in the (tied) embedding.
    assert 50_304 == -(-50_257 // 64) * 64 and (50_304 - 50_257) * 12_288 == 577_536
    assert row.padded_vocab_size == 50_304
    assert row.memory_bytes.weights == (174_604_259_328 + 577_536) * 2
    # Capacity is what rocm-smi reports on an MI300X ("192 GB" = 192 GiB of HBM3): 205,822,885,888 B.
    assert row.capacity_bytes == 205_822_885_888
    assert not row.fits and row.verdict == "does_not_fit"
    assert row.headroom_bytes == 205_822_885_888 - row.memory_bytes.total
    assert row.headroom_bytes < 205.83e9 - 349.2e9  # at least 143 GB short
    assert "205.8 GB (191.7 GiB)" in row.reason and "short by" in row.reason
    assert row.suggestion and "--tp 2" in row.suggestion


def test_deepseek_v3_fp8_on_8_gpus(catalog) -> None:
    r = fit(catalog, "deepseek-v3", ["mi300x", "h100"], "infer", layout=LayoutPins(tp=8), precision="fp8", seq=4096)
    by = {row.sku: row for row in r.rows}
    assert by["mi300x"].fits
    assert not by["h100"].fits
    # weights per GPU ~ 671e9 B / 8 = 83.9e9 > 80e9 (H100) even before KV cache and reserve
    assert by["h100"].memory_bytes.weights > 80 * GB
    assert by["h100"].min_gpus == 16


def test_llama_405b_fp8_fits_one_mi300x_node_with_context(catalog) -> None:
    r = fit(catalog, "llama3.1-405b", ["mi300x"], "infer", precision="fp8", gpus=8, batch=1)
    row = r.rows[0]
    assert row.fits and row.layout["tp"] == 8 and row.layout["context"] == 131072
    # KV per GPU per token = 2 x 8 x 128 x 126 x 2 B / 8 = 64,512 B; the room after ~51 GB of weights
    # buys far more than the 128K context (about 1.9M tokens)
    assert row.max_tokens > 1_500_000
    assert row.max_context == 131_072  # batch 1: the KV room holds more, the model's maximum caps it
    kv = row.memory_bytes.kv_cache
    assert kv == 131072 * 64_512


def test_estimated_capacity_flip_is_reported(catalog) -> None:
    # TPU7x HBM: Google's table says 192 GiB (nominal), its prose 192 GB (low: 192e9 B = 178.8139 GiB).
    # 405B bf16 on TP 8 with 10 sequences of 128K needs 199.4 GB per chip: fits 192 GiB = 206.2 GB, not
    # 192 GB. (KV: 516,096 B/token x 10 x 131,072 / 8 = 84.6 GB, weights 811.7 / 8 = 101.5 GB, reserve.)
    r = fit(catalog, "llama3.1-405b", ["tpu7x"], "infer", layout=LayoutPins(tp=8), batch=10)
    row = r.rows[0]
    assert row.fits and row.flips
    assert abs(row.capacity_low_bytes - 192e9) < 1e5 and row.capacity_high_bytes == 192 * 2**30
    assert 192e9 < row.memory_bytes.total < 192 * 2**30
    assert "flips" in row.range_note


def test_undisclosed_capacity_gives_unknown_verdict(catalog) -> None:
    r = fit(catalog, "llama3.1-8b", ["mi440x"], "train")
    row = r.rows[0]
    assert row.verdict == "unknown" and not row.fits and row.capacity_bytes is None
    assert "not disclosed" in row.reason


def test_training_suggestion_names_a_change(catalog) -> None:
    # Llama-3.1-8B (8.03e9 params) on 8 x H100, DP 8, ZeRO-0: 18 B/param = 144.5 GB: no.
    # ZeRO-1: (2 + 4 + 12/8) B = 7.5 B/param = 60 GB + ~20 GB activations + a reserve of 0.78 GB context,
    # 0.31 GB of the DP-8 communicator's buffers and 3 % of ~80 GB = 2.4 GB fragmentation: about 84 GB
    # <= 85.5 GB, fits (the old 2 GiB + 5 % reserve, 6.4 GB, did not). The suggestion is the smallest change.
    r = fit(catalog, "llama3.1-8b", ["h100"], "train", layout=LayoutPins(tp=1, pp=1, zero=0), gpus=8)
    row = r.rows[0]
    assert not row.fits and row.layout["dp"] == 8
    assert row.suggestion.startswith("fits with --zero 1"), row.suggestion
    # 70B on 8 x H100 without model parallelism: nothing single-step fits; the grid names a GPU count
    r2 = fit(catalog, "llama3.1-70b", ["h100"], "train", layout=LayoutPins(tp=1, pp=1, zero=0), gpus=8)
    assert not r2.rows[0].fits and r2.rows[0].min_gpus and " with --tp " in r2.rows[0].suggestion
    # the grid keeps DP 8 (from --gpus 8 and TP 1), so its flags name it: re-running them gives the layout
    assert r2.rows[0].min_layout.endswith("--dp 8")


def test_layout_errors(catalog) -> None:
    with pytest.raises(LayoutError) as e:
        fit(catalog, "llama3.1-70b", ["mi300x"], "train", layout=LayoutPins(tp=8), gpus=12)
    assert e.value.rule == "dp-integer"
    with pytest.raises(LayoutError) as e:
        fit(catalog, "deepseek-v3", ["mi300x"], "train", layout=LayoutPins(ep=3, dp=3))
    assert e.value.rule == "ep-experts"


def test_plan_file_round_trip(catalog, tmp_path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[plan]\nmodel = "llama3.1-70b"\nsku = "mi355x"\ngpus = 64\nseq_len = 8192\nglobal_batch = 256\n\n'
        '[layout]\ntp = 8\npp = 2\nvpp = 1\ndp = 4\nep = 1\netp = 1\ncp = 1\nzero = 1\nmicro_batch = 1\n'
        'recompute = "selective"\nsequence_parallel = true\n'
    )
    r = fit(catalog, None, None, "train", plan=str(plan))
    row = r.rows[0]
    assert row.sku == "mi355x" and row.layout["tp"] == 8 and row.layout["pp"] == 2 and row.layout["dp"] == 4
    assert row.layout["seq_len"] == 8192 and row.gpus == 64


# --- CLI ------------------------------------------------------------------------------------------


def test_cli_json_envelope(cli) -> None:
    res = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--json"])
    assert res.exit_code == 0, res.output
    env = json.loads(res.stdout)
    assert set(env) == ENVELOPE_KEYS
    assert env["command"] == "fit" and env["status"] == "ok" and env["errors"] == []
    data = env["data"]
    assert set(data["model"]) >= {"name", "params_total", "params_active"}
    assert [r["sku"] for r in data["rows"]] == ["mi300x", "h100"]
    for r in data["rows"]:
        assert ROW_KEYS <= set(r)
        assert set(r["memory_bytes"]) == MEMORY_KEYS
        assert all(isinstance(v, int) for v in r["memory_bytes"].values())
        assert r["memory_bytes"]["total"] == sum(v for k, v in r["memory_bytes"].items() if k not in ("total", "fragmentation"))


def test_cli_default_is_all_skus(cli, catalog) -> None:
    res = cli(["fit", "llama3.1-8b", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["data"]["rows"]
    assert sorted(r["sku"] for r in rows) == catalog.names("accelerators")


def test_cli_one_sku_breakdown_table(cli) -> None:
    res = cli(["fit", "llama3.1-70b", "--sku", "mi300x", "--tp", "8", "--ascii"])
    assert res.exit_code == 0, res.output
    for word in ("weights", "gradients", "optimizer states", "activations", "runtime reserve", "capacity",
                 "headroom", "verdict:", "GiB", "GB"):
        assert word in res.stdout


def test_cli_check_exit_4_when_nothing_fits(cli) -> None:
    res = cli(["fit", "gpt3-175b", "--sku", "mi300x", "--mode", "infer", "--check"])
    assert res.exit_code == 4, res.output
    res = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--mode", "infer", "--check"])
    assert res.exit_code == 0, res.output


def test_cli_unknown_sku_suggests(cli) -> None:
    res = cli(["fit", "llama3.1-8b", "--sku", "mi300"])
    assert res.exit_code == 3, res.output
    assert "mi300x" in res.output and "Traceback" not in res.output
    res = cli(["fit", "llama3.1-8b", "--sku", "mi300", "--json"])
    assert res.exit_code == 3
    env = json.loads(res.stdout)
    assert env["status"] == "error" and env["errors"][0]["code"] == "unknown_name"


def test_cli_impossible_layout_names_rule(cli) -> None:
    res = cli(["fit", "llama3.1-70b", "--sku", "mi300x", "--tp", "3"])
    assert res.exit_code == 2, res.output
    assert "rule: tp-heads" in res.output and "64 attention heads" in res.output
    assert "Traceback" not in res.output
    # 80 layers over PP 3: no even split; the default uneven split holds them (first 26, then 27 and 27),
    # --no-uneven-pp rejects it
    res = cli(["fit", "llama3.1-70b", "--sku", "mi300x", "--pp", "3", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["data"]["recipe"]["pipeline_split"] == "uneven: 26 + 27 + 27 layers"
    res = cli(["fit", "llama3.1-70b", "--sku", "mi300x", "--pp", "3", "--no-uneven-pp", "--json"])
    assert res.exit_code == 2
    err = json.loads(res.stdout)["errors"][0]
    assert err["code"] == "invalid_layout" and "pp-layers" in err["message"]


def test_cli_usage_errors(cli) -> None:
    res = cli(["fit", "llama3.1-8b", "--mode", "sideways"])
    assert res.exit_code == 2
    res = cli(["fit", "llama3.1-8b", "--reserve", "lots"])
    assert res.exit_code == 2 and "reserve" in res.output and "Traceback" not in res.output


def test_cli_bad_plan_file_names_file_and_line(cli, tmp_path) -> None:
    plan = tmp_path / "bad.toml"
    plan.write_text('[plan]\nmodel = "llama3.1-8b"\n\n[layout]\ntp = 8\nbogus = 1\n')
    res = cli(["fit", "--plan", str(plan)])
    assert res.exit_code == 3, res.output
    assert "bad.toml:6" in res.output and "bogus" in res.output


def test_llama_405b_fp8_kv_room_by_hand(catalog) -> None:
    # Issue 2: Llama-3.1-405B FP8 fits one 8 x MI300X node; how much context does the room buy?
    r = fit(catalog, "llama3.1-405b", ["mi300x"], "infer", precision="fp8", gpus=8, batch=1)
    row = r.rows[0]
    emb = 2 * 128_256 * 16_384  # input embedding + untied output layer, kept in bf16
    weights = ((405_853_388_800 - emb) * 1 + emb * 2) / 8  # fp8 body, bf16 embeddings, TP 8
    assert weights == 51_257_010_176
    assert row.memory_bytes.weights == pytest.approx(weights, rel=1e-3)
    cap = 205_822_885_888  # MI300X usable HBM as rocm-smi reports it (the vendor's "192 GB" is 192 GiB)
    reserve = 2 * 2**30 + 0.05 * cap  # default runtime reserve: 2 GiB + 5% of HBM = 12,438,627,942 B
    kv_per_token = 2 * 8 * 128 * 126 * 2 / 8  # K and V, 8 KV heads, head_dim 128, 126 layers, bf16, TP 8
    assert kv_per_token == 64_512
    upper = (cap - reserve - weights) / kv_per_token  # no activation workspace: 2,203,113 tokens
    lower = (cap - reserve - weights - 1e9) / kv_per_token  # with 1 GB of it: 2,187,612 tokens
    assert int(upper) == 2_203_113 and int(lower) == 2_187_612
    assert lower <= row.max_tokens <= upper  # batch 1: the room in tokens of batch x context
    assert row.max_tokens > 15 * 131_072  # about 15 full 128K contexts
    assert row.max_context == 131_072  # the longest context is the model's maximum, not the room


def test_cli_all_skus_comparison_reads_at_100_columns(cli, monkeypatch) -> None:
    # The README's main command: one line per SKU at 100 columns, the fewest GPUs that fit and the
    # per-GPU need there, and a legend that explains the verdict and the units.
    monkeypatch.setenv("COLUMNS", "100")
    r = cli(["fit", "llama3-70b", "--sku", "all"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    table_rows = {ln.split()[0]: ln for ln in lines if len(ln.split()) > 3 and ln.split()[0] in
                  ("a100", "mi300x", "mi355x", "mi440x", "gb200", "mi455x", "h100")}
    assert len(table_rows) == 7
    assert all(len(ln) <= 100 for ln in table_rows.values())
    # 70,553,706,496 params x 18 B/param (Megatron bf16 + fp32 grads, master, 2 Adam moments) = 1,270 GB
    # on one GPU: nothing fits. MI300X (205.8 GB usable): 8 GPUs put 1,270 / 8 = 158.7 GB of them on a
    # GPU (fits); any 4-GPU layout holds 317.5 GB per GPU (does not), so 8 GPUs is the fewest.
    assert 70_553_706_496 * 18 / 8 / 1e9 == pytest.approx(158.75, abs=0.01)
    # 8 GPUs = one 8-GPU xGMI node; on GB200 the same 8 GPUs sit in one NVL72 rack
    assert " no " in table_rows["mi300x"] and "8 (1 node) " in table_rows["mi300x"]
    assert " n/d " in table_rows["mi440x"]  # capacity not disclosed: no verdict invented
    assert "(1 rack)" in table_rows["gb200"]
    text = " ".join(r.stdout.split())  # legend lines wrap at 100 columns
    assert "layout as given: 1 GPU," in text and "18 B/param" in text
    assert "GB = 10^9 bytes" in text and "fits? compares need/GPU" in text and "HBM/GPU = usable capacity" in text
    data = json.loads(cli(["fit", "llama3-70b", "--sku", "mi300x", "--json"]).stdout)["data"]
    row = data["rows"][0]
    assert row["min_gpus"] == 8 and 158.75e9 < row["min_memory_bytes"] <= 205_822_885_888
    assert data["model"]["max_seq_len"] == 131_072


def test_csv_columns_are_the_json_row_fields(cli, csv_matches_json) -> None:
    header, json_keys, _ = csv_matches_json(["fit", "llama3-70b", "--sku", "mi300x", "--sku", "mi440x"])
    assert sorted(header) == sorted(json_keys)  # JSON keys are sorted, CSV follows the model order
    assert "memory_bytes.total" in header and "layout.tp" in header


# --- scale-up domains: TP stays inside a node or rack -------------------------------------------------

import re  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def test_training_keeps_tp_inside_the_8_gpu_xgmi_node(catalog) -> None:
    # Llama-3.1-405B at 16K tokens, 405,853,388,800 params x 18 B/param = 7,305.4 GB of weights, gradients
    # and optimizer states. 64 GPUs hold 7,305.4 / 64 = 114.1 GB of it per GPU, and with TP 32 the 16K
    # activations split 32 ways too: the fewest layout overall is TP32 PP2 on 64 GPUs. MI300X's xGMI domain
    # is an 8-GPU UBB node (profile xgmi-mi300, domain_size 8), so TP 32 would all-reduce over the
    # scale-out NICs. The suggestion keeps TP <= 8 and grows PP instead.
    assert 405_853_388_800 * 18 / 64 / 1e9 == pytest.approx(114.1, abs=0.05)
    row = fit(catalog, "llama3.1-405b", ["mi300x"], "train", seq=16384).rows[0]
    assert row.domain_size == 8 and row.domain_fabric == "xgmi-mi300" and row.domain_label == "8-GPU xGMI node"
    assert row.cross_domain_min_gpus == 64 and row.cross_domain_min_layout == "--tp 32 --pp 2"
    tp, pp = (int(x) for x in re.findall(r"--(?:tp|pp) (\d+)", row.min_layout))
    assert tp <= 8 and row.min_gpus == tp * pp > 64
    assert row.min_domains == row.min_gpus // 8  # TP groups of 8 (or fewer) pack whole nodes
    assert "TP kept within the 8-GPU xGMI node" in row.min_layout_domain_note
    assert "PP grows" in row.min_layout_domain_note and "TP32" in row.min_layout_domain_note
    assert "TP kept within the 8-GPU xGMI node" in row.suggestion
    # Helios: a 72-GPU rack, so the same search has no reason to leave it
    helios = fit(catalog, "llama3.1-405b", ["mi455x"], "train").rows[0]
    assert helios.domain_size == 72 and helios.min_domains == 1 and helios.cross_domain_min_gpus is None


def test_inference_names_the_nodes_a_replica_takes(catalog) -> None:
    # Llama-3.1-405B FP8 on H100 (81,559 MiB = 85.52 GB usable), 8 sequences of 131,072 tokens, bf16 KV:
    # weights ~ 405.85e9 x 1 B + 2.1e9 bf16 embedding/head params x 1 extra B = 410.0 GB;
    # KV = 2 (K, V) x 8 KV heads x 128 x 126 layers x 2 B = 516,096 B/token x 8 x 131,072 = 541.2 GB.
    # With TP <= 8 both split over every GPU of the replica (KV heads 8 >= TP), so per GPU:
    #   8 GPUs:  (410.0 + 541.2) / 8  = 118.9 GB > 85.5 GB          -> one node is not enough
    #   16 GPUs: (410.0 + 541.2) / 16 =  59.4 GB + 6.4 GB reserve    -> fits: 2 x 8-GPU nodes, TP8 PP2
    cap = 81_559 * 2**20
    reserve = 2 * 2**30 + 0.05 * cap  # 6.42 GB
    kv = 2 * 8 * 128 * 126 * 2 * 8 * 131_072
    assert kv / 1e9 == pytest.approx(541.2, abs=0.05)
    assert (410.0e9 + kv) / 8 > cap and (410.0e9 + kv) / 16 + reserve < cap
    row = fit(catalog, "llama3.1-405b", ["h100"], "infer", precision="fp8", batch=8).rows[0]
    assert row.domain_size == 8 and row.min_gpus == 16 and row.min_domains == 2
    assert row.min_layout == "--tp 8 --pp 2"
    assert "2 x 8-GPU NVLink nodes, TP8 PP2" in row.suggestion
    # In bf16 (811.7 GB of weights) 16 GPUs hold (811.7 + 541.2) / 16 = 84.6 GB + 6.4 GB reserve > 85.5 GB,
    # so the replica needs a third node; 18 GPUs (TP2 PP9: 75.2 + 6.4 = 81.6 GB) would be the fewest, but
    # the third node is taken whole anyway, so TP fills each node: TP8 PP3 on 24 GPUs.
    assert (811.7e9 + kv) / 16 + reserve > cap and (811.7e9 + kv) / 18 + reserve < cap
    row = fit(catalog, "llama3.1-405b", ["h100"], "infer", precision="bf16", batch=8).rows[0]
    assert row.min_layout == "--tp 8 --pp 3" and row.min_domains == 3
    assert "3 x 8-GPU NVLink nodes, TP8 PP3" in row.suggestion
    assert "uses them whole" in row.min_layout_domain_note and "18 with TP2 PP9" in row.min_layout_domain_note


def test_moe_inference_grows_ep_not_tp(catalog) -> None:
    # DeepSeek-V3 FP8 on H100: 671B / 16 = 41.9 GB of weights per GPU fits; 61 layers leave PP only
    # 1 or 61, so TP16 (across two nodes) or TP8 x EP16 (experts over 16 GPUs, attention TP inside each
    # node) are the 16-GPU layouts. The domain rule picks EP.
    assert 671e9 / 16 / 1e9 == pytest.approx(41.9, abs=0.05)
    row = fit(catalog, "deepseek-v3", ["h100"], "infer", precision="fp8", seq=4096).rows[0]
    assert row.min_layout == "--tp 8 --pp 1 --ep 16" and row.min_gpus == 16 and row.min_domains == 2
    assert "2 x 8-GPU NVLink nodes, TP8 PP1 EP16" in row.suggestion


def test_moe_training_grows_ep_over_data_parallel_replicas(catalog) -> None:
    # Megatron-Core lays EP over TP x CP x DP, so EP above TP needs DP replicas: EP = TP x DP / EDP.
    # At 8K tokens DeepSeek-V3 on MI300X needs experts spread wider than the TP group (EP 128 over DP 16).
    row = fit(catalog, "deepseek-v3", ["mi300x"], "train", seq=8192).rows[0]
    flags = dict(re.findall(r"--(\w+) (\d+)", row.min_layout))
    tp, pp, ep, dp = (int(flags.get(k, 1)) for k in ("tp", "pp", "ep", "dp"))
    assert tp <= 8 and ep > tp and (tp * dp) % ep == 0 and row.min_gpus == tp * pp * dp


def test_given_tp_wider_than_the_domain_is_flagged(catalog) -> None:
    rows = {r.sku: r for r in fit(catalog, "llama3.1-70b", ["mi300x", "gb200"], "infer", layout=LayoutPins(tp=16)).rows}
    assert "TP16 as given is wider than the 8-GPU xGMI node" in rows["mi300x"].layout_domain_note
    assert rows["mi300x"].domains == 2
    assert rows["gb200"].layout_domain_note is None and rows["gb200"].domains == 1  # 72-GPU NVL72 rack


def test_unknown_domain_falls_back_to_the_unbounded_search(catalog, tmp_path) -> None:
    from mi400plan.profiles import Catalog, bundled_root

    src = (bundled_root() / "accelerators" / "mi300x.toml").read_text()
    text = re.sub(r'(?m)^scale_up_fabric = .*\n', "", src.replace('name = "mi300x"', 'name = "mi300x-nofab"'))
    text = re.sub(r"(?m)^aliases = .*\n", "", text)
    (tmp_path / "accelerators").mkdir()
    (tmp_path / "accelerators" / "mi300x-nofab.toml").write_text(text)
    cat = Catalog.default([tmp_path])
    row = fit(cat, "llama3.1-405b", ["mi300x-nofab"], "train", seq=16384).rows[0]
    assert row.domain_size is None and row.min_domains is None
    assert row.min_layout == "--tp 32 --pp 2"  # the fewest GPUs with TP unbounded, as before domains
    assert "names no scale-up fabric" in row.min_layout_domain_note
    assert "TP was not limited" in row.min_layout_domain_note


# --- every suggestion is a valid layout that really fits when re-run ------------------------------------

FLAG = re.compile(r"--([a-z-]+) (\S+)")
KW = {"tp": "tp", "pp": "pp", "ep": "ep", "dp": "dp", "zero": "zero", "recompute": "recompute",
      "micro-batch": "micro_batch"}


def _fit_kw(catalog, model: str, skus: list[str], mode: str, **kw):  # noqa: ANN001, ANN202
    """``fit`` with the layout keywords of ``kw`` as its ``LayoutPins``."""
    pins = {k: kw.pop(k) for k in list(kw) if k in LayoutPins.__dataclass_fields__}
    return fit(catalog, model, skus, mode, layout=LayoutPins(**pins), **kw)


def _flags(text: str) -> dict:
    out = {}
    for k, v in FLAG.findall(text):
        out[KW[k]] = v if k == "recompute" else int(v)
    return out


def _check_suggestions(catalog, model: str, sku: str, mode: str, base: dict) -> None:  # noqa: ANN001
    row = _fit_kw(catalog, model, [sku], mode, **base).rows[0]
    if row.min_layout is not None:
        flags = _flags(row.min_layout)
        again = _fit_kw(catalog, model, [sku], mode, **{**base, "gpus": None, **flags}).rows[0]
        assert again.fits, (model, sku, mode, base, row.min_layout, again.reason)
        assert again.gpus == row.min_gpus
        assert again.memory_bytes.total == row.min_memory_bytes
        if row.domain_size is not None and not (row.min_layout_domain_note or "").startswith("no layout"):
            assert flags["tp"] <= row.domain_size, (model, sku, row.min_layout)
            assert again.layout_domain_note is None
    if row.fits or not row.suggestion:
        return
    for part in row.suggestion.split("; or "):
        if part.startswith("fits with "):
            change = _flags(part.split(":")[0])
            again = _fit_kw(catalog, model, [sku], mode, **{**base, **change}).rows[0]
            assert again.fits, (model, sku, part)
        elif part.startswith("fits on "):
            assert row.min_layout in part
        elif part.startswith("smallest SKU that fits as laid out: "):
            other = part.split(": ", 1)[1].split(" ")[0]
            assert _fit_kw(catalog, model, [other], mode, **base).rows[0].fits, (model, other)


MODELS = ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mixtral-8x7b", "mixtral-8x22b", "deepseek-v3",
          "qwen3-235b-a22b", "gpt3-175b"]


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_fewest_gpu_suggestions_refit_on_every_sku(catalog, mode) -> None:
    for sku in catalog.names("accelerators"):
        _check_suggestions(catalog, "llama3.1-405b", sku, mode, {"precision": "fp8" if mode == "infer" else None})


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    model=st.sampled_from(MODELS),
    sku=st.sampled_from(["mi300x", "mi325x", "mi355x", "mi430x", "mi455x", "a100", "h100", "b200", "gb200",
                         "rubin", "tpu-v6e", "tpu7x"]),
    mode=st.sampled_from(["train", "infer"]),
    tp=st.sampled_from([None, 2, 8]),
    small=st.booleans(),
)
def test_suggestions_are_valid_and_fit_when_rerun(catalog, model, sku, mode, tp, small) -> None:
    if mode == "train":
        base = {"tp": tp, "seq": 2048 if small else None, "gpus": 8 if small and tp is None else None}
    else:
        base = {"tp": tp, "batch": 4 if small else None, "seq": 8192 if small else None,
                "precision": "fp8" if small else None}
    try:
        _fit_kw(catalog, model, [sku], mode, **base)
    except LayoutError:
        return  # the layout as given breaks a rule (e.g. TP 8 on 4 KV heads... ); nothing to suggest
    _check_suggestions(catalog, model, sku, mode, base)


# --- vocabulary padding, FP8 weight copies, MoE capacity factor ------------------------------------------


def test_fit_reports_padded_vocab_and_fp8_copies(catalog) -> None:
    bf16 = fit(catalog, "llama3.1-70b", ["mi355x"], "train", layout=LayoutPins(tp=8)).rows[0]
    fp8r = fit(catalog, "llama3.1-70b", ["mi355x"], "train", layout=LayoutPins(tp=8), precision="fp8")
    fp8 = fp8r.rows[0]
    # Megatron-LM: 128,256 padded to a multiple of 128 x 8 = 1,024: 126 x 1,024 = 129,024 rows.
    assert bf16.padded_vocab_size == fp8.padded_vocab_size == 129_024
    assert fp8r.model.params_total == 70_553_706_496  # counts stay unpadded
    # --precision fp8: two cached 1-byte FP8 copies (row-wise + transposed, Transformer Engine) of the
    # 80 x (2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 28672) = 68,451,041,280 block GEMM weights, / TP 8.
    assert fp8r.recipe["fp8_weight_copies"] == 2 and fp8r.recipe["fp8_weight_bytes"] == 2.0
    assert fp8.memory_bytes.weights - bf16.memory_bytes.weights == 2 * 68_451_041_280 // 8 == 17_112_760_320
    one = fit(catalog, "llama3.1-70b", ["mi355x"], "train", layout=LayoutPins(tp=8), precision="fp8",
              options=TrainOptions(fp8_weight_copies=1)).rows[0]
    assert one.memory_bytes.weights - bf16.memory_bytes.weights == 68_451_041_280 // 8
    # Inference pads to a multiple of 64 only (vLLM): Llama-3's vocabulary is one already.
    assert fit(catalog, "llama3.1-70b", ["mi355x"], "infer",
               layout=LayoutPins(tp=8)).rows[0].padded_vocab_size == 128_256


def test_sweep_fp8_plan_refits_with_the_same_memory(catalog, tmp_path) -> None:
    from mi400plan.api.sweep import SweepReport, sweep
    from mi400plan.specs.layout import TrainOptions

    plan = tmp_path / "fp8.toml"
    sw = sweep(catalog, "mixtral-8x7b", ["mi355x"], gpus="16", options=TrainOptions(precision="fp8"),
               report=SweepReport(top=1, save=str(plan), ranges=False))
    best = sw.rows[0].memory_bytes
    row = fit(catalog, None, None, "train", plan=str(plan))
    assert row.recipe["fp8_weight_copies"] == 2
    got = row.rows[0].memory_bytes
    for term in ("weights", "gradients", "optimizer", "activations"):
        assert getattr(got, term) == round(getattr(best, term)), term


def test_capacity_factor_flag(cli, catalog) -> None:
    base = fit(catalog, "mixtral-8x7b", ["mi355x"], "train", layout=LayoutPins(tp=8))
    one = fit(catalog, "mixtral-8x7b", ["mi355x"], "train", layout=LayoutPins(tp=8),
              options=TrainOptions(capacity_factor=1.0))
    assert base.recipe["moe_capacity_factor"] == 1.25 and one.recipe["moe_capacity_factor"] == 1.0
    # Mixtral 8x7B (h 4,096, expert FFN 14,336, top-2, 32 layers), TP 8 with SP, 4,096 tokens, 1F1B on one
    # stage: routed bytes per local token and layer = top_k x cf x (dispatched input 2h + fp32 router
    # probability 4 + SwiGLU intermediates 2 x 3 x 14,336) / 8 = 2 x cf x (8,196 + 86,016) / 8 = 23,553 x cf.
    # cf 1.25 -> 1.0 saves 0.25 x 23,553 x 32 layers x 4,096 tokens = 771,784,704 B.
    assert 2 * (2 * 4096 + 4 + 2 * 3 * 14336) / 8 == 23_553
    assert base.rows[0].memory_bytes.activations - one.rows[0].memory_bytes.activations == 771_784_704
    dense = fit(catalog, "llama3.1-8b", ["mi355x"], "train", options=TrainOptions(capacity_factor=1.0))
    assert any("dense" in w for w in dense.warnings)
    res = cli(["fit", "mixtral-8x7b", "--sku", "mi355x", "--capacity-factor", "1.5", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["data"]["recipe"]["moe_capacity_factor"] == 1.5
    res = cli(["fit", "mixtral-8x7b", "--sku", "mi355x", "--capacity-factor", "0"])
    assert res.exit_code == 2 and "--capacity-factor" in res.output and "Traceback" not in res.output
    res = cli(["fit", "llama3.1-8b", "--sku", "mi355x", "--fp8-weight-copies", "1"])
    assert res.exit_code == 2 and "--precision fp8" in res.output
    res = cli(["fit", "llama3.1-8b", "--sku", "mi355x", "--fp8-params"])
    assert res.exit_code == 2 and "--precision fp8" in res.output and "Traceback" not in res.output
    # The breakdown says what an FP8 GEMM weight holds: bf16 + two casts = 4 B; FP8 parameters 2 B, 1 B.
    for extra, text in (([], "bf16 working copy + 2 FP8 casts, 4 B"),
                        (["--fp8-params"], "FP8 tensors (--fp8-params), with the transposed copy, 2 B"),
                        (["--fp8-params", "--fp8-weight-copies", "1"], "no transposed copy, 1 B")):
        res = cli(["fit", "llama3.1-8b", "--sku", "mi355x", "--precision", "fp8", *extra], env={"COLUMNS": "200"})
        assert res.exit_code == 0 and text in res.stdout, res.output
    assert "FP8 weights" not in cli(["fit", "llama3.1-8b", "--sku", "mi355x"], env={"COLUMNS": "200"}).stdout
    help_text = " ".join(cli(["fit", "--help"]).stdout.split())
    assert "--capacity-factor" in help_text and "dropless" in help_text and "load-imbalance" in help_text
    assert "--fp8-weight-copies" in help_text and "--vocab-divisible-by" in help_text


def test_comparison_headline_says_what_was_asked(cli, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    one = cli(["fit", "llama3-70b", "--sku", "mi300x", "--sku", "h100"]).stdout
    assert "Asked: training on one GPU of each SKU (--tp/--pp/--dp/--gpus set a layout)" in one
    eight = cli(["fit", "llama3-70b", "--sku", "mi300x", "--sku", "h100", "--tp", "8"]).stdout
    assert "Asked: training on 8 GPUs of each SKU, layout as given below." in eight
