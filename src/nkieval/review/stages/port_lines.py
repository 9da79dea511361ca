"""The port's line for a cause found by mutating the CUDA source (:mod:`.mutation_causes`): where the port
computes what the mutated CUDA expression computes, found in the port's instruction trace, stated only when
the trace establishes it.

The trace records every instruction's source line, opcode, operator attributes and operands (allocation,
byte range, dtype); the HBM allocations of the inputs carry the inputs' names. From it:

* **dataflow**: which inputs each instruction's result derives from (per written byte range, through every
  instruction that reads it);
* **precision**: an instruction that writes a bf16 (or narrower float) tile from wider data is where the
  port rounds; a precision cause's port lines are those instructions;
* **combine** (an operator replaced, operands or arguments swapped): the CUDA operands derive from different
  inputs (``x1 * c - x2 * s``: {x, cos} and {x, sin}); the port's first instruction whose result derives
  from both is the one that combines them. Stated only when neither operand's inputs contain the other's
  (otherwise an earlier instruction may already hold all of them), and when the instruction's operator, if
  it records one, is the CUDA operator or its mutation;
* **drop** (a term dropped): when the dropped term reads an input that no compute instruction of the port
  reads, the port never computes with it; when the dropped term reads no input (a constant, a parameter)
  and the kept term is an element read of one input, the port line is its first compute instruction on
  that input;
* **index** (an index or a bound off by one, a ``%`` dropped): when the mutated integer indexes exactly one
  input array, the port line is the instruction(s) reading that input from HBM, when they sit on one line.

Anything else gives no port line: "not established".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: records looked at (the first instructions of a kernel show where each flow is first computed)
MAX_RECORDS = 20_000
_NARROW = {"bfloat16": 2, "float16": 2, "float8_e4m3": 1, "float8_e5m2": 1, "float8e4": 1, "float8e5": 1}
_WIDTH = {"float32": 4, "float64": 8, **_NARROW}
_OPS = {"+": ("add",), "-": ("subtract",), "*": ("multiply",), "/": ("divide", "reciprocal")}
#: an identifier, not a field (`threadIdx.x`, `p->x` name no variable `x`)
_IDENT = re.compile(r"(?<![.\w])(?<!->)[A-Za-z_]\w*")


@dataclass(frozen=True)
class PortLine:
    """The port's side of a cause: ``lines`` (candidate.py line numbers, may be empty when the port never
    computes the term) and what established them."""

    lines: tuple[int, ...]
    evidence: str


# ------------------------------------------------------------------------------ the CUDA side
def _cuda_flows(text: str, arrays: dict[str, str]) -> dict[str, set[str]]:
    """Per identifier of the device code, the task inputs its value derives from (``arrays``: kernel pointer
    parameter -> task input). Declarations and assignments, to a fixpoint (loops assign late)."""
    defs: list[tuple[str, str]] = []
    stack = _device_code(text)
    while stack:
        n = stack.pop()
        if n.type == "init_declarator":
            d, v = n.child_by_field_name("declarator"), n.child_by_field_name("value")
            if d is not None and v is not None:
                name = _IDENT.findall(d.text.decode())
                if name:
                    defs.append((name[-1], v.text.decode()))
        elif n.type == "assignment_expression":
            lhs, rhs = n.child_by_field_name("left"), n.child_by_field_name("right")
            if lhs is not None and rhs is not None and lhs.type == "identifier":
                defs.append((lhs.text.decode(), rhs.text.decode()))
        stack.extend(n.children)
    flows: dict[str, set[str]] = {k: {v} for k, v in arrays.items()}
    for _ in range(8):
        changed = False
        for name, expr in defs:
            got = set().union(*(flows.get(i, set()) for i in _IDENT.findall(expr)))
            if not got <= flows.setdefault(name, set()):
                flows[name] |= got
                changed = True
        if not changed:
            break
    return flows


def _device_code(text: str) -> list[Any]:
    """The bodies of the source's device functions (the host's launch code computes nothing of the kernel's)."""
    from nkieval.cuda.mutate import _device_functions
    from nkieval.cuda.program import _parser

    return _device_functions(_parser().parse(text.encode()).root_node)


