"""Which program of a concurrent launch runs now: one at a time, handing over at waits and shared-memory accesses.

An LNC-2 launch (and a Beta-1 grid run ``concurrent``ly) runs its programs as threads. Left to the interpreter,
they interleave wherever it switches threads (and NumPy releases the interpreter lock inside large array
operations), so what the programs share (the trace and its order, allocation ids, which program makes a shared-HBM
tensor, warnings, the launch's counters and every module-level cache) would be updated in an order that changes
from run to run. Here exactly one program holds the turn: it starts with program 0, and passes to the next
program still running, in program order, when the running program waits for a peer (``core_barrier``,
``sendrecv``, Beta-1 ``all_reduce``), ends, or is about to reach memory the programs share (:meth:`Turns.step`:
a DMA or a sync-engine load or store). A run is then the same sequence of steps every time,
and a race-free kernel gives the same outputs, warnings and trace whatever the machine's thread timing (issue 31).

Why hand over at every shared-memory access rather than only where a program waits: the cores of an LNC-2 pair run
at the same time, so two programs' k-th DMAs happen at about the same moment. Running one program to its first wait
before the other starts would order every access of program 0 before program 1's, an order the hardware gives
only by chance: a kernel whose programs both clear a shared output and then store their own rows, with no barrier
between (a race, but one the hardware's timing settles the same way almost always), lost program 0's rows under
program 1's clearing. Taking turns access by access orders such accesses as the hardware's timing does; what
happens between two accesses of one program (its compute on its own SBUF and PSUM) is invisible to the other.

A waiting program checks its condition only when its turn comes back, so a wait that can never be met (a
deadlock: every program still running waits, and a whole round passes without any of them getting further) is
known without a timer: :meth:`Turns.stuck`.
"""

from __future__ import annotations

import threading


class Turns:
    """The turn of ``n`` programs (ids ``0 .. n-1``); program 0 runs first."""

    def __init__(self, n: int) -> None:
        self._cond = threading.Condition()
        self._n = n
        self._holder: int | None = 0
        self._ended: set[int] = set()
        # waits that found their condition unmet since a program last got further (a new wait or a met one)
        self._idle = 0

    def begin(self, program: int) -> None:
        """Block until ``program``'s first turn (a program thread calls it before running the kernel)."""
        with self._cond:
            self._cond.wait_for(lambda: self._holder == program)

    def end(self, program: int) -> None:
        """``program`` has returned or raised: the next program still running gets the turn."""
        with self._cond:
            self._ended.add(program)
            self._idle = 0  # (its end is news to a peer waiting for it)
            self._hand_over(program)

    def wait(self, program: int, progressed: bool) -> None:
        """``program``'s wait is not met yet: let the next running program go, and block until the turn comes back
        (at once if no other program runs). ``progressed``: this is the wait's first check (the program got here
        since its last turn, which may let a peer get further); otherwise the check is one more idle one."""
        with self._cond:
            self._idle = 0 if progressed else self._idle + 1
            self._hand_over(program)
            self._cond.wait_for(lambda: self._holder == program)

    def step(self, program: int) -> None:
        """``program`` is about to reach shared memory: the next program still running goes first, up to its own
        next access (or wait, or end); then ``program`` goes on. A step is progress (a waiting peer may now get
        further). Returns at once when no other program runs: a wait that got further, met once the turn is back."""
        self.wait(program, progressed=True)

    def stuck(self) -> bool:
        """Whether every program still running has checked its wait, unmet, since any of them last got further (a
        deadlock): read by the program holding the turn, after an unmet check that was not its first."""
        with self._cond:
            return self._idle >= self._n - len(self._ended)

    def _hand_over(self, program: int) -> None:
        """The turn goes to the next program after ``program``, in cyclic program order, that has not ended
        (``program`` itself if it is the only one left; nobody once all have ended). Called with the lock held."""
        nxt = None
        for k in range(1, self._n + 1):
            p = (program + k) % self._n
            if p not in self._ended:
                nxt = p
                break
        self._holder = nxt
        self._cond.notify_all()
