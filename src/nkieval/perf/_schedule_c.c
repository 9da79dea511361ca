/* The scheduler's per-record loop in C: the same schedule as schedule.py's Python loop, bit for bit.
 *
 * schedule.py prepares everything that is decided once per run or once per cost signature (the classes'
 * costs and operand facts, the tracks, the rotation's shared tables) and calls run(); this file does what
 * is done once per record: the byte-range dependency lookups, the issue logic, the DMA engine pool, the
 * Tensor engine's dI/dt throttle and the table updates. The Python loop stays the reference: tests/perf
 * hold the two to identical outputs, and schedule.py uses the Python loop wherever this module is missing.
 *
 * The byte-range tables keep the reference semantics (live entries in insertion order, a write kills the
 * entries it fully covers) with one index: while a table's live entries are disjoint, a hash map from each
 * live entry's box finds the only entry a query of exactly that box can hit. Other queries scan the table.
 * Floating-point expressions are written in the Python loop's order; the build turns off contraction
 * (-ffp-contract=off) so that no multiply-add is fused.
 *
 * Beside it: the rotation plan's access-span pass (access_spans) and the SBUF spill estimate's two loops
 * (sbuf_accesses, belady), each held to its Python reference the same way.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "structmember.h"

#define DEAD_PITCH (-2)
#define N_ENG 5          /* tensor, vector, scalar, gpsimd, sync */
#define ENG_DMA 5
#define ENG_TENSOR 0
/* reason string indices (the order of the ``reasons`` tuple schedule.py passes) */
#define R_CAPACITY 0
#define R_WAR 1
#define R_PROGRAM_ORDER 2
#define R_DMA_ENGINES 3
#define R_PORT 4
#define R_DEP0 5         /* dep:<engine>, engines 0..5 (5: dma) */
#define R_ISSUE0 11      /* issue:<name>, per issue engine */

typedef struct {
    int64_t pitch, r0, r1, c0, c1;
    double wend, wsame, wother, rend;
    int64_t widx, ridx, alloc, seq;
    int weng, wlabel;
} Entry;

typedef struct {
    Entry *e;
    Py_ssize_t n, cap, dead;
    int exact_valid;
} Table;

/* exact-box index: (table, box) -> entry position, open addressing, for tables whose live entries are disjoint */
typedef struct {
    int64_t k[5];
    int32_t tab;
    int32_t idx;   /* -1: empty, -2: deleted */
} Slot;

typedef struct {
    Slot *s;
    size_t cap, used, filled;   /* used: live keys; filled: live + deleted */
} ExactMap;

typedef struct { int32_t tab; int32_t idx; } Ref;

typedef struct {
    int32_t tab;
    int64_t bk[5];
    int isr, isw;
    Py_ssize_t h0, nh;
    int64_t alloc;
} Update;

typedef struct {
    Py_ssize_t j;
    int isr, isw, buf;   /* buf: 0 sbuf, 1 psum, 2 hbm */
    int64_t nparts, pitch, rows, skip;   /* pitch 0: the flat byte range */
} OpInfo;

typedef struct {
    int is_dma, eng, psum, issue;   /* eng: 0..4 compute, 5 dma; issue: index of the issue engine or -1 */
    double occ, lat, issue_ns, service_ns;
    int64_t engines;
    PyObject *pmode;   /* borrowed; NULL when falsy */
    PyObject *plan;    /* borrowed */
    Py_ssize_t nops;
    OpInfo *ops;
} Class;

typedef struct { int64_t alloc; int32_t tab; int64_t pb, ab; int used; } AllocSlot;

typedef struct {
    AllocSlot *s;
    size_t cap, used;
} AllocMap;

typedef struct {
    double *st, *en;
    Py_ssize_t head, n, cap;
    double f0, ramp, window, need, since, end;
} Throttle;

/* Sorted disjoint busy intervals with the record on each (-1: none), the older half forgotten beyond ``keep``
 * (nothing is placed before ``floor``): a Trn1 shared port's TrackBook, and a core's DmaPool (merged intervals,
 * no records) */
typedef struct {
    double *starts, *ends;
    int64_t *recs;
    Py_ssize_t n, cap, keep;
    double floor;
} Book;
typedef Book Pool;

/* ---------------------------------------------------------------- attribute reads
 *
 * The trace's records and operands are slotted dataclasses. A reader looks up, once per call, where each
 * attribute's slot lies in objects of exactly that type; an object of another type (or a slot not set) is read
 * with PyObject_GetAttr, as Python would. */

#define MAX_FIELDS 16

typedef struct {
    PyTypeObject *type;   /* NULL: every read through PyObject_GetAttr */
    Py_ssize_t off[MAX_FIELDS];
    PyObject **names;
    int n;
} Reader;

static void reader_init(Reader *r, PyObject *obj, PyObject **names, int n) {
    r->type = NULL;
    r->names = names;
    r->n = n;
    PyTypeObject *tp = Py_TYPE(obj);
    for (int k = 0; k < n; k++) {
        PyObject *d = _PyType_Lookup(tp, names[k]);   /* borrowed */
        if (!d || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return;
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX) return;
        r->off[k] = m->offset;
    }
    r->type = tp;
}

/* attribute ``k`` of ``obj``: a new reference, NULL with an exception set */
static inline PyObject *rd(const Reader *r, PyObject *obj, int k) {
    if (Py_TYPE(obj) == r->type) {
        PyObject *v = *(PyObject **)((char *)obj + r->off[k]);
        if (v) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(obj, r->names[k]);
}

/* ---------------------------------------------------------------- small helpers */

static int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t size) {
    if (need <= *cap) return 0;
    Py_ssize_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *q = PyMem_Realloc(*p, (size_t)c * size);
    if (!q) { PyErr_NoMemory(); return -1; }
    *p = q;
    *cap = c;
    return 0;
}

static inline uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

