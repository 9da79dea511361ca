"""Mutants the task's precision recipe permits (issue 28): a surviving downgrade of an operand's loaded tile to
the recipe's compute dtype, within the numerics standard's bound on every case, is listed on its own; every
other surviving downgrade (a value computed on chip, an accumulator, an output, a recipe without a coarser
compute dtype, an error above the bound, a case not judged) stays a survivor."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from nkieval.tasks import load_task
from nkieval.tasks.audit.mutate import mutants
from nkieval.tasks.audit.permitted import loaded_operand, permitted_by_recipe
from nkieval.tasks.audit.runner import run_candidate

_SRC = '''
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(x, g, w):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    gt = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=gt[0:128], src=g[0:128].reshape((128, 1)))
    xt = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xt[0:128], src=x[0:128])
    nisa.tensor_scalar(dst=xt[0:128], data=xt[0:128], op0=nl.multiply, operand0=gt[0:128])
    acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    local = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=local[0:128], src=out[0:128])
    old = nl.load(w[0:128], dtype=nl.float32)
    nisa.activation(dst=acc[0:128], op=nl.copy, data=xt[0:128], dtype=nl.float32)
    return out
'''


def _operands(src: str) -> dict[str, str | None]:
    """For every ``nl.float32`` of ``src``: the line's first word -> the operand its tile holds."""
    tree = ast.parse(src)
    lines = src.splitlines()
    return {lines[n.lineno - 1].split()[0] + f"@{n.lineno}": loaded_operand(tree, n) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr == "float32"}


def test_only_a_tile_that_holds_an_input_as_loaded_is_an_operand() -> None:
    got = {k.split("@")[0]: v for k, v in _operands(_SRC).items()}
    assert got == {
        "out": None,  # the output (HBM): the recipe's output dtype
        "gt": "g",  # loaded from the input g and only read afterwards
        "xt": None,  # loaded from x, then scaled in place: a value computed on chip
        "acc": None,  # a PSUM accumulator
        "local": None,  # a copy of the kernel's own output, not an input
        "old": "w",  # the old API's load of an input
        "nisa.activation(dst=acc[0:128],": None,  # a dtype given to an instruction
    }


def test_rmsnorm_gemm_expert_downgrades_name_only_its_loaded_inputs() -> None:
    task = load_task("rmsnorm_gemm")
    ms, _ = mutants(task.solution_file.read_text(), max_mutants=100, kinds=("dtype_downgrade",))
    assert len(ms) >= 6
    named = {m.line: m.operand for m in ms if m.operand}
    src = task.solution_file.read_text().splitlines()
    assert named == {32: "gamma", 38: "x"}, named
    assert "g = nl.ndarray" in src[32 - 1] and "gamma[k0" in src[33 - 1]  # the tile gamma is loaded into


@pytest.fixture(scope="module")
def gamma_bf16() -> tuple:
    """rmsnorm_gemm's gamma tile in bf16 (the audit's M12), reviewed on the public shape, both families."""
    task = load_task("rmsnorm_gemm")
    ms, _ = mutants(task.solution_file.read_text(), max_mutants=100, kinds=("dtype_downgrade",))
    (m,) = [m for m in ms if m.operand == "gamma"]
    public = dataclasses.replace(task, shapes=task.public_shapes, cuda_file=None)
    return task, m, run_candidate(public, m.source, m.id, seed=0)


def test_gamma_tile_in_bf16_passes_and_the_recipe_permits_it(gamma_bf16) -> None:
    task, m, o = gamma_bf16
    assert o.passed and len(o.margins) == 2 and all(0 < v <= 1 for v in o.margins.values()), o.margins
    why = permitted_by_recipe(task, m.operand, m.kind, o.margins)
    assert why is not None and "`gamma`" in why and "bf16" in why


def test_the_same_survivor_is_not_permitted_where_the_recipe_or_the_bound_does_not_allow_it(gamma_bf16) -> None:
    task, m, o = gamma_bf16
    recipe = {k: v for k, v in task.numerics.recipe.items() if k != "compute"}
    fp32 = dataclasses.replace(task, numerics=dataclasses.replace(task.numerics, recipe=recipe))
    assert permitted_by_recipe(fp32, m.operand, m.kind, o.margins) is None  # no coarser compute dtype declared
    first = next(iter(o.margins))
    assert permitted_by_recipe(task, m.operand, m.kind, {**o.margins, first: 1.3}) is None  # above the bound
    assert permitted_by_recipe(task, m.operand, m.kind, {**o.margins, first: None}) is None  # a case not judged
    assert permitted_by_recipe(task, m.operand, m.kind, {}) is None
    assert permitted_by_recipe(task, "w", m.kind, o.margins) is None  # w is stored in bf16 already
    assert permitted_by_recipe(task, None, m.kind, o.margins) is None  # not an operand's loaded tile
    assert permitted_by_recipe(task, m.operand, "const_perturb", o.margins) is None
