"""Shared helpers for the benchmarks: fresh databases, timing, printing."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def fresh_database(backend: str, name: str = "conveyor_bench", checkout: Path | None = None) -> str:
    """Create an empty, migrated database; return its DATABASE_URL.

    *checkout*: another build's working tree, whose own ``.venv`` migrates
    it (by default this one's interpreter and tree)."""
    if backend == "sqlite":
        path = Path(tempfile.mkdtemp(prefix="conveyor-bench-")) / "bench.sqlite3"
        url = f"sqlite:///{path}"
    else:
        import psycopg

        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "conveyor_site.settings"}
    python = sys.executable if checkout is None else str(checkout / ".venv" / "bin" / "python")
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v0"], cwd=checkout or ROOT, env=env, check=True)
    return url


def vacuum(database_url: str) -> None:
    """VACUUM ANALYZE a PostgreSQL database between phases of a benchmark.

    A busy queue leaves a dead row version behind every state change, and
    a lease has to step over dead index entries until they are vacuumed.
    Production PostgreSQL vacuums on its own (autovacuum, on by default,
    looks every minute); this machine's server runs with autovacuum off, so
    the benchmarks vacuum where autovacuum would have, for every PostgreSQL
    system they measure alike, and checkpoint so that the writes vacuum
    caused are not flushed during the next measurement.
    """
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        # Write the pages vacuum dirtied now, not under the next phase's commits.
        conn.execute("CHECKPOINT")


ROUND_WARMUP = 100  # enqueues before a round's clock starts: connections, prepared statements


def one_by_one_round(enqueue: Callable[[], None], count: int) -> float:
    """Tasks/s of *count* one-by-one enqueues, after ``ROUND_WARMUP`` untimed
    ones (bench/compare.py's interleaved rounds; every system's the same way)."""
    for _ in range(ROUND_WARMUP):
        enqueue()
    start = time.perf_counter()
    for _ in range(count):
        enqueue()
    return count / (time.perf_counter() - start)


def at_rate(count: int, rate: float, send: Callable[[int], None]) -> None:
    """Call ``send(i)`` for each i below *count* on a fixed schedule of *rate*
    per second: a slow call delays the next, as a producer's own would (the
    latency runs' producers)."""
    interval, next_at = 1.0 / rate, time.perf_counter()
    for i in range(count):
        send(i)
        next_at += interval
        pause = next_at - time.perf_counter()
        if pause > 0:
            time.sleep(pause)


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "inf"


def timed(fn: Callable[[], int]) -> tuple[int, float]:
    start = time.perf_counter()
    count = fn()
    return count, time.perf_counter() - start


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
    return ordered[index]


def latency_percentiles(samples: list[float], prefix: str = "latency") -> dict[str, float]:
    """p50/p95/p99 of *samples* (seconds) as ``{prefix}_p50_ms`` … in milliseconds."""
    return {f"{prefix}_p{p}_ms": percentile(samples, p) * 1000 for p in (50, 95, 99)}


def node_url(proc: subprocess.Popen, log: str, what: str = "node") -> str:
    """The URL a starting ``conveyord`` (*proc*, writing to the file *log*)
    says it listens on; exits the benchmark if it fails or takes a minute."""
    deadline = time.time() + 60
    while time.time() < deadline:
        text = Path(log).read_text()
        if "listening on " in text:
            return text.split("listening on ", 1)[1].split()[0]
        if proc.poll() is not None:
            raise SystemExit(f"{what} failed to start:\n{text}")
        time.sleep(0.1)
    raise SystemExit(f"{what} did not start")


def take_latency_log(path: str) -> list[list[str]]:
    """The lines bench/worker_proc.py wrote to *path*, split; the file is removed."""
    log = Path(path)
    lines = [line.split() for line in log.read_text().splitlines() if line.strip()]
    log.unlink()
    return lines


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of a live process (VmHWM), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a live process has used so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile_rows(label: str, prefix: str, fmt: str = "{:.1f}") -> list[tuple[str, str, str]]:
    """The p50/p95/p99 rows of ``latency_percentiles(..., prefix)`` for print_table."""
    return [(label.format(p=f"p{p}"), f"{prefix}_p{p}_ms", fmt) for p in (50, 95, 99)]


def print_table(rows: list[tuple[str, str, str]], results: dict[str, dict[str, float]], width: int = 52) -> None:
    """One line per (label, key, format) row, one column per result; "-" where a key is missing."""
    names = list(results)
    print(f"{'':{width}}" + "".join(f"{n:>15}" for n in names))
    for label, key, fmt in rows:
        cells = [fmt.format(results[n][key]) if key in results[n] else "-" for n in names]
        print(f"{label:{width}}" + "".join(f"{c:>15}" for c in cells))


