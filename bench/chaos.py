"""Fault injection against a real cluster; prints what was lost, run twice or dropped.

    .venv/bin/python bench/chaos.py [--quick] [--scenario NAME ...] [--keep]

Starts a private PostgreSQL (``initdb`` in a temporary directory, a free
port) and a private ``redis-server``, then runs each scenario on a fresh
database: ``conveyord`` nodes, four SDK worker processes
(bench/chaos_worker.py, eight slots each, restarted when they die, as a
process supervisor would), and four producer threads enqueuing tasks with
ids over HTTP while the scenario injects its faults. When every
acknowledged task has finished (or the settle time is up) it stops
everything, reads the handlers' completion logs and the task table, and
prints one row per scenario (docs/operations.md, "Chaos testing", says
what each scenario does and each column counts): tasks acknowledged,
completed, lost, archived, run again, completed twice, whose result died
with a SIGKILLed process, whose lease a PostgreSQL crash undid, requests left without an answer (and of those,
stored), how long a SIGKILLed node's leases outlived it, and how long its
tasks waited to start again.

``--quick`` is the short form the test suite runs (tests/e2e/test_chaos.py);
``--scenario`` picks scenarios (default: all); ``--keep`` keeps the logs and
the database files.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.chaos_rig import (
    ROOT,
    SECRET_KEY,
    TERMINAL,
    Execution,
    Node,
    PrivatePostgres,
    PrivateRedis,
    Producers,
    Tally,
    Worker,
    held_by,
    make_tasks,
    read_completion_logs,
    task_states,
    wait_for,
)

TEMPLATE = "chaos_template"
WORKERS, SLOTS = 4, 8
SETTLE = 180.0  # seconds after the last enqueue for every acked task to finish


class Rig:
    """The private PostgreSQL and Redis of one chaos run, with a migrated template database."""

    def __init__(self, keep: bool = False) -> None:
        self.keep = keep
        self.dir = Path(tempfile.mkdtemp(prefix="conveyor-chaos-"))
        self.pg = PrivatePostgres()
        try:
            self.redis = PrivateRedis()
            self.pg.execute(f"CREATE DATABASE {TEMPLATE}")
            env = {
                **os.environ,
                "DATABASE_URL": self.pg.url(TEMPLATE),
                "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
            }
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        except BaseException:
            self.pg.close()
            raise

    def close(self) -> None:
        self.redis.close()
        self.pg.close(keep=self.keep)
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


class Scene:
    """One scenario's cluster: a fresh database, nodes, supervised workers."""

    def __init__(self, rig: Rig, name: str, nodes: int) -> None:
        self.rig, self.name = rig, name
        self.database = f"chaos_{name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
        rig.pg.execute(f"CREATE DATABASE {self.database} TEMPLATE {TEMPLATE}")
        self.database_url = rig.pg.url(self.database)
        self.logs = rig.dir / name
        self.logs.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "DATABASE_URL", "REDIS_URL"))}
        env.update(
            DATABASE_URL=self.database_url,
            REDIS_URL=rig.redis.url,
            CONVEYOR_CHANNEL_PREFIX=f"chaos{uuid.uuid4().hex[:6]}",
            CONVEYOR_ALLOW_UNAUTHENTICATED="1",
            CONVEYOR_LOG_LEVEL="WARNING",
            DJANGO_SETTINGS_MODULE="conveyor_site.settings",
            DJANGO_SECRET_KEY=SECRET_KEY,
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
        )
        self.nodes = [Node(f"node{i}", self.logs, env) for i in range(nodes)]
        self.workers = [Worker(f"worker{i}", self.logs, self.nodes[i % nodes], SLOTS) for i in range(WORKERS)]
        self.exits: list[int | None] = []  # exit statuses of nodes stopped with SIGTERM
        # (time, worker pid): a worker process died, or the node it was connected to;
        # results it held had not reached a live node
        self.deaths: list[tuple[float, int]] = []
        # times PostgreSQL crashed (an immediate restart): leases committed without
        # waiting for the WAL flush (LEASE_ASYNC_COMMIT) just before may be undone
        self.db_crashes: list[float] = []
        self.exits_unasked: list[int] = []  # exit statuses of worker processes that ended by themselves
        self._stopping = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)
        self.t0 = time.monotonic()

    def start(self) -> None:
        starters = [threading.Thread(target=node.start) for node in self.nodes]
        for thread in starters:
            thread.start()
        for thread in starters:
            thread.join()
        if not all(node.alive for node in self.nodes):
            raise RuntimeError(f"a node did not start; logs in {self.logs}")
        for worker in self.workers:
            worker.start()
        wait_for(lambda: self.sessions() >= len(self.workers), 60, "the workers' sessions")
        self._supervisor.start()
        self.t0 = time.monotonic()

    def sessions(self) -> int:
        try:
            return len(httpx.get(self.nodes[0].url + "/api/v1/workers", timeout=5).json()["workers"])
        except (httpx.HTTPError, ValueError, KeyError):
            return 0

    def _supervise(self) -> None:
        """Start again every worker process that died, as systemd or Kubernetes would."""
        while not self._stopping.wait(0.2):
            for worker in self.workers:
                if not worker.alive and not self._stopping.is_set():
                    if worker.pid not in {pid for _, pid in self.deaths}:
                        self.deaths.append((time.time(), worker.pid))
                        self.exits_unasked.append(worker.proc.returncode)  # type: ignore[union-attr]
                    worker.start()

    def kill_worker(self, worker: Worker) -> None:
        self.deaths.append((time.time(), worker.pid))
        worker.kill()

    def kill_node(self, node: Node) -> float:
        """SIGKILL *node*; return when, as a Unix time."""
        at = time.time()
        self.deaths.extend((at, w.pid) for w in self.workers if w.node is node and w.alive)
        node.kill()
        return at

    def at(self, seconds: float) -> None:
        """Sleep until *seconds* after the producers started."""
        time.sleep(max(0.0, self.t0 + seconds - time.monotonic()))

    def cycle(self, node: Node) -> None:
        """SIGTERM *node*, wait for it to exit, start it again on its port."""
        self.exits.append(node.terminate())
        node.start()

    def settle(self, tally: Tally, timeout: float) -> None:
        ids = [task_id for task_id, spec in tally.acked.items() if spec.type == "chaos"]

        def finished() -> bool:
            try:
                states = task_states(self.database_url, ids)
            except psycopg.Error:
                return False
            return all(states.get(task_id) in TERMINAL for task_id in ids)

        with contextlib.suppress(RuntimeError):  # the audit counts what did not finish as lost
            wait_for(finished, timeout, "the acked tasks to finish", interval=1.0)

    def stop(self) -> None:
        self._stopping.set()
        if self._supervisor.is_alive():
            self._supervisor.join()
        for worker in self.workers:
            worker.terminate(30)
        for node in self.nodes:
            node.terminate(60)

    def completion_logs(self) -> list[Path]:
        return [w.completion_log(n) for w in self.workers for n in range(1, w.starts + 1)]

    def drop(self) -> None:
        self.rig.pg.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")


