"""A Python client for ``nkieval serve`` (standard library only: a trainer's reward worker needs nothing more).

>>> c = RewardClient("http://127.0.0.1:8000")                        # doctest: +SKIP
>>> c.score("vector_add", response, seed=7)["reward"]                 # doctest: +SKIP
>>> [r["reward"] for r in c.score_many([("vector_add", a), ("rmsnorm", b)])]   # doctest: +SKIP

A 429 is waited out (its ``Retry-After``) and sent again, as is a connection refused while the service
restarts: requests are idempotent (their id is the request's hash, or ``request_id``), so a retry never
runs a review twice.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


class ServiceError(RuntimeError):
    """The service answered an error (``status`` is the HTTP status; 400/401/413/422 are the caller's)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


class RewardClient:
    """``base_url`` of the service; ``token`` its bearer token; ``timeout_s`` for the whole of one call."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, token: str | None = None,
                 timeout_s: float = 900.0, poll_s: float = 0.5) -> None:
        self.base = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.poll_s = poll_s

    def _call(self, method: str, path: str, body: Any = None, deadline: float | None = None) -> tuple[int, Any]:
        deadline = deadline or time.monotonic() + self.timeout_s
        data = None if body is None else json.dumps(body).encode()
        while True:
            req = urllib.request.Request(self.base + path, data=data, method=method)
            req.add_header("content-type", "application/json")
            if self.token:
                req.add_header("authorization", f"Bearer {self.token}")
            try:
                with urllib.request.urlopen(req, timeout=max(1.0, deadline - time.monotonic())) as r:
                    raw = r.read()
                    ctype = r.headers.get("content-type", "")
                    return r.status, json.loads(raw) if "json" in ctype else raw.decode()
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")
                if e.code == 429 and time.monotonic() < deadline:
                    time.sleep(min(float(e.headers.get("retry-after") or 1), max(0.0, deadline - time.monotonic())))
                    continue
                raise ServiceError(e.code, detail) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                if time.monotonic() >= deadline:
                    raise ServiceError(0, f"the service did not answer: {e}") from None
                time.sleep(self.poll_s)

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")[1]

    def metrics(self) -> str:
        return self._call("GET", "/metrics")[1]

    def submit(self, task: str, response: str, **kw: Any) -> str:
        """Send one request; its id (the result comes from :meth:`result`)."""
        return self._call("POST", "/review", {"task": task, "response": response, **kw})[1]["id"]

    def submit_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        return self._call("POST", "/batch", {"items": list(items)})[1]["ids"]

    def result(self, rid: str, wait_s: float | None = None) -> dict[str, Any]:
        """The result of request ``rid``, waiting for it (up to ``wait_s``; default the client's timeout)."""
        deadline = time.monotonic() + (self.timeout_s if wait_s is None else wait_s)
        while True:
            left = max(0.0, deadline - time.monotonic())
            _, body = self._call("GET", f"/results/{rid}?wait={min(30.0, left):.1f}", deadline=deadline + 30)
            if body["state"] == "done":
                return body["result"]
            if time.monotonic() >= deadline:
                raise ServiceError(0, f"request {rid} is not done after {wait_s} s (state {body['state']})")

    def score(self, task: str, response: str, **kw: Any) -> dict[str, Any]:
        """Review one response and wait for its result (a ``RewardResult`` as a dict)."""
        return self.result(self.submit(task, response, **kw))

    def score_many(self, items: Sequence[Mapping[str, Any] | Sequence[Any]], **kw: Any) -> list[dict[str, Any]]:
        """Review a batch ((task, response) pairs or request dicts) and wait for every result, in order."""
        reqs = [dict(x) if isinstance(x, Mapping) else {"task": x[0], "response": x[1]} for x in items]
        ids = self.submit_many([{**kw, **r} for r in reqs])
        return [self.result(i) for i in ids]
