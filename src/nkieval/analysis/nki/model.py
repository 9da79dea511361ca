"""A read-only model of an NKI source file, built once with the stdlib ``ast`` and shared by all rules.

Rules ask questions such as "which calls sit inside which loops", "which tiles were allocated
uninitialised", "was this name read before it was written". Answering them once here keeps every
rule small and keeps analysis of a file well under the review's 50 ms budget. The analysed code
is never imported or executed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Literal

from nkieval.hardware import Target

ApiGeneration = Literal["current", "beta1", "mixed", "unknown"]
AccessKind = Literal["read", "write", "meta", "escape", "define"]

# Canonical short prefixes for the modules rules care about; longest dotted prefix wins.
_CANON: dict[str, str] = {
    "nki": "nki",
    "neuronxcc.nki": "nki",
    "nki.language": "nl",
    "neuronxcc.nki.language": "nl",
    "nki.isa": "nisa",
    "neuronxcc.nki.isa": "nisa",
    "nki.typing": "nt",
    "neuronxcc.nki.typing": "nt",
    "numpy": "np",
    "torch": "torch",
    "jax": "jax",
    "jax.numpy": "jnp",
    "cupy": "cupy",
    "scipy": "scipy",
}

def walk(node: ast.AST) -> list[ast.AST]:
    """``walk(node)`` as a list, in the same order, computed once per node.

    The rules ask many questions of the same subtrees (the module, each kernel function, each
    loop body); walking them again for every question was most of the analysis time. The list is
    kept on the node itself, so it lives exactly as long as the tree (the model is read-only).
    """
    nodes: list[ast.AST] | None = getattr(node, "_nkieval_walk", None)
    if nodes is None:
        nodes = [node]
        i = 0
        while i < len(nodes):  # breadth first, as ast.walk yields them
            nodes.extend(children(nodes[i]))
            i += 1
        node._nkieval_walk = nodes  # type: ignore[attr-defined]
    return nodes


def children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` as a list, computed once per node (every walk above it reads it)."""
    ch: list[ast.AST] | None = getattr(node, "_nkieval_children", None)
    if ch is None:
        ch = list(ast.iter_child_nodes(node))
        node._nkieval_children = ch  # type: ignore[attr-defined]
    return ch


_JIT_DECORATORS = {"nki.jit", "nki.baremetal", "nki.benchmark", "nki.profile", "nki.compiler.skip_middle_end_transformations"}
ALLOC_FUNCS = {"nl.ndarray", "nl.zeros", "nl.ones", "nl.full", "nl.zeros_like", "nl.empty_like", "nl.rand",
               "nl.shared_identity_matrix"}
UNINITIALISED_ALLOCS = {"nl.ndarray", "nl.empty_like"}
META_ATTRS = {"shape", "dtype", "ndim", "size", "buffer", "name", "itemsize", "strides", "offset"}
VIEW_METHODS = {"reshape", "ap", "slice", "select", "permute", "broadcast", "expand_dim", "squeeze_dim",
                "reshape_dim", "flatten_dims", "rearrange", "view", "reinterpret_cast", "indirect", "vector_select",
                "broadcast_to", "astype"}
WRITE_KWARGS = {"dst", "reduce_res", "dst_idx", "val_dst", "idx_dst", "dst_scale"}
# nisa calls whose first positional argument is not a destination.
_NISA_NO_DST = {"nisa.core_barrier", "nisa.get_nc_version", "nisa.get_nc_sub_version", "nisa.set_rng_seed",
                "nisa.rand_set_state", "nisa.register_alloc", "nisa.register_load", "nisa.sendrecv"}
LOOP_KINDS = {"range": "range", "nl.affine_range": "affine_range", "nl.sequential_range": "sequential_range",
              "nl.static_range": "static_range", "nl.dynamic_range": "dynamic_range"}
_TILE_SIZE_FACTS = {"pmax": "partitions", "gemm_stationary_fmax": "gemm_stationary_fmax",
                    "gemm_moving_fmax": "tile_size_gemm_moving_fmax", "psum_fmax": "tile_size_gemm_moving_fmax",
                    "psum_bank_fmax": "tile_size_gemm_moving_fmax", "bn_stats_fmax": "bn_stats_fmax",
                    "psum_num_banks": "psum_banks"}


