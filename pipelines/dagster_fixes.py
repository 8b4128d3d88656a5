"""One correction to the pinned Dagster, applied where the definitions are loaded.

Dagster 1.13.27 (and 1.13.28) computes how long a step that waits on a pool should sleep as
`min([0, *waits])` (`dagster/_core/execution/plan/instance_concurrency_context.py`,
`interval_to_next_pending_claim_check`), which is never positive: the executor therefore
never sleeps and polls its claim in a tight loop, a whole core for as long as another run
holds the pool. The wait it already computed is the intended one (its backoff grows to 15 s);
we return that. Applied only to the version it was read on; a test fails when a Dagster
upgrade makes it unnecessary or inapplicable.
"""

from __future__ import annotations

import time

import dagster
from dagster._core.execution.plan import instance_concurrency_context as _concurrency

FIXED_VERSION = "1.13.27"


def _interval_to_next_pending_claim_check(self) -> float:
    if not self._pending_claims:
        return 0.0
    now = time.time()
    waits = [ready_at - now for ready_at in self._pending_timeouts.values()]
    return max(0.0, min(waits)) if waits else 0.0


def apply() -> bool:
    """Install the correction on the version it was written for; returns whether it did."""
    if dagster.__version__ != FIXED_VERSION:
        return False
    _concurrency.InstanceConcurrencyContext.interval_to_next_pending_claim_check = (
        _interval_to_next_pending_claim_check
    )
    return True
