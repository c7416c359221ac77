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

/* The machines grouped by (kind, wait), each group's members in listed order: members[start[g] :
 * start[g + 1]]; group_count of them. Open addressing on the pair (a wait of -0.0 is 0.0's). */
static int group_machines(const int64_t *machine_kind, const double *delay, Py_ssize_t machines, int64_t *members, int64_t *start,
                          Py_ssize_t *group_count) {
    size_t capacity = 16;
    while (capacity < 2 * (size_t)machines) capacity <<= 1;
    int64_t *table = malloc(sizeof(int64_t) * capacity);
    int64_t *group_of = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1));
    int64_t *first = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1)); /* a member of each group */
    if (!table || !group_of || !first) {
        free(table); free(group_of); free(first);
        return -1;
    }
    for (size_t i = 0; i < capacity; i++) table[i] = -1;
    Py_ssize_t groups = 0;
    for (Py_ssize_t m = 0; m < machines; m++) {
        double wait = delay[m] == 0 ? 0.0 : delay[m];
        uint64_t bits;
        memcpy(&bits, &wait, sizeof bits);
        uint64_t hash = (bits ^ ((uint64_t)machine_kind[m] << 52)) * 0x9E3779B97F4A7C15ULL; /* Fibonacci hashing */
        size_t at = (size_t)((hash ^ (hash >> 29)) & (capacity - 1));
        for (;;) {
            int64_t g = table[at];
            if (g < 0) {
                table[at] = groups;
                first[groups] = m;
                group_of[m] = groups++;
                break;
            }
            if (machine_kind[first[g]] == machine_kind[m] && delay[first[g]] == delay[m]) {
                group_of[m] = g;
                break;
            }
            at = (at + 1) & (capacity - 1);
        }
    }
    for (Py_ssize_t g = 0; g <= groups; g++) start[g] = 0;
    for (Py_ssize_t m = 0; m < machines; m++) start[group_of[m] + 1]++;
    for (Py_ssize_t g = 0; g < groups; g++) start[g + 1] += start[g];
    for (Py_ssize_t m = 0; m < machines; m++) members[start[group_of[m]]++] = m;
    for (Py_ssize_t g = groups; g > 0; g--) start[g] = start[g - 1];
    start[0] = 0;
    *group_count = groups;
    free(table); free(group_of); free(first);
    return 0;
}

/* solve.canonical, step for step: rows, machine, position (n entries) in; out_rows, out_machine
 * out. times is jobs x kinds (C order), kinds its width. The orders NumPy sorts for are made by
 * grouping and counting where that gives the same order. */