@dataclass
class Plan:
    """How long producers run and how many tasks they send."""

    window: float
    tasks: int
    quick: bool
    poison: int = 0
    innocent_max_retry: int | None = None


@dataclass
class Outcome:
    """What a scenario's faults were, for the table, and the rescue times it measured."""

    faults: str
    rescues: list[float] = field(default_factory=list)
    settled: list[float] = field(default_factory=list)  # kill -> the node's last lease given up


def rescue_time(kill_at: float, held: list[str], runs: dict) -> float:
    """Seconds from a node's death until the last task it held had started elsewhere."""
    restarts = [min((e.t for e in runs.get(task_id, []) if e.event == "start" and e.t > kill_at), default=None)
                for task_id in held]  # fmt: skip
    if not restarts or None in restarts:
        return float("inf") if restarts else float("nan")
    return max(restarts) - kill_at  # type: ignore[type-var]


# -- scenarios ------------------------------------------------------------------------------------


def worker_kill(scene: Scene, plan: Plan) -> Outcome:
    kills = 5 if plan.quick else 20
    rng = random.Random(1)
    for k in range(kills):
        scene.at(1 + k * (plan.window - 2) / kills)
        alive = [w for w in scene.workers if w.alive]
        if alive:
            scene.kill_worker(rng.choice(alive))
    return Outcome(f"{kills} worker SIGKILLs")


