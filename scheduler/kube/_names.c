/* Node names on kube-scheduler's wire, resolved without building a Python object per name.
 *
 * With nodeCacheCapable, kube-scheduler sends filter and prioritize a JSON array of up to
 * thousands of node names, and expects names back. In CPython every name costs a str object, a
 * SipHash of it and a dict probe through scattered memory (~50-70 ns, more with cold caches):
 * at 5,000 names that is more than the whole HTTP framework's cost per call. Here one pass over
 * the array's bytes finds each name's span and its slot in a compact open-addressing table, and
 * answers are written by copying the request's own bytes.
 *
 * Only the plain case is handled: kube-scheduler's ExtenderArgs with an array of ASCII strings
 * without escape sequences (Kubernetes node names are DNS subdomains). Anything else - an escape,
 * a non-ASCII byte, a non-string element, another key, malformed text - makes split_args()
 * return None, and the caller decodes the body with msgspec as before, which also names the
 * field in any error. scan() is the same array parser alone, for tests and tools.
 *
 * scheduler/kube/names.py is the Python side and the documented interface; tests compare every
 * answer with the pure-Python path.
 *
 * split_list() serves the watch cache's relists with the same scanning: it finds the items of an
 * API list page (~1 MB for 500 pods) with the GIL released, so that the verbs' thread runs while
 * the reflector's thread splits pages (msgspec, holding the GIL for the whole page, stalled every
 * verb for up to CPython's 5 ms switch interval). scheduler/kube/lists.py is its Python side.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ------------------------------------------------------------------------------ hashing */