static int canonical(const int64_t *machine_kind, const double *delay, Py_ssize_t machines, const double *times, Py_ssize_t jobs,
                     Py_ssize_t kinds, const int64_t *rows, const int64_t *machine, const int64_t *position, Py_ssize_t n,
                     int64_t *out_rows, int64_t *out_machine) {
    Py_ssize_t size = machines > n ? machines : n;
    int64_t *count = calloc((size_t)(machines ? machines : 1), sizeof(int64_t));
    int64_t *label = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1));
    double *ready = malloc(sizeof(double) * (size_t)(machines ? machines : 1));
    int64_t *members = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1));
    int64_t *start = malloc(sizeof(int64_t) * (size_t)(machines + 1));
    int64_t *moved = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    Py_ssize_t *levels = malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    int64_t *by_row = malloc(sizeof(int64_t) * (size_t)(jobs ? jobs : 1));
    int64_t *job_order = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    Key3 *b = malloc(sizeof(Key3) * (size_t)(size ? size : 1));
    Key3 *scratch = malloc(sizeof(Key3) * (size_t)(size ? size : 1));
    int64_t *bucket = NULL, *level_of = NULL, *by_level_kind = NULL;
    int status = -1;
    if (!count || !label || !ready || !members || !start || !moved || !levels || !by_row || !job_order || !b || !scratch) goto done;
    for (Py_ssize_t e = 0; e < n; e++) count[machine[e]]++;
    /* Within each (kind, wait) the k-th longest queue goes to the k-th listed machine (lexsort by
     * kind, wait, then index, against kind, wait, -count, index). */
    Py_ssize_t groups;
    if (group_machines(machine_kind, delay, machines, members, start, &groups)) goto done;
    for (Py_ssize_t g = 0; g < groups; g++) {
        int64_t begin = start[g], end = start[g + 1];
        int64_t least = count[members[begin]], most = least;
        for (int64_t i = begin; i < end; i++) {
            int64_t c = count[members[i]];
            if (c < least) least = c;
            if (c > most) most = c;
        }
        if (least == most) {
            for (int64_t i = begin; i < end; i++) label[members[i]] = members[i];
            continue;
        }
        for (int64_t i = begin; i < end; i++) b[i - begin] = (Key3){-count[members[i]], 0.0, members[i], members[i]};
        sort_key3(b, scratch, end - begin);
        for (int64_t i = begin; i < end; i++) label[b[i - begin].item] = members[i];
    }
    for (Py_ssize_t e = 0; e < n; e++) moved[e] = label[machine[e]];
    for (Py_ssize_t i = 0; i < machines; i++) ready[i] = delay[i];
    /* The entries by position, largest first, in entry order within one (a stable sort). */
    int64_t largest = 0;
    for (Py_ssize_t e = 0; e < n; e++)
        if (position[e] > largest) largest = position[e];
    bucket = calloc((size_t)(largest + 2), sizeof(int64_t));
    level_of = calloc((size_t)(largest + 1), sizeof(int64_t));
    if (!bucket || !level_of) goto done;
    for (Py_ssize_t e = 0; e < n; e++) bucket[largest - position[e] + 1]++;
    int64_t level_count = 0;
    for (int64_t p = largest; p >= 0; p--)
        if (bucket[largest - p + 1]) level_of[p] = level_count++;
    for (int64_t p = 1; p <= largest + 1; p++) bucket[p] += bucket[p - 1];
    for (Py_ssize_t e = 0; e < n; e++) levels[bucket[largest - position[e]]++] = e;
    /* Each level's jobs by kind then row (NumPy: lexsort by row, slot kind, -position): counted
     * into (level, kind) in row order. */
    by_level_kind = calloc((size_t)(level_count * kinds + 1), sizeof(int64_t));
    if (!by_level_kind) goto done;
    for (Py_ssize_t r = 0; r < jobs; r++) by_row[r] = -1;
    for (Py_ssize_t e = 0; e < n; e++) {
        by_row[rows[e]] = e;
        by_level_kind[level_of[position[e]] * kinds + machine_kind[moved[e]] + 1]++;
    }
    for (int64_t k = 0; k < level_count * kinds; k++) by_level_kind[k + 1] += by_level_kind[k];
    for (Py_ssize_t r = 0; r < jobs; r++) {
        int64_t e = by_row[r];
        if (e >= 0) job_order[by_level_kind[level_of[position[e]] * kinds + machine_kind[moved[e]]]++] = e;
    }
    for (Py_ssize_t begin = 0; begin < n;) {
        Py_ssize_t end = begin + 1;
        while (end < n && position[levels[end]] == position[levels[begin]]) end++;
        Py_ssize_t width = end - begin;
        /* The level's slots by kind, when they start, then machine. */
        for (Py_ssize_t i = 0; i < width; i++) {
            Py_ssize_t e = levels[begin + i];
            b[i] = (Key3){machine_kind[moved[e]], ready[moved[e]], moved[e], e};
        }
        sort_key3(b, scratch, width);
        for (Py_ssize_t i = 0; i < width; i++) {
            Py_ssize_t at = levels[begin + i];
            out_rows[at] = rows[job_order[begin + i]];
            out_machine[at] = moved[b[i].item];
        }
        for (Py_ssize_t i = 0; i < width; i++) {
            int64_t slot_machine = moved[b[i].item];
            ready[slot_machine] += times[rows[job_order[begin + i]] * kinds + machine_kind[slot_machine]];
        }
        begin = end;
    }
    status = 0;
done:
    free(count); free(label); free(ready); free(members); free(start); free(moved); free(levels); free(by_row); free(job_order);
    free(b); free(scratch); free(bucket); free(level_of); free(by_level_kind);
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
    failed = canonical(kind.buf, delay.buf, machines, times.buf, jobs, kinds, rows.buf, machine.buf, position.buf, n, out_rows.buf,
                       out_machine.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&kind); PyBuffer_Release(&delay); PyBuffer_Release(&times); PyBuffer_Release(&rows);
    PyBuffer_Release(&machine); PyBuffer_Release(&position); PyBuffer_Release(&out_rows); PyBuffer_Release(&out_machine);
    return result;
}

/* ---------------------------------------------------------------------- slot layout */

/* positions.slots_for: limits[m] positions on every machine, ordered by kind, position, machine
 * (counted into (kind, position) rather than sorted). kind_bounds has kinds + 1 entries. */
