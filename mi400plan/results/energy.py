"""Result model of a training run's energy, emissions and cost (``RunEnergy``: a ``sweep`` row's
``energy``, and ``cost.run_energy``'s result), in a module of its own so that a sweep reads it without
the ``cost`` command's models (``results.cost``).

Units as in ``results.cost``: powers in W, energy in facility MWh, emissions in t CO2e, money in
``currency``; a ``Range`` is (low, nominal, high).
"""

from mi400plan.results.common import OutModel, Range


class RunEnergy(OutModel):
    """Energy, emissions and cost of one training run (a sweep's best layout for one SKU and size).

    ``energy_mwh`` = ``gpu_hours`` x ``wall_power_per_gpu_w`` / 1e6 x ``pue`` (facility MWh);
    ``emissions_t`` = MWh x ``grid_kg_co2e_per_kwh`` (t CO2e, location-based); ``cost`` = GPU-hours x
    ``cost_per_gpu_hour`` in ``currency``.
    """

    sku: str
    gpus: int
    system: str | None  # cost profile giving the wall power (None: no cost profile for the SKU)
    site: str
    gpu_hours: float
    gpu_load: float  # average GPU power / TDP used for the wall power
    wall_power_per_gpu_w: Range | None
    pue: Range
    energy_mwh: Range | None
    grid_kg_co2e_per_kwh: float
    emissions_t: Range | None
    currency: str
    price_year: int | None  # price year of the cost model's money figures (None with --gpu-hour-cost)
    cost_per_gpu_hour: Range | None
    cost_source: str  # "--gpu-hour-cost" or "model: SYSTEM at SITE" or "none"
    cost: Range | None

