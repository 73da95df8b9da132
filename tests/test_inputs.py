"""Inputs typed the way users type them: suffixed sequence lengths and other tools' spellings."""

from __future__ import annotations

import json

import pytest

from mi400plan.units import UnitError, parse_seq_len


@pytest.mark.parametrize("text,tokens", [
    ("8192", 8192), ("32k", 32 * 1024), ("128K", 131_072), ("128Ki", 131_072), ("1M", 1_048_576), ("1Mi", 2**20),
])
def test_seq_len_suffixes_are_binary(text, tokens):
    assert parse_seq_len(text) == tokens


@pytest.mark.parametrize("text", ["", "12.5k", "128kb", "-4096", "4G", "k"])
def test_seq_len_refuses_what_it_cannot_read(text):
    with pytest.raises(UnitError):
        parse_seq_len(text)


def _fit(cli, *extra):
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--json", *extra])
    return r, json.loads(r.stdout)


def test_fit_seq_128k_is_131072_tokens(cli):
    _, a = _fit(cli, "--mode", "infer", "--seq", "128k")
    _, b = _fit(cli, "--mode", "infer", "--seq", "131072")
    assert a["data"]["rows"][0]["memory_bytes"] == b["data"]["rows"][0]["memory_bytes"]
    assert a["data"]["rows"][0]["layout"]["context"] == 131_072


def test_mode_and_precision_aliases(cli):
    _, a = _fit(cli, "--mode", "inference", "--precision", "bfloat16")
    _, b = _fit(cli, "--mode", "infer", "--precision", "bf16")
    assert a["data"] == b["data"]
    _, t = _fit(cli, "--mode", "training")
    assert t["data"]["mode"] == "train"


def test_bad_mode_names_the_flag_and_choices(cli):
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--mode", "serving-ish"])
    assert r.exit_code == 2
    assert "--mode" in r.stderr and "train|infer" in r.stderr


def test_bad_seq_is_a_usage_error(cli):
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--seq", "12.5k"])
    assert r.exit_code == 2
    assert "--seq" in r.stderr and "sequence length" in r.stderr


def test_sweep_precision_alias_and_seq_suffix(cli):
    args = ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8", "--no-ranges", "--top", "1", "--json"]
    a = json.loads(cli([*args, "--precision", "bfloat16", "--seq", "8k"]).stdout)["data"]
    b = json.loads(cli([*args, "--precision", "bf16", "--seq", "8192"]).stdout)["data"]
    assert a["rows"] == b["rows"] and a["seq_len"] == 8192
    r = cli([*args, "--precision", "fp4"])
    assert r.exit_code == 2


@pytest.mark.parametrize("text", ["32Mb", "4gb", "1kb", "2Tb"])
def test_size_with_lowercase_b_after_a_decimal_prefix_is_ambiguous(text):
    from mi400plan.units import parse_size

    with pytest.raises(UnitError, match="ambiguous"):
        parse_size(text)


@pytest.mark.parametrize("text,size", [("32MB", 32_000_000), ("32MiB", 32 * 2**20), ("32mib", 32 * 2**20), ("4096", 4096)])
def test_size_bytes_spellings_still_read(text, size):
    from mi400plan.units import parse_size

    assert parse_size(text) == size


def test_comm_size_in_megabits_is_a_usage_error(cli):
    r = cli(["comm", "all-reduce", "--size", "32Mb", "--group", "8", "--sku", "mi300x"])
    assert r.exit_code == 2 and "ambiguous" in r.output and "32MB" in r.output


def test_reserve_bare_fraction_is_refused_naming_both_readings(cli):
    # '0.9' could be 0.9 GiB or vLLM's --gpu-memory-utilization 0.9 (engine uses 90 %, reserve 10 %).
    r = cli(["fit", "llama3-70b", "--sku", "mi300x", "--mode", "infer", "--reserve", "0.9"])
    assert r.exit_code == 2 and "ambiguous" in r.output
    assert "0.9GiB" in r.output and "10%" in r.output and "gpu-memory-utilization" in r.output


def test_reserve_percentage_is_the_vllm_utilization_complement(cli):
    # gpu-memory-utilization 0.9 leaves 10 % of HBM: '10%' and '0GiB+10%' are the same reserve.
    _, a = _fit(cli, "--mode", "infer", "--reserve", "10%")
    _, b = _fit(cli, "--mode", "infer", "--reserve", "0GiB+10%")
    assert a["data"]["rows"][0]["memory_bytes"] == b["data"]["rows"][0]["memory_bytes"]


