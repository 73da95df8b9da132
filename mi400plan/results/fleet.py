"""Fleet totals of ``serve --racks N`` / ``--gpus N`` (``data.fleet``): replicas of one serving point."""

from mi400plan.results.common import Count, OutModel


class FleetRow(OutModel):
    """One SKU's fleet: whole replicas of its chosen serving point in ``fleet_gpus`` GPUs (given by ``--racks``
    / ``--gpus``, or the GPUs ``demand`` needs: ``ceil(demand / per-replica rate)`` replicas, ``racks`` =
    ``ceil(GPUs / gpus_per_rack)``).

    ``users`` = replicas x sequences in flight per replica (each at ``tokens_per_s_per_user``);
    ``output_tokens_per_s`` = output tokens/s per GPU x GPUs in replicas. With ``scenario`` every figure is
    the scenario's answer's (rate per replica, Little's-law sequences in flight, 1 / median TPOT per user).
    """

    sku: str
    fleet_gpus: int
    racks: int | None = None
    gpus_per_rack: int | None = None
    point: str  # the serving point: layout and concurrency
    basis: str  # why this point: best meeting the SLA, or the highest throughput without one
    meets_sla: bool | None = None
    gpus_per_replica: Count  # fractional when disaggregated (prefill pool sized to the rate)
    replicas: int
    gpus_in_replicas: Count
    users: int
    tokens_per_s_per_user: float
    output_tokens_per_s: float
    total_tokens_per_s: float  # input + output
    requests_per_s: float
    scenario: str | None = None  # --scenario: the point is that scenario's simulated answer
    cost_per_mtok_output: float | None = None  # USD per 1e6 output tokens at the point (the scenario's with one)
    demand: str | None = None  # --demand as read (requests/s or output tokens/s); the fleet is sized to carry it
