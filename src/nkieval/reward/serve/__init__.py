"""``nkieval serve``: the HTTP reward service (docs/reward.md, "Service").

:mod:`~nkieval.reward.serve.store` (SQLite, WAL), :mod:`~nkieval.reward.serve.service` (admission, backend,
metrics), :mod:`~nkieval.reward.serve.app` (FastAPI), :mod:`~nkieval.reward.serve.client` (a dependency-free
Python client), :mod:`~nkieval.reward.serve.cli` (the command). FastAPI and uvicorn are the optional extra
``serve``; the client needs neither.
"""
