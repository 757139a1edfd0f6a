"""Prefix reuse across replicas (issue 43, item 4: kvcalc.cache.routing and ``kvcalc
routing``), worked by hand:

- uniform popularity, 1,000 prefixes, 4 replicas keeping 100 each: random routing hits
  100 / 1,000 = 10%; prefix-aware routing holds 400 distinct ones between them: 40%. For 90%, a
  replica keeps 900 under random routing and 900 / 4 = 225 under prefix-aware routing.
- Zipf s = 1 over 3 prefixes: popularity 1, 1/2, 1/3 of 11/6; keeping 1 each on 2 replicas:
  random 6/11, prefix-aware (the top 2) 9/11.
"""

from __future__ import annotations

import json

import pytest

from kvcalc.cache.routing import routing
from kvcalc.cli import main


def test_uniform_prefixes():
    r = routing(1000, 4, 100, 0.0, target=0.9)
    assert r.random_hit_rate == pytest.approx(0.10)
    assert r.aware_hit_rate == pytest.approx(0.40)
    assert (r.random_needs, r.aware_needs) == (900, 225)


def test_zipf_prefixes():
    r = routing(3, 2, 1, 1.0)
    assert r.random_hit_rate == pytest.approx(6 / 11)
    assert r.aware_hit_rate == pytest.approx(9 / 11)
    # enough room for every prefix: both routings hit every time
    assert routing(3, 2, 3, 1.0).random_hit_rate == routing(3, 2, 3, 1.0).aware_hit_rate == 1.0


@pytest.mark.parametrize(
    "args, says",
    [((0, 1, 1), "prefixes"), ((10, 0, 1), "replicas"), ((10, 1, 1, -1.0), "Zipf")],
)
def test_bad_inputs_name_what_to_fix(args, says):
    with pytest.raises(ValueError, match=says):
        routing(*args)


def test_the_command_sizes_from_the_pool(capsys):
    # Llama 3.1 8B: 131,072 B a token, so a prefix of 4,096 tokens is 512 MiB
    argv = ["routing", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"]
    argv += ["--prefix-tokens", "4096", "--prefixes", "1000", "--replicas", "4", "--json"]
    assert main(argv) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["prefix_bytes"] == 4096 * 131_072
    kept = j["pool_bytes"] // (4096 * 131_072)
    assert j["kept_per_replica"] == kept
    assert j["random_hit_rate"] == pytest.approx(kept / 1000)
    assert j["aware_hit_rate"] == pytest.approx(min(1.0, 4 * kept / 1000))
    assert main(argv[:-1] + ["--target", "1.5"]) == 2
    assert "target hit rate" in capsys.readouterr().err
