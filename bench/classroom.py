"""A live class under load: N students join and answer one question within a few seconds.

    .venv/bin/python bench/classroom.py --students 30               # one server, SQLite
    .venv/bin/python bench/classroom.py --students 300 --replicas 2 # HAProxy, PostgreSQL
    .venv/bin/python bench/classroom.py --students 300 --replicas 2 --kill
    .venv/bin/python bench/classroom.py --url http://127.0.0.1:8500 --database-url URL

Every client speaks Streamlit's own websocket protocol, as bench/load.py does, and as the
browser's frontend does it: it asks for the page, reads the widgets' ids from the elements
the server sends, sends widget values and button presses, follows the query string the server
sets (a student's place in the class is in the link), and reruns each fragment that asked for
it (``auto_rerun``) at its interval, so every phone polls the class as a browser would and the
teacher's screen refreshes itself. No browser runs.

One run:
  1. the server(s): one ``streamlit run`` with SQLite in a new data folder (default), or
     ``--replicas 2``: deploy/replicas.py's HAProxy in front of two replicas sharing one
     PostgreSQL (``--database-url``, or a throwaway server from deploy/pgtemp.py), or a running
     deployment (``--url``);
  2. a teacher session starts a class (the button on the page), reads its code and teacher link
     from the screen, and moves to a one-number practice question (the per-token question of
     practice set 1);
  3. the students join through the page (each loads the page over HTTP first behind HAProxy,
     for its replica's cookie), then each answers at a random moment of ``--seconds`` (a mix
     of right answers and named slips), and waits for its grade;
  4. ``--kill``: replica app1 is killed (SIGKILL) halfway through the answering. Its students
     reconnect with the same cookie and link, as the frontend does; HAProxy sends them to app2,
     where their place (the link) holds; a student whose grade had not come back reloads the
     page and sends the answer again if it is not shown as stored (a retry that counts once:
     the store's upsert). The teacher, if on app1, reopens the teacher link.
The teacher's screen is read for its "Answered" figure; the stored answers are counted in the
database (B). The last line: ``classroom: S students, A answers sent, B stored, teacher saw all
in T s`` (A: students who sent an answer; T: from the last answer sent to the teacher's screen
showing all of them).

All traffic goes to 127.0.0.1. Every client is this machine, one source address: a class
behind one school address, as HAProxy and the app see it. The run keeps the shipped limits
(deploy/haproxy.cfg's per-source shares, the app's join limits) unless ``--raise-limits``
raises them to fit, and reports the joins refused and by whom: HAProxy (a page load or a
websocket answered 429, or the connection closed), or the app (its message on the page). A
student whose join is refused does not retry; the others answer. Each client sends its page's
Origin on the websocket, as a browser does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "deploy"))
sys.path.insert(0, str(ROOT))
import load  # noqa: E402
from serve import start_app  # noqa: E402

RECONNECT_GIVE_UP_S = 40.0
JOIN_WITHIN_S = 60.0  # issue 39: every student of 300 joins within this, from one address


def first_practice() -> int:
    """The deck's first practice question ("how many bytes does one token add": one number),
    right after the interview's questions."""
    from webui.classroom.deck import chapter_count

    return chapter_count()


SEED = 1


class Closed(Exception):
    pass


