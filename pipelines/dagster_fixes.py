"""Two corrections to the pinned Dagster, applied where the definitions are loaded.

1. The pool wait. Dagster 1.13.27 (and 1.13.28) computes how long a step that waits on a pool
   should sleep as `min([0, *waits])`
   (`dagster/_core/execution/plan/instance_concurrency_context.py`,
   `interval_to_next_pending_claim_check`), which is never positive: the executor therefore
   never sleeps and polls its claim in a tight loop, a whole core for as long as another run
   holds the pool. The wait it already computed is the intended one (its backoff grows to
   15 s); we return that.

2. One SQLAlchemy engine per SQLite file. Dagster's SQLite storages (the event log, runs,
   schedules) make a new engine for every connection: `create_engine(url,
   poolclass=NullPool)`, then connect, then `dispose`. A new engine also runs the dialect's
   first-connect queries, so each stored event cost 4.0 ms where a kept engine costs 2.3 ms
   (measured here), and a no-change build of two datasets opens over 900 connections. We hand
   those storages the engine already made for the same URL and arguments. With NullPool an
   engine holds no connection between uses (each use still opens and closes its own, and
   commits as before), so keeping one changes what is written in no way; the most recent
   MAX_ENGINES are kept.

Applied only to the version they were read on; a test fails when a Dagster upgrade makes them
unnecessary or inapplicable.
"""

from __future__ import annotations

import threading
import time

import dagster
import sqlalchemy
from dagster._core.execution.plan import instance_concurrency_context as _concurrency
from dagster._core.storage.event_log.sqlite import sqlite_event_log as _event_log
from dagster._core.storage.runs.sqlite import sqlite_run_storage as _runs
from dagster._core.storage.schedules.sqlite import sqlite_schedule_storage as _schedules
from sqlalchemy.pool import NullPool

FIXED_VERSION = "1.13.27"
MAX_ENGINES = 16  # a process stores events of one run (its shard) and of the index at a time
_ENGINE_USERS = (_event_log, _runs, _schedules)
_engines: dict[tuple, sqlalchemy.engine.Engine] = {}
_engines_lock = threading.Lock()


def _interval_to_next_pending_claim_check(self) -> float:
    if not self._pending_claims:
        return 0.0
    now = time.time()
    waits = [ready_at - now for ready_at in self._pending_timeouts.values()]
    return max(0.0, min(waits)) if waits else 0.0


def kept_engine(url, **kwargs) -> sqlalchemy.engine.Engine:
    """`sqlalchemy.create_engine(url, **kwargs)`, the same engine for the same arguments where
    they ask for no pool (NullPool); any other engine is made anew, as before."""
    if kwargs.get("poolclass") is not NullPool:
        return sqlalchemy.create_engine(url, **kwargs)
    key = (str(url), repr(sorted(kwargs.items(), key=lambda kv: kv[0])))
    with _engines_lock:
        engine = _engines.pop(key, None) or sqlalchemy.create_engine(url, **kwargs)
        _engines[key] = engine  # the most recently used last
        while len(_engines) > MAX_ENGINES:
            _engines.pop(next(iter(_engines)))
    return engine


def apply() -> bool:
    """Install the corrections on the version they were written for; returns whether it did."""
    if dagster.__version__ != FIXED_VERSION:
        return False
    _concurrency.InstanceConcurrencyContext.interval_to_next_pending_claim_check = (
        _interval_to_next_pending_claim_check
    )
    for module in _ENGINE_USERS:
        module.create_engine = kept_engine
    return True
