/* canonical's levels (scheduler/matching/solve.py) over plain double and int64 buffers.
 *
 * canonical fixes one optimal matching whatever the solver found: from the largest position
 * down, the jobs of each (kind, position) in row order take its slots in the order they start.
 * In NumPy that is a handful of sorts and gathers per position, each a fixed cost on a plan's
 * few hundred slots. The Python function is the reference: the same orders (every key here is
 * a total order, as NumPy's stable lexsort makes it) and the same sums of starts come out, and
 * tests/matching/test_matching_native_solve.py compares both.
 *
 * canonical_levels(rows, machine, position, slot_kind, ready, times, out_rows, out_machine)
 *   rows, machine (already named as canonical names queues), position, slot_kind: int64, one
 *   per matched job; ready: float64, one per machine, when its slot at the current position
 *   starts (the machines' waits at first; moved); times: float64 jobs x kinds. Writes each
 *   matched job's row and machine into out_rows and out_machine.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_buffers.h"
#include "_canonical.h"
#include "_bound.h"
#include "_uncontended.h"
#include <stdint.h>
#include <math.h>
#include <stdlib.h>

static PyObject *canonical_levels(PyObject *self, PyObject *args) {
    PyObject *objects[8];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4], &objects[5], &objects[6],
                          &objects[7]))
        return NULL;
    static const Wanted wanted[8] = {{'q', 0, 1, "rows"},  {'q', 0, 1, "machine"}, {'q', 0, 1, "position"}, {'q', 0, 1, "slot_kind"},
                                     {'d', 1, 1, "ready"}, {'d', 0, 2, "times"},   {'q', 1, 1, "out_rows"}, {'q', 1, 1, "out_machine"}};
    Py_buffer views[8];
    int taken = take_all(objects, views, wanted, 8);
    PyObject *result = NULL;
    int64_t *level = NULL, *space = NULL;
    if (taken == 8 && !overlapping(views, wanted, 8, "canonical_levels")) {
        Py_ssize_t count = views[0].len / 8, machines = views[4].len / 8;
        Py_ssize_t job_count = views[5].shape[0], kind_count = views[5].shape[1];
        const int64_t *rows = views[0].buf, *machine = views[1].buf, *position = views[2].buf, *slot_kind = views[3].buf;
        double *ready = views[4].buf;
        const double *times = views[5].buf;
        int64_t *out_rows = views[6].buf, *out_machine = views[7].buf, largest = 0;
        int valid = views[1].len / 8 == count && views[2].len / 8 == count && views[3].len / 8 == count && views[6].len / 8 == count &&
                    views[7].len / 8 == count;
        for (Py_ssize_t i = 0; valid && i < count; i++) {
            valid = rows[i] >= 0 && rows[i] < job_count && machine[i] >= 0 && machine[i] < machines && slot_kind[i] >= 0 &&
                    slot_kind[i] < kind_count && position[i] >= 0;
            if (position[i] > largest) largest = position[i];
        }
        int fits = valid && levels_fit(count, job_count, kind_count, largest);
        if (fits) {
            level = PyMem_Malloc(sizeof(int64_t) * (size_t)(count + 1));
            space = PyMem_Calloc(levels_space(count, job_count, kind_count, largest), sizeof(int64_t));
        }
        if (!valid) {
            PyErr_SetString(PyExc_ValueError, "canonical_levels: per matched job a row of times, a machine of ready, a kind of times, a position");
        } else if (!fits) {
            PyErr_Format(PyExc_ValueError, "canonical_levels: position %lld: its levels by kind (%zd kinds) cannot be laid out", (long long)largest,
                         kind_count);
        } else if (level == NULL || space == NULL) {
            PyErr_NoMemory();
        } else {
            levels_of(count, rows, machine, position, slot_kind, ready, times, job_count, kind_count, largest, out_rows, out_machine, level,
                      space);
            result = Py_None;
            Py_INCREF(result);
        }
    }
    PyMem_Free(level);
    PyMem_Free(space);
    release_all(views, taken);
    return result;
}

/* uncontended_plan(rows, fastest, machine_kind, delay, kind_count, bounds, queued, used)
 *   allox._Left.uncontended's plan: rows (int64, rows of every job, ascending), fastest (int64,
 *   each row's strictly fastest kind index, or -1), machine_kind (int64) and delay (float64) per
 *   machine. The free machines (waiting 0) by kind, then as listed (_Left._free_machines'
 *   order); each row on the next free machine of its fastest kind, the rows in order. Writes
 *   bounds (int64, machines + 1: each machine's queue, one row or none), queued (int64, one per
 *   row: the rows by machine) and used (int64, one per row: the machines, ascending); returns
 *   False without writing them when a row has no fastest kind or a kind too few free machines. */
