/* The rows of allox._Left.uncontended's plan grouped by their strictly fastest kind, shared by
 * _solve.c's uncontended_plan and _walk.c's runs (each then puts the k-th row of a kind on the
 * k-th free machine of the kind, in its own order of the machines). */
#ifndef CELLFIT_MATCHING_UNCONTENDED_H
#define CELLFIT_MATCHING_UNCONTENDED_H

#include <Python.h>
#include <stdint.h>

/* rows (count, in row order) by fastest kind into by_kind: needed[k] of kind k from first[k],
 * placed[] left at 0 for the caller's placing; 0 (nothing meaningful written) when a row has no
 * strictly fastest kind (-1) or a kind has fewer free machines (free_count) than rows. needed,
 * first and placed: kinds entries each; fastest[rows[i]] below kinds (checked by the caller). */
static int rows_by_fastest_kind(const int64_t *rows, Py_ssize_t count, const int64_t *fastest, Py_ssize_t kinds,
                                const int64_t *free_count, int64_t *needed, int64_t *first, int64_t *placed, int64_t *by_kind) {
    for (Py_ssize_t k = 0; k < kinds; k++) needed[k] = placed[k] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t kind = fastest[rows[i]];
        if (kind < 0) return 0;
        needed[kind] += 1;
    }
    for (Py_ssize_t k = 0; k < kinds; k++)
        if (needed[k] > free_count[k]) return 0;
    if (kinds > 0) first[0] = 0;
    for (Py_ssize_t k = 1; k < kinds; k++) first[k] = first[k - 1] + needed[k - 1];
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t kind = fastest[rows[i]];
        by_kind[first[kind] + placed[kind]++] = rows[i];
    }
    for (Py_ssize_t k = 0; k < kinds; k++) placed[k] = 0;
    return 1;
}

#endif
