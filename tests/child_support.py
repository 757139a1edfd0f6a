"""What the tests of the bounded check (kvcalc.measure.verify) share: a spy on the child
processes it starts, so that a test asserts how a child ended (killed, reaped) and how many
times the parent waited on it, instead of how many seconds that took (issue 39, item 9: a
wall-time bound is a flaky test on a loaded machine; bench/refusals.py prints the seconds)."""

from __future__ import annotations

import os
import subprocess


class Child(subprocess.Popen):
    """A Popen that counts the parent's polls: each ``communicate(timeout=...)``, which waits
    at least its timeout before it gives up."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.polls = 0

    def communicate(self, input=None, timeout=None):
        if timeout is not None:
            self.polls += 1
        return super().communicate(input, timeout)

    def reaped(self) -> bool:
        """Ended and waited for: no process, not even a zombie, is left with its id."""
        if self.returncode is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        return False


def spy_children(monkeypatch) -> list[Child]:
    """Every process ``subprocess.Popen`` starts from now on (in this test), as a Child."""
    made: list[Child] = []

    class Spy(Child):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(subprocess, "Popen", Spy)
    return made
