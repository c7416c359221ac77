/* The folded solve's phases (scheduler/matching/transport.py: _cheapest_classes, then class
 * _Grouped's phases 2 and 3) over plain double and int64 buffers.
 *
 * A plan of Algorithm 2 is some 25 NumPy stages of 20-60 us each; the transport's phases are
 * the largest share, and most of their time is NumPy's fixed cost per call on arrays of a few
 * hundred rows and a handful of groups. Here the same steps run as loops, with the GIL
 * released.
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_buffers.h"
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
    /* phase 2, per visit: the group's rows, their margins, alternatives and order */
    int64_t *jobs;
    double *margin;
    int64_t *alternative;
    int64_t *order;
    int64_t *scratch; /* the merge's other buffer */
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

/* The stable argsort of -margin over order[0:count] (written 0, 1, ...): larger margins first,
 * then the earlier row, as NumPy's stable sort of -margin orders them. Merged bottom up
 * (scratch: count entries) rather than by qsort, whose comparator call per comparison cost more
 * than the rest of a visit; a merge takes the right run's entry first only when its margin is
 * larger, so equal margins keep their order: the same total order, the same result. */
static void keener_first(int64_t *order, int64_t *scratch, Py_ssize_t count, const double *margin) {
    int64_t *from = order, *to = scratch;
    for (Py_ssize_t width = 1; width < count; width *= 2) {
        for (Py_ssize_t left = 0; left < count; left += 2 * width) {
            Py_ssize_t middle = left + width < count ? left + width : count;
            Py_ssize_t right = left + 2 * width < count ? left + 2 * width : count;
            Py_ssize_t i = left, j = middle, k = left;
            while (i < middle && j < right) to[k++] = margin[from[j]] > margin[from[i]] ? from[j++] : from[i++];
            while (i < middle) to[k++] = from[i++];
            while (j < right) to[k++] = from[j++];
        }
        int64_t *swapped = from;
        from = to;
        to = swapped;
    }
    if (from != order) memcpy(order, from, sizeof(int64_t) * (size_t)count);
}

/* One visit of an over group g (transport.py, raise_prices' inner loop). Returns 0 to go on,
 * 1 when the floor is not finite (phase 2 ends there), -1 on a NaN (decline). */
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
        s->order[k] = k;
    }
    keener_first(s->order, s->scratch, count, s->margin);
    const double *units = s->flat + s->bounds[g];
    int64_t size = size_of(s, g);
    Py_ssize_t room = size < count ? (Py_ssize_t)size : count;
    Py_ssize_t staying = room;
    for (Py_ssize_t k = 0; k < room; k++) {
        if (!(s->margin[s->order[k]] >= units[k])) {
            staying = k;
            break;
        }
    }
    double below = staying ? units[staying - 1] : -INFINITY;
    double keenest_leaving = staying < count ? s->margin[s->order[staying]] : -INFINITY;
    double floor_price = below >= keenest_leaving ? below : keenest_leaving;
    if (!isfinite(floor_price)) return 1;
    double raised = s->price[g] >= floor_price ? s->price[g] : floor_price;
    s->price[g] = raised;
    s->priced[g] = units_at_most(s, g, raised);
    for (Py_ssize_t k = staying; k < count; k++) {
        Py_ssize_t at = s->order[k];
        int64_t destination = s->alternative[at];
        s->assign[s->jobs[at]] = destination;
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
    void *blocks[8];
    blocks[0] = s.price = PyMem_Malloc(sizeof(double) * (size_t)width);
    blocks[1] = s.load = PyMem_Malloc(sizeof(int64_t) * (size_t)width);
    blocks[2] = s.priced = PyMem_Malloc(sizeof(int64_t) * (size_t)width);
    blocks[3] = s.jobs = PyMem_Malloc(sizeof(int64_t) * (size_t)height);
    blocks[4] = s.margin = PyMem_Malloc(sizeof(double) * (size_t)height);
    blocks[5] = s.alternative = PyMem_Malloc(sizeof(int64_t) * (size_t)height);
    blocks[6] = s.order = PyMem_Malloc(sizeof(int64_t) * (size_t)height);
    blocks[7] = s.scratch = PyMem_Malloc(sizeof(int64_t) * (size_t)height);
    int status = -1;
    if (s.price && s.load && s.priced && s.jobs && s.margin && s.alternative && s.order && s.scratch) {
        status = rows == 0 ? DECLINED : solve(&s, (int64_t)max_augmentations);
    } else {
        PyErr_NoMemory();
    }
    for (int i = 0; i < 8; i++) PyMem_Free(blocks[i]);
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
            result = PyBool_FromLong(decided);
        }
    }
    PyMem_Free(best);
    PyMem_Free(by_class);
    release_all(views, taken);
    return result;
}

static PyMethodDef methods[] = {
    {"solve_groups", solve_groups, METH_VARARGS,
     "solve_groups(cost, flat, bounds, assign, max_augmentations) -> 0 solved, 1 none, 2 declined (see the module's header)"},
    {"cheapest_classes", cheapest_classes, METH_VARARGS, "cheapest_classes(group, offset, group_cost, chosen) -> decided (see the header)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_transport", "The folded solve's phases 2 and 3 in C (scheduler/matching/transport.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__transport(void) { return PyModule_Create(&module); }
