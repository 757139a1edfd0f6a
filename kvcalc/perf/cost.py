"""What a token costs (issue 43, item 5): dollars and energy per million output tokens from a
deployment's throughput, its GPUs' price per hour (the user's) and their board power.

    dollars per million tokens = GPUs x price per GPU-hour / (tokens/s x 3,600 s) x 10^6
    kWh per million tokens     = GPUs x board power (kW) / (tokens/s x 3,600 s) x 10^6

The energy is at the datasheet's maximum board power, an upper bound for the GPUs alone (a
server's CPUs, memory, network and cooling come on top; a GPU short of its peak draws less).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..core.units import check_float, check_int


@dataclass(frozen=True, kw_only=True)
class Cost:
    output_tokens_per_s: float  # the whole deployment
    gpus: int
    price_per_gpu_hour: float
    power_w: float | None  # one GPU's board power (None: not known)
    dollars_per_million: float
    kwh_per_million: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def cost_per_million(
    output_tokens_per_s: float, gpus: int, price_per_gpu_hour: float, power_w: float | None = None
) -> Cost:
    """Dollars (and, with ``power_w``, kWh) per million output tokens at a throughput."""
    tps = check_float("output tokens/s", output_tokens_per_s, 0.0, 1e12, lo_open=True)
    gpus = check_int("GPUs", gpus, 1, 100_000)
    price = check_float("price per GPU-hour ($)", price_per_gpu_hour, 0.0, 10_000.0)
    per_hour = tps * 3600.0 / 1e6  # millions of tokens an hour
    kwh = None
    if power_w is not None:
        power_w = check_float("board power (W)", power_w, 0.0, 100_000.0, lo_open=True)
        kwh = gpus * power_w / 1000.0 / per_hour
    return Cost(
        output_tokens_per_s=tps,
        gpus=gpus,
        price_per_gpu_hour=price,
        power_w=power_w,
        dollars_per_million=gpus * price / per_hour,
        kwh_per_million=kwh,
    )