static PyObject *uncontended_plan(PyObject *self, PyObject *args) {
    PyObject *objects[7];
    Py_ssize_t kind_count;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOnOOO", &objects[0], &objects[1], &objects[2], &objects[3], &kind_count, &objects[4], &objects[5],
                          &objects[6]))
        return NULL;
    static const Wanted wanted[7] = {{'q', 0, 1, "rows"},   {'q', 0, 1, "fastest"}, {'q', 0, 1, "machine_kind"}, {'d', 0, 1, "delay"},
                                     {'q', 1, 1, "bounds"}, {'q', 1, 1, "queued"},  {'q', 1, 1, "used"}};
    Py_buffer views[7];
    int taken = take_all(objects, views, wanted, 7);
    PyObject *result = NULL;
    /* Per kind: its free machines, the rows whose fastest kind it is, where those rows begin
     * in by_kind (the rows grouped by kind, in row order), how many of them are placed. */
    int64_t *free_count = NULL, *needed = NULL, *first = NULL, *placed = NULL, *by_kind = NULL;
    if (taken == 7 && !overlapping(views, wanted, 7, "uncontended_plan")) {
        Py_ssize_t count = views[0].len / 8, job_count = views[1].len / 8, machines = views[2].len / 8;
        const int64_t *rows = views[0].buf, *fastest = views[1].buf, *machine_kind = views[2].buf;
        const double *delay = views[3].buf;
        int64_t *bounds = views[4].buf, *queued = views[5].buf, *used = views[6].buf;
        int valid = kind_count >= 0 && views[3].len / 8 == machines && views[4].len / 8 == machines + 1 && views[5].len / 8 == count &&
                    views[6].len / 8 == count;
        if (valid) {
            free_count = PyMem_Calloc((size_t)kind_count + 1, sizeof(int64_t));
            needed = PyMem_Calloc((size_t)kind_count + 1, sizeof(int64_t));
            first = PyMem_Calloc((size_t)kind_count + 1, sizeof(int64_t));
            placed = PyMem_Calloc((size_t)kind_count + 1, sizeof(int64_t));
            by_kind = PyMem_Malloc(sizeof(int64_t) * ((size_t)count + 1));
        }
        if (valid && (free_count == NULL || needed == NULL || first == NULL || placed == NULL || by_kind == NULL)) {
            PyErr_NoMemory();
        } else {
            /* One pass over the machines checks their kinds and counts the free ones of each. */
            for (Py_ssize_t m = 0; valid && m < machines; m++) {
                valid = machine_kind[m] >= 0 && machine_kind[m] < kind_count;
                if (valid && delay[m] == 0.0) free_count[machine_kind[m]] += 1;
            }
            for (Py_ssize_t i = 0; valid && i < count; i++) valid = rows[i] >= 0 && rows[i] < job_count && fastest[rows[i]] < kind_count;
            if (!valid) {
                PyErr_SetString(PyExc_ValueError, "uncontended_plan: rows of fastest, a wait per machine, kinds below kind_count");
            } else {
                int written = rows_by_fastest_kind(rows, count, fastest, kind_count, free_count, needed, first, placed, by_kind);
                if (written) {
                    /* The second pass: each kind's rows, in row order, on its free machines as
                     * listed (the k-th row of a kind on the k-th free machine of the kind). */
                    Py_ssize_t at = 0;
                    for (Py_ssize_t m = 0; m < machines; m++) {
                        bounds[m] = at;
                        int64_t kind = machine_kind[m];
                        if (delay[m] == 0.0 && placed[kind] < needed[kind]) {
                            queued[at] = by_kind[first[kind] + placed[kind]++];
                            used[at] = m;
                            at++;
                        }
                    }
                    bounds[machines] = at;
                }
                result = PyBool_FromLong(written);
            }
        }
    }
    PyMem_Free(free_count);
    PyMem_Free(needed);
    PyMem_Free(first);
    PyMem_Free(placed);
    PyMem_Free(by_kind);
    release_all(views, taken);
    return result;
}

/* The waits, ascending (qsort's order among equal waits does not matter: only how many are
 * below a value is read). */
