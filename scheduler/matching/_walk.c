/* A run of Algorithm 2's visits in C (scheduler/matching/allox.py, AlloxScheduler.matched).
 *
 * After a burst at small alpha most visits are alike: the free machine's plan is that of the
 * ceil(alpha n) users with least progress, a plan kept from an earlier visit or the matching
 * where no two jobs contend (allox._Left.uncontended), and its first job on the machine starts;
 * the start moves the machine's wait and the user's progress, and drops the plans it leaves
 * invalid (allox._Plan.kept_after). In Python each such visit is ~40-50 us of bookkeeping.
 * uncontended_run walks those visits here and hands back, at the first visit it cannot decide
 * alone (a plan that leaves the machine empty, a set whose jobs contend, a plan put off), what
 * it started; allox.py carries the starts into its own state and walks on from that visit. The
 * Python walk is the reference: the same plans, tests and float operations, in the same order
 * (tests/matching/test_matching_walk_run.py compares both ways).
 *
 * uncontended_run(visits, machine_kind, delay, times, fastest, row_user, waiting, ranking, progress,
 *                 out_rows, out_visits, out_waits, out_old, plans, value, start, base, now, fleet_now, passed)
 *     -> (next_visit, starts, dropped, pops, made)
 *   visits: int64, each free machine's index (machine_kind, delay) in visiting order; walked
 *   from visits[start]. machine_kind (int64) and delay (float64, written: each start's machine
 *   waits its job's finish - fleet_now, at least 0.0) per machine. times: float64 rows x kinds;
 *   fastest: int64 per row, its strictly fastest kind or -1; row_user: int64 per row, its user
 *   (users numbered in name order); waiting: int64 per row, 1 while it waits (written: 0 once
 *   started). ranking: int64, the users by (progress, name), written as starts move it;
 *   progress: float64 per user, written. out_rows, out_visits, out_waits, out_old (a slot per
 *   visit at least): each start's row, visit, new wait and old wait. plans: a list of the plans
 *   allox.py holds, each (members: int64 0/1 per user, bounds: int64 machines + 1 or None,
 *   queued: int64 rows, taken: int64 per machine (written: a start pops its plan's queue), used:
 *   int64 machines with a queue, ascending). value: value(row, visit) -> float, the start's
 *   job value (fairness.job_value) when the ranking moves, else None; it must write none of
 *   the call's arguments (the buffers are checked once, before the walk). base: users considered
 *   (at least 1). passed: None or (kind, wait, visit position), the last visited machine when
 *   it started nothing (allox._starts_nothing_after).
 *   Returns the visit allox.py walks next (it decides it itself), how many starts were made,
 *   the indices of plans a start dropped, the (plan index, machine) of each start off a given
 *   plan, and the plans made here that are left, each (members, used, queued, taken): lists. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_buffers.h"
#include "_uncontended.h"
#include <math.h>
#include <stdint.h>

/* The run holds at most this many plans it made (those a start dropped are let go first): it
 * stops rather than make one more (allox.py then makes it). */
enum { MOST_PLANS = 64 };

typedef struct {
    const int64_t *members; /* per user, 0 or 1 */
    Py_ssize_t member_count;
    /* The caller's plans: bounds (machines + 1; NULL: the plan has no job), queued, taken per
     * machine, used (the machines with a queue, ascending). Made here (compact): one job a
     * machine, used[i] (ascending) runs queued[i], and taken is per machine of used. */
    const int64_t *bounds;
    const int64_t *queued;
    Py_ssize_t queued_count;
    int64_t *taken;
    const int64_t *used;
    Py_ssize_t used_count;
    int compact;
    Py_ssize_t given; /* index among the caller's plans; -1: made here */
    int alive;
    int64_t *owned; /* made here: members, queued, used and taken in one block */
} Plan;

typedef struct {
    Py_ssize_t machines, rows, kinds, users;
    const int64_t *machine_kind, *fastest, *row_user;
    double *delay;
    const double *times;
    int64_t *waiting;
    /* Each kind's free machines (waiting 0.0), ascending: free_list[free_first[k] ..
     * free_first[k] + free_count[k]), kept as starts move waits. */
    int64_t *free_list, *free_first, *free_count;
    /* Each user's rows, ascending: user_rows[user_first[u] .. user_first[u + 1]). */
    int64_t *user_rows, *user_first;
} Walk;

