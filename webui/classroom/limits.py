"""The bounds of the live class, and the environment variables that override them."""

from __future__ import annotations

import os
from dataclasses import dataclass


def _env_num(name: str, default: float, lo: float, hi: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {raw[:20]!r}") from None
    return min(max(value, lo), hi)


@dataclass(frozen=True)
class Limits:
    """The bounds of the live class (issue 39: sized for a class of 400 behind one address).

    Who is counted (webui.visitor): a browser (a phone), an address (an IPv4 address or an IPv6
    /64: a school's NAT is one address for its whole class) and a network (an IPv4 /24, an IPv6
    /48). A person meets the per-browser limits; the per-address ones are ceilings against a
    script that claims to be many browsers, sized so that a class of 400 behind one address does
    not reach them:

    * joins_per_minute, per address: 400 students, each join tried twice in the worst minute (a
      mistyped code, a retry after a dropped network) is 800, plus a quarter for a second class
      behind the same address or the teacher's own test joins: 1,000. Wrong codes count too, so
      it also bounds guessing: at 1,000 guesses a minute against 32^6 = 1.07e9 codes with at
      most 1,000 classes live, one address finds a class about once in 1,000 minutes, and a
      found code opens only a student's place;
    * joins_per_browser, per browser a minute: 10 (a student joins once; typos and reloads);
    * students_per_address, per class: 400 of the class's 500 places, so 100 stay for
      students on other addresses whatever one address does;
    * classes_per_hour and live_classes, per address: 10 class starts an hour, 20 classes at
      once (a school's teachers behind one NAT);
    * network_share of max_classes, per network: a tenth (100 of 1,000), so one network
      cannot take every class slot of the server (issue 39 B16: one IPv6 /64 took all 1,000).
    """

    max_students: int = 500  # per class (a lecture hall)
    answers_per_minute: int = 30  # per student: a question has at most 2 parts
    max_submissions: int = 400  # per student per class, everything counted
    joins_per_minute: int = 1000  # per address (see above)
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

        def num(name: str, default: float, lo: float, hi: float) -> int:
            return int(_env_num(name, default, lo, hi))

        return cls(
            max_students=num("KVLAB_CLASS_MAX_STUDENTS", d.max_students, 1, 5000),
            answers_per_minute=num("KVLAB_CLASS_ANSWERS_PER_MINUTE", d.answers_per_minute, 1, 1000),
            max_submissions=d.max_submissions,
            joins_per_minute=num("KVLAB_CLASS_JOINS_PER_MINUTE", d.joins_per_minute, 1, 100_000),
            joins_per_browser=num("KVLAB_CLASS_JOINS_PER_BROWSER", d.joins_per_browser, 1, 1000),
            students_per_address=num(
                "KVLAB_CLASS_STUDENTS_PER_ADDRESS", d.students_per_address, 1, 5000
            ),
            classes_per_hour=num("KVLAB_CLASS_STARTS_PER_HOUR", d.classes_per_hour, 1, 1000),
            live_classes=num("KVLAB_CLASS_LIVE_PER_ADDRESS", d.live_classes, 1, 100_000),
            network_share=_env_num("KVLAB_CLASS_NETWORK_SHARE", d.network_share, 0.001, 1.0),
            max_classes=num("KVLAB_CLASS_MAX_CLASSES", d.max_classes, 1, 100_000),
            class_hours=_env_num("KVLAB_CLASS_HOURS", d.class_hours, 0.01, 48),
        )