static int wait_order(const void *left, const void *right) {
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

/* vacancy_needs(times, kind, other, shift, waits, counts, total) -> rows beyond 64 terms
 *   allox._Vacancy._needs: for every row of times (float64 jobs x kinds), with limit = its time
 *   on kind + shift (shift: the class's wait less the tolerance, as Python subtracts it) and
 *   step its time on other, where both are finite and step > 0 (else 0 and 1): the sum over
 *   n = 1 .. count of the counts (float64, one per wait of waits, float64) of the waits below
 *   limit - step * n, count the largest floor(max(limit, 0) / step) of every row, at most 64.
 *   Every sum is of whole numbers, so exact in any order: the NumPy path's value. Writes total
 *   (float64, one per row); returns how many rows have more than 64 terms (the caller sums those
 *   over the machines, as the NumPy path does). live (optional, int64, one per row): the rows
 *   whose need is asked (Algorithm 2's waiting rows); the others get 0.0, and every asked row
 *   its sum as without it (the terms and the rows beyond 64 are counted over every row). */
static PyObject *vacancy_needs(PyObject *self, PyObject *args) {
    PyObject *objects[5] = {NULL, NULL, NULL, NULL, Py_None};
    Py_ssize_t kind, other;
    double shift;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnndOOO|O", &objects[0], &kind, &other, &shift, &objects[1], &objects[2], &objects[3], &objects[4]))
        return NULL;
    static const Wanted wanted[5] = {{'d', 0, 2, "times"}, {'d', 0, 1, "waits"}, {'d', 0, 1, "counts"}, {'d', 1, 1, "total"},
                                     {'q', 0, 1, "live"}};
    int asked = objects[4] != Py_None ? 5 : 4;
    Py_buffer views[5];
    int taken = take_all(objects, views, wanted, asked);
    PyObject *result = NULL;
    double *sorted = NULL, *below = NULL;
    if (taken == asked) {
        Py_ssize_t rows = views[0].shape[0], kind_count = views[0].shape[1], count = views[1].len / 8;
        const double *times = views[0].buf, *waits = views[1].buf, *counts = views[2].buf;
        const int64_t *live = asked == 5 ? views[4].buf : NULL;
        double *total = views[3].buf;
        int valid = kind >= 0 && kind < kind_count && other >= 0 && other < kind_count && views[2].len / 8 == count && views[3].len / 8 == rows &&
                    (live == NULL || views[4].len / 8 == rows);
        for (Py_ssize_t j = 0; valid && j < count; j++) valid = waits[j] == waits[j];
        if (valid) {
            sorted = PyMem_Malloc(sizeof(double) * 2 * ((size_t)count + 1));
            below = PyMem_Malloc(sizeof(double) * ((size_t)count + 1));
        }
        if (!valid) {
            PyErr_SetString(PyExc_ValueError, "vacancy_needs: kinds of times, a count per wait (no NaN), a total (and a live flag) per row");
        } else if (sorted == NULL || below == NULL) {
            PyErr_NoMemory();
        } else {
            /* The waits sorted with their counts (pairs), then below[i]: the counts of the i smallest. */
            for (Py_ssize_t j = 0; j < count; j++) {
                sorted[2 * j] = waits[j];
                sorted[2 * j + 1] = counts[j];
            }
            qsort(sorted, (size_t)count, 2 * sizeof(double), wait_order);
            below[0] = 0.0;
            for (Py_ssize_t j = 0; j < count; j++) below[j + 1] = below[j] + sorted[2 * j + 1];
            double largest = 0.0;
            Py_ssize_t beyond = 0;
            for (Py_ssize_t i = 0; i < rows; i++) {
                double own = times[i * kind_count + kind], time = times[i * kind_count + other];
                int usable = isfinite(own) && isfinite(time) && time > 0;
                double limit = usable ? own + shift : 0.0, step = usable ? time : 1.0;
                /* floor(x) for x >= 0, read off x itself (no libm): floor(x) > 64 when x >= 65,
                 * and the largest floor is the floor of the largest x. */
                double ratio = (limit > 0.0 ? limit : 0.0) / step;
                if (ratio > largest) largest = ratio;
                beyond += ratio >= 65.0;
            }
            int64_t terms = largest >= 64.0 ? 64 : (int64_t)largest;
            for (Py_ssize_t i = 0; i < rows; i++) {
                if (live != NULL && live[i] == 0) {
                    total[i] = 0.0;
                    continue;
                }
                double own = times[i * kind_count + kind], time = times[i * kind_count + other];
                int usable = isfinite(own) && isfinite(time) && time > 0;
                double limit = usable ? own + shift : 0.0, step = usable ? time : 1.0, sum = 0.0;
                /* reach falls as n rises (each rounding is monotone), so the waits below it only
                 * shrink: each n's search starts from the last one's answer, walking down a few
                 * waits before it bisects, and once no wait is below reach no later term adds
                 * anything (below[0] is 0, and a sum plus 0 is the sum). */
                Py_ssize_t found = count;
                for (int64_t n = 1; n <= terms && found > 0; n++) {
                    double reach = limit - step * (double)n;
                    /* How many waits are below reach: the first index at or above it. */
                    Py_ssize_t low = found, walked = 0;
                    while (low > 0 && walked < 8 && !(sorted[2 * (low - 1)] < reach)) {
                        low--;
                        walked++;
                    }
                    if (low > 0 && !(sorted[2 * (low - 1)] < reach)) {
                        Py_ssize_t high = low;
                        low = 0;
                        while (low < high) {
                            Py_ssize_t middle = low + (high - low) / 2;
                            if (sorted[2 * middle] < reach) low = middle + 1;
                            else high = middle;
                        }
                    }
                    found = low;
                    sum += below[low];
                }
                total[i] = sum;
            }
            result = PyLong_FromSsize_t(beyond);
        }
    }
    PyMem_Free(sorted);
    PyMem_Free(below);
    release_all(views, taken);
    return result;
}

static int need_order(const void *left, const void *right) {
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

/* vacancy_empty(rows, positive, runnable, need, machine_kind, delay, position) -> bool
 *   allox._Vacancy.empty's test once its need is known: rows (int64, rows of every job),
 *   positive and runnable (int64, 0 or 1: per row, and per row and kind, jobs x kinds), need
 *   (float64, per row: N for machine position's class), machine_kind (int64) and delay
 *   (float64) per machine. The same steps: False when a row takes no time on a kind it can run
 *   on; else, with r the machines of position's kind and wait listed before it and N the need
 *   of the rows that can run on its kind, whether max over t of min(#{N <= t}, |rows| - t) is at
 *   most r (the same early answers, the same float comparisons). */
static PyObject *vacancy_empty(PyObject *self, PyObject *args) {
    PyObject *objects[6];
    Py_ssize_t position;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOn", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4], &objects[5], &position))
        return NULL;
    static const Wanted wanted[6] = {{'q', 0, 1, "rows"}, {'q', 0, 1, "positive"},     {'q', 0, 2, "runnable"},
                                     {'d', 0, 1, "need"}, {'q', 0, 1, "machine_kind"}, {'d', 0, 1, "delay"}};
    Py_buffer views[6];
    int taken = take_all(objects, views, wanted, 6);
    PyObject *result = NULL;
    double *outside = NULL;
    if (taken == 6) {
        Py_ssize_t count = views[0].len / 8, jobs = views[1].len / 8, kind_count = views[2].shape[1], machines = views[4].len / 8;
        const int64_t *rows = views[0].buf, *positive = views[1].buf, *runnable = views[2].buf, *machine_kind = views[4].buf;
        const double *need = views[3].buf, *delay = views[5].buf;
        int valid = views[2].shape[0] == jobs && views[3].len / 8 == jobs && views[5].len / 8 == machines && position >= 0 &&
                    position < machines && machine_kind[position] >= 0 && machine_kind[position] < kind_count;
        for (Py_ssize_t i = 0; valid && i < count; i++) valid = rows[i] >= 0 && rows[i] < jobs;
        if (valid) outside = PyMem_Malloc(sizeof(double) * ((size_t)count + 1));
        if (!valid) {
            PyErr_SetString(PyExc_ValueError, "vacancy_empty: rows of positive, runnable and need; a machine's kind of runnable");
        } else if (outside == NULL) {
            PyErr_NoMemory();
        } else {
            int empty = 1, decided = 0;
            for (Py_ssize_t i = 0; i < count; i++) {
                if (!positive[rows[i]]) {
                    empty = 0;
                    decided = 1;
                    break;
                }
            }
            if (!decided) {
                int64_t kind = machine_kind[position];
                double wait = delay[position];
                Py_ssize_t before = 0, size = 0;
                for (Py_ssize_t m = 0; m < position; m++) before += machine_kind[m] == kind && delay[m] == wait;
                for (Py_ssize_t i = 0; i < count; i++)
                    if (runnable[rows[i] * kind_count + kind]) outside[size++] = need[rows[i]];
                if (size <= before) {
                    empty = 1;  /* too few jobs can run on the machine's kind */
                } else {
                    double least = outside[0];
                    for (Py_ssize_t i = 1; i < size; i++)
                        if (outside[i] < least) least = outside[i];
                    Py_ssize_t at_least = 0;
                    for (Py_ssize_t i = 0; i < size; i++) at_least += outside[i] <= least;
                    if ((double)count - least <= (double)before) {
                        empty = 1;  /* |S| - t <= r for every t */
                    } else if (at_least > before) {
                        empty = 0;  /* t = the least N already bounds above r */
                    } else {
                        /* max over the sorted N of min(i + 1, |S| - N_i) is above r exactly when
                         * more than r rows have |S| - N > r: |S| - N falls as N rises (rounding
                         * keeps that order), so those rows are the first ones of the sorted N,
                         * and the last of them has i + 1 = their count. Counted, not sorted
                         * (a sort of ~900 needs at most starts after a burst); NumPy sorts,
                         * tests/matching/test_matching_native_allox.py compares both. A NaN need
                         * (none is made: every need is a count) is sorted as before. */
                        Py_ssize_t above = 0;
                        int unordered = 0;
                        for (Py_ssize_t i = 0; i < size; i++) {
                            above += (double)count - outside[i] > (double)before;
                            unordered |= outside[i] != outside[i];
                        }
                        if (!unordered) {
                            empty = above <= before;
                        } else {
                            qsort(outside, (size_t)size, sizeof(double), need_order);
                            double bound = 0.0;
                            for (Py_ssize_t i = 0; i < size; i++) {
                                double left = (double)(i + 1), right = (double)count - outside[i];
                                double here = right < left ? right : left;
                                if (i == 0 || here > bound) bound = here;
                            }
                            empty = bound <= (double)before;
                        }
                    }
                }
            }
            result = PyBool_FromLong(empty);
        }
    }
    PyMem_Free(outside);
    release_all(views, taken);
    return result;
}

/* The walk's bookkeeping (allox.py): each a few NumPy calls on a thousand machines or rows,
 * asked hundreds of times a decision after a burst; here one loop each, the same comparisons. */

/* class_count(indices, machine_kind, delay, kind, wait, skip) -> int
 *   How many of indices (int64, machines; every machine listed before skip when indices is
 *   None) are of kind index kind and wait exactly wait, skip itself left out: allox's
 *   ((machine_kind[used] == kind) & (delay[used] == wait) & (used != skip)).sum(), and
 *   ((machine_kind[:skip] == kind) & (delay[:skip] == wait)).sum() without indices. */
static PyObject *class_count(PyObject *self, PyObject *args) {
    PyObject *indices_object, *objects[2];
    long long kind;
    double wait;
    Py_ssize_t skip;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOLdn", &indices_object, &objects[0], &objects[1], &kind, &wait, &skip)) return NULL;
    static const Wanted wanted[2] = {{'q', 0, 1, "machine_kind"}, {'d', 0, 1, "delay"}};
    Py_buffer views[2], indices_view;
    int taken = take_all(objects, views, wanted, 2);
    if (taken < 2) {
        release_all(views, taken);
        return NULL;
    }
    int listed = indices_object != Py_None;
    if (listed && take(indices_object, &indices_view, 'q', 0, 1, "indices") < 0) {
        release_all(views, taken);
        return NULL;
    }
    Py_ssize_t machines = views[0].len / 8;
    const int64_t *machine_kind = views[0].buf;
    const double *delay = views[1].buf;
    PyObject *result = NULL;
    if (views[1].len / 8 != machines || (!listed && (skip < 0 || skip > machines))) {
        PyErr_SetString(PyExc_ValueError, "class_count: a wait per machine; skip within the machines");
    } else if (listed) {
        Py_ssize_t count = indices_view.len / 8, found = 0;
        const int64_t *indices = indices_view.buf;
        int valid = 1;
        for (Py_ssize_t i = 0; valid && i < count; i++) valid = indices[i] >= 0 && indices[i] < machines;
        for (Py_ssize_t i = 0; valid && i < count; i++) {
            int64_t m = indices[i];
            found += (m != skip) & (machine_kind[m] == kind) & (delay[m] == wait);  /* & : no branch to mispredict */
        }
        if (valid) result = PyLong_FromSsize_t(found);
        else PyErr_SetString(PyExc_ValueError, "class_count: indices of machines");
    } else {
        Py_ssize_t found = 0;
        for (Py_ssize_t m = 0; m < skip; m++) found += (machine_kind[m] == kind) & (delay[m] == wait);
        result = PyLong_FromSsize_t(found);
    }
    if (listed) PyBuffer_Release(&indices_view);
    release_all(views, taken);
    return result;
}

/* near(machine_kind, delay, kind, wait, tolerance) -> bool
 *   allox._near: whether a machine of kind index kind waits other than wait but within
 *   tolerance of it, |delay - wait| in (0, tolerance] (NumPy's abs of the same difference; a
 *   NaN compares false, as there). */
static PyObject *near(PyObject *self, PyObject *args) {
    PyObject *objects[2];
    long long kind;
    double wait, tolerance;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLdd", &objects[0], &objects[1], &kind, &wait, &tolerance)) return NULL;
    static const Wanted wanted[2] = {{'q', 0, 1, "machine_kind"}, {'d', 0, 1, "delay"}};
    Py_buffer views[2];
    int taken = take_all(objects, views, wanted, 2);
    PyObject *result = NULL;
    if (taken == 2) {
        Py_ssize_t machines = views[0].len / 8;
        const int64_t *machine_kind = views[0].buf;
        const double *delay = views[1].buf;
        if (views[1].len / 8 != machines) {
            PyErr_SetString(PyExc_ValueError, "near: a wait per machine");
        } else {
            int found = 0;
            for (Py_ssize_t m = 0; !found && m < machines; m++) {
                if (machine_kind[m] != kind) continue;
                double gap = fabs(delay[m] - wait);
                found = gap > 0.0 && gap <= tolerance;
            }
            result = PyBool_FromLong(found);
        }
    }
    release_all(views, taken);
    return result;
}

/* rows_of(member, user, waiting, out) -> int
 *   allox._Left.rows: the rows (ascending) whose user is a member and that still wait, written
 *   into out; how many. member: int64 per user, 0 or 1; user: int64 per row (a user's index);
 *   waiting: int64 per row, 0 or 1; out: int64, a row each at least. */
static PyObject *rows_of(PyObject *self, PyObject *args) {
    PyObject *objects[4];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &objects[0], &objects[1], &objects[2], &objects[3])) return NULL;
    static const Wanted wanted[4] = {{'q', 0, 1, "member"}, {'q', 0, 1, "user"}, {'q', 0, 1, "waiting"}, {'q', 1, 1, "out"}};
    Py_buffer views[4];
    int taken = take_all(objects, views, wanted, 4);
    PyObject *result = NULL;
    if (taken == 4 && !overlapping(views, wanted, 4, "rows_of")) {
        Py_ssize_t users = views[0].len / 8, count = views[1].len / 8;
        const int64_t *member = views[0].buf, *user = views[1].buf, *waiting = views[2].buf;
        int64_t *out = views[3].buf;
        int valid = views[2].len / 8 == count && views[3].len / 8 >= count;
        for (Py_ssize_t i = 0; valid && i < count; i++) valid = user[i] >= 0 && user[i] < users;
        if (!valid) {
            PyErr_SetString(PyExc_ValueError, "rows_of: a user and a wait flag per row, users of member, out as long");
        } else {
            Py_ssize_t at = 0;
            for (Py_ssize_t i = 0; i < count; i++) {
                out[at] = i;  /* written always, kept when it counts: no branch to mispredict */
                at += (waiting[i] != 0) & (member[user[i]] != 0);
            }
            result = PyLong_FromSsize_t(at);
        }
    }
    release_all(views, taken);
    return result;
}

