/* The position bound and the slots it keeps (scheduler/matching/positions.py: position_limits
 * with Claim 3's _tightened, and slots_for) over plain double and int64 buffers.
 *
 * Algorithm 2 works the bound out for every plan it solves (133 after a burst of 1,000 Jobs at
 * alpha 0.1), and in NumPy each is a few dozen calls on arrays of a few hundred machines: their
 * fixed cost, not the work. The Python functions are the reference: the same integers come out
 * (the one floating-point step, Claim 3's window ends, is the same product and sum), and
 * tests/matching/test_matching_native_positions.py compares both on random machines.
 *
 * kind_limits(members, omega, earlier, earlier_or_equal, runnable, shortest, limits) -> None
 *   one kind's KindOrder (members int64, omega float64 ascending, earlier and earlier_or_equal
 *   int64, all of one length), n_c (runnable >= 1), the shortest time on the kind (<= 0: Claim 3
 *   not applied); writes K_i into limits[members[i]] for the first min(n_c, count) members.
 * slots(limits, machine_kind, kind_count, machine, position) -> None
 *   every machine's limits[i] positions, by kind, then position, then machine, into machine and
 *   position (each sum(limits) long).
 * moved(members, omega, machine, new_omega, out_members, out_omega, out_earlier, out_earlier_or_equal) -> bool
 *   positions.kind_orders_after for one kind: its KindOrder (members int64, omega float64) once
 *   machine frees at new_omega, into the four outputs (each as long as members); False, nothing
 *   promised, where machine is not a member or an omega is NaN (NumPy's steps then run).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_buffers.h"
#include "_bound.h"
#include <stdint.h>
#include <string.h>

static PyObject *kind_limits(PyObject *self, PyObject *args) {
    PyObject *objects[5];
    long long runnable;
    double shortest;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOLdO", &objects[0], &objects[1], &objects[2], &objects[3], &runnable, &shortest, &objects[4]))
        return NULL;
    static const Wanted wanted[5] = {{'q', 0, 1, "members"}, {'d', 0, 1, "omega"}, {'q', 0, 1, "earlier"},
                                     {'q', 0, 1, "earlier_or_equal"}, {'q', 1, 1, "limits"}};
    Py_buffer views[5];
    int taken = take_all(objects, views, wanted, 5);
    PyObject *result = NULL;
    if (taken == 5 && !overlapping(views, wanted, 5, "kind_limits")) {
        Py_ssize_t count = views[0].len / 8, machines = views[4].len / 8;
        const int64_t *members = views[0].buf, *earlier = views[2].buf, *earlier_or_equal = views[3].buf;
        const double *omega = views[1].buf;
        int64_t *limits = views[4].buf;
        int valid = views[1].len / 8 == count && views[2].len / 8 == count && views[3].len / 8 == count && runnable >= 1;
        for (Py_ssize_t i = 0; valid && i < count; i++)
            valid = members[i] >= 0 && members[i] < machines && earlier_or_equal[i] > earlier[i] && earlier[i] >= 0;
        if (!valid) {
            PyErr_SetString(PyExc_ValueError, "kind_limits: a KindOrder of one length, members among the limits, n_c >= 1");
        } else {
            limits_of_kind(members, omega, earlier, earlier_or_equal, count, runnable, shortest, limits);
            result = Py_None;
            Py_INCREF(result);
        }
    }
    release_all(views, taken);
    return result;
}

static PyObject *slots(PyObject *self, PyObject *args) {
    PyObject *objects[4];
    Py_ssize_t kind_count;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOnOO", &objects[0], &objects[1], &kind_count, &objects[2], &objects[3])) return NULL;
    static const Wanted wanted[4] = {{'q', 0, 1, "limits"}, {'q', 0, 1, "machine_kind"}, {'q', 1, 1, "machine"}, {'q', 1, 1, "position"}};
    Py_buffer views[4];
    int taken = take_all(objects, views, wanted, 4);
    PyObject *result = NULL;
    int64_t *cursor = NULL;
    if (taken == 4 && !overlapping(views, wanted, 4, "slots")) {
        Py_ssize_t machines = views[0].len / 8, total = views[2].len / 8;
        const int64_t *limits = views[0].buf, *machine_kind = views[1].buf;
        int64_t *machine = views[2].buf, *position = views[3].buf, span = 0, sum = 0;
        int valid = views[1].len / 8 == machines && views[3].len / 8 == total && kind_count >= 0;
        for (Py_ssize_t i = 0; valid && i < machines; i++) {
            valid = limits[i] >= 0 && machine_kind[i] >= 0 && machine_kind[i] < kind_count;
            if (limits[i] > span) span = limits[i];
            sum += limits[i];
        }
        if (!valid || sum != total) {
            PyErr_SetString(PyExc_ValueError, "slots: limits >= 0 and kinds below kind_count per machine, sum(limits) slots out");
        } else if ((cursor = PyMem_Calloc((size_t)(kind_count * span + 1), sizeof(int64_t))) == NULL && kind_count * span > 0) {
            PyErr_NoMemory();
        } else {
            slots_of(limits, machine_kind, machines, kind_count, span, cursor, machine, position);
            result = Py_None;
            Py_INCREF(result);
        }
    }
    PyMem_Free(cursor);
    release_all(views, taken);
    return result;
}

/* ranks' and moved's steps: for each of omega[0:count] (ascending), where its run of equal
 * values begins (how many are smaller) and ends (how many are at most as large). */
