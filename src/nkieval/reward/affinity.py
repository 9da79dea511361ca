"""The worker pool's queue: each review worker (a review process, or a Ray actor: :mod:`nkieval.reward.workers`) is
handed the candidates of the tasks whose cases it already holds.

A review's candidate-independent work (the case's inputs, the task's reference outputs, the CUDA kernel's outputs,
the prepared numerics checks) is cached per process, keyed by task and seed (:mod:`nkieval.review.cache`): a warm
review of a task costs a fraction of a cold one. A first-in, first-out queue deals an RL step's candidates, which
come grouped by prompt, to whichever worker is free, so every worker meets every task and the n samples of one
task start cold in up to n processes at once. This queue gives a free worker, in order:

1. the oldest job of a task and seed it ran recently (its own warm keys, the most recent first);
2. else the oldest job, among the first :data:`WINDOW` waiting, whose key no other process ran recently (the
   process claims a task nobody holds);
3. else the oldest job (it helps with another process's task rather than wait: no core idles while work waits).

A job the others keep passing over is not left behind: once the job at the head of the queue has been passed over
:attr:`AffinityQueue.patience` times, the next free process takes it. Jobs without a seed (a fresh secret seed:
never cached) and the pool's stop markers have no key: they are taken in order.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Hashable
from typing import Any

#: how many waiting jobs a process looks through for a task nobody holds
WINDOW = 256
#: how many recent task-and-seed keys count as a process's warm ones (about the tasks its case cache holds)
WARM_KEYS = 4


class _Waiting:
    __slots__ = ("item", "key", "passed", "taken")

    def __init__(self, item: Any, key: Hashable | None) -> None:
        self.item, self.key, self.passed, self.taken = item, key, 0, False


class AffinityQueue:
    """A thread-safe queue of ``(key, item)`` pairs read by ``workers`` numbered consumers (see the module)."""

    def __init__(self, workers: int, patience: int | None = None) -> None:
        self.patience = patience if patience is not None else max(4, 2 * workers)
        self._cv = threading.Condition()
        self._order: deque[_Waiting] = deque()
        self._by_key: dict[Hashable, deque[_Waiting]] = {}
        self._warm: list[OrderedDict[Hashable, None]] = [OrderedDict() for _ in range(workers)]
        self._waiting = 0

    def put(self, item: Any, key: Hashable | None = None) -> None:
        w = _Waiting(item, key)
        with self._cv:
            self._order.append(w)
            if key is not None:
                self._by_key.setdefault(key, deque()).append(w)
            self._waiting += 1
            self._cv.notify()

    def qsize(self) -> int:
        with self._cv:
            return self._waiting

    def get(self, worker: int) -> Any:
        """The next item for consumer ``worker`` (blocks until there is one)."""
        with self._cv:
            while not self._waiting:
                self._cv.wait()
            w = self._choose(worker)
            w.taken = True
            self._waiting -= 1
            if w.key is not None:
                warm = self._warm[worker]
                warm[w.key] = None
                warm.move_to_end(w.key)
                while len(warm) > WARM_KEYS:
                    warm.popitem(last=False)
            self._tidy(w)
            return w.item

    # Kept after every hand-out (``_tidy``): the queue's first job and each key's first job are waiting ones (a
    # key's jobs are handed out oldest first, by every rule of ``_choose``).

    def _choose(self, worker: int) -> _Waiting:
        head = self._order[0]
        if head.key is None or head.passed >= self.patience:
            return head
        chosen = self._own(worker) or self._unclaimed(worker) or head
        if chosen is not head:
            head.passed += 1
        return chosen

    def _own(self, worker: int) -> _Waiting | None:
        for key in reversed(self._warm[worker]):
            q = self._by_key.get(key)
            if q:
                return q[0]
        return None

    def _unclaimed(self, worker: int) -> _Waiting | None:
        others = set()
        for i, warm in enumerate(self._warm):
            if i != worker:
                others.update(warm)
        seen = 0
        for w in self._order:
            if w.taken:
                continue
            if w.item is not None and (w.key is None or w.key not in others):  # (a stop marker only at the head)
                return w
            seen += 1
            if seen >= WINDOW:
                break
        return None

    def _tidy(self, taken: _Waiting) -> None:
        if taken.key is not None:
            q = self._by_key[taken.key]
            q.popleft()  # (``taken``: the oldest of its key)
            if not q:
                del self._by_key[taken.key]
        while self._order and self._order[0].taken:
            self._order.popleft()