static uint64_t box_hash(int32_t tab, const int64_t *k) {
    uint64_t h = (uint64_t)tab * 0xff51afd7ed558ccdULL;
    for (int i = 0; i < 5; i++) h = mix(h, (uint64_t)k[i]);
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static int em_init(ExactMap *m, size_t cap) {
    m->s = PyMem_Malloc(cap * sizeof(Slot));
    if (!m->s) { PyErr_NoMemory(); return -1; }
    for (size_t i = 0; i < cap; i++) m->s[i].idx = -1;
    m->cap = cap;
    m->used = m->filled = 0;
    return 0;
}

static Slot *em_find(ExactMap *m, int32_t tab, const int64_t *k) {
    size_t mask = m->cap - 1, i = (size_t)box_hash(tab, k) & mask;
    for (;;) {
        Slot *s = &m->s[i];
        if (s->idx == -1) return NULL;
        if (s->idx >= 0 && s->tab == tab && s->k[0] == k[0] && s->k[1] == k[1] && s->k[2] == k[2]
            && s->k[3] == k[3] && s->k[4] == k[4])
            return s;
        i = (i + 1) & mask;
    }
}

static int em_put(ExactMap *m, int32_t tab, const int64_t *k, int32_t idx);

static int em_rehash(ExactMap *m, size_t cap) {
    Slot *old = m->s;
    size_t oc = m->cap;
    if (em_init(m, cap) < 0) { m->s = old; m->cap = oc; return -1; }
    for (size_t i = 0; i < oc; i++)
        if (old[i].idx >= 0 && em_put(m, old[i].tab, old[i].k, old[i].idx) < 0) { PyMem_Free(old); return -1; }
    PyMem_Free(old);
    return 0;
}

static int em_put(ExactMap *m, int32_t tab, const int64_t *k, int32_t idx) {
    if ((m->filled + 1) * 2 > m->cap) {
        size_t cap = m->cap;
        while ((m->used + 1) * 4 > cap) cap *= 2;   /* rehash drops the deleted slots */
        if (em_rehash(m, cap) < 0) return -1;
    }
    size_t mask = m->cap - 1, i = (size_t)box_hash(tab, k) & mask;
    Slot *del = NULL;
    for (;;) {
        Slot *s = &m->s[i];
        if (s->idx == -1) break;
        if (s->idx == -2) {
            if (!del) del = s;
        } else if (s->tab == tab && s->k[0] == k[0] && s->k[1] == k[1] && s->k[2] == k[2] && s->k[3] == k[3]
                   && s->k[4] == k[4]) {
            s->idx = idx;
            return 0;
        }
        i = (i + 1) & mask;
    }
    Slot *s = del ? del : &m->s[i];
    if (!del) m->filled++;
    s->tab = tab;
    memcpy(s->k, k, sizeof(s->k));
    s->idx = idx;
    m->used++;
    return 0;
}

static void em_del(ExactMap *m, int32_t tab, const int64_t *k) {
    Slot *s = em_find(m, tab, k);
    if (s) { s->idx = -2; m->used--; }
}

static int am_init(AllocMap *m, size_t cap) {
    m->s = PyMem_Calloc(cap, sizeof(AllocSlot));
    if (!m->s) { PyErr_NoMemory(); return -1; }
    m->cap = cap;
    m->used = 0;
    return 0;
}

static AllocSlot *am_slot(AllocMap *m, int64_t a) {   /* the slot of ``a`` (used or the empty one to fill) */
    size_t mask = m->cap - 1, i = (size_t)((uint64_t)a * 0x9e3779b97f4a7c15ULL >> 17) & mask;
    for (;;) {
        AllocSlot *s = &m->s[i];
        if (!s->used || s->alloc == a) return s;
        i = (i + 1) & mask;
    }
}

static int am_put(AllocMap *m, int64_t a, int32_t tab, int64_t pb, int64_t ab) {
    if ((m->used + 1) * 2 > m->cap) {
        AllocSlot *old = m->s;
        size_t oc = m->cap;
        if (am_init(m, oc * 2) < 0) { m->s = old; m->cap = oc; return -1; }
        for (size_t i = 0; i < oc; i++)
            if (old[i].used) { *am_slot(m, old[i].alloc) = old[i]; m->used++; }
        PyMem_Free(old);
    }
    AllocSlot *s = am_slot(m, a);
    if (!s->used) m->used++;
    s->used = 1;
    s->alloc = a;
    s->tab = tab;
    s->pb = pb;
    s->ab = ab;
    return 0;
}

/* ---------------------------------------------------------------- tables */

static inline int overlaps(const Entry *e, int64_t pitch, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (e->pitch == DEAD_PITCH) return 0;
    if (e->pitch == pitch) return e->r0 < r1 && r0 < e->r1 && e->c0 < c1 && c0 < e->c1;
    /* different row pitches in HBM: compare flat byte ranges */
    int64_t a0, a1, b0, b1;
    if (e->pitch <= 0) { a0 = e->c0; a1 = e->c1; }
    else { a0 = e->r0 * e->pitch + e->c0; a1 = (e->r1 - 1) * e->pitch + e->c1; }
    if (pitch > 0) { b0 = r0 * pitch + c0; b1 = (r1 - 1) * pitch + c1; }
    else { b0 = c0; b1 = c1; }
    return a0 < b1 && b0 < a1;
}

/* drop dead entries, keeping order; the exact index follows the moved entries */
static int compact(Table *t, int32_t tid, ExactMap *em) {
    Py_ssize_t w = 0;
    for (Py_ssize_t r = 0; r < t->n; r++) {
        Entry *e = &t->e[r];
        if (e->pitch == DEAD_PITCH) continue;
        if (w != r) {
            t->e[w] = *e;
            if (t->exact_valid && e->r0 < e->r1 && e->c0 < e->c1) {
                int64_t k[5] = {t->e[w].pitch, t->e[w].r0, t->e[w].r1, t->e[w].c0, t->e[w].c1};
                Slot *s = em_find(em, tid, k);
                if (s) s->idx = (int32_t)w;
            }
        }
        w++;
    }
    t->n = w;
    t->dead = 0;
    return 0;
}

static void invalidate_exact(Table *t, int32_t tid, ExactMap *em) {
    if (!t->exact_valid) return;
    for (Py_ssize_t r = 0; r < t->n; r++) {
        Entry *e = &t->e[r];
        if (e->pitch != DEAD_PITCH && e->r0 < e->r1 && e->c0 < e->c1) {
            int64_t k[5] = {e->pitch, e->r0, e->r1, e->c0, e->c1};
            em_del(em, tid, k);
        }
    }
    t->exact_valid = 0;
}

/* ---------------------------------------------------------------- the throttle and the DMA pool */

static double ramp_time(double u0, double work, double f0, double ramp) {
    if (u0 >= ramp || f0 >= 1.0 || work <= 0) return work;
    double k = (1.0 - f0) / ramp;
    double r0 = f0 + k * u0;
    double w_ramp = (ramp - u0) * (r0 + 1.0) / 2.0;
    if (work >= w_ramp) return (ramp - u0) + (work - w_ramp);
    return (-r0 + pow(r0 * r0 + 2.0 * k * work, 0.5)) / k;
}

static int throttle_run(Throttle *th, double st, double work, double *dur_out) {
    double w0 = st - th->window;
    while (th->n && th->en[th->head] <= w0) {
        th->head = (th->head + 1) % th->cap;
        th->n--;
    }
    if (st > th->end) {
        double b = 0.0;
        for (Py_ssize_t q = 0; q < th->n; q++) {
            Py_ssize_t x = (th->head + q) % th->cap;
            double s0 = th->st[x], e0 = th->en[x];
            b += (e0 < st ? e0 : st) - (s0 > w0 ? s0 : w0);
        }
        if (b < th->need) th->since = st;
    }
    double dur = ramp_time(st - th->since, work, th->f0, th->ramp);
    th->end = st + dur;
    if (th->n == th->cap) {   /* grow the ring, unrolled to start at 0 */
        Py_ssize_t nc = th->cap ? th->cap * 2 : 16;
        double *ns = PyMem_Malloc((size_t)nc * sizeof(double)), *ne = PyMem_Malloc((size_t)nc * sizeof(double));
        if (!ns || !ne) { PyMem_Free(ns); PyMem_Free(ne); PyErr_NoMemory(); return -1; }
        for (Py_ssize_t q = 0; q < th->n; q++) {
            Py_ssize_t x = (th->head + q) % th->cap;
            ns[q] = th->st[x];
            ne[q] = th->en[x];
        }
        PyMem_Free(th->st);
        PyMem_Free(th->en);
        th->st = ns;
        th->en = ne;
        th->cap = nc;
        th->head = 0;
    }
    Py_ssize_t x = (th->head + th->n) % th->cap;
    th->st[x] = st;
    th->en[x] = th->end;
    th->n++;
    *dur_out = dur;
    return 0;
}

static void pool_delete(Pool *p, Py_ssize_t j, Py_ssize_t count) {
    memmove(p->starts + j, p->starts + j + count, (size_t)(p->n - j - count) * sizeof(double));
    memmove(p->ends + j, p->ends + j + count, (size_t)(p->n - j - count) * sizeof(double));
    memmove(p->recs + j, p->recs + j + count, (size_t)(p->n - j - count) * sizeof(int64_t));
    p->n -= count;
}

static int book_insert(Book *b, Py_ssize_t j, double st, double en, int64_t rec);

/* DmaPool.reserve: book ``dur`` of pool time from the earliest free moment >= ready, filling the idle gaps in
 * order until ``dur`` is covered; *out: the start, *done: the end of the last piece */
static int pool_reserve(Pool *p, double ready, double dur, double *out, double *done) {
    double t = ready > p->floor ? ready : p->floor;
    if (dur <= 0) { *out = t; *done = t; return 0; }
    double *starts = p->starts, *ends = p->ends;
    Py_ssize_t n = p->n, lo = 0, hi = n;
    while (lo < hi) {   /* bisect_right(ends, t) */
        Py_ssize_t mid = (lo + hi) / 2;
        if (t < ends[mid]) hi = mid; else lo = mid + 1;
    }
    Py_ssize_t j = lo;
    if (j < n && starts[j] <= t) { t = ends[j]; j++; }   /* t inside interval j: start when it ends */
    double first = t, left = dur;
    Py_ssize_t j0 = j;
    while (j < n && starts[j] - t < left) {   /* the gap before interval j is used up: go on after it */
        left -= starts[j] - t;
        t = ends[j];
        j++;
    }
    double e = t + left;
    /* [first, e) is now busy: it absorbs intervals j0 .. j-1 and merges with touching neighbours */
    Py_ssize_t a = (j0 > 0 && ends[j0 - 1] >= first - 1e-9) ? j0 - 1 : j0;
    if (j < n && starts[j] <= e + 1e-9) { e = ends[j]; j++; }
    double ns = a < j0 ? starts[a] : first;
    if (a == j) {
        if (book_insert(p, a, ns, e, -1) < 0) return -1;   /* (trims the older half itself) */
    } else {
        p->starts[a] = ns;
        p->ends[a] = e;
        if (j - a > 1) pool_delete(p, a + 1, j - a - 1);
    }
    if (p->n > p->keep) {   /* forget the older half */
        Py_ssize_t cut = p->keep / 2;
        p->floor = p->ends[cut - 1];
        pool_delete(p, 0, cut);
    }
    *out = first;
    *done = t + left;
    return 0;
}

/* TrackBook.gap: the earliest start >= t with dur free (_earliest_gap); *jpos: the first interval after it */
static double book_gap(const Book *b, double t, double dur, Py_ssize_t *jpos) {
    if (t <= b->floor) t = b->floor;
    Py_ssize_t n = b->n, lo = 0, hi = n;
    while (lo < hi) {   /* bisect_right(ends, t) */
        Py_ssize_t mid = (lo + hi) / 2;
        if (t < b->ends[mid]) hi = mid; else lo = mid + 1;
    }
    Py_ssize_t j = lo;
    while (j < n && b->starts[j] < t + dur) {
        if (b->ends[j] > t) t = b->ends[j];
        j++;
    }
    *jpos = j;
    return t;
}

/* TrackBook.before: end and record of the interval before position j (the floor and -1 if none) */
/* the book's interval arrays (the struct itself is its owner's) */
static void book_free(Book *b) {
    PyMem_Free(b->starts);
    PyMem_Free(b->ends);
    PyMem_Free(b->recs);
}

static void book_before(const Book *b, Py_ssize_t j, double *end, int64_t *rec) {
    if (j > 0) { *end = b->ends[j - 1]; *rec = b->recs[j - 1]; }
    else { *end = b->floor; *rec = -1; }
}

/* TrackBook.book: insert [st, en) at position j; forget the older half beyond ``keep`` */
static int book_insert(Book *b, Py_ssize_t j, double st, double en, int64_t rec) {
    if (b->n == b->cap) {
        Py_ssize_t nc = b->cap ? b->cap * 2 : 64;
        double *ns = PyMem_Realloc(b->starts, (size_t)nc * sizeof(double));
        if (!ns) { PyErr_NoMemory(); return -1; }
        b->starts = ns;
        double *ne = PyMem_Realloc(b->ends, (size_t)nc * sizeof(double));
        if (!ne) { PyErr_NoMemory(); return -1; }
        b->ends = ne;
        int64_t *nr = PyMem_Realloc(b->recs, (size_t)nc * sizeof(int64_t));
        if (!nr) { PyErr_NoMemory(); return -1; }
        b->recs = nr;
        b->cap = nc;
    }
    memmove(b->starts + j + 1, b->starts + j, (size_t)(b->n - j) * sizeof(double));
    memmove(b->ends + j + 1, b->ends + j, (size_t)(b->n - j) * sizeof(double));
    memmove(b->recs + j + 1, b->recs + j, (size_t)(b->n - j) * sizeof(int64_t));
    b->starts[j] = st;
    b->ends[j] = en;
    b->recs[j] = rec;
    b->n++;
    if (b->n > b->keep) {
        Py_ssize_t cut = b->keep / 2;
        b->floor = b->ends[cut - 1];
        pool_delete(b, 0, cut);
    }
    return 0;
}

/* ---------------------------------------------------------------- argument parsing */

static int as_i64(PyObject *o, int64_t *v) {
    long long x = PyLong_AsLongLong(o);
    if (x == -1 && PyErr_Occurred()) return -1;
    *v = (int64_t)x;
    return 0;
}

static int item_i64(PyObject *tup, Py_ssize_t i, int64_t *v) {
    return as_i64(PyTuple_GET_ITEM(tup, i), v);
}

static int item_f(PyObject *tup, Py_ssize_t i, double *v) {
    double x = PyFloat_AsDouble(PyTuple_GET_ITEM(tup, i));
    if (x == -1.0 && PyErr_Occurred()) return -1;
    *v = x;
    return 0;
}

static int parse_class(PyObject *c, Class *k) {
    /* (is_dma, eng, occ, lat, pmode, psum, plan, issue, issue_ns, service_ns, engines, ops) */
    if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) != 12) {
        PyErr_SetString(PyExc_TypeError, "class: a 12-tuple expected");
        return -1;
    }
    int64_t v;
    if (item_i64(c, 0, &v) < 0) return -1;
    k->is_dma = (int)v;
    if (item_i64(c, 1, &v) < 0) return -1;
    k->eng = (int)v;
    if (item_f(c, 2, &k->occ) < 0 || item_f(c, 3, &k->lat) < 0) return -1;
    PyObject *pm = PyTuple_GET_ITEM(c, 4);
    int truth = PyObject_IsTrue(pm);
    if (truth < 0) return -1;
    k->pmode = truth ? pm : NULL;
    if (item_i64(c, 5, &v) < 0) return -1;
    k->psum = (int)v;
    k->plan = PyTuple_GET_ITEM(c, 6);
    if (item_i64(c, 7, &v) < 0) return -1;
    k->issue = (int)v;
    if (item_f(c, 8, &k->issue_ns) < 0 || item_f(c, 9, &k->service_ns) < 0) return -1;
    if (item_i64(c, 10, &k->engines) < 0) return -1;
    PyObject *ops = PyTuple_GET_ITEM(c, 11);
    if (!PyTuple_Check(ops)) {
        PyErr_SetString(PyExc_TypeError, "class ops: a tuple expected");
        return -1;
    }
    k->nops = PyTuple_GET_SIZE(ops);
    k->ops = PyMem_Calloc(k->nops ? (size_t)k->nops : 1, sizeof(OpInfo));
    if (!k->ops) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t q = 0; q < k->nops; q++) {
        PyObject *o = PyTuple_GET_ITEM(ops, q);   /* (j, isr, isw, buf, nparts, pitch, rows, skip) */
        if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 8) {
            PyErr_SetString(PyExc_TypeError, "class op: an 8-tuple expected");
            return -1;
        }
        OpInfo *oi = &k->ops[q];
        int64_t x[8];
        for (int f = 0; f < 8; f++)
            if (item_i64(o, f, &x[f]) < 0) return -1;
        oi->j = (Py_ssize_t)x[0];
        oi->isr = (int)x[1];
        oi->isw = (int)x[2];
        oi->buf = (int)x[3];
        oi->nparts = x[4];
        oi->pitch = x[5];
        oi->rows = x[6];
        oi->skip = x[7];
    }
    return 0;
}