static void ranks_of(const double *omega, Py_ssize_t count, int64_t *earlier, int64_t *earlier_or_equal) {
    for (Py_ssize_t begin = 0, end; begin < count; begin = end) {
        for (end = begin + 1; end < count && !(omega[end] != omega[end - 1]); end++) {
        }
        for (Py_ssize_t i = begin; i < end; i++) {
            earlier[i] = begin;
            earlier_or_equal[i] = end;
        }
    }
}

/* ranks(sorted_omega, earlier, earlier_or_equal) -> None
 *   positions._ranks: for each of sorted_omega (float64, ascending), how many are smaller and
 *   how many at most as large (int64 each), read off the runs of equal values (a run ends
 *   where a value != the one before it, as NumPy's not_equal: each NaN a run of its own). */
static PyObject *ranks(PyObject *self, PyObject *args) {
    PyObject *objects[3];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &objects[0], &objects[1], &objects[2])) return NULL;
    static const Wanted wanted[3] = {{'d', 0, 1, "sorted_omega"}, {'q', 1, 1, "earlier"}, {'q', 1, 1, "earlier_or_equal"}};
    Py_buffer views[3];
    int taken = take_all(objects, views, wanted, 3);
    PyObject *result = NULL;
    if (taken == 3 && !overlapping(views, wanted, 3, "ranks")) {
        Py_ssize_t count = views[0].len / 8;
        const double *omega = views[0].buf;
        int64_t *earlier = views[1].buf, *earlier_or_equal = views[2].buf;
        if (views[1].len / 8 != count || views[2].len / 8 != count) {
            PyErr_SetString(PyExc_ValueError, "ranks: an earlier and an earlier_or_equal per omega");
        } else {
            ranks_of(omega, count, earlier, earlier_or_equal);
            result = Py_NewRef(Py_None);
        }
    }
    release_all(views, taken);
    return result;
}

/* The index where value would go in sorted[0:count], before its equals (left) or after them:
 * NumPy's searchsorted of one value, the same bisection (so the same index on any input). */
static Py_ssize_t search_double(const double *sorted, Py_ssize_t count, double value, int right) {
    Py_ssize_t low = 0, high = count;
    while (low < high) {
        Py_ssize_t middle = low + ((high - low) >> 1);
        if (right ? sorted[middle] <= value : sorted[middle] < value) low = middle + 1;
        else high = middle;
    }
    return low;
}

