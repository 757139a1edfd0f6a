"""Prefix reuse across replicas (issue 43, item 4): with R replicas each keeping K prefixes'
caches, what routing does to the hit rate and to the pool each replica needs.

Requests carry one of P prefixes (a system prompt, a shared document), prefix i with popularity
proportional to 1 / i^s (Zipf; s = 0 is uniform). A replica keeps the prefixes it is sent most
often (a cache that keeps the most popular: least-recently-used eviction comes close under a
steady mix). Under random routing every replica sees every prefix, so each holds the same
top K and the hit rate is the popularity mass of the top K. Under prefix-aware routing (each
prefix always to the same replica: a hash of the prefix, as llm-d's and Dynamo's KV-aware
routers do) the replicas split the prefixes between them, together holding the top R x K: the
mass of the top R x K. The pool a replica needs for a target hit rate follows the same way.
Over a run of N requests (``requests``), each kept prefix also misses the first time each
replica that keeps it sees it: a cold miss, with probability 1 - (1 - its share of requests)^N.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..core.units import check_float, check_int

MAX_PREFIXES = 10_000_000


@dataclass(frozen=True, kw_only=True)
class Routing:
    prefixes: int
    zipf_s: float
    replicas: int
    kept_per_replica: int
    random_hit_rate: float
    aware_hit_rate: float
    # prefixes one replica must keep for ``target`` hit rate under each routing (None: never)
    target: float | None
    random_needs: int | None
    aware_needs: int | None
    # over a run of ``requests`` requests, cold misses counted (None: the steady state only)
    requests: int | None = None
    random_hit_rate_run: float | None = None
    aware_hit_rate_run: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _cumulative(prefixes: int, s: float) -> list[float]:
    """Popularity mass of the top k prefixes, k = 0 .. prefixes."""
    weights = [1.0 / (i**s) for i in range(1, prefixes + 1)]
    total = sum(weights)
    out, acc = [0.0], 0.0
    for w in weights:
        acc += w
        out.append(acc / total)
    out[-1] = 1.0
    return out


def routing(
    prefixes: int,
    replicas: int,
    kept_per_replica: int,
    zipf_s: float = 0.0,
    target: float | None = None,
    requests: int | None = None,
) -> Routing:
    """Hit rates under random and prefix-aware routing, and the prefixes a replica must keep
    for ``target`` (a share of requests) under each."""
    p = check_int("distinct prefixes", prefixes, 1, MAX_PREFIXES)
    r = check_int("replicas", replicas, 1, 100_000)
    k = check_int("prefixes kept per replica", kept_per_replica, 0, MAX_PREFIXES)
    s = check_float("Zipf exponent", zipf_s, 0.0, 5.0)
    mass = _cumulative(p, s)
    random_needs = aware_needs = None
    if target is not None:
        target = check_float("target hit rate", target, 0.0, 1.0, lo_open=True)
        need = next(i for i, m in enumerate(mass) if m >= target - 1e-12)
        random_needs, aware_needs = need, -(-need // r)
    run: dict = {}
    if requests is not None:
        n = check_int("requests", requests, 1, 10**9)
        q = [b - a for a, b in zip(mass, mass[1:])]  # each prefix's share of requests

        def cold(kept: int, seen_by: int) -> float:
            # kept prefixes, each kept by ``seen_by`` replicas that each get 1/seen_by of it
            return sum(seen_by * (1 - (1 - qi / seen_by) ** n) for qi in q[:kept]) / n

        run = dict(
            requests=n,
            random_hit_rate_run=max(0.0, mass[min(k, p)] - cold(min(k, p), r)),
            aware_hit_rate_run=max(0.0, mass[min(r * k, p)] - cold(min(r * k, p), 1)),
        )
    return Routing(
        prefixes=p,
        zipf_s=s,
        replicas=r,
        kept_per_replica=k,
        random_hit_rate=mass[min(k, p)],
        aware_hit_rate=mass[min(r * k, p)],
        target=target,
        random_needs=random_needs,
        aware_needs=aware_needs,
        **run,
    )