/* int64 rows of a nested tuple into a flat array */
static int flat_ints(PyObject *seq, int64_t *out, Py_ssize_t n) {
    PyObject *f = PySequence_Fast(seq, "a sequence of ints expected");
    if (!f) return -1;
    if (PySequence_Fast_GET_SIZE(f) != n) {
        Py_DECREF(f);
        PyErr_Format(PyExc_ValueError, "expected %zd ints", n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (as_i64(PySequence_Fast_ITEMS(f)[i], &out[i]) < 0) { Py_DECREF(f); return -1; }
    Py_DECREF(f);
    return 0;
}

/* ---------------------------------------------------------------- run */

typedef struct {
    /* tracks */
    double *tfree;
    int64_t *tlast;
    Py_ssize_t ntracks;
    /* tables */
    Table *tabs;
    Py_ssize_t ntabs, captabs;
    ExactMap em;
    AllocMap am;
    Class *cls;
    Py_ssize_t ncls;
    Throttle *thr;
    Pool *pools;
    Book *books;   /* per track id: the shared ports' busy intervals (only port tracks are used) */
    int cores;
    /* scratch */
    Ref *hits;
    Py_ssize_t nhits, caphits;
    Ref *reads;
    Py_ssize_t nreads, capreads;
    Update *acc;
    Py_ssize_t nacc, capacc;
    int32_t *touched;
    Py_ssize_t ntouched, captouched;
} State;

static int new_table(State *S) {
    if (grow((void **)&S->tabs, &S->captabs, S->ntabs + 1, sizeof(Table)) < 0) return -1;
    Table *t = &S->tabs[S->ntabs];
    t->e = NULL;
    t->n = t->cap = t->dead = 0;
    t->exact_valid = 1;
    return (int)S->ntabs++;
}

static void free_state(State *S) {
    PyMem_Free(S->tfree);
    PyMem_Free(S->tlast);
    if (S->tabs)
        for (Py_ssize_t i = 0; i < S->ntabs; i++) PyMem_Free(S->tabs[i].e);
    PyMem_Free(S->tabs);
    PyMem_Free(S->em.s);
    PyMem_Free(S->am.s);
    if (S->cls)
        for (Py_ssize_t i = 0; i < S->ncls; i++) PyMem_Free(S->cls[i].ops);
    PyMem_Free(S->cls);
    if (S->thr)
        for (int c = 0; c < S->cores; c++) { PyMem_Free(S->thr[c].st); PyMem_Free(S->thr[c].en); }
    PyMem_Free(S->thr);
    if (S->pools)
        for (int c = 0; c < S->cores; c++) book_free(&S->pools[c]);
    PyMem_Free(S->pools);
    if (S->books)
        for (Py_ssize_t x = 0; x < S->ntracks; x++) book_free(&S->books[x]);
    PyMem_Free(S->books);
    PyMem_Free(S->hits);
    PyMem_Free(S->reads);
    PyMem_Free(S->acc);
    PyMem_Free(S->touched);
}

/* the attributes read, of a record and of an operand (the first nine of an operand: its cost signature) */
enum { R_OPERANDS, R_ATTRS, R_OPCODE, R_ENGINE, R_FILE, R_LINE, R_PROGRAM, R_SEQ, N_REC_FIELDS };
enum { O_ROLE, O_MODE, O_BUFFER, O_DTYPE, O_SHAPE, O_PATTERN, O_NBYTES, O_CONTIGUOUS, O_PARTITIONS, O_ALLOC,
       O_PARTITION_START, O_ADDR_LO, O_ADDR_HI, N_OP_FIELDS };
static const char *rec_field_names[N_REC_FIELDS] = {"operands", "attrs", "opcode", "engine", "file", "line", "program",
                                                    "seq"};
static const char *op_field_names[N_OP_FIELDS] = {"role", "mode", "buffer", "dtype", "shape", "pattern", "nbytes",
                                                  "contiguous_bytes", "partitions", "alloc", "partition_start",
                                                  "addr_lo", "addr_hi"};
static PyObject *rec_fields[N_REC_FIELDS], *op_fields[N_OP_FIELDS];
static PyObject *hbm_str, *sbuf_str, *dma_str, *memset_str;   /* "hbm", "sbuf", "dma", "memset" */

/* readers for the records and operands of ``records`` (types taken from the first record with an operand) */
static void readers_for(PyObject *records, Reader *rr, Reader *orr) {
    rr->type = orr->type = NULL;
    rr->names = rec_fields;
    rr->n = N_REC_FIELDS;
    orr->names = op_fields;
    orr->n = N_OP_FIELDS;
    Py_ssize_t n = PyList_GET_SIZE(records);
    if (!n) return;
    PyObject *rec = PyList_GET_ITEM(records, 0);
    reader_init(rr, rec, rec_fields, N_REC_FIELDS);
    for (Py_ssize_t i = 0; i < n && i < 64; i++) {
        PyObject *ops = PyObject_GetAttr(PyList_GET_ITEM(records, i), rec_fields[R_OPERANDS]);
        if (!ops) { PyErr_Clear(); return; }
        if ((PyList_Check(ops) || PyTuple_Check(ops)) && PySequence_Fast_GET_SIZE(ops)) {
            reader_init(orr, PySequence_Fast_GET_ITEM(ops, 0), op_fields, N_OP_FIELDS);
            Py_DECREF(ops);
            return;
        }
        Py_DECREF(ops);
    }
}

static int rd_i64(const Reader *r, PyObject *o, int k, int64_t *v) {
    PyObject *x = rd(r, o, k);
    if (!x) return -1;
    int res = as_i64(x, v);
    Py_DECREF(x);
    return res;
}

static int set_float_item(PyObject *d, Py_ssize_t i, double v) {
    PyObject *k = PyLong_FromSsize_t(i), *x = PyFloat_FromDouble(v);
    int r = (k && x) ? PyDict_SetItem(d, k, x) : -1;
    Py_XDECREF(k);
    Py_XDECREF(x);
    return r;
}

static int set_obj_item(PyObject *d, Py_ssize_t i, PyObject *v) {
    PyObject *k = PyLong_FromSsize_t(i);
    int r = k ? PyDict_SetItem(d, k, v) : -1;
    Py_XDECREF(k);
    return r;
}

PyDoc_STRVAR(run_doc, "run(records, cls_idx, classes, cfg, tracks, reasons, rot_tables, rot_allocs, written, "
                      "outputs) -> issue_busy\n\nThe per-record loop of nkieval.perf.schedule (see there).");

static PyObject *run(PyObject *self, PyObject *args) {
    PyObject *records, *cls_idx_obj, *classes, *cfg, *tracks, *reasons, *rot_allocs, *written, *outputs;
    Py_ssize_t rot_tables;
    if (!PyArg_ParseTuple(args, "O!OO!O!O!O!nO!OO!", &PyList_Type, &records, &cls_idx_obj, &PyList_Type, &classes,
                          &PyTuple_Type, &cfg, &PyTuple_Type, &tracks, &PyTuple_Type, &reasons, &rot_tables,
                          &PyDict_Type, &rot_allocs, &written, &PyTuple_Type, &outputs))
        return NULL;
    State S;
    memset(&S, 0, sizeof(S));
    Py_buffer b_cls = {0}, b_start = {0}, b_end = {0}, b_occ = {0}, b_wait = {0}, b_pred = {0};
    PyObject *result = NULL, *queue_of = NULL;
    double *busy_sum = NULL;
    int64_t *busy_order = NULL;   /* tracks in order of their first DMA issue */
    char *busy_seen = NULL;
    Py_ssize_t n_busy = 0;

    /* cfg: (logical, serial, cores, sem, dma_fixed, dma_pipelined, n_dma, n_queues, any_ports,
     *       thr_on, f0, ramp, window, threshold, pool_keep) */
    if (PyTuple_GET_SIZE(cfg) != 15) { PyErr_SetString(PyExc_ValueError, "cfg: 15 items expected"); return NULL; }
    int64_t logical, serial, cores, dma_pipelined, n_dma, n_queues, any_ports, thr_on, pool_keep;
    double sem, dma_fixed, f0, ramp, window, threshold;
    if (item_i64(cfg, 0, &logical) < 0 || item_i64(cfg, 1, &serial) < 0 || item_i64(cfg, 2, &cores) < 0
        || item_f(cfg, 3, &sem) < 0 || item_f(cfg, 4, &dma_fixed) < 0 || item_i64(cfg, 5, &dma_pipelined) < 0
        || item_i64(cfg, 6, &n_dma) < 0 || item_i64(cfg, 7, &n_queues) < 0 || item_i64(cfg, 8, &any_ports) < 0
        || item_i64(cfg, 9, &thr_on) < 0 || item_f(cfg, 10, &f0) < 0 || item_f(cfg, 11, &ramp) < 0
        || item_f(cfg, 12, &window) < 0 || item_f(cfg, 13, &threshold) < 0 || item_i64(cfg, 14, &pool_keep) < 0)
        return NULL;
    if (cores < 1 || n_queues < 1 || n_dma < 1 || pool_keep < 2) {
        PyErr_SetString(PyExc_ValueError, "cfg: cores, queues, DMA engines >= 1 and pool keep >= 2 expected");
        return NULL;
    }
    S.cores = (int)cores;

    /* tracks: (names, eng_tracks [cores*5], ports_plain [cores*5 tuples], ports_psum [cores*5 tuples],
     *          queue_tracks [cores*n_queues], issuer_tracks [cores*n_issuers], n_issuers) */
    if (PyTuple_GET_SIZE(tracks) != 7) { PyErr_SetString(PyExc_ValueError, "tracks: 7 items expected"); return NULL; }
    PyObject *names = PyTuple_GET_ITEM(tracks, 0);
    if (!PyTuple_Check(names)) { PyErr_SetString(PyExc_TypeError, "track names: a tuple expected"); return NULL; }
    Py_ssize_t ntr = PyTuple_GET_SIZE(names);
    int64_t n_issuers;
    if (item_i64(tracks, 6, &n_issuers) < 0) return NULL;
    if (PyTuple_GET_SIZE(reasons) != R_ISSUE0 + n_issuers) {
        PyErr_SetString(PyExc_ValueError, "reasons: wrong length");
        return NULL;
    }
    int64_t *eng_tr = PyMem_Malloc(sizeof(int64_t) * (size_t)(cores * N_ENG));
    int64_t *q_tr = PyMem_Malloc(sizeof(int64_t) * (size_t)(cores * n_queues));
    int64_t *iss_tr = PyMem_Malloc(sizeof(int64_t) * (size_t)(cores * (n_issuers ? n_issuers : 1)));
    int64_t ports[2][64][2];   /* [plain/psum][core*5+eng][up to 2 ports]; -1: none */
    int64_t *queue_count = PyMem_Calloc((size_t)cores, sizeof(int64_t));
    if (!eng_tr || !q_tr || !iss_tr || !queue_count) { PyErr_NoMemory(); goto done; }
    if (cores * N_ENG > 64) { PyErr_SetString(PyExc_ValueError, "at most 12 cores"); goto done; }
    if (flat_ints(PyTuple_GET_ITEM(tracks, 1), eng_tr, cores * N_ENG) < 0
        || flat_ints(PyTuple_GET_ITEM(tracks, 4), q_tr, cores * n_queues) < 0
        || flat_ints(PyTuple_GET_ITEM(tracks, 5), iss_tr, cores * n_issuers) < 0)
        goto done;
    for (int pk = 0; pk < 2; pk++) {
        PyObject *pl = PySequence_Fast(PyTuple_GET_ITEM(tracks, 2 + pk), "ports: a sequence expected");
        if (!pl) goto done;
        if (PySequence_Fast_GET_SIZE(pl) != cores * N_ENG) {
            Py_DECREF(pl);
            PyErr_SetString(PyExc_ValueError, "ports: wrong length");
            goto done;
        }
        for (Py_ssize_t x = 0; x < cores * N_ENG; x++) {
            PyObject *t = PySequence_Fast_ITEMS(pl)[x];
            ports[pk][x][0] = ports[pk][x][1] = -1;
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > 2) {
                Py_DECREF(pl);
                PyErr_SetString(PyExc_ValueError, "ports: tuples of at most 2 expected");
                goto done;
            }
            for (Py_ssize_t y = 0; y < PyTuple_GET_SIZE(t); y++)
                if (item_i64(t, y, &ports[pk][x][y]) < 0) { Py_DECREF(pl); goto done; }
        }
        Py_DECREF(pl);
    }
    for (Py_ssize_t x = 0; x < cores * N_ENG; x++)
        if (eng_tr[x] < 0 || eng_tr[x] >= ntr) { PyErr_SetString(PyExc_ValueError, "track id"); goto done; }
    for (Py_ssize_t x = 0; x < cores * n_queues; x++)
        if (q_tr[x] < 0 || q_tr[x] >= ntr) { PyErr_SetString(PyExc_ValueError, "track id"); goto done; }
    for (Py_ssize_t x = 0; x < cores * n_issuers; x++)
        if (iss_tr[x] < 0 || iss_tr[x] >= ntr) { PyErr_SetString(PyExc_ValueError, "track id"); goto done; }
    for (int pk = 0; pk < 2; pk++)
        for (Py_ssize_t x = 0; x < cores * N_ENG; x++)
            for (int y = 0; y < 2; y++)
                if (ports[pk][x][y] >= ntr) { PyErr_SetString(PyExc_ValueError, "track id"); goto done; }

    S.ntracks = ntr;
    S.tfree = PyMem_Calloc((size_t)(ntr ? ntr : 1), sizeof(double));
    S.tlast = PyMem_Malloc(sizeof(int64_t) * (size_t)(ntr ? ntr : 1));
    busy_sum = PyMem_Calloc((size_t)(ntr ? ntr : 1), sizeof(double));
    busy_order = PyMem_Malloc(sizeof(int64_t) * (size_t)(ntr ? ntr : 1));
    busy_seen = PyMem_Calloc((size_t)(ntr ? ntr : 1), 1);
    S.books = PyMem_Calloc((size_t)(ntr ? ntr : 1), sizeof(Book));
    if (!S.tfree || !S.tlast || !busy_sum || !busy_order || !busy_seen || !S.books) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t x = 0; x < ntr; x++) { S.tlast[x] = -1; S.books[x].keep = pool_keep; }

    /* classes */
    S.ncls = PyList_GET_SIZE(classes);
    S.cls = PyMem_Calloc((size_t)(S.ncls ? S.ncls : 1), sizeof(Class));
    if (!S.cls) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t c = 0; c < S.ncls; c++) {
        if (parse_class(PyList_GET_ITEM(classes, c), &S.cls[c]) < 0) goto done;
        Class *k = &S.cls[c];
        if (k->eng < 0 || k->eng > ENG_DMA || k->issue >= n_issuers || (k->is_dma != (k->eng == ENG_DMA))) {
            PyErr_SetString(PyExc_ValueError, "class: bad engine or issue engine");
            goto done;
        }
        for (Py_ssize_t q = 0; q < k->nops; q++)
            if (k->ops[q].buf < 0 || k->ops[q].buf > 2 || k->ops[q].j < 0) {
                PyErr_SetString(PyExc_ValueError, "class op: bad buffer or position");
                goto done;
            }
    }
    Py_ssize_t n = PyList_GET_SIZE(records);
    if (PyObject_GetBuffer(cls_idx_obj, &b_cls, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (b_cls.itemsize != 8 || b_cls.len != n * 8) { PyErr_SetString(PyExc_ValueError, "cls_idx: int64 per record"); goto done; }
    const int64_t *cls_idx = (const int64_t *)b_cls.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (cls_idx[i] < 0 || cls_idx[i] >= S.ncls) { PyErr_SetString(PyExc_ValueError, "cls_idx out of range"); goto done; }

    /* outputs: (start, end, occ, wait, pred, reason, track, dma_plans, dma_slot, perf_mode, throttled) */
    if (PyTuple_GET_SIZE(outputs) != 11) { PyErr_SetString(PyExc_ValueError, "outputs: 11 items expected"); goto done; }
    Py_buffer *bufs[5] = {&b_start, &b_end, &b_occ, &b_wait, &b_pred};
    for (int x = 0; x < 5; x++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(outputs, x), bufs[x], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (bufs[x]->len != n * 8) { PyErr_SetString(PyExc_ValueError, "output arrays: 8 bytes per record"); goto done; }
    }
    double *o_start = b_start.buf, *o_end = b_end.buf, *o_occ = b_occ.buf, *o_wait = b_wait.buf;
    int64_t *o_pred = b_pred.buf;
    PyObject *o_reason = PyTuple_GET_ITEM(outputs, 5), *o_track = PyTuple_GET_ITEM(outputs, 6);
    PyObject *o_plans = PyTuple_GET_ITEM(outputs, 7), *o_slot = PyTuple_GET_ITEM(outputs, 8);
    PyObject *o_pmode = PyTuple_GET_ITEM(outputs, 9), *o_thr = PyTuple_GET_ITEM(outputs, 10);
    if (!PyList_Check(o_reason) || PyList_GET_SIZE(o_reason) != n || !PyList_Check(o_track)
        || PyList_GET_SIZE(o_track) != n || !PyDict_Check(o_plans) || !PyDict_Check(o_slot) || !PyDict_Check(o_pmode)
        || !PyDict_Check(o_thr)) {
        PyErr_SetString(PyExc_TypeError, "outputs: lists of one item per record and dicts expected");
        goto done;
    }

    /* tables: the rotation's shared tables, then the physical ones (2 per core), then one per allocation met */
    if (em_init(&S.em, 1024) < 0 || am_init(&S.am, 1024) < 0) goto done;
    for (Py_ssize_t x = 0; x < rot_tables; x++)
        if (new_table(&S) < 0) goto done;
    Py_ssize_t phys0 = S.ntabs;
    for (int64_t x = 0; x < 2 * cores; x++)
        if (new_table(&S) < 0) goto done;
    {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(rot_allocs, &pos, &k, &v)) {   /* alloc -> (table, pb, ab) */
            int64_t a, t, pb, ab;
            if (as_i64(k, &a) < 0 || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 3) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "rot_allocs: int -> 3-tuple");
                goto done;
            }
            if (item_i64(v, 0, &t) < 0 || item_i64(v, 1, &pb) < 0 || item_i64(v, 2, &ab) < 0) goto done;
            if (t < 0 || t >= rot_tables) { PyErr_SetString(PyExc_ValueError, "rot_allocs: table id"); goto done; }
            if (am_put(&S.am, a, (int32_t)t, pb, ab) < 0) goto done;
        }
    }
    S.pools = PyMem_Calloc((size_t)cores, sizeof(Pool));
    S.thr = PyMem_Calloc((size_t)cores, sizeof(Throttle));
    if (!S.pools || !S.thr) { PyErr_NoMemory(); goto done; }
    for (int c = 0; c < cores; c++) {
        S.pools[c].keep = pool_keep;
        Throttle *th = &S.thr[c];
        th->f0 = f0;
        th->ramp = ramp;
        th->window = window;
        th->need = threshold * window;
        th->since = -INFINITY;
        th->end = -INFINITY;
    }
    queue_of = PyDict_New();
    if (!queue_of) goto done;

    Reader rr, orr;
    readers_for(records, &rr, &orr);
    double global_end = 0.0;
    int64_t global_last = -1;
    int64_t seq = 0;
    int core = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        Class *k = &S.cls[cls_idx[i]];
        if (cores > 1) {
            int64_t prog;
            if (rd_i64(&rr, rec, R_PROGRAM, &prog) < 0) goto done;
            core = (int)(((prog % cores) + cores) % cores);
        }
        int eng = k->eng;
        /* ---- dependencies */
        double t_dep = 0.0;
        int64_t d_pred = -1;
        int d_reason = -1;
        S.nhits = S.nreads = S.nacc = 0;
        PyObject *ops = NULL;
        if (k->nops) {
            ops = rd(&rr, rec, R_OPERANDS);
            if (!ops) goto done;
            if (!PyList_Check(ops) && !PyTuple_Check(ops)) {
                Py_DECREF(ops);
                PyErr_SetString(PyExc_TypeError, "record operands: a list or tuple expected");
                goto done;
            }
        }
        for (Py_ssize_t q = 0; q < k->nops; q++) {
            OpInfo *oi = &k->ops[q];
            if (oi->j >= PySequence_Fast_GET_SIZE(ops)) {
                Py_DECREF(ops);
                PyErr_SetString(PyExc_IndexError, "operand position beyond the record's operands");
                goto done;
            }
            PyObject *o = PySequence_Fast_GET_ITEM(ops, oi->j);
            int64_t a;
            if (rd_i64(&orr, o, O_ALLOC, &a) < 0) { Py_DECREF(ops); goto done; }
            AllocSlot *as = am_slot(&S.am, a);
            int32_t tab;
            int64_t pb, ab;
            if (!as->used) {
                PyObject *ao = PyLong_FromLongLong(a);
                int w = ao ? PySet_Contains(written, ao) : -1;
                Py_XDECREF(ao);
                if (w < 0) { Py_DECREF(ops); goto done; }
                if (!w) tab = -1;                                 /* nothing writes it: no dependency */
                else if (!logical && oi->nparts) tab = -2;        /* physical, on-chip: the core's buffer table */
                else if ((tab = new_table(&S)) < 0) { Py_DECREF(ops); goto done; }
                if (am_put(&S.am, a, tab, 0, 0) < 0) { Py_DECREF(ops); goto done; }
                pb = ab = 0;
            } else {
                tab = as->tab;
                pb = as->pb;
                ab = as->ab;
            }
            if (tab == -1) continue;
            int64_t bk[5];
            if (oi->nparts) {
                if (tab == -2) tab = (int32_t)(phys0 + 2 * core + oi->buf);
                int64_t ps, lo, hi;
                if (rd_i64(&orr, o, O_PARTITION_START, &ps) < 0 || rd_i64(&orr, o, O_ADDR_LO, &lo) < 0
                    || rd_i64(&orr, o, O_ADDR_HI, &hi) < 0) { Py_DECREF(ops); goto done; }
                int64_t r0 = ps - pb;
                bk[0] = -1; bk[1] = r0; bk[2] = r0 + oi->nparts; bk[3] = lo - ab; bk[4] = hi - ab;
            } else {
                if (tab == -2) {   /* an allocation seen on-chip before, now as HBM: not produced by traces */
                    Py_DECREF(ops);
                    PyErr_SetString(PyExc_ValueError, "an allocation both on-chip and in HBM");
                    goto done;
                }
                int64_t lo, hi;
                if (rd_i64(&orr, o, O_ADDR_LO, &lo) < 0 || rd_i64(&orr, o, O_ADDR_HI, &hi) < 0) {
                    Py_DECREF(ops);
                    goto done;
                }
                bk[0] = 0; bk[1] = 0; bk[2] = 1; bk[3] = lo; bk[4] = hi;
                if (oi->pitch > 0) {
                    int64_t pitch = oi->pitch, width = hi - lo - oi->skip;
                    int64_t r0 = lo / pitch;
                    if ((lo % pitch != 0) && ((lo < 0) != (pitch < 0))) r0--;   /* floor division */
                    int64_t c0 = lo - r0 * pitch;
                    if (0 < width && c0 + width <= pitch) {
                        bk[0] = pitch; bk[1] = r0; bk[2] = r0 + oi->rows; bk[3] = c0; bk[4] = c0 + width;
                    }
                }
            }
            Table *t = &S.tabs[tab];
            Py_ssize_t h0 = S.nhits;
            Slot *ex = t->exact_valid ? em_find(&S.em, tab, bk) : NULL;
            if (ex) {
                if (grow((void **)&S.hits, &S.caphits, S.nhits + 1, sizeof(Ref)) < 0) { Py_DECREF(ops); goto done; }
                S.hits[S.nhits].tab = tab;
                S.hits[S.nhits].idx = ex->idx;
                S.nhits++;
            } else {
                for (Py_ssize_t r = 0; r < t->n; r++) {
                    if (overlaps(&t->e[r], bk[0], bk[1], bk[2], bk[3], bk[4])) {
                        if (grow((void **)&S.hits, &S.caphits, S.nhits + 1, sizeof(Ref)) < 0) { Py_DECREF(ops); goto done; }
                        S.hits[S.nhits].tab = tab;
                        S.hits[S.nhits].idx = (int32_t)r;
                        S.nhits++;
                    }
                }
            }
            Py_ssize_t nh = S.nhits - h0;
            if (oi->isw) {
                for (Py_ssize_t h = h0; h < S.nhits; h++) {
                    Entry *e = &S.tabs[S.hits[h].tab].e[S.hits[h].idx];
                    int cap = logical && e->alloc != a;
                    if (e->widx >= 0) {
                        if (oi->isr) {   /* RAW */
                            double tt = e->weng == eng ? e->wsame : e->wother;
                            if (tt > t_dep) { t_dep = tt; d_pred = e->widx; d_reason = e->wlabel; }
                        }
                        if (e->wend > t_dep) {   /* WAW */
                            t_dep = e->wend;
                            d_pred = e->widx;
                            d_reason = cap ? R_CAPACITY : e->wlabel;
                        }
                    }
                    if (e->rend > t_dep) {   /* WAR */
                        t_dep = e->rend;
                        d_pred = e->ridx;
                        d_reason = cap ? R_CAPACITY : R_WAR;
                    }
                }
            } else if (nh) {
                if (oi->isr) {
                    for (Py_ssize_t h = h0; h < S.nhits; h++) {
                        Entry *e = &S.tabs[S.hits[h].tab].e[S.hits[h].idx];
                        if (e->widx >= 0) {
                            double tt = e->weng == eng ? e->wsame : e->wother;
                            if (tt > t_dep) { t_dep = tt; d_pred = e->widx; d_reason = e->wlabel; }
                        }
                    }
                }
                if (grow((void **)&S.reads, &S.capreads, S.nreads + nh, sizeof(Ref)) < 0) { Py_DECREF(ops); goto done; }
                memcpy(S.reads + S.nreads, S.hits + h0, (size_t)nh * sizeof(Ref));
                S.nreads += nh;
                continue;
            }
            if (grow((void **)&S.acc, &S.capacc, S.nacc + 1, sizeof(Update)) < 0) { Py_DECREF(ops); goto done; }
            Update *u = &S.acc[S.nacc++];
            u->tab = tab;
            memcpy(u->bk, bk, sizeof(bk));
            u->isr = oi->isr;
            u->isw = oi->isw;
            u->h0 = h0;
            u->nh = nh;
            u->alloc = a;
        }
        Py_XDECREF(ops);
        if (serial && global_end > t_dep) { t_dep = global_end; d_pred = global_last; d_reason = R_PROGRAM_ORDER; }
        /* ---- issue */
        double st, en, o_cost, lat;
        int lbl, why = -1;
        int64_t tr, pr;
        double prev_free;
        if (k->is_dma) {
            if (set_obj_item(o_plans, i, k->plan) < 0) goto done;
            /* the queue: the record's own (attrs "queue": a spill queue) or its source line's */
            PyObject *attrs = rd(&rr, rec, R_ATTRS);
            if (!attrs) goto done;
            PyObject *qname = PyDict_Check(attrs) ? PyDict_GetItemString(attrs, "queue") : NULL;
            PyObject *qk;
            if (qname) {
                qk = Py_BuildValue("(iOO)", core, qname, Py_None);
                Py_DECREF(attrs);
            } else {
                Py_DECREF(attrs);
                PyObject *file = rd(&rr, rec, R_FILE);
                if (!file) goto done;
                PyObject *line = rd(&rr, rec, R_LINE);
                if (!line) { Py_DECREF(file); goto done; }
                qk = Py_BuildValue("(iNN)", core, file, line);
            }
            if (!qk) goto done;
            PyObject *qv = PyDict_GetItemWithError(queue_of, qk);
            if (qv) {
                if (as_i64(qv, &tr) < 0) { Py_DECREF(qk); goto done; }
            } else {
                if (PyErr_Occurred()) { Py_DECREF(qk); goto done; }
                tr = q_tr[core * n_queues + queue_count[core] % n_queues];
                queue_count[core]++;
                PyObject *tv = PyLong_FromLongLong(tr);
                int r = tv ? PyDict_SetItem(queue_of, qk, tv) : -1;
                Py_XDECREF(tv);
                if (r < 0) { Py_DECREF(qk); goto done; }
            }
            Py_DECREF(qk);
            prev_free = S.tfree[tr];
            pr = S.tlast[tr];
            double t0 = dma_pipelined ? 0.0 : prev_free;
            if (t_dep > t0) { t0 = t_dep; why = d_reason; pr = d_pred; }
            if (k->issue >= 0) {
                int64_t itr = iss_tr[core * n_issuers + k->issue];
                if (S.tfree[itr] > t0) { t0 = S.tfree[itr]; why = R_ISSUE0 + k->issue; pr = S.tlast[itr]; }
                S.tfree[itr] = t0 + k->issue_ns;
                if (!busy_seen[itr]) {
                    busy_seen[itr] = 1;
                    busy_order[n_busy++] = itr;
                }
                busy_sum[itr] = busy_sum[itr] + k->issue_ns;
                t0 += k->issue_ns;
            }
            double xs = t0 + dma_fixed;
            if (xs <= prev_free) { xs = prev_free; pr = S.tlast[tr]; }
            if (t0 < prev_free) t0 = prev_free;
            double svc = k->service_ns;
            double share = svc * (double)k->engines / (double)n_dma;
            double slot, dn;
            if (pool_reserve(&S.pools[core], xs, share, &slot, &dn) < 0) goto done;
            if (dn < xs + svc) dn = xs + svc;
            if (set_float_item(o_slot, i, slot) < 0) goto done;
            st = t0;
            en = dn;
            if (why == -1 && slot > xs + 1e-9) why = R_DMA_ENGINES;
            o_cost = en - st;
            lat = sem;
            lbl = R_DEP0 + ENG_DMA;
        } else {
            o_cost = k->occ;
            lat = k->lat;
            if (k->pmode && set_obj_item(o_pmode, i, k->pmode) < 0) goto done;
            int x = core * N_ENG + eng;
            tr = eng_tr[x];
            lbl = R_DEP0 + eng;
            prev_free = S.tfree[tr];
            pr = S.tlast[tr];
            double t0 = prev_free;
            if (t_dep > t0) { t0 = t_dep; why = d_reason; pr = d_pred; }
            if (thr_on && eng == ENG_TENSOR) {
                double full = o_cost;
                if (throttle_run(&S.thr[core], t0, full, &o_cost) < 0) goto done;
                if (o_cost > full && set_float_item(o_thr, i, o_cost - full) < 0) goto done;
            }
            if (any_ports) {
                /* a shared port goes to whichever instruction is ready, by time: the earliest moment >= t0 at
                 * which every port it needs has o_cost free (schedule.py's loop, the same steps) */
                int64_t *pp = ports[k->psum ? 1 : 0][x];
                Py_ssize_t jj;
                double at = t0;
                int moved = 1;
                while (moved) {
                    moved = 0;
                    for (int y = 0; y < 2; y++)
                        if (pp[y] >= 0) {
                            double xg = book_gap(&S.books[pp[y]], at, o_cost, &jj);
                            if (xg > at) { at = xg; moved = 1; }
                        }
                }
                if (at > t0) {
                    t0 = at;
                    why = R_PORT;
                    for (int y = 0; y < 2; y++)
                        if (pp[y] >= 0) {
                            double pe;
                            int64_t prec;
                            book_gap(&S.books[pp[y]], at, o_cost, &jj);
                            book_before(&S.books[pp[y]], jj, &pe, &prec);
                            if (pe == at) { pr = prec; break; }
                        }
                }
                st = t0;
                en = t0 + o_cost;
                for (int y = 0; y < 2; y++)
                    if (pp[y] >= 0) {
                        book_gap(&S.books[pp[y]], st, o_cost, &jj);
                        if (book_insert(&S.books[pp[y]], jj, st, en, i) < 0) goto done;
                    }
            } else {
                st = t0;
                en = t0 + o_cost;
            }
        }
        S.tfree[tr] = en;
        S.tlast[tr] = i;
        o_start[i] = st;
        o_end[i] = en;
        o_occ[i] = o_cost;
        double w = st - prev_free;
        if (w > 0) {
            o_wait[i] = w;
            PyObject *rs = why >= 0 ? PyTuple_GET_ITEM(reasons, why) : Py_None;
            Py_INCREF(rs);
            PyObject *old = PyList_GET_ITEM(o_reason, i);
            PyList_SET_ITEM(o_reason, i, rs);
            Py_XDECREF(old);
        }
        o_pred[i] = pr;
        {
            PyObject *tn = PyTuple_GET_ITEM(names, tr);
            Py_INCREF(tn);
            PyObject *old = PyList_GET_ITEM(o_track, i);
            PyList_SET_ITEM(o_track, i, tn);
            Py_XDECREF(old);
        }
        if (serial && en > global_end) { global_end = en; global_last = i; }
        /* ---- table updates: the reads' last reader first, then the writes and new read entries in operand order */
        for (Py_ssize_t r = 0; r < S.nreads; r++) {
            Entry *e = &S.tabs[S.reads[r].tab].e[S.reads[r].idx];
            if (en > e->rend) { e->rend = en; e->ridx = i; }
        }
        int64_t seq0 = seq;
        double same = eng == ENG_TENSOR ? en : en + lat;
        double other = en + (lat + sem);
        S.ntouched = 0;
        for (Py_ssize_t u_i = 0; u_i < S.nacc; u_i++) {
            Update *u = &S.acc[u_i];
            Table *t = &S.tabs[u->tab];
            const int64_t *bk = u->bk;
            if (u->isw) {
                Py_ssize_t killed = 0;
                for (Py_ssize_t h = u->h0; h < u->h0 + u->nh; h++) {
                    Entry *e = &t->e[S.hits[h].idx];
                    if (e->seq >= seq0 || e->pitch == DEAD_PITCH) continue;
                    if (e->pitch == bk[0] && bk[1] <= e->r0 && e->r1 <= bk[2] && bk[3] <= e->c0 && e->c1 <= bk[4]) {
                        if (t->exact_valid && e->r0 < e->r1 && e->c0 < e->c1) {
                            int64_t kk[5] = {e->pitch, e->r0, e->r1, e->c0, e->c1};
                            em_del(&S.em, u->tab, kk);
                        }
                        e->pitch = DEAD_PITCH;
                        killed++;
                    } else {
                        invalidate_exact(t, u->tab, &S.em);
                    }
                }
                if (killed) {
                    t->dead += killed;
                    if (t->dead >= t->n) {   /* every entry dead: the table starts afresh (disjoint again) */
                        invalidate_exact(t, u->tab, &S.em);
                        t->exact_valid = 1;
                    }
                }
            }
            if (grow((void **)&t->e, &t->cap, t->n + 1, sizeof(Entry)) < 0) goto done;
            int exact_ok = t->exact_valid;
            if (exact_ok) {   /* another entry of this record in the table: it stays disjoint only if they are */
                for (Py_ssize_t r = t->n - 1; r >= 0; r--) {
                    Entry *f = &t->e[r];
                    if (f->seq < seq0) break;
                    if (overlaps(f, bk[0], bk[1], bk[2], bk[3], bk[4])) {
                        invalidate_exact(t, u->tab, &S.em);
                        exact_ok = 0;
                        break;
                    }
                }
            }
            Entry *e = &t->e[t->n];
            e->pitch = bk[0]; e->r0 = bk[1]; e->r1 = bk[2]; e->c0 = bk[3]; e->c1 = bk[4];
            e->alloc = u->alloc;
            e->seq = seq++;
            if (u->isw) {
                e->wend = en; e->wsame = same; e->weng = eng; e->widx = i;
                e->rend = u->isr ? en : 0.0;
                e->ridx = u->isr ? i : -1;
                e->wlabel = lbl;
                e->wother = other;
            } else {
                e->wend = 0.0; e->wsame = 0.0; e->weng = -1; e->widx = -1;
                e->rend = en; e->ridx = i;
                e->wlabel = -1;
                e->wother = 0.0;
            }
            if (exact_ok && bk[1] < bk[2] && bk[3] < bk[4] && em_put(&S.em, u->tab, bk, (int32_t)t->n) < 0) goto done;
            t->n++;
            if (grow((void **)&S.touched, &S.captouched, S.ntouched + 1, sizeof(int32_t)) < 0) goto done;
            S.touched[S.ntouched++] = u->tab;
        }
        /* compaction only between records: the hits of this record point into the tables */
        for (Py_ssize_t x = 0; x < S.ntouched; x++) {
            Table *t = &S.tabs[S.touched[x]];
            if (t->dead && (t->dead >= t->n || (t->dead >= 16 && 2 * t->dead >= t->n)))
                compact(t, S.touched[x], &S.em);
        }
    }
    result = PyList_New(n_busy);
    if (!result) goto done;
    for (Py_ssize_t b = 0; b < n_busy; b++) {
        PyObject *item = Py_BuildValue("(Ld)", (long long)busy_order[b], busy_sum[busy_order[b]]);
        if (!item) { Py_CLEAR(result); goto done; }
        PyList_SET_ITEM(result, b, item);
    }
