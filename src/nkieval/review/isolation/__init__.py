"""OS-level isolation for hostile candidate code: a pre-forked, namespaced, seccomp-filtered sandbox.

Public API::

    probe() -> IsolationReport                       # what this machine allows (``nkieval doctor``)
    SandboxPool(handler, *, policy, unsafe_no_sandbox=False)
        .run(request: bytes, *, timeout_s) -> SandboxResult
        .close()  /  with SandboxPool(...) as pool: ...

See docs/security.md for the threat model and every layer.
"""

from nkieval.review.isolation.pool import (
    CHECKS,
    ENV_ALLOW_NO_SANDBOX,
    IsolationReport,
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
    "SandboxBroken",
    "SandboxPolicy",
    "SandboxPool",
    "SandboxResult",
    "SandboxUnavailable",
    "Status",
    "probe",
]