static inline uint64_t mix(uint64_t h) {
    /* MurmurHash3's 64-bit finaliser */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t load8(const unsigned char *data) {
    uint64_t word;
    memcpy(&word, data, 8);  /* a constant size: one unaligned load, no call */
    return word;
}

/* The last up-to-8 bytes of data[0..length), length > 0, as a word: one load overlapping
 * what came before when the name is that long, else a byte loop (a memcpy of variable
 * length is a libc call). */
static inline uint64_t tail8(const unsigned char *data, Py_ssize_t length, Py_ssize_t total) {
    if (total >= 8) return load8(data + length - 8);
    uint64_t word = 0;
    for (Py_ssize_t k = 0; k < length; k++) word |= (uint64_t)data[k] << (8 * k);
    return word;
}

static inline uint64_t hash_bytes(const unsigned char *data, Py_ssize_t length) {
    /* Eight bytes a step (a byte-at-a-time hash spent most of a lookup in its multiply chain);
     * collisions only cost a probe, since every hit is confirmed byte for byte. */
    uint64_t h = (uint64_t)length * 0x9e3779b97f4a7c15ULL;
    Py_ssize_t i = 0;
    for (; i + 8 <= length; i += 8) {
        h = (h ^ load8(data + i)) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    if (i < length) h = (h ^ tail8(data + i, length - i, length)) * 0x9e3779b97f4a7c15ULL;
    return mix(h);
}

/* a[0..length) == b[0..length): a word at a time, the last word overlapping the one before. */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t length) {
    if (length < 8) return memcmp(a, b, (size_t)length) == 0;
    for (Py_ssize_t i = 0; i + 8 < length; i += 8)
        if (load8(a + i) != load8(b + i)) return 0;
    return load8(a + length - 8) == load8(b + length - 8);
}

/* ------------------------------------------------------------------------------ NameTable */

/* 8 bytes an entry, so that the table of 5,000 names stays in cache: a lookup touches one
 * entry, then the slot's name bytes to confirm the hit. */
typedef struct {
    uint32_t tag;       /* the hash's high half */
    int32_t slot;       /* -1: empty */
} Entry;

typedef struct {
    PyObject_HEAD
    Entry *entries;
    uint64_t mask;      /* capacity - 1; capacity a power of two, at most half full */
    char *storage;      /* every name's UTF-8 bytes, one after the other */
    uint32_t *offsets;  /* per slot: where its name starts in storage */
    uint32_t *lengths;  /* per slot: its name's length */
    Py_ssize_t size;    /* names in the table */
} NameTable;

static void NameTable_release(NameTable *self) {
    PyMem_Free(self->entries);
    PyMem_Free(self->storage);
    PyMem_Free(self->offsets);
    PyMem_Free(self->lengths);
    self->entries = NULL;
    self->storage = NULL;
    self->offsets = self->lengths = NULL;
    self->size = 0;
}

static void NameTable_dealloc(NameTable *self) {
    NameTable_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static inline int64_t table_find(const NameTable *self, const char *name, Py_ssize_t length) {
    uint64_t h = hash_bytes((const unsigned char *)name, length);
    uint32_t tag = (uint32_t)(h >> 32);
    uint64_t i = h & self->mask;
    for (;;) {
        const Entry *e = &self->entries[i];
        if (e->slot < 0) return -1;
        if (e->tag == tag && self->lengths[e->slot] == (uint32_t)length
            && same_bytes((const unsigned char *)self->storage + self->offsets[e->slot], (const unsigned char *)name, length))
            return e->slot;
        i = (i + 1) & self->mask;
    }
}

/* NameTable(names): names[i] is the name of slot i; None marks a free slot. */
static int NameTable_init(NameTable *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"names", NULL};
    PyObject *names;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:NameTable", keywords, &names)) return -1;
    PyObject *seq = PySequence_Fast(names, "names must be a sequence of str or None");
    if (seq == NULL) return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    NameTable_release(self);
    if (count >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "too many names");
        goto fail;
    }

    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (items[i] == Py_None) continue;
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "names[%zd] must be str or None, not %.80s", i, Py_TYPE(items[i])->tp_name);
            goto fail;
        }
        Py_ssize_t length;
        if (PyUnicode_AsUTF8AndSize(items[i], &length) == NULL) goto fail;
        total += length;
    }
    if (total > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "names too long in all");
        goto fail;
    }
    uint64_t capacity = 8;
    while (capacity < (uint64_t)count * 2) capacity <<= 1;
    self->entries = PyMem_Malloc(capacity * sizeof(Entry));
    self->storage = PyMem_Malloc(total ? (size_t)total : 1);
    self->offsets = PyMem_Malloc((count ? (size_t)count : 1) * sizeof(uint32_t));
    self->lengths = PyMem_Malloc((count ? (size_t)count : 1) * sizeof(uint32_t));
    if (!self->entries || !self->storage || !self->offsets || !self->lengths) {
        PyErr_NoMemory();
        goto fail;
    }
    self->mask = capacity - 1;
    for (uint64_t i = 0; i < capacity; i++) self->entries[i].slot = -1;

    uint32_t offset = 0;
    for (Py_ssize_t slot = 0; slot < count; slot++) {
        self->offsets[slot] = offset;
        self->lengths[slot] = 0;
        if (items[slot] == Py_None) continue;
        Py_ssize_t length;
        const char *name = PyUnicode_AsUTF8AndSize(items[slot], &length);
        if (table_find(self, name, length) >= 0) {
            PyErr_Format(PyExc_ValueError, "names[%zd]: %R appears twice", slot, items[slot]);
            goto fail;
        }
        memcpy(self->storage + offset, name, (size_t)length);
        self->lengths[slot] = (uint32_t)length;
        uint64_t h = hash_bytes((const unsigned char *)name, length);
        uint64_t i = h & self->mask;
        while (self->entries[i].slot >= 0) i = (i + 1) & self->mask;
        self->entries[i] = (Entry){.tag = (uint32_t)(h >> 32), .slot = (int32_t)slot};
        offset += (uint32_t)length;
        self->size++;
    }
    Py_DECREF(seq);
    return 0;
fail:
    NameTable_release(self);
    Py_DECREF(seq);
    return -1;
}

/* Bytes that end the plain part of a JSON string: the closing quote, an escape, the control
 * characters JSON forbids inside strings, and every non-ASCII byte (node names are ASCII; a
 * name with others goes to msgspec, which checks the UTF-8). */
static unsigned char string_stop[256];

static void init_string_stop(void) {
    for (int c = 0; c < 0x20; c++) string_stop[c] = 1;
    for (int c = 0x80; c < 0x100; c++) string_stop[c] = 1;
    string_stop['"'] = 1;
    string_stop['\\'] = 1;
}