static int slots_for(const int64_t *limits, const int64_t *machine_kind, Py_ssize_t machines, Py_ssize_t kinds, int64_t *machine,
                     int64_t *position, int64_t *kind_bounds) {
    int64_t *most = calloc((size_t)kinds + 1, sizeof(int64_t));
    int64_t *base = calloc((size_t)kinds + 1, sizeof(int64_t)); /* where kind k's (k, p) counters begin */
    int64_t *at = NULL;
    int status = -1;
    if (!most || !base) goto done;
    for (Py_ssize_t m = 0; m < machines; m++)
        if (limits[m] > most[machine_kind[m]]) most[machine_kind[m]] = limits[m];
    for (Py_ssize_t k = 0; k < kinds; k++) base[k + 1] = base[k] + most[k] + 1;
    at = calloc((size_t)base[kinds] + 1, sizeof(int64_t));
    if (!at) goto done;
    /* at[base[k] + p]: the slots of kind k at position p (machines with limits >= p) */
    for (Py_ssize_t m = 0; m < machines; m++)
        if (limits[m] > 0) at[base[machine_kind[m]] + limits[m]]++;
    for (Py_ssize_t k = 0; k < kinds; k++)
        for (int64_t p = most[k] - 1; p >= 1; p--) at[base[k] + p] += at[base[k] + p + 1];
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < kinds; k++) {
        kind_bounds[k] = total;
        for (int64_t p = 1; p <= most[k]; p++) {
            int64_t here = at[base[k] + p];
            at[base[k] + p] = total;
            total += here;
        }
    }
    kind_bounds[kinds] = total;
    for (Py_ssize_t m = 0; m < machines; m++) {
        const int64_t offset = base[machine_kind[m]];
        for (int64_t p = 1; p <= limits[m]; p++) {
            int64_t slot = at[offset + p]++;
            machine[slot] = m;
            position[slot] = p;
        }
    }
    status = 0;
done:
    free(most); free(base); free(at);
    return status;
}

static PyObject *py_slots_for(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer limits, kind, machine, position, bounds;
    Py_ssize_t machines, kinds, total;
    if (!PyArg_ParseTuple(args, "y*y*nnnw*w*w*", &limits, &kind, &machines, &kinds, &total, &machine, &position, &bounds)) return NULL;
    PyObject *result = NULL;
    if (limits.len != (Py_ssize_t)sizeof(int64_t) * machines || kind.len != (Py_ssize_t)sizeof(int64_t) * machines ||
        machine.len != (Py_ssize_t)sizeof(int64_t) * total || position.len != (Py_ssize_t)sizeof(int64_t) * total ||
        bounds.len != (Py_ssize_t)sizeof(int64_t) * (kinds + 1)) {
        PyErr_SetString(PyExc_ValueError, "slots_for: arrays of the wrong size");
        goto out;
    }
    const int64_t *limits_ = limits.buf, *kind_ = kind.buf;
    int64_t sum = 0;
    for (Py_ssize_t m = 0; m < machines; m++) {
        if (limits_[m] < 0 || kind_[m] < 0 || kind_[m] >= kinds) {
            result = Py_NewRef(Py_False);
            goto out;
        }
        sum += limits_[m];
    }
    if (sum != total) {
        PyErr_SetString(PyExc_ValueError, "slots_for: total is not the sum of the limits");
        goto out;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = slots_for(limits.buf, kind.buf, machines, kinds, machine.buf, position.buf, bounds.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&limits); PyBuffer_Release(&kind); PyBuffer_Release(&machine); PyBuffer_Release(&position);
    PyBuffer_Release(&bounds);
    return result;
}

typedef struct {
    int64_t kind;
    double wait;
    int64_t group;
} Pair;

#define PAIR_LESS(a, b) ((a)->kind < (b)->kind || ((a)->kind == (b)->kind && (a)->wait < (b)->wait))
STABLE_SORT(sort_pairs, Pair, PAIR_LESS)

/* positions.slot_classes for slots ordered by kind then position (as slots_for lays them out):
 * the slots by kind, wait, position, slot (a stable sort by (kind, wait) of that order, counted
 * into the (kind, wait) pairs present, sorted), and where each class of equal (kind, wait,
 * position) begins. Writes order (slots) and class_start; returns the classes, or -1. */
static Py_ssize_t slot_classes(const int64_t *machine, const int64_t *position, Py_ssize_t slots, const int64_t *machine_kind,
                               const double *delay, Py_ssize_t machines, int64_t *order, int64_t *class_start) {
    int64_t *members = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1));
    int64_t *start = malloc(sizeof(int64_t) * (size_t)(machines + 1));
    int64_t *group_of = malloc(sizeof(int64_t) * (size_t)(machines ? machines : 1));
    int64_t *rank = NULL, *at = NULL;
    Pair *pairs = NULL, *scratch = NULL;
    Py_ssize_t classes = -1, groups;
    if (!members || !start || !group_of) goto done;
    if (group_machines(machine_kind, delay, machines, members, start, &groups)) goto done;
    for (Py_ssize_t g = 0; g < groups; g++)
        for (int64_t i = start[g]; i < start[g + 1]; i++) group_of[members[i]] = g;
    pairs = malloc(sizeof(Pair) * (size_t)(groups ? groups : 1));
    scratch = malloc(sizeof(Pair) * (size_t)(groups ? groups : 1));
    rank = malloc(sizeof(int64_t) * (size_t)(groups ? groups : 1));
    at = calloc((size_t)groups + 1, sizeof(int64_t));
    if (!pairs || !scratch || !rank || !at) goto done;
    for (Py_ssize_t g = 0; g < groups; g++) {
        int64_t m = members[start[g]];
        pairs[g] = (Pair){machine_kind[m], delay[m] == 0 ? 0.0 : delay[m], g};
    }
    sort_pairs(pairs, scratch, groups);
    for (Py_ssize_t r = 0; r < groups; r++) rank[pairs[r].group] = r;
    for (Py_ssize_t s = 0; s < slots; s++) at[rank[group_of[machine[s]]] + 1]++;
    for (Py_ssize_t r = 0; r < groups; r++) at[r + 1] += at[r];
    for (Py_ssize_t s = 0; s < slots; s++) order[at[rank[group_of[machine[s]]]]++] = s;
    classes = 0;
    for (Py_ssize_t i = 0; i < slots; i++) {
        if (i == 0 || group_of[machine[order[i]]] != group_of[machine[order[i - 1]]] || position[order[i]] != position[order[i - 1]])
            class_start[classes++] = i;
    }