def _inputs_of(expr: str, flows: dict[str, set[str]]) -> set[str]:
    return set().union(*(flows.get(i, set()) for i in _IDENT.findall(expr)))


def kernel_arrays(task: Any, cuda_src: str, kind: str = "in") -> dict[str, str]:
    """Kernel pointer parameter -> task input name (``kind`` "out": output name), through the host function's
    binding and its launches' arguments (a kernel parameter named as a host parameter it is passed)."""
    from nkieval.cuda.program import preprocess
    from nkieval.cuda.runner import bind_task

    text = preprocess(cuda_src)
    try:
        binding = bind_task(cuda_src, task.kernel, task.inputs, task.outputs, dict(task.params))
    except Exception:  # (a source the executor binds differently: no dataflow evidence)
        return {}
    host = {h: w.split(":", 1)[1] for h, w in binding.items() if w.startswith(f"{kind}:")}
    out = dict(host)
    for kname, args in re.findall(r"(\w+)\s*(?:<[^<>]*>)?\s*<<<[^;]*?>>>\s*\(([^;]*)\)\s*;", text):
        m = re.search(rf"__global__[^{{;]*?\b{re.escape(kname)}\s*\(([^)]*)\)", text)
        if m is None:
            continue
        params = [(_IDENT.findall(p.split("=")[0]) or [""])[-1] for p in m.group(1).split(",")]
        for param, arg in zip(params, [a.strip() for a in args.split(",")]):
            if arg in host:
                out[param] = host[arg]
    return out


# ------------------------------------------------------------------------------ the port side
@dataclass
class _Flow:
    """The port's dataflow: per instruction (in trace order) its line, operators, whether it computes
    (not a DMA or a copy), the inputs its result derives from, the HBM inputs it reads, whether it rounds to
    a narrower float, and whether it computes on an engine or copies (not a DMA, not a layout step)."""

    rows: list[tuple[int, tuple[str, ...], bool, frozenset[str], frozenset[str], bool, bool]]
    #: per instruction, the inputs each operand it reads derives from
    reads: list[list[frozenset[str]]]
    #: the lines that allocate the narrower tiles the port rounds into
    narrow_sites: list[int]
    #: per tile the port stores to HBM (DMA'd out, not to an input): (the inputs it derives from, the lines of
    #: the compute instructions that last wrote it before each store)
    stored: dict[int, tuple[frozenset[str], set[int]]]
    #: per stored tile, the HBM allocations it is stored to
    stored_to: dict[int, set[int]]
    #: per allocation, the lines of the compute instructions that read it
    readers: dict[int, set[int]]
    #: per reduction (by its index in ``reductions``), the lines of the compute instructions that read what it
    #: wrote before it was overwritten
    reduction_readers: dict[int, set[int]]
    #: the lines of the port's reductions (an instruction that reduces along an axis), with the inputs the
    #: data they reduce derives from
    reductions: list[tuple[int, frozenset[str]]]
    #: the lines of the port's index comparisons (an instruction with a comparison operator on indices)
    selects: list[int]


