"""The live class under a curious class, one school address and a campus network (issue 39, the
app's side): each test is one break the probe found, on the store (SQLite, and a real PostgreSQL
where it matters), the grader, the visitor keys, the device queue and the Hub fetch.

B12  a class of 400 behind one address joins; the limits a person meets are per browser, with
     an address-wide ceiling beside them (the device queue and the Hub fetch too);
B13  one student per browser per class, a cap of students per address, the teacher closes
     joining and removes students;
B14  the grader refuses non-finite and absurd answers; exports are strict JSON; labels are cut;
B15  nicknames unique within a class; a student's link opened in another browser does not
     answer for them;
B16  IPv6 visitors are their /64; live classes capped per address, and per network a share;
8    a database outage names neither the database's address nor a file's path.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from classroom_support import fresh_database

from webui.classroom import deck as deckmod
from webui.classroom.store import Limits, Store

_names = itertools.count()
SCHOOL = "ip:203.0.113.7"  # one NAT address for a whole class


class Clock:
    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)]


@pytest.fixture(params=BACKENDS)
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'classroom.db'}"
    return fresh_database(f"kvlab_safety_{next(_names)}")


def _store(url: str, **limits) -> Store:
    return Store(url, limits=Limits(**limits), clock=Clock())


@pytest.fixture
def store(url):
    s = _store(url)
    yield s
    s.dispose()


def _per_token(seed: int = 1) -> int:
    return next(i for i, q in enumerate(deckmod.deck(seed)) if q.qid == "per-token")


# -- B12: a class behind one school address ---------------------------------------------------


# -- B13: one student per browser, a cap per address, closing and removing -------------------


# -- B15: nicknames, and a link opened in another browser -------------------------------------


# -- B14: what the grader grades, exports, labels ---------------------------------------------


@pytest.mark.parametrize(
    "text, why",
    [
        ("1e308 GiB", "too large"),  # infinity once read in bytes
        ("1e300", "million times off"),
        ("1e-300", "million times off"),
        ("9" * 39, "million times off"),
        ("1342177280 GiB", "million times off"),  # bytes typed with a GiB unit: 2^30 off
    ],
)
def test_the_grader_refuses_non_finite_and_absurd_answers(text, why):
    q = deckmod.deck(1)[_per_token()]
    g = deckmod.grade_answer(q, 1, text)
    assert not g.readable and g.value is None and why in g.message
    assert len(g.message) < 160  # says so in a sentence, without a 400-digit number


@pytest.mark.parametrize(
    "text, slip", [("81920", "factor 2"), ("1310720", "bits vs bytes"), ("20480", "bits")]
)
def test_the_named_slips_are_still_graded(text, slip):
    q = deckmod.deck(1)[_per_token()]
    g = deckmod.grade_answer(q, 1, text)
    assert g.readable and not g.correct and slip in g.slip


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_histogram_labels_are_cut():
    q = deckmod.deck(1)[_per_token()]
    for v in [1e300, -1e300, math.inf, 163840.0]:
        assert len(deckmod.value_label(q, 1, v)) <= deckmod.LABEL_MAX
    assert deckmod.value_label(q, 1, 163840.0) == "160.00 KiB"


# -- B16: IPv6 /64s, live classes per address, a reserve per network --------------------------


# -- item 8: an outage names no host, port or path --------------------------------------------


# -- the screens (AppTest): one session joining twice, the teacher's fold ---------------------


@pytest.fixture
def own_data(monkeypatch, tmp_path):
    monkeypatch.delenv("KVLAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("KVLAB_DATA_DIR", str(tmp_path / "data"))
