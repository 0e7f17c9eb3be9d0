# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled NDJSON scanner for ``records*.jsonl`` pieces (docs/development/native.md, "The records scanner"), and
the one-pass decode of schema-3 chunk times the report's second pass uses (:func:`decode_us_times`).

:func:`scan` parses a piece of whole JSON lines into the columns of a schema and returns the frame
``pl.read_ndjson(io.BytesIO(text), schema=schema)`` returns for it (equal: values, nulls and dtypes), faster because
it parses only the wanted keys' values and skips the others (the chunk lists a scalar read does not need) with a
validating, bracket- and quote-aware skip. The scan itself runs without the GIL, so two parser threads use two
cores; the columns are handed to polars through the Arrow C data interface (no copy on this side).

Column kinds (:data:`KINDS`): ``Int64``, ``Float64``, ``Boolean``, ``String``, the histogram struct
(``harness.report.frame.HIST_DTYPE``: ``n``, ``sum``, ``min``, ``max``, and ``buckets`` kept as the JSON text polars
re-serializes an object to: ``{"k": v, "k2": v2}``), ``List(Int64)`` and ``List(Float64)``.

It accepts strict JSON (RFC 8259) lines, each one object, with polars' readings: a missing key or a JSON ``null`` is
null, the first of duplicate keys wins, unknown keys are skipped (validated), an integer in a Float64 column is
converted as polars converts it (``-0`` reads 0.0), doubles are parsed with correct rounding (exact for up to 15
significant digits and powers of ten up to 22, else C ``strtod_l`` in the C locale). Whatever it does not read
exactly as polars does raises :class:`Unsupported` (a line that is not an object or not valid JSON, a value of
another JSON type than its column's, an integer out of range, a string with a lone surrogate, an escaped key,
nesting deeper than 64, a ``buckets`` object other than flat integer counts, a double out of range): the caller
then parses the piece with polars, whose errors are the reference (``harness.report.frame._parse``).
"""

from libc.math cimport isinf, isnan
from libc.stdint cimport int16_t, int32_t, int64_t, uint64_t, uint8_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memcpy, memchr, memcmp, memset

import polars as _pl

cdef extern from *:
    """
    #include <locale.h>
    #include <stdlib.h>
    #include <stdint.h>
    #include <string.h>

    static locale_t fr_c_locale = (locale_t)0;
    static int fr_init_locale(void) {
        if (!fr_c_locale) fr_c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        return fr_c_locale != (locale_t)0;
    }
    static double fr_strtod(const unsigned char* s, const unsigned char** end) {
        char* e = NULL;
        double v = strtod_l((const char*)s, &e, fr_c_locale);
        *end = (const unsigned char*)e;
        return v;
    }

    /* The Arrow C data interface (https://arrow.apache.org/docs/format/CDataInterface.html). */
    struct ArrowSchema {
        const char* format; const char* name; const char* metadata; int64_t flags; int64_t n_children;
        struct ArrowSchema** children; struct ArrowSchema* dictionary;
        void (*release)(struct ArrowSchema*); void* private_data;
    };
    struct ArrowArray {
        int64_t length; int64_t null_count; int64_t offset; int64_t n_buffers; int64_t n_children;
        const void** buffers; struct ArrowArray** children; struct ArrowArray* dictionary;
        void (*release)(struct ArrowArray*); void* private_data;
    };

    static void fr_schema_release(struct ArrowSchema* s) {
        int64_t i;
        if (s == NULL || s->release == NULL) return;
        for (i = 0; i < s->n_children; i++) {
            struct ArrowSchema* c = s->children[i];
            if (c == NULL) continue;
            if (c->release) c->release(c);
            free(c);
        }
        free(s->children);
        free((void*)s->name);
        s->release = NULL;
    }

    /* A schema node (format: a static string; name copied). NULL when out of memory. */
    static struct ArrowSchema* fr_schema_new(const char* format, const char* name, int64_t n_children) {
        struct ArrowSchema* s = (struct ArrowSchema*)calloc(1, sizeof(struct ArrowSchema));
        if (!s) return NULL;
        s->format = format;
        s->name = strdup(name);
        s->flags = 2;  /* ARROW_FLAG_NULLABLE */
        s->n_children = n_children;
        s->children = (struct ArrowSchema**)calloc(n_children ? n_children : 1, sizeof(struct ArrowSchema*));
        s->release = fr_schema_release;
        if (!s->name || !s->children) { free((void*)s->name); free(s->children); free(s); return NULL; }
        return s;
    }

    static void fr_array_release(struct ArrowArray* a) {
        int64_t i;
        if (a == NULL || a->release == NULL) return;
        for (i = 0; i < a->n_children; i++) {
            struct ArrowArray* c = a->children[i];
            if (c == NULL) continue;
            if (c->release) c->release(c);
            free(c);
        }
        free(a->children);
        for (i = 0; i < a->n_buffers; i++) free((void*)a->buffers[i]);
        free(a->buffers);
        a->release = NULL;
    }

    /* An array node owning its buffers (freed by its release). NULL when out of memory. */
    static struct ArrowArray* fr_array_new(int64_t length, int64_t null_count, int64_t n_buffers,
                                           int64_t n_children) {
        struct ArrowArray* a = (struct ArrowArray*)calloc(1, sizeof(struct ArrowArray));
        if (!a) return NULL;
        a->length = length;
        a->null_count = null_count;
        a->n_buffers = n_buffers;
        a->n_children = n_children;
        a->buffers = (const void**)calloc(n_buffers ? n_buffers : 1, sizeof(void*));
        a->children = (struct ArrowArray**)calloc(n_children ? n_children : 1, sizeof(struct ArrowArray*));
        a->release = fr_array_release;
        if (!a->buffers || !a->children) { free(a->buffers); free(a->children); free(a); return NULL; }
        return a;
    }

    static void fr_capsule_schema_del(PyObject* cap) {
        struct ArrowSchema* s = (struct ArrowSchema*)PyCapsule_GetPointer(cap, "arrow_schema");
        if (s) { if (s->release) s->release(s); free(s); }
    }
    static void fr_capsule_array_del(PyObject* cap) {
        struct ArrowArray* a = (struct ArrowArray*)PyCapsule_GetPointer(cap, "arrow_array");
        if (a) { if (a->release) a->release(a); free(a); }
    }
    static PyObject* fr_schema_capsule(struct ArrowSchema* s) {
        return PyCapsule_New(s, "arrow_schema", fr_capsule_schema_del);
    }
    static PyObject* fr_array_capsule(struct ArrowArray* a) {
        return PyCapsule_New(a, "arrow_array", fr_capsule_array_del);
    }
    """
    struct ArrowSchema:
        const char* format
        const char* name
        int64_t n_children
        ArrowSchema** children
        void (*release)(ArrowSchema*)
    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArray** children
        void (*release)(ArrowArray*)
    int fr_init_locale()
    double fr_strtod(const unsigned char* s, const unsigned char** end) nogil
    ArrowSchema* fr_schema_new(const char* format, const char* name, int64_t n_children)
    ArrowArray* fr_array_new(int64_t length, int64_t null_count, int64_t n_buffers, int64_t n_children)
    object fr_schema_capsule(ArrowSchema* s)
    object fr_array_capsule(ArrowArray* a)

if not fr_init_locale():
    raise ImportError("harness._fastrecords: no C locale for strtod_l")


class Unsupported(ValueError):
    """The piece holds something :func:`scan` does not read exactly as polars does (invalid JSON included): parse
    it with polars instead. The message names the reason and the byte offset in the piece."""


ctypedef const unsigned char* cp

# column kinds
cdef enum:
    K_INT = 0
    K_FLOAT = 1
    K_BOOL = 2
    K_STR = 3
    K_HIST = 4
    K_LINT = 5
    K_LFLOAT = 6
    K_BUCKETS = 7

# outcomes of the C-level scan
cdef enum:
    E_OK = 0
    E_SYNTAX = 1       # not valid JSON as polars reads it (or not one object a line)
    E_TYPE = 2         # a wanted value of another JSON type than its column's
    E_RANGE = 3        # an integer out of Int64 range, a double out of range
    E_UNSUPPORTED = 4  # valid, but not read here (escaped key, lone surrogate, deep nesting, odd buckets, ...)
    E_NOMEM = 5

_ERRORS = ("ok", "not valid JSON, or not one object a line", "a value of another JSON type than its column's",
           "a number out of its column's range",
           "a form this scanner does not read (escaped key, lone surrogate, deep nesting, odd buckets)",
           "out of memory")

cdef enum:
    MAX_DEPTH = 64   # deepest nesting of a skipped value (polars' own limit is deeper; beyond it: polars)
    HASH_SIZE = 512  # slots of the key table (a power of two, over twice the columns)

cdef double _POW10[23]
cdef int _k
_POW10[0] = 1.0
for _k in range(1, 23):
    _POW10[_k] = _POW10[_k - 1] * 10.0  # exact: 10^22 < 2^53 * 2^22... all of 1e0..1e22 are exact doubles


cdef struct Buf:
    unsigned char* p
    size_t len
    size_t cap


cdef struct Col:
    int kind
    int64_t seen          # row whose value this column has (first of duplicate keys wins)
    uint8_t* valid        # one byte a row
    unsigned char* vals   # 8 bytes a row (Int64, Float64), 1 (Boolean), or the row ends (int64, rows + 1)
    Buf data              # string bytes, or list values (int64 / double)
    int sub               # K_HIST: index of its first field column (n, sum, min, max, buckets)
    const unsigned char* name
    size_t name_len


cdef struct Scan:
    Col* cols
    int ncols             # all columns: the top-level ones, then the fields of each histogram
    int ntop
    int16_t table[HASH_SIZE]
    int64_t rows
    int64_t cap
    int err
    size_t errpos
    cp base


cdef inline bint buf_reserve(Buf* b, size_t extra) noexcept nogil:
    cdef size_t need = b.len + extra
    cdef size_t cap
    cdef unsigned char* q
    if need <= b.cap:
        return True
    cap = b.cap * 2 if b.cap else 4096
    while cap < need:
        cap *= 2
    q = <unsigned char*>realloc(b.p, cap)
    if q == NULL:
        return False
    b.p = q
    b.cap = cap
    return True


cdef inline bint buf_put(Buf* b, const void* src, size_t n) noexcept nogil:
    if not buf_reserve(b, n):
        return False
    memcpy(b.p + b.len, src, n)
    b.len += n
    return True


cdef inline cp fail(Scan* s, cp p, int code) noexcept nogil:
    if s.err == E_OK:
        s.err = code
        s.errpos = <size_t>(p - s.base) if p != NULL else 0
    return NULL


cdef inline cp skip_ws(cp p, cp end) noexcept nogil:
    """Whitespace inside a record: space, tab, CR (a newline ends the line, as polars splits lines)."""
    while p < end and (p[0] == 32 or p[0] == 9 or p[0] == 13):
        p += 1
    return p


cdef inline int hexval(unsigned char c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef inline int hex4(cp p, cp end) noexcept nogil:
    cdef int v = 0, h, i
    if end - p < 4:
        return -1
    for i in range(4):
        h = hexval(p[i])
        if h < 0:
            return -1
        v = (v << 4) | h
    return v


cdef inline cp utf8_seq(cp p, cp end) noexcept nogil:
    """The end of the (strictly valid) UTF-8 sequence starting with the byte >= 0x80 at ``p``, or NULL."""
    cdef unsigned char c = p[0]
    cdef int n
    cdef unsigned char lo = 0x80, hi = 0xBF
    if 0xC2 <= c <= 0xDF:
        n = 1
    elif c == 0xE0:
        n = 2
        lo = 0xA0
    elif 0xE1 <= c <= 0xEC or c == 0xEE or c == 0xEF:
        n = 2
    elif c == 0xED:
        n = 2
        hi = 0x9F
    elif c == 0xF0:
        n = 3
        lo = 0x90
    elif 0xF1 <= c <= 0xF3:
        n = 3
    elif c == 0xF4:
        n = 3
        hi = 0x8F
    else:
        return NULL
    if end - p <= n:
        return NULL
    if p[1] < lo or p[1] > hi:
        return NULL
    if n >= 2 and (p[2] & 0xC0) != 0x80:
        return NULL
    if n == 3 and (p[3] & 0xC0) != 0x80:
        return NULL
    return p + 1 + n


cdef inline void put_utf8(unsigned char* o, int* n, unsigned int cp_) noexcept nogil:
    if cp_ < 0x80:
        o[0] = cp_
        n[0] = 1
    elif cp_ < 0x800:
        o[0] = 0xC0 | (cp_ >> 6)
        o[1] = 0x80 | (cp_ & 0x3F)
        n[0] = 2
    elif cp_ < 0x10000:
        o[0] = 0xE0 | (cp_ >> 12)
        o[1] = 0x80 | ((cp_ >> 6) & 0x3F)
        o[2] = 0x80 | (cp_ & 0x3F)
        n[0] = 3
    else:
        o[0] = 0xF0 | (cp_ >> 18)
        o[1] = 0x80 | ((cp_ >> 12) & 0x3F)
        o[2] = 0x80 | ((cp_ >> 6) & 0x3F)
        o[3] = 0x80 | (cp_ & 0x3F)
        n[0] = 4


cdef cp scan_string(Scan* s, cp p, cp end, Buf* out) noexcept nogil:
    """``p`` just after an opening quote: validate the string (and append its unescaped UTF-8 to ``out`` unless
    NULL); return the position after the closing quote, or NULL (``s.err`` set)."""
    cdef cp run = p
    cdef cp q
    cdef unsigned char c
    cdef int u, u2, n
    cdef unsigned int code
    cdef unsigned char enc[4]
    while p < end:
        c = p[0]
        if c == 34:  # "
            if out != NULL and p > run and not buf_put(out, run, p - run):
                return fail(s, p, E_NOMEM)
            return p + 1
        if c == 92:  # backslash
            if out != NULL and p > run and not buf_put(out, run, p - run):
                return fail(s, p, E_NOMEM)
            if p + 1 >= end:
                return fail(s, p, E_SYNTAX)
            c = p[1]
            n = 1
            if c == 34 or c == 92 or c == 47:
                enc[0] = c
            elif c == 98:
                enc[0] = 8
            elif c == 102:
                enc[0] = 12
            elif c == 110:
                enc[0] = 10
            elif c == 114:
                enc[0] = 13
            elif c == 116:
                enc[0] = 9
            elif c == 117:  # \uXXXX
                u = hex4(p + 2, end)
                if u < 0:
                    return fail(s, p, E_SYNTAX)
                if 0xDC00 <= u <= 0xDFFF:
                    return fail(s, p, E_UNSUPPORTED)  # a lone low surrogate (polars refuses it)
                if 0xD800 <= u <= 0xDBFF:
                    if end - p < 12 or p[6] != 92 or p[7] != 117:
                        return fail(s, p, E_UNSUPPORTED)  # a lone high surrogate (polars reads it oddly)
                    u2 = hex4(p + 8, end)
                    if u2 < 0xDC00 or u2 > 0xDFFF:
                        return fail(s, p, E_UNSUPPORTED)
                    code = 0x10000 + ((<unsigned int>(u - 0xD800)) << 10) + <unsigned int>(u2 - 0xDC00)
                    p += 6
                else:
                    code = <unsigned int>u
                put_utf8(enc, &n, code)
                p += 4
            else:
                return fail(s, p, E_SYNTAX)
            p += 2
            if out != NULL and not buf_put(out, enc, n):
                return fail(s, p, E_NOMEM)
            run = p
            continue
        if c < 32:
            return fail(s, p, E_SYNTAX)  # a raw control character
        if c >= 0x80:
            q = utf8_seq(p, end)
            if q == NULL:
                return fail(s, p, E_SYNTAX)
            p = q
            continue
        p += 1
    return fail(s, p, E_SYNTAX)  # unterminated


cdef struct Num:
    bint neg
    bint is_int       # no fraction, no exponent
    bint exact        # every significant digit is in ``w`` (at most 19)
    uint64_t w        # significant digits
    int64_t e10       # value = w * 10^e10 (when exact)


cdef inline cp scan_number(Scan* s, cp p, cp end, Num* n) noexcept nogil:
    """Validate the JSON number at ``p`` and decompose it; return the position after it, or NULL."""
    cdef uint64_t w = 0
    cdef int digits = 0
    cdef int64_t e10 = 0, ex = 0
    cdef bint eneg = False
    cdef unsigned int d
    n.neg = False
    n.is_int = True
    n.exact = True
    if p < end and p[0] == 45:  # -
        n.neg = True
        p += 1
    if p >= end:
        return fail(s, p, E_SYNTAX)
    if p[0] == 48:  # 0: no digit may follow
        p += 1
        if p < end and 48 <= p[0] <= 57:
            return fail(s, p, E_SYNTAX)
    elif 49 <= p[0] <= 57:
        while p < end:
            d = p[0] - 48
            if d > 9:
                break
            if digits < 19:
                w = w * 10 + d
                digits += 1
            else:
                n.exact = False
                e10 += 1
            p += 1
    else:
        return fail(s, p, E_SYNTAX)
    if p < end and p[0] == 46:  # .
        n.is_int = False
        p += 1
        if p >= end or not (48 <= p[0] <= 57):
            return fail(s, p, E_SYNTAX)
        while p < end:
            d = p[0] - 48
            if d > 9:
                break
            if w == 0 and d == 0:
                e10 -= 1  # a leading zero of the fraction: not significant
            elif digits < 19:
                w = w * 10 + d
                digits += 1
                e10 -= 1
            else:
                n.exact = False
            p += 1
    if p < end and (p[0] == 101 or p[0] == 69):  # e E
        n.is_int = False
        p += 1
        if p < end and (p[0] == 43 or p[0] == 45):
            eneg = p[0] == 45
            p += 1
        if p >= end or not (48 <= p[0] <= 57):
            return fail(s, p, E_SYNTAX)
        while p < end:
            d = p[0] - 48
            if d > 9:
                break
            if ex < 100000:
                ex = ex * 10 + d
            p += 1
        e10 += -ex if eneg else ex
    n.w = w
    n.e10 = e10
    return p


cdef inline bint num_double(Num* n, cp start, cp stop, double* out) noexcept nogil:
    """The double polars reads for the number spanning ``[start, stop)``; False when it is out of range (polars
    refuses it) or an integer polars converts otherwise than by rounding (beyond 19 digits)."""
    cdef double v
    cdef cp e
    if n.is_int and n.exact:  # polars reads an integer as i64/u64 and converts it: round to nearest
        if n.neg:
            if n.w > 9223372036854775808ULL:
                return False
            if n.w == 0:
                out[0] = 0.0  # "-0" reads 0.0
            else:
                out[0] = -(<double>n.w)
        else:
            out[0] = <double>n.w
        return True
    if n.exact and n.w <= 9007199254740992ULL and -22 <= n.e10 <= 22:  # both exact: one rounding (Clinger)
        v = <double>n.w
        if n.e10 < 0:
            v = v / _POW10[-n.e10]
        else:
            v = v * _POW10[n.e10]
        out[0] = -v if n.neg else v
        return True
    if n.is_int:
        return False  # more than 19 digits: polars' own conversion, not checked here
    v = fr_strtod(start, &e)
    if e != stop or isnan(v) or isinf(v):
        return False
    out[0] = v
    return True


cdef inline cp skip_scalar_number(Scan* s, cp p, cp end) noexcept nogil:
    """Validate (and drop) a number; a double polars would refuse (out of range) is :data:`E_RANGE`."""
    cdef Num n
    cdef double v
    cdef cp q = scan_number(s, p, end, &n)
    if q == NULL:
        return NULL
    if n.is_int:
        if not n.exact and n.e10 >= 20:  # 39 digits or more: polars refuses an integer outside i128; it decides
            return fail(s, p, E_RANGE)
    elif not (n.exact and n.e10 >= -300 and n.e10 <= 280):  # else it cannot overflow
        if not num_double(&n, p, q, &v):
            return fail(s, p, E_RANGE)
    return q


cdef inline cp skip_literal(Scan* s, cp p, cp end) noexcept nogil:
    if end - p >= 4 and memcmp(p, b"true", 4) == 0:
        return p + 4
    if end - p >= 5 and memcmp(p, b"false", 5) == 0:
        return p + 5
    if end - p >= 4 and memcmp(p, b"null", 4) == 0:
        return p + 4
    return fail(s, p, E_SYNTAX)


cdef inline bint skip_int_list(cp* at) noexcept nogil:
    """Skip a list of plain integers (at most 18 digits each, comma-separated, no whitespace): ``at[0]`` just after
    the ``[``; True with ``at[0]`` after the ``]``, or False (``at[0]`` unchanged: the full skip reads it). Relies on
    the NUL after the bytes object's end."""
    cdef cp p = at[0]
    cdef int nd
    while True:
        if p[0] == 45:
            p += 1
        if p[0] == 48:
            p += 1
        elif <unsigned int>(p[0] - 49) <= 8:
            p += 1
            nd = 1
            while <unsigned int>(p[0] - 48) <= 9:
                p += 1
                nd += 1
            if nd > 18:
                return False
        else:
            return False
        if p[0] == 44:
            p += 1
        elif p[0] == 93:
            at[0] = p + 1
            return True
        else:
            return False