def _port_flow(trace: Any, inputs: set[str]) -> _Flow:
    allocs = trace.allocations
    named = {a.id: a.name for a in allocs.values() if a.buffer == "hbm" and a.name in inputs}
    written: dict[int, list[tuple[int, int, int, int, frozenset[str]]]] = {}
    rows = []
    reads = []
    sites: set[int] = set()
    loaded: set[int] = set()  # allocations a DMA wrote
    last_writer: dict[int, int] = {}  # allocation -> line of the last compute instruction that wrote it
    stored: dict[int, tuple[frozenset[str], set[int]]] = {}
    stored_to: dict[int, set[int]] = {}
    readers: dict[int, set[int]] = {}
    reductions: list[tuple[int, frozenset[str]]] = []
    reduced_by: dict[int, int] = {}  # allocation -> the reduction (index) that last wrote it
    reduction_readers: dict[int, set[int]] = {}
    selects: list[int] = []
    for rec in trace.records[:MAX_RECORDS]:
        per: list[frozenset[str]] = []
        got: set[str] = set()
        hbm: set[str] = set()
        widest = 0
        narrowed = False
        for o in rec.operands:
            if "r" not in o.mode:
                continue
            widest = max(widest, _WIDTH.get(o.dtype, 0))
            mine: set[str] = set()
            if o.alloc in named:
                mine.add(named[o.alloc])
                hbm.add(named[o.alloc])
            for p0, p1, lo, hi, src in written.get(o.alloc, ()):
                if p0 < o.partition_start + o.partitions and o.partition_start < p1 and lo < o.addr_hi \
                        and o.addr_lo < hi:
                    mine |= src
            got |= mine
            per.append(frozenset(mine))
        flow = frozenset(got)
        for o in rec.operands:
            if "w" in o.mode:
                written.setdefault(o.alloc, []).append((o.partition_start, o.partition_start + o.partitions,
                                                        o.addr_lo, o.addr_hi, flow))
                if o.dtype in _NARROW and widest > _WIDTH[o.dtype]:
                    narrowed = True
                    site = getattr(allocs.get(o.alloc), "site", None) or ""
                    where, _, line = site.rpartition(":")
                    if line.isdigit() and where.rsplit("/", 1)[-1] == (rec.file or "").rsplit("/", 1)[-1]:
                        sites.add(int(line))
        ops = tuple(str(v) for k, v in rec.attrs.items() if k in ("op", "op0", "op1") and v is not None)
        ops = ops if not rec.opcode.startswith("dma") else ()
        computes = rec.opcode not in ("dma_copy", "tensor_copy", "load", "store", "memset", "iota") \
            and not rec.opcode.startswith("dma")
        # (an engine instruction with an operator, or a copy of a loaded tile: `g = grad`; a layout step such as
        # a broadcast through the PE array is neither)
        engine = bool(ops) or (rec.opcode == "tensor_copy" and all(o.alloc in loaded for o in rec.operands
                                                                    if "r" in o.mode))
        line = rec.line or 0
        if rec.opcode.startswith("dma"):
            loaded |= {o.alloc for o in rec.operands if "w" in o.mode}
            dests = {o.alloc for o in rec.operands if "w" in o.mode and o.alloc not in named
                     and getattr(allocs.get(o.alloc), "buffer", "") == "hbm"}
            if dests:
                for o, f in zip([o for o in rec.operands if "r" in o.mode], per):
                    if o.alloc in last_writer:
                        was = stored.get(o.alloc, (f, set()))
                        stored[o.alloc] = (was[0] | f, was[1] | {last_writer[o.alloc]})
                        stored_to.setdefault(o.alloc, set()).update(dests)
        elif computes:
            for o in rec.operands:
                if "r" in o.mode:
                    readers.setdefault(o.alloc, set()).add(line)
                    if o.alloc in reduced_by:
                        reduction_readers.setdefault(reduced_by[o.alloc], set()).add(line)
            for o in rec.operands:
                if "w" in o.mode:
                    last_writer[o.alloc] = line
                    reduced_by.pop(o.alloc, None)
            if "reduce" in rec.opcode or rec.attrs.get("reduce") is True:
                reduced_by.update({o.alloc: len(reductions) for o in rec.operands if "w" in o.mode})
                reductions.append((line, flow))
            if rec.attrs.get("cmp_op") is not None:
                selects.append(line)
        rows.append((line, ops, computes, flow, frozenset(hbm), narrowed, engine))
        reads.append(per)
    return _Flow(rows, reads, sorted(sites), stored, stored_to, readers, reduction_readers, reductions,
                 selects)


def _lines(xs: list[int]) -> tuple[int, ...]:
    return tuple(sorted(set(x for x in xs if x > 0)))


def _fmt(lines: tuple[int, ...]) -> str:
    return ", ".join(f"candidate.py:{x}" for x in lines)


