/* The folded solve's phases (scheduler/matching/transport.py: _cheapest_classes, then class
 * _Grouped's phases 2 and 3) over plain double and int64 buffers.
 *
 * A plan of Algorithm 2 is some 25 NumPy stages of 20-60 us each; the transport's phases are
 * the largest share, and most of their time is NumPy's fixed cost per call on arrays of a few
 * hundred rows and a handful of groups. Here the same steps run as loops (the GIL held: a
 * plan's call takes well under a millisecond).
 *
 * The Python class is the reference: every step here performs the same floating-point
 * operations in the same order (a sum, then a difference; the same comparisons, strict where
 * Python's are), picks the same index where values tie (the first, as argmin does; a stable
 * sort's order), and so reaches the same assignment. Where it could not be sure of doing so it
 * declines, and the caller runs the Python phases from the start: a NaN anywhere, a group
 * without a unit, a shortest path over more than DENSE_NODES nodes or one whose distances are
 * reached from two nodes (Python then asks scipy's Dijkstra, whose choice among equal paths
 * depends on its heap). tests/matching/test_matching_native_transport.py compares both on
 * thousands of instances, tie-heavy ones included.
 *
 * solve_groups(cost, flat, bounds, assign, max_augmentations) -> int
 *   cost    rows x groups float64, C-contiguous: each row's cost in each group
 *   flat    float64: every group's unit offsets, group after group, each group's ascending
 *   bounds  int64, groups + 1: group g's units are flat[bounds[g]:bounds[g+1]]
 *   assign  int64, rows, writable: each row's group, written on SOLVED
 *   returns SOLVED (0), NONE (1: the Python phases find no reliable answer either, and
 *   assign_to_classes returns None) or DECLINED (2: run the Python phases).
 *
 * cheapest_classes(group, offset, group_cost, chosen) -> bool
 *   phase 1 (_cheapest_classes): each row's cheapest class, written into chosen; False (nothing
 *   decided) on a NaN, where NumPy's argmin and sort place it as no comparison does.
 *
 * fold_match(slot_machine, slot_position, machine_kind, delay, times, members, omega, rows, columns) -> bool
 *   solve.py's build and match from the bounded slots (transport.folded_match): the slots'
 *   classes, their groups and units, phases 1 to 3 and each row's slot, written into rows and
 *   columns (int64, a row each) as match returns them; members and omega are the kind orders
 *   laid end to end (positions.KindOrder). False where NumPy's way would leave this path (see
 *   fold below): the caller then runs it.
 *
 * fold_certified(slot_machine, ..., columns, certain) -> bool
 *   fold_match, and where it writes the rows and slots, certain[0] (int64, one): 1 when the
 *   matching is certainly the only optimum over the groups, 0 when not (solve._only_optimum's
 *   answer: transport.only_optimum on the folded matrix's units and each row's group, the
 *   certificate's steps below on the same buffers), -1 when not worked out (NumPy's then).
 *   Algorithm 2's plans ask it for the ~100 plans a pass solves: a few microseconds in the
 *   call, where the folded matrix built again in NumPy for the certificate cost ~0.3 ms.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_buffers.h"
#include "_bound.h"
#include "_canonical.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { SOLVED = 0, NONE = 1, DECLINED = 2 };

/* transport.py's _STALLED_SWEEPS, _MAX_SWEEPS and _PYTHON_DIJKSTRA_NODES. */
#define STALLED_SWEEPS 2
#define MAX_SWEEPS 64
#define DENSE_NODES 40
#define NO_PREDECESSOR (-9999)

typedef struct {
    Py_ssize_t rows, groups;
    const double *cost;    /* rows x groups */
    const double *flat;    /* units */
    const int64_t *bounds; /* groups + 1 */
    int64_t *assign;       /* rows */
    double *price;         /* groups */
    int64_t *load;         /* groups */
    int64_t *priced;       /* groups */
    /* phase 2, per visit: the group's rows, their margins and alternatives, and a copy of the
     * margins to select from */
    int64_t *jobs;
    double *margin;
    int64_t *alternative;
    double *copy;
} State;

static inline double cost_at(const State *s, Py_ssize_t row, Py_ssize_t group) {
    return s->cost[row * s->groups + group];
}

static inline int64_t size_of(const State *s, Py_ssize_t group) {
    return s->bounds[group + 1] - s->bounds[group];
}

/* How many of group g's units cost at most value (its units ascending): searchsorted right. */
static int64_t units_at_most(const State *s, Py_ssize_t group, double value) {
    const double *units = s->flat + s->bounds[group];
    int64_t low = 0, high = size_of(s, group);
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (value < units[middle]) high = middle;
        else low = middle + 1;
    }
    return low;
}

/* ------------------------------------------------------------------------------ phase 2 */

/* The split of a visit (see visit): with values[0:count] the margins (no NaN; reordered here)
 * as M, descending, and units U ascending, the first k below room where M[k] < U[k] (room
 * when there is none), and M[k - 1] into threshold when k > 0. M[k] >= U[k] holds for k below
 * that split and fails from it on (M falls, U rises), so it is found by three-way partitions
 * around pivots, a quickselect's (larger, equal, smaller: the equal ones are the ranks of the
 * pivot's band; runs of equal margins, common with whole-number times, end a round): where the band's last rank holds, every rank up to it does and the
 * search goes on among the smaller values; where its first rank fails, the split is at or
 * before it, among the larger; else the split is inside the band, where M is the pivot and
 * U rises. The same split as bisecting it with a count of the margins >= U[k] per step
 * (M[k] >= U[k] exactly when k + 1 margins are; 118aa31 to b0c8e24) and the same threshold as
 * a quickselect of the margin of that rank, in one selection's time instead of a count per
 * step (~9 a visit of a few hundred rows) and a selection. */
static Py_ssize_t staying_of(double *values, Py_ssize_t count, const double *units, Py_ssize_t room, double *threshold) {
    Py_ssize_t low = 0, high = count, staying = 0;
    while (low < high && low < room) {
        double a = values[low], b = values[low + (high - low) / 2], c = values[high - 1];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b)); /* the median of three */
        Py_ssize_t larger = low, at = low, smaller = high;
        while (at < smaller) {
            double value = values[at];
            if (value > pivot) {
                values[at++] = values[larger];
                values[larger++] = value;
            } else if (value < pivot) {
                values[at] = values[--smaller];
                values[smaller] = value;
            } else {
                at++;
            }
        }
        /* ranks larger .. smaller - 1 are the pivot's */
        if (smaller - 1 < room && pivot >= units[smaller - 1]) {
            staying = low = smaller;
            *threshold = pivot;
        } else if (larger < room && pivot >= units[larger]) {
            Py_ssize_t end = smaller < room ? smaller : room, k = larger + 1;
            while (k < end && pivot >= units[k]) k++;
            *threshold = pivot;
            return k;
        } else {
            high = larger;
        }
    }
    return staying;
}

/* One visit of an over group g (transport.py, raise_prices' inner loop). Returns 0 to go on,
 * 1 when the floor is not finite (phase 2 ends there), -1 on a NaN (decline).
 *
 * NumPy sorts the group's rows by margin, keenest first (a stable sort: then row order), keeps
 * the first m that still prefer g at the m-th cheapest unit and moves the rest. Only that
 * split and two values of the sorted margins are read, and the moves commute, so here they are
 * found without the sort (which was most of a plan's phases, a few hundred rows a visit): with
 * margins in descending order M and the units ascending U, M[k] >= U[k] holds for k below some
 * m and fails from there on (M falls, U rises); m and M[m-1] are found by partitioning the
 * margins around pivots (staying_of). The rows that
 * stay are the m keenest: every margin above M[m-1] and, of the margins equal to it, the first
 * in row order, as the stable sort leaves them; the keenest leaving is the largest of the rest
 * (M[m]). The same m, prices, rows moved and destinations as NumPy's steps
 * (tests/matching/test_matching_native_transport.py compares them on thousands of problems). */