class NkiSyntaxError(ValueError):
    """The analysed source is not valid Python; carries the position for the NKI000 finding."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(message)
        self.line = line
        self.col = col


def canonical_module(path: str) -> str:
    """``neuronxcc.nki.language`` → ``nl``, ``numpy.linalg`` → ``np.linalg``, ``os.path`` → ``os.path``."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        if head in _CANON:
            return ".".join([_CANON[head], *parts[cut:]])
    return path


def names_in(node: ast.AST | None) -> set[str]:
    """Every identifier a (sub)expression reads."""
    if node is None:
        return set()
    return {n.id for n in walk(node) if isinstance(n, ast.Name)}


def base_name(node: ast.AST | None) -> str | None:
    """The variable a tensor expression is a view of: ``t[0:r].ap(...)`` → ``t``."""
    while node is not None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Subscript | ast.Starred):
            node = node.value
        elif isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return None
    return None


@dataclass(eq=False)
class Loop:
    """A ``for`` loop; ``kind`` is range/affine_range/sequential_range/static_range/dynamic_range/other."""

    node: ast.For
    kind: str
    targets: set[str]
    start: ast.expr | None
    stop: ast.expr | None
    step: ast.expr | None
    depth: int
    dependent: set[str] = field(default_factory=set)

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass(eq=False)
class CallSite:
    """One call, with the loops around it (outermost first) and its position in program order."""

    node: ast.Call
    qn: str | None
    loops: tuple[Loop, ...]
    order: int
    assigned_to: tuple[str, ...] = ()
    is_statement: bool = False

    @property
    def line(self) -> int:
        return self.node.lineno

    @property
    def col(self) -> int:
        return self.node.col_offset + 1

    def arg(self, name: str, pos: int | None = None) -> ast.expr | None:
        """The argument passed as keyword ``name`` or at position ``pos``."""
        for kw in self.node.keywords:
            if kw.arg == name:
                return kw.value
        if pos is not None and pos < len(self.node.args):
            return self.node.args[pos]
        return None

    def has_kwarg(self, name: str) -> bool:
        return any(kw.arg == name for kw in self.node.keywords)


@dataclass(eq=False)
class Alloc:
    """A tile or tensor created by ``nl.ndarray``/``zeros``/... and bound to a name."""

    name: str
    call: CallSite
    buffer: str
    shape: list[ast.expr] | None
    dtype: str | None
    initialised: bool

    @property
    def line(self) -> int:
        return self.call.line


@dataclass(eq=False)
class Access:
    """A use of a name: read, write (as a destination), meta (``.shape``), escape (passed to
    an unknown function), or define (a plain ``name = ...`` binding)."""

    name: str
    kind: AccessKind
    node: ast.AST
    order: int
    loops: tuple[Loop, ...]

    @property
    def line(self) -> int:
        return getattr(self.node, "lineno", 0)

    @property
    def col(self) -> int:
        return getattr(self.node, "col_offset", -1) + 1


@dataclass(eq=False)
class FunctionModel:
    """Facts about one function of the file."""

    node: ast.FunctionDef
    is_kernel: bool
    params: list[str]
    calls: list[CallSite] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    allocs: list[Alloc] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    value_tensors: set[str] = field(default_factory=set)
    shape_names: set[str] = field(default_factory=set)
    consts: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def uses_nki(self) -> bool:
        return any(c.qn and c.qn.split(".")[0] in ("nl", "nisa") for c in self.calls)

    @property
    def tensor_names(self) -> set[str]:
        """Parameters, allocations and results of ``nl.*``/``nisa.*`` value calls."""
        return set(self.params) | {a.name for a in self.allocs} | self.value_tensors

    def alloc_of(self, name: str) -> Alloc | None:
        """The last allocation bound to ``name`` (None when it was never allocated here)."""
        found = None
        for a in self.allocs:
            if a.name == name:
                found = a
        return found

@dataclass(eq=False)
class ImportRecord:
    module: str  # canonical, e.g. "nl", "os.path"
    raw: str  # as written, e.g. "neuronxcc.nki.language"
    line: int
    col: int


