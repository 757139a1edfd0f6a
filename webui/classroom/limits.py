"""The bounds of the live class, and the environment variables that override them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


def _env_num(name: str, default: float, lo: float, hi: float) -> Any:
    """The variable's number within [lo, hi], of the default's type (int or float)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {raw[:20]!r}") from None
    return type(default)(min(max(value, lo), hi))


@dataclass(frozen=True)
class Limits:
    """The bounds of the live class (issue 39: sized for a class of 400 behind one address).

    Per browser (a phone), per address (an IPv4 address or an IPv6 /64: a school's NAT) and per
    network (an IPv4 /24, an IPv6 /48); docs/live-class.md, "The limits' arithmetic", sizes
    each one.
    """

    max_students: int = 500  # per class (a lecture hall)
    answers_per_minute: int = 30  # per student: a question has at most 2 parts
    max_submissions: int = 400  # per student per class, everything counted
    joins_per_minute: int = 1000  # per address: 400 students, each join tried twice, + a quarter
    joins_per_browser: int = 10  # per browser per minute
    students_per_address: int = 400  # per class
    classes_per_hour: int = 10  # class starts per address
    live_classes: int = 20  # classes at once per address
    network_share: float = 0.1  # of max_classes, per network
    max_classes: int = 1000  # classes at once, every visitor together
    class_hours: float = 12.0

    @property
    def classes_per_network(self) -> int:
        return max(1, int(self.max_classes * self.network_share))

    @classmethod
    def from_env(cls) -> Limits:
        d = cls()
        return cls(**{f: _env_num(var, getattr(d, f), lo, hi) for f, (var, lo, hi) in _ENV.items()})


# The bounds that an environment variable overrides: (variable, lowest, highest).
_ENV = {
    "max_students": ("KVLAB_CLASS_MAX_STUDENTS", 1, 5000),
    "answers_per_minute": ("KVLAB_CLASS_ANSWERS_PER_MINUTE", 1, 1000),
    "joins_per_minute": ("KVLAB_CLASS_JOINS_PER_MINUTE", 1, 100_000),
    "joins_per_browser": ("KVLAB_CLASS_JOINS_PER_BROWSER", 1, 1000),
    "students_per_address": ("KVLAB_CLASS_STUDENTS_PER_ADDRESS", 1, 5000),
    "classes_per_hour": ("KVLAB_CLASS_STARTS_PER_HOUR", 1, 1000),
    "live_classes": ("KVLAB_CLASS_LIVE_PER_ADDRESS", 1, 100_000),
    "network_share": ("KVLAB_CLASS_NETWORK_SHARE", 0.001, 1.0),
    "max_classes": ("KVLAB_CLASS_MAX_CLASSES", 1, 100_000),
    "class_hours": ("KVLAB_CLASS_HOURS", 0.01, 48),
}
