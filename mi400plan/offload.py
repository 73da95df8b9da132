"""The layouts CPU activation offloading runs with in Megatron-Core, the runtime the planner's
``--offload-layers`` models (``--cpu-offloading --cpu-offloading-num-layers N``).

``TransformerConfig.__post_init__`` (NVIDIA/Megatron-LM, ``megatron/core/transformer/transformer_config.py``,
lines 1884-1899 at commit d98e8a6, 2026-08-22) raises ``ValueError`` when ``cpu_offloading`` is set with

* ``cpu_offloading_num_layers`` outside ``[0, num_layers)`` ("CPU offloading can be done only for
  layers less than {num_layers}"),
* ``pipeline_model_parallel_size > 1`` ("Currently there is no support for Pipeline parallelism with
  CPU offloading"),
* any ``recompute_granularity`` (selective or full: "CPU offloading does not work when activation
  recomputation is enabled").

``fit`` refuses these combinations, ``sweep`` never proposes them (search rule ``RULE``) and ``calibrate``
refuses runs that claim them. Leaf module.
"""

from __future__ import annotations

RULE = "offload-runtime"
RULE_TEXT = "CPU activation offloading with PP > 1 or with activation recomputation (Megatron-Core refuses both)"


def offload_refusal(offload_layers: int, pp: int, recompute: str | int, num_layers: int) -> str | None:
    """Why Megatron-Core refuses ``offload_layers`` offloaded layers with this PP and recomputation
    (``"none"``/0, ``"selective"``/1, ``"full"``/2) on a model of ``num_layers`` layers; None when it runs."""
    if offload_layers <= 0:
        return None
    if pp > 1:
        return f"Megatron-Core has no CPU activation offloading with pipeline parallelism (PP {pp}); use PP 1"
    if recompute not in ("none", 0):
        name = recompute if isinstance(recompute, str) else ("none", "selective", "full")[int(recompute)]
        return (f"Megatron-Core's CPU activation offloading does not work with activation recomputation "
                f"(recompute {name}); use recompute none")
    if offload_layers >= num_layers:
        return (f"at most {num_layers - 1} of the model's {num_layers} layers can be offloaded (Megatron-Core: "
                f"cpu_offloading_num_layers < num_layers), not {offload_layers}")
    return None