/* queue_names(members, omega, kind, machine_kind, delay, count, label) -> bool
 *   solve._queue_names for one kind: members (int64) and omega (float64), the kind's order
 *   (positions.KindOrder: its machines by wait, ascending); count (int64, per machine, its
 *   queue's length); label (int64, per machine) gets, for each machine of the kind with a
 *   queue, canonical's name: among the machines of the kind that wait as long, the queues by
 *   length (longest first, then as listed) take the machines in the order's run of that wait.
 *   The order is checked against the machines first (every machine of the kind once, each
 *   omega its machine's delay, ascending, no NaN): False, nothing written, where it does not
 *   hold, and NumPy's steps run. */
static PyObject *queue_names(PyObject *self, PyObject *args) {
    PyObject *objects[6];
    long long kind;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLOOOO", &objects[0], &objects[1], &kind, &objects[2], &objects[3], &objects[4], &objects[5]))
        return NULL;
    static const Wanted wanted[6] = {{'q', 0, 1, "members"}, {'d', 0, 1, "omega"}, {'q', 0, 1, "machine_kind"},
                                     {'d', 0, 1, "delay"},   {'q', 0, 1, "count"}, {'q', 1, 1, "label"}};
    Py_buffer views[6];
    int taken = take_all(objects, views, wanted, 6);
    PyObject *result = NULL;
    unsigned char *seen = NULL;
    int64_t *queues = NULL;
    if (taken == 6) {
        Py_ssize_t size = views[0].len / 8, machines = views[2].len / 8;
        const int64_t *members = views[0].buf, *machine_kind = views[2].buf, *count = views[4].buf;
        const double *omega = views[1].buf, *delay = views[3].buf;
        int64_t *label = views[5].buf;
        if (views[1].len / 8 != size || views[3].len / 8 != machines || views[4].len / 8 != machines || views[5].len / 8 != machines) {
            PyErr_SetString(PyExc_ValueError, "queue_names: an omega per member; a delay, count and label per machine");
        } else if ((seen = PyMem_Calloc((size_t)machines + 1, 1)) == NULL || (queues = PyMem_Malloc(sizeof(int64_t) * ((size_t)size + 1))) == NULL) {
            PyErr_NoMemory();
        } else {
            int consistent = names_of_kind(members, omega, size, kind, machine_kind, delay, count, machines, label, seen, queues);
            result = PyBool_FromLong(consistent);
        }
    }
    PyMem_Free(seen);
    PyMem_Free(queues);
    release_all(views, taken);
    return result;
}

