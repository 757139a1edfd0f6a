"""What every stop is made of: the Stop, the Lesson, the Setup it is computed for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...cache.deployment import Deployment
from ...cache.weight_bytes import Weights
from ...config.catalog import GPU
from ...core.model import ModelSpec
from ...core.units import fmt_gib
from ...engines.budget import Budget, budget
from ..prose import prose
from ..question import Question
from .slips import Slip, slips_of
from .words import kinds_of

CONVERSATION = 8192  # tokens of the "8K conversation" the tour asks about (at most the limit)
PROMPT, OUTPUT = 512, 256  # the serving frontier's default request
TEXT = prose("tour")


@dataclass(frozen=True)
class Stop:
    number: int
    title: str
    page: str  # the key of the page that shows it in full (the app's registry finds the page)
    teaches: str  # one sentence: what the page shows


@dataclass(frozen=True, kw_only=True)
class Lesson:
    stop: Stop
    question: Question
    givens: tuple[tuple[str, str], ...]  # (config field or figure, its value with a unit)
    figure: tuple[str, str]  # (what its page calls it, the value the page shows)
    recap: tuple[str, str]
    discuss: str


def conversation_tokens(spec: ModelSpec) -> int:
    """The conversation the tour asks about: 8,192 tokens, or the model's limit when shorter."""
    return min(CONVERSATION, spec.max_context)


def request_tokens(spec: ModelSpec) -> tuple[int, int]:
    """(prompt, output) of the serving request: 512 + 256, or 2/3 and 1/3 of a shorter limit."""
    if spec.max_context >= PROMPT + OUTPUT:
        return PROMPT, OUTPUT
    prompt = max(1, spec.max_context * 2 // 3)
    return prompt, max(1, spec.max_context - prompt)


def ratio_of(fn, right: float) -> float | None:
    """fn() / right, or None where fn raises ValueError (a slip that does not fit)."""
    try:
        value = fn()
    except ValueError:
        return None
    return value / right if right else None


def none_fits(b: Budget, n: int, gpu: GPU) -> None:
    """Stops 3, 6 and 7 ask how many conversations fit: when none does, they are not asked."""
    if b.kv_pool_bytes <= 0 or b.max_concurrency <= 0 or not b.seq_bytes:
        raise ValueError(TEXT["errors"]["none_fits"].format(n=n, gpu=gpu.name))


def fill(template: Any, nums: dict[str, Any]) -> Any:
    """A template (a string, or nested lists of them, filled as tuples) with ``nums`` in it."""
    if isinstance(template, str):
        return template.format(**nums)
    return tuple(fill(t, nums) for t in template)


def pool_numbers(b: Budget) -> dict[str, Any]:
    """The named numbers of a KV pool that the stops' prose quotes."""
    return dict(
        conc=b.max_concurrency,
        blocks=b.num_blocks,
        block=b.effective_block_size,
        per_req=b.blocks_per_request,
        groups=b.num_groups,
        page=b.page_bytes,
        group=b.group_size,
        total=b.total_bytes,
        util=b.gpu_mem_util,
        weights=b.weights_bytes,
        reserve=b.reserve_bytes,
        pool=b.kv_pool_bytes,
        w_gib=fmt_gib(b.weights_bytes),
        reserve_gib=fmt_gib(b.reserve_bytes),
        pool_gib=fmt_gib(b.kv_pool_bytes),
    )


@dataclass(frozen=True, kw_only=True)
class Setup:
    spec: ModelSpec
    w: Weights
    gpu: GPU
    kv_dtype: str
    bw: float
    tp: int
    pp: int
    name: str
    stop: Stop

    @property
    def kvd(self) -> str:
        return self.kv_dtype.upper()

    @property
    def n(self) -> int:
        return conversation_tokens(self.spec)

    @property
    def deployment(self) -> Deployment:
        return Deployment(spec=self.spec, weights=self.w, gpu=self.gpu, tp=self.tp, pp=self.pp).but(
            kv_dtype=self.kv_dtype
        )

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def pool(self, context: int, **changes: Any) -> Budget:
        """vLLM's KV pool at ``context`` tokens, ``changes`` made (else ValueError: no memory)."""
        dep = self.deployment.but(**changes)
        b = budget(dep, context, find_max_context=False)
        if b.kv_pool_bytes <= 0:
            raise ValueError(TEXT["errors"]["no_fit"].format(name=dep.spec.name, gpu=self.gpu.name))
        return b

    def tokens_given(self) -> tuple[str, str]:
        n = self.n
        note = TEXT["setup"]["limit"].format(CONVERSATION) if n < CONVERSATION else ""
        return ("Tokens in the conversation", f"{n:,}{note}")

    def per_gpu_note(self, whole: int, per_gpu: int) -> str:
        """What each GPU holds of ``whole`` bytes per token under tensor/pipeline parallel."""
        t, g = TEXT["setup"], self.gpus
        if g == 1:
            return ""
        if per_gpu == whole:
            why = t["mla_whole"] if "mla" in kinds_of(self.spec) else t["heads_whole"]
            return t["all_of_it"].format(g=g, why=why)
        if per_gpu * g == whole:
            return t["share"].format(g=g, per_gpu=per_gpu)
        reasons = []
        if self.tp > 1 and any(
            lay.kv_heads is not None and lay.kv_heads < self.tp for lay in self.spec.kv_layers
        ):
            reasons.append(t["replicated"])
        if self.pp > 1:
            reasons.append(t["stage"])
        return t["holds"].format(g=g, per_gpu=per_gpu) + (
            f" ({'; '.join(reasons)})" if reasons else ""
        )

    def lesson(
        self,
        text: dict[str, Any],
        nums: dict[str, Any],
        *,
        givens: list[tuple[str, str]],
        slips: Sequence[Slip] = (),
        kv_hints: bool = False,
        **question: Any,
    ) -> Lesson:
        """The lesson of the templates ``text`` filled with ``nums``; ``question``: its fields."""
        nums = {"name": self.name, "n": self.n, **nums}

        def filled(key: str) -> Any:
            return fill(text[key], nums)

        question.setdefault("ask_unit", question["unit"])
        q = Question(
            qid=f"tour-{self.stop.number}",
            level=question.pop("level", "mid"),
            prompt=filled("prompt"),
            answer=filled("answer"),
            solution=filled("solution"),
            mistakes=slips_of(*slips),
            kv_hints=kv_hints,
            **question,
        )
        return Lesson(
            stop=self.stop,
            question=q,
            givens=tuple(givens),
            figure=filled("figure"),
            recap=filled("recap"),
            discuss=filled("discuss"),
        )