def find_port_line(task: Any, cuda_src: str, trace: Any, mutation: Any, source: str | None = None
                   ) -> PortLine | None:
    """The port's line(s) for ``mutation`` (a :class:`nkieval.cuda.mutate.Mutation` stated as a cause), or
    None where the trace does not establish one. ``source``: the port's text (parsed, never run), to name the
    line of a multi-line call's argument that carries a host-side value."""
    from nkieval.cuda.program import preprocess

    if trace is None or not getattr(trace, "records", None):
        return None
    inputs = {s.name for s in task.inputs}
    flow = _port_flow(trace, inputs)
    if mutation.site == "precision":
        hits = _lines([r[0] for r in flow.rows if r[5]])
        if not hits:
            return None
        tiles = tuple(flow.narrow_sites)
        verb = "writes" if len(hits) == 1 else "write"
        if tiles:
            return PortLine(tiles + tuple(h for h in hits if h not in tiles),
                            f"the bf16 tile{'s' if len(tiles) > 1 else ''} allocated at {_fmt(tiles)}, which "
                            f"{_fmt(hits)} {verb} from fp32 data")
        return PortLine(hits, f"{_fmt(hits)} {verb} a bf16 tile from fp32 data")
    text = preprocess(cuda_src)
    raw = text.encode()
    arrays = kernel_arrays(task, cuda_src)
    if not arrays:
        return None
    flows = _cuda_flows(text, arrays)
    parts = [raw[a:b].decode() for a, b in mutation.parts]
    found = _by_site(task, text, raw, flows, arrays, flow, mutation, parts)
    changed = parts[1] if mutation.site == "drop" and len(parts) == 2 else mutation.old
    if found is None and changed and not _inputs_of(changed, flows):
        # (a host-side value: a bias correction, a gain, a divisor, a mask bound)
        found = _uniform_value(text, flows, flow, mutation, parts, source)
    if found is None and mutation.site == "drop":
        found = _final_term(task, trace, cuda_src, text, flows, flow, mutation)
    return found


def _uniform_value(text: str, flows: dict[str, set[str]], flow: _Flow, mutation: Any, parts: list[str],
                   source: str | None) -> PortLine | None:
    """The port line for a mutated value no input flows into (a port computes it on the host and passes it to
    an instruction as a scalar operand, which the trace does not record). Through the value the CUDA source
    combines it with (its *operand*: the kept term of a dropped one, or the other side of a binary expression
    on the variable the mutated declaration defines), by what the trace shows of that operand:

    * stored: the CUDA kernel stores the operand itself to an output, and the port stores exactly one tile
      deriving from the same inputs: the compute instructions that read that tile, when on one line;
    * reduced: the operand is an accumulation (``ss += ...``) and the port has one reduction of data deriving
      from the same inputs: its line;
    * an index bound: the variable is compared with an index (``c > last``) and the port has one index
      comparison (``affine_select``): its line, or the line of its ``offset`` argument;
    """
    device = _device_text(text)
    var = None
    operands: list[tuple[str, str, int]] = []  # (operand, the expression combining it, kernel.cu line)
    if mutation.site == "drop" and len(parts) == 2 and _inputs_of(parts[0], flows):
        if _IDENT.fullmatch(parts[0].strip()):
            operands.append((parts[0].strip(), mutation.old, mutation.line))
    else:  # (the whole mutated expression is host-side: through the expression or the variable it is in)
        operands = _enclosing(text, mutation.start, mutation.end, flows)
        var = _declared(text, mutation.start, mutation.end)
        operands += _operands_of(text, var, flows) if var is not None else []
    for x, expr, line in operands:
        fx = frozenset(_inputs_of(x, flows))
        if not fx:
            continue
        if re.search(rf"\w+\s*\[[^;\]]*\]\s*=\s*{re.escape(x)}\s*;", device):
            tiles = [a for a, (f, _w) in flow.stored.items() if f == fx]
            hits = _lines([ln for a in tiles for ln in flow.readers.get(a, ())])
            if tiles and len(hits) == 1:
                return PortLine(hits, f"candidate.py:{hits[0]} is the only instruction reading the tile the port "
                                f"stores as the CUDA kernel stores `{x}`; kernel.cu:{line} combines `{x}` with a "
                                f"host-side value (`{_short(expr)}`)")
        found = _reduction_line(device, flows, flow, x, fx, expr, line)
        if found is not None:
            return found
    if var is not None and re.search(rf"\b{re.escape(var)}\s*[<>]=?|[<>]=?\s*{re.escape(var)}\b", device):
        hits = _lines(flow.selects)
        if len(hits) == 1:
            arg = _argument_line(source, hits[0], "offset")
            where = (arg,) if arg is not None else hits
            return PortLine(where, f"{_fmt(where)} sets the bound of the port's only index comparison "
                            f"(candidate.py:{hits[0]}), the bound kernel.cu:{mutation.line} computes")
    return None