def node_kill(scene: Scene, plan: Plan) -> Outcome:
    kills = 1 if plan.quick else 2
    held: list[tuple[float, list[str]]] = []
    settled: list[float] = []
    for k in range(kills):
        node = scene.nodes[k % len(scene.nodes)]
        scene.at(plan.window * (2 * k + 1) / (2 * kills + 1))
        pid = node.pid
        # A kill that finds the node holding nothing measures no rescue (at
        # the short form's rate that happens): wait, briefly, for a task.
        with contextlib.suppress(RuntimeError, psycopg.Error):
            wait_for(functools.partial(held_by, scene.database_url, pid), 5, "the node to hold a task", interval=0.02)
        kill_at = scene.kill_node(node)
        held.append((kill_at, held_by(scene.database_url, pid)))
        back_at = time.time() + 10  # the survivor alone; then the node comes back and its workers reconnect
        settled.append(settle_time(scene.database_url, pid, kill_at, back_at))
        time.sleep(max(0.0, back_at - time.time()))
        node.start()
    scene.held = held  # type: ignore[attr-defined]  # read by the audit, once the logs are complete
    faults = f"{kills} node SIGKILL{'s' if kills > 1 else ''}, {sum(len(h) for _, h in held)} tasks held"
    return Outcome(faults, settled=settled)


def settle_time(database_url: str, pid: int, kill_at: float, until: float) -> float:
    """Seconds from a node's SIGKILL until it held no lease (its tasks settled
    elsewhere), polled every 0.1 s until *until* (then inf)."""
    while time.time() < until:
        with contextlib.suppress(psycopg.Error):
            if not held_by(database_url, pid):
                return time.time() - kill_at
        time.sleep(0.1)
    return float("inf")


def rolling_sigterm(scene: Scene, plan: Plan) -> Outcome:
    rounds = 1 if plan.quick else 3
    scene.at(1)
    for _ in range(rounds):
        for node in scene.nodes:
            scene.cycle(node)
            time.sleep(1)
    return Outcome(f"{rounds * len(scene.nodes)} node SIGTERMs{exit_note(scene)}")


def graceful_shutdown(scene: Scene, plan: Plan) -> Outcome:
    rounds = 2 if plan.quick else 5
    for k in range(rounds):
        scene.at(1 + k * (plan.window - 2) / rounds)
        scene.cycle(scene.nodes[0])
    return Outcome(f"{rounds} SIGTERMs of the only node{exit_note(scene)}")


def exit_note(scene: Scene) -> str:
    bad = [status for status in scene.exits if status != 0]
    return f" (exit statuses {bad})" if bad else ""


def pg_restart(mode: str) -> Callable[[Scene, Plan], Outcome]:
    def scenario(scene: Scene, plan: Plan) -> Outcome:
        restarts = 1 if plan.quick else 3
        for k in range(restarts):
            scene.at((k + 1) * plan.window / (restarts + 1))
            if mode == "immediate":
                scene.db_crashes.append(time.time())
            scene.rig.pg.restart(mode)
        return Outcome(f"{restarts} PostgreSQL {mode} restart{'s' if restarts > 1 else ''}")

    return scenario


def pg_outage(scene: Scene, plan: Plan) -> Outcome:
    down = 5 if plan.quick else 15
    scene.at(2)
    scene.rig.pg.stop("fast")
    time.sleep(down)
    scene.rig.pg.start()
    return Outcome(f"PostgreSQL down {down} s")


def pg_terminate(scene: Scene, plan: Plan) -> Outcome:
    rounds = 3 if plan.quick else 10
    ended = 0
    for k in range(rounds):
        scene.at(1 + k * (plan.window - 2) / rounds)
        ended += scene.rig.pg.terminate_backends(scene.database)
    return Outcome(f"{rounds} rounds of pg_terminate_backend, {ended} sessions ended")


def redis_restart(scene: Scene, plan: Plan) -> Outcome:
    restarts = 1 if plan.quick else 3
    for k in range(restarts):
        scene.at((k + 1) * plan.window / (restarts + 1))
        scene.rig.redis.kill()
        scene.rig.redis.start()
    return Outcome(f"{restarts} Redis restart{'s' if restarts > 1 else ''}")


def redis_outage(scene: Scene, plan: Plan) -> Outcome:
    down = 5 if plan.quick else 30
    scene.at(2)
    scene.rig.redis.kill()
    time.sleep(down)
    scene.rig.redis.start()
    return Outcome(f"Redis down {down} s")


def poison(scene: Scene, plan: Plan) -> Outcome:
    scene.at(plan.window)
    return Outcome(f"{plan.poison} poison tasks")


@dataclass(frozen=True)
class Scenario:
    name: str
    inject: Callable[[Scene, Plan], Outcome]
    nodes: int = 2
    poison: tuple[int, int] = (0, 0)  # poison tasks (quick, full)
    innocent_max_retry: int | None = None
    window: tuple[float, float] = (10.0, 40.0)  # seconds of production (quick, full)


