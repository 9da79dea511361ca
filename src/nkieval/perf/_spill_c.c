/* The SBUF spill estimate's two loops in C: the same results as spill.py's Python loops.
 *
 * sbuf_accesses() reads the trace's SBUF operands into rows (spill.py's _sbuf_accesses); spill.py turns them into
 * sorted access events (numpy) and calls belady(), which does what is done once per event: the residency and
 * dirtiness flags, the byte counts and the max-heap of next accesses that picks Belady's victim (spill.py's
 * _belady). The Python loops stay the reference: tests/perf hold the two to identical outputs, and spill.py uses
 * them wherever this module is missing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int64_t next;  /* the unit's next access: larger first */
    int64_t unit;  /* then the smaller unit (the Python walk's heap of (-next, unit) tuples) */
} HeapItem;

static int before(const HeapItem *a, const HeapItem *b) {
    return a->next > b->next || (a->next == b->next && a->unit < b->unit);
}

static void heap_push(HeapItem *h, Py_ssize_t *n, HeapItem x) {
    Py_ssize_t i = (*n)++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!before(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static HeapItem heap_pop(HeapItem *h, Py_ssize_t *n) {
    HeapItem top = h[0], x = h[--(*n)];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(&h[c + 1], &h[c])) c++;
        if (!before(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = x;
    return top;
}

static int as_int64(Py_buffer *b, const char *name, Py_ssize_t *len) {
    if (b->len % 8) {
        PyErr_Format(PyExc_ValueError, "belady: %s is not an int64 array", name);
        return -1;
    }
    *len = b->len / 8;
    return 0;
}

PyDoc_STRVAR(belady_doc,
             "belady(seq, unit, next_seq, dirties, bounds, size, parts, capacity) -> (totals, moves)\n\n"
             "The eviction walk of nkieval.perf.spill._belady over int64 buffers: totals is [save, reload, evictions,\n"
             "peak, overfull]; moves is the bytes of an int64 array of (before, kind, unit) rows in the order made.");

static PyObject *belady(PyObject *self, PyObject *args) {
    Py_buffer bs, bu, bn, bd, bb, bz, bp;
    long long capacity;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*L", &bs, &bu, &bn, &bd, &bb, &bz, &bp, &capacity)) return NULL;
    PyObject *result = NULL;
    char *flags = NULL;
    int64_t *cur_next = NULL, *moves = NULL;
    HeapItem *heap = NULL;
    Py_ssize_t n_ev, n_u, n_n, n_d, n_b, n_units, n_p;
    if (as_int64(&bs, "seq", &n_ev) || as_int64(&bu, "unit", &n_u) || as_int64(&bn, "next_seq", &n_n) ||
        as_int64(&bd, "dirties", &n_d) || as_int64(&bb, "bounds", &n_b) || as_int64(&bz, "size", &n_units) ||
        as_int64(&bp, "parts", &n_p))
        goto done;
    if (n_u != n_ev || n_n != n_ev || n_d != n_ev || n_p != n_units || n_b < 1) {
        PyErr_SetString(PyExc_ValueError, "belady: array lengths disagree");
        goto done;
    }
    const int64_t *seq = bs.buf, *unit = bu.buf, *nxt = bn.buf, *dirties = bd.buf, *bounds = bb.buf;
    const int64_t *size = bz.buf, *parts = bp.buf;
    for (Py_ssize_t e = 0; e < n_ev; e++)
        if (unit[e] < 0 || unit[e] >= n_units) {
            PyErr_SetString(PyExc_ValueError, "belady: unit out of range");
            goto done;
        }
    for (Py_ssize_t k = 0; k < n_b; k++)
        if (bounds[k] < 0 || bounds[k] > n_ev || (k && bounds[k] < bounds[k - 1])) {
            PyErr_SetString(PyExc_ValueError, "belady: bounds out of range");
            goto done;
        }
    /* per unit: bit 1 resident, 2 evicted, 4 dirty (contents exist nowhere else) */
    flags = calloc(n_units ? n_units : 1, 1);
    cur_next = malloc(sizeof(int64_t) * (n_units ? n_units : 1));
    heap = malloc(sizeof(HeapItem) * (n_ev ? n_ev : 1));
    /* each event makes at most one move of each kind; the walk grows the buffer as it needs */
    Py_ssize_t n_moves = 0, cap_moves = 1024;
    moves = malloc(sizeof(int64_t) * 3 * cap_moves);
    if (!flags || !cur_next || !heap || !moves) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t u = 0; u < n_units; u++) cur_next[u] = -1;
    int64_t save = 0, reload = 0, evictions = 0, peak = 0, overfull = 0;
#define MOVE(b, kind, u)                                                                    \
    do {                                                                                    \
        if (n_moves == cap_moves) {                                                         \
            int64_t *grown = realloc(moves, sizeof(int64_t) * 3 * cap_moves * 2);           \
            if (!grown) {                                                                   \
                PyErr_NoMemory();                                                           \
                goto done;                                                                  \
            }                                                                               \
            moves = grown;                                                                  \
            cap_moves *= 2;                                                                 \
        }                                                                                   \
        moves[3 * n_moves] = (b);                                                           \
        moves[3 * n_moves + 1] = (kind);                                                    \
        moves[3 * n_moves + 2] = (u);                                                       \
        n_moves++;                                                                          \
    } while (0)
    for (Py_ssize_t k = 0; k + 1 < n_b; k++) {
        Py_ssize_t n_heap = 0;
        int64_t used = 0, live = 0;
        Py_ssize_t i = bounds[k], end = bounds[k + 1];
        while (i < end) {
            int64_t s = seq[i], need = 0;
            Py_ssize_t j = i;
            for (; j < end && seq[j] == s; j++) {
                int64_t u = unit[j];
                if (!(flags[u] & 1)) {
                    need += size[u];
                    if (!(flags[u] & 2)) live += size[u];
                }
            }
            if (live > peak) peak = live;
            while (used + need > capacity && n_heap > 0) {
                HeapItem top = heap_pop(heap, &n_heap);
                int64_t v = top.unit;
                if (!(flags[v] & 1) || cur_next[v] != top.next || top.next == s) continue;
                flags[v] = (char)((flags[v] & ~1) | 2);
                used -= size[v];
                evictions++;
                MOVE(s, 2, v);
                if (flags[v] & 4) {
                    save += size[v] * parts[v];
                    MOVE(s, 0, v);
                    flags[v] &= ~4;
                }
            }
            if (used + need > capacity) overfull++;
            for (Py_ssize_t e = i; e < j; e++) {
                int64_t u = unit[e];
                if (!(flags[u] & 1)) {
                    if (flags[u] & 2) {
                        reload += size[u] * parts[u];
                        MOVE(s, 1, u);
                        flags[u] &= ~2;
                    }
                    flags[u] |= 1;
                    used += size[u];
                }
            }
            for (Py_ssize_t e = i; e < j; e++) {
                int64_t u = unit[e];
                if (dirties[e]) flags[u] |= 4;
                cur_next[u] = nxt[e];
                if (nxt[e] >= 0) {
                    HeapItem x = {nxt[e], u};
                    heap_push(heap, &n_heap, x);
                } else {
                    flags[u] &= ~(1 | 4);
                    used -= size[u];
                    live -= size[u];
                }
            }
            i = j;
        }
    }
#undef MOVE
    {
        PyObject *mv = PyBytes_FromStringAndSize((const char *)moves, (Py_ssize_t)(sizeof(int64_t) * 3 * n_moves));
        if (!mv) goto done;
        result = Py_BuildValue("[LLLLL]N", (long long)save, (long long)reload, (long long)evictions,
                               (long long)peak, (long long)overfull, mv);
    }
done:
    free(flags);
    free(cur_next);
    free(heap);
    free(moves);
    PyBuffer_Release(&bs);
    PyBuffer_Release(&bu);
    PyBuffer_Release(&bn);
    PyBuffer_Release(&bd);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&bz);
    PyBuffer_Release(&bp);
    return result;
}

PyDoc_STRVAR(sbuf_accesses_doc,
             "sbuf_accesses(records, spillable) -> bytes\n\n"
             "nkieval.perf.spill._sbuf_accesses's rows (seq, alloc, addr_lo, addr_hi, partition_start, partition_end,\n"
             "dirties) for the SBUF operands of records on allocations in the set spillable, as the bytes of an\n"
             "int64 array. Raises OverflowError for a value beyond 64 bits (the Python loop takes those).");

static PyObject *s_seq, *s_engine, *s_operands, *s_buffer, *s_mode, *s_alloc, *s_addr_lo, *s_addr_hi,
    *s_partition_start, *s_partitions;

/* 1 if the str attribute ``name`` of ``obj`` equals ``text``, 0 if not, -1 on error */
static int attr_is(PyObject *obj, PyObject *name, const char *text) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    int eq = PyUnicode_Check(v) && PyUnicode_CompareWithASCIIString(v, text) == 0;
    Py_DECREF(v);
    return eq;
}