def _final_term(task: Any, trace: Any, cuda_src: str, text: str, flows: dict[str, set[str]], flow: _Flow,
                mutation: Any) -> PortLine | None:
    """A dropped term of the expression the CUDA kernel stores (or returns to the store): the instructions
    that last write the tiles the port stores deriving from the same inputs (of the output the expression
    is stored to, when several outputs derive from them), when on one line."""
    device = _device_text(text)
    if mutation.site == "drop" and _stores_result(text, device, mutation.old):
        fe = frozenset(_inputs_of(mutation.old, flows))
        tiles = [a for a, (f, _w) in flow.stored.items() if f == fe]
        hits = _lines([ln for a in tiles for ln in flow.stored[a][1]])
        if len(hits) > 1:  # (tiles of several outputs: the one the CUDA kernel stores this value to, by rank)
            dest = _output_alloc(task, trace, cuda_src, device, mutation.old)
            hits = _lines([ln for a in tiles if flow.stored_to.get(a) == {dest} for ln in flow.stored[a][1]]) \
                if dest is not None else hits
        if fe and len(hits) == 1:
            return PortLine(hits, f"candidate.py:{hits[0]} writes the tile the port stores (from "
                            f"{', '.join(sorted(fe))}) where kernel.cu:{mutation.line} stores "
                            f"`{_short(mutation.old)}`; no later port instruction computes on it")
    return None


def _output_alloc(task: Any, trace: Any, cuda_src: str, device: str, expr: str) -> int | None:
    """The port's HBM allocation of the output the device code stores ``expr`` to, when its rank tells it
    from every other output the port allocates (one allocation of that rank, no other output of that rank)."""
    outs = kernel_arrays(task, cuda_src, "out")
    m = re.search(rf"(\w+)\s*\[[^;\]]*\]\s*=\s*{_spaced(expr)}\s*;", device)
    name = outs.get(m.group(1)) if m is not None else None
    spec = next((o for o in task.outputs if o.name == name), None)
    if spec is None:
        return None
    rank = len(spec.shape)
    if sum(len(o.shape) == rank for o in task.outputs) != 1:
        return None
    mine = [a.id for a in trace.allocations.values() if a.buffer == "hbm" and not a.kernel_arg
            and len(a.shape) == rank]
    return mine[0] if len(mine) == 1 else None


def _reduction_line(device: str, flows: dict[str, set[str]], flow: _Flow, x: str, fx: frozenset[str], expr: str,
                    line: int) -> PortLine | None:
    """The port line for an operand that reduces one accumulation (``ss`` of ``ss += v * v``, or
    ``block_sum(q, smem)`` of ``q += d * d``): the k-th of the CUDA kernel's accumulations of data from the
    same inputs (in source order) is the port's k-th line of reductions of such data (in trace order), when
    the counts match. A multiplier applied to the result (``/``, ``*``) is the one line reading what that
    reduction wrote when it multiplies, else the reduction's own (a scale folded into it)."""
    accumulated = list(dict.fromkeys(re.findall(r"(?<![.\w])(\w+)\s*\+=", device)))
    mine = [a for a in _IDENT.findall(x) if a in accumulated]
    same = [a for a in accumulated if frozenset(_inputs_of(a, flows)) == fx]
    ports = list(dict.fromkeys(ln for ln, f in flow.reductions if f == fx))
    if len(mine) != 1 or mine[0] not in same or len(same) != len(ports):
        return None
    k = same.index(mine[0])
    at = ports[k]
    after = _lines([reader for i, (ln, _f) in enumerate(flow.reductions) if ln == at
                    for reader in flow.reduction_readers.get(i, ())])
    op = next((o for o in _OPS if f" {o} " in f" {expr} "), None)
    scaling = {"multiply", "divide", "reciprocal"}
    inputs = ", ".join(sorted(fx))
    which = f"the port's {_ordinal(k)} reduction of {inputs}, as `{mine[0]}` is the CUDA kernel's {_ordinal(k)} " \
        f"accumulation of {inputs}"
    if op in ("*", "/") and len(after) == 1 and any(
            scaling & set(r[1]) for r in flow.rows if r[0] == after[0] and r[2]):
        return PortLine(after, f"candidate.py:{after[0]} multiplies the result of candidate.py:{at} ({which}); "
                        f"kernel.cu:{line} combines it with a host-side value (`{_short(expr)}`)")
    return PortLine((at,), f"candidate.py:{at} is {which}, and no instruction multiplies its result after it; "
                    f"kernel.cu:{line} combines it with a host-side value (`{_short(expr)}`)")