class Client:
    """One browser tab: a websocket, the page's widgets as last drawn, its link."""

    def __init__(self, ws_url: str, http_base: str | None, name: str):
        self.ws_url, self.http_base, self.name = ws_url, http_base, name
        self.cookies: dict[str, str] = {}
        self.query = ""
        self.ws = None
        self.replicas: list[str] = []
        self.buttons: dict[str, str] = {}  # label -> id
        self.button_fragment: dict[str, str] = {}  # label -> the fragment that drew it
        self.inputs: dict[str, str] = {}  # label -> id (text inputs)
        self.metrics: dict[str, str] = {}
        self.alerts: list[tuple[int, str]] = []  # (format, body) of the run in progress
        self.codes: list[str] = []
        self.finished = asyncio.Event()
        self.fragments: dict[str, float] = {}  # fragment id -> interval (s)
        self.on_metric = None  # called with (label, value) as they arrive
        self.errors: list[str] = []
        self._tasks: list[asyncio.Task] = []
        self._closed = asyncio.Event()
        # One request in flight per tab, so each "script finished" answers the request sent
        # (the fragment timers and the person's presses take turns).
        self._turn = asyncio.Lock()

    async def connect(self) -> None:
        import websockets

        headers = {}
        if self.http_base:
            if not self.cookies:
                status, h, set_cookies = await load.http_get(
                    self.http_base, "/live_class", self.cookies
                )
                if status != 200:
                    raise OSError(f"page load answered {status}")
                self.cookies.update(set_cookies)
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        self.ws = await websockets.connect(
            self.ws_url,
            # A browser's websocket names the page's origin (deploy/haproxy.cfg compares it
            # with Host): the same scheme, host and port as the page, http for ws.
            origin="http" + self.ws_url[2:].split("/_stcore", 1)[0],
            subprotocols=["streamlit"],
            max_size=2**26,
            additional_headers=headers,
            open_timeout=30,
            ping_interval=None,
        )
        self.replicas.append(self.ws.response.headers.get("X-Served-By", ""))
        for value in self.ws.response.headers.get_all("Set-Cookie"):
            k, _, v = value.split(";", 1)[0].partition("=")
            self.cookies[k] = v
        self._closed = asyncio.Event()
        self.fragments = {}
        self._tasks = [asyncio.create_task(self._reader(self.ws))]

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self.ws is not None:
            await self.ws.close()

    async def _reader(self, ws) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        try:
            async for raw in ws:
                fm = ForwardMsg()
                fm.ParseFromString(raw)
                kind = fm.WhichOneof("type")
                if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                    self._element(fm.delta.new_element, fm.delta.fragment_id)
                elif kind == "page_info_changed":
                    self.query = fm.page_info_changed.query_string
                elif kind == "auto_rerun":
                    fid = fm.auto_rerun.fragment_id
                    if fid not in self.fragments:
                        self.fragments[fid] = fm.auto_rerun.interval
                        self._tasks.append(asyncio.create_task(self._poll(ws, fid)))
                elif kind == "script_finished":
                    self.finished.set()
        except Exception:  # noqa: BLE001 - a closed or reset websocket
            pass
        finally:
            self._closed.set()
            self.finished.set()

    def _element(self, el, fragment_id: str = "") -> None:
        t = el.WhichOneof("type")
        if t == "button":
            self.buttons[el.button.label] = el.button.id
            self.button_fragment[el.button.label] = fragment_id
        elif t == "text_input":
            self.inputs[el.text_input.label] = el.text_input.id
        elif t == "metric":
            self.metrics[el.metric.label] = el.metric.body
            if self.on_metric:
                self.on_metric(el.metric.label, el.metric.body)
        elif t == "alert":
            self.alerts.append((el.alert.format, el.alert.body))
        elif t == "code":
            self.codes.append(el.code.code_text)
        elif t == "exception":
            self.errors.append(el.exception.message[:160])

    async def _poll(self, ws, fid: str) -> None:
        """The frontend's timer for a fragment's run_every."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        try:
            while True:
                await asyncio.sleep(self.fragments.get(fid, 2.0))
                msg = BackMsg()
                msg.rerun_script.query_string = self.query
                msg.rerun_script.page_name = "live_class"
                msg.rerun_script.fragment_id = fid
                msg.rerun_script.is_auto_rerun = True
                async with self._turn:
                    self.finished.clear()
                    await ws.send(msg.SerializeToString())
                    await asyncio.wait_for(self.finished.wait(), 60)
        except Exception:  # noqa: BLE001 - closed: the reader reconnects the tab
            return

    async def run(self, widgets=(), timeout: float = 60.0, fragment: str = "") -> None:
        """A rerun of the live class page (of one fragment when ``fragment`` is given, as the
        frontend does for a press inside a fragment) with ``widgets`` ([(id, kind, value)]),
        until the server says the run finished."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        if self._closed.is_set():
            raise Closed
        msg = BackMsg()
        msg.rerun_script.query_string = self.query
        msg.rerun_script.page_name = "live_class"
        msg.rerun_script.fragment_id = fragment
        for wid, kind, value in widgets:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = wid
            if kind == "trigger":
                w.trigger_value = True
            elif kind == "str":
                w.string_value = value
            elif kind == "int":
                w.int_value = int(value)
        async with self._turn:
            self.finished.clear()
            self.alerts, self.codes = [], []
            try:
                await self.ws.send(msg.SerializeToString())
            except Exception as e:  # noqa: BLE001
                raise Closed from e
            await asyncio.wait_for(self.finished.wait(), timeout)
        if self._closed.is_set():
            raise Closed