/* Where machine is among a plan's used machines (ascending), or -1. */
static Py_ssize_t found_at(const Plan *plan, int64_t machine) {
    Py_ssize_t low = 0, high = plan->used_count;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (plan->used[middle] < machine) low = middle + 1;
        else high = middle;
    }
    return low < plan->used_count && plan->used[low] == machine ? low : -1;
}

/* The job the plan starts next on machine position (allox._Plan.first): a row, or -1. */
static int64_t first_of(const Plan *plan, Py_ssize_t position) {
    if (plan->compact) {
        Py_ssize_t at = found_at(plan, position);
        return at >= 0 && !plan->taken[at] ? plan->queued[at] : -1;
    }
    if (plan->bounds == NULL) return -1;
    int64_t at = plan->bounds[position] + plan->taken[position];
    if (at < plan->bounds[position + 1] && at >= 0 && at < plan->queued_count) return plan->queued[at];
    return -1;
}

/* allox._Plan.pop, of a machine the plan has a job on. */
static void popped(Plan *plan, Py_ssize_t position) {
    if (plan->compact) plan->taken[found_at(plan, position)] += 1;
    else plan->taken[position] += 1;
}

/* allox._Plan.kept_after: after a start on machine position (of kind, now waiting wait). */
static int kept_after(const Plan *plan, int source, Py_ssize_t position, int64_t kind, double wait, const Walk *walk) {
    if (!plan->compact && plan->bounds == NULL) return 1;
    if (!source) {
        if (plan->compact) {
            Py_ssize_t at = found_at(plan, position);
            if (at >= 0 && !plan->taken[at]) return 0;
        } else if (plan->bounds[position + 1] - plan->bounds[position] > plan->taken[position]) {
            return 0;
        }
    }
    for (Py_ssize_t i = 0; i < plan->used_count; i++) {
        int64_t machine = plan->used[i];
        if (machine != position && walk->machine_kind[machine] == kind && walk->delay[machine] == wait) return 0;
    }
    return 1;
}

/* The considered users' plan among those held, or NULL: the same set of users. */
static Plan *held_plan(Plan *plans, Py_ssize_t count, const int64_t *ranking, Py_ssize_t base) {
    for (Py_ssize_t p = 0; p < count; p++) {
        if (!plans[p].alive || plans[p].member_count != base) continue;
        int same = 1;
        for (Py_ssize_t i = 0; same && i < base; i++) same = plans[p].members[ranking[i]] != 0;
        if (same) return &plans[p];
    }
    return NULL;
}

static int row_order(const void *left, const void *right) {
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return (a > b) - (a < b);
}

/* allox._Left.uncontended for the ranking's first base users' waiting rows (the plan of
 * _solve.c's uncontended_plan: each kind's rows, in row order, on its free machines as
 * listed): the plan, compact, alive; 0 when there is none (no row, a row without a strictly
 * fastest kind, a kind with too few free machines); -1 when out of memory. work: 2 rows + 3
 * kinds int64. */
static int uncontended(Plan *plan, const Walk *walk, const int64_t *ranking, Py_ssize_t base, int64_t *work) {
    int64_t *rows = work, *by_kind = rows + walk->rows, *needed = by_kind + walk->rows, *first = needed + walk->kinds;
    int64_t *placed = first + walk->kinds;
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < base; i++) {
        int64_t user = ranking[i];
        for (int64_t at = walk->user_first[user]; at < walk->user_first[user + 1]; at++) {
            rows[count] = walk->user_rows[at]; /* written always, kept when it waits */
            count += walk->waiting[walk->user_rows[at]] != 0;
        }
    }
    if (count == 0) return 0;
    if (base > 1) qsort(rows, (size_t)count, sizeof(int64_t), row_order);
    if (!rows_by_fastest_kind(rows, count, walk->fastest, walk->kinds, walk->free_count, needed, first, placed, by_kind)) return 0;
    int64_t *owned = PyMem_Malloc(sizeof(int64_t) * (size_t)(walk->users + 3 * count + 1));
    if (owned == NULL) return -1;
    int64_t *members = owned, *queued = members + walk->users, *used = queued + count, *taken = used + count;
    for (Py_ssize_t u = 0; u < walk->users; u++) members[u] = 0;
    for (Py_ssize_t i = 0; i < base; i++) members[ranking[i]] = 1;
    /* The kinds' machines merged in machine order: the k-th row of a kind on its k-th free machine. */
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t next = -1;
        for (Py_ssize_t k = 0; k < walk->kinds; k++)
            if (placed[k] < needed[k] &&
                (next < 0 || walk->free_list[walk->free_first[k] + placed[k]] < walk->free_list[walk->free_first[next] + placed[next]]))
                next = k;
        used[i] = walk->free_list[walk->free_first[next] + placed[next]];
        queued[i] = by_kind[first[next] + placed[next]++];
        taken[i] = 0;
    }
    *plan = (Plan){members, base, NULL, queued, count, taken, used, count, 1, -1, 1, owned};
    return 1;
}