def _enclosing(text: str, start: int, end: int, flows: dict[str, set[str]]) -> list[tuple[str, str, int]]:
    """(the other side, the expression, its line) of the arithmetic binary expression of the device code one
    of whose sides spans bytes ``start:end``, when some input flows into the other side."""
    for n, left, right in _arithmetic(text):
        for side, other in ((left, right), (right, left)):
            if (side.start_byte, side.end_byte) == (start, end) and _inputs_of(other.text.decode(), flows):
                return [(other.text.decode(), n.text.decode(), n.start_point[0] + 1)]
    return []


def _arithmetic(text: str) -> Iterator[tuple[Any, Any, Any]]:
    """(node, left side, right side) of each arithmetic binary expression of the device code (``_OPS``)."""
    stack = _device_code(text)
    while stack:
        n = stack.pop()
        if n.type == "binary_expression":
            left, right, op = (n.child_by_field_name(k) for k in ("left", "right", "operator"))
            if left is not None and right is not None and op is not None and op.text.decode() in _OPS:
                yield n, left, right
        stack.extend(n.children)


def _device_text(text: str) -> str:
    return "\n".join(re.sub(r"//[^\n]*|/\*.*?\*/", " ", n.text.decode(), flags=re.S) for n in _device_code(text))


def _declared(text: str, start: int, end: int) -> str | None:
    """The variable whose declaration's value holds bytes ``start:end`` of ``text``, or None."""
    stack = _device_code(text)
    while stack:
        n = stack.pop()
        if n.type == "init_declarator":
            d, v = n.child_by_field_name("declarator"), n.child_by_field_name("value")
            if d is not None and v is not None and v.start_byte <= start and end <= v.end_byte:
                names = _IDENT.findall(d.text.decode())
                return names[-1] if names else None
        stack.extend(n.children)
    return None


def _operands_of(text: str, var: str, flows: dict[str, set[str]]) -> list[tuple[str, str, int]]:
    """(the other side, the expression, its line) of the device code's arithmetic binary expressions with
    ``var`` as one side and a variable some input flows into as the other."""
    out = []
    for n, left, right in _arithmetic(text):
        sides = [left.text.decode().strip(), right.text.decode().strip()]
        if var in sides:
            other = sides[1 - sides.index(var)]
            if _IDENT.fullmatch(other) and flows.get(other):
                out.append((other, n.text.decode(), n.start_point[0] + 1))
    return sorted(out, key=lambda o: o[2])


