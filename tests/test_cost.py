"""Dollars and energy per million output tokens (issue 43, item 5: kvcalc.perf.cost and
``simulate --price-per-gpu-hour``), worked by hand:

8 GPUs at $2 an hour = $16 an hour; 1,000 output tokens/s = 3.6 million tokens an hour, so
$16 / 3.6 = $4.444 per million. At 700 W each (the H100 SXM's maximum board power, its
datasheet), 8 x 0.7 kW = 5.6 kWh an hour, 5.6 / 3.6 = 1.556 kWh per million.
"""

from __future__ import annotations

import json

import pytest

from kvcalc import registry
from kvcalc.cli import main
from kvcalc.perf.cost import cost_per_million


def test_cost_and_energy_per_million_tokens_by_hand():
    c = cost_per_million(1000.0, 8, 2.0, 700.0)
    assert c.dollars_per_million == pytest.approx(16 / 3.6)
    assert c.kwh_per_million == pytest.approx(5.6 / 3.6)
    # twice the throughput on the same GPUs: half the cost of a token
    assert cost_per_million(2000.0, 8, 2.0).dollars_per_million == pytest.approx(8 / 3.6)
    assert cost_per_million(1000.0, 1, 2.0).kwh_per_million is None  # no power given


@pytest.mark.parametrize(
    "args, says",
    [((0.0, 1, 2.0), "tokens/s"), ((10.0, 0, 2.0), "GPUs"), ((10.0, 1, -1.0), "price")],
)
def test_bad_inputs_name_what_to_fix(args, says):
    with pytest.raises(ValueError, match=says):
        cost_per_million(*args)


def test_board_power_comes_from_the_datasheets():
    gpus = registry().gpus
    assert gpus["h100-sxm-80gb"].power_w == 700 and gpus["b200"].power_w == 1000
    assert gpus["l4"].power_w == 72 and gpus["a100-80gb"].power_w == 400


def test_simulate_prices_its_own_throughput(capsys):
    argv = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--tp", "2"]
    argv += ["--users", "8", "--requests", "16", "--prompt-tokens", "512"]
    argv += ["--output-tokens", "64", "--price-per-gpu-hour", "3", "--json"]
    assert main(argv) == 0
    j = json.loads(capsys.readouterr().out)
    tps = j["output_tokens_per_s"]
    assert j["cost"]["gpus"] == 2
    assert j["cost"]["dollars_per_million"] == pytest.approx(2 * 3 / (tps * 3600) * 1e6)
    assert j["cost"]["kwh_per_million"] == pytest.approx(2 * 0.7 / (tps * 3600) * 1e6)
    assert main(argv[:-3] + ["--price-per-gpu-hour", "2"]) == 0
    assert "per million output tokens on 2 GPUs at $2 an hour each" in capsys.readouterr().out
