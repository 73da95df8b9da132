"""``fit`` with several ``--precision`` values: one table comparing them, as accelerate's
``estimate-memory`` compares dtypes. Each precision is an ordinary ``fit``; rows are tagged with
the precision and grouped by SKU."""

from __future__ import annotations

from typing import Any

from mi400plan.errors import UsageError
from mi400plan.results.fit import FitResult


def fit_precisions(catalog: Any, model_name: str | None, skus: list[str] | None, mode: str,
                   precisions: list[str], **kw: Any) -> FitResult:
    """``api.fit.fit`` once per precision; one result whose rows carry ``precision`` (SKU-major order),
    ``recipes`` holding each precision's recipe and ``precisions`` the order asked."""
    from mi400plan.api.fit import fit

    if len(set(precisions)) != len(precisions):
        raise UsageError("the same --precision is given twice")
    results = [fit(catalog, model_name, skus, mode, precision=p, **kw) for p in precisions]
    rows = []
    for i, row in enumerate(results[0].rows):
        for p, res in zip(precisions, results):
            rows.append(res.rows[i].model_copy(update={"precision": p}))
    warnings: list[str] = []
    for res in results:
        warnings.extend(w for w in res.warnings if w not in warnings)
    return results[0].model_copy(update={
        "rows": rows, "warnings": warnings, "precisions": list(precisions),
        "recipes": {p: res.recipe for p, res in zip(precisions, results)},
    })
