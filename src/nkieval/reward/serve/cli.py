"""``nkieval serve``: run the HTTP reward service (docs/reward.md, "Service")."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

DEFAULT_DB = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nkieval" / "serve.sqlite3"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind (localhost by default)")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--db", type=click.Path(dir_okay=False), default=str(DEFAULT_DB), show_default=True,
              help="SQLite file of requests and results (kept across restarts)")
@click.option("--workers", type=click.IntRange(1, 1024), default=None,
              help="reviews at once (default: the CPU count; with --ray-address, the cluster's CPUs)")
@click.option("--max-queue", type=click.IntRange(1, 1_000_000), default=None,
              help="requests accepted and not finished before 429 (default: 8 x workers)")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1, 86400), default=900.0, show_default=True,
              help="time limit per review in seconds (a request may ask for less); keep it above the review's own "
                   "worst case, since a review stopped by it is a harness-error, not the candidate's fail")
@click.option("--case-timeout", "case_timeout_s", type=click.FloatRange(0.1, 3600), default=None,
              help="lower every task's per-case time limit to this (a candidate past it fails: timeout)")
@click.option("--token", default=None, envvar="NKIEVAL_SERVE_TOKEN",
              help="bearer token every request but /health must carry (env NKIEVAL_SERVE_TOKEN)")
@click.option("--task-root", "task_roots", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="also serve the task directories under DIR (repeatable; default: built-in tasks only)")
@click.option("--ray-address", default=None, help="run reviews on this Ray cluster ('auto': the one this node joined)")
def serve(host: str, port: int, db: str, workers: int | None, max_queue: int | None, timeout_s: float,
          token: str | None, task_roots: tuple[str, ...], ray_address: str | None,
          case_timeout_s: float | None) -> None:
    """Serve rewards over HTTP: POST /review, POST /batch, GET /results/{id}, /health, /metrics."""
    try:
        import uvicorn

        from nkieval.reward.serve.app import create_app
    except ImportError as e:
        click.echo(f"error: nkieval serve needs the 'serve' extra (pip install 'nkieval[serve]'): {e}", err=True)
        sys.exit(2)
    from nkieval.reward.serve.service import RewardService

    if host not in LOCAL_HOSTS and not token:
        click.echo(f"warning: serving on {host} without --token: anyone who can reach it can submit code", err=True)
    service = RewardService(db, workers=workers, max_queue=max_queue, timeout_s=timeout_s, ray_address=ray_address,
                            case_timeout_s=case_timeout_s, task_roots=task_roots)
    sizes = (f"{service.workers} worker(s), queue {service.max_queue}" if ray_address is None or workers else
             "a Ray actor per CPU of the cluster")
    click.echo(f"nkieval serve: http://{host}:{port} ({sizes}, db {db})", err=True)
    uvicorn.run(create_app(service, token=token), host=host, port=port, log_level="warning", access_log=False)
