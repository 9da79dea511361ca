"""OS-level isolation for hostile candidate code: a pre-forked, namespaced, seccomp-filtered sandbox.

Public API::

    probe() -> IsolationReport                       # what this machine allows (``nkieval doctor``)
    SandboxPool(handler, *, policy, unsafe_no_sandbox=False)
        .run(request: bytes, *, timeout_s, hide=(), on_part=None) -> SandboxResult
    send_part(data: bytes) -> bool                   # in a handler: stream a part to the judge ahead of the result
        .close()  /  with SandboxPool(...) as pool: ...

The handler's module may also define ``prepare()``: each worker calls it once, sandboxed, before its request
arrives (request-independent work taken off the caller's wait; ``_setup.Handler``).

See docs/security.md for the threat model and every layer.
"""

from nkieval.review.isolation._worker import send_part
from nkieval.review.isolation.pool import (
    CHECKS,
    ENV_ALLOW_NO_SANDBOX,
    IsolationReport,
    PartHandlerError,
    SandboxBroken,
    SandboxPolicy,
    SandboxPool,
    SandboxResult,
    SandboxUnavailable,
    Status,
    probe,
)

__all__ = [
    "CHECKS",
    "ENV_ALLOW_NO_SANDBOX",
    "IsolationReport",
    "PartHandlerError",
    "SandboxBroken",
    "SandboxPolicy",
    "SandboxPool",
    "SandboxResult",
    "SandboxUnavailable",
    "Status",
    "probe",
    "send_part",
]