done:
    free(members); free(start); free(group_of); free(rank); free(at); free(pairs); free(scratch);
    return classes;
}

static PyObject *py_slot_classes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer machine, position, kind, delay, order, class_start;
    Py_ssize_t slots, machines;
    if (!PyArg_ParseTuple(args, "y*y*ny*y*nw*w*", &machine, &position, &slots, &kind, &delay, &machines, &order, &class_start))
        return NULL;
    PyObject *result = NULL;
    if (machine.len != (Py_ssize_t)sizeof(int64_t) * slots || position.len != (Py_ssize_t)sizeof(int64_t) * slots ||
        kind.len != (Py_ssize_t)sizeof(int64_t) * machines || delay.len != (Py_ssize_t)sizeof(double) * machines ||
        order.len != (Py_ssize_t)sizeof(int64_t) * slots || class_start.len != (Py_ssize_t)sizeof(int64_t) * slots) {
        PyErr_SetString(PyExc_ValueError, "slot_classes: arrays of the wrong size");
        goto out;
    }
    const int64_t *machine_ = machine.buf, *position_ = position.buf, *kind_ = kind.buf;
    const double *delay_ = delay.buf;
    for (Py_ssize_t m = 0; m < machines; m++) {
        if (isnan(delay_[m]) || kind_[m] < 0) {
            result = Py_NewRef(Py_None);
            goto out;
        }
    }
    /* Only slots laid out by kind, then position: else None, and NumPy sorts. */
    for (Py_ssize_t s = 0; s < slots; s++) {
        if (machine_[s] < 0 || machine_[s] >= machines) {
            result = Py_NewRef(Py_None);
            goto out;
        }
        if (s > 0) {
            int64_t k0 = kind_[machine_[s - 1]], k1 = kind_[machine_[s]];
            if (k1 < k0 || (k1 == k0 && position_[s] < position_[s - 1])) {
                result = Py_NewRef(Py_None);
                goto out;
            }
        }
    }
    Py_ssize_t classes;
    Py_BEGIN_ALLOW_THREADS
    classes = slot_classes(machine.buf, position.buf, slots, kind.buf, delay.buf, machines, order.buf, class_start.buf);
    Py_END_ALLOW_THREADS
    result = classes < 0 ? PyErr_NoMemory() : PyLong_FromSsize_t(classes);
out:
    PyBuffer_Release(&machine); PyBuffer_Release(&position); PyBuffer_Release(&kind); PyBuffer_Release(&delay);
    PyBuffer_Release(&order); PyBuffer_Release(&class_start);
    return result;
}

/* ------------------------------------------------------------------- vacancy's need */

#define TERMS 64 /* allox._TERMS */

/* allox._Vacancy._needs: for every row, the sum over the machines of kind `other` (count[w] of
 * each wait[w]; a count may be -1, taking a machine out) of the n >= 1 with
 * n * p_other + wait_w < p_kind + wait - tolerance, for n up to the rows' largest number of
 * terms (at most TERMS), and over the machines (ceil((limit - wait_w) / p_other) - 1 each) for
 * a row with more. Counts are whole, so every sum is exact in any order. */
