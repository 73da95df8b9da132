"""Measured training runs against the step-time model: signed errors, group statistics, leave-one-source-out
cross-validation and the empirical error bands ``fit`` and ``sweep`` print.

Sign convention: ``error = measured step / predicted step - 1`` = predicted tokens/s / measured - 1, so a
positive error means the model is optimistic (it predicts a faster step than was measured).

Leave-one-source-out (LOSO): for each source (a publication: its URL and date), the calibrated
parameters are refitted on the runs of every *other* source (``calibrate``'s fit, per SKU, on the runs
of that SKU), and the held-out source's runs are predicted at the refitted values. A SKU whose other
sources hold no run keeps its profile values. The LOSO errors say how far a calibration on the rest
carries to a publication it never saw.

The bundled runs are ``mi400plan/data/train_validation.csv`` (a row a run, with its source, date and
URL); ``mi400plan/data/error_bands.json`` is the band table computed from them (``validate
--write-bands``; ``tests/test_validate.py`` checks it matches a fresh computation).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mi400plan.bands import Band

BUNDLED_RUNS = "train_validation.csv"
MIN_BAND_RUNS = 3  # a group with fewer runs gives no band (the next wider group does)


@dataclass(frozen=True)
class RunMeta:
    """What groups a measured run: its id, SKU family, software stack (None when the file does not say),
    whether the model is a mixture of experts, and its source (title, date, URL)."""

    id: str
    sku: str
    family: str
    stack: str | None
    moe: bool
    source: str  # the source key: URL and date ("file" for a user's file without them)
    source_title: str
    # False: a validation-only run (predicted and reported, in the bands, never in a leave-one-source-out
    # refit): a source the calibration discipline keeps out of fits, or a workload the runs format cannot
    # fully express (the ``refit`` column, ``RECIPE_DEFAULTS``)
    refit: bool = True


@dataclass(frozen=True)
class RunError:
    meta: RunMeta
    measured_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        """Signed error, + = the model is optimistic (predicts a shorter step than measured)."""
        return signed_error(self.measured_s, self.predicted_s)


def signed_error(measured_s: float, predicted_s: float) -> float:
    """``measured / predicted - 1``: the predicted throughput's relative error (+ = optimistic)."""
    return measured_s / predicted_s - 1.0


@dataclass(frozen=True)
class GroupStat:
    """Errors of one group of runs: count, signed mean, mean |error|, max |error| (fractions)."""

    group: str  # "family", "moe", "stack", "source" or "all"
    name: str
    runs: int
    mean: float
    mean_abs: float
    max_abs: float


def group_stat(group: str, name: str, errors: Sequence[float]) -> GroupStat:
    n = len(errors)
    return GroupStat(group, name, n, sum(errors) / n, sum(abs(e) for e in errors) / n, max(abs(e) for e in errors))


def dense_or_moe(meta: RunMeta) -> str:
    return "MoE" if meta.moe else "dense"


def summarize(points: Sequence[tuple[RunMeta, float]]) -> list[GroupStat]:
    """Statistics of ``(run, error)`` pairs over all runs, by SKU family, dense vs MoE and, where the runs
    name it, by software stack."""
    keys: list[tuple[str, Callable[[RunMeta], str | None]]] = [
        ("family", lambda m: m.family), ("moe", dense_or_moe), ("stack", lambda m: m.stack)]
    out = [group_stat("all", "all", [e for _, e in points])] if points else []
    for group, key in keys:
        by: dict[str, list[float]] = {}
        for meta, e in points:
            k = key(meta)
            if k is not None:
                by.setdefault(k, []).append(e)
        out.extend(group_stat(group, k, v) for k, v in sorted(by.items()))
    return out


# --- leave-one-source-out ------------------------------------------------------------------------

Refit = Callable[[Sequence[int], Sequence[int]], list[float]]


def loso_errors(metas: Sequence[RunMeta], refit: Refit) -> tuple[list[float | None], list[str]]:
    """Leave-one-source-out errors, one per run (None for a run whose source is the only one).

    ``refit(train, test)`` refits on the runs at indices ``train`` and returns the predicted step times of
    the runs at ``test``. Returns the errors and the sources held out in turn."""
    sources = sorted({m.source for m in metas})
    out: list[float | None] = [None] * len(metas)
    if len(sources) < 2:
        return out, []
    for s in sources:
        test = [i for i, m in enumerate(metas) if m.source == s]
        train = [i for i, m in enumerate(metas) if m.source != s and m.refit]
        for i, p in zip(test, refit(train, test)):
            out[i] = p
    return out, sources


# --- error bands ---------------------------------------------------------------------------------


def bands_from(points: Iterable[tuple[RunMeta, float]]) -> list[Band]:
    """Bands per (dense/MoE, stack) and per dense/MoE over every stack, from ``(run, LOSO error)`` pairs;
    groups with fewer than ``MIN_BAND_RUNS`` runs are left out."""
    groups: dict[tuple[str, str | None], list[float]] = {}
    for meta, e in points:
        kind = dense_or_moe(meta)
        groups.setdefault((kind, None), []).append(e)
        if meta.stack:
            groups.setdefault((kind, meta.stack), []).append(e)
    return [Band(k, s, len(v), sum(abs(x) for x in v) / len(v), max(abs(x) for x in v))
            for (k, s), v in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))
            if len(v) >= MIN_BAND_RUNS]