static int visit(State *s, Py_ssize_t g) {
    Py_ssize_t groups = s->groups, count = 0;
    for (Py_ssize_t row = 0; row < s->rows; row++)
        if (s->assign[row] == g) s->jobs[count++] = row;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t row = s->jobs[k];
        double mine = cost_at(s, row, g);
        Py_ssize_t best = 0;
        double least = (g == 0) ? INFINITY : cost_at(s, row, 0) + s->price[0];
        if (isnan(least)) return -1;
        for (Py_ssize_t h = 1; h < groups; h++) {
            double value = (h == g) ? INFINITY : cost_at(s, row, h) + s->price[h];
            if (isnan(value)) return -1;
            if (value < least) {
                least = value;
                best = h;
            }
        }
        double margin = least - mine;
        if (isnan(margin)) return -1;
        s->margin[k] = margin;
        s->alternative[k] = best;
    }
    const double *units = s->flat + s->bounds[g];
    int64_t size = size_of(s, g);
    Py_ssize_t room = size < count ? (Py_ssize_t)size : count;
    /* staying: the first k below room where M[k] < U[k], else room; threshold: M[staying - 1]. */
    double threshold = INFINITY;
    memcpy(s->copy, s->margin, sizeof(double) * (size_t)count);
    Py_ssize_t staying = staying_of(s->copy, count, units, room, &threshold);
    Py_ssize_t equal_staying = 0;
    if (staying > 0) {
        Py_ssize_t above = 0;
        for (Py_ssize_t k = 0; k < count; k++) above += s->margin[k] > threshold;
        equal_staying = staying - above;
    }
    double keenest_leaving = -INFINITY;
    Py_ssize_t leaving = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        double margin = s->margin[k];
        if (margin > threshold) continue;
        if (margin == threshold && equal_staying > 0) {
            equal_staying--;
            continue;
        }
        if (margin > keenest_leaving || leaving == 0) keenest_leaving = margin;
        s->jobs[leaving] = s->jobs[k]; /* the leaving rows, in row order, with their destinations */
        s->alternative[leaving] = s->alternative[k];
        leaving++;
    }
    double below = staying ? units[staying - 1] : -INFINITY;
    double floor_price = below >= keenest_leaving ? below : keenest_leaving;
    if (!isfinite(floor_price)) return 1;
    double raised = s->price[g] >= floor_price ? s->price[g] : floor_price;
    s->price[g] = raised;
    s->priced[g] = units_at_most(s, g, raised);
    for (Py_ssize_t k = 0; k < leaving; k++) {
        int64_t destination = s->alternative[k];
        s->assign[s->jobs[k]] = destination;
        s->load[g] -= 1;
        s->load[destination] += 1;
    }
    return 0;
}

static int64_t over_total(const State *s) {
    int64_t over = 0;
    for (Py_ssize_t g = 0; g < s->groups; g++)
        if (s->load[g] > s->priced[g]) over += s->load[g] - s->priced[g];
    return over;
}

/* Phase 2 (raise_prices). 0 done, -1 decline. */
static int raise_prices(State *s) {
    for (Py_ssize_t g = 0; g < s->groups; g++) s->load[g] = 0;
    for (Py_ssize_t row = 0; row < s->rows; row++) s->load[s->assign[row]] += 1;
    for (Py_ssize_t g = 0; g < s->groups; g++) s->priced[g] = units_at_most(s, g, s->price[g]);
    int64_t best = over_total(s), stalled = 0;
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        if (best == 0 || stalled >= STALLED_SWEEPS) return 0;
        for (Py_ssize_t g = 0; g < s->groups; g++) {
            if (s->load[g] <= s->priced[g]) continue;
            int visited = visit(s, g);
            if (visited < 0) return -1;
            if (visited > 0) return 0;
        }
        int64_t over = over_total(s);
        stalled = over < best ? 0 : stalled + 1;
        if (over < best) best = over;
    }
    return 0;
}

/* ------------------------------------------------------------------------------ phase 3 */

/* Group a's cheapest move of one of its rows to every other group, and the first row (in row
 * order) that makes it; a group without rows moves nowhere. -1 where a move is NaN (decline). */
static int refresh(const State *s, Py_ssize_t a, double *cheapest, int64_t *mover) {
    Py_ssize_t groups = s->groups;
    double *least = cheapest + a * groups;
    int64_t *who = mover + a * groups;
    for (Py_ssize_t b = 0; b < groups; b++) {
        least[b] = INFINITY;
        who[b] = -1;
    }
    int any = 0;
    for (Py_ssize_t row = 0; row < s->rows; row++) {
        if (s->assign[row] != a) continue;
        double here = cost_at(s, row, a);
        if (!isfinite(here)) return -1;
        for (Py_ssize_t b = 0; b < groups; b++) {
            double move = cost_at(s, row, b) - here;
            if (!any || move < least[b]) {
                least[b] = move;
                who[b] = row;
            }
        }
        any = 1;
    }
    least[a] = INFINITY;
    return 0;
}

/* A dense Dijkstra from the nodes marked in source (transport.py's _dense_dijkstra): 0, or -1
 * where some node's distance is reached from two nodes (Python then asks scipy). */
static int dijkstra(Py_ssize_t nodes, const double *graph, const char *source, double *distance, int64_t *previous) {
    char scanned[DENSE_NODES + 1];
    for (Py_ssize_t v = 0; v < nodes; v++) {
        distance[v] = source[v] ? 0.0 : INFINITY;
        previous[v] = NO_PREDECESSOR;
        scanned[v] = 0;
    }
    for (;;) {
        Py_ssize_t node = -1;
        for (Py_ssize_t v = 0; v < nodes; v++)
            if (!scanned[v] && (node < 0 || distance[v] < distance[node])) node = v;
        if (node < 0 || distance[node] == INFINITY) break;
        scanned[node] = 1;
        double reached = distance[node];
        for (Py_ssize_t other = 0; other < nodes; other++) {
            if (scanned[other]) continue;
            double through = reached + graph[node * nodes + other];
            if (through < distance[other]) {
                distance[other] = through;
                previous[other] = node;
            }
        }
    }
    for (Py_ssize_t v = 0; v < nodes; v++) {
        if (source[v] || !isfinite(distance[v])) continue;
        int matches = 0;
        for (Py_ssize_t u = 0; u < nodes; u++)
            if (distance[u] + graph[u * nodes + v] == distance[v]) matches++;
        if (matches != 1) return -1;
    }
    return 0;
}

