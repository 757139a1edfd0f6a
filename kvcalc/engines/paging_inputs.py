"""What the paged-block engine (kvcalc.engines.paging) is given: requests, typed as lines of
numbers or taken from a preset scenario of the Engine view.

Token ids are made up: requests with the same shared-prefix length start with the same ids
(like a common system prompt)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


@dataclass(frozen=True, kw_only=True)
class Request:
    rid: str
    prompt: tuple[int, ...]  # token ids
    output_len: int
    arrival: int = 0  # the step at which it arrives
    group: str = ""  # label of the shared prefix, for display


def _tokens(seed: int, n: int) -> tuple[int, ...]:
    return tuple(seed * 1000 + i for i in range(n))


def parse_requests(text: str, *, max_requests: int = 64) -> list[Request]:
    """Requests from lines ``prompt_tokens output_tokens [shared_prefix_tokens [arrival_step]]``.

    Requests with the same shared-prefix length share that many identical leading tokens (like a
    common system prompt)."""
    reqs: list[Request] = []
    for lineno, line in enumerate((text or "").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        if not 2 <= len(parts) <= 4:
            raise ValueError(
                f"line {lineno}: write 'prompt output [shared_prefix [arrival]]', "
                f"e.g. '40 12 32', got {line[:40]!r}"
            )
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"line {lineno}: only whole numbers, got {line[:40]!r}") from None
        prompt, out = nums[0], nums[1]
        shared = nums[2] if len(nums) > 2 else 0
        arrival = nums[3] if len(nums) > 3 else 0
        if not 1 <= prompt <= 4096 or not 1 <= out <= 4096:
            raise ValueError(f"line {lineno}: prompt and output must be 1 to 4,096 tokens")
        if not 0 <= shared <= prompt:
            raise ValueError(f"line {lineno}: the shared prefix must be 0 to the prompt length")
        if not 0 <= arrival <= 10_000:
            raise ValueError(f"line {lineno}: the arrival step must be 0 to 10,000")
        i = len(reqs)
        prefix = _tokens(7, shared)  # every request with a shared prefix starts the same way
        reqs.append(
            Request(
                rid=f"R{i + 1}",
                prompt=prefix + _tokens(100 + i, prompt - shared),
                output_len=out,
                arrival=arrival,
                group=f"shared {shared}" if shared else "",
            )
        )
        if len(reqs) > max_requests:
            raise ValueError(f"at most {max_requests} requests")
    if not reqs:
        raise ValueError("give at least one request: 'prompt output [shared_prefix [arrival]]'")
    return reqs


class Scenario(TypedDict):
    """A preset of the Engine view: its title, its request lines and its pool."""

    title: str
    text: str  # lines for parse_requests
    num_blocks: int
    block_size: int


SCENARIOS: dict[str, Scenario] = {
    "shared-prompt": {
        "title": "Many users, one system prompt",
        "text": "# 6 users; each prompt starts with the same 32-token system prompt\n"
        + "\n".join(f"{40 + 2 * i} 10 32 {i}" for i in range(6)),
        "num_blocks": 48,
        "block_size": 8,
    },
    "mixed": {
        "title": "Long and short requests mixed",
        "text": "# two long documents and a stream of short questions\n"
        "120 16 0 0\n12 6 0 0\n10 8 0 1\n100 12 0 2\n14 6 0 2\n9 10 0 3\n16 6 0 4\n"
        "11 7 0 5",
        "num_blocks": 64,
        "block_size": 8,
    },
    "pressure": {
        "title": "Memory pressure: preemption",
        "text": "# long outputs in a small pool: the newest request is preempted\n"
        "24 40\n24 40\n24 40\n24 40",
        "num_blocks": 20,
        "block_size": 8,
    },
}


def scenario(key: str) -> Scenario:
    if key not in SCENARIOS:
        raise ValueError(f"unknown scenario {key!r}; choose one of {', '.join(SCENARIOS)}")
    return SCENARIOS[key]