cdef cp skip_value(Scan* s, cp p, cp end) noexcept nogil:
    """Validate (and drop) the JSON value at ``p`` (no newline inside); return the position after it, or NULL."""
    cdef unsigned char stack[MAX_DEPTH]
    cdef int sp = 0
    cdef unsigned char c
    while True:
        # at the start of a value
        if p >= end:
            return fail(s, p, E_SYNTAX)
        c = p[0]
        if c == 123:  # {
            p = skip_ws(p + 1, end)
            if p < end and p[0] == 125:
                p += 1
            else:
                if sp == MAX_DEPTH:
                    return fail(s, p, E_UNSUPPORTED)
                stack[sp] = 123
                sp += 1
                if p >= end or p[0] != 34:
                    return fail(s, p, E_SYNTAX)
                p = scan_string(s, p + 1, end, NULL)
                if p == NULL:
                    return NULL
                p = skip_ws(p, end)
                if p >= end or p[0] != 58:
                    return fail(s, p, E_SYNTAX)
                p = skip_ws(p + 1, end)
                continue
        elif c == 91:  # [
            p = skip_ws(p + 1, end)
            if p < end and p[0] == 93:
                p += 1
            elif skip_int_list(&p):
                pass  # a list of plain integers, skipped: p after its ]
            else:
                if sp == MAX_DEPTH:
                    return fail(s, p, E_UNSUPPORTED)
                stack[sp] = 91
                sp += 1
                continue
        elif c == 34:
            p = scan_string(s, p + 1, end, NULL)
        elif c == 45 or 48 <= c <= 57:
            p = skip_scalar_number(s, p, end)
        else:
            p = skip_literal(s, p, end)
        if p == NULL:
            return NULL
        # after a value: close containers, or a comma and the next value
        while True:
            if sp == 0:
                return p
            p = skip_ws(p, end)
            if p >= end:
                return fail(s, p, E_SYNTAX)
            c = p[0]
            if c == 44:  # ,
                p = skip_ws(p + 1, end)
                if stack[sp - 1] == 123:
                    if p >= end or p[0] != 34:
                        return fail(s, p, E_SYNTAX)
                    p = scan_string(s, p + 1, end, NULL)
                    if p == NULL:
                        return NULL
                    p = skip_ws(p, end)
                    if p >= end or p[0] != 58:
                        return fail(s, p, E_SYNTAX)
                    p = skip_ws(p + 1, end)
                break
            if (c == 93 and stack[sp - 1] == 91) or (c == 125 and stack[sp - 1] == 123):
                sp -= 1
                p += 1
                continue
            return fail(s, p, E_SYNTAX)