/* Phase 3 (shortest_paths): SOLVED, NONE or DECLINED. */
static int shortest_paths(State *s, int64_t max_augmentations) {
    Py_ssize_t groups = s->groups, nodes = groups + 1, sink = groups;
    for (Py_ssize_t g = 0; g < groups; g++) s->load[g] = 0;
    for (Py_ssize_t row = 0; row < s->rows; row++) s->load[s->assign[row]] += 1;
    int64_t *used = s->priced;
    int64_t excess = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        int64_t priced = units_at_most(s, g, s->price[g]);
        used[g] = s->load[g] < priced ? s->load[g] : priced;
        excess += s->load[g] - used[g];
    }
    if (excess == 0) return SOLVED;
    if (excess > max_augmentations) return NONE;
    if (nodes > DENSE_NODES) return DECLINED;
    double largest_cost = 0.0, largest_price = 0.0;
    for (Py_ssize_t i = 0; i < s->rows * groups; i++)
        if (isfinite(s->cost[i]) && fabs(s->cost[i]) > largest_cost) largest_cost = fabs(s->cost[i]);
    for (Py_ssize_t g = 0; g < groups; g++)
        if (fabs(s->price[g]) > largest_price || isnan(s->price[g])) largest_price = fabs(s->price[g]);
    double tolerance = 1e-9 * (largest_cost + largest_price + 1.0);
    double cheapest[DENSE_NODES * DENSE_NODES];
    int64_t mover[DENSE_NODES * DENSE_NODES];
    double graph[(DENSE_NODES + 1) * (DENSE_NODES + 1)];
    double distance[DENSE_NODES + 1];
    int64_t previous[DENSE_NODES + 1];
    char source[DENSE_NODES + 1];
    Py_ssize_t path[DENSE_NODES + 2];
    for (Py_ssize_t g = 0; g < groups; g++)
        if (refresh(s, g, cheapest, mover) < 0) return DECLINED;
    for (Py_ssize_t i = 0; i < nodes * nodes; i++) graph[i] = INFINITY;
    for (int64_t augmentation = 0; augmentation < excess; augmentation++) {
        int any_finite = 0;
        double least = INFINITY;
        for (Py_ssize_t a = 0; a < groups; a++) {
            for (Py_ssize_t b = 0; b < groups; b++) {
                double reduced = cheapest[a * groups + b] + s->price[b] - s->price[a];
                if (isnan(reduced)) return DECLINED;
                if (isfinite(reduced)) {
                    any_finite = 1;
                    if (reduced < least) least = reduced;
                }
                graph[a * nodes + b] = reduced > 0.0 ? reduced : 0.0;
            }
        }
        if (any_finite && least < -tolerance) return NONE;
        double lowest_to_sink = INFINITY;
        for (Py_ssize_t g = 0; g < groups; g++) {
            int64_t size = size_of(s, g);
            double following = used[g] < size ? s->flat[s->bounds[g] + used[g]] : INFINITY;
            double to_sink = following - s->price[g];
            if (isnan(to_sink)) return DECLINED;
            if (to_sink < lowest_to_sink) lowest_to_sink = to_sink;
            graph[g * nodes + sink] = to_sink > 0.0 ? to_sink : 0.0;
        }
        if (lowest_to_sink < -tolerance) return NONE;
        for (Py_ssize_t g = 0; g < groups; g++) source[g] = s->load[g] > used[g];
        source[sink] = 0;
        if (dijkstra(nodes, graph, source, distance, previous) < 0) return DECLINED;
        if (!isfinite(distance[sink])) return NONE;
        Py_ssize_t length = 0;
        path[length++] = (Py_ssize_t)previous[sink];
        while (previous[path[length - 1]] >= 0) {
            if (length > nodes) return DECLINED; /* a cycle: cannot happen; never loop on it */
            path[length] = (Py_ssize_t)previous[path[length - 1]];
            length++;
        }
        for (Py_ssize_t i = 0; i < length / 2; i++) {
            Py_ssize_t kept = path[i];
            path[i] = path[length - 1 - i];
            path[length - 1 - i] = kept;
        }
        for (Py_ssize_t g = 0; g < groups; g++) {
            double gain = distance[sink] - distance[g];
            s->price[g] += gain > 0.0 ? gain : 0.0;
        }
        for (Py_ssize_t i = 0; i + 1 < length; i++) {
            int64_t row = mover[path[i] * groups + path[i + 1]];
            if (row < 0) return DECLINED;
            s->assign[row] = path[i + 1];
        }
        if (augmentation + 1 < excess && length > 1)
            for (Py_ssize_t i = 0; i < length; i++)
                if (refresh(s, path[i], cheapest, mover) < 0) return DECLINED;
        s->load[path[0]] -= 1;
        s->load[path[length - 1]] += 1;
        used[path[length - 1]] += 1;
    }
    return SOLVED;
}

/* ------------------------------------------------------------------------------ entry */

/* _Grouped's __init__, feasible(), raise_prices() and shortest_paths(). */
static int solve(State *s, int64_t max_augmentations) {
    Py_ssize_t rows = s->rows, groups = s->groups;
    if (groups == 0) return DECLINED;
    int64_t total = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        if (size_of(s, g) < 1) return DECLINED;
        total += size_of(s, g);
    }
    for (Py_ssize_t i = 0; i < s->bounds[groups]; i++)
        if (isnan(s->flat[i])) return DECLINED;
    for (Py_ssize_t g = 0; g < groups; g++) s->price[g] = s->flat[s->bounds[g]];
    int feasible = total >= rows;
    for (Py_ssize_t row = 0; row < rows; row++) {
        Py_ssize_t best = 0;
        double least = cost_at(s, row, 0) + s->price[0], smallest = cost_at(s, row, 0);
        if (isnan(least)) return DECLINED;
        for (Py_ssize_t g = 1; g < groups; g++) {
            double value = cost_at(s, row, g) + s->price[g];
            if (isnan(value)) return DECLINED;
            if (value < least) {
                least = value;
                best = g;
            }
            if (cost_at(s, row, g) < smallest) smallest = cost_at(s, row, g);
        }
        if (!isfinite(smallest)) feasible = 0;
        s->assign[row] = best;
    }
    if (!feasible) return NONE;
    if (raise_prices(s) < 0) return DECLINED;
    return shortest_paths(s, max_augmentations);
}

static PyObject *solve_groups(PyObject *self, PyObject *args) {
    PyObject *cost_object, *flat_object, *bounds_object, *assign_object;
    long long max_augmentations;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOL", &cost_object, &flat_object, &bounds_object, &assign_object, &max_augmentations))
        return NULL;
    Py_buffer cost, flat, bounds, assign;
    if (take(cost_object, &cost, 'd', 0, 2, "cost") < 0) return NULL;
    if (take(flat_object, &flat, 'd', 0, 1, "flat") < 0) goto release_cost;
    if (take(bounds_object, &bounds, 'q', 0, 1, "bounds") < 0) goto release_flat;
    if (take(assign_object, &assign, 'q', 1, 1, "assign") < 0) goto release_bounds;
    Py_ssize_t rows = assign.len / 8, groups = bounds.len / 8 - 1;
    if (cost.shape[0] != rows || groups < 0 || cost.shape[1] != groups ||
        ((const int64_t *)bounds.buf)[0] != 0 || ((const int64_t *)bounds.buf)[groups] != flat.len / 8) {
        PyErr_SetString(PyExc_ValueError, "solve_groups: cost must be rows x groups, bounds groups + 1 from 0 to the units");
        goto release_assign;
    }
    for (Py_ssize_t g = 0; g < groups; g++) {
        if (((const int64_t *)bounds.buf)[g + 1] < ((const int64_t *)bounds.buf)[g]) {
            PyErr_SetString(PyExc_ValueError, "solve_groups: bounds must not decrease");
            goto release_assign;
        }
    }
    Py_ssize_t width = groups > 0 ? groups : 1, height = rows > 0 ? rows : 1;
    State s = {.rows = rows, .groups = groups, .cost = cost.buf, .flat = flat.buf, .bounds = bounds.buf, .assign = assign.buf};
    void *blocks[7];
    blocks[0] = s.price = PyMem_Malloc(sizeof(double) * (size_t)width);
    blocks[1] = s.load = PyMem_Malloc(sizeof(int64_t) * (size_t)width);
    blocks[2] = s.priced = PyMem_Malloc(sizeof(int64_t) * (size_t)width);
    blocks[3] = s.jobs = PyMem_Malloc(sizeof(int64_t) * (size_t)height);
    blocks[4] = s.margin = PyMem_Malloc(sizeof(double) * (size_t)height);
    blocks[5] = s.alternative = PyMem_Malloc(sizeof(int64_t) * (size_t)height);
    blocks[6] = s.copy = PyMem_Malloc(sizeof(double) * (size_t)height);
    int status = -1;
    if (s.price && s.load && s.priced && s.jobs && s.margin && s.alternative && s.copy) {
        status = rows == 0 ? DECLINED : solve(&s, (int64_t)max_augmentations);
    } else {
        PyErr_NoMemory();
    }
    for (int i = 0; i < 7; i++) PyMem_Free(blocks[i]);
    PyBuffer_Release(&assign);
    PyBuffer_Release(&bounds);
    PyBuffer_Release(&flat);
    PyBuffer_Release(&cost);
    return status < 0 ? NULL : PyLong_FromLong(status);

release_assign:
    PyBuffer_Release(&assign);
release_bounds:
    PyBuffer_Release(&bounds);
release_flat:
    PyBuffer_Release(&flat);
release_cost:
    PyBuffer_Release(&cost);
    return NULL;
}