@dataclass(eq=False)
class SourceModel:
    """The parsed file: imports and API generation, module constants, and one model per function."""

    source: str
    filename: str
    tree: ast.Module
    target: Target
    aliases: dict[str, str]
    imports: list[ImportRecord]
    functions: list[FunctionModel]
    module_consts: dict[str, int]

    @property
    def api(self) -> ApiGeneration:
        beta1 = any(i.raw == "neuronxcc.nki" or i.raw.startswith("neuronxcc.nki.") for i in self.imports)
        current = any(i.raw == "nki" or i.raw.startswith("nki.") for i in self.imports)
        if beta1 and current:
            return "mixed"
        return "beta1" if beta1 else "current" if current else "unknown"

    @property
    def kernels(self) -> list[FunctionModel]:
        """Decorated kernels; if none is decorated, every function that calls ``nl``/``nisa``."""
        decorated = [f for f in self.functions if f.is_kernel]
        return decorated or [f for f in self.functions if f.uses_nki]

    @property
    def nki_functions(self) -> list[FunctionModel]:
        """Kernels and their helper sub-kernels (anything that calls ``nl``/``nisa``)."""
        return [f for f in self.functions if f.is_kernel or f.uses_nki]

    def qualname(self, node: ast.AST | None) -> str | None:
        """Canonical dotted name of a Name/Attribute chain (``nl.ndarray``), or None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.aliases.get(node.id, node.id)
        return ".".join([root, *reversed(parts)])

    def int_value(self, node: ast.AST | None, func: FunctionModel | None = None) -> int | None:
        """Value of an integer expression known at analysis time (literals, constants, tile sizes)."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if func is not None and node.id in func.consts:
                return func.consts[node.id]
            if func is None or node.id not in set(func.params):
                return self.module_consts.get(node.id)
            return None
        if isinstance(node, ast.Attribute):
            qn = self.qualname(node)
            if qn and qn.startswith("nl.tile_size."):
                fact = _TILE_SIZE_FACTS.get(qn.rsplit(".", 1)[1])
                return int(getattr(self.target, fact)) if fact else None
            return None
        if isinstance(node, ast.BinOp):
            a, b = self.int_value(node.left, func), self.int_value(node.right, func)
            if a is None or b is None:
                return None
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b if b else None, ast.Pow: lambda: a ** b if 0 <= b < 64 else None}
            fn = ops.get(type(node.op))
            return fn() if fn else None
        return None

    def dtype_name(self, node: ast.AST | None) -> str | None:
        """``nl.float32`` / ``np.float32`` / ``"float32"`` → ``"float32"``; None when unknown."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        qn = self.qualname(node)
        if qn and qn.split(".")[0] in ("nl", "np", "nki", "torch", "ml_dtypes") and "." in qn:
            return qn.rsplit(".", 1)[1].replace("bfloat16", "bfloat16")
        return None

# --------------------------------------------------------------------------------------------
# Building the model
# --------------------------------------------------------------------------------------------


def build_model(source: str, filename: str, target: Target) -> SourceModel:
    """Parse ``source`` (never executing it) and collect the facts rules need."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        raise NkiSyntaxError(f"{e.msg}", e.lineno or 0, (e.offset or 0)) from e
    aliases: dict[str, str] = {}
    imports: list[ImportRecord] = []
    for node in walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                canon = canonical_module(a.name)
                imports.append(ImportRecord(canon, a.name, node.lineno, node.col_offset + 1))
                if a.asname:
                    aliases[a.asname] = canon
                else:
                    root = a.name.split(".")[0]
                    aliases.setdefault(root, canonical_module(root))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                imports.append(ImportRecord(canonical_module(full), full, node.lineno, node.col_offset + 1))
                aliases[a.asname or a.name] = canonical_module(full)
    model = SourceModel(source=source, filename=filename, tree=tree, target=target, aliases=aliases,
                        imports=imports, functions=[], module_consts={})
    model.module_consts = _int_constants(model, tree.body, None)
    for node in walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            model.functions.append(_FunctionBuilder(model, node).build())  # type: ignore[arg-type]
    return model


