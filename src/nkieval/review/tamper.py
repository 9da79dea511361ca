"""Catching a candidate that reaches for the harness while it is traced, through Python's audit hooks (PEP 578).

Trace, then execute makes such attempts useless — the tracer holds no data, its outputs and trace are not the
judge's — but an attempt is still a reward hack, and a policy should earn nothing for one, not the score of the
honest kernel under the payload. The interpreter raises an audit event for each operation that reaches outside
a kernel's business (frame and object-graph introspection, code compiled at run time, files, processes,
sockets, foreign functions). Ours never does those from the candidate's own lines, so:

* introspection events (``sys._getframe``, ``gc.get_objects`` …, ``compile``/``exec``, ``open``, restricted
  attributes such as ``__globals__``, imports of modules a kernel has no business with) count when the line
  that raised them is the candidate's;
* process, socket, foreign-function and signal events count whenever the candidate's code is on the stack
  (the sandbox blocks most of them anyway; this names them).

The first such event stops the operation (the hook raises :class:`TamperError`) and is reported with the
candidate's line. Audit hooks cannot be removed from Python, and finding the record to erase it takes one of
the events watched here.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from nkieval.review.integrity import FORBIDDEN_MODULES

#: events that count when the candidate's own line raised them
_INTROSPECTION = ("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys.addaudithook",
                  "gc.get_objects", "gc.get_referrers", "gc.get_referents", "compile", "exec", "open",
                  "object.__getattr__", "object.__setattr__", "object.__delattr__", "code.__new__",
                  "function.__new__", "marshal.", "pickle.", "shutil.", "tempfile.", "glob.", "os.listdir",
                  "os.scandir", "os.walk", "os.chdir", "os.remove", "os.rename", "os.mkdir")
#: events that count whenever the candidate's code is on the stack
_OUTSIDE = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
            "os.killpg", "os.putenv", "os.unsetenv", "subprocess.", "socket.", "ctypes.", "mmap.", "signal.",
            "pty.", "webbrowser.", "urllib.", "http.", "ftplib.", "smtplib.", "resource.setrlimit", "sys.remote_exec")

#: attribute reads that reach nothing a candidate could not reach without an audited step first: a frame's code
#: and line (a frame is had only through ``sys._getframe`` or ``tb_frame`` / ``gi_frame``, which are watched)
_HARMLESS_ATTRIBUTES = frozenset({"f_code", "f_lineno"})


class TamperError(PermissionError):
    """Raised into the candidate's operation when it reaches for the harness."""


class TamperWatch:
    """An audit hook that records the first reach outside the kernel by code in ``candidate`` (a file path)."""

    def __init__(self, candidate: str) -> None:
        self.candidate = os.path.abspath(candidate)
        self.events: list[dict[str, Any]] = []
        self._busy = threading.local()
        self._files: dict[str, bool] = {}  # code file name -> whether it is the candidate's
        #: event name -> its kind (``_kind``): the hook runs on every audited event (the simulator raises two per
        #: instruction), and a lookup is cheaper than matching the prefixes each time
        self._kinds: dict[str, int] = {}
        #: id -> the globals of every module loaded before the candidate (the harness's, the simulator's, NumPy's);
        #: the dicts are held, so an id is never reused by a later dict
        self._trusted: dict[int, dict[str, Any]] = {}
        #: the globals of the module that raises an event for every simulated instruction (``nkieval.sim.context``:
        #: its kernel-line lookup calls ``sys._getframe``), told by identity alone: ``id()`` is itself an audited
        #: event, which would run the hook once more for each one it serves
        self._hot: Any = None

    def install(self) -> None:
        """Start watching; every module loaded by now is the harness's. A frame whose globals are such a module's
        runs that module's code, never the candidate's: binding code to other globals takes ``compile`` /
        ``exec``, ``function.__new__``, ``code.__new__`` or a ``__code__`` assignment, each an event watched here
        (reading a harness function's ``__globals__`` is not audited, but running code with them needs one of
        those). So the simulator's frames (it looks up the
        kernel line, an audited ``sys._getframe``, for every instruction) are told apart by their globals alone,
        without reading their code (itself an audited attribute)."""
        self._trusted = harness_globals()
        context = sys.modules.get("nkieval.sim.context")
        self._hot = context.__dict__ if context is not None else None
        sys.addaudithook(self._make_hook())

    def _make_hook(self) -> Callable[[str, tuple[Any, ...]], None]:
        """The hook, with what it reads bound once: it runs on every audited event, two for each simulated
        instruction (the simulator's kernel-line lookup), so its cost is a share of every recording."""
        kinds, busy, trusted, check, getframe = self._kinds, self._busy, self._trusted, self._check, sys._getframe
        hot = self._hot

        def hook(event: str, args: tuple[Any, ...]) -> None:
            kind = kinds.get(event)
            if kind is None:
                kind = _kind(event)
                if len(kinds) < _KINDS_KEPT:
                    kinds[event] = kind
            if kind == _IGNORED:
                return
            if kind == _ATTRIBUTE_READ and args[1] in _HARMLESS_ATTRIBUTES:
                return  # (the simulator reads the code of the frames it walks, about once per instruction)
            if getattr(busy, "on", False):
                return
            busy.on = True
            try:
                if kind != _OUTSIDE_EVENT and event != "import":
                    g = getframe(1).f_globals  # (the line that raised the event; 0 is this hook)
                    # (no method of ``g`` is called: a candidate's globals could hold keys that run its code)
                    if g is hot or trusted.get(id(g)) is g:
                        return  # raised by the harness's own code: the simulator looking up a kernel line
                found = check(event, args, kind == _OUTSIDE_EVENT)
            finally:
                busy.on = False
            if found is not None:
                self.events.append(found)
                raise TamperError(f"{event} is not allowed in a kernel ({found['location']})")

        return hook

    def _is_candidate_frame(self, f: Any) -> bool:
        g = f.f_globals
        if self._trusted.get(id(g)) is g:
            return False
        return self._is_candidate(f.f_code.co_filename)

    def _is_candidate(self, filename: str) -> bool:
        known = self._files.get(filename)
        if known is None:
            known = self._files[filename] = os.path.abspath(filename) == self.candidate
        return known

    def _check(self, event: str, args: tuple[Any, ...], outside: bool) -> dict[str, Any] | None:
        f = sys._getframe(2)  # (0: _check, 1: the hook; 2: the line that raised the event)
        caller = f
        if event == "import":
            root = str(args[0] or "").split(".")[0] if args else ""
            if root not in FORBIDDEN_MODULES:
                return None
        while f is not None:
            if self._is_candidate_frame(f):
                if outside or f is caller:
                    return {"event": event, "location": f"candidate.py:{f.f_lineno}",
                            "detail": _detail(args)}
                return None
            if not outside:
                return None
            f = f.f_back
        return None


