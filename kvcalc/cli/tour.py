"""``python -m kvcalc tour``: the guided tour's answers (kvcalc.teach.tour), one line a
stop; --markdown the printable answer key, --json every stop."""

from __future__ import annotations

import argparse

from ..cache.deployment import Deployment
from ..cache.weight_bytes import weights_given
from ..teach.tour import STOPS, answer_key, conversation_tokens, lesson
from .common import gpu_of, load_model, weights_of
from .flags import deployment_args, model_args

HELP = "the guided tour's questions and answers for a model and GPU (a printable answer key)"
DEFAULT_GPU = "h100-sxm-80gb"  # the app's default


def add_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p)
    deployment_args(p, "weights_gib|weight_dtype|weight_bits")
    gpu_help = f"GPU key (see `python -m kvcalc gpus`; default {DEFAULT_GPU})"
    deployment_args(p, "gpu", gpu={"default": DEFAULT_GPU, "help": gpu_help})
    p.add_argument(
        "--markdown",
        action="store_true",
        help="print the whole answer key as Markdown, for a teacher to print",
    )


def cmd_tour(args) -> tuple[dict, list[str]]:
    spec, wd, ed, label = load_model(args)
    w, resident = weights_of(args, spec, wd, ed)
    if resident != w.bytes:  # --weights-gib: a size known only as a whole, all of it read
        w = weights_given(resident, w.dtype)
    g = gpu_of(args)
    dep = Deployment(spec=spec, weights=w, gpu=g, tp=args.tp, pp=args.pp).but(
        kv_dtype=args.kv_dtype
    )
    stops, text = [], []
    for stop in STOPS:
        # The page's key (its URL path in the app, /<key>): the core knows no UI file.
        entry = {"number": stop.number, "title": stop.title, "page": stop.page}
        try:
            les = lesson(stop.number, dep)
        except ValueError as exc:
            entry.update(asked=False, error=str(exc))
            text.append(f"  stop {stop.number} ({stop.title}): not asked: {exc}")
        else:
            q = les.question
            entry["asked"] = True
            entry |= {k: getattr(q, k) for k in ("prompt", "value", "unit", "ask_unit", "answer")}
            entry.update(solution=q.solution, givens=[list(pair) for pair in les.givens])
            entry.update(slips=[{"ratio": r, "message": m} for r, m in q.mistakes])
            entry.update(figure=list(les.figure), recap=list(les.recap), discuss=les.discuss)
            text.append(f"  stop {stop.number} ({stop.title}): {q.answer.replace('**', '')}")
        stops.append(entry)
    out = dict(model=spec.name, gpu=g.name, kv_dtype=args.kv_dtype, tp=args.tp, pp=args.pp)
    out.update(conversation_tokens=conversation_tokens(spec), stops=stops)
    if args.markdown:
        return out, [answer_key(dep)]
    head = (
        f"{label}: the guided tour on {g.name}"
        + (f" x {args.tp * args.pp}" if args.tp * args.pp > 1 else "")
        + f", KV cache {args.kv_dtype.upper()} (--markdown for the printable key)"
    )
    return out, [head, *text]