/* canonical_plan(rows, columns, slot_machine, slot_position, members, omega, kind_bounds, machine_kind, delay, times,
 *                bounds, queued) -> bool
 *   solve.contended_plan after the fold, in one call: each matched row's slot (columns, of
 *   slot_machine and slot_position: int64, the bounded slots), canonical's names of the
 *   machines with a queue (queue_names for every kind: members and omega, the kind orders laid
 *   end to end, kind k's at kind_bounds[k]:kind_bounds[k + 1]), its levels (canonical_levels,
 *   the machines' waits delay as the first ready), then the plan's queues: bounds (int64,
 *   machines + 1) and queued (int64, one per matched row: the rows by machine, then position
 *   largest first: NumPy's lexsort((-position, machine)), here a stable counting sort by
 *   machine of the jobs by position, largest first, then index). times: float64, rows of the
 *   problem x kinds; machine_kind and delay per machine. False, nothing meaningful written,
 *   where a kind's order does not hold (queue_names' check): the caller's NumPy steps run. */
static PyObject *canonical_plan(PyObject *self, PyObject *args) {
    enum { ARGS = 12 };
    PyObject *objects[ARGS];
    (void)self;
    if (unpack_objects(args, objects, ARGS, "canonical_plan") < 0) return NULL;
    static const Wanted wanted[ARGS] = {{'q', 0, 1, "rows"},         {'q', 0, 1, "columns"},      {'q', 0, 1, "slot_machine"},
                                        {'q', 0, 1, "slot_position"}, {'q', 0, 1, "members"},      {'d', 0, 1, "omega"},
                                        {'q', 0, 1, "kind_bounds"},  {'q', 0, 1, "machine_kind"}, {'d', 0, 1, "delay"},
                                        {'d', 0, 2, "times"},        {'q', 1, 1, "bounds"},       {'q', 1, 1, "queued"}};
    Py_buffer views[ARGS];
    int taken = take_all(objects, views, wanted, ARGS);
    PyObject *result = NULL;
    int64_t *work = NULL;
    if (taken == ARGS && !overlapping(views, wanted, ARGS, "canonical_plan")) {
        Py_ssize_t count = views[0].len / 8, slots = views[2].len / 8, laid = views[4].len / 8, machines = views[7].len / 8;
        Py_ssize_t job_count = views[9].shape[0], kind_count = views[9].shape[1];
        const int64_t *rows = views[0].buf, *columns = views[1].buf, *slot_machine = views[2].buf, *slot_position = views[3].buf;
        const int64_t *members = views[4].buf, *kind_bounds = views[6].buf, *machine_kind = views[7].buf;
        const double *omega = views[5].buf, *delay = views[8].buf, *times = views[9].buf;
        int64_t *bounds = views[10].buf, *queued = views[11].buf, largest = 0, widest = 0;
        int valid = views[1].len / 8 == count && views[3].len / 8 == slots && views[5].len / 8 == laid && views[6].len / 8 == kind_count + 1 &&
                    views[8].len / 8 == machines && views[10].len / 8 == machines + 1 && views[11].len / 8 == count;
        for (Py_ssize_t k = 0; valid && k <= kind_count; k++) {
            valid = kind_bounds[k] >= (k ? kind_bounds[k - 1] : 0) && kind_bounds[k] <= laid;
            if (valid && k && kind_bounds[k] - kind_bounds[k - 1] > widest) widest = kind_bounds[k] - kind_bounds[k - 1];
        }
        for (Py_ssize_t m = 0; valid && m < machines; m++) valid = machine_kind[m] >= 0 && machine_kind[m] < kind_count;
        for (Py_ssize_t s = 0; valid && s < slots; s++) valid = slot_machine[s] >= 0 && slot_machine[s] < machines && slot_position[s] >= 0;
        for (Py_ssize_t i = 0; valid && i < count; i++) {
            valid = rows[i] >= 0 && rows[i] < job_count && columns[i] >= 0 && columns[i] < slots;
            if (valid && slot_position[columns[i]] > largest) largest = slot_position[columns[i]];
        }
        /* A slot's position is at most the problem's jobs (the bound keeps at most n_c positions,
         * the paper's layout n): the levels' tallies, (largest + 1) per kind, then fit. */
        valid = valid && largest <= job_count && levels_fit(count, job_count, kind_count, largest);
        if (!valid) {
            PyErr_SetString(PyExc_ValueError,
                            "canonical_plan: per matched row a row of times and a slot; per slot a machine and a position, the matched "
                            "slots' at most the rows of times; kind_bounds ascending within members, one per kind of times and one "
                            "more; per machine a kind of times, a delay; bounds one more than machines");
        } else if ((work = PyMem_Calloc(plan_space(count, job_count, kind_count, machines, widest, largest), sizeof(int64_t))) == NULL) {
            PyErr_NoMemory();
        } else {
            int consistent = plan_of_fold(count, rows, columns, slot_machine, slot_position, members, omega, kind_bounds, machine_kind, delay,
                                          machines, times, job_count, kind_count, widest, largest, work, bounds, queued);
            result = PyBool_FromLong(consistent);
        }
    }
    PyMem_Free(work);
    release_all(views, taken);
    return result;
}