/* Machine position's wait moved from old to wait: its kind's free machines kept. */
static void freed_or_taken(Walk *walk, int64_t position, double old, double wait) {
    int64_t kind = walk->machine_kind[position], *list = walk->free_list + walk->free_first[kind];
    Py_ssize_t count = walk->free_count[kind], at = 0;
    while (at < count && list[at] < position) at++;
    if (old == 0.0 && !(wait == 0.0)) {
        if (at < count && list[at] == position) {
            memmove(list + at, list + at + 1, sizeof(int64_t) * (size_t)(count - at - 1));
            walk->free_count[kind] -= 1;
        }
    } else if (!(old == 0.0) && wait == 0.0) {
        memmove(list + at + 1, list + at, sizeof(int64_t) * (size_t)(count - at));
        list[at] = position;
        walk->free_count[kind] += 1;
    }
}

/* The plans made here that a start dropped, freed and taken out (the caller's stay, each at its
 * index): how many plans are left. */
static Py_ssize_t compacted(Plan *plans, Py_ssize_t given, Py_ssize_t count) {
    Py_ssize_t kept = given;
    for (Py_ssize_t p = given; p < count; p++) {
        if (plans[p].alive) plans[kept++] = plans[p];
        else PyMem_Free(plans[p].owned);
    }
    return kept;
}

/* The user moved to its place in the ranking by (progress, name): the others' keys are as
 * they were, so one pass each way sorts it as a full sort does (no key is NaN). */
static void reranked(int64_t *ranking, Py_ssize_t users, const double *progress, int64_t user) {
    Py_ssize_t at = 0;
    while (at < users && ranking[at] != user) at++;
#define BEFORE(a, b) (progress[a] < progress[b] || (progress[a] == progress[b] && (a) < (b)))
    while (at > 0 && BEFORE(user, ranking[at - 1])) {
        ranking[at] = ranking[at - 1];
        ranking[--at] = user;
    }
    while (at + 1 < users && BEFORE(ranking[at + 1], user)) {
        ranking[at] = ranking[at + 1];
        ranking[++at] = user;
    }
#undef BEFORE
}