/* The first byte at or after p that ends the plain part of a string (see string_stop). */
static inline const char *string_end(const char *p, const char *end) {
#ifdef __SSE2__
    /* sixteen bytes a step; a node name and its closing quote mostly fit in one */
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), control = _mm_set1_epi8(0x1f);
    while (end - p >= 16) {
        __m128i chunk = _mm_loadu_si128((const __m128i *)p);
        __m128i stops = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(chunk, quote), _mm_cmpeq_epi8(chunk, backslash)),
            _mm_cmpeq_epi8(_mm_max_epu8(chunk, control), control)); /* unsigned byte <= 0x1f */
        int mask = _mm_movemask_epi8(stops) | _mm_movemask_epi8(chunk); /* | bytes >= 0x80 */
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && !string_stop[(unsigned char)*p]) p++;
    return p;
}

static inline const char *skip_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* Parses a JSON array of strings starting at p (after any space): appends each string's
 * content (start, end) offsets from `text`, quotes excluded, to *spans. Returns the byte after
 * the array, or NULL when the fast path does not apply (or memory ran out). */
static const char *parse_names(const char *text, const char *p, const char *end,
                               int32_t **spans, Py_ssize_t *count) {
    Py_ssize_t capacity = 64;
    *count = 0;
    *spans = PyMem_Malloc(2 * capacity * sizeof(int32_t));
    if (*spans == NULL) return NULL;
    if (p == end || *p++ != '[') goto fail;
    p = skip_space(p, end);
    if (p < end && *p == ']') return p + 1;
    for (;;) {
        if (p == end || *p != '"') goto fail;
        const char *start = ++p;
        p = string_end(p, end);
        /* the end of the text, an escape or a control character (invalid JSON): msgspec decides */
        if (p == end || *p != '"') goto fail;
        if (*count == capacity) {
            capacity *= 2;
            int32_t *more = PyMem_Realloc(*spans, 2 * capacity * sizeof(int32_t));
            if (more == NULL) goto fail;
            *spans = more;
        }
        (*spans)[2 * *count] = (int32_t)(start - text);
        (*spans)[2 * *count + 1] = (int32_t)(p - text);
        (*count)++;
        p = skip_space(p + 1, end);
        if (p == end) goto fail;
        if (*p == ',') { p = skip_space(p + 1, end); continue; }
        if (*p == ']') return p + 1;
        goto fail;
    }
fail:
    PyMem_Free(*spans);
    *spans = NULL;
    return NULL;
}

/* The end of the JSON object or array starting at p, found by counting brackets outside
 * strings; NULL if the text ends first. Nothing else is checked: the caller has msgspec
 * decode the span, which rejects whatever is not JSON. */
static const char *skip_nested(const char *p, const char *end) {
    Py_ssize_t depth = 0;
    while (p < end) {
        char c = *p++;
        if (c == '"') {
            for (;;) {
                p = string_end(p, end);
                if (p == end) return NULL;
                if (*p == '"') { p++; break; }
                if (*p == '\\') { if (++p == end) return NULL; p++; continue; }
                p++;  /* non-ASCII (or a control character, which the decoder will refuse) */
            }
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return p;
        }
    }
    return NULL;
}

/* An object's key at p (its opening quote) and the start of its value: the byte after the colon
 * and any space, the key's content in *key and *length. NULL when the text ends first, the key
 * holds an escape (neither kube-scheduler nor the API server writes one in the keys read here)
 * or no colon follows. */
static const char *read_key(const char *p, const char *end, const char **key, Py_ssize_t *length) {
    if (p == end || *p++ != '"') return NULL;
    *key = p;
    p = string_end(p, end);
    if (p == end || *p != '"') return NULL;
    *length = p - *key;
    p = skip_space(p + 1, end);
    if (p == end || *p++ != ':') return NULL;
    return skip_space(p, end);
}