/* kind_stats(times, runnable, shortest) -> None
 *   solve._bounded_slots's inputs to the bound: per kind (column of times, float64 jobs x
 *   kinds), how many jobs have a finite time (runnable, int64) and the least finite time, 0.0
 *   where none is (shortest, float64): NumPy's isfinite, sum and where-min, one pass. */
static PyObject *kind_stats(PyObject *self, PyObject *args) {
    PyObject *objects[3];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &objects[0], &objects[1], &objects[2])) return NULL;
    static const Wanted wanted[3] = {{'d', 0, 2, "times"}, {'q', 1, 1, "runnable"}, {'d', 1, 1, "shortest"}};
    Py_buffer views[3];
    int taken = take_all(objects, views, wanted, 3);
    PyObject *result = NULL;
    if (taken == 3) {
        Py_ssize_t jobs = views[0].shape[0], kinds = views[0].shape[1];
        const double *times = views[0].buf;
        int64_t *runnable = views[1].buf;
        double *shortest = views[2].buf;
        if (views[1].len / 8 != kinds || views[2].len / 8 != kinds) {
            PyErr_SetString(PyExc_ValueError, "kind_stats: a count and a time per kind (column of times)");
        } else {
            kind_stats_of(times, jobs, kinds, runnable, shortest);
            result = Py_NewRef(Py_None);
        }
    }
    release_all(views, taken);
    return result;
}

