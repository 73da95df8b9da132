"""The backwards questions print within 80 columns (tables wrap or give way; nothing is cut)."""

from __future__ import annotations

import pytest

CASES = [
    ["sweep", "llama3.1-8b", "--sku", "mi355x", "--sku", "b200", "--tokens", "2T", "--deadline", "20d"],
    ["budget", "--sku", "mi355x", "--gpus", "512", "--days", "30"],
    ["fit", "--largest", "--sku", "mi355x", "--gpus", "8", "--mode", "infer", "--seq", "8k"],
    ["serve", "llama3.1-8b", "--sku", "mi300x", "--racks", "2", "--tpot", "30ms", "--no-ranges", "--top", "1"],
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a[:2]))
def test_within_80_columns(cli, monkeypatch, args: list[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(args)
    assert r.exit_code == 0, r.output
    assert max(len(line.rstrip()) for line in r.stdout.splitlines()) <= 80