cdef inline cp parse_null_or(Scan* s, cp p, cp end, bint* is_null) noexcept nogil:
    if p[0] == 110:  # n
        if end - p >= 4 and memcmp(p, b"null", 4) == 0:
            is_null[0] = True
            return p + 4
        return fail(s, p, E_SYNTAX)
    is_null[0] = False
    return p


cdef inline cp expect_number(Scan* s, cp p, cp end, Num* n) noexcept nogil:
    """:func:`scan_number` at a value its column wants as a number: another JSON type is :data:`E_TYPE`."""
    if not (p[0] == 45 or 48 <= p[0] <= 57):
        return fail(s, p, E_TYPE)
    return scan_number(s, p, end, n)


cdef inline cp parse_int(Scan* s, cp p, cp end, int64_t* out) noexcept nogil:
    cdef Num n
    cdef cp q = expect_number(s, p, end, &n)
    if q == NULL:
        return NULL
    if not n.is_int:
        return fail(s, p, E_TYPE)
    if not n.exact or n.w > (9223372036854775808ULL if n.neg else 9223372036854775807ULL):
        return fail(s, p, E_RANGE)
    out[0] = -<int64_t>(n.w - 1) - 1 if (n.neg and n.w) else <int64_t>n.w
    return q


cdef inline cp parse_float(Scan* s, cp p, cp end, double* out) noexcept nogil:
    cdef Num n
    cdef cp q = expect_number(s, p, end, &n)
    if q == NULL:
        return NULL
    if not num_double(&n, p, q, out):
        return fail(s, p, E_RANGE)
    return q