def _stores_result(text: str, device: str, expr: str) -> bool:
    """Whether the device code stores ``expr`` to an array element as it is, or returns it from a function
    whose call is stored so."""
    def stored(e: str) -> bool:
        return re.search(rf"\w+\s*\[[^;\]]*\]\s*=\s*{e}\s*;", device) is not None

    if stored(_spaced(expr)):
        return True
    from nkieval.cuda.program import _parser

    want = " ".join(expr.split())
    stack = [_parser().parse(text.encode()).root_node]
    while stack:
        n = stack.pop()
        if n.type == "return_statement" and " ".join(n.text.decode().removeprefix("return").rstrip(";").split()) \
                == want:
            fn = n.parent
            while fn is not None and fn.type != "function_definition":
                fn = fn.parent
            decl = fn.child_by_field_name("declarator") if fn is not None else None
            name = decl.child_by_field_name("declarator") if decl is not None else None
            if name is not None and stored(rf"{re.escape(name.text.decode())}\s*\([^;]*\)"):
                return True
        stack.extend(n.children)
    return False


def _spaced(expr: str) -> str:
    """A pattern for ``expr`` with any spacing between its tokens."""
    return r"\s*".join(re.escape(t) for t in expr.split())


def _argument_line(source: str | None, line: int, name: str) -> int | None:
    """The line of keyword argument ``name`` of the call that starts on ``line`` of the port's text (parsed,
    never run), or None."""
    import ast

    if not source:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and n.lineno == line:
            for k in n.keywords:
                if k.arg == name:
                    return k.value.lineno
    return None


def _by_site(task: Any, text: str, raw: bytes, flows: dict[str, set[str]], arrays: dict[str, str], flow: _Flow,
             mutation: Any, parts: list[str]) -> PortLine | None:
    """The mechanisms by the mutation's site: combine, drop, index (the module's docstring)."""
    if mutation.site == "combine" and len(parts) == 2:
        ia, ib = _inputs_of(parts[0], flows), _inputs_of(parts[1], flows)
        if not ia or not ib or ia <= ib or ib <= ia:
            return None
        want = ia | ib
        # the CUDA expressions whose operands' flows meet as these do, in source order, against the port's
        # instructions where they first meet (no operand alone carries them all), in trace order
        sites = _combine_sites(text, flows, want)
        here = sites.index(tuple(mutation.parts)) if tuple(mutation.parts) in sites else -1
        made: list[int] = []
        for r, per in zip(flow.rows, flow.reads):
            if r[2] and want <= r[3] and not any(want <= f for f in per) and r[0] not in made:
                made.append(r[0])
        if here < 0 or len(made) != len(sites):
            return None
        line = made[here]
        hit = next(r for r in flow.rows if r[0] == line)
        allowed = _operators(raw, mutation)
        if allowed and hit[1] and not allowed & set(hit[1]):
            return None
        which = "" if len(sites) == 1 else f" (the {_ordinal(here)} of {len(sites)} such, as in the CUDA source)"
        return PortLine((line,), f"candidate.py:{line} is where the port first combines "
                        f"{' and '.join(sorted(want))}{which}, as `{_short(mutation.old or ', '.join(parts))}` does")
    if mutation.site == "drop" and len(parts) == 2:
        dropped = _inputs_of(parts[1], flows)
        computed = set().union(*(r[3] for r in flow.rows if r[2]))
        unused = sorted(dropped - computed)
        if unused:
            loads = _lines([r[0] for r in flow.rows if r[4] & set(unused)])
            return PortLine((), f"no compute instruction of the port reads {', '.join(unused)}"
                            + (f" (loaded at {_fmt(loads)})" if loads else " (never loaded)"))
        direct = re.fullmatch(r"\(?\s*(\w+)\s*\[.*\]\s*\)?", parts[0].strip(), re.S)
        name = direct.group(1) if direct else (parts[0].strip() if _IDENT.fullmatch(parts[0].strip()) else None)
        src = _direct_read(text, name, arrays) if name is not None else None
        if src is not None:  # (a copy counts: the port's `g = grad` for the CUDA's `g = grad[i] + ...`)
            hit = next((r for r in flow.rows if r[6] and src in r[3]), None)
            if hit is not None:
                return PortLine((hit[0],), f"candidate.py:{hit[0]} is the port's first instruction on {src} past its "
                                f"load, where kernel.cu:{mutation.line} computes `{_short(mutation.old)}`")
        return None
    if mutation.site == "index" and mutation.parts:
        used = _indexed_arrays(text, mutation.parts[0], arrays)
        if len(used) != 1:
            return None
        (src,) = used
        reads = _lines([r[0] for r in flow.rows if src in r[4]])
        if len(reads) != 1:
            return None
        return PortLine(reads, f"{_fmt(reads)} reads {src} from HBM, the array kernel.cu:{mutation.line} indexes")
    return None


