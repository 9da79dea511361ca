"""The HTTP front of the reward service (FastAPI on uvicorn; docs/reward.md, "Service").

Why FastAPI + uvicorn: the RL community's sandbox services (SandboxFusion among them) use exactly this stack,
both are widely used and maintained, the request models validate input into 422 answers with the field
named, and the service's own work happens in review processes, so one asyncio process only admits, stores
and answers. The review itself never runs in this process: candidates run in the review's OS sandbox, the
judging in the worker processes.

=========================  ======================================================================
endpoint                   answers
=========================  ======================================================================
``POST /review``           202 ``{id, state}``; 200 with ``result`` when done within ``?wait=S``
``POST /batch``            202 ``{ids, states}`` (all admitted or none); 200 with ``results`` if
                           every one is done within ``?wait=S``
``GET /results/{id}``      200 ``{id, state, result?}``; 404 unknown id
``GET /health``            200 ``{status, backend, workers, queue_depth, ...}`` (no token needed)
``GET /metrics``           200 Prometheus text format
errors                     400 bad request (unknown task/target), 401 missing/wrong bearer token,
                           413 text too large, 422 malformed body, 429 queue full (Retry-After)
=========================  ======================================================================
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from nkieval.reward.serve.service import BadRequest, QueueFull, RewardService, TooLarge

#: Longest ``?wait=`` a request may ask for (seconds).
MAX_WAIT_S = 600.0


class ReviewRequest(BaseModel):
    task: str = Field(description="built-in task id or task directory on the server")
    response: str | None = Field(None, description="a model's answer (the kernel is taken from its fenced code)")
    source: str | None = Field(None, description="the kernel's source as is (instead of response)")
    seed: int | None = None
    target: str | None = None
    request_id: str | None = Field(None, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$",
                                   description="idempotency key (default: the request's hash)")
    full_report: bool = False
    feedback: bool = Field(True, description="false: a brief review, the same reward without findings "
                                             "(docs/reward.md, \"Brief rewards\")")
    shaping: str = "tiered"
    timeout_s: float | None = Field(None, gt=0)


class BatchRequest(BaseModel):
    items: list[ReviewRequest] = Field(min_length=1, max_length=4096)


def create_app(service: RewardService, *, token: str | None = None) -> FastAPI:
    """The FastAPI application over ``service`` (started and closed with the app's lifespan)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(service.start)
        try:
            yield
        finally:
            await asyncio.to_thread(service.close)

    app = FastAPI(title="nkieval reward service", lifespan=lifespan)

    def auth(request: Request) -> None:
        if token is None:
            return
        got = request.headers.get("authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})

    async def admit(reqs: list[ReviewRequest]) -> list[Any]:
        try:
            return await asyncio.to_thread(service.submit_many, [r.model_dump() for r in reqs])
        except BadRequest as e:
            raise HTTPException(400, str(e)) from e
        except TooLarge as e:
            raise HTTPException(413, str(e)) from e
        except QueueFull as e:
            raise HTTPException(429, str(e), headers={"Retry-After": str(e.retry_after_s)}) from e

    async def settle(rid: str, wait: float) -> dict[str, Any]:
        fut = service.future(rid)
        if fut is not None and wait > 0:
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), timeout=min(wait, MAX_WAIT_S))
            except TimeoutError:
                pass
            await asyncio.sleep(0)  # let the done-callback store the result
        row = await asyncio.to_thread(service.get, rid)
        if row is None:
            raise HTTPException(404, f"no request {rid!r}")
        out: dict[str, Any] = {"id": row.id, "state": row.state}
        if row.state == "done":
            out["result"] = row.result
        return out

    @app.post("/review", dependencies=[Depends(auth)])
    async def review(req: ReviewRequest, wait: float = Query(0.0, ge=0)) -> JSONResponse:
        row = (await admit([req]))[0]
        out = await settle(row.id, wait)
        return JSONResponse(out, status_code=200 if out["state"] == "done" else 202)

    @app.post("/batch", dependencies=[Depends(auth)])
    async def batch(req: BatchRequest, wait: float = Query(0.0, ge=0)) -> JSONResponse:
        rows = await admit(req.items)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(wait, MAX_WAIT_S)
        outs = [await settle(r.id, max(0.0, deadline - loop.time())) for r in rows]
        done = all(o["state"] == "done" for o in outs)
        body: dict[str, Any] = {"ids": [o["id"] for o in outs], "states": [o["state"] for o in outs]}
        if done:
            body["results"] = [o["result"] for o in outs]
        return JSONResponse(body, status_code=200 if done else 202)

    @app.get("/results/{rid}", dependencies=[Depends(auth)])
    async def results(rid: str, wait: float = Query(0.0, ge=0)) -> dict[str, Any]:
        return await settle(rid, wait)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return service.health()

    @app.get("/metrics", dependencies=[Depends(auth)])
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(service.prometheus(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return app