static int needs(const double *times, Py_ssize_t rows, Py_ssize_t kinds, Py_ssize_t kind, double wait, Py_ssize_t other,
                 double tolerance, const double *waits, const double *counts, Py_ssize_t count, double *total) {
    double *limit = malloc(sizeof(double) * (size_t)(rows ? rows : 1));
    double *step = malloc(sizeof(double) * (size_t)(rows ? rows : 1));
    double *terms = malloc(sizeof(double) * (size_t)(rows ? rows : 1));
    Member *sorted = malloc(sizeof(Member) * (size_t)(count ? count : 1));
    Member *scratch = malloc(sizeof(Member) * (size_t)(count ? count : 1));
    double *cumulative = malloc(sizeof(double) * (size_t)(count + 1));
    int status = -1;
    if (!limit || !step || !terms || !sorted || !scratch || !cumulative) goto done;
    double most = 0.0;
    for (Py_ssize_t j = 0; j < rows; j++) {
        double own = times[j * kinds + kind], time = times[j * kinds + other];
        int usable = isfinite(own) && isfinite(time) && time > 0;
        limit[j] = usable ? own + (wait - tolerance) : 0.0;
        step[j] = usable ? time : 1.0;
        terms[j] = floor((limit[j] > 0.0 ? limit[j] : 0.0) / step[j]);
        if (terms[j] > most) most = terms[j];
    }
    int64_t largest = most < TERMS ? (int64_t)most : TERMS;
    for (Py_ssize_t w = 0; w < count; w++) {
        sorted[w].omega = waits[w];
        sorted[w].machine = w;
    }
    sort_members(sorted, scratch, count);
    cumulative[0] = 0.0;
    for (Py_ssize_t w = 0; w < count; w++) cumulative[w + 1] = cumulative[w] + counts[sorted[w].machine];
    for (Py_ssize_t j = 0; j < rows; j++) {
        double sum = 0.0;
        if (terms[j] > TERMS) {
            for (Py_ssize_t w = 0; w < count; w++) {
                double moves = ceil((limit[j] - waits[w]) / step[j]) - 1.0;
                sum += (moves > 0.0 ? moves : 0.0) * counts[w];
            }
        } else {
            for (int64_t n = 1; n <= largest; n++) sum += cumulative[below(sorted, count, limit[j] - (double)n * step[j])];
        }
        total[j] = sum;
    }
    status = 0;
done:
    free(limit); free(step); free(terms); free(sorted); free(scratch); free(cumulative);
    return status;
}

