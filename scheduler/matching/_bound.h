/* The position bound and the slots it keeps on plain buffers (positions.py's position_limits
 * with Claim 3's _tightened, and slots_for), for the matching's C extensions: _positions.c's
 * calls and _transport.c's plan in one call. Include after Python.h. */
#ifndef CELLFIT_MATCHING_BOUND_H
#define CELLFIT_MATCHING_BOUND_H

#include <math.h>
#include <stdint.h>

/* positions.py's _LEVELS: Claim 3 counts machines within this many multiples of p. */
#define LEVELS 16

/* How many of sorted (ascending, count long) are below value: searchsorted left. */
static inline Py_ssize_t below(const double *sorted, Py_ssize_t count, double value) {
    Py_ssize_t low = 0, high = count;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (sorted[middle] < value) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* Claim 3's K_i for the machine at i of the kind's order (Claim 1's bound given): _tightened's
 * closed form for one machine. */
static inline int64_t tightened(const double *omega, Py_ssize_t count, int64_t earlier, int64_t runnable, double shortest, double at,
                         int64_t bound) {
    double width = shortest * (1.0 - 1e-9);
    int64_t own = 1 + earlier, shifted = 0, needed = 0, fitting = 0, within = 0;
    for (int64_t k = 1; k <= LEVELS + 1; k++) {
        /* needed(k) = k·own + Σ_{m < k-1} W[m] */
        needed = k * own + shifted;
        fitting += needed <= runnable;
        if (k <= LEVELS) {
            double end = at + (double)k * width;
            within = (int64_t)below(omega, count, end) - earlier - 1;
            shifted += within;
        }
    }
    int64_t last = needed, low;
    if (last <= runnable) {
        int64_t step = own + within; /* within: W[L-1] */
        low = step > 0 ? LEVELS + 1 + (runnable - last) / step : bound;
    } else {
        low = fitting;
    }
    return low < bound ? low : bound;
}

/* kind_limits' steps on validated buffers (see _positions.c's header): K_i into
 * limits[members[i]] for the first min(runnable, count) members of one kind's order. */
static inline void limits_of_kind(const int64_t *members, const double *omega, const int64_t *earlier, const int64_t *earlier_or_equal,
                           Py_ssize_t count, int64_t runnable, double shortest, int64_t *limits) {
    Py_ssize_t head = runnable < count ? (Py_ssize_t)runnable : count;
    int64_t kept = 0;
    double kept_omega = 0.0;
    int have = 0;
    for (Py_ssize_t i = 0; i < head; i++) {
        int64_t bound = (runnable - 1 + earlier_or_equal[i] - earlier[i]) / earlier_or_equal[i];
        if (shortest > 0 && bound >= 2) {
            /* Machines freeing together share s_i, the windows and Claim 1's bound. */
            if (!have || omega[i] != kept_omega) {
                kept = tightened(omega, count, earlier[i], runnable, shortest, omega[i], bound);
                kept_omega = omega[i];
                have = 1;
            }
            bound = kept;
        }
        limits[members[i]] = bound;
    }
}

/* slots' steps on validated buffers (see _positions.c's header): every machine's limits[i]
 * positions, by kind, then position, then machine; cursor: kind_count * span + 1 entries,
 * zeroed (span: the largest limit). */
static inline void slots_of(const int64_t *limits, const int64_t *machine_kind, Py_ssize_t machines, Py_ssize_t kind_count, int64_t span,
                     int64_t *cursor, int64_t *machine, int64_t *position) {
    /* cursor[c·span + p - 1]: machines of kind c with position p, then where they begin. */
    for (Py_ssize_t i = 0; i < machines; i++)
        for (int64_t p = 1; p <= limits[i]; p++) cursor[machine_kind[i] * span + p - 1] += 1;
    int64_t begin = 0;
    for (Py_ssize_t cell = 0; cell < kind_count * span; cell++) {
        int64_t here = cursor[cell];
        cursor[cell] = begin;
        begin += here;
    }
    for (Py_ssize_t i = 0; i < machines; i++) {
        for (int64_t p = 1; p <= limits[i]; p++) {
            int64_t at = cursor[machine_kind[i] * span + p - 1]++;
            machine[at] = i;
            position[at] = p;
        }
    }
}

/* kind_stats' steps (see _solve.c): per kind (column of times, jobs x kinds), how many jobs
 * have a finite time (runnable) and the least finite time, 0.0 where none is (shortest). */
static inline void kind_stats_of(const double *times, Py_ssize_t jobs, Py_ssize_t kinds, int64_t *runnable, double *shortest) {
    for (Py_ssize_t k = 0; k < kinds; k++) {
        runnable[k] = 0;
        shortest[k] = INFINITY;
    }
    for (Py_ssize_t j = 0; j < jobs; j++) {
        for (Py_ssize_t k = 0; k < kinds; k++) {
            double time = times[j * kinds + k];
            if (!isfinite(time)) continue;
            runnable[k] += 1;
            if (time < shortest[k]) shortest[k] = time;
        }
    }
    for (Py_ssize_t k = 0; k < kinds; k++)
        if (!isfinite(shortest[k])) shortest[k] = 0.0;
}

#endif