/* A list of a buffer's int64 values, or NULL with the error set. */
static PyObject *listed(const int64_t *values, Py_ssize_t count) {
    PyObject *list = PyList_New(count);
    for (Py_ssize_t i = 0; list != NULL && i < count; i++) {
        PyObject *item = PyLong_FromLongLong(values[i]);
        if (item == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* What the run hands back (see the header), or NULL with the error set. */
static PyObject *answer(Py_ssize_t next, Py_ssize_t starts, const Plan *plans, Py_ssize_t plan_count, PyObject *pops, const Walk *walk) {
    PyObject *dropped = PyList_New(0), *made = PyList_New(0), *result = NULL;
    int failed = dropped == NULL || made == NULL;
    for (Py_ssize_t p = 0; !failed && p < plan_count; p++) {
        const Plan *plan = &plans[p];
        if (plan->given >= 0) {
            if (!plan->alive) {
                PyObject *index = PyLong_FromSsize_t(plan->given);
                failed = index == NULL || PyList_Append(dropped, index) < 0;
                Py_XDECREF(index);
            }
            continue;
        }
        if (!plan->alive) continue;
        int64_t *members = PyMem_Malloc(sizeof(int64_t) * (size_t)(plan->member_count + 1));
        int64_t *taken = PyMem_Malloc(sizeof(int64_t) * (size_t)(plan->used_count + 1));
        if (members == NULL || taken == NULL) {
            PyMem_Free(members);
            PyMem_Free(taken);
            PyErr_NoMemory();
            failed = 1;
            break;
        }
        Py_ssize_t member_count = 0, taken_count = 0;
        for (Py_ssize_t u = 0; u < walk->users; u++)
            if (plan->members[u]) members[member_count++] = u;
        for (Py_ssize_t i = 0; i < plan->used_count; i++)
            if (plan->taken[i]) taken[taken_count++] = plan->used[i];
        PyObject *entry = Py_BuildValue("(NNNN)", listed(members, member_count), listed(plan->used, plan->used_count),
                                        listed(plan->queued, plan->queued_count), listed(taken, taken_count));
        PyMem_Free(members);
        PyMem_Free(taken);
        failed = entry == NULL || PyList_Append(made, entry) < 0;
        Py_XDECREF(entry);
    }
    if (!failed) result = Py_BuildValue("(nnOOO)", next, starts, dropped, pops, made);
    Py_XDECREF(dropped);
    Py_XDECREF(made);
    return result;
}

/* The caller's plans (see the header), checked, into plans[0 .. count); their buffers in views
 * (4 a plan: members, bounds, queued, taken, used less the ones that are None). -1 with the
 * error set. */
static int given_plans(PyObject *list, Plan *plans, Py_buffer *views, int *taken_views, const Walk *walk) {
    Py_ssize_t count = PyList_GET_SIZE(list);
    static const Wanted wanted[5] = {{'q', 0, 1, "plan members"}, {'q', 0, 1, "plan bounds"}, {'q', 0, 1, "plan queued"},
                                     {'q', 1, 1, "plan taken"},   {'q', 0, 1, "plan used"}};
    for (Py_ssize_t p = 0; p < count; p++) {
        PyObject *item = PyList_GET_ITEM(list, p);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 5) {
            PyErr_SetString(PyExc_TypeError, "uncontended_run: each plan a tuple (members, bounds, queued, taken, used)");
            return -1;
        }
        PyObject *bounds_object = PyTuple_GET_ITEM(item, 1);
        int empty = bounds_object == Py_None;
        Py_buffer *view = &views[5 * p];
        for (int i = 0; i < 5; i++) {
            if (empty && (i == 1 || i == 2 || i == 4)) continue;
            if (take(PyTuple_GET_ITEM(item, i), &view[i], wanted[i].kind, wanted[i].writable, 1, wanted[i].name) < 0) return -1;
            taken_views[5 * p + i] = 1;
        }
        Plan *plan = &plans[p];
        *plan = (Plan){view[0].buf, 0, NULL, NULL, 0, view[3].buf, NULL, 0, 0, p, 1, NULL};
        int valid = view[0].len / 8 == walk->users && view[3].len / 8 == walk->machines;
        for (Py_ssize_t u = 0; valid && u < walk->users; u++) {
            valid = plan->members[u] == 0 || plan->members[u] == 1;
            plan->member_count += plan->members[u] != 0;
        }
        for (Py_ssize_t m = 0; valid && m < walk->machines; m++) valid = plan->taken[m] >= 0;
        if (valid && !empty) {
            plan->bounds = view[1].buf;
            plan->queued = view[2].buf;
            plan->queued_count = view[2].len / 8;
            plan->used = view[4].buf;
            plan->used_count = view[4].len / 8;
            valid = view[1].len / 8 == walk->machines + 1 && plan->bounds[0] == 0 && plan->bounds[walk->machines] == plan->queued_count;
            /* A machine's taken is at most its queue's length (a pop follows a job found): larger,
             * bounds + taken would overflow before the check of the index it makes. */
            for (Py_ssize_t m = 0; valid && m < walk->machines; m++)
                valid = plan->bounds[m] <= plan->bounds[m + 1] && plan->taken[m] <= plan->bounds[m + 1] - plan->bounds[m];
            for (Py_ssize_t i = 0; valid && i < plan->queued_count; i++) valid = plan->queued[i] >= 0 && plan->queued[i] < walk->rows;
            for (Py_ssize_t i = 0; valid && i < plan->used_count; i++) valid = plan->used[i] >= 0 && plan->used[i] < walk->machines;
        }
        if (!valid) {
            PyErr_Format(PyExc_ValueError, "uncontended_run: plan %zd: members 0 or 1 per user, taken at least 0 per machine and at most its "
                         "queue's length, bounds one more than machines, ascending from 0 to queued's length, queued rows of times, used machines", p);
            return -1;
        }
    }
    return 0;
}

/* Whether a buffer the run writes (the call's writable ones, each plan's taken) shares memory
 * with any other buffer of the call, the plans' read-only ones included: refused with a
 * ValueError, as overlapping() refuses the call's own (a write would move a checked index). */
static int taken_overlaps(const Py_buffer *views, const Wanted *wanted, int count, const Py_buffer *plan_views, const int *plan_taken,
                          Py_ssize_t given) {
    Py_ssize_t total = count + 5 * given;
    for (Py_ssize_t i = 0; i < total; i++) {
        const Py_buffer *written = i < count ? &views[i] : &plan_views[i - count];
        int writes = i < count ? wanted[i].writable : plan_taken[i - count] && (i - count) % 5 == 3;
        if (!writes || written->len == 0) continue;
        uintptr_t low = (uintptr_t)written->buf, high = low + (uintptr_t)written->len;
        /* The call's own buffers against each other: overlapping(). */
        for (Py_ssize_t j = i < count ? count : 0; j < total; j++) {
            const Py_buffer *other = j < count ? &views[j] : &plan_views[j - count];
            if (j == i || (j >= count && !plan_taken[j - count]) || other->len == 0) continue;
            uintptr_t other_low = (uintptr_t)other->buf, other_high = other_low + (uintptr_t)other->len;
            if (low < other_high && other_low < high) {
                static const char *const names[5] = {"members", "bounds", "queued", "taken", "used"};
                if (j < count)
                    PyErr_Format(PyExc_ValueError, "uncontended_run: plan %zd's taken shares memory with %s", (i - count) / 5, wanted[j].name);
                else if (i < count)
                    PyErr_Format(PyExc_ValueError, "uncontended_run: plan %zd's %s shares memory with %s", (j - count) / 5, names[(j - count) % 5],
                                 wanted[i].name);
                else
                    PyErr_Format(PyExc_ValueError, "uncontended_run: plan %zd's taken shares memory with plan %zd's %s", (i - count) / 5,
                                 (j - count) / 5, names[(j - count) % 5]);
                return 1;
            }
        }
    }
    return 0;
}

static PyObject *uncontended_run(PyObject *self, PyObject *args) {
    enum { BUFFERS = 13 };
    PyObject *objects[BUFFERS], *plan_list, *value, *passed;
    Py_ssize_t start, base;
    double now, fleet_now;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOO!OnnddO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4], &objects[5],
                          &objects[6], &objects[7], &objects[8], &objects[9], &objects[10], &objects[11], &objects[12], &PyList_Type,
                          &plan_list, &value, &start, &base, &now, &fleet_now, &passed))
        return NULL;
    static const Wanted wanted[BUFFERS] = {{'q', 0, 1, "visits"},    {'q', 0, 1, "machine_kind"}, {'d', 1, 1, "delay"},
                                           {'d', 0, 2, "times"},     {'q', 0, 1, "fastest"},      {'q', 0, 1, "row_user"},
                                           {'q', 1, 1, "waiting"},   {'q', 1, 1, "ranking"},      {'d', 1, 1, "progress"},
                                           {'q', 1, 1, "out_rows"},  {'q', 1, 1, "out_visits"},   {'d', 1, 1, "out_waits"},
                                           {'d', 1, 1, "out_old"}};
    Py_buffer views[BUFFERS];
    int taken = take_all(objects, views, wanted, BUFFERS);
    Py_ssize_t given = PyList_GET_SIZE(plan_list);
    Plan *plans = PyMem_Calloc((size_t)(given + MOST_PLANS + 1), sizeof(Plan));
    Py_buffer *plan_views = PyMem_Calloc((size_t)(5 * given + 1), sizeof(Py_buffer));
    int *plan_taken = PyMem_Calloc((size_t)(5 * given + 1), sizeof(int));
    int64_t *considered = NULL, *work = NULL, *index = NULL;
    PyObject *pops = NULL, *result = NULL;
    Py_ssize_t plan_count = 0;
    if (taken < BUFFERS || overlapping(views, wanted, BUFFERS, "uncontended_run")) goto done;
    if (plans == NULL || plan_views == NULL || plan_taken == NULL || (pops = PyList_New(0)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Walk walk = {views[1].len / 8, views[3].shape[0], views[3].shape[1], views[7].len / 8, views[1].buf, views[4].buf, views[5].buf,
                 views[2].buf, views[3].buf, views[6].buf, NULL, NULL, NULL, NULL, NULL};
    Py_ssize_t visit_count = views[0].len / 8;
    const int64_t *visits = views[0].buf;
    int64_t *ranking = views[7].buf, *out_rows = views[9].buf, *out_visits = views[10].buf;
    double *progress = views[8].buf, *out_waits = views[11].buf, *out_old = views[12].buf;
    int valid = views[2].len / 8 == walk.machines && views[4].len / 8 == walk.rows && views[5].len / 8 == walk.rows &&
                views[6].len / 8 == walk.rows && views[8].len / 8 == walk.users && views[9].len / 8 >= visit_count &&
                views[10].len / 8 >= visit_count && views[11].len / 8 >= visit_count && views[12].len / 8 >= visit_count &&
                start >= 0 && start <= visit_count && base >= 1 && base <= walk.users;
    for (Py_ssize_t v = 0; valid && v < visit_count; v++) valid = visits[v] >= 0 && visits[v] < walk.machines;
    for (Py_ssize_t m = 0; valid && m < walk.machines; m++) valid = walk.machine_kind[m] >= 0 && walk.machine_kind[m] < walk.kinds;
    for (Py_ssize_t i = 0; valid && i < walk.rows; i++)
        valid = walk.fastest[i] >= -1 && walk.fastest[i] < walk.kinds && walk.row_user[i] >= 0 && walk.row_user[i] < walk.users;
    if (valid) {
        considered = PyMem_Calloc((size_t)walk.users + 1, sizeof(int64_t));
        work = PyMem_Malloc(sizeof(int64_t) * (size_t)(2 * walk.rows + 3 * walk.kinds + 1));
        index = PyMem_Calloc((size_t)(walk.machines + 2 * walk.kinds + walk.users + walk.rows + 2), sizeof(int64_t));
        if (considered == NULL || work == NULL || index == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        /* The ranking: every user once (considered counts them). */
        for (Py_ssize_t i = 0; valid && i < walk.users; i++) {
            valid = ranking[i] >= 0 && ranking[i] < walk.users && !considered[ranking[i]];
            if (valid) considered[ranking[i]] = 1;
        }
        for (Py_ssize_t u = 0; u < walk.users; u++) considered[u] = 0;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "uncontended_run: visits of machines, a kind of times and a delay per machine, a fastest kind, a user "
                        "and a wait flag per row of times, the ranking every user once, a progress per user, an out slot per visit, "
                        "start within the visits, base from 1 to the users");
        goto done;
    }
    int passed_known = passed != Py_None;
    long long passed_kind = 0;
    double passed_wait = 0.0;
    Py_ssize_t passed_at = 0;
    if (passed_known && !PyArg_ParseTuple(passed, "Ldn;uncontended_run: passed is None or (kind, wait, machine)", &passed_kind, &passed_wait,
                                          &passed_at))
        goto done;
    if (given_plans(plan_list, plans, plan_views, plan_taken, &walk) < 0 || taken_overlaps(views, wanted, BUFFERS, plan_views, plan_taken, given)) goto done;
    /* Each kind's free machines, ascending (room for every machine of the kind), and each
     * user's rows, ascending. */
    walk.free_list = index;
    walk.free_first = walk.free_list + walk.machines;
    walk.free_count = walk.free_first + walk.kinds + 1;
    walk.user_first = walk.free_count + walk.kinds;
    walk.user_rows = walk.user_first + walk.users + 1;
    for (Py_ssize_t m = 0; m < walk.machines; m++) walk.free_first[walk.machine_kind[m] + 1] += 1;
    for (Py_ssize_t k = 0; k < walk.kinds; k++) walk.free_first[k + 1] += walk.free_first[k];
    for (Py_ssize_t m = 0; m < walk.machines; m++) {
        int64_t kind = walk.machine_kind[m];
        if (walk.delay[m] == 0.0) walk.free_list[walk.free_first[kind] + walk.free_count[kind]++] = m;
    }
    for (Py_ssize_t i = 0; i < walk.rows; i++) walk.user_first[walk.row_user[i] + 1] += 1;
    for (Py_ssize_t u = 0; u < walk.users; u++) walk.user_first[u + 1] += walk.user_first[u];
    for (Py_ssize_t i = 0; i < walk.rows; i++) walk.user_rows[walk.user_first[walk.row_user[i]] + considered[walk.row_user[i]]++] = i;
    for (Py_ssize_t u = 0; u < walk.users; u++) considered[u] = 0;
    plan_count = given;
    Py_ssize_t waiting_count = 0;
    for (Py_ssize_t i = 0; i < walk.rows; i++) waiting_count += walk.waiting[i] != 0;
    int ranked = value != Py_None, orderly = 1;
    for (Py_ssize_t u = 0; u < walk.users; u++) orderly &= !isnan(progress[u]);
    Py_ssize_t visit = start, starts = 0;
    while (orderly && visit < visit_count && waiting_count > 0) {
        Py_ssize_t position = visits[visit];
        int64_t kind = walk.machine_kind[position];
        if (passed_known && position > passed_at && kind == passed_kind && walk.delay[position] == passed_wait) {
            visit++; /* allox._starts_nothing_after */
            continue;
        }
        Plan *source = held_plan(plans, plan_count, ranking, base), made = {0};
        int64_t row = -1;
        if (source != NULL) {
            row = first_of(source, position);
        } else {
            if (plan_count - given == MOST_PLANS) plan_count = compacted(plans, given, plan_count);
            int found = plan_count - given < MOST_PLANS ? uncontended(&made, &walk, ranking, base, work) : 0;
            if (found < 0) {
                PyErr_NoMemory();
                goto done;
            }
            if (found) row = first_of(&made, position);
        }
        int64_t user = row >= 0 ? walk.row_user[row] : 0;
        double progressed = 0.0;
        if (row >= 0 && ranked) {
            PyObject *answered = PyObject_CallFunction(value, "nn", (Py_ssize_t)row, visit);
            double worth = answered == NULL ? -1.0 : PyFloat_AsDouble(answered);
            Py_XDECREF(answered);
            if (worth == -1.0 && PyErr_Occurred()) {
                PyMem_Free(made.owned);
                goto done;
            }
            progressed = progress[user] + worth;
            if (isnan(progressed)) row = -1; /* a ranking with NaN is Python's sort's to make */
        }
        if (row < 0) {
            PyMem_Free(made.owned); /* allox.py makes it again (the same rows and waits) */
            break;
        }
        if (source == NULL) {
            plans[plan_count] = made;
            source = &plans[plan_count++];
        }
        double finish = now + walk.times[row * walk.kinds + kind], wait = finish - fleet_now;
        if (0.0 > wait) wait = 0.0; /* Python's max(wait, 0.0) */
        walk.waiting[row] = 0;
        waiting_count--;
        out_rows[starts] = row;
        out_visits[starts] = visit;
        out_waits[starts] = wait;
        out_old[starts] = walk.delay[position];
        freed_or_taken(&walk, position, walk.delay[position], wait);
        starts++;
        walk.delay[position] = wait;
        if (ranked) {
            progress[user] = progressed;
            reranked(ranking, walk.users, progress, user);
        }
        popped(source, position);
        if (source->given >= 0) {
            PyObject *pop = Py_BuildValue("(nn)", source->given, position);
            int appended = pop != NULL && PyList_Append(pops, pop) == 0;
            Py_XDECREF(pop);
            if (!appended) goto done;
        }
        for (Py_ssize_t p = 0; p < plan_count; p++) {
            Plan *plan = &plans[p];
            if (plan->alive && ((plan != source && plan->members[user]) || !kept_after(plan, plan == source, position, kind, wait, &walk)))
                plan->alive = 0;
        }
        passed_known = 0;
        visit++;
    }
    result = answer(visit, starts, plans, plan_count, pops, &walk);
done:
    for (Py_ssize_t p = given; plans != NULL && p < plan_count; p++) PyMem_Free(plans[p].owned);
    for (Py_ssize_t i = 0; plan_taken != NULL && i < 5 * given; i++)
        if (plan_taken[i]) PyBuffer_Release(&plan_views[i]);
    PyMem_Free(plans);
    PyMem_Free(plan_views);
    PyMem_Free(plan_taken);
    PyMem_Free(considered);
    PyMem_Free(work);
    PyMem_Free(index);
    Py_XDECREF(pops);
    release_all(views, taken);
    return result;
}

static PyMethodDef methods[] = {
    {"uncontended_run", uncontended_run, METH_VARARGS,
     "uncontended_run(visits, machine_kind, delay, times, fastest, row_user, waiting, ranking, progress, out_rows, out_visits, out_waits, "
     "out_old, plans, value, start, base, now, fleet_now, passed): a run of Algorithm 2's visits (see the header)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_walk", "A run of Algorithm 2's visits in C (scheduler/matching/allox.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walk(void) { return PyModule_Create(&module); }
