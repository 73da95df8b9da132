"""Print the README's serve validation tables (Markdown) from ``mi400plan validate --serve --json``: the
statistics by group (in-sample and leave-one-source-out, signed mean / mean |error| / max |error|, %) and
the published results never fitted, row by row.

Run: ``mi400plan validate --serve --json > v.json && python benchmarks/serve_validation_tables.py v.json``.
"""

from __future__ import annotations

import json
import sys

GROUP_NAMES = {"rocm-vllm": "ROCm vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "vllm": "vLLM",
               "amd-cdna3": "AMD CDNA 3", "amd-cdna4": "AMD CDNA 4", "nvidia-blackwell": "NVIDIA Blackwell",
               "nvidia-hopper": "NVIDIA Hopper"}
SHORT_FAMILY = {"amd-cdna3": "CDNA 3", "amd-cdna4": "CDNA 4", "nvidia-blackwell": "Blackwell",
                "nvidia-hopper": "Hopper"}


def group_label(name: str) -> str:
    if " " in name:
        stack, family = name.split(" ")
        return f"{GROUP_NAMES[stack]} {SHORT_FAMILY[family]}"
    return GROUP_NAMES.get(name, name)


def cell(g: dict) -> str:
    return f"{100 * g['mean']:+.1f} / {100 * g['mean_abs']:.1f} / {100 * g['max_abs']:.1f}"


def group_table(groups: list[dict]) -> list[str]:
    by = {(g["scope"], g["metric"], g["name"]): g for g in groups}
    out = ["| group | points | tok/s/GPU in-sample | tok/s/GPU LOSO | TTFT in-sample | TTFT LOSO | TPOT in-sample "
           "| TPOT LOSO |", "|---|---|---|---|---|---|---|---|"]
    names = [g["name"] for g in groups if g["scope"] == "in-sample" and g["metric"] == "tput"]
    for n in names:
        cells = [cell(by[(s, m, n)]) for m in ("tput", "ttft", "tpot") for s in ("in-sample", "loso")]
        out.append(f"| {group_label(n)} | {by[('in-sample', 'tput', n)]['points']} | " + " | ".join(cells) + " |")
    return out


def num(x: float) -> str:
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def secs(x: float) -> str:
    return f"{x:.3g} s" if x >= 10 else f"{1000 * x:,.0f} ms"


def latency(meas: float | None, pred: float | None, err: float | None) -> str:
    if meas is None or pred is None:
        return "-"
    return f"{secs(meas)} / {secs(pred)} ({100 * err:+.0f} %)"


def row_table(rows: list[dict], dates: dict[str, str]) -> list[str]:
    out = ["| source (date) | SKU | model | stack | measured as | in / out (conc.) | published tok/s/GPU | model | error "
           "| TTFT published / model (error) | TPOT published / model (error) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["dataset"] == "inferencex":
            continue
        conc = f" ({r['concurrency']})" if r["concurrency"] else ""
        io = f"{r['input_len']:,} / {r['output_len']:,}{conc}"
        out.append(f"| {r['source']} ({dates[r['source']]}) | {r['sku']} | {r['model']} | {r['stack']} | "
                   f"{r['kind'].replace('_', ' ')} | {io} | {num(r['measured_tokens_per_s_per_gpu'])} | "
                   f"{num(r['predicted_tokens_per_s_per_gpu'])} | {100 * r['tput_error']:+.0f} % | "
                   f"{latency(r['measured_ttft_s'], r['predicted_ttft_s'], r['ttft_error'])} | "
                   f"{latency(r['measured_tpot_s'], r['predicted_tpot_s'], r['tpot_error'])} |")
    return out


def main(path: str) -> None:
    d = json.load(open(path))["data"]
    print("\n".join(group_table(d["groups"])))
    print()
    print("\n".join(row_table(d["rows"], {s["key"]: s["date"] for s in d["sources"]})))


if __name__ == "__main__":
    main(sys.argv[1])