/* Checks shared by everything that reads spans: int32 pairs lying inside `text`. */
static int aligned(const Py_buffer *buffer, size_t alignment, const char *what) {
    if ((uintptr_t)buffer->buf % alignment == 0) return 1;
    PyErr_Format(PyExc_ValueError, "%s must be aligned to %zu bytes", what, alignment);
    return 0;
}

static int check_spans(const Py_buffer *text, const Py_buffer *spans, Py_ssize_t *count) {
    if (!aligned(spans, sizeof(int32_t), "spans")) return 0;
    if (spans->len % (2 * (Py_ssize_t)sizeof(int32_t)) != 0) {
        PyErr_SetString(PyExc_ValueError, "spans must hold int32 (start, end) pairs");
        return 0;
    }
    *count = spans->len / (2 * (Py_ssize_t)sizeof(int32_t));
    const int32_t *s = spans->buf;
    for (Py_ssize_t i = 0; i < *count; i++) {
        if (s[2 * i] < 1 || s[2 * i] > s[2 * i + 1] || s[2 * i + 1] >= text->len) {
            PyErr_Format(PyExc_ValueError, "span %zd lies outside the text", i);
            return 0;
        }
    }
    return 1;
}

PyDoc_STRVAR(lookup_doc,
"lookup(text, spans) -> bytes\n\n"
"The int64 slot of each name of ``spans`` (from scan(text)) in this table, -1 for a name\n"
"it does not hold.");

static PyObject *NameTable_lookup(NameTable *self, PyObject *args) {
    if (self->entries == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "NameTable was not initialised");
        return NULL;
    }
    Py_buffer text, spans;
    if (!PyArg_ParseTuple(args, "y*y*:lookup", &text, &spans)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t count;
    if (!check_spans(&text, &spans, &count)) goto out;
    result = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (result == NULL) goto out;
    int64_t *slots = (int64_t *)PyBytes_AS_STRING(result);
    const int32_t *s = spans.buf;
    const char *src = text.buf;
    for (Py_ssize_t i = 0; i < count; i++) slots[i] = table_find(self, src + s[2 * i], s[2 * i + 1] - s[2 * i]);
out:
    PyBuffer_Release(&text);
    PyBuffer_Release(&spans);
    return result;
}

static PyObject *NameTable_len_get(NameTable *self, void *closure) { return PyLong_FromSsize_t(self->size); }

