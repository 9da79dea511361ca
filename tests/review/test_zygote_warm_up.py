"""The zygotes' warm-ups pay, once, for every import a request would otherwise pay for in each forked child.

A child forked from a warmed zygote that loads a candidate's kernel entry (what every trace and every old-pipeline
case does first) must import no module of nkieval's own: each such import costs every request again (the Beta-1
front end, which ``_kernel_entry`` tells kernels apart with, was ~9 ms of a ~20 ms trace request)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from nkieval.review.tracing import KNOWN_GOOD_KERNEL


@pytest.mark.parametrize("warm_up", ["nkieval.review.tracer:warm_up", "nkieval.review.zygote:_warm_up"])
def test_loading_a_kernel_entry_after_the_warm_up_imports_nothing_of_nkieval(tmp_path, warm_up):
    cand = tmp_path / "candidate.py"
    cand.write_text(KNOWN_GOOD_KERNEL)
    module, fn = warm_up.split(":")
    code = textwrap.dedent(f"""
        import importlib, sys
        getattr(importlib.import_module({module!r}), {fn!r})()
        from nkieval.review.child import _kernel_entry
        before = set(sys.modules)
        _kernel_entry({str(cand)!r}, "known_good")
        print(sorted(m for m in set(sys.modules) - before if m.startswith("nkieval")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"imported after the warm-up: {out.stdout.strip()}"


def test_the_tracers_standby_preparation_leaves_programs_as_they_were(tmp_path):
    # a standby tracer worker records a kernel of its own before its request (``tracer.prepare``): the candidate's
    # programs recorded after it must be the very bytes a worker without it records
    cand = tmp_path / "candidate.py"
    cand.write_text(KNOWN_GOOD_KERNEL)
    code = textwrap.dedent(f"""
        from nkieval import frontends
        frontends.install(force=True)
        from nkieval.review import tracer
        from nkieval.review.child import _kernel_entry
        from nkieval.sim.options import SimOptions
        from nkieval.sim.program import ArgSpec, record_program
        entry = _kernel_entry({str(cand)!r}, "known_good")
        def rec():
            opts = SimOptions.from_env(max_instructions=1000, record_trace=False)
            return record_program(entry.fn, [ArgSpec((128, 64), "bfloat16")], {{}}, target="trn2", options=opts,
                                  defer=True).program.to_json()
        first = rec()
        tracer.prepare()
        tracer.prepare()
        print(first == rec() and len(first) > 100)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"