SCENARIOS = [
    Scenario("worker-kill", worker_kill),
    Scenario("node-kill", node_kill),
    Scenario("rolling-sigterm", rolling_sigterm, window=(15.0, 40.0)),
    Scenario("graceful-shutdown", graceful_shutdown, nodes=1),
    Scenario("pg-fast-restart", pg_restart("fast")),
    Scenario("pg-immediate-restart", pg_restart("immediate")),
    Scenario("pg-outage", pg_outage),
    Scenario("pg-terminate", pg_terminate),
    Scenario("redis-restart", redis_restart),
    Scenario("redis-outage", redis_outage, window=(10.0, 45.0)),
    Scenario("poison", poison, poison=(2, 5), innocent_max_retry=3),
]
BY_NAME = {s.name: s for s in SCENARIOS}


# -- running and counting -------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    faults: str
    acked: int
    completed: int
    lost: int
    archived: int
    ran_again: int
    worker_exits: int  # worker processes that ended by themselves (poison tasks end theirs)
    completed_twice: int
    result_died: int
    lease_undone: int
    no_answer: int
    no_answer_stored: int
    rescue: float | None
    settled: float | None
    seconds: float
    phases: str
    errors: dict[int, int]
    no_answer_kinds: dict[str, int]
    gave_up: int
    lost_ids: list[str]


def run_scenario(rig: Rig, scenario: Scenario, quick: bool) -> Result:
    window = scenario.window[0 if quick else 1]
    rate = 60.0 if quick else 250.0
    plan = Plan(window, int(window * rate), quick, scenario.poison[0 if quick else 1], scenario.innocent_max_retry)
    phases = Phases()
    scene = Scene(rig, scenario.name, scenario.nodes)
    try:
        scene.start()
        phases.mark("start")
        tally = Tally()
        tasks = make_tasks(plan.tasks, plan.poison, plan.innocent_max_retry)
        producers = Producers([node.url for node in scene.nodes], tally)
        producing = threading.Thread(target=producers.run, args=(tasks, plan.tasks / window), daemon=True)
        producing.start()
        outcome = scenario.inject(scene, plan)
        producing.join()
        phases.mark("produce")
        scene.settle(tally, SETTLE)
        phases.mark("settle")
        scene.stop()
        phases.mark("stop")
        if scene.exits_unasked:
            outcome.faults += f", {len(scene.exits_unasked)} worker processes exited by themselves"
        runs = read_completion_logs(scene.completion_logs())
        for kill_at, held in getattr(scene, "held", []):
            outcome.rescues.append(rescue_time(kill_at, held, runs))
        states = task_states(scene.database_url, list(tally.acked))
    finally:
        scene.stop()
        if not rig.keep:
            scene.drop()
    return count(scenario.name, outcome, tally, runs, states, scene, phases)


class Phases:
    """Seconds spent in each phase of a scenario."""

    def __init__(self) -> None:
        self.at = self.started = time.monotonic()
        self.spent: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.spent[name], self.at = now - self.at, now

    def total(self) -> float:
        return self.at - self.started

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.0f}" for name, seconds in self.spent.items())


KILL_WINDOW = 2.0  # seconds: a result this close to its holder's death may have died with it


@dataclass
class Twice:
    """Tasks whose handler finished more than once, by why."""

    completed_twice: int = 0
    result_died: int = 0
    lease_undone: int = 0


def finished_twice(runs: dict[str, list[Execution]], deaths: list[tuple[float, int]], db_crashes: list[float]) -> Twice:
    """Tasks whose handler finished more than once, sorted by cause.

    A finish is followed by its result on the way to the node, and by the ack's
    commit. When the worker process, or the node it was connected to, died
    within ``KILL_WINDOW`` of a finish (a worker finishes a handler before it
    notices that its node is gone), that result may have died with it and the
    task rightly ran again (at-least-once delivery): "result died".
    When a finish is followed by another of the *same attempt* and PostgreSQL
    crashed within ``KILL_WINDOW`` of the first, the database forgot the lease
    (committed without waiting for the WAL flush, ``LEASE_ASYNC_COMMIT``) and
    delivered the task again: "lease undone". A same-attempt repeat with no
    crash near it is a release that raced a result, and counts below.
    Every other second finish ran a task whose first result was accepted or
    dropped by a live node: "completed twice".
    """
    died: dict[int, list[float]] = {}
    for at, pid in deaths:
        died.setdefault(pid, []).append(at)
    out = Twice()
    for events in runs.values():
        finishes = sorted((e for e in events if e.event == "done"), key=lambda e: e.t)
        if len(finishes) < 2:
            continue
        earlier = finishes[:-1]
        if all(any(abs(at - e.t) <= KILL_WINDOW for at in died.get(e.pid, [])) for e in earlier):
            out.result_died += 1
        elif all(
            any(f.attempt == e.attempt for f in finishes[i + 1 :])
            and any(abs(at - e.t) <= KILL_WINDOW for at in db_crashes)
            for i, e in enumerate(earlier)
        ):
            out.lease_undone += 1
        else:
            out.completed_twice += 1
    return out