static PyMethodDef NameTable_methods[] = {
    {"lookup", (PyCFunction)NameTable_lookup, METH_VARARGS, lookup_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef NameTable_getset[] = {
    {"size", (getter)NameTable_len_get, NULL, "How many names the table holds.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject NameTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "scheduler.kube._names.NameTable",
    .tp_doc = PyDoc_STR("Node name -> slot, looked up straight from JSON text."),
    .tp_basicsize = sizeof(NameTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)NameTable_init,
    .tp_dealloc = (destructor)NameTable_dealloc,
    .tp_methods = NameTable_methods,
    .tp_getset = NameTable_getset,
};

/* ------------------------------------------------------------------------------ answers */

PyDoc_STRVAR(select_doc,
"select(text, spans, positions) -> bytes\n\n"
"The JSON array of the strings at ``positions`` (int64 indices into ``spans``), in that\n"
"order, copied from ``text``.");

static PyObject *names_select(PyObject *module, PyObject *args) {
    Py_buffer text, spans, positions;
    if (!PyArg_ParseTuple(args, "y*y*y*:select", &text, &spans, &positions)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t count;
    if (!check_spans(&text, &spans, &count)) goto out;
    if (!aligned(&positions, sizeof(int64_t), "positions")) goto out;
    if (positions.len % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "positions must hold int64 values");
        goto out;
    }
    Py_ssize_t picked = positions.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *at = positions.buf;
    const int32_t *s = spans.buf;
    Py_ssize_t size = 2 + (picked ? picked - 1 : 0);
    for (Py_ssize_t i = 0; i < picked; i++) {
        if (at[i] < 0 || at[i] >= count) {
            PyErr_Format(PyExc_IndexError, "positions[%zd] = %lld is out of range", i, (long long)at[i]);
            goto out;
        }
        size += 2 + s[2 * at[i] + 1] - s[2 * at[i]];
    }
    result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) goto out;
    char *w = PyBytes_AS_STRING(result);
    const char *src = text.buf;
    *w++ = '[';
    for (Py_ssize_t i = 0; i < picked; i++) {
        if (i) *w++ = ',';
        int32_t start = s[2 * at[i]], stop = s[2 * at[i] + 1];
        *w++ = '"';
        memcpy(w, src + start, (size_t)(stop - start));
        w += stop - start;
        *w++ = '"';
    }
    *w++ = ']';
out:
    PyBuffer_Release(&text);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&positions);
    return result;
}

PyDoc_STRVAR(host_priorities_doc,
"host_priorities(text, spans, scores) -> bytes\n\n"
"kube-scheduler's HostPriorityList: ``[{\"Host\":<name>,\"Score\":<score>},...]`` for every\n"
"name of ``spans``, copied from ``text``, with its score from ``scores`` (a sequence of\n"
"int, e.g. the list an engine's prioritize returns, or a one-dimensional int64 buffer).");

/* The scores as int64, read before anything is written: reading an int that is not exactly an
 * int runs Python code (__index__), which could change the list under a kept pointer, so such
 * lists are read from a tuple copy. bool is refused (JSON would want true, not 1). */
static int64_t *read_scores(PyObject *scores, Py_ssize_t count) {
    if (PyObject_CheckBuffer(scores) && !PyBytes_Check(scores) && !PyByteArray_Check(scores)) {
        /* An engine's int64 array (numpy), read without a Python int per score. */
        Py_buffer view;
        if (PyObject_GetBuffer(scores, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
        int64_t *values = NULL;
        const char *format = view.format != NULL ? view.format : "B";
        if (format[0] == '<' || format[0] == '=' || format[0] == '@') format++;
        if (view.ndim != 1 || view.itemsize != 8 || (strcmp(format, "l") != 0 && strcmp(format, "q") != 0)) {
            PyErr_Format(PyExc_TypeError, "scores as a buffer must be one-dimensional int64, not format %s", view.format);
        } else if (view.len / 8 != count) {
            PyErr_Format(PyExc_ValueError, "scores must hold one int per name (%zd names, %zd scores)", count,
                         view.len / 8);
        } else if ((values = PyMem_Malloc((count ? (size_t)count : 1) * sizeof(int64_t))) == NULL) {
            PyErr_NoMemory();
        } else {
            memcpy(values, view.buf, (size_t)count * sizeof(int64_t));
        }
        PyBuffer_Release(&view);
        return values;
    }
    PyObject *seq = PySequence_Fast(scores, "scores must be a sequence of int");
    if (seq == NULL) return NULL;
    int exact = 1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++)
        if (!PyLong_CheckExact(PySequence_Fast_GET_ITEM(seq, i))) { exact = 0; break; }
    if (!exact) {
        PyObject *copy = PySequence_Tuple(seq);
        Py_DECREF(seq);
        if (copy == NULL) return NULL;
        seq = copy;
    }
    int64_t *values = NULL;
    if (PySequence_Fast_GET_SIZE(seq) != count) {
        PyErr_Format(PyExc_ValueError, "scores must hold one int per name (%zd names, %zd scores)",
                     count, PySequence_Fast_GET_SIZE(seq));
        goto out;
    }
    values = PyMem_Malloc((count ? (size_t)count : 1) * sizeof(int64_t));
    if (values == NULL) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (PyBool_Check(item)) {
            PyErr_Format(PyExc_TypeError, "scores[%zd] must be an int, not bool", i);
            goto fail;
        }
        long long number = PyLong_AsLongLong(item);
        if (number == -1 && PyErr_Occurred()) goto fail;
        values[i] = number;
    }
    goto out;
fail:
    PyMem_Free(values);
    values = NULL;
out:
    Py_DECREF(seq);
    return values;
}

static int decimal_length(int64_t number) {
    uint64_t magnitude = number < 0 ? (uint64_t)0 - (uint64_t)number : (uint64_t)number;
    int n = number < 0 ? 2 : 1;
    while (magnitude >= 10) { magnitude /= 10; n++; }
    return n;
}

/* The answer is sized exactly and written straight into the bytes object: a scratch buffer
 * sized for the worst case (~260 kB at 5,000 names) crossed glibc's trim threshold, so every
 * call paid for fresh pages from the kernel (4x slower than the writing itself). */
static PyObject *names_host_priorities(PyObject *module, PyObject *args) {
    static const char host[] = "{\"Host\":\"", score[] = "\",\"Score\":";
    Py_buffer text, spans;
    PyObject *score_list;
    if (!PyArg_ParseTuple(args, "y*y*O:host_priorities", &text, &spans, &score_list)) return NULL;
    PyObject *result = NULL;
    int64_t *value = NULL;
    Py_ssize_t count;
    if (!check_spans(&text, &spans, &count)) goto out;
    value = read_scores(score_list, count);
    if (value == NULL) goto out;
    const int32_t *s = spans.buf;
    Py_ssize_t size = 2 + (count ? count - 1 : 0);  /* brackets and commas */
    for (Py_ssize_t i = 0; i < count; i++)
        size += (Py_ssize_t)sizeof(host) - 1 + (s[2 * i + 1] - s[2 * i]) + (Py_ssize_t)sizeof(score) - 1
                + decimal_length(value[i]) + 1;
    result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) goto out;
    char *w = PyBytes_AS_STRING(result);
    const char *src = text.buf;
    *w++ = '[';
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i) *w++ = ',';
        memcpy(w, host, sizeof(host) - 1);
        w += sizeof(host) - 1;
        memcpy(w, src + s[2 * i], (size_t)(s[2 * i + 1] - s[2 * i]));
        w += s[2 * i + 1] - s[2 * i];
        memcpy(w, score, sizeof(score) - 1);
        w += sizeof(score) - 1;
        char digits[24];
        int n = 0;
        uint64_t magnitude = value[i] < 0 ? (uint64_t)0 - (uint64_t)value[i] : (uint64_t)value[i];
        do { digits[n++] = (char)('0' + magnitude % 10); magnitude /= 10; } while (magnitude);
        if (value[i] < 0) *w++ = '-';
        while (n) *w++ = digits[--n];
        *w++ = '}';
    }
    *w++ = ']';
    assert(w == PyBytes_AS_STRING(result) + size);