static PyObject *py_needs(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer times, waits, counts, total;
    Py_ssize_t rows, kinds, kind, other, count;
    double wait, tolerance;
    if (!PyArg_ParseTuple(args, "y*nnndndy*y*nw*", &times, &rows, &kinds, &kind, &wait, &other, &tolerance, &waits, &counts, &count,
                          &total))
        return NULL;
    PyObject *result = NULL;
    if (times.len != (Py_ssize_t)sizeof(double) * rows * kinds || waits.len != (Py_ssize_t)sizeof(double) * count ||
        counts.len != (Py_ssize_t)sizeof(double) * count || total.len != (Py_ssize_t)sizeof(double) * rows || kind < 0 ||
        kind >= kinds || other < 0 || other >= kinds) {
        PyErr_SetString(PyExc_ValueError, "needs: arrays of the wrong size");
        goto out;
    }
    const double *waits_ = waits.buf, *counts_ = counts.buf;
    for (Py_ssize_t w = 0; w < count; w++) {
        if (!isfinite(waits_[w]) || !isfinite(counts_[w])) {
            result = Py_NewRef(Py_False);
            goto out;
        }
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = needs(times.buf, rows, kinds, kind, wait, other, tolerance, waits.buf, counts.buf, count, total.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&times); PyBuffer_Release(&waits); PyBuffer_Release(&counts); PyBuffer_Release(&total);
    return result;
}

/* ------------------------------------------------------------------ classes' glue */

/* transport._cheapest_classes: every row's cheapest class, group_cost[row, group[c]] +
 * offset[c] over the classes, without writing that matrix: a group's cheapest class is its
 * least offset (the first class on ties), and the rows pick among those in class order (argmin:
 * the first on ties; 0 for a row with no finite cost). group_cost is rows x groups, C order. */
static int cheapest_classes(const int64_t *group, const double *offset, Py_ssize_t classes, const double *group_cost, Py_ssize_t rows,
                            Py_ssize_t groups, int64_t *chosen) {
    int64_t *best = malloc(sizeof(int64_t) * (size_t)(groups ? groups : 1));
    int64_t *candidate = malloc(sizeof(int64_t) * (size_t)(groups ? groups : 1)); /* classes, ascending */
    if (!best || !candidate) {
        free(best); free(candidate);
        return -1;
    }
    for (Py_ssize_t g = 0; g < groups; g++) best[g] = -1;
    for (Py_ssize_t c = 0; c < classes; c++) {
        int64_t g = group[c];
        if (best[g] < 0 || offset[c] < offset[best[g]]) best[g] = c;
    }
    Py_ssize_t present = 0;
    for (Py_ssize_t c = 0; c < classes; c++)
        if (best[group[c]] == c) candidate[present++] = c;
    for (Py_ssize_t j = 0; j < rows; j++) {
        const double *row = group_cost + j * groups;
        int64_t pick = 0;
        double least = INFINITY;
        int finite = 0;
        for (Py_ssize_t k = 0; k < present; k++) {
            int64_t c = candidate[k];
            double value = row[group[c]] + offset[c];
            if (k == 0 || value < least) {
                pick = c;
                least = value;
            }
            if (isfinite(value)) finite = 1;
        }
        chosen[j] = finite ? pick : 0;
    }
    free(best); free(candidate);
    return 0;
}

static PyObject *py_cheapest_classes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer group, offset, cost, chosen;
    Py_ssize_t classes, rows, groups;
    if (!PyArg_ParseTuple(args, "y*y*ny*nnw*", &group, &offset, &classes, &cost, &rows, &groups, &chosen)) return NULL;
    PyObject *result = NULL;
    if (group.len != (Py_ssize_t)sizeof(int64_t) * classes || offset.len != (Py_ssize_t)sizeof(double) * classes ||
        cost.len != (Py_ssize_t)sizeof(double) * rows * groups || chosen.len != (Py_ssize_t)sizeof(int64_t) * rows) {
        PyErr_SetString(PyExc_ValueError, "cheapest_classes: arrays of the wrong size");
        goto out;
    }
    const int64_t *group_ = group.buf;
    const double *offset_ = offset.buf, *cost_ = cost.buf;
    for (Py_ssize_t c = 0; c < classes; c++) {
        if (group_[c] < 0 || group_[c] >= groups || isnan(offset_[c])) {
            result = Py_NewRef(Py_False);
            goto out;
        }
    }
    for (Py_ssize_t at = 0; at < rows * groups; at++) {
        if (isnan(cost_[at])) {
            result = Py_NewRef(Py_False);
            goto out;
        }
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = cheapest_classes(group.buf, offset.buf, classes, cost.buf, rows, groups, chosen.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&group); PyBuffer_Release(&offset); PyBuffer_Release(&cost); PyBuffer_Release(&chosen);
    return result;
}

/* transport._units: the groups with a slot (ids, ascending; their count returned) and their
 * units group after group, each group's classes by offset then class order, a class repeated
 * capacity times (unit_class; bounds[g]:bounds[g + 1] are group g's). -1 without memory. */
static Py_ssize_t units(const int64_t *group, const double *offset, const int64_t *capacity, Py_ssize_t classes, Py_ssize_t groups,
                        int64_t *ids, int64_t *unit_class, int64_t *bounds) {
    int64_t *local = malloc(sizeof(int64_t) * (size_t)(groups ? groups : 1));
    int64_t *start = calloc((size_t)groups + 1, sizeof(int64_t));
    Member *kept = malloc(sizeof(Member) * (size_t)(classes ? classes : 1));
    Member *scratch = malloc(sizeof(Member) * (size_t)(classes ? classes : 1));
    Py_ssize_t present = -1;
    if (!local || !start || !kept || !scratch) goto done;
    for (Py_ssize_t c = 0; c < classes; c++)
        if (capacity[c] > 0) start[group[c] + 1]++;
    present = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        local[g] = start[g + 1] ? present : -1;
        if (start[g + 1]) ids[present++] = g;
        start[g + 1] += start[g];
    }
    /* each group's kept classes, in class order, then by offset (a stable sort) */
    for (Py_ssize_t c = 0; c < classes; c++) {
        if (capacity[c] > 0) {
            int64_t at = start[group[c]]++;
            kept[at].omega = offset[c];
            kept[at].machine = c;
        }
    }
    for (Py_ssize_t g = groups; g > 0; g--) start[g] = start[g - 1];
    start[0] = 0;
    int64_t unit = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        if (local[g] < 0) continue;
        bounds[local[g]] = unit;
        int64_t begin = start[g], end = start[g + 1];
        sort_members(kept + begin, scratch, end - begin);
        for (int64_t i = begin; i < end; i++)
            for (int64_t k = 0; k < capacity[kept[i].machine]; k++) unit_class[unit++] = kept[i].machine;
    }
    bounds[present] = unit;
done:
    free(local); free(start); free(kept); free(scratch);
    return present;
}