def _int_constants(model: SourceModel, body: list[ast.stmt], func: FunctionModel | None) -> dict[str, int]:
    """Names bound exactly once, at this level, to an integer known statically."""
    counts: dict[str, int] = {}
    values: dict[str, int] = {}
    for stmt in body:
        for node in walk(stmt):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.For):
                tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in tgts:
                    for n in walk(t):
                        if isinstance(n, ast.Name):
                            counts[n.id] = counts.get(n.id, 0) + 1
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            tgt = stmt.targets[0]
            if isinstance(tgt, ast.Name):
                pairs = [(tgt, stmt.value)]
            elif isinstance(tgt, ast.Tuple) and isinstance(stmt.value, ast.Tuple) and len(tgt.elts) == len(stmt.value.elts):
                pairs = list(zip(tgt.elts, stmt.value.elts))
            else:
                pairs = []
            for name, value in pairs:
                v = model.int_value(value, func)
                if isinstance(name, ast.Name) and v is not None:
                    values[name.id] = v
    return {k: v for k, v in values.items() if counts.get(k) == 1}


class _FunctionBuilder:
    """Walks one function body in program order, recording calls, loops, allocations and accesses."""

    def __init__(self, model: SourceModel, node: ast.FunctionDef) -> None:
        self.m = model
        args = node.args
        params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        is_kernel = any(self._is_jit(d) for d in node.decorator_list)
        self.f = FunctionModel(node=node, is_kernel=is_kernel, params=params)
        self.loop_stack: list[Loop] = []
        self.order = 0

    def _is_jit(self, dec: ast.expr) -> bool:
        target = dec.func if isinstance(dec, ast.Call) else dec
        qn = self.m.qualname(target) or ""
        return qn in _JIT_DECORATORS or qn.endswith(".jit") or qn == "jit"

    def build(self) -> FunctionModel:
        self.f.consts = _int_constants(self.m, self.f.node.body, self.f)
        for stmt in self.f.node.body:
            self._stmt(stmt)
        self._shape_names()
        for loop in self.f.loops:
            loop.dependent = _dependent_names(loop)
        return self.f

    # -- events ----------------------------------------------------------------------------
    def _event(self, name: str, kind: AccessKind, node: ast.AST) -> None:
        self.order += 1
        self.f.accesses.append(Access(name, kind, node, self.order, tuple(self.loop_stack)))

    # -- statements ------------------------------------------------------------------------
    def _stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return  # nested functions are modelled on their own
        if isinstance(s, ast.For | ast.AsyncFor):
            self._expr(s.iter, "read")
            loop = self._loop(s)  # type: ignore[arg-type]
            self.f.loops.append(loop)
            self.loop_stack.append(loop)
            for n in walk(s.target):
                if isinstance(n, ast.Name):
                    self._event(n.id, "define", n)
            for b in s.body:
                self._stmt(b)
            self.loop_stack.pop()
            for b in s.orelse:
                self._stmt(b)
            return
        if isinstance(s, ast.Assign):
            if self._is_view(s.value):
                # v = t[0:r] / t.reshape(...): an alias of t, neither a read nor a write of its data
                self._view(s.value)
                for t in s.targets:
                    self._target(t, s.value, None)
                return
            call = self._expr(s.value, "read", assigned=tuple(names_in_targets(s.targets)))
            for t in s.targets:
                self._target(t, s.value, call)
            return
        if isinstance(s, ast.AnnAssign):
            call = self._expr(s.value, "read") if s.value is not None else None
            if s.value is not None:
                self._target(s.target, s.value, call)
            return
        if isinstance(s, ast.AugAssign):
            self._expr(s.value, "read")
            self._expr(s.target, "read")
            self._expr(s.target, "write")
            return
        if isinstance(s, ast.Expr):
            self._expr(s.value, "read", statement=True)
            return
        # if / while / with / try / return / assert / ...: visit expressions, then nested blocks.
        for fname, value in ast.iter_fields(s):
            if isinstance(value, ast.expr):
                self._expr(value, "read")
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.stmt):
                        self._stmt(item)
                    elif isinstance(item, ast.expr):
                        self._expr(item, "read")
                    elif isinstance(item, ast.withitem):
                        self._expr(item.context_expr, "read")
                    elif isinstance(item, ast.ExceptHandler):
                        for b in item.body:
                            self._stmt(b)
            del fname

    def _is_view(self, e: ast.expr) -> bool:
        b = base_name(e)
        if b is None or b in self.m.aliases:
            return False
        if isinstance(e, ast.Subscript):
            return True
        return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in VIEW_METHODS

    def _view(self, e: ast.expr) -> None:
        node: ast.AST = e
        while True:
            if isinstance(node, ast.Subscript):
                self._expr(node.slice, "read")
                node = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                for a in [*node.args, *(k.value for k in node.keywords)]:
                    self._expr(a, "read")
                node = node.func.value
            elif isinstance(node, ast.Attribute):
                node = node.value
            else:
                break
        if isinstance(node, ast.Name):
            self._event(node.id, "escape", node)

    def _loop(self, s: ast.For) -> Loop:
        qn = self.m.qualname(s.iter.func) if isinstance(s.iter, ast.Call) else None
        kind = LOOP_KINDS.get(qn or "", "other")
        start = stop = step = None
        if isinstance(s.iter, ast.Call) and kind != "other":
            a = s.iter.args
            if len(a) == 1:
                stop = a[0]
            elif len(a) >= 2:
                start, stop = a[0], a[1]
                step = a[2] if len(a) > 2 else None
            for kw in s.iter.keywords:
                if kw.arg == "stop":
                    stop = kw.value
                elif kw.arg == "start":
                    start = kw.value
                elif kw.arg == "step":
                    step = kw.value
        return Loop(node=s, kind=kind, targets=names_in(s.target), start=start, stop=stop, step=step,
                    depth=len(self.loop_stack))

    def _target(self, t: ast.expr, value: ast.expr, call: CallSite | None) -> None:
        if isinstance(t, ast.Name):
            self._event(t.id, "define", t)
            if call is not None and call.node is value and call.qn:
                if call.qn in ALLOC_FUNCS:
                    self.f.allocs.append(self._alloc(t.id, call))
                elif call.qn.split(".")[0] in ("nl", "nisa"):
                    self.f.value_tensors.add(t.id)
        elif isinstance(t, ast.Tuple | ast.List):
            for elt in t.elts:
                self._target(elt, value, None)
        else:
            self._expr(t, "write")

    def _alloc(self, name: str, call: CallSite) -> Alloc:
        qn = call.qn or ""
        shape_node = call.arg("shape", 0)
        shape = list(shape_node.elts) if isinstance(shape_node, ast.Tuple | ast.List) else None
        dtype_pos = {"nl.ndarray": 1, "nl.zeros": 1, "nl.ones": 1, "nl.full": 2, "nl.rand": 1}.get(qn)
        dtype = self.m.dtype_name(call.arg("dtype", dtype_pos))
        buf_pos = {"nl.ndarray": 2, "nl.zeros": 2, "nl.ones": 2, "nl.full": 3, "nl.rand": 2}.get(qn)
        buf_node = call.arg("buffer", buf_pos)
        buffer = "sbuf"
        if buf_node is not None:
            bqn = self.m.qualname(buf_node) or ""
            buffer = bqn.rsplit(".", 1)[-1] if bqn.startswith("nl.") else "unknown"
            if isinstance(buf_node, ast.Call):  # Beta 1 nki.compiler.sbuf.alloc(...)
                buffer = "sbuf" if "sbuf" in (self.m.qualname(buf_node.func) or "") else "psum" \
                    if "psum" in (self.m.qualname(buf_node.func) or "") else "unknown"
        return Alloc(name=name, call=call, buffer=buffer, shape=shape, dtype=dtype,
                     initialised=qn not in UNINITIALISED_ALLOCS)

    # -- expressions -------------------------------------------------------------------------
    def _expr(self, e: ast.AST | None, kind: AccessKind, assigned: tuple[str, ...] = (),
              statement: bool = False) -> CallSite | None:
        if e is None:
            return None
        if isinstance(e, ast.Call):
            return self._call(e, kind, assigned, statement)
        if isinstance(e, ast.Name):
            self._event(e.id, kind, e)
        elif isinstance(e, ast.Attribute):
            if e.attr in META_ATTRS and isinstance(e.value, ast.Name) and kind == "read":
                self._event(e.value.id, "meta", e)
            else:
                self._expr(e.value, kind)
        elif isinstance(e, ast.Subscript):
            self._expr(e.slice, "read")
            self._expr(e.value, kind)
        elif isinstance(e, ast.Lambda):
            return None
        else:
            for child in ast.iter_child_nodes(e):
                if isinstance(child, ast.expr | ast.comprehension | ast.keyword | ast.slice):
                    self._expr(child, "read")
        return None

    def _call(self, e: ast.Call, kind: AccessKind, assigned: tuple[str, ...], statement: bool) -> CallSite:
        qn = self.m.qualname(e.func)
        site = CallSite(node=e, qn=qn, loops=tuple(self.loop_stack), order=0, assigned_to=assigned,
                        is_statement=statement)
        writes: list[ast.expr] = []
        reads: list[ast.expr] = []
        known = bool(qn) and qn.split(".")[0] in ("nl", "nisa")
        for i, a in enumerate(e.args):
            if known and i == 0 and self._first_arg_is_dst(qn or "", e, statement):
                writes.append(a)
            else:
                reads.append(a)
        for kw in e.keywords:
            (writes if kw.arg in WRITE_KWARGS and known else reads).append(kw.value)
        receiver = base_name(e.func.value) if isinstance(e.func, ast.Attribute) else None
        if receiver is not None and receiver not in self.m.aliases:
            # method call: t.reshape(...), a.ap(...) read their receiver (or write it in dst position)
            self._expr(e.func.value, "write" if kind == "write" else "read")
        user_call = not known and (qn or "").split(".")[0] not in ("np", "math", "torch", "jnp", "jax") \
            and qn not in PURE_BUILTINS
        for r in reads:
            if user_call and isinstance(r, ast.Name):
                self._event(r.id, "escape", r)
            else:
                self._expr(r, "read")
        self.order += 1
        site.order = self.order
        self.f.calls.append(site)
        for w in writes:
            self._expr(w, "write")
        return site

    def _first_arg_is_dst(self, qn: str, e: ast.Call, statement: bool) -> bool:
        if any(kw.arg == "dst" for kw in e.keywords):
            return False
        if qn in ("nl.store",):
            return True
        return qn.startswith("nisa.") and statement and qn not in _NISA_NO_DST

    def _shape_names(self) -> None:
        """Names whose value derives from a tensor's ``.shape`` (the kernel's runtime sizes)."""
        shape: set[str] = set()
        assigns = [n for n in walk(self.f.node) if isinstance(n, ast.Assign)]
        changed = True
        while changed:
            changed = False
            for a in assigns:
                src = a.value
                derived = any(isinstance(n, ast.Attribute) and n.attr == "shape" for n in walk(src)) \
                    or bool(names_in(src) & shape)
                if derived:
                    for n in names_in_targets(a.targets):
                        if n not in shape:
                            shape.add(n)
                            changed = True
        self.f.shape_names = shape