out:
    PyMem_Free(value);
    PyBuffer_Release(&text);
    PyBuffer_Release(&spans);
    return result;
}

PyDoc_STRVAR(scan_doc,
"scan(text) -> bytes | None\n\n"
"``text`` is the JSON text of an array of strings (any buffer). The int32 (start, end) byte\n"
"offsets of each string's content, quotes excluded; None when the text is not an array of\n"
"strings without escape sequences: decode it the ordinary way.");

static PyObject *names_scan(PyObject *module, PyObject *arg) {
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    int32_t *spans = NULL;
    Py_ssize_t count = 0;
    const char *start = text.buf, *end = start + text.len;
    const char *after = text.len > INT32_MAX ? NULL : parse_names(start, skip_space(start, end), end, &spans, &count);
    if (after != NULL && skip_space(after, end) == end)
        result = PyBytes_FromStringAndSize((const char *)spans, count * 2 * (Py_ssize_t)sizeof(int32_t));
    else if (!PyErr_Occurred())
        result = Py_NewRef(Py_None);
    PyMem_Free(spans);
    PyBuffer_Release(&text);
    return result;
}

PyDoc_STRVAR(split_args_doc,
"split_args(body) -> (pod_start, pod_end, spans) | None\n\n"
"kube-scheduler's ExtenderArgs with node names: an object with the keys Pod (an object),\n"
"NodeNames (an array of strings without escapes) and optionally Nodes (null), in any order.\n"
"The Pod value's byte span, and the names' spans as scan() gives them (offsets into body).\n"
"None for anything else: decode the body the ordinary way.");