static PyMethodDef methods[] = {
    {"canonical_levels", canonical_levels, METH_VARARGS,
     "canonical_levels(rows, machine, position, slot_kind, ready, times, out_rows, out_machine): canonical's levels (see the header)"},
    {"uncontended_plan", uncontended_plan, METH_VARARGS,
     "uncontended_plan(rows, fastest, machine_kind, delay, kind_count, bounds, queued, used): allox's uncontended plan (see above it)"},
    {"vacancy_needs", vacancy_needs, METH_VARARGS,
     "vacancy_needs(times, kind, other, shift, waits, counts, total): allox._Vacancy's need per row (see above it)"},
    {"vacancy_empty", vacancy_empty, METH_VARARGS,
     "vacancy_empty(rows, positive, runnable, need, machine_kind, delay, position): allox._Vacancy.empty's test (see above it)"},
    {"class_count", class_count, METH_VARARGS,
     "class_count(indices, machine_kind, delay, kind, wait, skip): machines of a kind and wait among indices (see above it)"},
    {"near", near, METH_VARARGS, "near(machine_kind, delay, kind, wait, tolerance): allox._near (see above it)"},
    {"rows_of", rows_of, METH_VARARGS, "rows_of(member, user, waiting, out): allox._Left.rows's rows (see above it)"},
    {"canonical_plan", canonical_plan, METH_VARARGS,
     "canonical_plan(rows, columns, slot_machine, slot_position, members, omega, kind_bounds, machine_kind, delay, times, bounds, queued): "
     "contended_plan after the fold (see above it)"},
    {"kind_stats", kind_stats, METH_VARARGS, "kind_stats(times, runnable, shortest): solve._bounded_slots's jobs per kind (see above it)"},
    {"queue_names", queue_names, METH_VARARGS,
     "queue_names(members, omega, kind, machine_kind, delay, count, label): solve._queue_names for one kind (see above it)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_solve", "canonical's levels, Algorithm 2's uncontended plans, vacancy bound and bookkeeping in C (scheduler/matching/solve.py, allox.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__solve(void) { return PyModule_Create(&module); }
