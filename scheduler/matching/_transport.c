/* Phase 2 of the folded solve (scheduler/matching/transport.py, _Grouped.raise_prices) in C.
 *
 * The Python phase visits each over group with a dozen small NumPy calls; at Algorithm 2's small
 * alpha a decision solves hundreds of plans, each a few dozen visits, and NumPy's fixed cost per
 * call is most of a visit. This is the same loop, step for step, in the same floating-point
 * operations and with the same ties (argmin's first index, a stable sort by margin): it leaves
 * exactly the prices and assignment the Python phase leaves, which tests check on random
 * problems (tests/matching/test_matching_transport.py). transport.py is the documented
 * interface and uses the Python phase when this module is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SWEEPS 64
#define STALLED_SWEEPS 2

typedef struct {
    double key;     /* -margin: ascending is the keenest first */
    Py_ssize_t row; /* index among the group's jobs: a stable sort keeps their order on ties */
} Keyed;

/* A stable sort of items by LESS (a merge sort, bottom up, over insertion-sorted runs of 8):
 * equal items keep their order, as NumPy's stable sorts keep them. */
#define STABLE_SORT(name, type, LESS)                                                                \
    static void name(type *items, type *scratch, Py_ssize_t n) {                                    \
        for (Py_ssize_t begin = 0; begin < n; begin += 8) {                                         \
            Py_ssize_t end = begin + 8 < n ? begin + 8 : n;                                         \
            for (Py_ssize_t i = begin + 1; i < end; i++) {                                          \
                type item = items[i];                                                               \
                Py_ssize_t k = i;                                                                   \
                while (k > begin && LESS((&item), (&items[k - 1]))) {                               \
                    items[k] = items[k - 1];                                                        \
                    k--;                                                                            \
                }                                                                                   \
                items[k] = item;                                                                    \
            }                                                                                       \
        }                                                                                           \
        type *from = items, *to = scratch;                                                          \
        for (Py_ssize_t width = 8; width < n; width *= 2) {                                         \
            for (Py_ssize_t begin = 0; begin < n; begin += 2 * width) {                             \
                Py_ssize_t middle = begin + width < n ? begin + width : n;                          \
                Py_ssize_t end = begin + 2 * width < n ? begin + 2 * width : n;                     \
                Py_ssize_t i = begin, j = middle, k = begin;                                        \
                while (i < middle && j < end) to[k++] = LESS((&from[j]), (&from[i])) ? from[j++] : from[i++]; \
                while (i < middle) to[k++] = from[i++];                                             \
                while (j < end) to[k++] = from[j++];                                                \
            }                                                                                       \
            type *swap = from;                                                                      \
            from = to;                                                                              \
            to = swap;                                                                              \
        }                                                                                           \
        if (from != items) memcpy(items, from, sizeof(type) * (size_t)n);                           \
    }

#define KEY_LESS(a, b) ((a)->key < (b)->key)
STABLE_SORT(stable_sort, Keyed, KEY_LESS)

static int64_t over_total(const int64_t *load, const int64_t *priced, Py_ssize_t count) {
    int64_t total = 0;
    for (Py_ssize_t g = 0; g < count; g++)
        if (load[g] > priced[g]) total += load[g] - priced[g];
    return total;
}

/* How many of a group's units (ascending) cost at most value: searchsorted(side="right"). */
static int64_t at_most(const double *units, int64_t size, double value) {
    int64_t low = 0, high = size;
    while (low < high) {
        int64_t mid = low + (high - low) / 2;
        if (value < units[mid]) high = mid;
        else low = mid + 1;
    }
    return low;
}