cdef cp parse_list(Scan* s, Col* c, cp p, cp end) noexcept nogil:
    """A JSON list of numbers into ``c.data`` (int64 for K_LINT, double for K_LFLOAT); ``p`` at ``[``."""
    cdef int64_t iv
    cdef double dv
    cdef bint is_int = c.kind == K_LINT
    cdef cp q
    cdef uint64_t w
    cdef unsigned int d
    cdef int nd
    p = skip_ws(p + 1, end)
    if p < end and p[0] == 93:
        return p + 1
    while True:
        if p >= end:
            return fail(s, p, E_SYNTAX)
        if not buf_reserve(&c.data, 8):
            return fail(s, p, E_NOMEM)
        # fast path: an integer of at most 15 digits followed by a comma or the closing bracket (the bytes object
        # ends with a NUL, so reading p[0] at ``end`` is safe and matches nothing); anything else: the full parse
        q = p + 1 if p[0] == 45 else p
        d = q[0] - 48
        if d <= 9:
            w = d
            q += 1
            if d != 0:
                nd = 1
                while nd < 15:
                    d = q[0] - 48
                    if d > 9:
                        break
                    w = w * 10 + d
                    q += 1
                    nd += 1
            if q[0] == 44 or q[0] == 93:
                if is_int:
                    (<int64_t*>(c.data.p + c.data.len))[0] = -<int64_t>w if p[0] == 45 else <int64_t>w
                else:  # "-0" reads 0.0, as polars reads it
                    (<double*>(c.data.p + c.data.len))[0] = -<double>w if (p[0] == 45 and w) else <double>w
                c.data.len += 8
                p = q + 1
                if q[0] == 93:
                    return p
                if p[0] == 32 or p[0] == 9 or p[0] == 13:
                    p = skip_ws(p, end)
                continue
        if is_int:
            p = parse_int(s, p, end, &iv)
            if p == NULL:
                return NULL
            (<int64_t*>(c.data.p + c.data.len))[0] = iv
        else:
            p = parse_float(s, p, end, &dv)
            if p == NULL:
                return NULL
            (<double*>(c.data.p + c.data.len))[0] = dv
        c.data.len += 8
        p = skip_ws(p, end)
        if p >= end:
            return fail(s, p, E_SYNTAX)
        if p[0] == 44:
            p = skip_ws(p + 1, end)
            continue
        if p[0] == 93:
            return p + 1
        return fail(s, p, E_SYNTAX)


cdef cp parse_buckets(Scan* s, Col* c, cp p, cp end) noexcept nogil:
    """A histogram's ``buckets`` object as polars re-serializes it (``{"k": 12, "k2": 3}``, keys in the written
    order), when every key is printable ASCII without escapes and every value an integer of at most 18 digits (other
    than ``-0``); ``p`` at ``{``."""
    cdef cp k
    cdef cp q
    cdef Num n
    cdef bint first = True
    if not buf_put(&c.data, b"{", 1):
        return fail(s, p, E_NOMEM)
    p = skip_ws(p + 1, end)
    if p < end and p[0] == 125:
        if not buf_put(&c.data, b"}", 1):
            return fail(s, p, E_NOMEM)
        return p + 1
    while True:
        if p >= end or p[0] != 34:
            return fail(s, p, E_SYNTAX)
        k = p + 1
        q = k
        while q < end and 32 <= q[0] <= 127 and q[0] != 34 and q[0] != 92:
            q += 1
        if q >= end or q[0] != 34:
            return fail(s, p, E_UNSUPPORTED)
        if not first and not buf_put(&c.data, b", ", 2):
            return fail(s, p, E_NOMEM)
        first = False
        if not buf_put(&c.data, k - 1, q + 1 - (k - 1)) or not buf_put(&c.data, b": ", 2):
            return fail(s, p, E_NOMEM)
        p = skip_ws(q + 1, end)
        if p >= end or p[0] != 58:
            return fail(s, p, E_SYNTAX)
        p = skip_ws(p + 1, end)
        if p >= end or not (p[0] == 45 or 48 <= p[0] <= 57):
            return fail(s, p, E_UNSUPPORTED)
        q = scan_number(s, p, end, &n)
        if q == NULL:
            return NULL
        if not n.is_int or not n.exact or q - p > 18 or (n.neg and n.w == 0):
            return fail(s, p, E_UNSUPPORTED)
        if not buf_put(&c.data, p, q - p):
            return fail(s, p, E_NOMEM)
        p = skip_ws(q, end)
        if p >= end:
            return fail(s, p, E_SYNTAX)
        if p[0] == 44:
            p = skip_ws(p + 1, end)
            continue
        if p[0] == 125:
            if not buf_put(&c.data, b"}", 1):
                return fail(s, p, E_NOMEM)
            return p + 1
        return fail(s, p, E_SYNTAX)


cdef cp parse_value(Scan* s, int ci, cp p, cp end, int64_t row) noexcept nogil:
    """The value at ``p`` into column ``ci`` at ``row``; return the position after it, or NULL."""
    cdef Col* c = &s.cols[ci]
    cdef bint is_null
    cdef int64_t iv
    cdef double dv
    if p >= end:
        return fail(s, p, E_SYNTAX)
    c.seen = row
    p = parse_null_or(s, p, end, &is_null)
    if p == NULL or is_null:
        return p
    cdef int kind = c.kind
    if kind == K_INT:
        p = parse_int(s, p, end, &iv)
        if p != NULL:
            (<int64_t*>c.vals)[row] = iv
    elif kind == K_FLOAT:
        p = parse_float(s, p, end, &dv)
        if p != NULL:
            (<double*>c.vals)[row] = dv
    elif kind == K_BOOL:
        if end - p >= 4 and memcmp(p, b"true", 4) == 0:
            c.vals[row] = 1
            p += 4
        elif end - p >= 5 and memcmp(p, b"false", 5) == 0:
            p += 5
        else:
            return fail(s, p, E_TYPE)
    elif kind == K_STR:
        if p[0] != 34:
            return fail(s, p, E_TYPE)  # polars writes a number/bool/list as its JSON text: not done here
        p = scan_string(s, p + 1, end, &c.data)
    elif kind == K_BUCKETS:
        if p[0] == 34:
            p = scan_string(s, p + 1, end, &c.data)
        elif p[0] == 123:
            p = parse_buckets(s, c, p, end)
        else:
            return fail(s, p, E_UNSUPPORTED)
    elif kind == K_LINT or kind == K_LFLOAT:
        if p[0] != 91:
            return fail(s, p, E_TYPE)
        p = parse_list(s, c, p, end)
    elif kind == K_HIST:
        if p[0] != 123:
            return fail(s, p, E_TYPE)
        p = parse_hist(s, c, p, end, row)
    if p != NULL:
        c.valid[row] = 1
    return p


cdef int hist_field(cp k, size_t n) noexcept nogil:
    if n == 1 and k[0] == 110:
        return 0
    if n == 3:
        if memcmp(k, b"sum", 3) == 0:
            return 1
        if memcmp(k, b"min", 3) == 0:
            return 2
        if memcmp(k, b"max", 3) == 0:
            return 3
    if n == 7 and memcmp(k, b"buckets", 7) == 0:
        return 4
    return -1


cdef cp parse_hist(Scan* s, Col* c, cp p, cp end, int64_t row) noexcept nogil:
    """A histogram object into the struct's field columns; ``p`` at ``{``."""
    cdef cp k
    cdef cp q
    cdef int f
    p = skip_ws(p + 1, end)
    if p < end and p[0] == 125:
        return p + 1
    while True:
        if p >= end or p[0] != 34:
            return fail(s, p, E_SYNTAX)
        k = p + 1
        q = k
        while q < end and q[0] != 34 and q[0] != 92 and 32 <= q[0] < 128:
            q += 1
        if q >= end or q[0] != 34:
            return fail(s, p, E_UNSUPPORTED)  # an escaped or non-ASCII key
        f = hist_field(k, q - k)
        p = skip_ws(q + 1, end)
        if p >= end or p[0] != 58:
            return fail(s, p, E_SYNTAX)
        p = skip_ws(p + 1, end)
        if f >= 0 and s.cols[c.sub + f].seen != row:
            p = parse_value(s, c.sub + f, p, end, row)
        else:
            p = skip_value(s, p, end)
        if p == NULL:
            return NULL
        p = skip_ws(p, end)
        if p >= end:
            return fail(s, p, E_SYNTAX)
        if p[0] == 44:
            p = skip_ws(p + 1, end)
            continue
        if p[0] == 125:
            return p + 1
        return fail(s, p, E_SYNTAX)


cdef inline unsigned int key_hash(cp k, size_t n) noexcept nogil:
    cdef unsigned int h = 2166136261u
    cdef size_t i
    for i in range(n):
        h = (h ^ k[i]) * 16777619u
    return h


cdef inline int lookup(Scan* s, cp k, size_t n) noexcept nogil:
    cdef unsigned int h = key_hash(k, n) & (HASH_SIZE - 1)
    cdef int ci
    cdef Col* c
    while True:
        ci = s.table[h]
        if ci < 0:
            return -1
        c = &s.cols[ci]
        if c.name_len == n and memcmp(c.name, k, n) == 0:
            return ci
        h = (h + 1) & (HASH_SIZE - 1)


