"""Packed sequences (``mi400plan.packing``): per-document causal attention work, checked by hand arithmetic.

A row of ``seq`` tokens holding documents of lengths ``d_i`` does ``sum_i d_i^2 / 2`` causal query-key pairs
instead of ``seq^2 / 2`` (NeMo's sequence-packing guide: "the complexity of attention remains at sum_i s_i^2").
"""

from __future__ import annotations

import json

import pytest

from mi400plan import gemm
from mi400plan.errors import UsageError
from mi400plan.packing import (
    PackedDocs,
    attention_span,
    clipped_moments,
    first_fit_efficiency,
    parse_doc_length,
)

SHAPES = gemm.LayerShapes(hidden=4096, attn_in=6144, attn_out_k=4096, ffn_in=28672, ffn_out_k=14336, shared_in=0,
                          shared_out_k=0, expert_in=0, expert_out_k=0, experts=0, top_k=0, vocab=128256, heads=32,
                          qk_dim=128, v_dim=128)
ASKU = gemm.AttnSku(peak_flops=1e15, efficiency=0.5, units=0)
GSKU = gemm.GemmSku(peak_flops=1e15, ceiling=0.7, hbm_bytes_per_s=3e12, units=0, overhead_s=0.0)


def test_4096_row_of_512_token_documents_does_an_eighth_of_the_attention() -> None:
    # 4,096 / 512 = 8 documents; causal work 8 x 512^2 / 2 = 1,048,576 pairs vs 4,096^2 / 2 = 8,388,608: 1/8
    docs = parse_doc_length("512")
    assert first_fit_efficiency(docs, 4096) == 1.0  # 8 x 512 fill the row exactly
    span = attention_span(docs, 4096)
    assert span == 512.0
    assert 4096 * span / 2 == 8 * 512**2 / 2
    full_f, full_b = gemm.attention_seconds(SHAPES, 1, 4096, 1, 1, True, GSKU, ASKU)
    f, b = gemm.attention_seconds(SHAPES, 1, 4096, 1, 1, True, GSKU, ASKU, span)
    assert f == pytest.approx(full_f / 8, rel=1e-12)
    assert b == pytest.approx(full_b / 8, rel=1e-12)
    # the forward FLOPs by hand: 32 heads x 4,096 queries x 512 keys x (128 + 128) x 2 FLOP / 2 (causal)
    assert f == pytest.approx(32 * 4096 * 512 * 256 / (1e15 * 0.5), rel=1e-12)


def test_span_without_packing_is_the_row() -> None:
    assert attention_span(None, 8192) == 8192.0


def test_clipped_uniform_moments_by_hand() -> None:
    # uniform 1..4 truncated to 3-token rows: d = 1, 2, 3, 3 -> E[d] = 9/4, E[d^2] = (1 + 4 + 9 + 9) / 4 = 23/4
    m1, m2 = clipped_moments(parse_doc_length("uniform:1-4"), 3)
    assert (m1, m2) == pytest.approx((9 / 4, 23 / 4))
    # all below the row: uniform 100..300 -> E[d] = 200, E[d^2] = 200^2 + (201^2 - 1) / 12 = 43,366.67
    m1, m2 = clipped_moments(parse_doc_length("uniform:100-300"), 4096)
    assert (m1, m2) == pytest.approx((200.0, 40000 + (201**2 - 1) / 12))


def test_histogram_span_with_a_given_efficiency(tmp_path) -> None:  # noqa: ANN001
    # half 100-token, half 300-token documents: E[d] = 200, E[d^2] = (100^2 + 300^2) / 2 = 50,000;
    # 90 % full rows: span = 0.9 x 50,000 / 200 = 225 keys a query
    f = tmp_path / "lengths.csv"
    f.write_text("length,count\n100,5\n300,5\n")
    docs = parse_doc_length(str(f), 0.9)
    assert clipped_moments(docs, 4096) == pytest.approx((200.0, 50000.0))
    assert attention_span(docs, 4096) == pytest.approx(225.0)


def test_first_fit_leaves_the_room_no_document_fits() -> None:
    # 3,000-token documents: one a 4,096-token row; 1,000-token documents: four (4,000 of 4,096)
    assert first_fit_efficiency(parse_doc_length("3000"), 4096) == pytest.approx(3000 / 4096)
    assert first_fit_efficiency(parse_doc_length("1000"), 4096) == pytest.approx(4000 / 4096)
    # a document longer than the row is truncated to it and fills it alone: the full row's work
    docs = parse_doc_length("10000")
    assert attention_span(docs, 8192) == 8192.0


def test_first_fit_on_a_spread_fills_rows_nearly_full() -> None:
    # uniform 100..300 into 4,096-token rows: first fit leaves less than a short document's room in most rows
    eta = first_fit_efficiency(parse_doc_length("uniform:100-300"), 4096)
    assert 1 - 300 / 4096 < eta < 1.0
    # the simulation is seeded: the same input gives the same number
    assert first_fit_efficiency(parse_doc_length("uniform:100-300"), 4096) == eta


@pytest.mark.parametrize("text,eff,msg", [("512", 1.5, "--pack-efficiency must be in (0, 1]"),
                                          ("512", 0.0, "--pack-efficiency must be in (0, 1]"),
                                          ("0", None, "positive token count"),
                                          ("uniform:9-3", None, "exceeds the upper bound")])