def machine_busy_seconds() -> float:
    """CPU time the whole machine has spent busy so far, all cores (from
    /proc/stat: user, nice, system, irq, softirq and steal; idle and iowait
    left out), in seconds."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """*root* and its live descendants (from /proc/<pid>/stat's parent ids)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def tree_cpu_seconds(root: int) -> float:
    """CPU time (user + system) of *root*'s process tree so far, in seconds:
    each live process's own, plus what its children that exited used (the
    kernel adds a child's time to its parent's when the parent reaps it)."""
    total = 0
    for pid in process_tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


# Where the machine's CPU goes during a drain, by who spends it (the worker
# is measured as its process tree): the benchmark's PostgreSQL (the
# children of PG_ADMIN's postmaster), its Redis (BENCH_COUNTER_URL's port)
# and a Conveyor node. Other tenants of the machine are not counted.
SHARES = ("postgres", "redis", "node")


@functools.cache
def _share_matchers() -> tuple[int | None, str]:
    """The benchmark's postmaster pid (None if it cannot be found) and its Redis's ``:port``."""
    postmaster = None
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except Exception:  # a remote or unreachable server: no PostgreSQL share
        pass
    port = urllib.parse.urlsplit(os.environ.get("BENCH_COUNTER_URL", REDIS_URL)).port or 6379
    return postmaster, f":{port}"


def _serves(pid: str, database_port: str) -> bool:
    """Whether process *pid*'s DATABASE_URL is on the benchmark's PostgreSQL (a
    node of this benchmark, not of a test running beside it)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(v.startswith(b"DATABASE_URL=") and database_port.encode() in v for v in environ)


def cpu_by_share() -> dict[int, tuple[str, float]]:
    """Each live process of a ``SHARES`` kind: its pid, kind and CPU seconds so far."""
    postmaster, redis_port = _share_matchers()
    postmaster_port = f":{urllib.parse.urlsplit(PG_ADMIN).port or 5432}/"
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        comm = stat.split("(", 1)[1].rsplit(")", 1)[0]
        fields = stat.rsplit(")", 1)[1].split()
        if comm.startswith("postgres") and postmaster in (int(entry), int(fields[1])):
            kind = "postgres"
        elif comm.startswith("redis-server") and redis_port in cmdline:
            kind = "redis"
        elif "conveyord" in cmdline and _serves(entry, postmaster_port):
            kind = "node"
        else:
            continue
        found[int(entry)] = (kind, (int(fields[11]) + int(fields[12])) / tick)
    return found


def cpu_shares_since(before: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds each kind of ``SHARES`` spent since *before* (a process
    started meanwhile counts whole; one that exited meanwhile is missed)."""
    spent = dict.fromkeys(SHARES, 0.0)
    for pid, (kind, seconds) in cpu_by_share().items():
        spent[kind] += seconds - (before[pid][1] if pid in before else 0.0)
    return spent


def tree_rss_mb(root: int) -> float:
    """Peak resident memory (VmHWM) summed over *root*'s live process tree, in MB."""
    return sum(m for m in (peak_rss_mb(pid) for pid in process_tree(root)) if m == m)


def tree_pss_mb(root: int) -> float:
    """Proportional set size summed over *root*'s live process tree, in MB:
    a page shared by k of its processes (a forked pool's) counts 1/k in each."""
    total = 0
    for pid in process_tree(root):
        try:
            lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) for line in lines if line.startswith("Pss:"))
    return total / 1024


def stop_tree(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM a worker *proc* started in a session of its own
    (``start_new_session=True``) and wait; if it has not exited by *timeout*,
    SIGKILL its process group. Then SIGKILL what is left of the group (a
    pool's children its exit orphaned)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def measure_drain(
    start_worker: Callable[[], subprocess.Popen], done: Callable[[], int], tasks: int, timeout: float = 3600
) -> dict[str, float]:
    """Drain *tasks* already queued: start the worker, and time from its start
    until ``done()`` reaches *tasks*. Returns tasks/s, the whole machine's CPU
    per task over that time (/proc/stat: every process, this one's polling
    and other tenants' work included), the worker process tree's own CPU per
    task (its start-up included) and its peak RSS summed over its processes."""
    shares = cpu_by_share()
    busy, start = machine_busy_seconds(), time.perf_counter()
    proc = start_worker()
    try:
        deadline = time.time() + timeout
        while done() < tasks:
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit(f"the drain did not finish ({done()} of {tasks} done)")
            time.sleep(0.02)
        elapsed = time.perf_counter() - start
        machine = machine_busy_seconds() - busy
        spent = cpu_shares_since(shares)
        worker_cpu, rss, pss = tree_cpu_seconds(proc.pid), tree_rss_mb(proc.pid), tree_pss_mb(proc.pid)
    finally:
        stop_tree(proc)
    return {
        "drain_per_s": tasks / elapsed,
        "machine_cpu_ms": machine / tasks * 1000,
        "worker_cpu_ms": worker_cpu / tasks * 1000,
        **{f"{kind}_cpu_ms": seconds / tasks * 1000 for kind, seconds in spent.items()},
        "worker_rss_mb": rss,
        "worker_pss_mb": pss,
    }


@contextlib.contextmanager
def private_redis(fsync: bool = False) -> Iterator[str]:
    """A private redis-server on a free loopback port, no persistence (or,
    with *fsync*, an append-only file fsynced at every write); yields its URL
    (database 0)."""
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="conveyor-bench-redis-")
    argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--dir", workdir]
    argv += ["--appendonly", "yes", "--appendfsync", "always"] if fsync else ["--appendonly", "no"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.time() + 10
        while True:
            try:
                # The server we started, not another that took the port first.
                if redis.Redis.from_url(url).config_get("dir") == {"dir": workdir}:
                    break
                raise SystemExit(f"another Redis answers on port {port}")
            except redis.ConnectionError:
                if time.time() > deadline or proc.poll() is not None:
                    raise SystemExit("the private redis-server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