class _Snapshot:
    """The harness's module globals as the sandbox's zygote had them before it forked the tracer's worker."""

    def __init__(self) -> None:
        self.table = _walk(sys.modules.values())
        self.count = len(sys.modules)
        self.last = next(reversed(sys.modules), None)


_SNAPSHOT: list[_Snapshot | None] = [None]


def snapshot_harness_modules() -> None:
    """Take the table of the loaded modules' globals now, in the sandbox's zygote (``tracer.warm_up``), so that a
    worker forked from it does not walk every module again for each trace: reading a module's ``__dict__`` writes
    its reference count, so the walk copied a page for about each of the 600 modules (a large part of the
    worker's page faults, counted in every request's start-up)."""
    _SNAPSHOT[0] = _Snapshot()


def harness_globals() -> dict[int, dict[str, Any]]:
    """id -> globals of every module loaded now: the zygote's snapshot (its own table, which this process may
    extend: a forked worker's copy) plus what was loaded after it, found at the end of ``sys.modules``'s insertion
    order; a full walk where the modules do not extend the snapshot's in order (one was removed, or none taken)."""
    snap = _SNAPSHOT[0]
    if snap is not None and snap.last is not None and snap.last in sys.modules:
        added: list[Any] = []
        for name, module in reversed(sys.modules.items()):
            if name == snap.last:
                break
            added.append(module)
        if snap.count + len(added) == len(sys.modules):
            snap.table.update(_walk(added))
            return snap.table
    return _walk(list(sys.modules.values()))


def _walk(modules: Any) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for module in modules:
        if isinstance(module, types.ModuleType):
            g = module.__dict__
            out[id(g)] = g
    return out


#: the kinds of audit events: not watched; watched when the candidate's own line raised it; watched whenever the
#: candidate's code is on the stack; an attribute read (watched, unless of a harmless attribute)
_IGNORED, _INTROSPECTION_EVENT, _OUTSIDE_EVENT, _ATTRIBUTE_READ = range(4)
#: event names whose kind is kept (code can raise events of any name with ``sys.audit``)
_KINDS_KEPT = 4096


def _kind(event: str) -> int:
    if event == "object.__getattr__":
        return _ATTRIBUTE_READ
    if event.startswith(_OUTSIDE):
        return _OUTSIDE_EVENT
    if event.startswith(_INTROSPECTION) or event == "import":
        return _INTROSPECTION_EVENT
    return _IGNORED


def _detail(args: tuple[Any, ...]) -> str:
    try:
        return repr(args)[:200]
    except Exception:  # an argument whose repr raises
        return "?"