/* ------------------------------------------------------------------------------ phase 1 */

/* Phase 1 (_cheapest_classes): each row's cheapest class into chosen (best, by_class: count + 1
 * entries of scratch); 0 (nothing decided) on a NaN, where NumPy's argmin and sort place it as
 * no comparison does. */
static int cheapest_rows(const int64_t *group, const double *offset, const double *cost, Py_ssize_t classes, Py_ssize_t rows,
                         Py_ssize_t count, int64_t *best, int64_t *by_class, int64_t *chosen) {
    int decided = 1;
    /* Each group's cheapest class: its least offset, then its first class. */
    for (Py_ssize_t g = 0; g < count; g++) best[g] = -1;
    for (Py_ssize_t c = 0; c < classes && decided; c++) {
        if (offset[c] != offset[c]) decided = 0;
        int64_t g = group[c];
        if (best[g] < 0 || offset[c] < offset[best[g]]) best[g] = c;
    }
    /* The groups with a class, taken in the order of their cheapest classes. */
    Py_ssize_t present = 0;
    for (Py_ssize_t c = 0; c < classes && decided; c++)
        if (best[group[c]] == c) by_class[present++] = group[c];
    for (Py_ssize_t row = 0; row < rows && decided; row++) {
        const double *costs = cost + row * count;
        Py_ssize_t pick = 0;
        double least = 0.0;
        int finite = 0;
        for (Py_ssize_t k = 0; k < present; k++) {
            int64_t g = by_class[k];
            double total = costs[g] + offset[best[g]];
            if (total != total) {
                decided = 0;
                break;
            }
            if (k == 0 || total < least) {
                least = total;
                pick = k;
            }
            finite |= isfinite(total);
        }
        if (!present) decided = 0; /* NumPy's argmin refuses an empty row: its answer, not ours */
        chosen[row] = finite && present ? best[by_class[pick]] : 0;
    }
    return decided;
}

static PyObject *cheapest_classes(PyObject *self, PyObject *args) {
    PyObject *objects[4];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &objects[0], &objects[1], &objects[2], &objects[3])) return NULL;
    static const Wanted wanted[4] = {{'q', 0, 1, "group"}, {'d', 0, 1, "offset"}, {'d', 0, 2, "group_cost"}, {'q', 1, 1, "chosen"}};
    Py_buffer views[4];
    int taken = take_all(objects, views, wanted, 4);
    PyObject *result = NULL;
    int64_t *best = NULL, *by_class = NULL;
    if (taken == 4) {
        Py_ssize_t classes = views[0].len / 8, rows = views[2].shape[0], count = views[2].shape[1];
        const int64_t *group = views[0].buf;
        const double *offset = views[1].buf, *cost = views[2].buf;
        int64_t *chosen = views[3].buf;
        int valid = views[1].len / 8 == classes && views[3].len / 8 == rows;
        for (Py_ssize_t c = 0; valid && c < classes; c++) valid = group[c] >= 0 && group[c] < count;
        best = PyMem_Malloc(sizeof(int64_t) * (size_t)(count + 1));
        by_class = PyMem_Malloc(sizeof(int64_t) * (size_t)(count + 1));
        if (!valid) {
            PyErr_SetString(PyExc_ValueError, "cheapest_classes: an offset per class, each class's group a column of group_cost, a row per row");
        } else if (best == NULL || by_class == NULL) {
            PyErr_NoMemory();
        } else {
            int decided = cheapest_rows(group, offset, cost, classes, rows, count, best, by_class, chosen);
            result = PyBool_FromLong(decided);
        }
    }
    PyMem_Free(best);
    PyMem_Free(by_class);
    release_all(views, taken);
    return result;
}

/* ------------------------------------------------------------------------------ the fold */

/* Blocks taken for one call, freed together. */
typedef struct {
    void *blocks[40];
    int count;
} Arena;

static void *arena_take(Arena *arena, size_t count, size_t size) {
    if (arena->count >= 40) return NULL;
    if (count > (size_t)PY_SSIZE_T_MAX / size) return NULL; /* its bytes would wrap: out of memory, not a small block */
    void *block = PyMem_Malloc((count ? count : 1) * size);
    if (block) arena->blocks[arena->count++] = block;
    return block;
}

static void arena_free(Arena *arena) {
    for (int i = 0; i < arena->count; i++) PyMem_Free(arena->blocks[i]);
    arena->count = 0;
}

/* A stable counting sort of from[0:count] by key[from[i]] (0 <= key < keys) into to (counts:
 * keys + 1 entries of scratch). */
static void counting_sort(const int64_t *from, int64_t *to, Py_ssize_t count, const int64_t *key, int64_t keys, int64_t *counts) {
    for (int64_t k = 0; k <= keys; k++) counts[k] = 0;
    for (Py_ssize_t i = 0; i < count; i++) counts[key[from[i]] + 1]++;
    for (int64_t k = 0; k < keys; k++) counts[k + 1] += counts[k];
    for (Py_ssize_t i = 0; i < count; i++) to[counts[key[from[i]]]++] = from[i];
}

/* solve.py's build (slot_classes, _groups) and match (assign_to_classes: _cheapest_classes, the
 * load, _units, phases 2 and 3, _filled; _slots_to_rows) for the bounded slots of a problem
 * whose kind orders are known: each matched row and its slot, written into rows_out and
 * columns_out. 1 when written, 0 where NumPy's way would leave this path (a NaN, phase 3 over
 * its budget or declined, the kind orders not those of the waits: the caller then runs it), -1
 * out of memory. The classes are NumPy's lexsort by (kind, wait, position), stable: here two
 * stable counting sorts, by position and then by (kind, the wait's rank among the kind's
 * machines, read off the kind orders). Every other step is the same integers, and the same
 * floating-point operations in the same order (a time times a position; a cost plus an offset),
 * as NumPy's. */
static int certain_of(Py_ssize_t rows, Py_ssize_t all, Py_ssize_t count, Py_ssize_t units, const double *group_cost, const int64_t *group_ids,
                      const int64_t *local, const double *flat, const int64_t *bounds);