static PyObject *py_units(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer group, offset, capacity, ids, unit_class, bounds;
    Py_ssize_t classes, groups, total;
    if (!PyArg_ParseTuple(args, "y*y*y*nnw*nw*w*", &group, &offset, &capacity, &classes, &groups, &ids, &total, &unit_class, &bounds))
        return NULL;
    PyObject *result = NULL;
    if (group.len != (Py_ssize_t)sizeof(int64_t) * classes || offset.len != (Py_ssize_t)sizeof(double) * classes ||
        capacity.len != (Py_ssize_t)sizeof(int64_t) * classes || ids.len != (Py_ssize_t)sizeof(int64_t) * groups ||
        unit_class.len != (Py_ssize_t)sizeof(int64_t) * total || bounds.len != (Py_ssize_t)sizeof(int64_t) * (groups + 1)) {
        PyErr_SetString(PyExc_ValueError, "units: arrays of the wrong size");
        goto out;
    }
    const int64_t *group_ = group.buf, *capacity_ = capacity.buf;
    const double *offset_ = offset.buf;
    int64_t sum = 0;
    for (Py_ssize_t c = 0; c < classes; c++) {
        if (group_[c] < 0 || group_[c] >= groups || isnan(offset_[c])) {
            result = Py_NewRef(Py_None);
            goto out;
        }
        if (capacity_[c] > 0) sum += capacity_[c];
    }
    if (sum != total) {
        PyErr_SetString(PyExc_ValueError, "units: total is not the kept capacity");
        goto out;
    }
    Py_ssize_t present;
    Py_BEGIN_ALLOW_THREADS
    present = units(group.buf, offset.buf, capacity.buf, classes, groups, ids.buf, unit_class.buf, bounds.buf);
    Py_END_ALLOW_THREADS
    result = present < 0 ? PyErr_NoMemory() : PyLong_FromSsize_t(present);
out:
    PyBuffer_Release(&group); PyBuffer_Release(&offset); PyBuffer_Release(&capacity); PyBuffer_Release(&ids);
    PyBuffer_Release(&unit_class); PyBuffer_Release(&bounds);
    return result;
}

/* Each row's place among its class's rows, in row order: rank[j] (a stable argsort by class,
 * then the position within the class), and each class's first place (start, classes + 1). */
static int ranked(const int64_t *assign, Py_ssize_t rows, Py_ssize_t classes, int64_t *rank, int64_t *start) {
    int64_t *seen = calloc((size_t)(classes ? classes : 1), sizeof(int64_t));
    if (!seen) return -1;
    for (Py_ssize_t c = 0; c <= classes; c++) start[c] = 0;
    for (Py_ssize_t j = 0; j < rows; j++) start[assign[j] + 1]++;
    for (Py_ssize_t c = 0; c < classes; c++) start[c + 1] += start[c];
    for (Py_ssize_t j = 0; j < rows; j++) rank[j] = seen[assign[j]]++;
    free(seen);
    return 0;
}

/* transport._filled: a group's rows, in row order, take its cheapest units. */
static int filled(const int64_t *assign, Py_ssize_t rows, Py_ssize_t groups, const int64_t *unit_class, const int64_t *bounds,
                  int64_t *result) {
    int64_t *rank = malloc(sizeof(int64_t) * (size_t)(rows ? rows : 1));
    int64_t *start = malloc(sizeof(int64_t) * (size_t)(groups + 1));
    int status = -1;
    if (rank && start && !ranked(assign, rows, groups, rank, start)) {
        for (Py_ssize_t j = 0; j < rows; j++) result[j] = unit_class[bounds[assign[j]] + rank[j]];
        status = 0;
    }
    free(rank); free(start);
    return status;
}

/* solve._slots_to_rows: the rows by class (a stable sort), each class's rows taking its slots
 * in slot order. */
static int slots_to_rows(const int64_t *assign, Py_ssize_t rows, Py_ssize_t classes, const int64_t *slots_by_class,
                         const int64_t *class_start, int64_t *out_rows, int64_t *out_slots) {
    int64_t *rank = malloc(sizeof(int64_t) * (size_t)(rows ? rows : 1));
    int64_t *start = malloc(sizeof(int64_t) * (size_t)(classes + 1));
    int status = -1;
    if (rank && start && !ranked(assign, rows, classes, rank, start)) {
        for (Py_ssize_t j = 0; j < rows; j++) {
            int64_t at = start[assign[j]] + rank[j];
            out_rows[at] = j;
            out_slots[at] = slots_by_class[class_start[assign[j]] + rank[j]];
        }
        status = 0;
    }
    free(rank); free(start);
    return status;
}

