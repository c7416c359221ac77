/* canonical's names and levels, and a plan's queues after the fold, on plain buffers
 * (scheduler/matching/solve.py's canonical, _queue_names and contended_plan's queues), for the
 * matching's C extensions: _solve.c's calls and _transport.c's plan in one call. Include after
 * Python.h. The comparators read file-level keys: the GIL is held, one sort at a time. */
#ifndef CELLFIT_MATCHING_CANONICAL_H
#define CELLFIT_MATCHING_CANONICAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The sort keys of one level, read by the comparators (the GIL held: one sort at a time). */
static const int64_t *key_kind, *key_machine;
static const double *key_ready;

/* The level's slots: by kind, then when they start, then machine. */
static int slot_order(const void *left, const void *right) {
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    if (key_kind[a] != key_kind[b]) return key_kind[a] < key_kind[b] ? -1 : 1;
    double ra = key_ready[key_machine[a]], rb = key_ready[key_machine[b]];
    if (ra != rb) return ra < rb ? -1 : 1;
    if (key_machine[a] != key_machine[b]) return key_machine[a] < key_machine[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* order[0:count] sorted by the comparator above, through scratch (count entries): a bottom-up
 * merge sort whose comparisons the compiler inlines (qsort called the comparator through a
 * pointer for each of the ~n log n comparisons of a level of several hundred jobs, most of a
 * plan's canonical levels). Each comparator is a total order (the index last), so every
 * correct sort gives qsort's order. */
#define MERGE_SORT(name, order_of)                                                                                   \
    static void name(int64_t *order, int64_t *scratch, Py_ssize_t count) {                                           \
        int64_t *from = order, *to = scratch;                                                                        \
        for (Py_ssize_t width = 1; width < count; width *= 2) {                                                      \
            for (Py_ssize_t left = 0; left < count; left += 2 * width) {                                             \
                Py_ssize_t middle = left + width < count ? left + width : count;                                     \
                Py_ssize_t right = left + 2 * width < count ? left + 2 * width : count;                              \
                Py_ssize_t i = left, j = middle, k = left;                                                           \
                while (i < middle && j < right) to[k++] = order_of(&from[j], &from[i]) < 0 ? from[j++] : from[i++]; \
                while (i < middle) to[k++] = from[i++];                                                              \
                while (j < right) to[k++] = from[j++];                                                               \
            }                                                                                                        \
            int64_t *swapped = from;                                                                                 \
            from = to;                                                                                               \
            to = swapped;                                                                                            \
        }                                                                                                            \
        if (from != order) memcpy(order, from, sizeof(int64_t) * (size_t)count);                                     \
    }

MERGE_SORT(sort_slots, slot_order)

/* Whether levels_space (and plan_space around it) can be counted for these sizes: every term
 * below a bound whose sums and whose bytes (8 an entry) fit in a Py_ssize_t, the tallies'
 * product (largest + 1) · kind_count checked before it is taken. A wrapped product gave a small
 * buffer that levels_of wrote far past its end (a position of 2^62 - 1 with 3 kinds: 0 bytes
 * of tallies for 2^64 keys). Refuse the call where it does not hold. */
static int levels_fit(Py_ssize_t count, Py_ssize_t job_count, Py_ssize_t kind_count, int64_t largest) {
    const size_t most = (size_t)PY_SSIZE_T_MAX / 64;
    if (count < 0 || job_count < 0 || kind_count < 0 || largest < 0) return 0;
    if ((size_t)count >= most || (size_t)job_count >= most || (size_t)largest >= most) return 0;
    return kind_count == 0 || (size_t)largest + 1 <= most / (size_t)kind_count;
}

/* How many int64 entries levels_of's work space needs beyond its level array (levels_fit
 * holding: no term wraps). */
static size_t levels_space(Py_ssize_t count, Py_ssize_t job_count, Py_ssize_t kind_count, int64_t largest) {
    size_t keys = (size_t)(largest + 1) * (size_t)kind_count, tallies = keys > (size_t)job_count ? keys : (size_t)job_count;
    return (size_t)(largest + 2) + 3 * ((size_t)count + 1) + tallies + 1;
}

/* canonical's levels on validated buffers (see the header): each matched job's row and machine
 * into out_rows and out_machine, ready moved; level (count + 1) gets the jobs by position,
 * largest first, each position's in index order (a stable sort by -position, by counting).
 * space: levels_space(...) int64 entries, zeroed. Each level's jobs by kind, then row, then
 * index are every level's at once: a stable counting sort by row, then one by
 * (level, kind) — the order the merge sort by those keys gave a level at a time. */
static void levels_of(Py_ssize_t count, const int64_t *rows, const int64_t *machine, const int64_t *position, const int64_t *slot_kind,
                      double *ready, const double *times, Py_ssize_t job_count, Py_ssize_t kind_count, int64_t largest, int64_t *out_rows,
                      int64_t *out_machine, int64_t *level, int64_t *space) {
    int64_t *starts = space, *jobs = starts + largest + 2, *scratch = jobs + count + 1, *by_row = scratch + count + 1,
            *tally = by_row + count + 1;
    for (Py_ssize_t i = 0; i < count; i++) starts[largest - position[i] + 1] += 1;
    for (int64_t p = 0; p <= largest; p++) starts[p + 1] += starts[p];
    for (Py_ssize_t i = 0; i < count; i++) level[starts[largest - position[i]]++] = i;
    /* by_row: the jobs by row, then index; jobs: those by (level, kind), stably. */
    for (Py_ssize_t r = 0; r <= job_count; r++) tally[r] = 0;
    for (Py_ssize_t i = 0; i < count; i++) tally[rows[i] + 1] += 1;
    for (Py_ssize_t r = 0; r < job_count; r++) tally[r + 1] += tally[r];
    for (Py_ssize_t i = 0; i < count; i++) by_row[tally[rows[i]]++] = i;
    int64_t keys = (largest + 1) * (int64_t)kind_count;
    for (int64_t k = 0; k <= keys; k++) tally[k] = 0;
    for (Py_ssize_t i = 0; i < count; i++) tally[(largest - position[i]) * kind_count + slot_kind[i] + 1] += 1;
    for (int64_t k = 0; k < keys; k++) tally[k + 1] += tally[k];
    for (Py_ssize_t j = 0; j < count; j++) {
        int64_t i = by_row[j];
        jobs[tally[(largest - position[i]) * kind_count + slot_kind[i]]++] = i;
    }
    key_kind = slot_kind;
    key_machine = machine;
    key_ready = ready;
    Py_ssize_t begin = 0;
    while (begin < count) {
        Py_ssize_t end = begin + 1;
        while (end < count && position[level[end]] == position[level[begin]]) end++;
        int64_t *at = level + begin, *slots_here = jobs + begin;
        Py_ssize_t size = end - begin;
        /* at: the level in index order (kept for the answer); its jobs sorted, then its slots. */
        for (Py_ssize_t i = 0; i < size; i++) out_rows[at[i]] = rows[slots_here[i]];
        memcpy(slots_here, at, sizeof(int64_t) * (size_t)size);
        sort_slots(slots_here, scratch, size);
        for (Py_ssize_t i = 0; i < size; i++) out_machine[at[i]] = machine[slots_here[i]];
        for (Py_ssize_t i = 0; i < size; i++) {
            int64_t slot = slots_here[i];
            ready[machine[slot]] += times[out_rows[at[i]] * kind_count + slot_kind[slot]];
        }
        begin = end;
    }
}

/* The longest queue first, then as listed (the order _queue_names's lexsort gives a group). */
static const int64_t *names_count;
static int queue_order(const void *left, const void *right) {
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    if (names_count[a] != names_count[b]) return names_count[a] > names_count[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* queue_names' steps for one kind on validated buffers (see below): 1 when the kind's order
 * holds and its queues' names are written into label, 0 (nothing written) when it does not.
 * seen (machines + 1, zeroed; the kind's machines are marked) and queues (size + 1) are the
 * work space. */
static int names_of_kind(const int64_t *members, const double *omega, Py_ssize_t size, int64_t kind, const int64_t *machine_kind,
                         const double *delay, const int64_t *count, Py_ssize_t machines, int64_t *label, unsigned char *seen, int64_t *queues) {
    Py_ssize_t of_kind = 0;
    for (Py_ssize_t m = 0; m < machines; m++) of_kind += machine_kind[m] == kind;
    int consistent = of_kind == size;
    for (Py_ssize_t j = 0; consistent && j < size; j++) {
        int64_t m = members[j];
        consistent = m >= 0 && m < machines && !seen[m] && machine_kind[m] == kind && omega[j] == delay[m] && (j == 0 || omega[j - 1] <= omega[j]);
        if (consistent) seen[m] = 1;
    }
    if (!consistent) return 0;
    names_count = count;
    for (Py_ssize_t begin = 0, end; begin < size; begin = end) {
        Py_ssize_t used = 0;
        for (end = begin; end < size && omega[end] == omega[begin]; end++)
            if (count[members[end]] != 0) queues[used++] = members[end]; /* NumPy's nonzero */
        qsort(queues, (size_t)used, sizeof(int64_t), queue_order);
        for (Py_ssize_t r = 0; r < used; r++) label[queues[r]] = members[begin + r];
    }
    return 1;
}

/* How many int64 entries plan_of_fold's work space needs (levels_fit holding, and machines
 * and widest an argument's length: no term wraps; count matched rows of a problem of
 * job_count rows and kind_count kinds on machines machines; widest: the most machines of a
 * kind; largest: the largest position of a matched row's slot). */
static size_t plan_space(Py_ssize_t count, Py_ssize_t job_count, Py_ssize_t kind_count, Py_ssize_t machines, int64_t widest, int64_t largest) {
    /* Per machine its queue's length, name, ready and place (4), per matched job its machine,
     * position, named machine, kind, row and machine out (6), the levels' order, a kind's
     * queues and the levels' own (levels_space); then the bytes of seen. */
    return 4 * ((size_t)machines + 1) + 6 * (size_t)count + ((size_t)count + 1) + (size_t)widest + 1 +
           levels_space(count, job_count, kind_count, largest) + (size_t)machines / 8 + 1;
}

/* canonical_plan's steps on validated buffers (see _solve.c's canonical_plan): the queues into
 * bounds and queued; 1, or 0 (nothing meaningful written) where a kind's order does not hold.
 * work: plan_space(...) int64 entries, zeroed. */
static int plan_of_fold(Py_ssize_t count, const int64_t *rows, const int64_t *columns, const int64_t *slot_machine, const int64_t *slot_position,
                        const int64_t *members, const double *omega, const int64_t *kind_bounds, const int64_t *machine_kind, const double *delay,
                        Py_ssize_t machines, const double *times, Py_ssize_t job_count, Py_ssize_t kind_count, int64_t widest, int64_t largest,
                        int64_t *work, int64_t *bounds, int64_t *queued) {
    int64_t *count_of = work, *label = count_of + machines + 1, *place = label + machines + 1;
    double *ready = (double *)(place + machines + 1);
    int64_t *machine = (int64_t *)(ready + machines + 1), *position = machine + count, *named = position + count, *slot_kind = named + count,
            *out_rows = slot_kind + count, *out_machine = out_rows + count, *level = out_machine + count, *queues = level + count + 1,
            *space = queues + widest + 1;
    unsigned char *seen = (unsigned char *)(space + levels_space(count, job_count, kind_count, largest));
    for (Py_ssize_t i = 0; i < count; i++) {
        machine[i] = slot_machine[columns[i]];
        position[i] = slot_position[columns[i]];
        count_of[machine[i]] += 1;
    }
    for (Py_ssize_t m = 0; m < machines; m++) label[m] = m;
    for (Py_ssize_t k = 0; k < kind_count; k++)
        if (!names_of_kind(members + kind_bounds[k], omega + kind_bounds[k], (Py_ssize_t)(kind_bounds[k + 1] - kind_bounds[k]), (int64_t)k,
                           machine_kind, delay, count_of, machines, label, seen, queues))
            return 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        named[i] = label[machine[i]];
        slot_kind[i] = machine_kind[named[i]];
    }
    memcpy(ready, delay, sizeof(double) * (size_t)machines);
    levels_of(count, rows, named, position, slot_kind, ready, times, job_count, kind_count, largest, out_rows, out_machine, level, space);
    /* level: the jobs by position, largest first, then index; a stable counting sort of it by
     * machine is lexsort((-position, machine)). */
    for (Py_ssize_t m = 0; m <= machines; m++) bounds[m] = 0;
    for (Py_ssize_t i = 0; i < count; i++) bounds[out_machine[i] + 1] += 1;
    for (Py_ssize_t m = 0; m < machines; m++) bounds[m + 1] += bounds[m];
    for (Py_ssize_t m = 0; m < machines; m++) place[m] = bounds[m];
    for (Py_ssize_t j = 0; j < count; j++) {
        int64_t i = level[j];
        queued[place[out_machine[i]]++] = out_rows[i];
    }
    return 1;
}

#endif