def count(
    name: str, outcome: Outcome, tally: Tally, runs: dict, states: dict[str, str], scene: Scene, phases: Phases
) -> Result:
    innocents = [task_id for task_id, spec in tally.acked.items() if spec.type == "chaos"]
    done = {task_id for task_id, events in runs.items() if any(e.event == "done" for e in events)}
    completed = [t for t in innocents if states.get(t) == "completed" and t in done]
    archived = [t for t in innocents if states.get(t) == "archived"]
    lost = sorted(set(innocents) - set(completed) - set(archived))

    twice = finished_twice(runs, scene.deaths, scene.db_crashes)

    return Result(
        scenario=name,
        faults=outcome.faults,
        acked=len(tally.acked),
        completed=len(completed),
        lost=len(lost),
        archived=len(archived),
        ran_again=sum(1 for events in runs.values() if sum(e.event == "start" for e in events) > 1),
        worker_exits=len(scene.exits_unasked),
        completed_twice=twice.completed_twice,
        result_died=twice.result_died,
        lease_undone=twice.lease_undone,
        no_answer=sum(tally.no_answer.values()),
        no_answer_stored=tally.no_answer_stored,
        rescue=max(outcome.rescues) if outcome.rescues else None,
        settled=max(outcome.settled) if outcome.settled else None,
        seconds=phases.total(),
        phases=str(phases),
        errors=dict(tally.statuses),
        no_answer_kinds=dict(tally.no_answer),
        gave_up=len(tally.gave_up),
        lost_ids=lost[:10],
    )


COLUMNS = (
    "scenario",
    "acked",
    "completed",
    "lost",
    "archived",
    "ran again",
    "completed twice",
    "result died",
    "lease undone",
    "no answer",
    "settled",
    "rescue",
)


def row(result: Result) -> list[str]:
    rescue, settled = (
        "-" if value is None or math.isnan(value) else f"{value:.1f} s" for value in (result.rescue, result.settled)
    )
    return [
        result.scenario,
        f"{result.acked:,}",
        f"{result.completed:,}",
        str(result.lost),
        str(result.archived),
        str(result.ran_again),
        str(result.completed_twice),
        str(result.result_died),
        str(result.lease_undone),
        f"{result.no_answer} ({result.no_answer_stored})",
        settled,
        rescue,
    ]


def markdown_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def print_table(results: list[Result]) -> None:
    """The table as Markdown (docs/operations.md keeps the latest), then a line per scenario."""
    print(markdown_row(list(COLUMNS)))
    print(markdown_row(["---"] + ["---:"] * (len(COLUMNS) - 1)))
    for result in results:
        print(markdown_row(row(result)))
    print()
    for result in results:
        print(note(result))


def note(result: Result) -> str:
    extra = f"; error answers {result.errors}" if result.errors else ""
    extra += f"; no answer {result.no_answer_kinds}" if result.no_answer_kinds else ""
    extra += f"; gave up on {result.gave_up} enqueues" if result.gave_up else ""
    extra += f"; lost e.g. {result.lost_ids}" if result.lost_ids else ""
    return f"{result.scenario}: {result.faults}; {result.seconds:.0f} s ({result.phases}){extra}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the short form (about 600 tasks a scenario)")
    parser.add_argument("--scenario", action="append", choices=list(BY_NAME), help="run only this one (repeatable)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the logs and the database files (their directories are printed)"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop what was started on the way out
    rig = Rig(keep=args.keep)
    results = []
    try:
        for name in args.scenario or list(BY_NAME):
            result = run_scenario(rig, BY_NAME[name], args.quick)
            print(markdown_row(row(result)), note(result), sep="\n", flush=True)
            results.append(result)
    finally:
        rig.close()
    print()
    print_table(results)
    if args.keep:
        print(f"logs in {rig.dir}, PostgreSQL's files in {rig.pg.dir}")


if __name__ == "__main__":
    main()
