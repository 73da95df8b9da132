"""Packed sequences: several short documents in one ``seq``-token row, attention kept inside each document.

Fine-tuning data (SFT, LoRA) is short samples; the frameworks pack them into full rows and run attention
per document with the variable-length ("THD") kernels: Transformer Engine's fused attention and
flash-attn's ``flash_attn_varlen_func`` take the documents' boundaries as ``cu_seqlens`` and skip every
block across a boundary (Megatron-Bridge ``packed_sequence_specs``, ``megatron/bridge/data/datasets/
packed_sequence.py``, 2026-06). What that changes in a step:

* The GEMMs, norms and the loss see every token of the row (padding included): unchanged.
* The attention core does, per row, the causal work of each document: ``sum_i d_i^2 / 2`` query-key pairs
  instead of ``seq^2 / 2``. With documents of lengths ``D`` (truncated to the row: ``d = min(D, seq)``)
  filling a fraction ``eta`` of the row (the packing efficiency; the rest is padding at its end), a row
  holds ``eta seq / E[d]`` documents on average, so its causal work is ``eta seq E[d^2] / E[d] / 2``: the
  full-row work ``seq^2 / 2`` times ``eta E[d^2] / (E[d] seq)``. :func:`attention_span` returns
  ``eta E[d^2] / E[d]``, the key length each query sees on average in the model's ``q_len x span`` pricing
  (``gemm.attention_seconds``); 4,096-token rows of 512-token documents: 8 documents, ``512`` = 1/8 of the
  row. Padding attends to nothing counted here (Megatron-Bridge's ``pad_cu_seqlens`` makes it one more
  segment; its work is at most ``(1 - eta)^2 seq^2 / 2``).
* ``eta``, when not given, is what the packer Megatron-Bridge runs by default reaches on these lengths:
  ``first_fit_shuffle`` (``packing_utils.py``, 2026-06: first fit over the shuffled documents), simulated
  on ``PACK_SAMPLE`` documents drawn from the distribution (seeded, so the same input gives the same
  number). First fit opens a new row only for a document that fits in no open row, so ``eta`` is high
  for short documents (0.99 for documents of 100-300 tokens, uniform, in 4,096-token rows).
* Memory is unchanged: flash attention keeps per-token statistics only, and the varlen kernels need it
  (``--no-flash`` with packing is refused).

No numpy at import (the spec is read by every command); the arithmetic imports it on use.
"""

from functools import lru_cache
from typing import Literal

from pydantic import Field

from mi400plan.errors import UsageError
from mi400plan.specs.common import StrictModel

# Documents drawn to simulate the packer (a seeded sample): enough rows that the last, partly filled one
# moves the efficiency by well under 1 %.
PACK_SAMPLE = 8192
PACK_SEED = 20260615
MIN_ROWS = 200  # draw more documents when the sample would fill fewer rows (long rows of short documents)
MAX_SAMPLE = 65536


class PackedDocs(StrictModel):
    """The documents packed into each row: their token lengths (``fixed``, ``uniform`` integers lo..hi, or a
    ``histogram`` of lengths with counts), the packing efficiency if given (None: the packer's, simulated),
    and where the lengths come from."""

    kind: Literal["fixed", "uniform", "histogram"]
    values: tuple[int, ...] = Field(min_length=1)
    weights: tuple[float, ...] = ()
    efficiency: float | None = Field(default=None, gt=0.0, le=1.0)
    source: str = ""


def parse_doc_length(text: str, efficiency: float | None = None, source: str = "") -> PackedDocs:
    """``--doc-length``: ``512`` / ``1k`` (every document that long), ``uniform:A-B`` or a CSV histogram of
    ``length,count`` rows, read as serve's ``--input-len`` reads a length distribution
    (``serve_sim.parse_length_dist``); ``efficiency`` is ``--pack-efficiency`` (0 < eta <= 1)."""
    from mi400plan.serve_sim import parse_length_dist

    if efficiency is not None and not 0.0 < float(efficiency) <= 1.0:
        raise UsageError(f"--pack-efficiency must be in (0, 1] (the share of each packed row holding document "
                         f"tokens), got {efficiency}")
    d = parse_length_dist(str(text), "--doc-length")
    return PackedDocs(kind=d.kind, values=d.values, weights=d.weights, efficiency=efficiency,  # type: ignore[arg-type]
                      source=source or (d.source if d.kind == "histogram" else ""))


def _support(docs: PackedDocs) -> tuple["np.ndarray", "np.ndarray"]:  # noqa: F821
    """(lengths, probabilities) of the distribution; a uniform range is summed in closed form elsewhere."""
    import numpy as np

    if docs.kind == "histogram":
        w = np.asarray(docs.weights, dtype=np.float64)
        return np.asarray(docs.values, dtype=np.float64), w / w.sum()
    return np.asarray(docs.values[:1], dtype=np.float64), np.ones(1)