static int raise_prices(const double *cost, Py_ssize_t rows, Py_ssize_t count, const double *flat, const int64_t *first,
                        const int64_t *sizes, double *price, int64_t *assign) {
    int64_t *load = calloc((size_t)count, sizeof(int64_t));
    int64_t *priced = calloc((size_t)count, sizeof(int64_t));
    Py_ssize_t *jobs = malloc(sizeof(Py_ssize_t) * (size_t)(rows ? rows : 1));
    Py_ssize_t *alternative = malloc(sizeof(Py_ssize_t) * (size_t)(rows ? rows : 1));
    Keyed *keyed = malloc(sizeof(Keyed) * (size_t)(rows ? rows : 1));
    Keyed *scratch = malloc(sizeof(Keyed) * (size_t)(rows ? rows : 1));
    if (!load || !priced || !jobs || !alternative || !keyed || !scratch) {
        free(load); free(priced); free(jobs); free(alternative); free(keyed); free(scratch);
        return -1;
    }
    for (Py_ssize_t j = 0; j < rows; j++) load[assign[j]]++;
    for (Py_ssize_t g = 0; g < count; g++) priced[g] = at_most(flat + first[g], sizes[g], price[g]);
    int64_t best = over_total(load, priced, count), stalled = 0;
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        if (best == 0 || stalled >= STALLED_SWEEPS) break;
        int done = 0;
        for (Py_ssize_t g = 0; g < count; g++) {
            if (load[g] <= priced[g]) continue; /* the next group over, as the sweep left them */
            const double *units = flat + first[g];
            int64_t size = sizes[g];
            Py_ssize_t n = 0;
            for (Py_ssize_t j = 0; j < rows; j++)
                if (assign[j] == g) jobs[n++] = j;
            for (Py_ssize_t i = 0; i < n; i++) {
                const double *row = cost + jobs[i] * count;
                double mine = row[g];
                /* argmin of cost + price over the other groups (g itself inf), first on ties; no
                 * NaN (the caller checks the costs, the prices stay finite) */
                Py_ssize_t chosen = 0;
                double least = (g == 0) ? INFINITY : row[0] + price[0];
                for (Py_ssize_t h = 1; h < g; h++) {
                    double value = row[h] + price[h];
                    if (value < least) {
                        least = value;
                        chosen = h;
                    }
                }
                for (Py_ssize_t h = g + 1; h < count; h++) {
                    double value = row[h] + price[h];
                    if (value < least) {
                        least = value;
                        chosen = h;
                    }
                }
                alternative[i] = chosen;
                keyed[i].key = -(least - mine);
                keyed[i].row = i;
            }
            stable_sort(keyed, scratch, n);
            Py_ssize_t room = (Py_ssize_t)size < n ? (Py_ssize_t)size : n;
            Py_ssize_t staying = room;
            for (Py_ssize_t i = 0; i < room; i++) {
                double margin = -keyed[i].key;
                if (!(margin >= units[i])) {
                    staying = i;
                    break;
                }
            }
            double low = staying ? units[staying - 1] : -INFINITY;
            double high = staying < n ? -keyed[staying].key : -INFINITY;
            double floor_ = (high > low) ? high : low; /* max(low, high): the first on ties */
            if (!isfinite(floor_)) {
                done = 1;
                break;
            }
            double raised = (floor_ > price[g]) ? floor_ : price[g];
            price[g] = raised;
            priced[g] = at_most(units, size, raised);
            for (Py_ssize_t i = staying; i < n; i++) {
                Py_ssize_t at = keyed[i].row;
                Py_ssize_t moved = alternative[at];
                assign[jobs[at]] = moved;
                load[moved]++;
            }
            load[g] -= n - staying;
        }
        if (done) break;
        int64_t over = over_total(load, priced, count);
        stalled = over < best ? 0 : stalled + 1;
        if (over < best) best = over;
    }
    free(load); free(priced); free(jobs); free(alternative); free(keyed); free(scratch);
    return 0;
}

/* True, or MemoryError where the step could not allocate. */
static PyObject *answered(int failed) {
    if (failed) return PyErr_NoMemory();
    return Py_NewRef(Py_True);
}