static int fold(const int64_t *slot_machine, const int64_t *slot_position, Py_ssize_t slots, const int64_t *machine_kind,
                const double *delay, Py_ssize_t machines, const double *times, Py_ssize_t rows, Py_ssize_t kinds,
                const int64_t *members, const double *omega, int64_t *rows_out, int64_t *columns_out, int64_t *certain_out) {
    Arena arena = {.count = 0};
    int result = 0;
    if (slots == 0 || rows == 0) return 0;
    int64_t largest = 0;
    for (Py_ssize_t i = 0; i < slots; i++)
        if (slot_position[i] > largest) largest = slot_position[i];
    /* The counting sorts' keys: positions (span), machines, (kind, position) pairs, classes
     * (at most the slots). kinds · span checked before it is taken (fold_call refuses a
     * position past the rows; a wrapped product gave counts too small for its keys). */
    if (largest >= PY_SSIZE_T_MAX / 16 || (kinds > 0 && largest + 1 > PY_SSIZE_T_MAX / 16 / kinds)) return -1;
    int64_t span = largest + 1, key_count = slots;
    if (machines > key_count) key_count = machines;
    if (span > key_count) key_count = span;
    if (kinds * span > key_count) key_count = kinds * span;
    int64_t *wait_key = arena_take(&arena, (size_t)machines, sizeof(int64_t));
    int64_t *counts = arena_take(&arena, (size_t)key_count + 1, sizeof(int64_t));
    int64_t *slot_key = arena_take(&arena, (size_t)slots, sizeof(int64_t));
    int64_t *identity = arena_take(&arena, (size_t)slots, sizeof(int64_t));
    int64_t *by_position = arena_take(&arena, (size_t)slots, sizeof(int64_t));
    int64_t *order = arena_take(&arena, (size_t)slots, sizeof(int64_t));
    int64_t *class_start = arena_take(&arena, (size_t)slots + 1, sizeof(int64_t));
    if (!wait_key || !counts || !slot_key || !identity || !by_position || !order || !class_start) goto out_of_memory;
    /* Each machine's (kind, wait) as one key: where its run of equal waits begins in the kind
     * orders laid end to end, kind after kind; the orders must be the waits' (else declined). */
    for (Py_ssize_t m = 0; m < machines; m++) wait_key[m] = -1;
    int64_t run_start = 0;
    for (Py_ssize_t i = 0; i < machines; i++) {
        int64_t m = members[i];
        if (m < 0 || m >= machines || wait_key[m] >= 0 || !(omega[i] == delay[m])) goto declined;
        if (i > 0 && machine_kind[members[i - 1]] == machine_kind[m]) {
            if (machine_kind[m] < machine_kind[members[i - 1]] || omega[i] < omega[i - 1]) goto declined;
            if (omega[i] != omega[i - 1]) run_start = i;
        } else {
            if (i > 0 && machine_kind[m] < machine_kind[members[i - 1]]) goto declined;
            run_start = i;
        }
        wait_key[m] = run_start;
    }
    /* slot_classes: by position, then stably by (kind, wait): (kind, wait, position, slot). */
    for (Py_ssize_t i = 0; i < slots; i++) {
        if (slot_machine[i] < 0 || slot_machine[i] >= machines || slot_position[i] < 0) goto declined;
        identity[i] = i;
    }
    counting_sort(identity, by_position, slots, slot_position, span, counts);
    for (Py_ssize_t i = 0; i < slots; i++) slot_key[i] = wait_key[slot_machine[i]];
    counting_sort(by_position, order, slots, slot_key, machines, counts);
    Py_ssize_t classes = 0;
    for (Py_ssize_t i = 0; i < slots; i++) {
        int64_t s = order[i], previous = i ? order[i - 1] : -1;
        if (i == 0 || slot_key[s] != slot_key[previous] || slot_position[s] != slot_position[previous]) class_start[classes++] = i;
    }
    class_start[classes] = slots;
    /* _groups: (kind, position) keys, present ones ascending; each class's group and offset. */
    int64_t *group = arena_take(&arena, (size_t)classes, sizeof(int64_t));
    double *offset = arena_take(&arena, (size_t)classes, sizeof(double));
    int64_t *group_key = arena_take(&arena, (size_t)classes, sizeof(int64_t));
    if (!group || !offset || !group_key) goto out_of_memory;
    int64_t keys = kinds * span;
    for (int64_t k = 0; k <= keys; k++) counts[k] = 0;
    for (Py_ssize_t c = 0; c < classes; c++) {
        int64_t first = order[class_start[c]], kind = machine_kind[slot_machine[first]];
        if (kind < 0 || kind >= kinds) goto declined;
        counts[kind * span + slot_position[first]] = 1;
    }
    Py_ssize_t groups = 0;
    for (int64_t k = 0; k < keys; k++) {
        if (counts[k]) {
            group_key[groups] = k;
            counts[k] = groups++;
        }
    }
    for (Py_ssize_t c = 0; c < classes; c++) {
        int64_t first = order[class_start[c]];
        group[c] = counts[machine_kind[slot_machine[first]] * span + slot_position[first]];
        offset[c] = delay[slot_machine[first]];
    }
    double *cost = arena_take(&arena, (size_t)(rows * groups), sizeof(double));
    int64_t *best = arena_take(&arena, (size_t)groups + 1, sizeof(int64_t));
    int64_t *by_class = arena_take(&arena, (size_t)groups + 1, sizeof(int64_t));
    int64_t *chosen = arena_take(&arena, (size_t)rows, sizeof(int64_t));
    int64_t *load = arena_take(&arena, (size_t)classes, sizeof(int64_t));
    if (!cost || !best || !by_class || !chosen || !load) goto out_of_memory;
    int64_t *group_kind = arena_take(&arena, (size_t)groups + 1, sizeof(int64_t));
    double *group_position = arena_take(&arena, (size_t)groups + 1, sizeof(double));
    if (!group_kind || !group_position) goto out_of_memory;
    for (Py_ssize_t g = 0; g < groups; g++) {
        group_kind[g] = group_key[g] / span;
        group_position[g] = (double)(group_key[g] % span);
    }
    for (Py_ssize_t r = 0; r < rows; r++)
        for (Py_ssize_t g = 0; g < groups; g++) cost[r * groups + g] = times[r * kinds + group_kind[g]] * group_position[g];
    /* assign_to_classes: every row in its cheapest class, done if no class overflows. */
    if (!cheapest_rows(group, offset, cost, classes, rows, groups, best, by_class, chosen)) goto declined;
    for (Py_ssize_t c = 0; c < classes; c++) load[c] = 0;
    for (Py_ssize_t r = 0; r < rows; r++) load[chosen[r]]++;
    int over = 0;
    for (Py_ssize_t c = 0; c < classes; c++) over |= load[c] > class_start[c + 1] - class_start[c];
    double *flat = NULL;
    int64_t *bounds = NULL, *unit_class = NULL;
    int units_kept = 0; /* the units as _units lays them out (the certificate reads them) */
    if (over || certain_out != NULL) {
        /* _units: each group's classes by offset (class order: by wait within a kind and
         * position), a unit per slot (every class has a slot, every group a class: _units
         * keeps them all, its group ids are 0 .. groups - 1). */
        int64_t *by_group = arena_take(&arena, (size_t)classes, sizeof(int64_t));
        int64_t *class_index = arena_take(&arena, (size_t)classes, sizeof(int64_t));
        unit_class = arena_take(&arena, (size_t)slots, sizeof(int64_t));
        flat = arena_take(&arena, (size_t)slots, sizeof(double));
        bounds = arena_take(&arena, (size_t)groups + 1, sizeof(int64_t));
        if (!by_group || !class_index || !unit_class || !flat || !bounds) goto out_of_memory;
        for (Py_ssize_t c = 0; c < classes; c++) class_index[c] = c;
        counting_sort(class_index, by_group, classes, group, groups, counts);
        Py_ssize_t unit = 0;
        for (Py_ssize_t k = 0; k < classes; k++) {
            int64_t c = by_group[k];
            if (k > 0 && group[by_group[k - 1]] == group[c] && !(offset[by_group[k - 1]] < offset[c])) {
                if (over) goto declined;
                break; /* (not met: a group's classes differ in wait) no certificate, NumPy's then */
            }
            if (k == 0 || group[by_group[k - 1]] != group[c]) bounds[group[c]] = unit;
            for (int64_t u = class_start[c]; u < class_start[c + 1]; u++) {
                unit_class[unit] = c;
                flat[unit++] = offset[c];
            }
        }
        bounds[groups] = unit;
        units_kept = 1;
    }
    if (over) {
        int64_t *grouped = arena_take(&arena, (size_t)rows, sizeof(int64_t));
        if (!grouped) goto out_of_memory;
        /* match's budget for phase 3, then phases 2 and 3 as solve_groups runs them. */
        int64_t budget = 50 * (int64_t)rows * (int64_t)slots / (20000 + (int64_t)rows * groups + (int64_t)groups * groups);
        State state = {.rows = rows, .groups = groups, .cost = cost, .flat = flat, .bounds = bounds, .assign = grouped};
        state.price = arena_take(&arena, (size_t)groups, sizeof(double));
        state.load = arena_take(&arena, (size_t)groups, sizeof(int64_t));
        state.priced = arena_take(&arena, (size_t)groups, sizeof(int64_t));
        state.jobs = arena_take(&arena, (size_t)rows, sizeof(int64_t));
        state.margin = arena_take(&arena, (size_t)rows, sizeof(double));
        state.alternative = arena_take(&arena, (size_t)rows, sizeof(int64_t));
        state.copy = arena_take(&arena, (size_t)rows, sizeof(double));
        if (!state.price || !state.load || !state.priced || !state.jobs || !state.margin || !state.alternative || !state.copy)
            goto out_of_memory;
        if (solve(&state, budget) != SOLVED) goto declined;
        /* _filled: a group's rows, in row order, take its cheapest units. */
        for (Py_ssize_t g = 0; g < groups; g++) best[g] = bounds[g];
        for (Py_ssize_t r = 0; r < rows; r++) chosen[r] = unit_class[best[grouped[r]]++];
        for (Py_ssize_t g = 0; g < groups; g++)
            if (best[g] > bounds[g + 1]) goto declined;
    }
    /* _slots_to_rows: each class's rows, in row order, take its slots in slot order. */
    int64_t *row_index = arena_take(&arena, (size_t)rows, sizeof(int64_t));
    if (!row_index) goto out_of_memory;
    for (Py_ssize_t r = 0; r < rows; r++) row_index[r] = r;
    counting_sort(row_index, rows_out, rows, chosen, classes, counts);
    for (Py_ssize_t c = 0; c < classes; c++) load[c] = class_start[c];
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t c = chosen[rows_out[i]];
        if (load[c] >= class_start[c + 1]) goto declined;
        columns_out[i] = order[load[c]++];
    }
    if (certain_out != NULL) {
        /* transport.only_optimum of each row's group (solve._only_optimum), the same buffers. */
        certain_out[0] = -1;
        if (units_kept) {
            int64_t *ids = arena_take(&arena, (size_t)groups, sizeof(int64_t));
            int64_t *local = arena_take(&arena, (size_t)rows, sizeof(int64_t));
            if (!ids || !local) goto out_of_memory;
            for (Py_ssize_t g = 0; g < groups; g++) ids[g] = g;
            for (Py_ssize_t r = 0; r < rows; r++) local[r] = group[chosen[r]];
            int certain = certain_of(rows, groups, groups, bounds[groups], cost, ids, local, flat, bounds);
            if (certain < 0) goto out_of_memory;
            certain_out[0] = certain;
        }
    }
    result = 1;