def clipped_moments(docs: PackedDocs, seq: int) -> tuple[float, float]:
    """``E[d]`` and ``E[d^2]`` of the document lengths truncated to the row, ``d = min(D, seq)`` (a document
    longer than the row fills it alone). Uniform integers ``lo..hi``: the sums of ``k`` and ``k^2`` over the
    range below ``seq``, plus ``seq`` (and ``seq^2``) for each length at or above it."""
    if docs.kind == "uniform":
        lo, hi = docs.values[0], docs.values[1]
        n = hi - lo + 1
        top = min(hi, seq - 1)

        def s1(k: int) -> float:  # sum of 1..k
            return k * (k + 1) / 2.0

        def s2(k: int) -> float:  # sum of squares 1..k
            return k * (k + 1) * (2 * k + 1) / 6.0

        below = max(0, top - lo + 1)
        m1 = (s1(top) - s1(lo - 1) if below else 0.0) + (n - below) * seq
        m2 = (s2(top) - s2(lo - 1) if below else 0.0) + (n - below) * float(seq) ** 2
        return m1 / n, m2 / n
    import numpy as np

    vals, p = _support(docs)
    d = np.minimum(vals, float(seq))
    return float(np.dot(p, d)), float(np.dot(p, d * d))


def _draw(docs: PackedDocs, seq: int, n: int) -> "np.ndarray":  # noqa: F821
    import numpy as np

    from mi400plan.serve_sim import LengthDist

    rng = np.random.default_rng(PACK_SEED)
    lengths = LengthDist(docs.kind, docs.values, docs.weights).sample(rng, n)
    return np.minimum(lengths, seq)


def first_fit_efficiency(docs: PackedDocs, seq: int) -> float:
    """Share of the rows' tokens that are document tokens when Megatron-Bridge's default packer
    (``first_fit_shuffle``: each document, in shuffled order, into the first row with room for it) packs a
    seeded sample of the distribution into ``seq``-token rows; the last row (partly filled because the
    sample ends) is left out."""
    import numpy as np

    if docs.kind == "fixed":  # equal documents: first fit puts floor(seq / d) in each row
        d = min(docs.values[0], seq)
        return (seq // d) * d / seq
    mean = clipped_moments(docs, seq)[0]
    n = int(min(MAX_SAMPLE, max(PACK_SAMPLE, MIN_ROWS * seq / max(mean, 1.0))))
    lengths = _draw(docs, seq, n)
    room = np.full(n, seq, dtype=np.int64)  # room left in each row opened so far (at most one per document)
    rows = 0
    for d in lengths:
        fits = np.flatnonzero(room[:rows] >= d)
        i = int(fits[0]) if fits.size else rows
        rows += int(i == rows)
        room[i] -= d
    used = seq - room[:max(1, rows - 1)]
    return float(used.sum() / (used.size * seq))


@lru_cache(maxsize=64)
def efficiency(docs: PackedDocs, seq: int) -> float:
    """The packing efficiency: the given one, else the packer's (:func:`first_fit_efficiency`)."""
    return docs.efficiency if docs.efficiency is not None else first_fit_efficiency(docs, seq)


def attention_span(docs: PackedDocs | None, seq: int) -> float:
    """Mean key length a query of a packed row attends over, for the ``q_len x span`` causal pricing of
    ``gemm.attention_seconds``: ``eta E[d^2] / E[d]`` (module docstring), at most ``seq``; ``seq`` without
    packing."""
    if docs is None:
        return float(seq)
    m1, m2 = clipped_moments(docs, seq)
    return min(float(seq), efficiency(docs, seq) * m2 / m1)


def packing_text(docs: PackedDocs, seq: int) -> str:
    """One line for the output: the documents, the rows they make and the attention work left."""
    m1, _ = clipped_moments(docs, seq)
    eta = efficiency(docs, seq)
    how = ("--pack-efficiency" if docs.efficiency is not None
           else "first-fit packing of the shuffled documents, Megatron-Bridge's default packer")
    lengths = {"fixed": f"{docs.values[0]:,} tokens", "uniform": f"uniform {docs.values[0]:,}-{docs.values[-1]:,}",
               "histogram": f"histogram of {len(docs.values)} lengths"}[docs.kind]
    src = f" ({docs.source})" if docs.source else ""
    span = attention_span(docs, seq)
    return (f"packed sequences: documents of {lengths}{src}, mean {m1:,.0f} tokens (truncated to the row), "
            f"{eta * seq / m1:,.1f} per {seq:,}-token row at {eta:.1%} packing efficiency ({how}); attention runs "
            f"per document: {span / seq:.1%} of the full row's causal work")


def options_packing_text(options: object, seq: int) -> str | None:
    """The packing line of a ``TrainOptions`` (None: one sequence a row)."""
    text = getattr(options, "doc_length", None)
    if text is None:
        return None
    return packing_text(parse_doc_length(text, getattr(options, "pack_efficiency", None)), seq)
