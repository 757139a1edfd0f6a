"""The device queue: one live run on the device at a time, for every session of this server.
Jobs are ``fn(should_stop)``, run one at a time by one worker thread, with a fair share per
browser and per address; docs/device-queue.md tells why and how in full."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .hosted import hosted
from .visitor import browser_id, session_id, visitor_id

HOSTED_LIMITS = (60.0, 180.0)  # (cap per run, longest wait in line), seconds
LOCAL_LIMITS = (300.0, 600.0)
MAX_QUEUED = 16
MAX_PER_VISITOR = 2  # jobs queued or running per browser (two tabs: a Live run and a Check)
# Jobs queued or running per source address: 12 of the 16 places, so 4 stay for other addresses
# whatever one address does, while a class behind one NAT address (a job per browser, at most 2)
# fills every other place before this ceiling refuses one of its students.
MAX_PER_ADDRESS = 12


def limits() -> tuple[float, float]:
    """(wall-clock cap per run, longest wait in line) in seconds: tighter in hosted mode."""
    return HOSTED_LIMITS if hosted() else LOCAL_LIMITS


class QueueError(ValueError):
    """A run did not happen or did not finish, for a reason the user can act on."""


def session_alive(session_id: str) -> bool:
    """Whether the Streamlit session ``session_id`` still has a connected browser tab
    (``Runtime.get_client``, thread-safe); without a Streamlit runtime, always."""
    try:
        from streamlit.runtime import Runtime
    except ImportError:
        return True
    if not Runtime.exists():
        return True
    return Runtime.instance().get_client(session_id) is not None


class Job:
    """One run in the queue. ``state``: queued, running or done; ``stop_reason`` says why it was
    stopped or dropped (cancelled, replaced, time limit, session left, wait timeout)."""

    def __init__(
        self,
        queue: DeviceQueue,
        session: str,
        fn: Callable[[Callable[[], bool]], Any],
        cap_s: float,
        visitor: str | None = None,
        address: str | None = None,
    ):
        self.session_id = session
        self.visitor = visitor if visitor is not None else session
        self.address = address if address is not None else self.visitor
        self.fn = fn
        self.cap_s = cap_s
        self.state = "queued"
        self.stop_reason: str | None = None
        self.submitted_at = time.monotonic()
        self.started_at: float | None = None
        self._queue = queue
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop this job: a queued job leaves the line now, a running one at its next check of
        ``should_stop``. Does nothing once the job is done."""
        with self._queue._cond:
            if self.done or self.cancelled:
                return
            self.stop_reason = reason
            self._cancel.set()
            if self.state == "queued":
                self._queue._drop(self, QueueError("The run was cancelled before it started."))

    def should_stop(self) -> bool:
        """True once the job is cancelled, has run past its cap, or its session has left."""
        if self.cancelled:
            return True
        if self.started_at is not None and time.monotonic() - self.started_at > self.cap_s:
            self.cancel("time limit")
            return True
        if not self._queue._alive(self.session_id):
            self.cancel("session left")
            return True
        return False

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def result(self) -> Any:
        """The job's return value, or its exception raised here."""
        if not self.done:
            raise QueueError("The run has not finished.")
        if self._error is not None:
            raise self._error
        return self._result

    def _finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self._result, self._error = result, error
        self.state = "done"
        self._done.set()


