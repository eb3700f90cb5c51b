"""``conveyor sweep``: run the sweepers outside a node."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from conveyor.broker import get_broker
from conveyor.sweepers import SWEEPERS
from conveyor.sweepers.base import SweeperLoop


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("sweep", help="run the scheduler, reaper and group sweeper outside a node")
    parser.add_argument("--once", action="store_true", help="one pass of each sweeper, then exit (ignores leadership)")
    parser.add_argument("--only", choices=sorted(SWEEPERS), action="append", help="run only this sweeper (repeatable)")
    parser.add_argument(
        "--json", action="store_true", dest="as_json", default=argparse.SUPPRESS, help="machine-readable output"
    )
    parser.set_defaults(handler=sweep)


def sweep(args: Any, out: Any) -> None:
    names = args.only or sorted(SWEEPERS)
    broker = get_broker()
    sweepers = [SWEEPERS[name](broker) for name in names]
    if args.once:
        for sweeper in sweepers:
            report = sweeper.run_once()
            out.emit(
                {"sweeper": sweeper.name, **report},
                f"{sweeper.name}: " + " ".join(f"{k}={v}" for k, v in report.items()),
            )
        return
    run_forever(sweepers, out)


def run_forever(sweepers: list[Any], out: Any) -> None:
    """Each sweeper on its own thread, acting while it holds leadership."""
    logging.getLogger("conveyor").setLevel(logging.INFO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    threads = [threading.Thread(target=_loop, args=(SweeperLoop(s), stop), daemon=True) for s in sweepers]
    for thread in threads:
        thread.start()
    out.line(f"sweeping ({', '.join(s.name for s in sweepers)}); Ctrl-C to stop")
    stop.wait()


def _loop(loop: SweeperLoop, stop: threading.Event) -> None:
    import logging

    log = logging.getLogger("conveyor.sweepers")
    while not stop.is_set():
        try:
            loop.tick()
        except Exception:
            log.exception("%s pass failed; retrying next tick", loop.sweeper.name)
        stop.wait(loop.sweeper.interval)
    loop.lock.release()
