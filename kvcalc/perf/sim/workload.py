"""What the simulator serves: request lengths (fixed, uniform, log-normal) and the arrivals
(a Poisson process, all at once, or a closed loop of users)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ...core.units import check_float, check_int

MAX_REQUESTS = 100_000  # a benchmark client's 10 waves of 10,000 users (steps: bounded apart)
MAX_TOKENS = 1_000_000  # one request's prompt or output


@dataclass(frozen=True, kw_only=True)
class Dist:
    """A length distribution in tokens: fixed, uniform on [lo, hi], or log-normal with a given
    median and sigma (of the logarithm), clipped to [lo, hi]."""

    kind: str
    lo: int
    hi: int
    median: float = 0.0
    sigma: float = 0.0

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return self.lo
        if self.kind == "uniform":
            return rng.randint(self.lo, self.hi)
        x = round(self.median * math.exp(self.sigma * rng.gauss(0.0, 1.0)))
        return min(self.hi, max(self.lo, x))

    @property
    def mean(self) -> float:
        """The mean before clipping (log-normal: median x exp(sigma^2 / 2))."""
        if self.kind == "fixed":
            return float(self.lo)
        if self.kind == "uniform":
            return (self.lo + self.hi) / 2
        return self.median * math.exp(self.sigma**2 / 2)

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"{self.lo:,}"
        if self.kind == "uniform":
            return f"uniform {self.lo:,} to {self.hi:,}"
        return (
            f"log-normal, median {self.median:,.0f}, sigma {self.sigma:g}, clipped to "
            f"{self.lo:,}-{self.hi:,}"
        )


def fixed(n: int, what: str = "length") -> Dist:
    n = check_int(what, n, 1, MAX_TOKENS)
    return Dist(kind="fixed", lo=n, hi=n)


def uniform(lo: int, hi: int, what: str = "length") -> Dist:
    lo = check_int(f"{what} (lowest)", lo, 1, MAX_TOKENS)
    hi = check_int(f"{what} (highest)", hi, lo, MAX_TOKENS)
    return Dist(kind="uniform", lo=lo, hi=hi)


def lognormal(median: float, sigma: float, hi: int, lo: int = 1, what: str = "length") -> Dist:
    median = check_float(f"{what} (median)", median, 1.0, MAX_TOKENS)
    sigma = check_float(f"{what} (sigma)", sigma, 0.0, 3.0)
    lo = check_int(f"{what} (lowest)", lo, 1, MAX_TOKENS)
    hi = check_int(f"{what} (clip)", hi, max(lo, math.ceil(median)), MAX_TOKENS)
    return Dist(kind="lognormal", lo=lo, hi=hi, median=median, sigma=sigma)


@dataclass(frozen=True, kw_only=True)
class Workload:
    """``requests`` requests, arriving as a Poisson process of ``rate`` per second (math.inf:
    all at time 0; the first at time 0 either way, as vLLM's benchmark sends them), or from a
    closed loop of ``users`` who each send their next request the moment the last one ends."""

    requests: int
    prompt: Dist
    output: Dist
    rate: float | None = None
    users: int | None = None
    prefix_share: float = 0.0  # fraction of each prompt that is a system prompt shared by all
    seed: int = 0

    def __post_init__(self):
        check_int("requests", self.requests, 1, MAX_REQUESTS)
        if (self.rate is None) == (self.users is None):
            raise ValueError(
                "give either an arrival rate (requests/s) or a number of users "
                "(a closed loop), not both and not neither"
            )
        if self.rate is not None and not (
            isinstance(self.rate, (int, float))
            and not isinstance(self.rate, bool)
            and (self.rate == math.inf or 0 < self.rate <= 1e6)
        ):
            raise ValueError(
                f"the arrival rate must be above 0 and at most 1,000,000 "
                f"requests/s, or inf (all at once), got {self.rate!r}"
            )
        if self.users is not None:
            check_int("users", self.users, 1, MAX_REQUESTS)
        check_float("prefix-sharing fraction", self.prefix_share, 0.0, 1.0)
        check_int("seed", self.seed, 0, 2**31)

    @property
    def longest(self) -> int:
        return self.prompt.hi + self.output.hi

    def draw(self) -> list[tuple[float, int, int]]:
        """An open loop's requests as the scheduler draws them for this seed: (the time it is
        sent, prompt tokens, output tokens), in order (each request's lengths, then the gap to
        the next). ValueError for a closed loop, whose sends depend on the finishes."""
        if self.rate is None:
            raise ValueError(
                "this run needs its requests drawn in advance: give an arrival rate "
                "(requests/s, or inf for all at once) instead of a number of users"
            )
        rng = random.Random(self.seed)
        out, t = [], 0.0
        for _ in range(self.requests):
            p = self.prompt.sample(rng)
            out.append((t, p, self.output.sample(rng)))
            if self.rate != math.inf:
                t += rng.expovariate(self.rate)
        return out