PURE_BUILTINS = {"min", "max", "len", "range", "int", "float", "abs", "print", "isinstance", "tuple", "list",
                  "enumerate", "zip", "divmod", "round", "sum", "any", "all", "bool", "str", "math.ceil"}


def names_in_targets(targets: list[ast.expr]) -> list[str]:
    out: list[str] = []
    for t in targets:
        if isinstance(t, ast.Name):
            out.append(t.id)
        elif isinstance(t, ast.Tuple | ast.List):
            out.extend(names_in_targets(list(t.elts)))
    return out


def _dependent_names(loop: Loop) -> set[str]:
    """Loop variables and every name assigned in the body from something that depends on them."""
    dep = set(loop.targets)
    stmts = [n for b in loop.node.body for n in walk(b)]
    changed = True
    while changed:
        changed = False
        for n in stmts:
            if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign) and n.value is not None:
                if names_in(n.value) & dep:
                    tgts = n.targets if isinstance(n, ast.Assign) else [n.target]
                    for t in tgts:
                        b = base_name(t)
                        if b and b not in dep:
                            dep.add(b)
                            changed = True
            elif isinstance(n, ast.For) and names_in(n.iter) & dep:
                for t in names_in(n.target) - dep:
                    dep.add(t)
                    changed = True
    return dep