/* 1 if the str attribute ``name`` of ``obj`` contains ``ch``, 0 if not, -1 on error */
static int attr_has(PyObject *obj, PyObject *name, Py_UCS4 ch) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    int has = 0;
    if (PyUnicode_Check(v)) {
        Py_ssize_t at = PyUnicode_FindChar(v, ch, 0, PyUnicode_GET_LENGTH(v), 1);
        has = at >= 0 ? 1 : (at == -1 ? 0 : -1);
    }
    Py_DECREF(v);
    return has;
}

static int attr_int(PyObject *obj, PyObject *name, int64_t *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

static PyObject *sbuf_accesses(PyObject *self, PyObject *args) {
    PyObject *records, *spillable;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &records, &PySet_Type, &spillable)) return NULL;
    Py_ssize_t n_rows = 0, cap = 1024;
    int64_t *rows = malloc(sizeof(int64_t) * 7 * cap);
    PyObject *result = NULL;
    if (!rows) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *r = PyList_GET_ITEM(records, i);
        PyObject *ops = PyObject_GetAttr(r, s_operands);
        if (!ops) goto done;
        PyObject *seq_ops = PySequence_Fast(ops, "operands must be a sequence");
        Py_DECREF(ops);
        if (!seq_ops) goto done;
        Py_ssize_t n_ops = PySequence_Fast_GET_SIZE(seq_ops);
        PyObject **items = PySequence_Fast_ITEMS(seq_ops);
        int from_hbm = -2;  /* not yet known: only a write to a spillable SBUF range needs it */
        int64_t seq = 0;
        int have_seq = 0;
        for (Py_ssize_t k = 0; k < n_ops; k++) {
            PyObject *o = items[k];
            int is_sbuf = attr_is(o, s_buffer, "sbuf");
            if (is_sbuf < 0) goto fail_rec;
            if (!is_sbuf) continue;
            PyObject *alloc = PyObject_GetAttr(o, s_alloc);
            if (!alloc) goto fail_rec;
            int in = PySet_Contains(spillable, alloc);
            Py_DECREF(alloc);
            if (in < 0) goto fail_rec;
            if (!in) continue;
            int writes = attr_has(o, s_mode, 'w');
            if (writes < 0) goto fail_rec;
            int dirties = 0;
            if (writes) {
                if (from_hbm == -2) {
                    int dma = attr_is(r, s_engine, "dma");
                    if (dma < 0) goto fail_rec;
                    from_hbm = 0;
                    for (Py_ssize_t m = 0; dma && m < n_ops && !from_hbm; m++) {
                        int hbm = attr_is(items[m], s_buffer, "hbm");
                        int reads = hbm > 0 ? attr_has(items[m], s_mode, 'r') : 0;
                        if (hbm < 0 || reads < 0) goto fail_rec;
                        from_hbm = hbm && reads;
                    }
                }
                dirties = !from_hbm;
            }
            if (!have_seq) {
                if (attr_int(r, s_seq, &seq)) goto fail_rec;
                have_seq = 1;
            }
            if (n_rows == cap) {
                int64_t *grown = realloc(rows, sizeof(int64_t) * 7 * cap * 2);
                if (!grown) {
                    PyErr_NoMemory();
                    goto fail_rec;
                }
                rows = grown;
                cap *= 2;
            }
            int64_t *row = rows + 7 * n_rows, parts;
            row[0] = seq;
            if (attr_int(o, s_alloc, &row[1]) || attr_int(o, s_addr_lo, &row[2]) || attr_int(o, s_addr_hi, &row[3]) ||
                attr_int(o, s_partition_start, &row[4]) || attr_int(o, s_partitions, &parts))
                goto fail_rec;
            row[5] = row[4] + parts;
            row[6] = dirties;
            n_rows++;
        }
        Py_DECREF(seq_ops);
        continue;
    fail_rec:
        Py_DECREF(seq_ops);
        goto done;
    }
    result = PyBytes_FromStringAndSize((const char *)rows, (Py_ssize_t)(sizeof(int64_t) * 7 * n_rows));
done:
    free(rows);
    return result;
}

static PyMethodDef methods[] = {
    {"belady", belady, METH_VARARGS, belady_doc},
    {"sbuf_accesses", sbuf_accesses, METH_VARARGS, sbuf_accesses_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_spill_c", "The SBUF spill estimate's loops in C (see nkieval.perf.spill).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__spill_c(void) {
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {{&s_seq, "seq"}, {&s_engine, "engine"}, {&s_operands, "operands"}, {&s_buffer, "buffer"},
                 {&s_mode, "mode"}, {&s_alloc, "alloc"}, {&s_addr_lo, "addr_lo"}, {&s_addr_hi, "addr_hi"},
                 {&s_partition_start, "partition_start"}, {&s_partitions, "partitions"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (!(*names[k].slot = PyUnicode_InternFromString(names[k].text))) return NULL;
    return PyModule_Create(&module);
}
