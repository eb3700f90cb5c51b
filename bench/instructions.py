"""What an enqueue costs the producer, in instructions (valgrind's callgrind).

    .venv/bin/python bench/instructions.py [--what sdk,batch,one,lease,ack,node] [--checkout DIR ...]

A count of instructions does not depend on how busy the machine is (this
one is shared, and its speed changes by the hour), so two builds or two
clients can be compared on it when their timings cannot be. Each count is
the difference between two runs of the same loop, one longer than the
other, divided by the extra work: start-up and imports cancel out.

  * sdk: the SDK's ``Client.enqueue`` against a cluster node (PostgreSQL +
    Redis), and the same enqueue over ``httpx.Client`` (bench/sdk_producer.py);
    the producer's instructions per enqueue
  * batch: ``get_broker().enqueue_batch`` of 1,000 tasks from Django code
    (PostgreSQL + Redis, wakes and events included), per task
  * one: ``get_broker().enqueue`` from Django code, one task at a time, per task
  * lease: ``get_broker().lease`` of one task at a time, per lease (both runs
    enqueue the same tasks first, so only the leases differ)
  * ack: ``get_broker().ack_many`` of one leased task at a time, per ack
    (both runs enqueue and lease the same tasks first)
  * node: a cluster node itself (``conveyord`` under callgrind) answering
    one-task POSTs from one ``http.client`` producer, per POST; each of the
    two node runs serves for the same 90 s, so its timers cancel out

``--checkout``: the working tree(s) measured for batch, one, lease, ack and node
(default: this one), e.g. another build from ``git worktree add``.
Needs ``valgrind`` (Debian's package). Python runs ~50x slower under it: a
full run takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REDIS_URL, ROOT, fresh_database

SHORT, LONG = 1, 4  # units of work in the two runs
NODE_HOLD = 90  # seconds each node run serves, whatever it is sent


def instructions(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Instructions the command executed, by callgrind."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        capture_output=True,
        text=True,
        env=env,
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed: {' '.join(argv)}\n{out.stderr[-2000:]}")
    return int(found.group(1))


def per_unit(argv: list[str], work: int, env: dict[str, str] | None = None) -> float:
    """Instructions per piece of work: (LONG run - SHORT run) / extra pieces."""
    short = instructions([*argv, str(SHORT)], env)
    long = instructions([*argv, str(LONG)], env)
    return (long - short) / ((LONG - SHORT) * work)


def sdk() -> None:
    from bench.dispatch_bench import Node

    node = Node("cluster")
    try:
        for kind in ("sdk", "httpx"):
            count = per_unit([sys.executable, __file__, "--inner-sdk", node.url, kind], 100)
            print(f"Client.enqueue ({kind}): {count / 1000:,.0f}k instructions per enqueue", flush=True)
    finally:
        node.stop()


def broker(what: str, checkouts: list[Path]) -> None:
    url = fresh_database("postgres", f"conveyor_instructions_{what}")
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
        "CONVEYOR_CHANNEL_PREFIX": "bench_instructions",
    }
    work = 1000 if what == "batch" else 100
    for checkout in checkouts:
        argv = [sys.executable, __file__, "--inner-broker", str(checkout), what]
        count = per_unit(argv, work, env)
        print(f"{what} from Django code, {checkout}: {count / 1000:,.1f}k instructions per task", flush=True)


def node(checkouts: list[Path]) -> None:
    import signal
    import tempfile
    import time
    import uuid

    from bench.dispatch_bench import stdlib_enqueue

    def run(checkout: Path, posts: int) -> int:
        env = {
            **os.environ,
            "DATABASE_URL": fresh_database("postgres", "conveyor_instructions"),
            "REDIS_URL": REDIS_URL,
            "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
            # A production node refuses the default key.
            "DJANGO_SECRET_KEY": "bench-only-secret-key:0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH",
            "CONVEYOR_ALLOW_UNAUTHENTICATED": "1",
            "CONVEYOR_CHANNEL_PREFIX": f"bench{uuid.uuid4().hex[:6]}",
            "CONVEYOR_LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
        argv += [sys.executable, "manage.py", "conveyord", "--port", "0"]
        with tempfile.NamedTemporaryFile("w+", prefix="conveyor-instructions-", suffix=".log") as log:
            proc = subprocess.Popen(argv, cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
            deadline = time.time() + 600
            while "listening on " not in Path(log.name).read_text():
                if proc.poll() is not None or time.time() > deadline:
                    proc.kill()
                    raise SystemExit("node did not start under valgrind:\n" + Path(log.name).read_text()[-2000:])
                time.sleep(0.5)
            url = Path(log.name).read_text().split("listening on ", 1)[1].split()[0]
            started = time.monotonic()
            stdlib_enqueue(url, posts)
            # Both runs live equally long, so the node's own timers (sweepers,
            # the server's) cost them alike and cancel out.
            if time.monotonic() - started > NODE_HOLD:
                raise SystemExit(f"{posts} POSTs took longer than {NODE_HOLD} s under valgrind")
            time.sleep(NODE_HOLD - (time.monotonic() - started))
            proc.send_signal(signal.SIGTERM)
            proc.wait(600)
            found = re.search(r"Collected : (\d+)", Path(log.name).read_text())
        if found is None:
            raise SystemExit("no instruction count from the node")
        return int(found.group(1))

    for checkout in checkouts:
        short, long = run(checkout, 100), run(checkout, 400)
        print(f"node, {checkout}: {(long - short) / 300 / 1000:,.0f}k instructions per one-task POST", flush=True)


def inner_sdk(url: str, kind: str, units: int) -> None:
    from bench.sdk_producer import enqueuer

    enqueue = enqueuer(kind, url)
    for _ in range(units * 100):
        enqueue()


def inner_broker(checkout: str, what: str, units: int) -> None:
    sys.path.insert(0, checkout)  # that build's conveyor, not this one's
    import django

    django.setup()
    from conveyor.broker import TaskSpec, get_broker

    broker = get_broker()
    if what in ("lease", "ack"):
        # The same setup in both runs (LONG units of tasks), so it cancels out.
        for _ in range(LONG):
            broker.enqueue_batch([TaskSpec(type="bench", payload=b"{}", queue=what) for _ in range(100)])
        held = [t for _ in range(LONG) for t in broker.lease(what, 100).tasks] if what == "ack" else []
        for i in range(units * 100):
            if what == "lease":
                broker.lease(what, 1)
            else:
                broker.ack_many([(held[i], None)])
        return
    for _ in range(units):
        if what == "batch":
            broker.enqueue_batch([TaskSpec(type="bench", payload=b"{}", queue="batch") for _ in range(1000)])
        else:
            for _ in range(100):
                broker.enqueue(TaskSpec(type="bench", payload=b"{}", queue="one"))


def main() -> None:
    if sys.argv[1:2] == ["--inner-sdk"]:
        inner_sdk(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if sys.argv[1:2] == ["--inner-broker"]:
        inner_broker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--what", default="sdk,batch,one,node")
    parser.add_argument("--checkout", action="append", type=Path, help="a working tree whose broker to measure")
    args = parser.parse_args()
    checkouts = [c.resolve() for c in args.checkout or [ROOT]]
    for what in args.what.split(","):
        if what == "sdk":
            sdk()
        elif what in ("batch", "one", "lease", "ack"):
            broker(what, checkouts)
        elif what == "node":
            node(checkouts)
        else:
            raise SystemExit(f"--what: unknown {what!r} (sdk, batch, one, lease, ack, node)")


if __name__ == "__main__":
    main()