class DeviceQueue:
    """FIFO line of jobs run one at a time by a single worker thread. ``cap_s`` and
    ``wait_timeout_s``: None reads ``limits()`` at each submit."""

    def __init__(
        self,
        *,
        cap_s: float | None = None,
        wait_timeout_s: float | None = None,
        is_alive: Callable[[str], bool] | None = None,
        max_queued: int = MAX_QUEUED,
        max_per_visitor: int = MAX_PER_VISITOR,
        max_per_address: int = MAX_PER_ADDRESS,
    ):
        self.cap_s = cap_s
        self.wait_timeout_s = wait_timeout_s
        self.is_alive = is_alive or session_alive
        self.max_queued = max_queued
        self.max_per_visitor = max_per_visitor
        self.max_per_address = max_per_address
        self._cond = threading.Condition()
        self._queued: deque[Job] = deque()
        self._running: Job | None = None
        self._served: dict[str, int] = {}  # visitor -> the turn it last started a job
        self._turn = 0
        self._worker: threading.Thread | None = None

    def run_cap_s(self) -> float:
        return self.cap_s if self.cap_s is not None else limits()[0]

    def max_wait_s(self) -> float:
        return self.wait_timeout_s if self.wait_timeout_s is not None else limits()[1]

    def submit(
        self,
        session: str,
        fn: Callable[[Callable[[], bool]], Any],
        visitor: str | None = None,
        address: str | None = None,
    ) -> Job:
        """Put ``fn(should_stop)`` in line for ``session`` of ``visitor`` (a browser; default:
        the session is its own) at ``address`` (default: the visitor is its own). An earlier job
        of the same session, queued or running, is cancelled (reason "replaced"): one job per
        session; a visitor holds at most ``max_per_visitor`` jobs, queued or running, and an
        address at most ``max_per_address`` (QueueError beyond)."""
        visitor = visitor if visitor is not None else session
        address = address if address is not None else visitor
        with self._cond:
            for old in [j for j in self._queued if j.session_id == session]:
                old.cancel("replaced")
            if self._running is not None and self._running.session_id == session:
                self._running.cancel("replaced")
            held = list(self._queued)
            if self._running is not None and self._running.session_id != session:
                held.append(self._running)
            mine = [j for j in held if j.visitor == visitor]
            if len(mine) >= self.max_per_visitor:
                raise QueueError(
                    f"You already have {len(mine)} runs waiting or running on this "
                    f"server (at most {self.max_per_visitor} per visitor, from any "
                    "tab): wait for them to finish, or stop them, then try again."
                )
            ours = [j for j in held if j.address == address]
            if len(ours) >= self.max_per_address:
                raise QueueError(
                    f"{len(ours)} runs from your network are already waiting or running on "
                    f"this server (at most {self.max_per_address} from one address): "
                    "try again in a minute."
                )
            if len(self._queued) >= self.max_queued:
                raise QueueError(
                    f"{len(self._queued)} runs are already waiting for the device. "
                    "Try again in a minute."
                )
            job = Job(self, session, fn, self.run_cap_s(), visitor, address)
            self._queued.append(job)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=self._work, name="kvlab-device-queue", daemon=True
                )
                self._worker.start()
            self._cond.notify_all()
            return job

    def position(self, job: Job) -> int | None:
        """1 while ``job`` runs, n when n - 1 runs are ahead of it (the one on the device
        included), None once it is done."""
        with self._cond:
            if job.state == "running":
                return 1
            order = self._order()
            if job not in order:
                return None
            return order.index(job) + 1 + (self._running is not None)

    def wait(
        self,
        job: Job,
        *,
        on_wait: Callable[[int], None] | None = None,
        checkpoint: Callable[[], Any] | None = None,
        poll_s: float = 0.1,
    ) -> Any:
        """Wait for ``job`` and return its result (or raise its error). ``on_wait(position)`` is
        called whenever the position changes (1: running now), ``checkpoint()`` every ``poll_s``
        seconds (the live page's touches st.session_state, where Streamlit raises on Stop);
        whatever ends the wait, the job is cancelled if it is still queued or running."""
        last = None
        try:
            while True:
                pos = self.position(job)
                if pos is not None and pos != last:
                    last = pos
                    if on_wait is not None:
                        on_wait(pos)
                if job.wait(poll_s):
                    break
                if checkpoint is not None:
                    checkpoint()
                waited = time.monotonic() - job.submitted_at
                if job.state == "queued" and waited > self.max_wait_s():
                    job.cancel("wait timeout")
                    raise QueueError(
                        f"The device is busy with other runs; waited "
                        f"{self.max_wait_s():.0f} s. Try again in a moment."
                    )
            if job.stop_reason == "replaced":
                raise QueueError("A newer run from this browser tab replaced this one.")
            return job.result()
        finally:
            job.cancel()

    def run(
        self,
        session: str,
        fn: Callable[[Callable[[], bool]], Any],
        visitor: str | None = None,
        address: str | None = None,
        **wait_kw,
    ) -> Any:
        """``submit`` then ``wait``."""
        return self.wait(self.submit(session, fn, visitor, address), **wait_kw)

    def _alive(self, session: str) -> bool:
        try:
            return bool(self.is_alive(session))
        except Exception:  # noqa: BLE001 - never let a failing check kill the worker
            return True

    def _order(self) -> list[Job]:
        """The queued jobs in the order they will run (lock held): the visitor served longest
        ago first (never served: first of all), and by arrival within a visitor and among
        equals. Later turns are simulated so that a visitor's second job counts its first."""
        served = dict(self._served)
        turn = self._turn
        left = list(self._queued)
        order = []
        while left:
            job = min(left, key=lambda j: served.get(j.visitor, -1))
            left.remove(job)
            order.append(job)
            turn += 1
            served[job.visitor] = turn
        return order

    def _drop(self, job: Job, error: BaseException) -> None:
        """Take a queued job out of the line and finish it with ``error`` (lock held)."""
        with contextlib.suppress(ValueError):
            self._queued.remove(job)
        job._finish(error=error)
        self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queued:
                    self._cond.wait()
                job = self._order()[0]
                self._queued.remove(job)
                self._turn += 1
                self._served[job.visitor] = self._turn
                if len(self._served) > 4096:  # forget the oldest visitors, keep it bounded
                    for v in sorted(self._served, key=self._served.__getitem__)[:2048]:
                        del self._served[v]
                if not self._alive(job.session_id):  # the tab closed while it waited
                    job.stop_reason = "session left"
                    job._cancel.set()
                    left = "The browser tab that asked for this run has left; the run was dropped."
                    self._drop(job, QueueError(left))
                    continue
                job.state = "running"
                job.started_at = time.monotonic()
                self._running = job
            result, error = None, None
            try:
                result = job.fn(job.should_stop)
            except BaseException as exc:  # noqa: BLE001 - the waiter re-raises it
                error = exc
            if job.stop_reason == "time limit":
                limit = QueueError(
                    f"The run took longer than the {job.cap_s:.0f} s allowed per "
                    "run here and was stopped: lower the new tokens, the batch or "
                    "the prompt length."
                )
                limit.__cause__ = error
                result, error = None, limit
            with self._cond:
                self._running = None
                job._finish(result, error)
                self._cond.notify_all()
            del job, result, error  # nothing of a page's run kept while the worker waits


QUEUE = DeviceQueue()  # the one queue of this server process (docs/device-queue.md: why here)


def run_here(fn: Callable[[Callable[[], bool]], Any], **wait_kw) -> Any:
    """Run ``fn(should_stop)`` on ``QUEUE`` for the calling Streamlit session, its browser and
    its address (webui.visitor): what every page uses."""
    sid = session_id()
    return QUEUE.run(sid, fn, visitor=browser_id(), address=visitor_id(sid), **wait_kw)