declined:
    arena_free(&arena);
    return result;
out_of_memory:
    arena_free(&arena);
    return -1;
}

/* fold_match's call, and fold_certified's with its certificate (count 10: the tenth buffer). */
static PyObject *fold_call(PyObject *args, int count) {
    PyObject *objects[10];
    if (!PyArg_ParseTuple(args, count == 10 ? "OOOOOOOOOO" : "OOOOOOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4],
                          &objects[5], &objects[6], &objects[7], &objects[8], &objects[9]))
        return NULL;
    static const Wanted wanted[10] = {{'q', 0, 1, "slot_machine"}, {'q', 0, 1, "slot_position"}, {'q', 0, 1, "machine_kind"},
                                      {'d', 0, 1, "delay"},        {'d', 0, 2, "times"},         {'q', 0, 1, "members"},
                                      {'d', 0, 1, "omega"},        {'q', 1, 1, "rows"},          {'q', 1, 1, "columns"},
                                      {'q', 1, 1, "certain"}};
    Py_buffer views[10];
    int taken = take_all(objects, views, wanted, count);
    PyObject *result = NULL;
    if (taken == count) {
        Py_ssize_t slots = views[0].len / 8, machines = views[2].len / 8, rows = views[4].shape[0], kinds = views[4].shape[1];
        int valid = !(views[1].len / 8 != slots || views[3].len / 8 != machines || views[5].len / 8 != machines || views[6].len / 8 != machines ||
                      views[7].len / 8 != rows || views[8].len / 8 != rows || (count == 10 && views[9].len / 8 != 1));
        /* A slot's position is at most the rows (the bound keeps at most n_c, the paper's layout
         * n): the fold's keys, kinds · (the largest position + 1), then fit. */
        const int64_t *slot_position = views[1].buf;
        for (Py_ssize_t i = 0; valid && i < slots; i++) valid = slot_position[i] <= rows;
        if (!valid) {
            PyErr_SetString(PyExc_ValueError, "fold_match: a position per slot (at most the rows), a wait and a place in the kind orders per machine, "
                                              "a row and a column per row (and one certificate)");
        } else {
            int folded = fold(views[0].buf, views[1].buf, slots, views[2].buf, views[3].buf, machines, views[4].buf, rows, kinds, views[5].buf,
                              views[6].buf, views[7].buf, views[8].buf, count == 10 ? views[9].buf : NULL);
            if (folded < 0) PyErr_NoMemory();
            else result = PyBool_FromLong(folded);
        }
    }
    release_all(views, taken);
    return result;
}

static PyObject *fold_match(PyObject *self, PyObject *args) {
    (void)self;
    return fold_call(args, 9);
}

static PyObject *fold_certified(PyObject *self, PyObject *args) {
    (void)self;
    return fold_call(args, 10);
}

/* certificate(group_cost, group_ids, local, flat, bounds) -> bool
 *   transport._certificate's test once each row's group is known (local: int64 per row, an
 *   index of group_ids, the groups with a unit; group_cost: float64 rows x every group;
 *   flat and bounds: the groups' units as _units lays them out, flat[bounds[g]:bounds[g+1]]
 *   group g's offsets, cheapest first). True when every cycle of the residual graph that moves
 *   a row costs more than 1e-9 of the problem's scale: NumPy's steps, the same operations on
 *   the same values (each move cost - mine, the cheapest move per pair of groups, Floyd-Warshall
 *   over the groups and the sink with each step's sums taken from the distances before it,
 *   NaN propagated as np.minimum does), so the same answer; False wherever NumPy returns None. */
/* The certificate's test (see certificate below) on raw buffers, validated by the caller: 1
 * certain, 0 not, -1 out of memory. */