async def reconnect(c: Client, deadline_s: float = RECONNECT_GIVE_UP_S) -> float:
    """Reconnect a tab whose websocket closed and reload its link; seconds it took."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < deadline_s:
        try:
            await c.close()
            await c.connect()
            await c.run()
            return time.perf_counter() - t0
        except (TimeoutError, Closed, OSError, Exception):  # noqa: BLE001
            await asyncio.sleep(0.3)
    raise RuntimeError(f"{c.name}: no reconnect within {deadline_s:.0f} s")


class Teacher:
    def __init__(self, ws_url, http_base):
        self.c = Client(ws_url, http_base, "teacher")
        self.code = self.key = ""
        self.answered: list[tuple[float, int]] = []  # (time, value) as the screen showed it
        self.c.on_metric = self._metric
        self.reconnects = 0
        # True while watch() reopens the link: the reloaded page can show every answer before
        # its run has finished, so the class must not close the screen in the middle of it
        self.reconnecting = False

    def _metric(self, label: str, value: str) -> None:
        if label == "Answered" and value.isdigit():
            self.answered.append((time.time(), int(value)))

    async def start(self) -> None:
        c = self.c
        await c.connect()
        await c.run()
        await c.run([(c.buttons["Start a live class"], "trigger", True)])
        self.code = parse_qs(c.query).get("class", [""])[0]
        # The teacher link is drawn only when asked for (a dialog, never by itself on the
        # projector): ask for it, as a teacher does.
        await c.run([(c.buttons["Show my teacher link (not on the projector)"], "trigger", True)])
        link = next((x for x in c.codes if "teacher=" in x), "")
        self.key = parse_qs(link.split("?", 1)[-1]).get("teacher", [""])[0]
        if not (self.code and self.key):
            raise RuntimeError(f"the class did not start: {c.alerts} {c.errors}")
        for _ in range(first_practice()):
            await c.run([(c.buttons["Next"], "trigger", True)])

    async def watch(self, until: float) -> None:
        """Keep the screen open (its fragment refreshes itself); reopen the teacher link if
        the replica under it dies."""
        while time.time() < until:
            await asyncio.sleep(0.2)
            if self.c._closed.is_set():
                self.c.query = urlencode({"class": self.code, "teacher": self.key})
                self.reconnecting = True
                try:
                    await reconnect(self.c)
                    self.reconnects += 1
                finally:
                    self.reconnecting = False

    def saw(self, n: int) -> float | None:
        return next((t for t, v in self.answered if v >= n), None)


def refusal(e: BaseException) -> str:
    """Who refused a join, from what it raised: "HAProxy (...)" or "the app: ..."."""
    status = getattr(getattr(e, "response", None), "status_code", None)
    if status is not None:
        return f"HAProxy (websocket answered {status})"
    text = str(e)
    if text.startswith("page load answered"):
        return f"HAProxy ({text})"
    if isinstance(e, (ConnectionError, OSError)) and not isinstance(e, TimeoutError):
        return f"HAProxy (connection closed: {type(e).__name__})"
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return "no answer (timed out)"
    if "did not join" in text:
        return "the app: " + text.split("did not join: ", 1)[1][:120]
    return f"error: {type(e).__name__}: {text[:120]}"


class Student:
    def __init__(self, ws_url, http_base, i: int, code: str, value: float):
        self.c = Client(ws_url, http_base, f"s{i}")
        self.i, self.code = i, code
        rng = random.Random(i)
        # 70 % right; the rest the slips the grader names: the factor 2, bits vs bytes.
        self.answer = rng.choices(
            [f"{value:.0f}", f"{value / 2:.0f}", f"{value * 8:.0f}"], [0.7, 0.15, 0.15]
        )[0]
        self.sent_at: float | None = None
        self.joined_after: float | None = None  # seconds from the class's first join
        self.refused: str = ""  # who refused the join, when it was
        self.acked = False
        self.sends = 0
        self.reconnect_s: list[float] = []

    async def join(self) -> None:
        c = self.c
        c.query = f"join={self.code}"
        await c.connect()
        await c.run()
        await c.run([(c.buttons["Join the class"], "trigger", True)])
        if "student=" not in c.query:
            alerts = [body for _, body in c.alerts[:2]]
            raise RuntimeError(f"{c.name} did not join: {alerts}")

    def _stored(self) -> bool:
        return any(b.startswith("Your answer: ") and self.answer in b for _, b in self.c.alerts)

    async def send(self) -> None:
        c = self.c
        box = next(i for label, i in c.inputs.items() if "your answer" in label.lower())
        self.sends += 1
        if self.sent_at is None:
            self.sent_at = time.time()
        await c.run(
            [(box, "str", self.answer), (c.buttons["Send my answer"], "trigger", True)],
            fragment=c.button_fragment.get("Send my answer", ""),
        )
        if self._stored():
            self.acked = True
        else:
            raise RuntimeError(f"{c.name}: no grade after sending: {c.alerts[:2]}")

    async def answer_at(self, when: float, until: float) -> None:
        await asyncio.sleep(max(0.0, when - time.time()))
        while time.time() < until and not self.acked:
            try:
                await self.send()
            except (TimeoutError, Closed):
                # The replica died under the tab: reconnect (same cookie, same link) and look
                # at the reloaded page: an answer shown as stored is not sent again.
                self.reconnect_s.append(await reconnect(self.c))
                if self._stored():
                    self.acked = True
            except RuntimeError as e:
                self.c.errors.append(str(e)[:160])
                await asyncio.sleep(0.5)

    async def stay(self, until: float) -> None:
        """Keep the tab open (its fragment polls); reconnect if the replica dies."""
        while time.time() < until:
            await asyncio.sleep(0.25)
            if self.c._closed.is_set():
                self.reconnect_s.append(await reconnect(self.c))


async def run_class(ws_url: str, http_base: str | None, args, kill=None) -> dict:
    from webui.classroom.deck import deck

    value = deck(SEED)[first_practice()].value
    teacher = Teacher(ws_url, http_base)
    await teacher.start()
    students = [Student(ws_url, http_base, i, teacher.code, value) for i in range(args.students)]
    t_join = time.time()
    sem = asyncio.Semaphore(args.join_concurrency)

    async def join(s):
        async with sem:
            try:
                await s.join()
                s.joined_after = time.time() - t_join
            except Exception as e:  # noqa: BLE001 - refused or failed: counted, not retried
                s.refused = refusal(e)
                await s.c.close()

    await asyncio.gather(*(join(s) for s in students))
    joined_s = time.time() - t_join
    everyone = students
    students = [s for s in students if s.joined_after is not None]
    t0 = time.time() + 1.0
    end = t0 + args.seconds + 60
    rng = random.Random(0)
    watch = asyncio.create_task(teacher.watch(end))
    killed = {}

    async def killer():
        if kill is None:
            return
        await asyncio.sleep(max(0.0, t0 + args.seconds / 2 - time.time()))
        killed["at"] = time.time() - t0
        killed["name"] = kill(teacher.c.replicas[-1] if args.kill_teachers else "app1")

    tasks = [
        asyncio.create_task(s.answer_at(t0 + rng.uniform(0, args.seconds), end)) for s in students
    ]
    stays = [asyncio.create_task(s.stay(end)) for s in students]
    await asyncio.gather(*tasks, killer())
    last = max((s.sent_at for s in students if s.sent_at), default=time.time())
    sent = sum(1 for s in students if s.sent_at)
    deadline = time.time() + 30
    while time.time() < deadline and teacher.saw(sent) is None:
        await asyncio.sleep(0.1)
    saw = teacher.saw(sent)
    if killed.get("name"):
        # A tab on the killed replica reconnects when its socket closes, which may come after
        # the teacher has seen every answer: wait for them before the tabs are closed.
        gone = [s for s in students if s.c.replicas and s.c.replicas[0] == killed["name"]]
        deadline = time.time() + RECONNECT_GIVE_UP_S
        while time.time() < deadline and any(s.c.replicas[-1] == killed["name"] for s in gone):
            await asyncio.sleep(0.1)
    deadline = time.time() + RECONNECT_GIVE_UP_S
    while time.time() < deadline and teacher.reconnecting:  # let a reopening finish
        await asyncio.sleep(0.05)
    for t in stays:
        t.cancel()
    watch.cancel()
    for s in students:
        await s.c.close()
    await teacher.c.close()
    return {
        "teacher": teacher,
        "everyone": everyone,
        "students": students,
        "joined_s": joined_s,
        "answer_window_s": last - t0,
        "sent": sent,
        "last": last,
        "saw": saw,
        "killed": killed,
    }


def stored(database_url: str, code: str, key: str) -> int:
    from webui.classroom import Limits, Store

    s = Store(database_url, limits=Limits())
    try:
        return s.results(code, key, first_practice()).answered
    finally:
        s.dispose()


def report(r: dict, b: int | None, where: str) -> None:
    students, teacher = r["students"], r["teacher"]
    errors = [e for s in students for e in s.c.errors] + teacher.c.errors
    sends = sum(s.sends for s in students)
    recon = sorted(x for s in students for x in s.reconnect_s)
    per_replica: dict[str, int] = {}
    for s in students:
        if s.c.replicas:
            per_replica[s.c.replicas[0]] = per_replica.get(s.c.replicas[0], 0) + 1
    print(f"{where}")
    everyone = r["everyone"]
    within = sum(1 for s in students if s.joined_after <= JOIN_WITHIN_S)
    refused: dict[str, int] = {}
    for s in everyone:
        if s.refused:
            refused[s.refused] = refused.get(s.refused, 0) + 1
    print(
        f"joins: {len(students)} of {len(everyone)} joined in {r['joined_s']:.1f} s, "
        f"{within} within {JOIN_WITHIN_S:.0f} s; refused {len(everyone) - len(students)}"
        + "".join(f"\n  {n} by {who}" for who, n in sorted(refused.items(), key=lambda x: -x[1]))
    )
    print(
        f"joined: {len(students)} students in {r['joined_s']:.1f} s; answers sent over "
        f"{r['answer_window_s']:.1f} s ({sends} sends, {sends - r['sent']} of them retries); "
        f"graded and acknowledged: {sum(s.acked for s in students)}"
    )
    if any(per_replica):
        print(
            "students per replica at the start: "
            + ", ".join(f"{k} {v}" for k, v in sorted(per_replica.items()))
        )
    if r["killed"]:
        name = r["killed"]["name"]
        moved = [s for s in students if len(s.c.replicas) > 1]
        to = sorted(set(s.c.replicas[-1] for s in moved))
        print(
            f"{name} killed {r['killed']['at']:.1f} s into the answering: {len(moved)} "
            f"students reconnected (to {', '.join(to)}); "
            f"reconnect p50 {recon[len(recon) // 2]:.2f} s, max {recon[-1]:.2f} s"
            if recon
            else f"{name} killed: no student was on it"
        )
        print(
            f"the teacher's screen was on {teacher.c.replicas[0]}"
            + (
                f" and reopened the teacher link ({teacher.reconnects} reconnect)"
                if teacher.reconnects
                else ""
            )
        )
    print(f"errors: {len(errors)}" + "".join(f"\n  {e}" for e in errors[:5]))
    t = f"{r['saw'] - r['last']:.1f}" if r["saw"] else "never (within 30 s)"
    print(
        f"classroom: {len(students)} students, {r['sent']} answers sent, "
        f"{b if b is not None else '?'} stored, teacher saw all in {t} s; "
        f"{len(everyone) - len(students)} of {len(everyone)} joins refused"
    )


def _raise_limits(n: int) -> None:
    """--raise-limits: every client is this machine, one source address for HAProxy and the
    class; raise the shares to fit n students instead of measuring the shipped ones, never
    below the shipped values (deploy/haproxy.cfg's, the app's Limits)."""
    import replicas

    from webui.classroom import Limits

    shipped = {k: int(v) for k, v in replicas.class_limits(replicas.CLASS_SIZE).items()}
    shipped["KVLAB_CLASS_JOINS_PER_MINUTE"] = Limits().joins_per_minute
    for var, per in (
        ("KVLAB_LB_WEBSOCKETS_PER_SOURCE", 2),
        ("KVLAB_LB_CONN_PER_SOURCE", 4),
        ("KVLAB_LB_CONN_RATE_PER_SOURCE", 8),
        ("KVLAB_CLASS_JOINS_PER_MINUTE", 2),
    ):
        os.environ.setdefault(var, str(max(shipped[var], per * (n + 2))))


async def main_async(args) -> None:
    if args.raise_limits:
        _raise_limits(args.students)
    limits = {
        k: os.environ[k]
        for k in (
            "KVLAB_LB_CONN_PER_SOURCE",
            "KVLAB_LB_WEBSOCKETS_PER_SOURCE",
            "KVLAB_LB_CONN_RATE_PER_SOURCE",
            "KVLAB_CLASS_JOINS_PER_MINUTE",
        )
        if k in os.environ
    }
    where = f"HAProxy file {args.haproxy_cfg}" if args.haproxy_cfg else "deploy/haproxy.cfg"
    print(
        "limits: "
        + (", ".join(f"{k}={v}" for k, v in limits.items()) if limits else "as shipped")
        + (f" ({where})" if args.replicas else "")
        + " (every client from 127.0.0.1: one source address)"
    )
    if args.url:
        base = args.url.rstrip("/")
        r = await run_class("ws" + base[4:] + "/_stcore/stream", base, args)
        b = (
            stored(args.database_url, r["teacher"].code, r["teacher"].key)
            if args.database_url
            else None
        )
        report(
            r,
            b,
            f"against {base}"
            + ("" if b is not None else " (no --database-url: stored answers not counted)"),
        )
        return
    if args.replicas:
        import pgtemp
        import replicas

        if args.haproxy_cfg:  # another revision's HAProxy file, for a before/after figure
            replicas.HAPROXY_CFG = args.haproxy_cfg.resolve()
        pg = None
        url = args.database_url
        if not url:
            pg = pgtemp.TempPostgres(max_connections=300).start()
            url = pg.url
        try:
            with replicas.Cluster(
                replicas=args.replicas, port=0, base_port=0, database_url=url
            ) as c:
                base = c.url

                def kill(name):
                    c.kill(name, signal.SIGKILL)
                    return name

                if not args.kill:
                    kill = None
                r = await run_class("ws" + base[4:] + "/_stcore/stream", base, args, kill)
                b = stored(url, r["teacher"].code, r["teacher"].key)
                report(
                    r,
                    b,
                    f"{args.replicas} replicas behind HAProxy, PostgreSQL "
                    f"({'a throwaway server' if pg else 'given'}), "
                    f"{os.cpu_count()} cores shared by everything here",
                )
        finally:
            if pg:
                pg.cleanup()
        return
    data = Path(tempfile.mkdtemp(prefix="kvlab-class-"))
    url = args.database_url or f"sqlite:///{data / 'classroom.db'}"
    env = dict(os.environ, KVLAB_DATA_DIR=str(data))
    if args.database_url:
        env["KVLAB_DATABASE_URL"] = args.database_url
    server, port = start_app(ROOT, env=env)
    try:
        r = await run_class(f"ws://127.0.0.1:{port}/_stcore/stream", None, args)
        b = stored(url, r["teacher"].code, r["teacher"].key)
        report(
            r,
            b,
            f"one server, {'SQLite' if not args.database_url else 'the given database'}"
            f", {os.cpu_count()} cores shared by the server and the clients",
        )
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        help="every student answers at a random moment of this window",
    )
    ap.add_argument("--url", help="a running deployment (http://127.0.0.1:PORT)")
    ap.add_argument(
        "--database-url",
        help="the deployment's KVLAB_DATABASE_URL (counts what "
        "was stored); with --replicas, the PostgreSQL to use instead of a throwaway",
    )
    ap.add_argument(
        "--replicas",
        type=int,
        default=0,
        help="start N replicas behind HAProxy on one PostgreSQL (0: one server with SQLite)",
    )
    ap.add_argument("--kill", action="store_true", help="kill replica app1 mid-question")
    ap.add_argument(
        "--kill-teachers",
        action="store_true",
        help="with --kill: kill the teacher's replica instead of app1",
    )
    ap.add_argument(
        "--join-concurrency", type=int, default=20, help="students joining at the same moment"
    )
    ap.add_argument(
        "--haproxy-cfg",
        type=Path,
        help="with --replicas: HAProxy's main file instead of deploy/haproxy.cfg (e.g. "
        "`git show HEAD~1:deploy/haproxy.cfg > old.cfg`, for the figure before a change)",
    )
    ap.add_argument(
        "--raise-limits",
        action="store_true",
        help="raise HAProxy's per-source limits and the class's joins per minute to fit the "
        "students (default: the shipped limits, which a class behind one address meets)",
    )
    args = ap.parse_args()
    if args.url and not re.fullmatch(
        r"http://(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?/?", args.url
    ):
        ap.error("--url must be http:// on this machine: load is never sent anywhere else")
    if (
        not 1 <= args.students <= 1000
        or not 1 <= args.seconds <= 120
        or not 0 <= args.replicas <= 4
    ):
        ap.error("students 1..1000, seconds 1..120, replicas 0..4")
    if args.kill and args.replicas < 2:
        ap.error("--kill needs --replicas 2 or more")
    if args.haproxy_cfg and not (args.replicas and args.haproxy_cfg.is_file()):
        ap.error("--haproxy-cfg needs --replicas and an existing file")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