static PyObject *names_split_args(PyObject *module, PyObject *arg) {
    Py_buffer body;
    if (PyObject_GetBuffer(arg, &body, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    const char *text = body.buf, *end = text + body.len, *p = text;
    const char *pod_start = NULL, *pod_end = NULL;
    int32_t *spans = NULL;
    Py_ssize_t count = 0;
    int seen_nodes = 0, seen_names = 0;
    if (body.len > INT32_MAX) goto none;
    p = skip_space(p, end);
    if (p == end || *p++ != '{') goto none;
    for (;;) {
        p = skip_space(p, end);
        const char *key;
        Py_ssize_t key_length;
        p = read_key(p, end, &key, &key_length);
        if (p == NULL) goto none;
        if (key_length == 3 && memcmp(key, "Pod", 3) == 0 && pod_start == NULL) {
            if (p == end || *p != '{') goto none;
            pod_start = p;
            p = pod_end = skip_nested(p, end);
            if (p == NULL) goto none;
        } else if (key_length == 5 && memcmp(key, "Nodes", 5) == 0 && !seen_nodes) {
            if (end - p < 4 || memcmp(p, "null", 4) != 0) goto none;  /* full Nodes: not this path */
            p += 4;
            seen_nodes = 1;
        } else if (key_length == 9 && memcmp(key, "NodeNames", 9) == 0 && !seen_names) {
            p = parse_names(text, p, end, &spans, &count);
            if (p == NULL) goto none;
            seen_names = 1;
        } else {
            goto none;  /* another key, or one twice */
        }
        p = skip_space(p, end);
        if (p == end) goto none;
        if (*p == ',') { p++; continue; }
        if (*p++ == '}') break;
        goto none;
    }
    if (skip_space(p, end) != end || pod_start == NULL || !seen_names) goto none;
    result = Py_BuildValue("(nny#)", (Py_ssize_t)(pod_start - text), (Py_ssize_t)(pod_end - text),
                           (const char *)spans, count * 2 * (Py_ssize_t)sizeof(int32_t));
    goto out;
none:
    if (!PyErr_Occurred()) result = Py_NewRef(Py_None);
out:
    PyMem_Free(spans);
    PyBuffer_Release(&body);
    return result;
}

/* ------------------------------------------------------------------------------ list pages */

/* The end of the JSON value starting at p, for a value whose content does not matter: an object
 * or array by skip_nested, a string by its closing quote, anything else (a number, true, false,
 * null) up to the next comma, bracket or space. NULL if the text ends first. */
static const char *skip_value(const char *p, const char *end) {
    if (p == end) return NULL;
    if (*p == '{' || *p == '[') return skip_nested(p, end);
    if (*p == '"') {
        p++;
        for (;;) {
            p = string_end(p, end);
            if (p == end) return NULL;
            if (*p == '"') return p + 1;
            if (*p == '\\') { if (++p == end) return NULL; }
            p++;
        }
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') p++;
    return p;
}

typedef struct {
    int64_t *spans;     /* (start, end) of each item */
    Py_ssize_t count, capacity;
    int64_t metadata_start, metadata_end;  /* -1: no metadata key */
} ListSplit;

/* Appends one span; 0 when memory ran out. Raw allocation: this runs without the GIL. */
static int add_span(ListSplit *split, int64_t start, int64_t end) {
    if (split->count == split->capacity) {
        Py_ssize_t capacity = split->capacity ? 2 * split->capacity : 256;
        int64_t *more = PyMem_RawRealloc(split->spans, 2 * (size_t)capacity * sizeof(int64_t));
        if (more == NULL) return 0;
        split->spans = more;
        split->capacity = capacity;
    }
    split->spans[2 * split->count] = start;
    split->spans[2 * split->count + 1] = end;
    split->count++;
    return 1;
}

/* The items array at p: each element an object (the API server's items are). NULL when the fast
 * path does not apply. */
static const char *split_items(const char *text, const char *p, const char *end, ListSplit *split) {
    if (end - p >= 4 && memcmp(p, "null", 4) == 0) return p + 4;
    if (p == end || *p++ != '[') return NULL;
    p = skip_space(p, end);
    if (p < end && *p == ']') return p + 1;
    for (;;) {
        if (p == end || *p != '{') return NULL;
        const char *item_end = skip_nested(p, end);
        if (item_end == NULL || !add_span(split, p - text, item_end - text)) return NULL;
        p = skip_space(item_end, end);
        if (p == end) return NULL;
        if (*p == ',') { p = skip_space(p + 1, end); continue; }
        if (*p == ']') return p + 1;
        return NULL;
    }
}

/* A list response's top-level object: the spans of its items and of its metadata. 0 when the
 * fast path does not apply (or memory ran out). Touches no Python object. */
static int split_list_text(const char *text, const char *end, ListSplit *split) {
    const char *p = skip_space(text, end);
    int seen_items = 0;
    if (p == end || *p++ != '{') return 0;
    p = skip_space(p, end);
    if (p < end && *p == '}') return skip_space(p + 1, end) == end;
    for (;;) {
        const char *key;
        Py_ssize_t key_length;
        p = read_key(p, end, &key, &key_length);
        if (p == NULL) return 0;
        if (key_length == 5 && memcmp(key, "items", 5) == 0) {
            if (seen_items) return 0;
            seen_items = 1;
            p = split_items(text, p, end, split);
        } else if (key_length == 8 && memcmp(key, "metadata", 8) == 0) {
            if (split->metadata_start >= 0 || p == end || *p != '{') return 0;
            split->metadata_start = p - text;
            p = skip_nested(p, end);
            if (p != NULL) split->metadata_end = p - text;
        } else {
            p = skip_value(p, end);
        }
        if (p == NULL) return 0;
        p = skip_space(p, end);
        if (p == end) return 0;
        if (*p == ',') { p = skip_space(p + 1, end); continue; }
        if (*p++ != '}') return 0;
        return skip_space(p, end) == end;
    }
}

PyDoc_STRVAR(split_list_doc,
"split_list(body) -> (metadata_start, metadata_end, spans) | None\n\n"
"A list response of the API server (an object whose ``items`` is an array of objects, or null),\n"
"split without holding the GIL: the byte span of its ``metadata`` object ((-1, -1) without one)\n"
"and the int64 (start, end) byte offsets of each item. Brackets are matched outside strings and\n"
"nothing else is checked: each span is JSON only once msgspec decodes it. None when the text is\n"
"not such an object: decode it the ordinary way, which names what is wrong.");

static PyObject *names_split_list(PyObject *module, PyObject *arg) {
    Py_buffer body;
    if (PyObject_GetBuffer(arg, &body, PyBUF_SIMPLE) < 0) return NULL;
    ListSplit split = {NULL, 0, 0, -1, -1};
    int applies;
    /* A page of 500 pods is ~1 MB, ~1-2 ms to scan: the verbs' thread runs meanwhile. The buffer
     * stays valid: this call holds its reference, and bytes do not move. */
    Py_BEGIN_ALLOW_THREADS
    applies = split_list_text(body.buf, (const char *)body.buf + body.len, &split);
    Py_END_ALLOW_THREADS
    PyObject *result;
    if (applies)
        result = Py_BuildValue("(LLy#)", (long long)split.metadata_start, (long long)split.metadata_end,
                               split.spans != NULL ? (const char *)split.spans : "",  /* y# of NULL is None */
                               split.count * 2 * (Py_ssize_t)sizeof(int64_t));
    else
        result = Py_NewRef(Py_None);
    PyMem_RawFree(split.spans);
    PyBuffer_Release(&body);
    return result;
}

/* ------------------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"scan", names_scan, METH_O, scan_doc},
    {"split_args", names_split_args, METH_O, split_args_doc},
    {"select", names_select, METH_VARARGS, select_doc},
    {"host_priorities", names_host_priorities, METH_VARARGS, host_priorities_doc},
    {"split_list", names_split_list, METH_O, split_list_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef names_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "scheduler.kube._names",
    .m_doc = "Node names resolved and written straight from kube-scheduler's JSON (see names.py), and the API server's list pages split (lists.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__names(void) {
    init_string_stop();
    if (PyType_Ready(&NameTableType) < 0) return NULL;
    PyObject *module = PyModule_Create(&names_module);
    if (module == NULL) return NULL;
    Py_INCREF(&NameTableType);
    if (PyModule_AddObject(module, "NameTable", (PyObject *)&NameTableType) < 0) {
        Py_DECREF(&NameTableType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