static PyObject *py_raise_prices(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer cost, flat, first, sizes, price, assign;
    Py_ssize_t rows, count;
    if (!PyArg_ParseTuple(args, "y*nny*y*y*w*w*", &cost, &rows, &count, &flat, &first, &sizes, &price, &assign)) return NULL;
    PyObject *result = NULL;
    if (cost.len != (Py_ssize_t)sizeof(double) * rows * count || first.len != (Py_ssize_t)sizeof(int64_t) * count ||
        sizes.len != (Py_ssize_t)sizeof(int64_t) * count || price.len != (Py_ssize_t)sizeof(double) * count ||
        assign.len != (Py_ssize_t)sizeof(int64_t) * rows) {
        PyErr_SetString(PyExc_ValueError, "raise_prices: arrays of the wrong size");
        goto out;
    }
    const int64_t *first_ = first.buf, *sizes_ = sizes.buf;
    const int64_t *assign_ = assign.buf;
    for (Py_ssize_t g = 0; g < count; g++) {
        if (first_[g] < 0 || sizes_[g] < 0 || (first_[g] + sizes_[g]) * (Py_ssize_t)sizeof(double) > flat.len) {
            PyErr_SetString(PyExc_ValueError, "raise_prices: a group's units out of range");
            goto out;
        }
    }
    for (Py_ssize_t j = 0; j < rows; j++) {
        if (assign_[j] < 0 || assign_[j] >= count) {
            PyErr_SetString(PyExc_ValueError, "raise_prices: a row in no group");
            goto out;
        }
    }
    /* Costs without NaN (the loop's comparisons assume it; NumPy's argmin would stop at one):
     * else False, and the caller runs its own steps. */
    const double *costs = cost.buf;
    for (Py_ssize_t at = 0; at < rows * count; at++) {
        if (isnan(costs[at])) {
            result = Py_NewRef(Py_False);
            goto out;
        }
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = raise_prices(cost.buf, rows, count, flat.buf, first.buf, sizes.buf, price.buf, assign.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&cost); PyBuffer_Release(&flat); PyBuffer_Release(&first);
    PyBuffer_Release(&sizes); PyBuffer_Release(&price); PyBuffer_Release(&assign);
    return result;
}

/* ------------------------------------------------------------------ position limits */

typedef struct {
    double omega;
    Py_ssize_t machine;
} Member;

/* A kind's machines by omega, in listed order on ties (np.argsort's stable kind). */
#define OMEGA_LESS(a, b) ((a)->omega < (b)->omega)
STABLE_SORT(sort_members, Member, OMEGA_LESS)

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

/* How many of sorted[0:n] are below value: searchsorted(side="left"). */
static Py_ssize_t below(const Member *sorted, Py_ssize_t n, double value) {
    Py_ssize_t low = 0, high = n;
    while (low < high) {
        Py_ssize_t mid = low + (high - low) / 2;
        if (sorted[mid].omega < value) low = mid + 1;
        else high = mid;
    }
    return low;
}

#define LEVELS 16 /* positions.py's _LEVELS */

/* positions.position_limits, step for step (Claim 1, Claim 2's machines kept, Claim 3's K_i in
 * closed form where the kind's shortest time is above 0). */
static int position_limits(const int64_t *machine_kind, const double *available, Py_ssize_t machines,
                           const int64_t *runnable_per_kind, const double *shortest_per_kind, Py_ssize_t kinds,
                           int64_t *limits) {
    Member *members = malloc(sizeof(Member) * (size_t)(machines ? machines : 1));
    Member *scratch = malloc(sizeof(Member) * (size_t)(machines ? machines : 1));
    if (!members || !scratch) {
        free(members); free(scratch);
        return -1;
    }
    for (Py_ssize_t i = 0; i < machines; i++) limits[i] = 0;
    for (Py_ssize_t kind = 0; kind < kinds; kind++) {
        int64_t runnable = runnable_per_kind[kind];
        if (runnable <= 0) continue;
        Py_ssize_t n = 0;
        for (Py_ssize_t i = 0; i < machines; i++)
            if (machine_kind[i] == kind) {
                members[n].omega = available[i];
                members[n].machine = i;
                n++;
            }
        if (n == 0) continue;
        sort_members(members, scratch, n);
        double shortest = shortest_per_kind ? shortest_per_kind[kind] : 0.0;
        double width = shortest * (1.0 - 1e-9);
        for (Py_ssize_t begin = 0; begin < n;) {
            Py_ssize_t end = begin + 1;
            while (end < n && members[end].omega == members[begin].omega) end++;
            /* one omega: earlier = begin, earlier_or_equal = end, together = end - begin */
            int64_t earlier = begin, earlier_or_equal = end, together = end - begin;
            int64_t bound = (runnable + together - 1) / earlier_or_equal; /* all positive */
            if (shortest > 0 && bound >= 2) {
                double omega = members[begin].omega;
                int64_t within[LEVELS];
                for (int l = 1; l <= LEVELS; l++) {
                    double reach_end = omega + (double)l * width;
                    within[l - 1] = (int64_t)below(members, n, reach_end) - earlier - 1;
                }
                int64_t own = 1 + earlier, shifted = 0, fitting = 0, needed = 0;
                for (int k = 1; k <= LEVELS + 1; k++) {
                    needed = (int64_t)k * own + shifted; /* shifted: the sum of within[m], m < k - 1 */
                    if (needed <= runnable) fitting++;
                    if (k - 1 < LEVELS) shifted += within[k - 1];
                }
                int64_t last = needed;
                int64_t step = own + within[LEVELS - 1];
                int64_t beyond = step > 0 ? LEVELS + 1 + floor_div(runnable - last, step) : bound;
                int64_t low = last <= runnable ? beyond : fitting;
                if (low < bound) bound = low;
            }
            for (Py_ssize_t i = begin; i < end; i++) {
                int64_t rank_in_group = i - begin;
                limits[members[i].machine] = rank_in_group < runnable - earlier ? bound : 0;
            }
            begin = end;
        }
    }
    free(members); free(scratch);
    return 0;
}

static PyObject *py_position_limits(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer kind, available, runnable, shortest, limits;
    Py_ssize_t machines, kinds;
    if (!PyArg_ParseTuple(args, "y*y*ny*y*nw*", &kind, &available, &machines, &runnable, &shortest, &kinds, &limits)) return NULL;
    PyObject *result = NULL;
    if (kind.len != (Py_ssize_t)sizeof(int64_t) * machines || available.len != (Py_ssize_t)sizeof(double) * machines ||
        limits.len != (Py_ssize_t)sizeof(int64_t) * machines || runnable.len != (Py_ssize_t)sizeof(int64_t) * kinds ||
        shortest.len != (Py_ssize_t)sizeof(double) * kinds) {
        PyErr_SetString(PyExc_ValueError, "position_limits: arrays of the wrong size");
        goto out;
    }
    const int64_t *kind_ = kind.buf;
    const double *available_ = available.buf;
    for (Py_ssize_t i = 0; i < machines; i++) {
        if (isnan(available_[i]) || kind_[i] < 0) {
            result = Py_NewRef(Py_False); /* NaN: NumPy's sort order, not this one's */
            goto out;
        }
    }
    const double *shortest_ = shortest.buf;
    for (Py_ssize_t k = 0; k < kinds; k++) {
        if (isnan(shortest_[k])) {
            result = Py_NewRef(Py_False);
            goto out;
        }
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = position_limits(kind.buf, available.buf, machines, runnable.buf, shortest.buf, kinds, limits.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&kind); PyBuffer_Release(&available); PyBuffer_Release(&runnable);
    PyBuffer_Release(&shortest); PyBuffer_Release(&limits);
    return result;
}

/* ------------------------------------------------------------------------ canonical */

typedef struct {
    int64_t first;
    double second;
    int64_t third; /* unique among the items sorted: a total order, so any sort gives NumPy's lexsort */
    Py_ssize_t item;
} Key3;

static inline int key3_less(const Key3 *a, const Key3 *b) {
    if (a->first != b->first) return a->first < b->first;
    if (a->second < b->second) return 1;
    if (b->second < a->second) return 0;
    return a->third < b->third;
}

#define KEY3_LESS(a, b) key3_less((a), (b))
STABLE_SORT(sort_key3, Key3, KEY3_LESS)

/* solve.canonical, step for step: rows, machine, position (n entries) in; out_rows, out_machine
 * out. times is jobs x kinds (C order), kinds its width. */
static int canonical(const int64_t *machine_kind, const double *delay, Py_ssize_t machines, const double *times,
                     Py_ssize_t kinds, const int64_t *rows, const int64_t *machine, const int64_t *position, Py_ssize_t n,
                     int64_t *out_rows, int64_t *out_machine) {
    Py_ssize_t size = machines > n ? machines : n;
    int64_t *count = calloc((size_t)(machines ? machines : 1), sizeof(int64_t));
    int64_t *label = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1));
    double *ready = malloc(sizeof(double) * (size_t)(machines ? machines : 1));
    int64_t *moved = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    Py_ssize_t *levels = malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    Key3 *a = malloc(sizeof(Key3) * (size_t)(size ? size : 1));
    Key3 *b = malloc(sizeof(Key3) * (size_t)(size ? size : 1));
    Key3 *scratch = malloc(sizeof(Key3) * (size_t)(size ? size : 1));
    int64_t *bucket = NULL;
    int status = -1;
    if (!count || !label || !ready || !moved || !levels || !a || !b || !scratch) goto done;
    for (Py_ssize_t e = 0; e < n; e++) count[machine[e]]++;
    /* The k-th longest queue of a (kind, wait) to the k-th listed machine of it. */
    for (Py_ssize_t i = 0; i < machines; i++) {
        a[i] = (Key3){machine_kind[i], delay[i], (int64_t)i, i};
        b[i] = (Key3){machine_kind[i], delay[i], -count[i] * (int64_t)machines + (int64_t)i, i};
    }
    sort_key3(a, scratch, machines);
    sort_key3(b, scratch, machines);
    for (Py_ssize_t i = 0; i < machines; i++) label[b[i].item] = (int64_t)a[i].item;
    for (Py_ssize_t e = 0; e < n; e++) moved[e] = label[machine[e]];
    for (Py_ssize_t i = 0; i < machines; i++) ready[i] = delay[i];
    /* The entries by position, largest first, in entry order within one (a stable sort). */
    int64_t largest = 0;
    for (Py_ssize_t e = 0; e < n; e++)
        if (position[e] > largest) largest = position[e];
    bucket = calloc((size_t)(largest + 2), sizeof(int64_t));
    if (!bucket) goto done;
    for (Py_ssize_t e = 0; e < n; e++) bucket[largest - position[e] + 1]++;
    for (int64_t p = 1; p <= largest + 1; p++) bucket[p] += bucket[p - 1];
    for (Py_ssize_t e = 0; e < n; e++) levels[bucket[largest - position[e]]++] = e;
    for (Py_ssize_t begin = 0; begin < n;) {
        Py_ssize_t end = begin + 1;
        while (end < n && position[levels[end]] == position[levels[begin]]) end++;
        Py_ssize_t width = end - begin;
        /* The level's jobs by kind then row; its slots by kind, when they start, then machine. */
        for (Py_ssize_t i = 0; i < width; i++) {
            Py_ssize_t e = levels[begin + i];
            int64_t kind = machine_kind[moved[e]];
            a[i] = (Key3){kind, 0.0, rows[e], e};
            b[i] = (Key3){kind, ready[moved[e]], moved[e], e};
        }
        sort_key3(a, scratch, width);
        sort_key3(b, scratch, width);
        for (Py_ssize_t i = 0; i < width; i++) {
            Py_ssize_t at = levels[begin + i];
            int64_t row = rows[a[i].item];
            int64_t slot_machine = moved[b[i].item];
            out_rows[at] = row;
            out_machine[at] = slot_machine;
        }
        for (Py_ssize_t i = 0; i < width; i++) {
            int64_t row = rows[a[i].item];
            int64_t slot_machine = moved[b[i].item];
            ready[slot_machine] += times[row * kinds + machine_kind[slot_machine]];
        }
        begin = end;
    }
    status = 0;
done:
    free(count); free(label); free(ready); free(moved); free(levels); free(a); free(b); free(scratch); free(bucket);
    return status;
}