done:
    for (int x = 0; x < 5; x++) {
        Py_buffer *bb[5] = {&b_start, &b_end, &b_occ, &b_wait, &b_pred};
        if (bb[x]->obj) PyBuffer_Release(bb[x]);
    }
    if (b_cls.obj) PyBuffer_Release(&b_cls);
    Py_XDECREF(queue_of);
    PyMem_Free(eng_tr);
    PyMem_Free(q_tr);
    PyMem_Free(iss_tr);
    PyMem_Free(queue_count);
    PyMem_Free(busy_sum);
    PyMem_Free(busy_order);
    PyMem_Free(busy_seen);
    free_state(&S);
    return result;
}

/* the signature of ``rec`` compared with its line's recent ones (schedule._classify_loop): one flat tuple of the
 * operands' nine signature fields and (attrs, opcode, engine, file) for one to three operands, else a list of
 * one tuple per operand and that tail tuple */
static PyObject *signature_of(const Reader *rr, const Reader *orr, PyObject *rec, PyObject *ops) {   /* ops: list or tuple */
    Py_ssize_t nops = PySequence_Fast_GET_SIZE(ops);
    PyObject *tail[4];
    int tail_k[4] = {R_ATTRS, R_OPCODE, R_ENGINE, R_FILE};
    for (int k = 0; k < 4; k++) {
        if (!(tail[k] = rd(rr, rec, tail_k[k]))) {
            for (int x = 0; x < k; x++) Py_DECREF(tail[x]);
            return NULL;
        }
    }
    PyObject *sig;
    if (nops >= 1 && nops <= 3) {
        sig = PyTuple_New(9 * nops + 4);
        if (!sig) goto fail;
        for (Py_ssize_t q = 0; q < nops; q++) {
            PyObject *o = PySequence_Fast_GET_ITEM(ops, q);
            for (int f = 0; f < 9; f++) {
                PyObject *v = rd(orr, o, f);
                if (!v) { Py_DECREF(sig); goto fail; }
                PyTuple_SET_ITEM(sig, 9 * q + f, v);
            }
        }
        for (int k = 0; k < 4; k++) PyTuple_SET_ITEM(sig, 9 * nops + k, tail[k]);
        return sig;
    }
    sig = PyList_New(nops + 1);
    if (!sig) goto fail;
    for (Py_ssize_t q = 0; q < nops; q++) {
        PyObject *o = PySequence_Fast_GET_ITEM(ops, q), *t = PyTuple_New(9);
        if (!t) { Py_DECREF(sig); goto fail; }
        PyList_SET_ITEM(sig, q, t);
        for (int f = 0; f < 9; f++) {
            PyObject *v = rd(orr, o, f);
            if (!v) { Py_DECREF(sig); goto fail; }
            PyTuple_SET_ITEM(t, f, v);
        }
    }
    PyObject *t = PyTuple_New(4);
    if (!t) { Py_DECREF(sig); goto fail; }
    for (int k = 0; k < 4; k++) PyTuple_SET_ITEM(t, k, tail[k]);
    PyList_SET_ITEM(sig, nops, t);
    return sig;
fail:
    for (int k = 0; k < 4; k++) Py_DECREF(tail[k]);
    return NULL;
}

