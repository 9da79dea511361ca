"""The service's durable record: every accepted request and its result, in SQLite (WAL), keyed by request id.

A request is written (state ``queued``) and committed *before* the service answers 202, and its result is
committed when the review ends (state ``done``). After a crash (``kill -9``) the service reopens the file and
runs again every request not ``done``: nothing acknowledged is lost, and a request id has one row, so
nothing is duplicated. ``synchronous=FULL``: a commit is on disk when it returns.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done')),
    job TEXT NOT NULL,
    result TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS requests_state ON requests(state);
"""


@dataclass(frozen=True)
class Row:
    id: str
    state: str
    job: dict[str, Any]
    result: dict[str, Any] | None
    attempts: int


class Store:
    """One SQLite file, used from many threads (one connection behind a lock: writes are short)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, rid: str, job: dict[str, Any]) -> tuple[Row, bool]:
        """Insert a queued request unless the id exists; (its row, whether it is queued anew).

        A request whose stored result is a harness error is queued again (a retry is a new attempt)."""
        return self.add_many([(rid, job)])[0]

    def add_many(self, entries: list[tuple[str, dict[str, Any]]]) -> list[tuple[Row, bool]]:
        """:meth:`add` for several requests in one transaction (all or nothing on disk)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                out = []
                for rid, job in entries:
                    cur = self._db.execute(
                        "INSERT OR IGNORE INTO requests (id, state, job, created) VALUES (?, 'queued', ?, ?)",
                        (rid, json.dumps(job), time.time()))
                    if cur.rowcount == 1:
                        out.append((Row(rid, "queued", job, None, 0), True))
                        continue
                    row = self._get(rid)
                    assert row is not None
                    if row.state == "done" and (row.result or {}).get("status") == "harness-error":
                        self._db.execute("UPDATE requests SET state='queued', result=NULL, finished=NULL WHERE id=?",
                                         (rid,))
                        out.append((Row(rid, "queued", row.job, None, row.attempts), True))
                    else:
                        out.append((row, False))
                self._db.execute("COMMIT")
                return out
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def running(self, rid: str) -> None:
        with self._lock:
            self._db.execute("UPDATE requests SET state='running', attempts=attempts+1 WHERE id=? AND state!='done'",
                             (rid,))

    def finish(self, rid: str, result: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute("UPDATE requests SET state='done', result=?, finished=? WHERE id=?",
                             (json.dumps(result, allow_nan=False, default=str), time.time(), rid))

    def get(self, rid: str) -> Row | None:
        with self._lock:
            return self._get(rid)

    def _get(self, rid: str) -> Row | None:
        r = self._db.execute("SELECT id, state, job, result, attempts FROM requests WHERE id=?", (rid,)).fetchone()
        if r is None:
            return None
        return Row(r[0], r[1], json.loads(r[2]), json.loads(r[3]) if r[3] else None, int(r[4]))

    def unfinished(self) -> list[Row]:
        """Requests accepted and not done, oldest first (what a restart runs again)."""
        with self._lock:
            rows = self._db.execute("SELECT id FROM requests WHERE state != 'done' ORDER BY created, rowid").fetchall()
            return [x for x in (self._get(r[0]) for r in rows) if x is not None]

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {s: n for s, n in self._db.execute("SELECT state, COUNT(*) FROM requests GROUP BY state")}