static PyObject *py_canonical(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer kind, delay, times, rows, machine, position, out_rows, out_machine;
    Py_ssize_t machines, jobs, kinds, n;
    if (!PyArg_ParseTuple(args, "y*y*ny*nny*y*y*nw*w*", &kind, &delay, &machines, &times, &jobs, &kinds, &rows, &machine, &position,
                          &n, &out_rows, &out_machine))
        return NULL;
    PyObject *result = NULL;
    if (kind.len != (Py_ssize_t)sizeof(int64_t) * machines || delay.len != (Py_ssize_t)sizeof(double) * machines ||
        times.len != (Py_ssize_t)sizeof(double) * jobs * kinds || rows.len != (Py_ssize_t)sizeof(int64_t) * n ||
        machine.len != (Py_ssize_t)sizeof(int64_t) * n || position.len != (Py_ssize_t)sizeof(int64_t) * n ||
        out_rows.len != (Py_ssize_t)sizeof(int64_t) * n || out_machine.len != (Py_ssize_t)sizeof(int64_t) * n) {
        PyErr_SetString(PyExc_ValueError, "canonical: arrays of the wrong size");
        goto out;
    }
    const int64_t *kind_ = kind.buf, *rows_ = rows.buf, *machine_ = machine.buf, *position_ = position.buf;
    const double *delay_ = delay.buf;
    for (Py_ssize_t i = 0; i < machines; i++) {
        if (isnan(delay_[i]) || kind_[i] < 0 || kind_[i] >= kinds) {
            result = Py_NewRef(Py_False);
            goto out;
        }
    }
    for (Py_ssize_t e = 0; e < n; e++) {
        if (rows_[e] < 0 || rows_[e] >= jobs || machine_[e] < 0 || machine_[e] >= machines || position_[e] < 0 ||
            position_[e] > (int64_t)n + 1) {
            result = Py_NewRef(Py_False);
            goto out;
        }
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = canonical(kind.buf, delay.buf, machines, times.buf, kinds, rows.buf, machine.buf, position.buf, n, out_rows.buf,
                       out_machine.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&kind); PyBuffer_Release(&delay); PyBuffer_Release(&times); PyBuffer_Release(&rows);
    PyBuffer_Release(&machine); PyBuffer_Release(&position); PyBuffer_Release(&out_rows); PyBuffer_Release(&out_machine);
    return result;
}

/* ---------------------------------------------------------------------- uncontended */

/* allox._Left.uncontended: rows (of every_job, n) whose strictly fastest kind is fastest[row]
 * (-1: none), each on a free machine (delay 0) of that kind, of each kind the first listed taken
 * by the rows in order. Writes each machine's queue (bounds, machines + 1), the rows by machine
 * (queued) and the machines used, ascending (used); 0, or 1 when it does not apply (a row
 * without a strictly fastest kind, a kind with too few free machines), -1 without memory. */
static int uncontended(const int64_t *fastest, const int64_t *rows, Py_ssize_t n, const double *delay, const int64_t *machine_kind,
                       Py_ssize_t machines, Py_ssize_t kinds, int64_t *bounds, int64_t *queued, int64_t *used) {
    int64_t *need = calloc((size_t)kinds + 1, sizeof(int64_t));
    int64_t *next = calloc((size_t)kinds + 1, sizeof(int64_t));
    int64_t *free_by_kind = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1));
    int64_t *row_on = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1));
    int status = -1;
    if (!need || !next || !free_by_kind || !row_on) goto done;
    status = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t kind = fastest[rows[i]];
        if (kind < 0 || kind >= kinds) goto done;
        need[kind]++;
    }
    /* The free machines by kind, as listed: next[k] is where kind k's start. */
    for (Py_ssize_t m = 0; m < machines; m++)
        if (delay[m] == 0) next[machine_kind[m] + 1]++;
    for (Py_ssize_t k = 0; k < kinds; k++) {
        if (need[k] > next[k + 1]) goto done;
        next[k + 1] += next[k];
    }
    for (Py_ssize_t m = 0; m < machines; m++) {
        row_on[m] = -1;
        if (delay[m] == 0) free_by_kind[next[machine_kind[m]]++] = m;
    }
    /* next[k] is now where kind k+1's start: kind k's start again at next[k] - free of k. */
    for (Py_ssize_t k = kinds - 1; k >= 0; k--) next[k + 1] = next[k];
    next[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) row_on[free_by_kind[next[fastest[rows[i]]]++]] = rows[i];
    Py_ssize_t at = 0;
    bounds[0] = 0;
    for (Py_ssize_t m = 0; m < machines; m++) {
        if (row_on[m] >= 0) {
            queued[at] = row_on[m];
            used[at] = m;
            at++;
        }
        bounds[m + 1] = at;
    }
    status = 0;