static PyObject *py_filled(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer assign, unit_class, bounds, result_;
    Py_ssize_t rows, groups, units;
    if (!PyArg_ParseTuple(args, "y*nny*ny*w*", &assign, &rows, &groups, &unit_class, &units, &bounds, &result_)) return NULL;
    PyObject *result = NULL;
    if (assign.len != (Py_ssize_t)sizeof(int64_t) * rows || unit_class.len != (Py_ssize_t)sizeof(int64_t) * units ||
        bounds.len != (Py_ssize_t)sizeof(int64_t) * (groups + 1) || result_.len != (Py_ssize_t)sizeof(int64_t) * rows) {
        PyErr_SetString(PyExc_ValueError, "filled: arrays of the wrong size");
        goto out;
    }
    const int64_t *assign_ = assign.buf, *bounds_ = bounds.buf;
    int64_t *load = calloc((size_t)(groups ? groups : 1), sizeof(int64_t));
    if (!load) {
        result = PyErr_NoMemory();
        goto out;
    }
    int fits = 1;
    for (Py_ssize_t j = 0; j < rows && fits; j++) fits = assign_[j] >= 0 && assign_[j] < groups && ++load[assign_[j]] >= 0;
    for (Py_ssize_t g = 0; g < groups && fits; g++)
        fits = bounds_[g] >= 0 && bounds_[g] + load[g] <= bounds_[g + 1] && bounds_[g + 1] <= units;
    free(load);
    if (!fits) {
        result = Py_NewRef(Py_False); /* a group with more rows than units: NumPy's steps say what they say */
        goto out;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = filled(assign.buf, rows, groups, unit_class.buf, bounds.buf, result_.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&assign); PyBuffer_Release(&unit_class); PyBuffer_Release(&bounds); PyBuffer_Release(&result_);
    return result;
}

static PyObject *py_slots_to_rows(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer assign, slots_by_class, class_start, out_rows, out_slots;
    Py_ssize_t rows, classes, slots;
    if (!PyArg_ParseTuple(args, "y*nny*ny*w*w*", &assign, &rows, &classes, &slots_by_class, &slots, &class_start, &out_rows, &out_slots))
        return NULL;
    PyObject *result = NULL;
    if (assign.len != (Py_ssize_t)sizeof(int64_t) * rows || slots_by_class.len != (Py_ssize_t)sizeof(int64_t) * slots ||
        class_start.len != (Py_ssize_t)sizeof(int64_t) * classes || out_rows.len != (Py_ssize_t)sizeof(int64_t) * rows ||
        out_slots.len != (Py_ssize_t)sizeof(int64_t) * rows) {
        PyErr_SetString(PyExc_ValueError, "slots_to_rows: arrays of the wrong size");
        goto out;
    }
    const int64_t *assign_ = assign.buf, *start_ = class_start.buf;
    int64_t *load = calloc((size_t)(classes ? classes : 1), sizeof(int64_t));
    if (!load) {
        result = PyErr_NoMemory();
        goto out;
    }
    int fits = 1;
    for (Py_ssize_t j = 0; j < rows && fits; j++) fits = assign_[j] >= 0 && assign_[j] < classes && ++load[assign_[j]] >= 0;
    for (Py_ssize_t c = 0; c < classes && fits; c++) fits = start_[c] >= 0 && start_[c] + load[c] <= slots;
    free(load);
    if (!fits) {
        result = Py_NewRef(Py_False);
        goto out;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = slots_to_rows(assign.buf, rows, classes, slots_by_class.buf, class_start.buf, out_rows.buf, out_slots.buf);
    Py_END_ALLOW_THREADS
    result = answered(failed);
out:
    PyBuffer_Release(&assign); PyBuffer_Release(&slots_by_class); PyBuffer_Release(&class_start); PyBuffer_Release(&out_rows);
    PyBuffer_Release(&out_slots);
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
    {"slots_for", py_slots_for, METH_VARARGS,
     "slots_for(limits, machine_kind, machines, kinds, total, machine, position, kind_bounds): positions.slots_for into the "
     "last three; False (nothing done) where it does not apply"},
    {"needs", py_needs, METH_VARARGS,
     "needs(times, rows, kinds, kind, wait, other, tolerance, waits, counts, count, total): allox._Vacancy._needs into "
     "total; False (nothing done) with a wait or count not finite"},
    {"cheapest_classes", py_cheapest_classes, METH_VARARGS,
     "cheapest_classes(group, offset, classes, group_cost, rows, groups, chosen): transport._cheapest_classes into chosen"},
    {"units", py_units, METH_VARARGS,
     "units(group, offset, capacity, classes, groups, ids, total, unit_class, bounds): transport._units' arrays; the groups "
     "with a slot, or None where it does not apply"},
    {"filled", py_filled, METH_VARARGS, "filled(assign, rows, groups, unit_class, units, bounds, result): transport._filled"},
    {"slots_to_rows", py_slots_to_rows, METH_VARARGS,
     "slots_to_rows(assign, rows, classes, slots_by_class, slots, class_start, out_rows, out_slots): solve._slots_to_rows"},
    {"slot_classes", py_slot_classes, METH_VARARGS,
     "slot_classes(machine, position, slots, machine_kind, delay, machines, order, class_start): positions.slot_classes' "
     "order and class starts; the number of classes, or None where it does not apply"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_transport", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__transport(void) { return PyModule_Create(&module); }