def test_unbounded_comm_domain_is_null_in_json(cli):
    # --bw describes a switched tier with no domain limit: null, not the largest 32-bit integer.
    r = cli(["comm", "all-reduce", "--size", "1GiB", "--group", "64", "--bw", "400Gb/s", "--json"])
    assert "2147483647" not in r.stdout
    tiers = [t for s in json.loads(r.stdout)["data"]["systems"] for t in (s["scale_up"], s["scale_out"]) if t]
    assert [t["domain_size"] for t in tiers] == [None]


@pytest.mark.parametrize("mode,flag,value", [
    ("infer", "--zero", "3"), ("infer", "--micro-batch", "2"), ("infer", "--recompute", "full"),
    ("train", "--batch", "8"), ("train", "--kv-dtype", "fp8"),
])
def test_flag_that_does_not_apply_to_the_mode_is_a_usage_error(cli, mode, flag, value):
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--mode", mode, flag, value])
    assert r.exit_code == 2 and flag in r.output


HF = __import__("pathlib").Path(__file__).parent / "data" / "hf"


def test_model_from_stdin_equals_the_file(cli):
    text = (HF / "llama-3.1-8b.json").read_text()
    piped = cli(["fit", "-", "--sku", "mi300x", "--json"], input=text)
    assert piped.exit_code == 0, piped.output
    from_file = cli(["fit", str(HF / "llama-3.1-8b.json"), "--sku", "mi300x", "--json"])
    a, b = json.loads(piped.stdout)["data"], json.loads(from_file.stdout)["data"]
    assert a["rows"][0]["memory_bytes"] == b["rows"][0]["memory_bytes"]
    assert a["model"]["params_total"] == b["model"]["params_total"]


def test_empty_stdin_is_a_file_error(cli):
    r = cli(["fit", "-", "--sku", "mi300x"], input="")
    assert r.exit_code == 3 and "standard input is empty" in r.output


def test_hugging_face_model_directory(cli, tmp_path):
    d = tmp_path / "Llama-3.1-8B"
    d.mkdir()
    (d / "config.json").write_text((HF / "llama-3.1-8b.json").read_text())
    r = cli(["fit", str(d), "--sku", "mi300x", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["data"]["model"]["name"] == "llama-3.1-8b"
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli(["fit", str(empty), "--sku", "mi300x"])
    assert r.exit_code == 3 and "config.json" in r.output


def test_global_batch_not_whole_sequences_names_the_nearest(cli):
    # 4M tokens / 8192 = 488.28 sequences: the hint offers 488 (3,997,696 tokens) and 489 (4,005,888).
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--seq", "8192", "--global-batch", "4M",
             "--no-ranges"])
    assert r.exit_code == 2
    text = " ".join(r.output.split())
    assert "488 (3,997,696 tokens)" in text and "489 (4,005,888 tokens)" in text


def test_several_precisions_in_one_fit_table(cli):
    both = json.loads(cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--precision", "bf16,fp8",
                           "--json"]).stdout)["data"]
    assert both["precisions"] == ["bf16", "fp8"] and set(both["recipes"]) == {"bf16", "fp8"}
    assert [(r["sku"], r["precision"]) for r in both["rows"]] == [
        ("mi300x", "bf16"), ("mi300x", "fp8"), ("h100", "bf16"), ("h100", "fp8")]
    for p in ("bf16", "fp8"):
        one = json.loads(cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--precision", p,
                              "--json"]).stdout)["data"]
        assert [r["memory_bytes"] for r in one["rows"]] == [r["memory_bytes"] for r in both["rows"] if r["precision"] == p]
    table = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--precision", "bf16", "--precision", "float8"]).stdout
    assert "precision" in table and "fp8" in table


def test_format_md_prints_pipe_tables(cli):
    out = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--format", "md"]).stdout
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| sku"))
    assert lines[header + 1].startswith("|---") and "---:" in lines[header + 1]
    rows = [line for line in lines[header + 2:] if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows] == ["mi300x", "h100"]
    assert all(line.count("|") == lines[header].count("|") for line in rows)