done:
    free(need); free(next); free(free_by_kind); free(row_on);
    return status;
}

static PyObject *py_uncontended(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer fastest, rows, delay, kind, bounds, queued, used;
    Py_ssize_t every, n, machines, kinds;
    if (!PyArg_ParseTuple(args, "y*ny*ny*y*nnw*w*w*", &fastest, &every, &rows, &n, &delay, &kind, &machines, &kinds, &bounds, &queued,
                          &used))
        return NULL;
    PyObject *result = NULL;
    if (fastest.len != (Py_ssize_t)sizeof(int64_t) * every || rows.len != (Py_ssize_t)sizeof(int64_t) * n ||
        delay.len != (Py_ssize_t)sizeof(double) * machines || kind.len != (Py_ssize_t)sizeof(int64_t) * machines ||
        bounds.len != (Py_ssize_t)sizeof(int64_t) * (machines + 1) || queued.len != (Py_ssize_t)sizeof(int64_t) * n ||
        used.len != (Py_ssize_t)sizeof(int64_t) * n) {
        PyErr_SetString(PyExc_ValueError, "uncontended: arrays of the wrong size");
        goto out;
    }
    const int64_t *rows_ = rows.buf, *kind_ = kind.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (rows_[i] < 0 || rows_[i] >= every) {
            PyErr_SetString(PyExc_ValueError, "uncontended: a row out of range");
            goto out;
        }
    }
    for (Py_ssize_t m = 0; m < machines; m++) {
        if (kind_[m] < 0 || kind_[m] >= kinds) {
            PyErr_SetString(PyExc_ValueError, "uncontended: a machine of no kind");
            goto out;
        }
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = uncontended(fastest.buf, rows.buf, n, delay.buf, kind.buf, machines, kinds, bounds.buf, queued.buf, used.buf);
    Py_END_ALLOW_THREADS
    result = status < 0 ? PyErr_NoMemory() : Py_NewRef(status == 0 ? Py_True : Py_False);
out:
    PyBuffer_Release(&fastest); PyBuffer_Release(&rows); PyBuffer_Release(&delay); PyBuffer_Release(&kind);
    PyBuffer_Release(&bounds); PyBuffer_Release(&queued); PyBuffer_Release(&used);
    return result;
}

static PyMethodDef methods[] = {
    {"raise_prices", py_raise_prices, METH_VARARGS,
     "raise_prices(cost, rows, groups, flat, first, sizes, price, assign): phase 2, prices and assign in place; "
     "False (nothing done) when a cost is NaN"},
    {"position_limits", py_position_limits, METH_VARARGS,
     "position_limits(machine_kind, available, machines, runnable_per_kind, shortest_per_kind, kinds, limits): "
     "positions.position_limits into limits; False (nothing done) with a NaN"},
    {"canonical", py_canonical, METH_VARARGS,
     "canonical(machine_kind, delay, machines, times, jobs, kinds, rows, machine, position, n, out_rows, out_machine): "
     "solve.canonical into out_rows and out_machine; False (nothing done) where it does not apply"},
    {"uncontended", py_uncontended, METH_VARARGS,
     "uncontended(fastest, every, rows, n, delay, machine_kind, machines, kinds, bounds, queued, used): "
     "allox._Left.uncontended's plan into bounds, queued (rows of every_job) and used; False where it declines"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_transport", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__transport(void) { return PyModule_Create(&module); }