def bands_json(bands: Sequence[Band]) -> str:
    """The band table as written to ``bands.BANDS_FILE`` (rounded to 0.1 % so a refit's noise does not churn it)."""
    rows = [dict(kind=b.kind, stack=b.stack, runs=b.runs, mean_abs=round(b.mean_abs, 3), max_abs=round(b.max_abs, 3))
            for b in bands]
    head = ("error bands of the step-time model: mean |error| of the bundled measured runs under "
            "leave-one-source-out cross-validation (mi400plan validate --write-bands)")
    return json.dumps({"note": head, "runs_file": BUNDLED_RUNS, "bands": rows}, indent=2) + "\n"


# --- the bundled runs file -----------------------------------------------------------------------


def bundled_text() -> str:
    from mi400plan.cache import package_dir

    return package_dir("data").joinpath(BUNDLED_RUNS).read_text(encoding="utf-8")


def read_rows(text: str) -> list[dict[str, str]]:
    """The rows of a runs CSV in the bundled format (header line, one run a row)."""
    import csv  # only the validate command reads runs files

    return list(csv.DictReader(io.StringIO(text)))


def row_source(r: dict[str, Any]) -> str:
    """A bundled row's source key: its URL and date (one publication)."""
    return f"{r['source_url']} ({r['source_date']})"


# --- reproducing a bundled run -------------------------------------------------------------------
# How a row is reproduced (``tests/test_validation_train.py`` documents every column and its source):
# the bundled model (Llama 3 8B/70B runs use the ``llama3.1`` profiles, whose architectures are the
# same), MosaicML's MPT models from their llm-foundry configurations (``MPT``) and DeepSeek-V2(-Lite)
# from their Hugging Face configurations (``DEEPSEEK_V2``); the layout as published, DDP with the
# distributed optimizer = ZeRO-1 and FSDP = ZeRO-3; the recipe columns the run's framework sets.

# MosaicML MPT (llm-foundry ``scripts/train/yamls/pretrain/mpt-*.yaml``, 2023): d_model, n_heads, n_layers;
# expansion ratio 4 (GELU), vocabulary 50,368, no biases, LayerNorm, learned positions, tied embeddings.
MPT = {"mpt-1b": (2048, 16, 24), "mpt-3b": (2560, 20, 32), "mpt-7b": (4096, 32, 32),
       "mpt-13b": (5120, 40, 40), "mpt-30b": (7168, 64, 48), "mpt-70b": (8192, 64, 80)}
# DeepSeek-V2 and DeepSeek-V2-Lite, the keys of their Hugging Face ``config.json`` (deepseek-ai, 2024-05).
DEEPSEEK_V2 = {
    "deepseek-v2": dict(hidden_size=5120, num_hidden_layers=60, num_attention_heads=128, intermediate_size=12288,
                        moe_intermediate_size=1536, n_routed_experts=160, q_lora_rank=1536),
    "deepseek-v2-lite": dict(hidden_size=2048, num_hidden_layers=27, num_attention_heads=16, intermediate_size=10944,
                             moe_intermediate_size=1408, n_routed_experts=64, q_lora_rank=None),
}
DEEPSEEK_V2_COMMON = dict(model_type="deepseek_v2", n_shared_experts=2, num_experts_per_tok=6, kv_lora_rank=512,
                          qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, vocab_size=102400,
                          max_position_embeddings=163840, first_k_dense_replace=1, moe_layer_freq=1,
                          tie_word_embeddings=False)
# Recipe columns and what a row without them gets: the model's defaults.
RECIPE_DEFAULTS = {"offload_layers": "0", "tp_overlap": "0", "ep_overlap": "0", "grad_dtype": "fp32", "mtp_layers": "0",
                   "recipe": "megatron", "fp8_params": "0", "fp8_weight_copies": "", "recompute_modules": "",
                   "capacity_factor": "", "fused_cross_entropy": "", "moe_capacity_factor": "", "finetune": "none",
                   "lora_rank": "", "lora_targets": "", "refit": "1", "recompute_layers": "",
                   "bf16_gemm_share": "", "doc_length": "", "pack_efficiency": ""}
LAYOUT_KEYS = ("gpus", "seq", "gbs", "mbs", "tp", "pp", "vp", "cp", "ep", "fsdp", "recompute", "offload_layers",
               "tp_overlap", "ep_overlap", "mtp_layers")


def with_defaults(r: dict[str, str]) -> dict[str, str]:
    """The row with ``RECIPE_DEFAULTS`` for every recipe column it lacks or leaves empty."""
    return {**RECIPE_DEFAULTS, **{k: v for k, v in r.items() if not (k in RECIPE_DEFAULTS and v == "")}}