cdef int scan_piece(Scan* s, cp p, cp end) noexcept nogil:
    """Every line of ``[p, end)`` into the columns; returns the outcome (``s.err``)."""
    cdef int64_t row = 0
    cdef cp k
    cdef cp q
    cdef int ci, i
    cdef Col* c
    while True:
        while p < end and (p[0] == 32 or p[0] == 9 or p[0] == 13 or p[0] == 10):
            p += 1
        if p >= end:
            break
        if p[0] != 123:
            fail(s, p, E_SYNTAX)  # not an object: polars' error, or a line to drop (the caller decides)
            return s.err
        if row >= s.cap:
            fail(s, p, E_UNSUPPORTED)  # cannot happen: rows are counted by newlines first
            return s.err
        p = skip_ws(p + 1, end)
        if p < end and p[0] == 125:
            p += 1
        else:
            while True:
                if p >= end or p[0] != 34:
                    fail(s, p, E_SYNTAX)
                    return s.err
                k = p + 1
                q = k
                while q < end and q[0] != 34 and q[0] != 92 and 32 <= q[0] < 128:
                    q += 1
                if q >= end or q[0] != 34:
                    if q < end and q[0] >= 128:  # a non-ASCII key: no field's name; validate and skip
                        q = scan_string(s, k, end, NULL)
                        if q == NULL:
                            return s.err
                        ci = -1
                        q -= 1
                    else:
                        fail(s, p, E_UNSUPPORTED)  # an escaped key (or invalid: polars says which)
                        return s.err
                else:
                    ci = lookup(s, k, q - k)
                p = skip_ws(q + 1, end)
                if p >= end or p[0] != 58:
                    fail(s, p, E_SYNTAX)
                    return s.err
                p = skip_ws(p + 1, end)
                if ci >= 0 and s.cols[ci].seen != row:
                    p = parse_value(s, ci, p, end, row)
                else:
                    p = skip_value(s, p, end)
                if p == NULL:
                    return s.err
                p = skip_ws(p, end)
                if p >= end:
                    fail(s, p, E_SYNTAX)
                    return s.err
                if p[0] == 44:
                    p = skip_ws(p + 1, end)
                    continue
                if p[0] == 125:
                    p += 1
                    break
                fail(s, p, E_SYNTAX)
                return s.err
        p = skip_ws(p, end)
        if p < end and p[0] != 10:
            fail(s, p, E_SYNTAX)  # more than one value on the line
            return s.err
        for i in range(s.ncols):  # the row ends of the variable-length columns
            c = &s.cols[i]
            if c.kind == K_STR or c.kind == K_BUCKETS:
                (<int64_t*>c.vals)[row + 1] = <int64_t>c.data.len
            elif c.kind == K_LINT or c.kind == K_LFLOAT:
                (<int64_t*>c.vals)[row + 1] = <int64_t>(c.data.len >> 3)
        row += 1
    s.rows = row
    return E_OK


#: Column kinds by name, as ``scan``'s ``kinds`` gives them.
KINDS = {"Int64": K_INT, "Float64": K_FLOAT, "Boolean": K_BOOL, "String": K_STR, "Hist": K_HIST,
         "List(Int64)": K_LINT, "List(Float64)": K_LFLOAT}
cdef tuple _HIST_FIELDS = (("n", K_INT), ("sum", K_FLOAT), ("min", K_FLOAT), ("max", K_FLOAT),
                           ("buckets", K_BUCKETS))


