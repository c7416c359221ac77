/* Taking NumPy arrays as plain buffers, for the matching's C extensions (_transport.c, _solve.c,
 * _positions.c): a contiguous float64 ('d') or int64 ('q') buffer of the given number of
 * dimensions, or a TypeError naming the argument. Include after Python.h. */
#ifndef CELLFIT_MATCHING_BUFFERS_H
#define CELLFIT_MATCHING_BUFFERS_H

#include <stdint.h>
#include <string.h>

static int take(PyObject *object, Py_buffer *view, char kind, int writable, int dimensions, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) < 0) return -1;
    const char *format = view->format ? view->format : "B";
    /* Native byte order only: "d", or "@d" / "=d" (a "<d" or ">d" array is refused rather than
     * read in the wrong order). */
    const char *code = (format[0] == '@' || format[0] == '=') ? format + 1 : format;
    char last = strlen(code) == 1 ? code[0] : '\0';
    int matches = view->itemsize == 8 && view->ndim == dimensions && (kind == 'd' ? last == 'd' : (last == 'l' || last == 'q'));
    if (!matches) {
        PyErr_Format(PyExc_TypeError, "%s: expected a contiguous %d-dimensional %s buffer, got format %s", name, dimensions,
                     kind == 'd' ? "float64" : "int64", format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* One argument as take() checks it. */
typedef struct {
    char kind;
    int writable;
    int dimensions;
    const char *name;
} Wanted;

/* A call's count positional arguments (borrowed), or a TypeError naming the function: for the
 * calls of a dozen buffers, where PyArg_ParseTuple's format would list each one. */
static inline int unpack_objects(PyObject *args, PyObject **objects, Py_ssize_t count, const char *function) {
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != count) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments", function, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) objects[i] = PyTuple_GET_ITEM(args, i);
    return 0;
}

/* Every argument's buffer, in order, until one is refused: how many were taken (count when all;
 * the error set otherwise). Release them with release_all. */
static int take_all(PyObject *const *objects, Py_buffer *views, const Wanted *wanted, int count) {
    int taken = 0;
    for (; taken < count; taken++)
        if (take(objects[taken], &views[taken], wanted[taken].kind, wanted[taken].writable, wanted[taken].dimensions, wanted[taken].name) < 0)
            break;
    return taken;
}

static void release_all(Py_buffer *views, int taken) {
    for (int i = 0; i < taken; i++) PyBuffer_Release(&views[i]);
}

/* Whether a buffer written into shares memory with another argument's: the loops read their
 * inputs again after writing (indexes among them), so an output laid over an input would
 * turn validated indexes into unchecked ones. Refused with a ValueError naming both. */
static inline int overlapping(const Py_buffer *views, const Wanted *wanted, int count, const char *function) {
    for (int i = 0; i < count; i++) {
        if (!wanted[i].writable || views[i].len == 0) continue;
        uintptr_t low = (uintptr_t)views[i].buf, high = low + (uintptr_t)views[i].len;
        for (int j = 0; j < count; j++) {
            if (j == i || views[j].len == 0) continue;
            uintptr_t other_low = (uintptr_t)views[j].buf, other_high = other_low + (uintptr_t)views[j].len;
            if (low < other_high && other_low < high) {
                PyErr_Format(PyExc_ValueError, "%s: %s shares memory with %s", function, wanted[i].name, wanted[j].name);
                return 1;
            }
        }
    }
    return 0;
}

#endif
