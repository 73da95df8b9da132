"""Model families as templates: the shape of a model of any size in a family, from its published rules.

``dense`` follows Llama 3 (Llama Team, Meta, 'The Llama 3 Herd of Models', arXiv 2407.21783,
2024-07-23, Table 3; the released ``params.json`` files): head dimension 128, 8 key/value heads
(grouped-query attention), SwiGLU with Meta's width rule ``ffn = m x ceil(f x (8/3) d / m)``
(``f`` = 1.3, ``m`` = 1024 for the 8B model and 4096 for the 70B; the 405B used ``f`` = 1.2, the
template keeps 1.3),
RMSNorm, RoPE, untied embeddings and the 128,256-token vocabulary. Depth follows a fixed aspect ratio
``d_model / layers`` = 128: the 8B model has exactly that (4096 / 32), the 405B 130 (16384 / 126),
the 70B 102 (8192 / 80); Kaplan et al. 2020 (arXiv 2001.08361, fig. 5) found loss within a few
percent over aspect ratios 20-200, so the rule prices the family, not one checkpoint.

A family is a ladder of sizes: widths in steps of 1,024 (so the query heads are a multiple of the 8
key/value heads), each at its aspect-ratio depth rounded to an even layer count. ``moe`` swaps every
FFN for ``experts`` routed experts of which ``top_k`` run per token, each expert ``ffn / top_k`` wide,
so a token's active FFN parameters equal the dense model's and total parameters grow with
``experts / top_k`` (the expert ratio); routers are linear (Mixtral / DeepSeek style).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from mi400plan.errors import UsageError
from mi400plan.specs.model import ModelSpec

HEAD_DIM = 128
KV_HEADS = 8
ASPECT = 128  # d_model / layers
WIDTH_STEP = 1024
MIN_WIDTH = 1024
MAX_WIDTH = 65536
VOCAB = 128256
FamilyName = Literal["dense", "moe"]


@dataclass(frozen=True)
class FamilyTemplate:
    """A family and its options; ``ladder()`` lists its models from small to large."""

    family: FamilyName = "dense"
    experts: int = 0
    top_k: int = 0
    max_seq_len: int = 131072

    def __post_init__(self) -> None:
        if self.family == "moe":
            if self.experts < 2 or not 1 <= self.top_k < self.experts:
                raise UsageError(
                    f"an MoE family needs experts >= 2 and 1 <= top-k < experts, got {self.experts} and {self.top_k}"
                )
        elif self.experts or self.top_k:
            raise UsageError("--experts and --top-k describe an MoE family: add --family moe")

    def label(self) -> str:
        if self.family == "moe":
            return f"moe (Llama-3 shape, {self.experts} experts, top-{self.top_k})"
        return "dense (Llama-3 shape)"

    def name(self, width: int) -> str:
        """The model's name, which ``family_model`` (and so every command's model lookup) reads back:
        ``dense-d{width}-l{layers}``, ``moe-e{experts}-k{top_k}-d{width}-l{layers}``."""
        tail = f"d{width}-l{layers_for(width)}"
        return f"moe-e{self.experts}-k{self.top_k}-{tail}" if self.family == "moe" else f"dense-{tail}"

    def widths(self) -> list[int]:
        return list(range(MIN_WIDTH, MAX_WIDTH + 1, WIDTH_STEP))

    def model(self, width: int) -> ModelSpec:
        """The family's model at ``width`` (a multiple of 1,024)."""
        if width % WIDTH_STEP or not MIN_WIDTH <= width <= MAX_WIDTH:
            raise UsageError(f"a family width is a multiple of {WIDTH_STEP} in {MIN_WIDTH}..{MAX_WIDTH}, got {width}")
        layers = layers_for(width)
        ffn = ffn_dim(width)
        raw: dict[str, object] = {
            "name": self.name(width),
            "display_name": f"{self.label()}: d_model {width}, {layers} layers",
            "family": f"template-{self.family}",
            "hidden_size": width,
            "num_layers": layers,
            "vocab_size": VOCAB,
            "ffn_dim": ffn,
            "max_seq_len": self.max_seq_len,
            "attention": {"kind": "gqa", "num_heads": width // HEAD_DIM, "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM},
        }
        if self.family == "moe":
            raw["moe"] = {
                "num_experts": self.experts,
                "top_k": self.top_k,
                "expert_ffn_dim": max(1, round(ffn / self.top_k)),
            }
        return ModelSpec.model_validate(raw)


def layers_for(width: int) -> int:
    """Depth at aspect ratio 128, rounded to an even count (at least 2)."""
    return max(2, 2 * round(width / ASPECT / 2))


def ffn_dim(width: int) -> int:
    """Meta's SwiGLU width rule: m x ceil(f x (8/3) d / m); f = 1.3, m = 1024 up to d = 4096 and 4096
    above (reproduces Llama 3's 14,336 at 4,096 and 28,672 at 8,192)."""
    multiple = 1024 if width <= 4096 else 4096
    return multiple * math.ceil(1.3 * int(8 * width / 3) / multiple)


_NAME = re.compile(r"(?:(dense)|moe-e(\d+)-k(\d+))-d(\d+)-l(\d+)")


def family_model(name: str) -> ModelSpec | None:
    """The family model a name spells (``FamilyTemplate.name``), or None when it is not such a name.

    A name of the family's form whose width is off the ladder, or whose layer count is not the one
    the template gives that width, is a UsageError naming the right one, not an unknown model."""
    m = _NAME.fullmatch(name.strip().lower())
    if m is None:
        return None
    dense, experts, top_k, width, layers = m.groups()
    w = int(width)
    if w % WIDTH_STEP or not MIN_WIDTH <= w <= MAX_WIDTH:
        raise UsageError(f"model {name!r}: a family width is a multiple of {WIDTH_STEP} in {MIN_WIDTH}..{MAX_WIDTH}, "
                         f"got {w}")
    t = FamilyTemplate() if dense else FamilyTemplate("moe", int(experts), int(top_k))
    if int(layers) != layers_for(w):
        raise UsageError(f"model {name!r}: the {t.family} family model of width {w} has {layers_for(w)} layers "
                         f"(d_model / layers = {ASPECT})", hint=f"use {t.name(w)}")
    return t.model(w)