static int certain_of(Py_ssize_t rows, Py_ssize_t all, Py_ssize_t count, Py_ssize_t units, const double *group_cost, const int64_t *group_ids,
                      const int64_t *local, const double *flat, const int64_t *bounds) {
    Py_ssize_t nodes = count + 1;
    /* mine, following, back, the row and column of a step, cheapest (count^2), distance (nodes^2). */
    double *work = PyMem_Malloc(sizeof(double) * ((size_t)rows + 4 * (size_t)nodes + (size_t)count * (size_t)count + (size_t)nodes * (size_t)nodes));
    int64_t *load = PyMem_Calloc((size_t)count, sizeof(int64_t));
    if (work == NULL || load == NULL) {
        PyMem_Free(work);
        PyMem_Free(load);
        return -1;
    }
    double *mine = work, *following = mine + rows, *back = following + nodes, *column = back + nodes, *line = column + nodes;
    double *cheapest = line + nodes, *distance = cheapest + count * count;
    int certain = 1;
    for (Py_ssize_t r = 0; certain && r < rows; r++) {
        mine[r] = group_cost[r * all + group_ids[local[r]]];
        certain = isfinite(mine[r]);
    }
    for (Py_ssize_t r = 0; certain && r < rows; r++) load[local[r]] += 1;
    for (Py_ssize_t g = 0; certain && g < count; g++) certain = load[g] <= bounds[g + 1] - bounds[g];
    for (Py_ssize_t g = 0; certain && g < count; g++) {
        following[g] = load[g] < bounds[g + 1] - bounds[g] ? flat[bounds[g] + load[g]] : INFINITY;
        back[g] = load[g] ? -flat[bounds[g] + load[g] - 1] : INFINITY;
    }
    for (Py_ssize_t i = 0; certain && i < count * count; i++) cheapest[i] = INFINITY;
    double largest = 0.0;  /* the largest |cost| among the finite ones */
    for (Py_ssize_t r = 0; certain && r < rows; r++) {
        double *from = cheapest + local[r] * count;
        for (Py_ssize_t b = 0; b < count; b++) {
            double cost = group_cost[r * all + group_ids[b]], move = cost - mine[r];
            if (isnan(move)) certain = 0;  /* NumPy refuses any NaN move */
            if (move < from[b]) from[b] = move;
            if (isfinite(cost) && fabs(cost) > largest) largest = fabs(cost);
        }
    }
    if (certain) {
        for (Py_ssize_t g = 0; g < count; g++) cheapest[g * count + g] = INFINITY;
        for (Py_ssize_t i = 0; i < nodes * nodes; i++) distance[i] = INFINITY;
        for (Py_ssize_t a = 0; a < count; a++)
            for (Py_ssize_t b = 0; b < count; b++) distance[a * nodes + b] = cheapest[a * count + b];
        for (Py_ssize_t g = 0; g < count; g++) {
            distance[g * nodes + count] = following[g];
            distance[count * nodes + g] = back[g];
        }
        for (Py_ssize_t i = 0; i < nodes; i++) distance[i * nodes + i] = 0.0;
        for (Py_ssize_t k = 0; k < nodes; k++) {
            for (Py_ssize_t i = 0; i < nodes; i++) {
                column[i] = distance[i * nodes + k];
                line[i] = distance[k * nodes + i];
            }
            for (Py_ssize_t i = 0; i < nodes; i++)
                for (Py_ssize_t j = 0; j < nodes; j++) {
                    double through = column[i] + line[j], *here = &distance[i * nodes + j];
                    if (through < *here || isnan(through)) *here = through;  /* np.minimum: a NaN wins */
                }
        }
        double offsets = 0.0;
        int offset_nan = 0;
        for (Py_ssize_t u = 0; u < units; u++) {
            double size = fabs(flat[u]);
            if (isnan(size)) offset_nan = 1;
            else if (size > offsets) offsets = size;
        }
        double scale = offset_nan ? NAN : largest + offsets + 1.0, least = INFINITY;
        for (Py_ssize_t a = 0; certain && a < count; a++)
            for (Py_ssize_t b = 0; b < count; b++) {
                double cycle = cheapest[a * count + b] + distance[b * nodes + a];
                if (isnan(cycle)) certain = 0;
                else if (cycle < least) least = cycle;
            }
        if (certain && least <= 1e-9 * scale) certain = 0;
    }
    PyMem_Free(work);
    PyMem_Free(load);
    return certain;
}

static PyObject *certificate(PyObject *self, PyObject *args) {
    PyObject *objects[5];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4])) return NULL;
    static const Wanted wanted[5] = {{'d', 0, 2, "group_cost"}, {'q', 0, 1, "group_ids"}, {'q', 0, 1, "local"}, {'d', 0, 1, "flat"},
                                     {'q', 0, 1, "bounds"}};
    Py_buffer views[5];
    int taken = take_all(objects, views, wanted, 5);
    PyObject *result = NULL;
    if (taken == 5) {
        Py_ssize_t rows = views[0].shape[0], all = views[0].shape[1], count = views[1].len / 8, units = views[3].len / 8;
        const double *group_cost = views[0].buf, *flat = views[3].buf;
        const int64_t *group_ids = views[1].buf, *local = views[2].buf, *bounds = views[4].buf;
        int valid = views[2].len / 8 == rows && views[4].len / 8 == count + 1 && count > 0;
        for (Py_ssize_t g = 0; valid && g < count; g++)
            valid = group_ids[g] >= 0 && group_ids[g] < all && bounds[g] >= 0 && bounds[g] <= bounds[g + 1] && bounds[g + 1] <= units;
        for (Py_ssize_t r = 0; valid && r < rows; r++) valid = local[r] >= 0 && local[r] < count;
        if (!valid) {
            PyErr_SetString(PyExc_ValueError, "certificate: a group of group_ids per row, a unit range per group within flat");
        } else {
            int certain = certain_of(rows, all, count, units, group_cost, group_ids, local, flat, bounds);
            if (certain < 0) PyErr_NoMemory();
            else result = PyBool_FromLong(certain);
        }
    }
    release_all(views, taken);
    return result;
}

/* contended_plan(times, rows, machine_kind, delay, members, omega, earlier, earlier_or_equal, kind_bounds, bounds, queued,
 *                 certain) -> bool
 *   solve.contended_plan of the problem of rows (int64: rows of times, float64 every job x
 *   kinds) on the machines (machine_kind int64, delay float64), in one call: the rows' times,
 *   the bound's jobs per kind (kind_stats), the position bound (kind_limits for every kind some
 *   row can run on), its slots (slots), the fold with its certificate (fold_certified) and the
 *   queues after it (canonical_plan), each the same steps as the call it stands for. members,
 *   omega, earlier and earlier_or_equal: the machines' kind orders laid end to end, kind k's at
 *   kind_bounds[k]:kind_bounds[k + 1]. Writes bounds (machines + 1), queued (one per row:
 *   indices of rows, by machine then position, largest first) and certain[0] (1 or 0); False,
 *   nothing meaningful written, wherever one of those steps would leave its way (the fold or
 *   a kind's names declined, the certificate not worked out): the caller's steps then run. */