static Py_ssize_t search_int(const int64_t *sorted, Py_ssize_t count, int64_t value) {
    Py_ssize_t low = 0, high = count;
    while (low < high) {
        Py_ssize_t middle = low + ((high - low) >> 1);
        if (sorted[middle] < value) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* moved(...) -> bool: see the module's header. Algorithm 2 moves a machine per start, and
 * NumPy's copy, searches, slice moves and ranks were ~27 us a move, a full sort of every kind
 * ~67 us (from three moves on): here one pass. The same steps as kind_orders_after: the
 * machine's place among the others is after every omega below new_omega and, among those equal
 * to it, after the members listed before it (searched in the old order, which still holds the
 * machine), then the ranks of the runs of equal omega. */
static PyObject *moved(PyObject *self, PyObject *args) {
    PyObject *objects[6];
    long long machine;
    double value;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLdOOOO", &objects[0], &objects[1], &machine, &value, &objects[2], &objects[3], &objects[4], &objects[5]))
        return NULL;
    static const Wanted wanted[6] = {{'q', 0, 1, "members"},   {'d', 0, 1, "omega"},   {'q', 1, 1, "out_members"},
                                     {'d', 1, 1, "out_omega"}, {'q', 1, 1, "out_earlier"}, {'q', 1, 1, "out_earlier_or_equal"}};
    Py_buffer views[6];
    int taken = take_all(objects, views, wanted, 6);
    PyObject *result = NULL;
    if (taken == 6 && !overlapping(views, wanted, 6, "moved")) {
        Py_ssize_t count = views[0].len / 8;
        const int64_t *members = views[0].buf;
        const double *omega = views[1].buf;
        int64_t *new_members = views[2].buf, *earlier = views[4].buf, *earlier_or_equal = views[5].buf;
        double *new_omega = views[3].buf;
        if (views[1].len / 8 != count || views[2].len / 8 != count || views[3].len / 8 != count || views[4].len / 8 != count ||
            views[5].len / 8 != count) {
            PyErr_SetString(PyExc_ValueError, "moved: an omega per member, and each output as long");
        } else {
            Py_ssize_t at = -1;
            int plain = value == value;
            for (Py_ssize_t i = 0; i < count; i++) {
                plain &= omega[i] == omega[i];
                if (at < 0 && members[i] == (int64_t)machine) at = i;
            }
            if (!plain || at < 0) {
                result = Py_NewRef(Py_False);
            } else {
                Py_ssize_t low = search_double(omega, count, value, 0), high = search_double(omega, count, value, 1);
                Py_ssize_t before = low + search_int(members + low, high - low, (int64_t)machine);
                Py_ssize_t to = at < before ? before - 1 : before;
                memcpy(new_members, members, sizeof(int64_t) * (size_t)count);
                memcpy(new_omega, omega, sizeof(double) * (size_t)count);
                if (to > at) {
                    memmove(new_members + at, members + at + 1, sizeof(int64_t) * (size_t)(to - at));
                    memmove(new_omega + at, omega + at + 1, sizeof(double) * (size_t)(to - at));
                } else if (to < at) {
                    memmove(new_members + to + 1, members + to, sizeof(int64_t) * (size_t)(at - to));
                    memmove(new_omega + to + 1, omega + to, sizeof(double) * (size_t)(at - to));
                }
                new_members[to] = (int64_t)machine;
                new_omega[to] = value;
                ranks_of(new_omega, count, earlier, earlier_or_equal);
                result = Py_NewRef(Py_True);
            }
        }
    }
    release_all(views, taken);
    return result;
}

static PyMethodDef methods[] = {
    {"kind_limits", kind_limits, METH_VARARGS,
     "kind_limits(members, omega, earlier, earlier_or_equal, runnable, shortest, limits): one kind's K_i (see the module's header)"},
    {"moved", moved, METH_VARARGS,
     "moved(members, omega, machine, new_omega, out_members, out_omega, out_earlier, out_earlier_or_equal): one kind's order after a move"},
    {"ranks", ranks, METH_VARARGS, "ranks(sorted_omega, earlier, earlier_or_equal): positions._ranks (see above it)"},
    {"slots", slots, METH_VARARGS, "slots(limits, machine_kind, kind_count, machine, position): the slots by kind, position, machine"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_positions", "The position bound and its slots in C (scheduler/matching/positions.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__positions(void) { return PyModule_Create(&module); }