cdef class _Columns:
    """The scanned columns of one piece; each is handed to polars once (:class:`_Column`), its buffers moving into
    the Arrow array polars imports."""

    cdef Scan s
    cdef list names        # bytes, one per column (top-level, then the histograms' fields)

    def __cinit__(self):
        memset(&self.s, 0, sizeof(Scan))

    def __dealloc__(self):
        cdef int i
        if self.s.cols != NULL:
            for i in range(self.s.ncols):
                free(self.s.cols[i].valid)
                free(self.s.cols[i].vals)
                free(self.s.cols[i].data.p)
            free(self.s.cols)

    cdef int setup(self, list spec, int64_t cap) except -1:
        cdef int ntop = len(spec), nhist = 0, i, j, ci, kind
        cdef unsigned int h
        cdef Col* c
        for _, kind in spec:
            if kind == K_HIST:
                nhist += 1
        self.s.ncols = ntop + 5 * nhist
        self.s.ntop = ntop
        self.s.cap = cap
        self.s.cols = <Col*>calloc(self.s.ncols, sizeof(Col))
        if self.s.cols == NULL:
            raise MemoryError()
        for i in range(HASH_SIZE):
            self.s.table[i] = -1
        self.names = []
        for name, kind in spec:
            self.names.append(name.encode())
        for name, kind in spec:
            if kind == K_HIST:
                for fname, fkind in _HIST_FIELDS:
                    self.names.append(fname.encode())
        j = ntop
        for i in range(self.s.ncols):
            c = &self.s.cols[i]
            if i < ntop:
                c.kind = spec[i][1]
            else:
                c.kind = 0  # set below
            c.seen = -1
        for i in range(ntop):
            c = &self.s.cols[i]
            if c.kind == K_HIST:
                c.sub = j
                for fname, fkind in _HIST_FIELDS:
                    self.s.cols[j].kind = fkind
                    j += 1
        for i in range(self.s.ncols):
            c = &self.s.cols[i]
            c.name = <const unsigned char*>(<bytes>self.names[i])
            c.name_len = len(self.names[i])
            c.valid = <uint8_t*>calloc(cap + 1, 1)
            if c.kind == K_BOOL:
                c.vals = <unsigned char*>calloc(cap + 1, 1)
            else:  # 8 bytes a row, or cap + 1 row ends
                c.vals = <unsigned char*>calloc(cap + 1, 8)
            if c.valid == NULL or c.vals == NULL:
                raise MemoryError()
        for i in range(ntop):
            c = &self.s.cols[i]
            h = key_hash(c.name, c.name_len) & (HASH_SIZE - 1)
            while self.s.table[h] >= 0:
                h = (h + 1) & (HASH_SIZE - 1)
            self.s.table[h] = i
        return 0

    cdef ArrowSchema* _schema(self, int ci, const char* name) except NULL:
        cdef Col* c = &self.s.cols[ci]
        cdef ArrowSchema* sc
        cdef int f
        if c.kind == K_INT:
            sc = fr_schema_new(b"l", name, 0)
        elif c.kind == K_FLOAT:
            sc = fr_schema_new(b"g", name, 0)
        elif c.kind == K_BOOL:
            sc = fr_schema_new(b"b", name, 0)
        elif c.kind == K_STR or c.kind == K_BUCKETS:
            sc = fr_schema_new(b"U", name, 0)
        elif c.kind == K_LINT or c.kind == K_LFLOAT:
            sc = fr_schema_new(b"+L", name, 1)
            if sc != NULL:
                sc.children[0] = fr_schema_new(b"l" if c.kind == K_LINT else b"g", b"item", 0)
                if sc.children[0] == NULL:
                    sc.release(sc)
                    sc = NULL
        else:  # K_HIST
            sc = fr_schema_new(b"+s", name, 5)
            if sc != NULL:
                for f in range(5):
                    sc.children[f] = self._schema(c.sub + f, <const char*>(<bytes>self.names[c.sub + f]))
        if sc == NULL:
            raise MemoryError()
        return sc

    cdef ArrowArray* _array(self, int ci) except NULL:
        """Column ``ci`` as an Arrow array; its buffers move into it (freed by its release)."""
        cdef Col* c = &self.s.cols[ci]
        cdef int64_t n = self.s.rows, i, nulls = 0
        cdef uint8_t* bits = NULL
        cdef uint8_t* vb
        cdef ArrowArray* a
        cdef ArrowArray* child
        cdef int f
        for i in range(n):
            if not c.valid[i]:
                nulls += 1
        if nulls:
            bits = <uint8_t*>calloc((n + 7) // 8 + 1, 1)
            if bits == NULL:
                raise MemoryError()
            for i in range(n):
                if c.valid[i]:
                    bits[i >> 3] |= <uint8_t>(1 << (i & 7))
        if c.data.p != NULL and c.data.cap > c.data.len + 4096:  # grown by doubling: keep no spare capacity
            vb = <uint8_t*>realloc(c.data.p, c.data.len if c.data.len else 1)
            if vb != NULL:
                c.data.p = vb
                c.data.cap = c.data.len
        if c.kind == K_INT or c.kind == K_FLOAT:
            a = fr_array_new(n, nulls, 2, 0)
            if a != NULL:
                a.buffers[1] = c.vals
                c.vals = NULL
        elif c.kind == K_BOOL:
            vb = <uint8_t*>calloc((n + 7) // 8 + 1, 1)
            if vb == NULL:
                free(bits)
                raise MemoryError()
            for i in range(n):
                if c.vals[i]:
                    vb[i >> 3] |= <uint8_t>(1 << (i & 7))
            a = fr_array_new(n, nulls, 2, 0)
            if a != NULL:
                a.buffers[1] = vb
            else:
                free(vb)
        elif c.kind == K_STR or c.kind == K_BUCKETS:
            a = fr_array_new(n, nulls, 3, 0)
            if a != NULL:
                a.buffers[1] = c.vals
                c.vals = NULL
                if c.data.p == NULL:
                    c.data.p = <unsigned char*>malloc(1)
                a.buffers[2] = c.data.p
                c.data.p = NULL
        elif c.kind == K_LINT or c.kind == K_LFLOAT:
            a = fr_array_new(n, nulls, 2, 1)
            child = NULL
            if a != NULL:
                a.buffers[1] = c.vals
                c.vals = NULL
                child = fr_array_new(<int64_t>(c.data.len // 8), 0, 2, 0)
                a.children[0] = child
            if child != NULL:
                if c.data.p == NULL:
                    c.data.p = <unsigned char*>malloc(8)
                child.buffers[1] = c.data.p
                c.data.p = NULL
            elif a != NULL:
                a.n_children = 0
                a.release(a)
                free(a)
                a = NULL
        else:  # K_HIST
            a = fr_array_new(n, nulls, 1, 5)
            if a != NULL:
                for f in range(5):
                    a.children[f] = self._array(c.sub + f)
        if a == NULL:
            free(bits)
            raise MemoryError()
        a.buffers[0] = bits
        return a

    cdef tuple export(self, int ci):
        """``(schema capsule, array capsule)`` of top-level column ``ci`` (once only: its buffers move)."""
        cdef ArrowSchema* sc = self._schema(ci, <const char*>(<bytes>self.names[ci]))
        schema_cap = fr_schema_capsule(sc)
        cdef ArrowArray* a = self._array(ci)
        return schema_cap, fr_array_capsule(a)


cdef class _Column:
    """One scanned column, handed to polars through ``__arrow_c_array__``. Each column is its own Arrow array, so
    the frame keeps only the buffers of the columns it keeps (an imported struct's children would keep the whole
    piece's buffers, chunk lists included, alive as long as any of its columns lives)."""

    cdef _Columns cols
    cdef int ci

    def __arrow_c_array__(self, requested_schema=None):
        if self.cols is None:
            raise RuntimeError("the scanned column was already handed over")
        cols, self.cols = self.cols, None
        return cols.export(self.ci)


def scan(bytes text, list kinds):
    """Parse ``text`` (whole NDJSON lines) into the columns ``kinds`` names: ``[(name, kind), ...]``, ``kind`` one
    of :data:`KINDS`' values; return the polars DataFrame (columns in that order).

    Raises:
        Unsupported: the piece holds something not read here exactly as polars reads it (see the module
            docstring), invalid JSON included; parse it with polars.
        MemoryError: out of memory.
    """
    cdef cp p = <cp>(<const char*>text)
    cdef Py_ssize_t n = len(text)
    cdef cp end = p + n
    cdef cp q = p
    cdef int64_t lines = 1
    cdef int rc, i
    cdef _Columns cols = _Columns()
    with nogil:
        while q < end:
            q = <cp>memchr(q, 10, end - q)
            if q == NULL:
                break
            lines += 1
            q += 1
    cols.setup(kinds, lines)
    cols.s.base = p
    with nogil:
        rc = scan_piece(&cols.s, p, end)
    if rc != E_OK:
        if rc == E_NOMEM:
            raise MemoryError()
        raise Unsupported(f"byte {cols.s.errpos}: {_ERRORS[rc]}")
    cdef list series = []
    cdef _Column col
    for i in range(len(kinds)):
        col = _Column()
        col.cols = cols
        col.ci = i
        series.append(_pl.Series(values=col))
    return _pl.DataFrame(series)


# -- pass 2: schema-3 chunk times decoded in one pass ------------------------------------------------------------------

from libc.math cimport fabs, rint

import numpy as _np


def decode_us_times(const double[::1] deltas, const int64_t[::1] lengths, const double[:, ::1] anchors):
    """Schema-3 chunk times (µs deltas, lists of ``lengths`` back to back) decoded to seconds from the request
    start, pinned to their anchors: the values ``harness.report.chunkbins.reduce_chunks_flat`` computes with numpy
    (running sums of whole µs, times ``harness.result.CHUNK_TIME_UNIT_S`` = 1e-6, then for each anchor in
    ``harness.result.CHUNK_ANCHORS`` order, a chunk whose running µs equals ``rint(anchor * 1e6)`` becomes
    ``t + (anchor - t)``), the same IEEE double operations in the same order, in one pass instead of ~8.

    Args:
        deltas: float64, one per chunk (the lists' values concatenated in row order).
        lengths: int64, one per list (each ≥ 1); ``sum(lengths) == len(deltas)``.
        anchors: float64 of shape ``(k, len(lengths))`` (k ≤ 8), an anchor time (s) per list, -1.0 for none.

    Returns:
        A float64 numpy array of ``len(deltas)`` times (s), or None when the numpy form declines too: a delta is
        not a whole number (NaN included), or ``max |delta| × len(deltas) ≥ 2**53`` (a sum might not be exact).

    Raises:
        ValueError: the lengths do not add up to the deltas, or more than 8 anchors.
    """
    cdef Py_ssize_t n = deltas.shape[0], rows = lengths.shape[0], na = anchors.shape[0]
    cdef Py_ssize_t i = 0, r, j, k
    cdef int64_t total = 0, L
    cdef double a[8]
    cdef double a_us[8]
    cdef double v, us, x, m = 0.0
    cdef bint bad = False
    if na > 8:
        raise ValueError("at most 8 anchors")
    if anchors.shape[1] != rows and na:
        raise ValueError("one anchor per list")
    for r in range(rows):
        if lengths[r] < 0:
            raise ValueError("a negative list length")
        total += lengths[r]
    if total != n:
        raise ValueError(f"the lengths add up to {total}, not the {n} deltas")
    out = _np.empty(n, dtype=_np.float64)
    cdef double[::1] t = out
    with nogil:
        for r in range(rows):
            L = lengths[r]
            for k in range(na):
                a[k] = anchors[k, r]
                a_us[k] = rint(a[k] * 1e6)
            us = 0.0
            for j in range(L):
                v = deltas[i]
                x = fabs(v)
                # not whole, NaN, or 2**53 or more (numpy declines that too: max |delta| x count >= 2**53)
                if not (x < 9007199254740992.0 and v == <double>(<int64_t>v)):
                    bad = True
                    break
                if x > m:
                    m = x
                us = v if j == 0 else us + v
                x = us * 1e-6
                for k in range(na):
                    if us == a_us[k]:
                        x = x + (a[k] - x)
                t[i] = x
                i += 1
            if bad:
                break
    if bad or m * <double>n >= 9007199254740992.0:
        return None
    return out


# -- chunk times packed in the Parquet parts (harness.report.packed) ----------------------------------------------------

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid

cdef extern from *:
    """
    struct ArrowArrayStream {
        int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
        int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
        const char* (*get_last_error)(struct ArrowArrayStream*);
        void (*release)(struct ArrowArrayStream*);
        void* private_data;
    };
    static void fr_stream_schema_release(struct ArrowSchema* s) { if (s->release) s->release(s); }
    static void fr_stream_array_release(struct ArrowArray* a) { if (a->release) a->release(a); }
    static int fr_stream_get_schema(struct ArrowArrayStream* st, struct ArrowSchema* out) {
        return st->get_schema(st, out);
    }
    static int fr_stream_get_next(struct ArrowArrayStream* st, struct ArrowArray* out) {
        return st->get_next(st, out);
    }
    static int fr_array_live(struct ArrowArray* a) { return a->release != NULL; }
    """
    struct ArrowSchemaFull "ArrowSchema":
        const char* format
        int64_t n_children
        ArrowSchemaFull** children
        void (*release)(ArrowSchemaFull*)
    struct ArrowArrayFull "ArrowArray":
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArrayFull** children
        void (*release)(ArrowArrayFull*)
    struct ArrowArrayStream:
        pass
    void fr_stream_schema_release(ArrowSchemaFull* s) nogil
    void fr_stream_array_release(ArrowArrayFull* a) nogil
    int fr_stream_get_schema(ArrowArrayStream* st, ArrowSchemaFull* out) nogil
    int fr_stream_get_next(ArrowArrayStream* st, ArrowArrayFull* out) nogil
    int fr_array_live(ArrowArrayFull* a) nogil


#: Arrow formats of the binary-like arrays :func:`_value_at` reads: int32 offsets (1), int64 offsets (2), views (3).
_BINARY_LAYOUTS = {"z": 1, "Z": 2, "vz": 3}
_STRING_LAYOUTS = {"u": 1, "U": 2, "vu": 3}


cdef class _Arrays:
    """Every array of a polars Series' Arrow C stream (:func:`_arrays_of`), held until this object goes (each then
    released): ``fmt`` the stream's Arrow format, ``child_fmt`` its first child's ("" without one), ``rows`` the
    arrays' lengths summed."""

    cdef ArrowArrayFull* a
    cdef int64_t n
    cdef int64_t rows
    cdef str fmt
    cdef str child_fmt

    def __dealloc__(self):
        cdef int64_t h
        for h in range(self.n):
            fr_stream_array_release(&self.a[h])
        free(self.a)


cdef _Arrays _arrays_of(series):
    """The arrays and formats of ``series.__arrow_c_stream__()`` (the Arrow C stream interface: the series'
    buffers, no copy).

    Raises:
        ValueError: the stream failed (no schema, or an array it could not give).
        MemoryError: out of memory.
    """
    cap = series.__arrow_c_stream__()
    if not PyCapsule_IsValid(cap, b"arrow_array_stream"):
        raise ValueError("not an Arrow C stream capsule")
    cdef ArrowArrayStream* st = <ArrowArrayStream*>PyCapsule_GetPointer(cap, b"arrow_array_stream")
    cdef ArrowSchemaFull sc
    cdef _Arrays arrs = _Arrays()
    cdef ArrowArrayFull* grown
    cdef int64_t cap_held = 0
    memset(&sc, 0, sizeof(sc))
    if fr_stream_get_schema(st, &sc) != 0:
        raise ValueError("the Arrow stream gave no schema")
    arrs.fmt = (<bytes>sc.format).decode("ascii", "replace")
    arrs.child_fmt = (<bytes>sc.children[0].format).decode("ascii", "replace") if sc.n_children >= 1 else ""
    fr_stream_schema_release(&sc)
    while True:
        if arrs.n == cap_held:
            cap_held = cap_held * 2 + 4
            grown = <ArrowArrayFull*>realloc(arrs.a, cap_held * sizeof(ArrowArrayFull))
            if grown == NULL:
                raise MemoryError()  # arrs still holds (and releases) what it has
            arrs.a = grown
        memset(&arrs.a[arrs.n], 0, sizeof(ArrowArrayFull))
        if fr_stream_get_next(st, &arrs.a[arrs.n]) != 0:
            raise ValueError("the Arrow stream failed to give its next array")
        if not fr_array_live(&arrs.a[arrs.n]):
            return arrs
        arrs.rows += arrs.a[arrs.n].length
        arrs.n += 1


cdef int64_t _value_at(ArrowArrayFull* a, int layout, int64_t i, const uint8_t** at) noexcept nogil:
    """Length (bytes) of element ``i`` of a binary array (its offset applied), its bytes in ``at[0]``."""
    cdef int64_t j = a.offset + i, lo, hi
    cdef const uint8_t* view
    cdef int32_t n, buf, off
    if layout == 1:
        lo = (<const int32_t*>a.buffers[1])[j]
        hi = (<const int32_t*>a.buffers[1])[j + 1]
        at[0] = <const uint8_t*>a.buffers[2] + lo
        return hi - lo
    if layout == 2:
        lo = (<const int64_t*>a.buffers[1])[j]
        hi = (<const int64_t*>a.buffers[1])[j + 1]
        at[0] = <const uint8_t*>a.buffers[2] + lo
        return hi - lo
    view = <const uint8_t*>a.buffers[1] + 16 * j
    memcpy(&n, view, 4)
    if n <= 12:
        at[0] = view + 4
        return n
    memcpy(&buf, view + 8, 4)
    memcpy(&off, view + 12, 4)
    at[0] = <const uint8_t*>a.buffers[2 + buf] + off
    return n


cdef inline bint _is_valid(ArrowArrayFull* a, int64_t i) noexcept nogil:
    cdef int64_t j = a.offset + i
    if a.null_count == 0 or a.buffers[0] == NULL:
        return True
    return ((<const uint8_t*>a.buffers[0])[j >> 3] >> (j & 7)) & 1


def unpack_f64(series):
    """The values and lengths of a Binary polars Series of packed float64 lists (``harness.report.packed``: each
    value is its list's float64s, little-endian, back to back), read through the Arrow C stream interface
    (``series.__arrow_c_stream__()``) without a Python object per value.

    Returns:
        ``(values, lengths)``: float64 numpy array of every list's values in row order, and int64 numpy array of
        each row's list length (-1 for a null value).

    Raises:
        ValueError: the series is not Binary (in a layout read here), or a value's size is not a multiple of 8.
    """
    cdef _Arrays arrs = _arrays_of(series)
    cdef int layout = _BINARY_LAYOUTS.get(arrs.fmt, 0)
    cdef int64_t total = 0, i, n, h
    cdef const uint8_t* at = NULL
    if layout == 0:
        raise ValueError(f"packed chunk times must be Binary, got Arrow format {arrs.fmt!r}")
    for h in range(arrs.n):  # two passes over the arrays: sizes, then the copy
        for i in range(arrs.a[h].length):
            if _is_valid(&arrs.a[h], i):
                n = _value_at(&arrs.a[h], layout, i, &at)
                if n % 8:
                    raise ValueError(f"a packed chunk-times value of {n} bytes (not a multiple of 8)")
                total += n // 8
    values = _np.empty(total, dtype=_np.float64)
    lengths = _np.empty(arrs.rows, dtype=_np.int64)
    _fill_unpacked(arrs.a, arrs.n, layout, values, lengths)
    return values, lengths


cdef int _fill_unpacked(ArrowArrayFull* held, int64_t nheld, int layout, double[::1] values,
                        int64_t[::1] lengths) except -1:
    cdef int64_t h, i, n, k = 0, r = 0
    cdef const uint8_t* at = NULL
    cdef uint8_t* out = <uint8_t*>&values[0] if values.shape[0] else NULL
    with nogil:
        for h in range(nheld):
            for i in range(held[h].length):
                if _is_valid(&held[h], i):
                    n = _value_at(&held[h], layout, i, &at)
                    if n:
                        memcpy(out + 8 * k, at, n)  # little-endian float64s (x86-64, aarch64: native order)
                    k += n // 8
                    lengths[r] = n // 8
                else:
                    lengths[r] = -1
                r += 1
    return 0


cdef class _ListF64:
    """A ``List(Float64)`` column built from flat values and lengths, handed to polars through
    ``__arrow_c_array__`` (large list: int64 offsets; a null where the length is -1)."""

    cdef object values
    cdef object lengths

    def __arrow_c_array__(self, requested_schema=None):
        cdef const double[::1] v = self.values
        cdef const int64_t[::1] lens = self.lengths
        cdef int64_t n = lens.shape[0], i, nulls = 0, at = 0, total = v.shape[0]
        for i in range(n):
            if lens[i] > 0:
                at += lens[i]
        if at != total:
            raise ValueError(f"the lengths add up to {at}, not the {total} values")
        at = 0
        cdef ArrowSchema* sc = fr_schema_new(b"+L", b"chunk_times", 1)
        if sc == NULL:
            raise MemoryError()
        sc.children[0] = fr_schema_new(b"g", b"item", 0)
        if sc.children[0] == NULL:
            sc.release(sc)
            raise MemoryError()
        schema_cap = fr_schema_capsule(sc)
        cdef ArrowArray* a = fr_array_new(n, 0, 2, 1)
        if a == NULL:
            raise MemoryError()
        array_cap = fr_array_capsule(a)
        cdef int64_t* offs = <int64_t*>malloc((n + 1) * 8)
        cdef uint8_t* bits = <uint8_t*>calloc((n + 7) // 8 + 1, 1)
        cdef double* data = <double*>malloc(total * 8 if total else 8)
        if offs == NULL or bits == NULL or data == NULL:
            free(offs)
            free(bits)
            free(data)
            raise MemoryError()
        a.buffers[1] = offs
        a.buffers[0] = bits
        with nogil:
            offs[0] = 0
            for i in range(n):
                if lens[i] < 0:
                    nulls += 1
                else:
                    bits[i >> 3] |= <uint8_t>(1 << (i & 7))
                    at += lens[i]
                offs[i + 1] = at
            if total:
                memcpy(data, &v[0], total * 8)
        a.null_count = nulls
        cdef ArrowArray* child = fr_array_new(total, 0, 2, 0)
        if child == NULL:
            free(data)
            raise MemoryError()
        child.buffers[1] = data
        a.children[0] = child
        return schema_cap, array_cap


def lists_f64(values, lengths):
    """A ``List(Float64)`` polars Series named ``chunk_times`` from flat ``values`` (float64, the lists back to back)
    and ``lengths`` (int64, one per row, -1 for a null list): the inverse of :func:`unpack_f64` as lists.

    Raises:
        ValueError: the lengths do not add up to the values.
    """
    cdef _ListF64 col = _ListF64()
    col.values = _np.ascontiguousarray(values, dtype=_np.float64)
    col.lengths = _np.ascontiguousarray(lengths, dtype=_np.int64)
    return _pl.Series(values=col)


cdef class _BinaryOut:
    """A ``Binary`` column (large binary: int64 offsets) whose buffers were built by :func:`pack_f64`, handed to
    polars through ``__arrow_c_array__`` (the buffers move into the Arrow array; once only)."""

    cdef int64_t rows, nulls
    cdef int64_t* offs
    cdef uint8_t* bits
    cdef uint8_t* data

    def __dealloc__(self):
        free(self.offs)
        free(self.bits)
        free(self.data)

    def __arrow_c_array__(self, requested_schema=None):
        if self.offs == NULL:
            raise RuntimeError("the packed column was already handed over")
        cdef ArrowSchema* sc = fr_schema_new(b"Z", b"chunk_times", 0)
        if sc == NULL:
            raise MemoryError()
        schema_cap = fr_schema_capsule(sc)
        cdef ArrowArray* a = fr_array_new(self.rows, self.nulls, 3, 0)
        if a == NULL:
            raise MemoryError()
        array_cap = fr_array_capsule(a)
        a.buffers[0] = self.bits
        a.buffers[1] = self.offs
        a.buffers[2] = self.data
        self.bits = NULL
        self.offs = NULL
        self.data = NULL
        return schema_cap, array_cap


def pack_f64(series):
    """A ``List(Float64)`` polars Series packed (``harness.report.packed``): a ``Binary`` Series named
    ``chunk_times``, each value its list's float64s, little-endian, back to back (a null list: null; an empty
    list: empty), read through the Arrow C stream interface (one copy of the values, no Python object a value).

    Returns:
        The Binary Series, or None when a list holds a null (not packable).

    Raises:
        ValueError: the series is not a list of float64 (in a layout read here).
    """
    cdef _Arrays arrs = _arrays_of(series)
    if arrs.fmt not in ("+l", "+L") or arrs.child_fmt != "g":
        raise ValueError(f"chunk times to pack must be List(Float64), got Arrow format {arrs.fmt!r}"
                         f"{f' of {arrs.child_fmt!r}' if arrs.child_fmt else ''}")
    cdef bint large = arrs.fmt == "+L"
    cdef ArrowArrayFull* held = arrs.a
    cdef ArrowArrayFull* a
    cdef ArrowArrayFull* child
    cdef int64_t h, i, j, lo, hi, rows = arrs.rows, total = 0, r = 0, at = 0, nulls = 0
    cdef const uint8_t* cbits
    cdef _BinaryOut out = _BinaryOut()
    for h in range(arrs.n):  # sizes, and any null value inside a list
        a = &held[h]
        child = a.children[0]
        cbits = <const uint8_t*>child.buffers[0] if child.null_count != 0 else NULL
        for i in range(a.length):
            if not _is_valid(a, i):
                continue
            lo, hi = _list_bounds(a, large, i)
            total += hi - lo
            if cbits != NULL:
                for j in range(lo + child.offset, hi + child.offset):
                    if not ((cbits[j >> 3] >> (j & 7)) & 1):
                        return None
    out.rows = rows
    out.offs = <int64_t*>malloc((rows + 1) * 8)
    out.bits = <uint8_t*>calloc((rows + 7) // 8 + 1, 1)
    out.data = <uint8_t*>malloc(total * 8 if total else 8)
    if out.offs == NULL or out.bits == NULL or out.data == NULL:
        raise MemoryError()
    with nogil:
        out.offs[0] = 0
        for h in range(arrs.n):
            a = &held[h]
            child = a.children[0]
            for i in range(a.length):
                if _is_valid(a, i):
                    lo, hi = _list_bounds(a, large, i)
                    if hi > lo:
                        memcpy(out.data + at, <const double*>child.buffers[1] + child.offset + lo, (hi - lo) * 8)
                    at += (hi - lo) * 8
                    out.bits[r >> 3] |= <uint8_t>(1 << (r & 7))
                else:
                    nulls += 1
                r += 1
                out.offs[r] = at
    out.nulls = nulls
    return _pl.Series(values=out)


cdef inline (int64_t, int64_t) _list_bounds(ArrowArrayFull* a, bint large, int64_t i) noexcept nogil:
    """Child index range ``[lo, hi)`` of list ``i`` (its offset applied; the child's own offset not)."""
    cdef int64_t j = a.offset + i
    if large:
        return (<const int64_t*>a.buffers[1])[j], (<const int64_t*>a.buffers[1])[j + 1]
    return (<const int32_t*>a.buffers[1])[j], (<const int32_t*>a.buffers[1])[j + 1]


# -- the steps' gap histograms merged (harness.report.columns.gap_histograms) -----------------------------------------

#: Bucket indices :func:`merge_buckets` counts (``harness.histogram.bucket_of`` of any finite double is below ~72,600).
BUCKETS = 1 << 17
cdef enum:
    _NBUCKETS = 131072


cdef inline const uint8_t* _skip_ws(const uint8_t* p, const uint8_t* end) noexcept nogil:
    while p < end and (p[0] == 32 or p[0] == 9 or p[0] == 10 or p[0] == 13):
        p += 1
    return p


cdef inline const uint8_t* _digits(const uint8_t* p, const uint8_t* end, int64_t* out) noexcept nogil:
    """Parse 1 to 18 ASCII digits at ``p`` into ``out``; NULL when there are none or more than 18."""
    cdef int64_t v = 0
    cdef int nd = 0
    while p < end and 48 <= p[0] <= 57:
        if nd == 18:
            return NULL
        v = v * 10 + (p[0] - 48)
        nd += 1
        p += 1
    if nd == 0:
        return NULL
    out[0] = v
    return p


cdef int _merge_one(const uint8_t* p, int64_t n, int64_t* counts) noexcept nogil:
    """Add the ``{"k": c, ...}`` text at ``p`` (``n`` bytes) into ``counts`` (:data:`BUCKETS` wide); 0, or -1 when
    it is not that form (flat, non-negative integer keys below :data:`BUCKETS` and counts)."""
    cdef const uint8_t* end = p + n
    cdef int64_t k, c
    p = _skip_ws(p, end)
    if p >= end or p[0] != 123:  # {
        return -1
    p = _skip_ws(p + 1, end)
    if p < end and p[0] == 125:  # }
        return 0 if _skip_ws(p + 1, end) == end else -1
    while True:
        if p >= end or p[0] != 34:  # "
            return -1
        p = _digits(p + 1, end, &k)
        if p == NULL or p >= end or p[0] != 34 or k >= _NBUCKETS:
            return -1
        p = _skip_ws(p + 1, end)
        if p >= end or p[0] != 58:  # :
            return -1
        p = _digits(_skip_ws(p + 1, end), end, &c)
        if p == NULL:
            return -1
        counts[k] += c
        p = _skip_ws(p, end)
        if p < end and p[0] == 44:  # ,
            p = _skip_ws(p + 1, end)
            continue
        if p < end and p[0] == 125:
            return 0 if _skip_ws(p + 1, end) == end else -1
        return -1


def merge_buckets(series, const int64_t[::1] groups, int64_t ngroups):
    """The gap histograms' ``buckets`` texts (a String polars Series, ``{"k": count, ...}`` as the records scanner
    and polars write them) summed per group: row ``i`` adds into group ``groups[i]`` (-1: not counted), read
    through the Arrow C stream interface without a Python object a row.

    Returns:
        An int64 numpy array of shape ``(ngroups, BUCKETS)`` (counts per bucket index), or None when a counted text
        is not that form (then the polars merge, ``harness.report.columns.gap_histogram``, reads it and reports
        what is wrong). Null texts add nothing.

    Raises:
        ValueError: ``groups`` is not one per row, or the series is not a String series.
    """
    cdef _Arrays arrs = _arrays_of(series)
    cdef int layout = _STRING_LAYOUTS.get(arrs.fmt, 0)
    cdef int64_t r = 0, h, i, n, g, rows = groups.shape[0]
    cdef const uint8_t* at = NULL
    cdef ArrowArrayFull* arr
    cdef bint bad = False
    if layout == 0:
        raise ValueError(f"bucket texts must be a String series, got Arrow format {arrs.fmt!r}")
    if arrs.rows != rows:
        raise ValueError(f"{arrs.rows} rows, not the {rows} groups")
    out = _np.zeros((ngroups, BUCKETS), dtype=_np.int64)
    cdef int64_t[:, ::1] counts = out
    with nogil:
        for h in range(arrs.n):
            arr = &arrs.a[h]
            for i in range(arr.length):
                g = groups[r + i]
                if g < 0 or not _is_valid(arr, i):
                    continue
                if g >= ngroups:
                    bad = True
                    break
                n = _value_at(arr, layout, i, &at)
                if _merge_one(at, n, &counts[g, 0]) != 0:
                    bad = True
                    break
            if bad:
                break
            r += arr.length
    return None if bad else out