static PyObject *contended_plan(PyObject *self, PyObject *args) {
    enum { ARGS = 12 };
    PyObject *objects[ARGS];
    (void)self;
    if (unpack_objects(args, objects, ARGS, "contended_plan") < 0) return NULL;
    static const Wanted wanted[ARGS] = {{'d', 0, 2, "times"},   {'q', 0, 1, "rows"},        {'q', 0, 1, "machine_kind"},
                                        {'d', 0, 1, "delay"},   {'q', 0, 1, "members"},     {'d', 0, 1, "omega"},
                                        {'q', 0, 1, "earlier"}, {'q', 0, 1, "earlier_or_equal"}, {'q', 0, 1, "kind_bounds"},
                                        {'q', 1, 1, "bounds"},  {'q', 1, 1, "queued"},      {'q', 1, 1, "certain"}};
    Py_buffer views[ARGS];
    int taken = take_all(objects, views, wanted, ARGS);
    PyObject *result = NULL;
    Arena arena = {.count = 0};
    if (taken == ARGS && !overlapping(views, wanted, ARGS, "contended_plan")) {
        Py_ssize_t job_all = views[0].shape[0], kinds = views[0].shape[1], count = views[1].len / 8, machines = views[2].len / 8;
        Py_ssize_t laid = views[4].len / 8;
        const double *times_all = views[0].buf, *delay = views[3].buf, *omega = views[5].buf;
        const int64_t *rows = views[1].buf, *machine_kind = views[2].buf, *members = views[4].buf, *earlier = views[6].buf,
                      *earlier_or_equal = views[7].buf, *kind_bounds = views[8].buf;
        int64_t *bounds = views[9].buf, *queued = views[10].buf, *certain_out = views[11].buf, widest = 0;
        int valid = views[3].len / 8 == machines && views[5].len / 8 == laid && views[6].len / 8 == laid && views[7].len / 8 == laid &&
                    views[8].len / 8 == kinds + 1 && views[9].len / 8 == machines + 1 && views[10].len / 8 == count && views[11].len / 8 == 1;
        for (Py_ssize_t k = 0; valid && k <= kinds; k++) {
            valid = kind_bounds[k] >= (k ? kind_bounds[k - 1] : 0) && kind_bounds[k] <= laid;
            if (valid && k && kind_bounds[k] - kind_bounds[k - 1] > widest) widest = kind_bounds[k] - kind_bounds[k - 1];
        }
        for (Py_ssize_t m = 0; valid && m < machines; m++) valid = machine_kind[m] >= 0 && machine_kind[m] < kinds;
        /* Every machine in the orders, as the fold reads them (members and omega, machines long)
         * and the names check: validated here, before any step reads them. */
        valid = valid && laid == machines && kind_bounds[kinds] == laid;
        for (Py_ssize_t i = 0; valid && i < laid; i++)
            valid = members[i] >= 0 && members[i] < machines && earlier_or_equal[i] > earlier[i] && earlier[i] >= 0;
        /* A rank within its kind's order (at most its length): the bound's sums then stay small
         * (a wrapped one gave a negative limit, and fewer slots laid out than written). */
        for (Py_ssize_t k = 0; valid && k < kinds; k++)
            for (int64_t i = kind_bounds[k]; valid && i < kind_bounds[k + 1]; i++) valid = earlier_or_equal[i] <= kind_bounds[k + 1] - kind_bounds[k];
        for (Py_ssize_t r = 0; valid && r < count; r++) valid = rows[r] >= 0 && rows[r] < job_all;
        /* The rows' times copied: count · kinds entries. */
        valid = valid && (kinds == 0 || count <= PY_SSIZE_T_MAX / 8 / kinds);
        if (!valid) {
            PyErr_SetString(PyExc_ValueError,
                            "contended_plan: rows of times; per machine a kind of times and a delay; the kind orders of one length, "
                            "a place in them per machine, their members among the machines and each earlier_or_equal within its "
                            "kind's order; kind_bounds ascending over them, one per kind and one more; bounds one more than "
                            "machines, a queued entry per row, one certificate");
        } else {
            int answered = 0; /* 1 written, 0 declined, -1 out of memory */
            double *times = arena_take(&arena, (size_t)(count * kinds) + 1, sizeof(double));
            int64_t *runnable = arena_take(&arena, (size_t)kinds + 1, sizeof(int64_t));
            double *shortest = arena_take(&arena, (size_t)kinds + 1, sizeof(double));
            int64_t *limits = arena_take(&arena, (size_t)machines + 1, sizeof(int64_t));
            if (!times || !runnable || !shortest || !limits) goto out_of_memory;
            for (Py_ssize_t r = 0; r < count; r++) memcpy(times + r * kinds, times_all + rows[r] * kinds, sizeof(double) * (size_t)kinds);
            kind_stats_of(times, count, kinds, runnable, shortest);
            for (Py_ssize_t m = 0; m < machines; m++) limits[m] = 0;
            for (Py_ssize_t k = 0; k < kinds; k++)
                if (runnable[k] > 0 && kind_bounds[k + 1] > kind_bounds[k])
                    limits_of_kind(members + kind_bounds[k], omega + kind_bounds[k], earlier + kind_bounds[k], earlier_or_equal + kind_bounds[k],
                                   (Py_ssize_t)(kind_bounds[k + 1] - kind_bounds[k]), runnable[k], shortest[k], limits);
            int64_t span = 0, total = 0;
            for (Py_ssize_t m = 0; m < machines; m++) {
                if (limits[m] < 0 || limits[m] > count) goto out_of_memory; /* not met on validated orders: K_i <= n_c <= rows */
                if (limits[m] > span) span = limits[m];
                total += limits[m];
            }
            int64_t *cursor = arena_take(&arena, (size_t)(kinds * span) + 1, sizeof(int64_t));
            int64_t *slot_machine = arena_take(&arena, (size_t)total + 1, sizeof(int64_t));
            int64_t *slot_position = arena_take(&arena, (size_t)total + 1, sizeof(int64_t));
            int64_t *rows_out = arena_take(&arena, (size_t)count + 1, sizeof(int64_t));
            int64_t *columns_out = arena_take(&arena, (size_t)count + 1, sizeof(int64_t));
            if (!cursor || !slot_machine || !slot_position || !rows_out || !columns_out) goto out_of_memory;
            memset(cursor, 0, sizeof(int64_t) * ((size_t)(kinds * span) + 1));
            slots_of(limits, machine_kind, machines, kinds, span, cursor, slot_machine, slot_position);
            int64_t certain = -1;
            answered = count > 0 ? fold(slot_machine, slot_position, (Py_ssize_t)total, machine_kind, delay, machines, times, count, kinds,
                                        members, omega, rows_out, columns_out, &certain)
                                 : 0;
            if (answered == 1 && certain < 0) answered = 0;
            if (answered == 1) {
                int64_t largest = 0;
                for (Py_ssize_t i = 0; i < count; i++)
                    if (slot_position[columns_out[i]] > largest) largest = slot_position[columns_out[i]];
                if (!levels_fit(count, count, kinds, largest)) goto out_of_memory; /* positions <= rows: holds */
                int64_t *work = arena_take(&arena, plan_space(count, count, kinds, machines, widest, largest), sizeof(int64_t));
                if (!work) goto out_of_memory;
                memset(work, 0, sizeof(int64_t) * plan_space(count, count, kinds, machines, widest, largest));
                answered = plan_of_fold(count, rows_out, columns_out, slot_machine, slot_position, members, omega, kind_bounds, machine_kind,
                                        delay, machines, times, count, kinds, widest, largest, work, bounds, queued);
                if (answered) certain_out[0] = certain;
            }
            if (answered < 0) goto out_of_memory;
            result = PyBool_FromLong(answered);
            goto done;
        out_of_memory:
            PyErr_NoMemory();
        }
    }
done:
    arena_free(&arena);
    release_all(views, taken);
    return result;
}

static PyMethodDef methods[] = {
    {"solve_groups", solve_groups, METH_VARARGS,
     "solve_groups(cost, flat, bounds, assign, max_augmentations) -> 0 solved, 1 none, 2 declined (see the module's header)"},
    {"cheapest_classes", cheapest_classes, METH_VARARGS, "cheapest_classes(group, offset, group_cost, chosen) -> decided (see the header)"},
    {"certificate", certificate, METH_VARARGS,
     "certificate(group_cost, group_ids, local, flat, bounds) -> certain: transport._certificate's test (see above it)"},
    {"fold_match", fold_match, METH_VARARGS,
     "fold_match(slot_machine, slot_position, machine_kind, delay, times, members, omega, rows, columns) -> written (see the header)"},
    {"fold_certified", fold_certified, METH_VARARGS,
     "fold_certified(slot_machine, slot_position, machine_kind, delay, times, members, omega, rows, columns, certain) -> written (see the header)"},
    {"contended_plan", contended_plan, METH_VARARGS,
     "contended_plan(times, rows, machine_kind, delay, members, omega, earlier, earlier_or_equal, kind_bounds, bounds, queued, certain) "
     "-> written: solve.contended_plan in one call (see above it)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_transport", "The folded solve's phases 2 and 3 in C (scheduler/matching/transport.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__transport(void) { return PyModule_Create(&module); }