def test_bad_packing_input_is_a_usage_error(text: str, eff: float | None, msg: str) -> None:
    with pytest.raises(UsageError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        parse_doc_length(text, eff)


def test_spec_is_hashable_and_frozen() -> None:
    d = PackedDocs(kind="fixed", values=(512,))
    assert hash(d) == hash(PackedDocs(kind="fixed", values=(512,)))


# --- the commands -----------------------------------------------------------------------------------------

SWEEP = ["sweep", "llama3.1-70b", "--sku", "h100", "--gpus", "8", "--seq", "4096", "--global-batch", "32",
         "--tp", "2", "--pp", "4", "--vpp", "20", "--finetune", "lora", "--no-ranges", "--json"]


def _step(cli, extra: list[str]) -> tuple[float, dict]:  # noqa: ANN001
    r = cli([*SWEEP, *extra])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)["data"]
    return data["rows"][0]["step_time_s"], data


def test_sweep_prices_packing_and_says_so(cli) -> None:  # noqa: ANN001
    full, d0 = _step(cli, [])
    packed, d1 = _step(cli, ["--doc-length", "512"])
    assert d0.get("packing") is None
    assert "8.0 per 4,096-token row" in d1["packing"] and "12.5% of the full row's causal work" in d1["packing"]
    assert packed < full
    # fewer documents a row (half the row padding) leave less attention work still
    assert _step(cli, ["--doc-length", "512", "--pack-efficiency", "0.5"])[0] < packed


@pytest.mark.parametrize("args,msg", [
    (["fit", "llama3.1-8b", "--sku", "h100", "--doc-length", "512"], "a step-time switch"),
    (["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "8", "--pack-efficiency", "0.9"], "add --doc-length"),
    (["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "8", "--doc-length", "512", "--no-flash"], "drop --no-flash"),
    (["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "8", "--doc-length", "512", "--pack-efficiency", "2"],
     "pack-efficiency"),
    (["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "8", "--doc-length", "lots"], "--doc-length"),
    (["fit", "llama3.1-8b", "--sku", "h100", "--mode", "infer", "--doc-length", "512"], "--doc-length"),
    (["budget", "--sku", "h100", "--gpus", "8", "--days", "10d", "--doc-length", "512"], "No such option"),
])
def test_packing_refused_where_meaningless(cli, args: list[str], msg: str) -> None:  # noqa: ANN001
    r = cli(args)
    assert r.exit_code == 2 and msg in r.output, r.output


RUNS = """[[run]]
model = "llama3.1-8b"
sku = "h100"
precision = "bf16"
seq_len = 8192
global_batch = 8
dp = 8
step_time_s = 1.0
{extra}
"""


def test_runs_file_prices_packed_documents(cli, tmp_path) -> None:  # noqa: ANN001
    out = {}
    for name, extra in (("plain", ""), ("packed", "doc_length = 1024")):
        f = tmp_path / f"{name}.toml"
        f.write_text(RUNS.format(extra=extra))
        r = cli(["validate", str(f), "--no-loso", "--json"])
        assert r.exit_code == 0, r.output
        out[name] = json.loads(r.stdout)["data"]["rows"][0]["predicted_s"]
    assert out["packed"] < out["plain"]


def test_runs_file_histogram_is_read_beside_it_and_a_bad_one_names_the_line(cli, tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "docs.csv").write_text("length,count\n1024,1\n")
    f = tmp_path / "runs.toml"
    f.write_text(RUNS.format(extra='doc_length = "docs.csv"'))
    assert cli(["validate", str(f), "--no-loso", "--json"]).exit_code == 0
    f.write_text(RUNS.format(extra="doc_length = 1024\nflash_attention = false"))
    r = cli(["validate", str(f), "--no-loso"])
    assert r.exit_code == 3 and "runs.toml" in r.output and "doc_length" in r.output, r.output


def test_largest_names_the_packing_it_priced(cli) -> None:  # noqa: ANN001
    r = cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "8", "--seq", "8k", "--doc-length", "1k", "--json"])
    assert r.exit_code == 0, r.output
    text = json.loads(r.stdout)["data"]["packing"]
    # 8,192 / 1,024 = 8 documents a row, 1/8 of the row's causal work
    assert "8.0 per 8,192-token row" in text and "12.5% of the full row's causal work" in text


def test_model_flops_count_each_documents_attention(catalog) -> None:  # noqa: ANN001
    """Llama 3.1 8B (32 layers, 32 heads x 128 = 4,096 wide): attention model FLOPs per token are
    3 x 4 x context x 4,096 x 32 (PaLM's 12 L H Q T); 512-token documents in 4,096-token rows cut the context
    from 4,096 to 512: 3 x 4 x 3,584 x 4,096 x 32 = 5,637,144,576 FLOP a token fewer."""
    from mi400plan.params import count_params
    from mi400plan.search import model_terms
    from mi400plan.specs.layout import TrainOptions

    model = catalog.get("models", "llama3.1-8b").spec
    counts = count_params(model)
    full = model_terms(model, counts, 4096, TrainOptions().train_recipe())
    packed = model_terms(model, counts, 4096, TrainOptions(doc_length="512").train_recipe())
    assert full.flops_model - packed.flops_model == pytest.approx(3 * 4 * 3584 * 4096 * 32, rel=1e-12)
    assert full.flops_attn_fwd - packed.flops_attn_fwd == pytest.approx(4 * 3584 * 4096 * 32, rel=1e-12)