def _ordinal(i: int) -> str:
    return {0: "first", 1: "second", 2: "third"}.get(i, f"{i + 1}th")


def _combine_sites(text: str, flows: dict[str, set[str]], want: set[str]) -> list[tuple[tuple[int, int], ...]]:
    """Operand spans of the device code's binary expressions and calls (first two arguments) whose two
    operands derive from different inputs (neither's containing the other's) that together are ``want``."""
    out = []
    stack = _device_code(text)
    while stack:
        n = stack.pop()
        pair = None
        if n.type == "binary_expression" and n.child_by_field_name("left") is not None:
            pair = (n.child_by_field_name("left"), n.child_by_field_name("right"))
        elif n.type == "call_expression":
            args = n.child_by_field_name("arguments")
            if args is not None and len(args.named_children) >= 2:
                pair = (args.named_children[0], args.named_children[1])
        if pair is not None and pair[1] is not None:
            ia, ib = _inputs_of(pair[0].text.decode(), flows), _inputs_of(pair[1].text.decode(), flows)
            if ia and ib and not ia <= ib and not ib <= ia and ia | ib == want:
                out.append(((pair[0].start_byte, pair[0].end_byte), (pair[1].start_byte, pair[1].end_byte)))
        stack.extend(n.children)
    return sorted(out)


def _operators(raw: bytes, mutation: Any) -> set[str]:
    """The port operators an instruction computing the mutated binary expression may record: the CUDA
    operator's and its replacement's (empty for a call's arguments)."""
    (a0, a1), (b0, _b1) = mutation.parts
    op = raw[a1:b0].decode().strip().strip("()").strip()
    a = raw[a0:a1].decode()
    new = mutation.new[len(a) + 3:len(a) + 4] if mutation.new.startswith(f"({a}) ") else ""
    return set(_OPS.get(op, ())) | set(_OPS.get(new, ()))


def _direct_read(text: str, name: str, arrays: dict[str, str]) -> str | None:
    """The task input ``name`` reads an element of: an input array itself, or a variable declared as one
    element of an input array; else None."""
    if name in arrays:
        return arrays[name]
    m = re.search(rf"\b{re.escape(name)}\s*=\s*(\w+)\s*\[[^;]*\]\s*;", text)
    return arrays.get(m.group(1)) if m is not None else None


def _indexed_arrays(text: str, span: tuple[int, int], arrays: dict[str, str]) -> set[str]:
    """The task inputs whose element reads the integer at ``span`` decides: the array subscripted there, or
    the arrays subscripted by the variable the span's declaration defines (and variables derived from it)."""
    raw = text.encode()
    before = raw[: span[0]].decode()
    # inside a subscript: the array whose brackets are still open at the span
    depth, j = 0, len(before) - 1
    while j >= 0 and before[j] not in ";{}":
        if before[j] == "]":
            depth += 1
        elif before[j] == "[":
            if depth == 0:
                m = re.search(r"(\w+)\s*$", before[:j])
                return {arrays[m.group(1)]} if m and m.group(1) in arrays else set()
            depth -= 1
        j -= 1
    m = re.search(r"\b(?:int|size_t|long)\s+(\w+)\s*=\s*$", before[j + 1:]) if j >= -1 else None
    if m is None:
        return set()
    names = {m.group(1)}
    device = _device_text(text)
    for _ in range(4):
        for d, expr in re.findall(r"\b(?:int|size_t|long)\s+(\w+)\s*=\s*([^;]*);", device):
            if set(_IDENT.findall(expr)) & names:
                names.add(d)
    out = set()
    for arr, idx in re.findall(r"(\w+)\s*\[([^\]]*)\]", device):
        if arr in arrays and set(_IDENT.findall(idx)) & names:
            out.add(arrays[arr])
    return out


def _short(s: str, limit: int = 60) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."