def model_spec(catalog: Any, name: str, seq: int) -> Any:
    """A bundled model, a DeepSeek-V2 model from its configuration, or an MPT model with ``seq`` learned
    positions (the benchmark trains each sequence length with its own position table)."""
    from mi400plan.hfconfig import model_from_hf_config
    from mi400plan.specs.model import Attention, ModelSpec

    if name in DEEPSEEK_V2:
        cfg: dict[str, Any] = {**DEEPSEEK_V2_COMMON, **DEEPSEEK_V2[name]}
        cfg["num_key_value_heads"] = cfg["num_attention_heads"]
        return model_from_hf_config(cfg, path=f"{name}/config.json", name=name)
    if name not in MPT:
        return catalog.get("models", name).spec
    d, heads, layers = MPT[name]
    return ModelSpec(name=name, display_name=name.upper(), hidden_size=d, num_layers=layers, vocab_size=50368,
                     ffn_dim=4 * d, ffn_kind="gelu", linear_bias=False, norm="layernorm", position_embedding="learned",
                     max_seq_len=seq, tie_embeddings=True, attention=Attention(num_heads=heads))


def row_recipe(r: dict[str, str]) -> Any:
    """The run's memory recipe from its columns (``RECIPE_DEFAULTS`` where a file has none)."""
    from mi400plan.specs.layout import train_recipe, with_bf16_gemm_share, with_expert_capacity, with_lora, with_packing

    r = with_defaults(r)
    recipe = train_recipe(
        r["recipe"], precision=r["precision"], grad_dtype=r["grad_dtype"], offload_layers=int(r["offload_layers"]),
        fp8_params=r["fp8_params"] == "1" or None,
        fp8_weight_copies=int(r["fp8_weight_copies"]) if r["fp8_weight_copies"] else None,
        recompute_modules=r["recompute_modules"] or None,
        recompute_layers=int(r["recompute_layers"]) if r["recompute_layers"] else None,
        capacity_factor=float(r["capacity_factor"]) if r["capacity_factor"] else None,
        fused_cross_entropy=r["fused_cross_entropy"] == "1" or None)
    if r["bf16_gemm_share"]:  # the share of block linear layers a low-precision run kept in BF16 (as --bf16-gemm-share)
        recipe = with_bf16_gemm_share(recipe, float(r["bf16_gemm_share"]))
    cap = float(r["moe_capacity_factor"]) if r["moe_capacity_factor"] else None
    recipe = with_expert_capacity(recipe, cap, buffers_given=bool(r["capacity_factor"]))
    recipe = with_lora(recipe, r["finetune"], int(r["lora_rank"]) if r["lora_rank"] else None, r["lora_targets"] or None)
    # packed sequences (``mi400plan.packing``): the documents the run's dataset packs into each row
    recipe = with_packing(recipe, r["doc_length"] or None, float(r["pack_efficiency"]) if r["pack_efficiency"] else None)
    return recipe.model_copy(update={"mtp_layers": int(r["mtp_layers"])}) if int(r["mtp_layers"]) else recipe


def row_workload(catalog: Any, r: dict[str, str]) -> Any:
    """``search.Workload`` of a bundled row (each multi-token-prediction module counted as one more layer, its
    projection and output-head pass by the recipe's ``mtp_layers``)."""
    from mi400plan.params import count_params
    from mi400plan.search import Workload

    r = with_defaults(r)
    model = model_spec(catalog, r["model"], int(r["seq"]))
    if int(r["mtp_layers"]):
        model = model.model_copy(update={"num_layers": model.num_layers + int(r["mtp_layers"])})
    return Workload(model, count_params(model), row_recipe(r), int(r["seq"]), int(r["gbs"]))


def row_options(r: dict[str, str], split: bool) -> Any:
    """``search.SearchOptions`` pinning a bundled row's layout (sequence parallelism searched)."""
    from mi400plan.search import SearchOptions

    n = {k: int(with_defaults(r)[k]) for k in LAYOUT_KEYS}
    return SearchOptions(tp=(n["tp"],), pp=(n["pp"],), vpp=(n["vp"],), cp=(n["cp"],), ep=(n["ep"],), etp=(1,),
                         zero=(3,) if n["fsdp"] else (1,), micro_batch=(n["mbs"],), recompute=(n["recompute"],),
                         split_embedding_loss=split, overlap_tp=bool(n["tp_overlap"]),
                         overlap_ep=bool(n["ep_overlap"]))


def measured_step_s(r: dict[str, str]) -> float:
    """A row's measured step: global batch x sequence / (tokens/s per GPU x GPUs)."""
    return int(r["gbs"]) * int(r["seq"]) / (float(r["tokens_per_s_per_gpu"]) * int(r["gpus"]))


def row_meta(r: dict[str, str], moe: bool) -> RunMeta:
    return RunMeta(id=r["id"], sku=r["sku"], family=r["family"], stack=r.get("stack") or None, moe=moe,
                   source=row_source(r), source_title=r["source_title"], refit=with_defaults(r)["refit"] != "0")