PyDoc_STRVAR(classify_doc, "classify(records, resolve, classes, written, idx)\n\nschedule._classify_loop, compiled: "
                           "each record's class into idx (int64 per record), written allocations (a class's write "
                           "positions: its item 2) into written.");

static PyObject *classify(PyObject *self, PyObject *args) {
    PyObject *records, *resolve, *classes, *written, *idx_obj;
    if (!PyArg_ParseTuple(args, "O!OO!O!O", &PyList_Type, &records, &resolve, &PyList_Type, &classes, &PySet_Type,
                          &written, &idx_obj))
        return NULL;
    Py_buffer b_idx = {0};
    if (PyObject_GetBuffer(idx_obj, &b_idx, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(records);
    PyObject *recent = NULL, *result = NULL;
    if (b_idx.len != n * 8) { PyErr_SetString(PyExc_ValueError, "idx: 8 bytes per record"); goto done; }
    int64_t *idx = b_idx.buf;
    Reader rr, orr;
    readers_for(records, &rr, &orr);
    recent = PyDict_New();   /* source line -> [latest signature, its class, previous signature, its class] */
    if (!recent) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        PyObject *ops = rd(&rr, rec, R_OPERANDS);
        if (!ops) goto done;
        if (!PyList_Check(ops) && !PyTuple_Check(ops)) {
            Py_DECREF(ops);
            PyErr_SetString(PyExc_TypeError, "record operands: a list or tuple expected");
            goto done;
        }
        PyObject *sig = signature_of(&rr, &orr, rec, ops);
        PyObject *line = sig ? rd(&rr, rec, R_LINE) : NULL;
        if (!line) { Py_XDECREF(sig); Py_DECREF(ops); goto done; }
        PyObject *rl = PyDict_GetItemWithError(recent, line);   /* borrowed */
        PyObject *m = NULL;   /* borrowed from rl, or owned (mown) */
        int mown = 0, hit = 0;
        if (rl) {
            hit = PyObject_RichCompareBool(PyList_GET_ITEM(rl, 0), sig, Py_EQ);
            if (hit < 0) goto fail_rec;
            if (hit) {
                m = PyList_GET_ITEM(rl, 1);
            } else {
                hit = PyObject_RichCompareBool(PyList_GET_ITEM(rl, 2), sig, Py_EQ);
                if (hit < 0) goto fail_rec;
                if (hit) {   /* the previous signature: it becomes the latest */
                    PyObject *s0 = PyList_GET_ITEM(rl, 0), *m0 = PyList_GET_ITEM(rl, 1), *m1 = PyList_GET_ITEM(rl, 3);
                    PyObject *s1 = PyList_GET_ITEM(rl, 2);
                    PyList_SET_ITEM(rl, 0, sig);   /* steals sig; s1 (== sig) released below */
                    PyList_SET_ITEM(rl, 1, m1);
                    PyList_SET_ITEM(rl, 2, s0);
                    PyList_SET_ITEM(rl, 3, m0);
                    Py_DECREF(s1);
                    sig = NULL;
                    m = m1;
                }
            }
        } else if (PyErr_Occurred()) {
            goto fail_rec;
        }
        if (!hit) {
            m = PyObject_CallFunction(resolve, "nO", i, rec);
            if (!m) goto fail_rec;
            mown = 1;
            if (!rl) {
                PyObject *nl = PyList_New(4);
                if (!nl) goto fail_rec;
                PyList_SET_ITEM(nl, 0, sig);
                Py_INCREF(m);
                PyList_SET_ITEM(nl, 1, m);
                Py_INCREF(Py_None);
                PyList_SET_ITEM(nl, 2, Py_None);
                Py_INCREF(Py_None);
                PyList_SET_ITEM(nl, 3, Py_None);
                sig = NULL;
                int r = PyDict_SetItem(recent, line, nl);
                Py_DECREF(nl);
                if (r < 0) goto fail_rec;
            } else {
                PyObject *s0 = PyList_GET_ITEM(rl, 0), *m0 = PyList_GET_ITEM(rl, 1);
                PyObject *s1 = PyList_GET_ITEM(rl, 2), *m1 = PyList_GET_ITEM(rl, 3);
                PyList_SET_ITEM(rl, 0, sig);
                Py_INCREF(m);
                PyList_SET_ITEM(rl, 1, m);
                PyList_SET_ITEM(rl, 2, s0);
                PyList_SET_ITEM(rl, 3, m0);
                Py_DECREF(s1);
                Py_DECREF(m1);
                sig = NULL;
            }
        }
        {
            int64_t k;
            if (as_i64(m, &k) < 0) goto fail_rec;
            if (k < 0 || k >= PyList_GET_SIZE(classes)) {
                PyErr_SetString(PyExc_ValueError, "resolve: class out of range");
                goto fail_rec;
            }
            idx[i] = k;
            PyObject *ck = PyList_GET_ITEM(classes, k);
            PyObject *wp = PyTuple_Check(ck) && PyTuple_GET_SIZE(ck) > 2 ? PyTuple_GET_ITEM(ck, 2) : NULL;
            if (!wp || !PyTuple_Check(wp)) {
                PyErr_SetString(PyExc_TypeError, "classes: tuples with the write positions (a tuple) at item 2 expected");
                goto fail_rec;
            }
            for (Py_ssize_t x = 0; x < PyTuple_GET_SIZE(wp); x++) {
                int64_t j;
                if (as_i64(PyTuple_GET_ITEM(wp, x), &j) < 0) goto fail_rec;
                if (j < 0 || j >= PySequence_Fast_GET_SIZE(ops)) {
                    PyErr_SetString(PyExc_IndexError, "write position beyond the record's operands");
                    goto fail_rec;
                }
                PyObject *a = rd(&orr, PySequence_Fast_GET_ITEM(ops, j), O_ALLOC);
                if (!a) goto fail_rec;
                int r = PySet_Add(written, a);
                Py_DECREF(a);
                if (r < 0) goto fail_rec;
            }
        }
        if (mown) Py_DECREF(m);
        Py_XDECREF(sig);
        Py_DECREF(line);
        Py_DECREF(ops);
        continue;
    fail_rec:
        if (mown) Py_DECREF(m);
        Py_XDECREF(sig);
        Py_DECREF(line);
        Py_DECREF(ops);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(recent);
    PyBuffer_Release(&b_idx);
    return result;
}

PyDoc_STRVAR(access_spans_doc,
             "access_spans(records) -> (first, last)\n\n"
             "nkieval.perf.rotation._access_spans: per on-chip allocation (an operand whose buffer is not 'hbm'), the\n"
             "positions in ``records`` of its first and of its last access, as two dicts.");

static PyObject *access_spans(PyObject *self, PyObject *args) {
    PyObject *records;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &records)) return NULL;
    Reader rr, orr;
    readers_for(records, &rr, &orr);
    int64_t *first = NULL, *last = NULL;   /* by allocation id: -1 never accessed */
    Py_ssize_t cap = 0;
    PyObject *df = NULL, *dl = NULL, *result = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *ops = rd(&rr, PyList_GET_ITEM(records, i), R_OPERANDS);
        if (!ops) goto done;
        PyObject *seq = PySequence_Fast(ops, "operands must be a sequence");
        Py_DECREF(ops);
        if (!seq) goto done;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
            PyObject *o = PySequence_Fast_GET_ITEM(seq, k);
            PyObject *buf = rd(&orr, o, O_BUFFER);
            if (!buf) { Py_DECREF(seq); goto done; }
            int eq = buf == hbm_str ? 1 : PyObject_RichCompareBool(buf, hbm_str, Py_EQ);
            Py_DECREF(buf);
            if (eq < 0) { Py_DECREF(seq); goto done; }
            if (eq) continue;
            int64_t a;
            if (rd_i64(&orr, o, O_ALLOC, &a) < 0) { Py_DECREF(seq); goto done; }
            if (a < 0 || a >= ((int64_t)1 << 26)) {   /* ids the Python loop takes (a dict, not an array) */
                Py_DECREF(seq);
                PyErr_SetString(PyExc_OverflowError, "access_spans: allocation id out of the array's range");
                goto done;
            }
            if (a >= cap) {
                Py_ssize_t nc = cap ? cap : 256;
                while (nc <= a) nc *= 2;
                int64_t *nf = PyMem_Realloc(first, (size_t)nc * sizeof(int64_t));
                if (!nf) { Py_DECREF(seq); PyErr_NoMemory(); goto done; }
                first = nf;
                int64_t *nl = PyMem_Realloc(last, (size_t)nc * sizeof(int64_t));
                if (!nl) { Py_DECREF(seq); PyErr_NoMemory(); goto done; }
                last = nl;
                for (Py_ssize_t x = cap; x < nc; x++) first[x] = last[x] = -1;
                cap = nc;
            }
            if (first[a] < 0) first[a] = i;
            last[a] = i;
        }
        Py_DECREF(seq);
    }
    if (!(df = PyDict_New()) || !(dl = PyDict_New())) goto done;
    for (Py_ssize_t a = 0; a < cap; a++) {
        if (first[a] < 0) continue;
        PyObject *key = PyLong_FromSsize_t(a), *f = PyLong_FromLongLong(first[a]), *l = PyLong_FromLongLong(last[a]);
        int bad = !key || !f || !l || PyDict_SetItem(df, key, f) < 0 || PyDict_SetItem(dl, key, l) < 0;
        Py_XDECREF(key);
        Py_XDECREF(f);
        Py_XDECREF(l);
        if (bad) goto done;
    }
    result = PyTuple_Pack(2, df, dl);
done:
    Py_XDECREF(df);
    Py_XDECREF(dl);
    PyMem_Free(first);
    PyMem_Free(last);
    return result;
}

/* ---------------------------------------------------------------- the SBUF spill estimate's loops
 *
 * sbuf_accesses() reads the trace's SBUF operands into rows (spill.py's _sbuf_accesses); spill.py turns them into
 * sorted access events (numpy) and calls belady(), which does what is done once per event: the residency and
 * dirtiness flags, the byte counts and the max-heap of next accesses that picks Belady's victim (spill.py's
 * _belady). The Python loops stay the reference: tests/perf hold the two to identical outputs. */

typedef struct {
    int64_t next;  /* the unit's next access: larger first */
    int64_t unit;  /* then the smaller unit (the Python walk's heap of (-next, unit) tuples) */
} HeapItem;

static int heap_before(const HeapItem *a, const HeapItem *b) {
    return a->next > b->next || (a->next == b->next && a->unit < b->unit);
}

static void heap_push(HeapItem *h, Py_ssize_t *n, HeapItem x) {
    Py_ssize_t i = (*n)++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!heap_before(&x, &h[p])) break;
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
        if (c + 1 < *n && heap_before(&h[c + 1], &h[c])) c++;
        if (!heap_before(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = x;
    return top;
}

static int buffer_len64(Py_buffer *b, const char *name, Py_ssize_t *len) {
    if (b->len % 8) {
        PyErr_Format(PyExc_ValueError, "belady: %s is not an int64 array", name);
        return -1;
    }
    *len = b->len / 8;
    return 0;
}

PyDoc_STRVAR(belady_doc,
             "belady(seq, unit, next_seq, flags, bounds, size, parts, capacity) -> (totals, moves)\n\n"
             "The eviction walk of nkieval.perf.spill._belady over int64 buffers: totals is [save, reload, evictions,\n"
             "peak, overfull, refill]; moves is the bytes of an int64 array of (before, kind, unit) rows in the order made.");

/* spill.py's EV_* event flags */
enum { EV_DIRTIES = 1, EV_CONSTANT = 2, EV_OVERWRITES = 4, EV_NEXT_OVERWRITES = 8, EV_WRITES = 16 };

static PyObject *belady(PyObject *self, PyObject *args) {
    Py_buffer bs, bu, bn, bd, bb, bz, bp;
    long long capacity;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*L", &bs, &bu, &bn, &bd, &bb, &bz, &bp, &capacity)) return NULL;
    PyObject *result = NULL;
    char *flags = NULL;
    int64_t *cur_next = NULL, *moves = NULL;
    HeapItem *heap = NULL;
    Py_ssize_t n_ev, n_u, n_n, n_d, n_b, n_units, n_p;
    if (buffer_len64(&bs, "seq", &n_ev) || buffer_len64(&bu, "unit", &n_u) || buffer_len64(&bn, "next_seq", &n_n) ||
        buffer_len64(&bd, "flags", &n_d) || buffer_len64(&bb, "bounds", &n_b) || buffer_len64(&bz, "size", &n_units) ||
        buffer_len64(&bp, "parts", &n_p))
        goto done;
    if (n_u != n_ev || n_n != n_ev || n_d != n_ev || n_p != n_units || n_b < 1) {
        PyErr_SetString(PyExc_ValueError, "belady: array lengths disagree");
        goto done;
    }
    const int64_t *seq = bs.buf, *unit = bu.buf, *nxt = bn.buf, *evf = bd.buf, *bounds = bb.buf;
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
    /* per unit: bit 1 resident, 2 evicted, 4 dirty (contents exist nowhere else), 8 constant (a memset can make
     * its contents again), 16 its contents are dead (its next access overwrites it) */
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
    int64_t save = 0, reload = 0, evictions = 0, peak = 0, overfull = 0, refill = 0;
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
                if (flags[v] & 16) {
                    flags[v] &= ~4; /* dead: the next access overwrites it */
                } else if (flags[v] & 4) {
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
                        if (evf[e] & EV_OVERWRITES) {
                            /* written whole before it is read: nothing to bring back */
                        } else if (flags[u] & 8) {
                            refill += size[u] * parts[u];
                            MOVE(s, 3, u);
                        } else {
                            reload += size[u] * parts[u];
                            MOVE(s, 1, u);
                        }
                        flags[u] &= ~2;
                    }
                    flags[u] |= 1;
                    used += size[u];
                }
            }
            for (Py_ssize_t e = i; e < j; e++) {
                int64_t u = unit[e];
                int64_t f = evf[e];
                if (f & EV_WRITES) {
                    flags[u] = (char)((flags[u] & ~8) | ((f & EV_CONSTANT) ? 8 : 0));
                    if (f & EV_OVERWRITES) flags[u] &= ~4;
                }
                if (f & EV_DIRTIES) flags[u] |= 4;
                flags[u] = (char)((flags[u] & ~16) | ((f & EV_NEXT_OVERWRITES) ? 16 : 0));
                cur_next[u] = nxt[e];
                if (nxt[e] >= 0) {
                    HeapItem x = {nxt[e], u};
                    heap_push(heap, &n_heap, x);
                } else {
                    flags[u] &= ~(1 | 4 | 8 | 16);
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
        result = Py_BuildValue("[LLLLLL]N", (long long)save, (long long)reload, (long long)evictions,
                               (long long)peak, (long long)overfull, (long long)refill, mv);
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
             "flags) for the SBUF operands of records on allocations in the set spillable, as the bytes of an\n"
             "int64 array. Raises OverflowError for a value beyond 64 bits (the Python loop takes those).");

/* 1 if ``v`` equals the interned string ``s``, 0 if not, -1 on error */
static int str_is(PyObject *v, PyObject *s) {
    return v == s ? 1 : PyObject_RichCompareBool(v, s, Py_EQ);
}

/* 1 if the str attribute ``k`` of ``obj`` contains ``ch``, 0 if not, -1 on error */
static int rd_has(const Reader *r, PyObject *obj, int k, Py_UCS4 ch) {
    PyObject *v = rd(r, obj, k);
    if (!v) return -1;
    int has = 0;
    if (PyUnicode_Check(v)) {
        Py_ssize_t at = PyUnicode_FindChar(v, ch, 0, PyUnicode_GET_LENGTH(v), 1);
        has = at >= 0 ? 1 : (at == -1 ? 0 : -1);
    }
    Py_DECREF(v);
    return has;
}

/* 1 if the attribute ``k`` of ``obj`` equals the interned string ``s``, 0 if not, -1 on error */
static int rd_is(const Reader *r, PyObject *obj, int k, PyObject *s) {
    PyObject *v = rd(r, obj, k);
    if (!v) return -1;
    int eq = str_is(v, s);
    Py_DECREF(v);
    return eq;
}

/* spill.py's ROW_* access flags */
enum { ROW_DIRTIES = 1, ROW_READS = 2, ROW_WRITES = 4, ROW_CONSTANT = 8, ROW_DENSE = 16 };

static PyObject *sbuf_accesses(PyObject *self, PyObject *args) {
    PyObject *records, *spillable;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &records, &PySet_Type, &spillable)) return NULL;
    Reader rr, orr;
    readers_for(records, &rr, &orr);
    Py_ssize_t n_rows = 0, cap = 1024;
    int64_t *rows = malloc(sizeof(int64_t) * 7 * cap);
    PyObject *result = NULL;
    if (!rows) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *r = PyList_GET_ITEM(records, i);
        PyObject *ops = rd(&rr, r, R_OPERANDS);
        if (!ops) goto done;
        PyObject *seq_ops = PySequence_Fast(ops, "operands must be a sequence");
        Py_DECREF(ops);
        if (!seq_ops) goto done;
        Py_ssize_t n_ops = PySequence_Fast_GET_SIZE(seq_ops);
        PyObject **items = PySequence_Fast_ITEMS(seq_ops);
        int from_hbm = -2;  /* not yet known: only a write to a spillable SBUF range needs it */
        int is_memset = -2;  /* likewise */
        int64_t seq = 0;
        int have_seq = 0;
        for (Py_ssize_t k = 0; k < n_ops; k++) {
            PyObject *o = items[k];
            int is_sbuf = rd_is(&orr, o, O_BUFFER, sbuf_str);
            if (is_sbuf < 0) goto fail_rec;
            if (!is_sbuf) continue;
            PyObject *alloc = rd(&orr, o, O_ALLOC);
            if (!alloc) goto fail_rec;
            int in = PySet_Contains(spillable, alloc);
            Py_DECREF(alloc);
            if (in < 0) goto fail_rec;
            if (!in) continue;
            int writes = rd_has(&orr, o, O_MODE, 'w');
            if (writes < 0) goto fail_rec;
            int reads = rd_has(&orr, o, O_MODE, 'r');
            if (reads < 0) goto fail_rec;
            int64_t row_flags = (reads ? ROW_READS : 0) | (writes ? ROW_WRITES : 0);
            if (writes && is_memset == -2) {
                is_memset = rd_is(&rr, r, R_OPCODE, memset_str);
                if (is_memset < 0) goto fail_rec;
            }
            if (writes && is_memset) {
                row_flags |= ROW_CONSTANT;
            } else if (writes) {
                if (from_hbm == -2) {
                    int dma = rd_is(&rr, r, R_ENGINE, dma_str);
                    if (dma < 0) goto fail_rec;
                    from_hbm = 0;
                    for (Py_ssize_t m = 0; dma && m < n_ops && !from_hbm; m++) {
                        int hbm = rd_is(&orr, items[m], O_BUFFER, hbm_str);
                        int reads = hbm > 0 ? rd_has(&orr, items[m], O_MODE, 'r') : 0;
                        if (hbm < 0 || reads < 0) goto fail_rec;
                        from_hbm = hbm && reads;
                    }
                }
                if (!from_hbm) row_flags |= ROW_DIRTIES;
            }
            if (!have_seq) {
                if (rd_i64(&rr, r, R_SEQ, &seq) < 0) goto fail_rec;
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
            int64_t *row = rows + 7 * n_rows, parts, nbytes;
            row[0] = seq;
            if (rd_i64(&orr, o, O_ALLOC, &row[1]) < 0 || rd_i64(&orr, o, O_ADDR_LO, &row[2]) < 0 ||
                rd_i64(&orr, o, O_ADDR_HI, &row[3]) < 0 || rd_i64(&orr, o, O_PARTITION_START, &row[4]) < 0 ||
                rd_i64(&orr, o, O_PARTITIONS, &parts) < 0 || rd_i64(&orr, o, O_NBYTES, &nbytes) < 0)
                goto fail_rec;
            row[5] = row[4] + parts;
            if (nbytes == (row[3] - row[2]) * parts) row_flags |= ROW_DENSE;
            row[6] = row_flags;
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
    {"run", run, METH_VARARGS, run_doc},
    {"access_spans", access_spans, METH_VARARGS, access_spans_doc},
    {"classify", classify, METH_VARARGS, classify_doc},
    {"belady", belady, METH_VARARGS, belady_doc},
    {"sbuf_accesses", sbuf_accesses, METH_VARARGS, sbuf_accesses_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_schedule_c", "The scheduler's per-record loop in C (see nkieval.perf.schedule).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__schedule_c(void) {
    if (!(hbm_str = PyUnicode_InternFromString("hbm")) || !(sbuf_str = PyUnicode_InternFromString("sbuf")) ||
        !(dma_str = PyUnicode_InternFromString("dma")) || !(memset_str = PyUnicode_InternFromString("memset")))
        return NULL;
    for (int k = 0; k < N_REC_FIELDS; k++)
        if (!(rec_fields[k] = PyUnicode_InternFromString(rec_field_names[k]))) return NULL;
    for (int k = 0; k < N_OP_FIELDS; k++)
        if (!(op_fields[k] = PyUnicode_InternFromString(op_field_names[k]))) return NULL;
    return PyModule_Create(&module);
}
