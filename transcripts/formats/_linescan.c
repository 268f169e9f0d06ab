/* What a streamed load keeps of a Claude Code or OpenClaw line, read without building it.
 *
 * `claude_code(line)` and `openclaw(line)` check that the bytes are one JSON object, as
 * strictly as orjson reads it or more, and read the few fields `Format.store_line` reads
 * (see transcripts/formats/claude_code.py and openclaw.py). They return a tuple of them, or
 * None when the line is not valid JSON, is not a line the shortcut covers, or holds anything
 * this reader does not decide exactly as orjson and `store_line` would (an escape in a key or
 * in a string it returns, a repeated key it reads, a number that could overflow, a lone
 * surrogate, deep nesting). The loader then reads such a line as ever, with orjson. So the
 * answer is the same with or without this module; only the time differs.
 *
 * Returned tuple: (kind, role, bits, uid, parent, message_id, other, calls, results)
 *   kind        str: the record's kind ("assistant", "user", "toolResult", or an OpenClaw role)
 *   role        int: 0 user, 1 assistant, 2 tool (`Format` maps it to a Role)
 *   bits        int: the record's flag bits (sidechain, aborted, interrupted; see configure)
 *   uid, parent str or None; message_id str or None (Claude Code's assistant message id)
 *   other       int: blocks that are neither calls nor results
 *   calls       tuple of (block, id, name, start, end, partial, canonical): id and name str
 *               or None, the arguments' bytes line[start:end] (start -1: no arguments);
 *               canonical is True when those bytes are an object written as orjson writes
 *               it with sorted keys (compact, integers only), so digested as they are
 *   results     tuple of (block, tool_call_id, is_error, start, end, plain): the content's
 *               bytes line[start:end] (start -1: none); plain is True when the content's
 *               first text, past whitespace, starts with an ASCII character no repair
 *               marker starts with
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_DEPTH 200  /* orjson refuses 1024 levels; deeper lines are left to it */
#define MAX_ITEMS 62   /* calls or results a line may hold here (a store row packs 62) */
#define MAX_NUMBER 64  /* a longer number could be read as infinity, which orjson refuses */

typedef const unsigned char *ptr;

typedef struct {
    ptr p, end, base;
    int depth;
} Scan;

/* A string value read: its raw bytes (between the quotes), and whether it had an escape. */
typedef struct {
    ptr at;
    Py_ssize_t len;
    int escaped;
} Str;

/* A value seen under a key: where it starts and ends, its first byte, and as a string. */
typedef struct {
    int seen;
    ptr start, stop;
    unsigned char first;
    Str str;
} Val;

static unsigned char marker_first[256]; /* bytes a repair marker's text may start with */
static long bit_sidechain = 0, bit_aborted = 0, bit_interrupted = 0;

static inline void ws(Scan *s) {
    while (s->p < s->end) {
        unsigned char c = *s->p;
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        s->p++;
    }
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int hex4(ptr p, ptr end) {
    if (end - p < 4) return -1;
    int a = hexval(p[0]), b = hexval(p[1]), c = hexval(p[2]), d = hexval(p[3]);
    if ((a | b | c | d) < 0) return -1;
    return (a << 12) | (b << 8) | (c << 4) | d;
}

/* 8 bytes at once: true when none is a quote, a backslash, a control or a non-ASCII byte. */
static inline int plain8(ptr p) {
    uint64_t w;
    memcpy(&w, p, 8);
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), slash = w ^ (ones * '\\');
    uint64_t bad = ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) |
                   ((slash - ones) & ~slash) | w;
    return (bad & highs) == 0;
}

/* The first byte at or after p that is a quote, a backslash, a control or non-ASCII, or a
 * point at most 7 bytes before `end` from which the caller reads byte by byte. */
static inline ptr skip_plain(ptr p, ptr end) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i w = _mm_loadu_si128((const __m128i *)p);
        /* signed: a byte of 0x80 or more is negative, so below 0x20 too */
        __m128i bad = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, slash)),
                                   _mm_cmplt_epi8(w, space));
        int mask = _mm_movemask_epi8(bad);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (end - p >= 8 && plain8(p)) p += 8;
    return p;
}

/* One UTF-8 sequence at p, its lead byte >= 0x80: its length, or 0 when invalid. */
static int utf8_seq(ptr p, ptr end) {
    unsigned char c = p[0];
    Py_ssize_t left = end - p;
    if (c >= 0xC2 && c <= 0xDF) {
        return left >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && p[1] > 0x9F) return 0; /* a surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && p[1] > 0x8F) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

/* A string at s->p (its opening quote); 1 and `out` filled, or 0. */
static int string(Scan *s, Str *out) {
    ptr p = s->p + 1, end = s->end;
    out->at = p;
    out->escaped = 0;
    for (;;) {
        p = skip_plain(p, end);
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
        if (p >= end) return 0;
        unsigned char c = *p;
        if (c == '"') break;
        if (c == '\\') {
            out->escaped = 1;
            if (++p >= end) return 0;
            c = *p;
            if (c == 'u') {
                int code = hex4(p + 1, end);
                if (code < 0) return 0;
                p += 5;
                if (code >= 0xD800 && code <= 0xDBFF) {
                    /* a high surrogate: a low one must follow, as orjson wants */
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return 0;
                    int low = hex4(p + 2, end);
                    if (low < 0xDC00 || low > 0xDFFF) return 0;
                    p += 6;
                } else if (code >= 0xDC00 && code <= 0xDFFF) {
                    return 0;
                }
                continue;
            }
            if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' &&
                c != 'r' && c != 't')
                return 0;
            p++;
            continue;
        }
        if (c < 0x20) return 0;
        int n = utf8_seq(p, end);
        if (!n) return 0;
        p += n;
    }
    out->len = p - out->at;
    s->p = p + 1;
    return 1;
}

static inline int at_digit(Scan *s) { return s->p < s->end && *s->p >= '0' && *s->p <= '9'; }

static int number(Scan *s) {
    ptr start = s->p;
    if (*s->p == '-') s->p++;
    if (s->p >= s->end) return 0;
    if (*s->p == '0') {
        s->p++;
    } else if (*s->p >= '1' && *s->p <= '9') {
        while (at_digit(s)) s->p++;
    } else {
        return 0;
    }
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!at_digit(s)) return 0;
        while (at_digit(s)) s->p++;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-')) s->p++;
        ptr exp = s->p;
        if (!at_digit(s)) return 0;
        while (at_digit(s)) s->p++;
        if (s->p - exp > 2) return 0; /* could overflow to infinity: left to orjson */
    }
    return s->p - start <= MAX_NUMBER;
}

static int literal(Scan *s, const char *word, Py_ssize_t n) {
    if (s->end - s->p < n || memcmp(s->p, word, n) != 0) return 0;
    s->p += n;
    return 1;
}

/* At an opening brace or bracket: 1 when items follow, 2 when `close` ends it at once
 * (read), 0 when nested too deep. */
static int open_items(Scan *s, unsigned char close) {
    if (++s->depth > MAX_DEPTH) return 0;
    s->p++;
    ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        s->depth--;
        return 2;
    }
    return 1;
}

/* After an item: 1 at a comma (read; another item follows), 2 when `close` ends the list
 * or object (read), 0 at anything else. */
static int after_item(Scan *s, unsigned char close) {
    ws(s);
    if (s->p >= s->end) return 0;
    if (*s->p == ',') {
        s->p++;
        ws(s);
        return 1;
    }
    if (*s->p != close) return 0;
    s->p++;
    s->depth--;
    return 2;
}

/* Walks an object's members: each key is passed to `member`, which reads its value; with
 * no `member`, every value is skipped (checked only). */
typedef int (*Member)(Scan *s, const Str *key, void *ctx);

static int value(Scan *s);

static int members(Scan *s, Member member, void *ctx) {
    if (s->p >= s->end || *s->p != '{') return 0;
    int state = open_items(s, '}');
    if (state != 1) return state == 2;
    do {
        Str key;
        if (s->p >= s->end || *s->p != '"' || !string(s, &key)) return 0;
        if (member && key.escaped) return 0; /* it may spell a key read here */
        ws(s);
        if (s->p >= s->end || *s->p != ':') return 0;
        s->p++;
        ws(s);
        if (!(member ? member(s, &key, ctx) : value(s))) return 0;
    } while ((state = after_item(s, '}')) == 1);
    return state == 2;
}

/* An object, each value skipped; at s->p (its opening brace). */
static int object(Scan *s) { return members(s, NULL, NULL); }

static int array(Scan *s) {
    int state = open_items(s, ']');
    if (state != 1) return state == 2;
    do {
        if (!value(s)) return 0;
    } while ((state = after_item(s, ']')) == 1);
    return state == 2;
}

static int value(Scan *s) {
    if (s->p >= s->end) return 0;
    switch (*s->p) {
        case '{':
            return object(s);
        case '[':
            return array(s);
        case '"': {
            Str str;
            return string(s, &str);
        }
        case 't':
            return literal(s, "true", 4);
        case 'f':
            return literal(s, "false", 5);
        case 'n':
            return literal(s, "null", 4);
        default:
            return number(s);
    }
}

/* A value under a key read by the caller: checked, and remembered in `v`. */
static int keep(Scan *s, Val *v) {
    if (v->seen) return 0; /* a repeated key: orjson keeps the last; left to it */
    v->seen = 1;
    v->start = s->p;
    v->first = s->p < s->end ? *s->p : 0;
    v->str.escaped = 0;
    v->str.len = 0;
    if (v->first == '"') {
        if (!string(s, &v->str)) return 0;
    } else if (!value(s)) {
        return 0;
    }
    v->stop = s->p;
    return 1;
}

static inline int key_is(const Str *key, const char *name) {
    Py_ssize_t n = (Py_ssize_t)strlen(name);
    return key->len == n && memcmp(key->at, name, n) == 0;
}

static inline int str_is(const Val *v, const char *text) {
    return v->seen && v->first == '"' && !v->str.escaped && key_is(&v->str, text);
}

static inline int is_true(const Val *v) { return v->seen && v->first == 't'; }

/* Whether a value already checked is written as orjson writes it back with sorted keys
 * (compact, keys in ascending order, integers only, the escapes orjson uses): its bytes
 * are then the canonical text a call's arguments are digested from. 0 when unsure. */
static int canon_string(Scan *s, Str *out) {
    ptr p = s->p + 1;
    out->at = p;
    out->escaped = 0;
    while (p < s->end && *p != '"') {
        if (*p == '\\') {
            out->escaped = 1;
            unsigned char e = p[1];
            if (e != '"' && e != '\\' && e != 'n' && e != 't' && e != 'r' && e != 'b' &&
                e != 'f')
                return 0; /* \u and \/ are written otherwise by orjson */
            p += 2;
        } else {
            p++;
        }
    }
    out->len = p - out->at;
    s->p = p + 1;
    return 1;
}

static int canon_value(Scan *s, int depth) {
    if (depth > 64 || s->p >= s->end) return 0;
    unsigned char c = *s->p;
    if (c == '{') {
        s->p++;
        if (*s->p == '}') {
            s->p++;
            return 1;
        }
        Str last = {NULL, 0, 0};
        for (;;) {
            Str key;
            if (*s->p != '"' || !canon_string(s, &key) || key.escaped) return 0;
            if (last.at) {
                Py_ssize_t n = key.len < last.len ? key.len : last.len;
                int order = memcmp(last.at, key.at, n);
                if (order > 0 || (order == 0 && last.len >= key.len)) return 0;
            }
            last = key;
            if (*s->p != ':') return 0;
            s->p++;
            if (!canon_value(s, depth + 1)) return 0;
            if (*s->p == ',') {
                s->p++;
                continue;
            }
            if (*s->p != '}') return 0;
            s->p++;
            return 1;
        }
    }
    if (c == '[') {
        s->p++;
        if (*s->p == ']') {
            s->p++;
            return 1;
        }
        for (;;) {
            if (!canon_value(s, depth + 1)) return 0;
            if (*s->p == ',') {
                s->p++;
                continue;
            }
            if (*s->p != ']') return 0;
            s->p++;
            return 1;
        }
    }
    if (c == '"') {
        Str str;
        return canon_string(s, &str);
    }
    if (c == 't') return literal(s, "true", 4);
    if (c == 'f') return literal(s, "false", 5);
    if (c == 'n') return literal(s, "null", 4);
    /* an integer as orjson writes it: no -0, no fraction or exponent, within 64 bits */
    ptr start = s->p;
    if (*s->p == '-') s->p++;
    if (s->p >= s->end || !(*s->p >= '0' && *s->p <= '9')) return 0;
    if (*s->p == '0' && (start != s->p || (s->p + 1 < s->end && s->p[1] >= '0' && s->p[1] <= '9')))
        return 0;
    while (at_digit(s)) s->p++;
    if (s->p - start > 18) return 0;
    return s->p < s->end && *s->p != '.' && *s->p != 'e' && *s->p != 'E';
}

/* Whether the bytes start:stop (a value checked already) are canonical and an object. */
static int canonical(ptr start, ptr stop) {
    if (start >= stop || *start != '{') return 0;
    Scan s = {start, stop, start, 0};
    return canon_value(&s, 0) && s.p == stop;
}

/* ---- A call's arguments written as `orjson.dumps(orjson.loads(them), OPT_SORT_KEYS)` ----
 *
 * For arguments the scanner checked already but that are not canonical as written (keys
 * out of order, spaces, escapes orjson writes otherwise). An object whose keys repeat, a
 * number that is not a plain integer, or nesting past 64 levels is left to orjson. */
typedef struct {
    unsigned char *data;
    size_t len, cap;
} Buf;

static int buf_put(Buf *b, const void *bytes, size_t n) {
    if (!n) return 1; /* an empty text: its buffer may not exist yet (memcpy takes no NULL) */
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        unsigned char *grown = realloc(b->data, cap);
        if (!grown) return 0;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    return 1;
}

static inline int buf_byte(Buf *b, unsigned char c) { return buf_put(b, &c, 1); }

/* The text of the checked string at p (its opening quote) decoded into `out`; p past it. */
static int decode_string(ptr *at, ptr end, Buf *out) {
    ptr p = *at + 1;
    while (p < end && *p != '"') {
        ptr run = p;
        while (p < end && *p != '"' && *p != '\\') p++;
        if (!buf_put(out, run, (size_t)(p - run))) return 0;
        if (p >= end || *p == '"') break;
        unsigned char e = p[1];
        p += 2;
        unsigned char c;
        switch (e) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                long code = hex4(p, end);
                p += 4;
                if (code >= 0xD800 && code <= 0xDBFF) {
                    code = 0x10000 + ((code - 0xD800) << 10) + (hex4(p + 2, end) - 0xDC00);
                    p += 6;
                }
                unsigned char u[4];
                size_t n;
                if (code < 0x80) {
                    u[0] = (unsigned char)code;
                    n = 1;
                } else if (code < 0x800) {
                    u[0] = (unsigned char)(0xC0 | (code >> 6));
                    u[1] = (unsigned char)(0x80 | (code & 0x3F));
                    n = 2;
                } else if (code < 0x10000) {
                    u[0] = (unsigned char)(0xE0 | (code >> 12));
                    u[1] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
                    u[2] = (unsigned char)(0x80 | (code & 0x3F));
                    n = 3;
                } else {
                    u[0] = (unsigned char)(0xF0 | (code >> 18));
                    u[1] = (unsigned char)(0x80 | ((code >> 12) & 0x3F));
                    u[2] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
                    u[3] = (unsigned char)(0x80 | (code & 0x3F));
                    n = 4;
                }
                if (!buf_put(out, u, n)) return 0;
                continue;
            }
            default: c = e; /* a quote, backslash or slash stands for itself */
        }
        if (!buf_byte(out, c)) return 0;
    }
    *at = p + 1;
    return 1;
}

/* A decoded text written as orjson writes a string. */
static int encode_string(const unsigned char *t, size_t n, Buf *out) {
    static const char hex[] = "0123456789abcdef";
    if (!n) return buf_put(out, "\"\"", 2); /* an empty text (`t` may be NULL) */
    if (!buf_byte(out, '"')) return 0;
    size_t run = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = t[k];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (!buf_put(out, t + run, k - run)) return 0;
        run = k + 1;
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        size_t m = 2;
        switch (c) {
            case '"': e[1] = '"'; break;
            case '\\': e[1] = '\\'; break;
            case '\b': e[1] = 'b'; break;
            case '\t': e[1] = 't'; break;
            case '\n': e[1] = 'n'; break;
            case '\f': e[1] = 'f'; break;
            case '\r': e[1] = 'r'; break;
            default:
                e[1] = 'u';
                e[2] = '0';
                e[3] = '0';
                e[4] = hex[c >> 4];
                e[5] = hex[c & 15];
                m = 6;
        }
        if (!buf_put(out, e, m)) return 0;
    }
    return buf_put(out, t + run, n - run) && buf_byte(out, '"');
}

typedef struct {
    size_t key, key_len; /* the decoded key, in the object's key buffer */
    ptr value;
} Member2;

static int canon_write(Scan *s, Buf *out, int depth);

static int compare_keys(const Buf *keys, const Member2 *a, const Member2 *b) {
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    /* empty keys only: the key buffer may not exist yet (memcmp takes no NULL) */
    int order = n ? memcmp(keys->data + a->key, keys->data + b->key, n) : 0;
    if (order) return order;
    return a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
}

static int canon_object(Scan *s, Buf *out, int depth) {
    Buf keys = {NULL, 0, 0};
    Member2 *list = NULL;
    size_t n = 0, cap = 0;
    int ok = 0;
    s->p++;
    ws(s);
    while (s->p < s->end && *s->p != '}') {
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            Member2 *grown = realloc(list, cap * sizeof *list);
            if (!grown) goto done;
            list = grown;
        }
        Member2 *m = &list[n];
        m->key = keys.len;
        if (!decode_string(&s->p, s->end, &keys)) goto done;
        m->key_len = keys.len - m->key;
        ws(s);
        s->p++; /* the colon */
        ws(s);
        m->value = s->p;
        if (!value(s)) goto done; /* skipped here, written once sorted */
        /* insertion sort: arguments have few keys */
        size_t k = n++;
        while (k > 0) {
            int order = compare_keys(&keys, &list[k - 1], &list[k]);
            if (order == 0) goto done; /* a repeated key: orjson keeps the last */
            if (order < 0) break;
            Member2 swap = list[k - 1];
            list[k - 1] = list[k];
            list[k] = swap;
            k--;
        }
        ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            ws(s);
        }
    }
    s->p++; /* the closing brace */
    ptr after = s->p;
    if (!buf_byte(out, '{')) goto done;
    for (size_t k = 0; k < n; k++) {
        if (k && !buf_byte(out, ',')) goto done;
        if (!encode_string(keys.data + list[k].key, list[k].key_len, out) || !buf_byte(out, ':'))
            goto done;
        s->p = list[k].value;
        if (!canon_write(s, out, depth + 1)) goto done;
    }
    s->p = after;
    ok = buf_byte(out, '}');
done:
    free(keys.data);
    free(list);
    return ok;
}

/* The checked value at s->p written canonically into `out`; 0 when left to orjson. */
static int canon_write(Scan *s, Buf *out, int depth) {
    if (depth > 64 || s->p >= s->end) return 0;
    unsigned char c = *s->p;
    if (c == '{') return canon_object(s, out, depth);
    if (c == '[') {
        s->p++;
        ws(s);
        if (!buf_byte(out, '[')) return 0;
        int first = 1;
        while (s->p < s->end && *s->p != ']') {
            if (!first && !buf_byte(out, ',')) return 0;
            first = 0;
            if (!canon_write(s, out, depth + 1)) return 0;
            ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                ws(s);
            }
        }
        s->p++;
        return buf_byte(out, ']');
    }
    if (c == '"') {
        Buf text = {NULL, 0, 0};
        int ok = decode_string(&s->p, s->end, &text) &&
                 encode_string(text.data ? text.data : (const unsigned char *)"", text.len, out);
        free(text.data);
        return ok;
    }
    ptr start = s->p;
    if (c == 't' || c == 'f' || c == 'n') {
        Py_ssize_t n = c == 'f' ? 5 : 4;
        s->p += n;
        return buf_put(out, start, (size_t)n);
    }
    /* an integer of at most 18 digits, not -0: orjson reads and writes it back the same */
    if (*s->p == '-') s->p++;
    ptr digits = s->p;
    while (at_digit(s)) s->p++;
    if (s->p == digits || s->p - digits > 18) return 0;
    if (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E')) return 0;
    if (digits > start && s->p - digits == 1 && *digits == '0') return 0;
    return buf_put(out, start, (size_t)(s->p - start));
}

/* The canonical bytes of the checked object start:stop, or NULL with no error set when it
 * is left to orjson (NULL with an error: no memory). */
static PyObject *canonical_bytes(ptr start, ptr stop) {
    if (start >= stop || *start != '{') return NULL;
    Buf out = {NULL, 0, 0};
    Scan s = {start, stop, start, 0};
    PyObject *bytes = NULL;
    if (canon_write(&s, &out, 0)) {
        bytes = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    }
    free(out.data);
    return bytes;
}

static PyObject *canonical_args(PyObject *self, PyObject *arg) {
    char *data;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(arg, &data, &size) < 0) return NULL;
    Scan s = {(ptr)data, (ptr)data + size, (ptr)data, 0};
    ws(&s);
    ptr start = s.p;
    if (!value(&s)) Py_RETURN_NONE; /* not JSON this reader checks */
    ptr stop = s.p;
    ws(&s);
    if (s.p != s.end) Py_RETURN_NONE;
    PyObject *out = canonical_bytes(start, stop);
    if (!out && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

/* ---- BLAKE2b (RFC 7693), for the digest of a call's short arguments ----------------------
 * `base.args_digest`: "#" + urlsafe base64 of the 9-byte BLAKE2b of the canonical bytes. */
static const uint64_t blake2b_iv[8] = {
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL, 0xA54FF53A5F1D36F1ULL,
    0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL, 0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL,
};

static const unsigned char blake2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t rotr64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static void blake2b_compress(uint64_t h[8], const unsigned char block[128], uint64_t t,
                             int last) {
    uint64_t v[16], m[16];
    for (int k = 0; k < 16; k++) {
        uint64_t w = 0;
        for (int b = 7; b >= 0; b--) w = (w << 8) | block[8 * k + b];
        m[k] = w;
    }
    for (int k = 0; k < 8; k++) {
        v[k] = h[k];
        v[k + 8] = blake2b_iv[k];
    }
    v[12] ^= t; /* the low 64 bits of the byte counter; arguments are far shorter */
    if (last) v[14] = ~v[14];
#define G(a, b, c, d, x, y)              \
    do {                                 \
        v[a] = v[a] + v[b] + (x);        \
        v[d] = rotr64(v[d] ^ v[a], 32);  \
        v[c] = v[c] + v[d];              \
        v[b] = rotr64(v[b] ^ v[c], 24);  \
        v[a] = v[a] + v[b] + (y);        \
        v[d] = rotr64(v[d] ^ v[a], 16);  \
        v[c] = v[c] + v[d];              \
        v[b] = rotr64(v[b] ^ v[c], 63);  \
    } while (0)
    for (int r = 0; r < 12; r++) {
        const unsigned char *s = blake2b_sigma[r];
        G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
#undef G
    for (int k = 0; k < 8; k++) h[k] ^= v[k] ^ v[k + 8];
}

/* The `out_len`-byte BLAKE2b (no key) of `n` bytes at `data`. */
static void blake2b(const unsigned char *data, size_t n, unsigned char *out, int out_len) {
    uint64_t h[8];
    memcpy(h, blake2b_iv, sizeof h);
    h[0] ^= 0x01010000ULL ^ (uint64_t)out_len;
    unsigned char block[128];
    size_t done = 0;
    while (n - done > 128) {
        memcpy(block, data + done, 128);
        done += 128;
        blake2b_compress(h, block, (uint64_t)done, 0);
    }
    memset(block, 0, sizeof block);
    memcpy(block, data + done, n - done);
    blake2b_compress(h, block, (uint64_t)n, 1);
    for (int k = 0; k < out_len; k++) out[k] = (unsigned char)(h[k / 8] >> (8 * (k % 8)));
}

/* `args_digest` of canonical bytes: "#" and 12 characters of urlsafe base64. */
static PyObject *args_digest(const unsigned char *data, size_t n) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char d[9];
    blake2b(data, n, d, 9);
    char text[13];
    text[0] = '#';
    for (int k = 0; k < 3; k++) {
        uint32_t w = ((uint32_t)d[3 * k] << 16) | ((uint32_t)d[3 * k + 1] << 8) | d[3 * k + 2];
        text[1 + 4 * k] = alphabet[(w >> 18) & 63];
        text[2 + 4 * k] = alphabet[(w >> 12) & 63];
        text[3 + 4 * k] = alphabet[(w >> 6) & 63];
        text[4 + 4 * k] = alphabet[w & 63];
    }
    return PyUnicode_FromStringAndSize(text, 13);
}

static PyObject *digest_of(PyObject *self, PyObject *arg) {
    char *data;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(arg, &data, &size) < 0) return NULL;
    return args_digest((const unsigned char *)data, (size_t)size);
}

/* Whether a text plainly starts no repair marker: its first character past whitespace,
 * within its first 32, is ASCII and starts none (see markers.may_be_marker). */
static int plain_text(const Str *text) {
    ptr p = text->at, end = text->at + text->len;
    for (int chars = 0; chars < 32 && p < end; chars++) {
        unsigned char c = *p;
        if (c == '\\') {
            unsigned char e = p[1];
            if (e == 't' || e == 'n' || e == 'r' || e == 'f') {
                p += 2; /* whitespace, stripped first */
                continue;
            }
            if (e == 'u') return 0; /* maybe whitespace: left to the whole reading */
            return 1;               /* a quote, backslash, slash or backspace: no marker's */
        }
        if (c == ' ') {
            p++;
            continue;
        }
        if (c >= 0x80) return 0; /* maybe whitespace beyond ASCII */
        return !marker_first[c];
    }
    return 0;
}

/* The first text of a result's content, when the content is a list. */
typedef struct {
    Val text;
} Head;

static int head_member(Scan *s, const Str *key, void *ctx) {
    Head *h = ctx;
    if (key_is(key, "text")) return keep(s, &h->text);
    return value(s);
}

/* A result's content: kept, and whether its first text plainly starts no marker. */
static int content_value(Scan *s, Val *v, int *plain) {
    if (v->seen) return 0;
    *plain = 0;
    ptr at = s->p;
    if (at < s->end && *at == '[') {
        /* the list's first item, if an object, read for its text; the rest skipped */
        v->seen = 1;
        v->start = at;
        v->first = '[';
        int state = open_items(s, ']');
        for (int index = 0; state == 1; index++) {
            if (index == 0 && s->p < s->end && *s->p == '{') {
                Head h = {{0}};
                if (!members(s, head_member, &h)) return 0;
                if (h.text.seen && h.text.first == '"') *plain = plain_text(&h.text.str);
            } else if (!value(s)) {
                return 0;
            }
            state = after_item(s, ']');
        }
        if (state != 2) return 0;
        v->stop = s->p;
        return 1;
    }
    if (!keep(s, v)) return 0;
    if (v->first == '"') *plain = plain_text(&v->str);
    return 1;
}

/* One content block, with every key either format reads in a block. */
typedef struct {
    Val type, text, id, name, input, arguments, tool_use_id, is_error, content, partial;
    int plain;
} Block;

static int block_member(Scan *s, const Str *key, void *ctx) {
    Block *b = ctx;
    switch (key->len) {
        case 2:
            if (key_is(key, "id")) return keep(s, &b->id);
            break;
        case 4:
            if (key_is(key, "type")) return keep(s, &b->type);
            if (key_is(key, "text")) return keep(s, &b->text);
            if (key_is(key, "name")) return keep(s, &b->name);
            break;
        case 5:
            if (key_is(key, "input")) return keep(s, &b->input);
            break;
        case 7:
            if (key_is(key, "content")) return content_value(s, &b->content, &b->plain);
            break;
        case 8:
            if (key_is(key, "is_error")) return keep(s, &b->is_error);
            break;
        case 9:
            if (key_is(key, "arguments")) return keep(s, &b->arguments);
            break;
        case 11:
            if (key_is(key, "tool_use_id")) return keep(s, &b->tool_use_id);
            if (key_is(key, "partialJson")) return keep(s, &b->partial);
            break;
    }
    return value(s);
}

/* A call or a result of a line, before its Python tuple is made. */
typedef struct {
    int block;
    Val id, name, body;
    int flag; /* a call: partial; a result: is_error */
    int plain;
} Item;

typedef struct {
    int json;   /* 1: a Claude Code line; 2: an OpenClaw entry */
    int blocks; /* 1 once the content was a list */
    long other;
    int ncalls, nresults;
    Item calls[MAX_ITEMS], results[MAX_ITEMS];
    int texts_only; /* every block an object with a text string (OpenClaw user content) */
} Content;

/* A string or null or missing: 1, else 0 (another type: the reading is left to orjson). */
static inline int optional_str(const Val *v) {
    if (!v->seen || v->first == 'n') return 1;
    return v->first == '"' && !v->str.escaped;
}

static int content_list(Scan *s, Content *c) {
    c->blocks = 1;
    c->texts_only = 1;
    int state = open_items(s, ']');
    for (int j = 0; state == 1; j++) {
        if (s->p < s->end && *s->p == '{') {
            Block b;
            memset(&b, 0, sizeof b);
            if (!members(s, block_member, &b)) return 0;
            if (!(b.text.seen && b.text.first == '"')) c->texts_only = 0;
            /* a type that is not a string (or is escaped) is left to the whole reading */
            if (!optional_str(&b.type)) return 0;
            int call = 0, result = 0;
            if (c->json == 1) {
                call = str_is(&b.type, "tool_use");
                result = str_is(&b.type, "tool_result");
            } else {
                call = str_is(&b.type, "toolCall") || str_is(&b.type, "toolUse") ||
                       str_is(&b.type, "functionCall");
            }
            if (str_is(&b.type, "text")) {
                if (b.text.seen && b.text.first != '"') return 0; /* not a string: as ever */
                c->other++;
            } else if (call) {
                if (c->ncalls >= MAX_ITEMS) return 0;
                if (!optional_str(&b.id) || !optional_str(&b.name)) return 0;
                Item *it = &c->calls[c->ncalls++];
                it->block = j;
                it->id = b.id;
                it->name = b.name;
                if (c->json == 1) {
                    it->body = b.input;
                    it->flag = 0;
                } else {
                    it->body = b.arguments.seen ? b.arguments : b.input;
                    it->flag = b.partial.seen && !(it->body.seen && it->body.first == '{');
                }
            } else if (result) {
                if (c->nresults >= MAX_ITEMS) return 0;
                if (!optional_str(&b.tool_use_id)) return 0;
                Item *it = &c->results[c->nresults++];
                it->block = j;
                it->id = b.tool_use_id;
                it->body = b.content;
                it->flag = is_true(&b.is_error);
                it->plain = b.plain;
            } else {
                c->other++;
            }
        } else {
            if (!value(s)) return 0;
            c->other++;
            c->texts_only = 0;
        }
        state = after_item(s, ']');
    }
    return state == 2;
}

/* A line's message object, with what either format reads of it. */
typedef struct {
    Val id, content, role, stop, error, call_id, use_id, is_error;
    Content *c;
    int plain;
} Message;

static int message_member(Scan *s, const Str *key, void *ctx) {
    Message *m = ctx;
    if (key_is(key, "content")) {
        if (m->content.seen) return 0;
        if (s->p < s->end && *s->p == '[' && !(m->c->json == 2 && m->role.seen &&
                                                str_is(&m->role, "toolResult"))) {
            /* read block by block; an OpenClaw tool result's content is its text */
            m->content.seen = 1;
            m->content.start = s->p;
            m->content.first = '[';
            if (!content_list(s, m->c)) return 0;
            m->content.stop = s->p;
            return 1;
        }
        return content_value(s, &m->content, &m->plain);
    }
    if (m->c->json == 1) {
        if (key_is(key, "id")) return keep(s, &m->id);
    } else {
        if (key_is(key, "role")) return keep(s, &m->role);
        if (key_is(key, "stopReason")) return keep(s, &m->stop);
        if (key_is(key, "errorMessage")) return keep(s, &m->error);
        if (key_is(key, "toolCallId")) return keep(s, &m->call_id);
        if (key_is(key, "toolUseId")) return keep(s, &m->use_id);
        if (key_is(key, "isError")) return keep(s, &m->is_error);
    }
    return value(s);
}

/* The top-level object of a line. */
typedef struct {
    Val type, message, uid, parent, sidechain, api_error;
    Message m;
    int message_object;
} Line;

static int line_member(Scan *s, const Str *key, void *ctx) {
    Line *l = ctx;
    if (key_is(key, "type")) {
        /* a line of another type is left to orjson at once, unread past here */
        if (!keep(s, &l->type)) return 0;
        if (l->m.c->json == 1) return str_is(&l->type, "assistant") || str_is(&l->type, "user");
        return str_is(&l->type, "message");
    }
    if (key_is(key, "message")) {
        if (l->message.seen) return 0;
        l->message.seen = 1;
        l->message.start = s->p;
        if (s->p < s->end && *s->p == '{') {
            l->message_object = 1;
            return members(s, message_member, &l->m);
        }
        l->message.seen = 0;
        return keep(s, &l->message);
    }
    if (l->m.c->json == 1) {
        if (key_is(key, "uuid")) return keep(s, &l->uid);
        if (key_is(key, "parentUuid")) return keep(s, &l->parent);
        if (key_is(key, "isSidechain")) return keep(s, &l->sidechain);
        if (key_is(key, "isApiErrorMessage")) return keep(s, &l->api_error);
    } else {
        if (key_is(key, "id")) return keep(s, &l->uid);
        if (key_is(key, "parentId")) return keep(s, &l->parent);
    }
    return value(s);
}

/* A str of a string value, or None for any other value (as `isinstance(x, str)` reads). */
static PyObject *text_or_none(const Val *v) {
    if (v->seen && v->first == '"')
        return PyUnicode_DecodeUTF8((const char *)v->str.at, v->str.len, NULL);
    Py_RETURN_NONE;
}

static PyObject *items(const Item *list, int n, ptr base, int results) {
    PyObject *out = PyTuple_New(n);
    if (!out) return NULL;
    for (int k = 0; k < n; k++) {
        const Item *it = &list[k];
        Py_ssize_t start = it->body.seen ? it->body.start - base : -1;
        Py_ssize_t stop = it->body.seen ? it->body.stop - base : -1;
        PyObject *id = text_or_none(&it->id);
        PyObject *name = results ? NULL : text_or_none(&it->name);
        PyObject *row;
        if (!id || (!results && !name)) {
            Py_XDECREF(id);
            Py_XDECREF(name);
            Py_DECREF(out);
            return NULL;
        }
        if (results)
            row = Py_BuildValue("(iNOnnO)", it->block, id, it->flag ? Py_True : Py_False, start,
                                stop, it->plain ? Py_True : Py_False);
        else
            row = Py_BuildValue("(iNNnnOO)", it->block, id, name, start, stop,
                                it->flag ? Py_True : Py_False,
                                it->body.seen && canonical(it->body.start, it->body.stop)
                                    ? Py_True
                                    : Py_False);
        if (!row) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k, row);
    }
    return out;
}

/* A string's ASCII bytes: 1 when one is not whitespace, 0 when all are, -1 when unsure. */
static int stripped_nonempty(const Val *v) {
    int unsure = 0;
    for (Py_ssize_t k = 0; k < v->str.len; k++) {
        unsigned char c = v->str.at[k];
        if (c == '\\') {
            unsure = 1; /* an escape: skipped (the string was checked when it was read) */
            k += v->str.at[k + 1] == 'u' ? 5 : 1;
        } else if (c >= 0x80) {
            unsure = 1;
        } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return 1;
        }
    }
    return unsure ? -1 : 0;
}

/* What `read_line` found of a line: its kind, role and bits, with `l` and `c` filled. */
typedef struct {
    Content c;
    Line l;
    const char *kind; /* the record's kind, or NULL: it is the role string `l.m.role` */
    int role;
    long bits;
} Fields;

/* Read `size` bytes at `data` into `f`: 1 when the line is one this reader covers, else 0. */
static int read_line(const char *data, Py_ssize_t size, int json, Fields *f) {
    Content *c = &f->c;
    Line *l = &f->l;
    memset(l, 0, sizeof *l);
    c->json = json;
    c->blocks = 0;
    c->other = 0;
    c->ncalls = c->nresults = 0;
    c->texts_only = 0;
    l->m.c = c;
    f->bits = 0;
    Scan s = {(ptr)data, (ptr)data + size, (ptr)data, 0};
    ws(&s);
    if (!members(&s, line_member, l)) return 0;
    ws(&s);
    if (s.p != s.end || !l->message_object) return 0;
    Message *m = &l->m;
    if (!optional_str(&l->type) || !optional_str(&l->uid) || !optional_str(&l->parent))
        return 0;
    if (json == 1) {
        if (str_is(&l->type, "assistant")) {
            f->kind = "assistant";
            f->role = 1;
            if (is_true(&l->api_error)) return 0; /* maybe a failed request's note */
            if (!optional_str(&m->id)) return 0;
        } else if (str_is(&l->type, "user")) {
            f->kind = "user";
            f->role = 0;
        } else {
            return 0;
        }
        if (is_true(&l->sidechain)) f->bits |= bit_sidechain;
        if (!c->blocks && m->content.seen && m->content.first == '"' && m->content.str.len > 0)
            c->other = 1;
        return 1;
    }
    if (!str_is(&l->type, "message")) return 0;
    if (!m->role.seen || m->role.first != '"' || m->role.str.escaped) return 0;
    if (str_is(&m->role, "assistant")) {
        f->kind = "assistant";
        f->role = 1;
        if (!optional_str(&m->stop)) return 0;
        int stopped = str_is(&m->stop, "error") || str_is(&m->stop, "aborted");
        int interrupted = stopped || str_is(&m->stop, "length");
        if (m->error.seen && m->error.first == '"') {
            int nonempty = stripped_nonempty(&m->error);
            if (nonempty < 0) return 0;
            interrupted |= nonempty;
        }
        if (stopped) f->bits |= bit_aborted;
        if (interrupted) f->bits |= bit_interrupted;
        if (!c->blocks && m->content.seen && m->content.first == '"') c->other = 1;
    } else if (str_is(&m->role, "toolResult")) {
        f->kind = "toolResult";
        f->role = 2;
        Val *id = m->call_id.seen ? &m->call_id : &m->use_id;
        if (!optional_str(id)) return 0;
        /* its content is its text: a call block read in it before the role was seen
         * (content written before role) is no call of this entry */
        c->ncalls = 0;
        c->nresults = 1;
        c->results[0].block = 0;
        c->results[0].id = *id;
        c->results[0].body = m->content;
        c->results[0].flag = is_true(&m->is_error);
        c->results[0].plain = m->plain;
        c->other = 0;
    } else {
        /* another role: a user's message, its content a text or texts */
        f->kind = NULL;
        f->role = 0;
        if (!(m->content.seen && m->content.first == '"') && !(c->blocks && c->texts_only))
            return 0;
        if (c->ncalls || c->nresults) return 0;
        c->other = 1;
    }
    return 1;
}

static PyObject *kind_of(const Fields *f) {
    if (f->kind) return PyUnicode_FromString(f->kind);
    const Str *role = &f->l.m.role.str;
    return PyUnicode_DecodeUTF8((const char *)role->at, role->len, NULL);
}

static PyObject *scan(PyObject *arg, int json) {
    char *data;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(arg, &data, &size) < 0) return NULL;
    Fields f;
    if (!read_line(data, size, json, &f)) Py_RETURN_NONE;
    Content *c = &f.c;
    ptr base = (ptr)data;
    PyObject *kind_text = kind_of(&f);
    if (!kind_text) return NULL;
    PyObject *uid = text_or_none(&f.l.uid), *parent = text_or_none(&f.l.parent);
    PyObject *message_id =
        json == 1 && f.role == 1 ? text_or_none(&f.l.m.id) : (Py_INCREF(Py_None), Py_None);
    PyObject *calls = items(c->calls, c->ncalls, base, 0);
    PyObject *results = items(c->results, c->nresults, base, 1);
    if (!uid || !parent || !message_id || !calls || !results) {
        Py_XDECREF(kind_text);
        Py_XDECREF(uid);
        Py_XDECREF(parent);
        Py_XDECREF(message_id);
        Py_XDECREF(calls);
        Py_XDECREF(results);
        return NULL;
    }
    return Py_BuildValue("(NilNNNlNN)", kind_text, f.role, f.bits, uid, parent, message_id,
                         c->other, calls, results);
}

/* ---- A line appended to a RecordStore (transcripts/core/store.py) in place ----------------
 *
 * `append_message` written for a scanned line, with the store's own columns, arena and
 * dicts, so the store ends as `store_scanned` + `RecordStore.append_message` leave it, to
 * the byte. The rows of calls and results are made by the same Python functions
 * `store_scanned` calls. Before anything is written, every case `append_message` would
 * handle otherwise (a new kind, wide values, rows that do not fit, a row function raising)
 * returns None: the loader then reads the line with orjson, as when `store_scanned` raised.
 */

/* Set by configure_store from the store module's constants and functions. */
static PyObject *f_call_row, *f_canonical_row, *f_result_text, *f_loads, *f_name_problem;
static long long k_args_kept;
static long long k_chunk_mask, k_arena_chunk, k_arena_bits, k_length_bits, k_uuid, k_wide;
static long long k_span_bits, k_line_bits, k_count_bits, k_rows_limit, k_recent, k_role_bits;
static long long k_other_shift, k_hash_mask;
static long long k_role_code[3];
static PyObject *s_count, *s_tails, *s_kind_codes, *s_last_uid, *s_chained, *s_last_message;
static PyObject *s_arena, *s_arena_used, *s_long, *s_shared, *s_uid_slots, *s_call_more;
static PyObject *s_call_block, *s_call_id, *s_call_name, *s_call_args;
static PyObject *s_result_block, *s_result_id, *s_result_text, *s_result_error;
static PyObject *s_chunks, *s_size, *s_grow, *s_grow_tails, *s_set_kind;
static PyObject *k_role_objects[3]; /* the Roles of a scanner's role codes */
static PyObject *k_kinds[3]; /* "user", "assistant", "toolResult" */
static int store_ready = 0;

/* Item `slot` of an array's buffer (of 8-, 4- or 1-byte items) set to `value`. */
static inline void put_item(const Py_buffer *b, Py_ssize_t slot, long long value) {
    if (b->itemsize == 8)
        ((int64_t *)b->buf)[slot] = (int64_t)value;
    else if (b->itemsize == 4)
        ((uint32_t *)b->buf)[slot] = (uint32_t)value;
    else
        ((uint8_t *)b->buf)[slot] = (uint8_t)value;
}

static int get_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int set_ll(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (!v) return -1;
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

/* One of a store's row columns (a `_Column`), appended to value by value. */
typedef struct {
    PyObject *col;
    long long size;
    Py_buffer buf;
    int open;
} Col;

static int col_begin(PyObject *store, PyObject *name, Col *c) {
    c->open = 0;
    c->col = PyObject_GetAttr(store, name);
    if (!c->col) return -1;
    return get_ll(c->col, s_size, &c->size);
}

static int col_append(Col *c, long long value) {
    long long slot = c->size & k_chunk_mask;
    if (!slot || !c->open) {
        if (c->open) {
            PyBuffer_Release(&c->buf);
            c->open = 0;
        }
        if (!slot) {
            PyObject *r = PyObject_CallMethodNoArgs(c->col, s_grow);
            if (!r) return -1;
            Py_DECREF(r);
        }
        PyObject *chunks = PyObject_GetAttr(c->col, s_chunks);
        if (!chunks) return -1;
        if (!PyList_Check(chunks) || PyList_GET_SIZE(chunks) == 0) {
            Py_DECREF(chunks);
            PyErr_SetString(PyExc_TypeError, "a store column without chunks");
            return -1;
        }
        PyObject *last = PyList_GET_ITEM(chunks, PyList_GET_SIZE(chunks) - 1);
        int r = PyObject_GetBuffer(last, &c->buf, PyBUF_WRITABLE);
        Py_DECREF(chunks);
        if (r < 0) return -1;
        c->open = 1;
    }
    put_item(&c->buf, slot, value);
    c->size++;
    return 0;
}

/* Write the column's new size back and let it go; 0, or -1 (the first error kept). */
static int col_end(Col *c, int ok) {
    if (c->open) PyBuffer_Release(&c->buf);
    c->open = 0;
    int r = ok && c->col ? set_ll(c->col, s_size, c->size) : 0;
    Py_CLEAR(c->col);
    return ok ? r : -1;
}

/* The store's strings: `_put` and `_put_shared` as store.py writes them. */
typedef struct {
    PyObject *store, *arena, *longs, *shared;
    long long used;
} Strings;

static int is_uuid(const char *t, Py_ssize_t n, unsigned char *packed) {
    if (n != 36 || t[8] != '-' || t[13] != '-' || t[18] != '-' || t[23] != '-') return 0;
    int k = 0;
    for (int j = 0; j < 36; j++) {
        if (j == 8 || j == 13 || j == 18 || j == 23) continue;
        /* lowercase only: store.py's `_uuid_bytes` packs no capitals */
        int v = t[j] >= 'A' && t[j] <= 'F' ? -1 : hexval((unsigned char)t[j]);
        if (v < 0) return 0;
        if (k & 1)
            packed[k >> 1] |= (unsigned char)v;
        else
            packed[k >> 1] = (unsigned char)(v << 4);
        k++;
    }
    return 1;
}

/* `_put(text)`: its reference, or -2**62 on an error. */
#define PUT_FAILED (-(1LL << 62))
static long long put(Strings *st, PyObject *text) {
    if (text == Py_None) return -1;
    if (PyUnicode_GET_LENGTH(text) == 0) return 0;
    Py_ssize_t size;
    const char *data = PyUnicode_AsUTF8AndSize(text, &size);
    PyObject *encoded = NULL;
    if (!data) {
        PyErr_Clear();
        encoded = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
        if (!encoded) return PUT_FAILED;
        data = PyBytes_AS_STRING(encoded);
        size = PyBytes_GET_SIZE(encoded);
    }
    unsigned char packed[16];
    int uuid = is_uuid(data, size, packed);
    if (uuid) {
        data = (const char *)packed;
        size = 16;
    }
    if (size > k_arena_chunk) {
        Py_XDECREF(encoded);
        if (PyList_Append(st->longs, text) < 0) return PUT_FAILED;
        return -1 - (long long)PyList_GET_SIZE(st->longs);
    }
    if (st->used + size > k_arena_chunk) {
        PyObject *chunk = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)k_arena_chunk);
        if (!chunk) {
            Py_XDECREF(encoded);
            return PUT_FAILED;
        }
        memset(PyByteArray_AS_STRING(chunk), 0, (size_t)k_arena_chunk);
        int r = PyList_Append(st->arena, chunk);
        Py_DECREF(chunk);
        if (r < 0) {
            Py_XDECREF(encoded);
            return PUT_FAILED;
        }
        st->used = 0;
    }
    Py_ssize_t chunks = PyList_GET_SIZE(st->arena);
    PyObject *last = chunks ? PyList_GET_ITEM(st->arena, chunks - 1) : NULL;
    if (!last || !PyByteArray_Check(last) || st->used < 0 ||
        PyByteArray_GET_SIZE(last) < st->used + size) {
        /* `_put` would fail too (an IndexError, or a chunk grown): never written past */
        Py_XDECREF(encoded);
        PyErr_SetString(PyExc_TypeError, "a store's arena is not its chunks of _ARENA_CHUNK bytes");
        return PUT_FAILED;
    }
    char *chunk = PyByteArray_AS_STRING(last);
    memcpy(chunk + st->used, data, (size_t)size);
    Py_XDECREF(encoded);
    long long at = ((long long)(chunks - 1) << k_arena_bits) | st->used;
    st->used += size;
    return (at << k_length_bits) | (uuid ? k_uuid : size);
}

static long long put_shared(Strings *st, PyObject *text) {
    if (text == Py_None || PyUnicode_GET_LENGTH(text) == 0) return put(st, text);
    PyObject *ref = PyDict_GetItemWithError(st->shared, text);
    if (ref) return PyLong_AsLongLong(ref);
    if (PyErr_Occurred()) return PUT_FAILED;
    if (PyDict_GET_SIZE(st->shared) >= k_recent) PyDict_Clear(st->shared);
    long long value = put(st, text);
    if (value == PUT_FAILED) return PUT_FAILED;
    PyObject *v = PyLong_FromLongLong(value);
    if (!v || PyDict_SetItem(st->shared, text, v) < 0) {
        Py_XDECREF(v);
        return PUT_FAILED;
    }
    Py_DECREF(v);
    return value;
}

/* Whether two str-or-None values are equal, as `==` reads them; -1 on an error. */
static int same(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (a == Py_None || b == Py_None) return 0;
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* Whether a Python error may be taken as a row function refusing the line (as the loader
 * takes `store_scanned` raising): cleared then. */
static int refused(void) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return 0;
    PyErr_Clear();
    return 1;
}

/* The arguments' or content's value: loads(raw[at:stop]), or None when there is none. */
static PyObject *loaded(const Val *v) {
    if (!v->seen) Py_RETURN_NONE;
    PyObject *data = PyBytes_FromStringAndSize((const char *)v->start, v->stop - v->start);
    if (!data) return NULL;
    PyObject *out = PyObject_CallOneArg(f_loads, data);
    Py_DECREF(data);
    return out;
}

/* `canonical_call_row(block, id, name, data)` made here for the common case: an id and a
 * name that are strings, the id not blank, and at most _ARGS_KEPT bytes of arguments
 * (digested whole). NULL with no error set for any other case (the Python function then). */
static PyObject *name_problems; /* tool name -> `_name_problem`, as base.py keeps it */

static PyObject *short_row(PyObject *block, PyObject *id, PyObject *name, const Val *id_val,
                           ptr data, size_t n) {
    if (id == Py_None || name == Py_None || n > (size_t)k_args_kept ||
        stripped_nonempty(id_val) != 1)
        return NULL;
    PyObject *problem = PyDict_GetItemWithError(name_problems, name);
    if (problem) {
        Py_INCREF(problem);
    } else {
        if (PyErr_Occurred()) return NULL;
        PyObject *a[2] = {id, name};
        problem = PyObject_Vectorcall(f_name_problem, a, 2, NULL);
        if (!problem) return NULL;
        if (!PyUnicode_CheckExact(problem)) {
            Py_DECREF(problem);
            PyErr_SetString(PyExc_TypeError, "a tool name's problem is not a str");
            return NULL;
        }
        if (PyDict_GET_SIZE(name_problems) >= 4096) PyDict_Clear(name_problems);
        if (PyDict_SetItem(name_problems, name, problem) < 0) {
            Py_DECREF(problem);
            return NULL;
        }
    }
    PyObject *digest = args_digest(data, n);
    if (!digest) {
        Py_DECREF(problem);
        return NULL;
    }
    PyObject *row = PyTuple_Pack(5, block, id, name, digest, problem);
    Py_DECREF(digest);
    Py_DECREF(problem);
    return row;
}

/* The rows `store_scanned` makes of a line's calls and results, as lists; 0 when a row
 * function refused the line, -1 on an error. */
static int rows(const Fields *f, PyObject **calls, PyObject **results) {
    const Content *c = &f->c;
    *calls = PyList_New(c->ncalls);
    *results = PyList_New(c->nresults);
    if (!*calls || !*results) return -1;
    for (int k = 0; k < c->ncalls; k++) {
        const Item *it = &c->calls[k];
        PyObject *id = text_or_none(&it->id), *name = text_or_none(&it->name), *row = NULL;
        PyObject *block = PyLong_FromLong(it->block), *body = NULL;
        if (id && name && block) {
            if (it->body.seen && canonical(it->body.start, it->body.stop)) {
                row = short_row(block, id, name, &it->id, it->body.start,
                                (size_t)(it->body.stop - it->body.start));
                if (!row && !PyErr_Occurred()) {
                    body = PyBytes_FromStringAndSize((const char *)it->body.start,
                                                     it->body.stop - it->body.start);
                    if (body) {
                        PyObject *a[4] = {block, id, name, body};
                        row = PyObject_Vectorcall(f_canonical_row, a, 4, NULL);
                    }
                }
            } else if (!it->flag && it->body.seen && it->body.first == '{' &&
                       (body = canonical_bytes(it->body.start, it->body.stop))) {
                /* written otherwise than orjson writes it: the same digest of its rewriting */
                row = short_row(block, id, name, &it->id, (ptr)PyBytes_AS_STRING(body),
                                (size_t)PyBytes_GET_SIZE(body));
                if (!row && !PyErr_Occurred()) {
                    PyObject *a[4] = {block, id, name, body};
                    row = PyObject_Vectorcall(f_canonical_row, a, 4, NULL);
                }
            } else if (!PyErr_Occurred() && (body = loaded(&it->body))) {
                PyObject *a[5] = {block, id, name, body, it->flag ? Py_True : Py_False};
                row = PyObject_Vectorcall(f_call_row, a, 5, NULL);
            }
        }
        Py_XDECREF(id);
        Py_XDECREF(name);
        Py_XDECREF(block);
        Py_XDECREF(body);
        if (!row) return refused() ? 0 : -1;
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 5) {
            Py_DECREF(row);
            return 0;
        }
        PyList_SET_ITEM(*calls, k, row);
    }
    for (int k = 0; k < c->nresults; k++) {
        const Item *it = &c->results[k];
        PyObject *text;
        if (it->plain) {
            text = PyUnicode_New(0, 0);
        } else {
            PyObject *content = loaded(&it->body);
            if (!content) return refused() ? 0 : -1;
            text = PyObject_CallOneArg(f_result_text, content);
            Py_DECREF(content);
        }
        if (!text) return refused() ? 0 : -1;
        if (!PyUnicode_Check(text)) {
            Py_DECREF(text);
            return 0;
        }
        PyObject *id = it->id.seen && it->id.first == '"'
                           ? PyUnicode_DecodeUTF8((const char *)it->id.str.at, it->id.str.len, NULL)
                           : PyUnicode_New(0, 0);
        if (!id) {
            Py_DECREF(text);
            return -1;
        }
        PyObject *row = Py_BuildValue("(iNON)", it->block, id, it->flag ? Py_True : Py_False,
                                      text);
        if (!row) return -1;
        PyList_SET_ITEM(*results, k, row);
    }
    return 1;
}

static int ready(void) {
    if (store_ready) return 1;
    PyErr_SetString(PyExc_RuntimeError, "configure_store was not called");
    return 0;
}

/* A store's state as the appender writes it, read once for a run of lines and written back
 * (`batch_flush`) before any Python code may read the store: its record count, the last
 * chunks of its per-record columns, its strings, the last uid and message id, and its row
 * columns. Between `batch_open` and `batch_flush` those attributes of the store are stale. */
typedef struct {
    PyObject *store;
    int open;
    long long count;
    PyObject *tails; /* the 12 per-record columns' last chunks, exported in `tail` */
    Py_buffer tail[12];
    int tails_open;
    PyObject *codes; /* `_kind_codes` */
    Strings st;
    PyObject *last_uid; /* `_last_uid` as (last_uid, last_ref) */
    long long last_ref;
    int last_dirty;
    PyObject *last_message; /* `_last_message` as (last_message, message_ref) */
    long long message_ref;
    int message_dirty;
    long long chained;
    int chained_read, chained_dirty;
    int slots_cleared; /* `_uid_slots` set to None, as every append does */
    PyObject *call_more;
    Col col[8];
} Batch;

enum { CB, CI, CN, CA, RB, RI, RT, RE }; /* call block, id, name, args; result ... error */

static int tails_open(Batch *b) {
    if (!(b->tails = PyObject_GetAttr(b->store, s_tails))) return -1;
    if (PyTuple_Check(b->tails) && PyTuple_GET_SIZE(b->tails) == 0)
        return 0; /* a new store: its columns get their first chunks with its first record */
    if (!PyTuple_Check(b->tails) || PyTuple_GET_SIZE(b->tails) != 12) {
        PyErr_SetString(PyExc_TypeError, "a store's tails are not its 12 columns' chunks");
        return -1;
    }
    for (int k = 0; k < 12; k++) {
        Py_buffer *t = &b->tail[k];
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(b->tails, k), t, PyBUF_WRITABLE) < 0) {
            for (int j = 0; j < k; j++) PyBuffer_Release(&b->tail[j]);
            return -1;
        }
        if (t->len < (k_chunk_mask + 1) * t->itemsize ||
            (t->itemsize != 1 && t->itemsize != 4 && t->itemsize != 8)) {
            for (int j = 0; j <= k; j++) PyBuffer_Release(&b->tail[j]);
            PyErr_SetString(PyExc_TypeError, "a store's tail is not a chunk of a column");
            return -1;
        }
    }
    b->tails_open = 1;
    return 0;
}

static void tails_close(Batch *b) {
    if (b->tails_open)
        for (int k = 0; k < 12; k++) PyBuffer_Release(&b->tail[k]);
    b->tails_open = 0;
    Py_CLEAR(b->tails);
}

static int pair_of(PyObject *store, PyObject *name, PyObject **text, long long *ref) {
    PyObject *pair = PyObject_GetAttr(store, name);
    if (!pair) return -1;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        Py_DECREF(pair);
        PyErr_SetString(PyExc_TypeError, "a store's last uid or message is not a pair");
        return -1;
    }
    *ref = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 1));
    if (*ref == -1 && PyErr_Occurred()) {
        Py_DECREF(pair);
        return -1;
    }
    *text = PyTuple_GET_ITEM(pair, 0);
    Py_INCREF(*text);
    Py_DECREF(pair);
    return 0;
}

static int set_pair(PyObject *store, PyObject *name, PyObject *text, long long ref) {
    PyObject *pair = Py_BuildValue("(OL)", text, ref);
    if (!pair) return -1;
    int r = PyObject_SetAttr(store, name, pair);
    Py_DECREF(pair);
    return r;
}

/* Write the batch's state back to its store and let go of it: 0, or -1 when `ok` is 0 or
 * anything failed (the first error kept). Safe on a batch partly opened. */
static int batch_flush(Batch *b, int ok) {
    PyObject *store = b->store;
    int r = ok ? 0 : -1;
    if (!b->open) return r;
    for (int k = 0; k < 8; k++)
        if (col_end(&b->col[k], r == 0) < 0) r = -1;
    if (r == 0 && set_ll(store, s_count, b->count) < 0) r = -1;
    if (r == 0 && b->st.arena && set_ll(store, s_arena_used, b->st.used) < 0) r = -1;
    if (r == 0 && b->last_dirty && set_pair(store, s_last_uid, b->last_uid, b->last_ref) < 0)
        r = -1;
    if (r == 0 && b->message_dirty &&
        set_pair(store, s_last_message, b->last_message, b->message_ref) < 0)
        r = -1;
    if (r == 0 && b->chained_dirty && set_ll(store, s_chained, b->chained) < 0) r = -1;
    if (r == 0 && b->slots_cleared && PyObject_SetAttr(store, s_uid_slots, Py_None) < 0) r = -1;
    tails_close(b);
    Py_CLEAR(b->codes);
    Py_CLEAR(b->st.arena);
    Py_CLEAR(b->st.longs);
    Py_CLEAR(b->st.shared);
    Py_CLEAR(b->last_uid);
    Py_CLEAR(b->last_message);
    Py_CLEAR(b->call_more);
    b->open = 0;
    return r;
}

/* Read `store`'s state into `b`: 0, or -1 on an error (`b` then holds nothing). */
static int batch_open(Batch *b, PyObject *store) {
    PyObject **names[8] = {&s_call_block, &s_call_id,     &s_call_name,   &s_call_args,
                           &s_result_block, &s_result_id, &s_result_text, &s_result_error};
    memset(b, 0, sizeof *b);
    b->store = store;
    b->open = 1;
    b->st.store = store;
    if (get_ll(store, s_count, &b->count) < 0 || tails_open(b) < 0) goto fail;
    if (!(b->codes = PyObject_GetAttr(store, s_kind_codes))) goto fail;
    if (!PyDict_Check(b->codes)) {
        PyErr_SetString(PyExc_TypeError, "a store's kind codes are not a dict");
        goto fail;
    }
    if (!(b->st.arena = PyObject_GetAttr(store, s_arena)) || !PyList_Check(b->st.arena) ||
        !(b->st.longs = PyObject_GetAttr(store, s_long)) || !PyList_Check(b->st.longs) ||
        !(b->st.shared = PyObject_GetAttr(store, s_shared)) || !PyDict_Check(b->st.shared) ||
        get_ll(store, s_arena_used, &b->st.used) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a store's strings are amiss");
        goto fail;
    }
    if (pair_of(store, s_last_uid, &b->last_uid, &b->last_ref) < 0 ||
        pair_of(store, s_last_message, &b->last_message, &b->message_ref) < 0)
        goto fail;
    for (int k = 0; k < 8; k++)
        if (col_begin(store, *names[k], &b->col[k]) < 0) goto fail;
    return 0;
fail:
    batch_flush(b, 0);
    return -1;
}

/* Call one of the store's own methods (`_grow_tails`, `_set_kind`) with its state written
 * back first and read again after: 0, or -1 on an error (the batch then closed). */
static int batch_call(Batch *b, PyObject *name, PyObject *args) {
    PyObject *store = b->store;
    if (batch_flush(b, 1) < 0) return -1;
    PyObject *method = PyObject_GetAttr(store, name);
    PyObject *r = method ? PyObject_Call(method, args, NULL) : NULL;
    Py_XDECREF(method);
    if (!r) return -1;
    Py_DECREF(r);
    return batch_open(b, store);
}

static inline void tail_put(Batch *b, int k, Py_ssize_t slot, long long value) {
    put_item(&b->tail[k], slot, value);
}

/* The line of `size` bytes at `data` (the file's bytes start:end, line `line`) appended to
 * the batch's store: 1, or 0 when it is left to orjson (nothing written), or -1 on an error
 * (the batch may then be closed). */
static int append_one(Batch *b, const char *data, Py_ssize_t size, long long start,
                      long long end, long long line, int json) {
    Fields f;
    if (!read_line(data, size, json, &f)) return 0;
    long long bits = ((long long)f.c.other << k_other_shift) | f.bits;
    if (f.c.other < 0 || f.c.other > (k_wide >> k_other_shift) || bits >= k_wide ||
        start < 0 || end < start || (start | end) >> k_span_bits || line < 0 ||
        line >> k_line_bits || end - start >= k_wide)
        return 0; /* what append_message refuses or keeps apart */

    PyObject *kind = NULL, *code = NULL, *uid = NULL, *parent = NULL, *message = NULL;
    PyObject *calls = NULL, *results = NULL, *result = NULL;
    Col *cb = &b->col[CB], *ci = &b->col[CI], *cn = &b->col[CN], *ca = &b->col[CA];
    Col *rb = &b->col[RB], *ri = &b->col[RI], *rt = &b->col[RT], *re = &b->col[RE];
    Strings *st = &b->st;
    int ok = 0;

    /* Everything append_message could do otherwise is decided before anything is written. */
    if (f.kind) {
        kind = k_kinds[f.role];
        Py_INCREF(kind);
    } else if (!(kind = kind_of(&f))) {
        goto done;
    }
    code = PyDict_GetItemWithError(b->codes, kind);
    long long kind_code = -1; /* -1: a new kind, given its code by `_set_kind` */
    if (code) {
        kind_code = PyLong_AsLongLong(code);
        if (kind_code < 0) {
            if (!PyErr_Occurred()) result = Py_None;
            goto done;
        }
    } else if (PyErr_Occurred()) {
        goto done;
    }
    uid = text_or_none(&f.l.uid);
    parent = text_or_none(&f.l.parent);
    message = json == 1 && f.role == 1 ? text_or_none(&f.l.m.id) : (Py_INCREF(Py_None), Py_None);
    if (!uid || !parent || !message) goto done;
    int made = rows(&f, &calls, &results);
    if (made <= 0) {
        if (made == 0) result = Py_None;
        goto done;
    }
    long long ncalls = PyList_GET_SIZE(calls), nresults = PyList_GET_SIZE(results);
    if ((ncalls && cb->size + ncalls >= k_rows_limit) ||
        (nresults && rb->size + nresults >= k_rows_limit)) {
        result = Py_None; /* rows that do not fit: kept apart by append_message */
        goto done;
    }
    for (long long k = 0; k < ncalls; k++) {
        PyObject *row = PyList_GET_ITEM(calls, k);
        long long block = PyLong_AsLongLong(PyTuple_GET_ITEM(row, 0));
        if (block == -1 && PyErr_Occurred()) goto done;
        for (int j = 1; j < 5; j++)
            if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(row, j))) {
                result = Py_None;
                goto done;
            }
        if (block < 0 || block >= k_wide) {
            result = Py_None;
            goto done;
        }
    }

    /* The writing: as append_message does it, field by field. */
    long long index = b->count;
    long long slot = index & k_chunk_mask;
    if (!slot) {
        PyObject *none = PyTuple_New(0);
        int r = none ? batch_call(b, s_grow_tails, none) : -1;
        Py_XDECREF(none);
        if (r < 0) goto done;
    }
    if (!b->tails_open) {
        PyErr_SetString(PyExc_TypeError, "a store's tails are not its 12 columns' chunks");
        goto done;
    }
    b->count = index + 1;
    b->slots_cleared = 1;
    tail_put(b, 0, slot, start);
    tail_put(b, 1, slot, end - start);
    tail_put(b, 2, slot, line);
    if (kind_code >= 0) {
        tail_put(b, 3, slot, (kind_code << k_role_bits) | k_role_code[f.role]);
    } else {
        PyObject *args = Py_BuildValue("(LOO)", index, kind, k_role_objects[f.role]);
        int r = args ? batch_call(b, s_set_kind, args) : -1;
        Py_XDECREF(args);
        if (r < 0) goto done;
    }
    tail_put(b, 4, slot, bits);
    int eq = same(uid, b->last_uid);
    if (eq < 0) goto done;
    long long uid_ref = eq ? b->last_ref : put(st, uid);
    if (uid_ref == PUT_FAILED) goto done;
    tail_put(b, 5, slot, uid_ref);
    if (uid != Py_None) {
        Py_hash_t h = PyObject_Hash(uid);
        if (h == -1 && PyErr_Occurred()) goto done;
        tail_put(b, 11, slot, (long long)((uint64_t)h & (uint64_t)k_hash_mask));
    }
    int shared_parent = 0;
    if (parent != Py_None) {
        shared_parent = same(parent, b->last_uid);
        if (shared_parent < 0) goto done;
    }
    if (shared_parent) {
        tail_put(b, 6, slot, b->last_ref);
        int own = same(parent, uid); /* a line that is its own parent links nothing */
        if (own < 0) goto done;
        if (!own) {
            if (!b->chained_read) {
                if (get_ll(b->store, s_chained, &b->chained) < 0) goto done;
                b->chained_read = 1;
            }
            if (b->chained < 0) {
                b->chained = index;
                b->chained_dirty = 1;
            }
        }
    } else {
        long long parent_ref = put(st, parent);
        if (parent_ref == PUT_FAILED) goto done;
        tail_put(b, 6, slot, parent_ref);
    }
    Py_INCREF(uid);
    Py_SETREF(b->last_uid, uid);
    b->last_ref = uid_ref;
    b->last_dirty = 1;
    if (message == Py_None) {
        tail_put(b, 7, slot, -1);
    } else {
        int keep_ref = same(message, b->last_message);
        if (keep_ref < 0) goto done;
        if (!keep_ref) {
            long long message_ref = put(st, message);
            if (message_ref == PUT_FAILED) goto done;
            Py_INCREF(message);
            Py_SETREF(b->last_message, message);
            b->message_ref = message_ref;
            b->message_dirty = 1;
        }
        tail_put(b, 7, slot, b->message_ref);
    }
    tail_put(b, 8, slot, -1);
    if (ncalls) {
        tail_put(b, 9, slot, (cb->size << k_count_bits) | ncalls);
        for (long long k = 0; k < ncalls; k++) {
            PyObject *row = PyList_GET_ITEM(calls, k);
            long long at = cb->size;
            if (col_append(cb, PyLong_AsLongLong(PyTuple_GET_ITEM(row, 0))) < 0) goto done;
            long long r1 = put_shared(st, PyTuple_GET_ITEM(row, 1));
            if (r1 == PUT_FAILED || col_append(ci, r1) < 0) goto done;
            long long r2 = put_shared(st, PyTuple_GET_ITEM(row, 2));
            if (r2 == PUT_FAILED || col_append(cn, r2) < 0) goto done;
            long long r3 = put(st, PyTuple_GET_ITEM(row, 3));
            if (r3 == PUT_FAILED || col_append(ca, r3) < 0) goto done;
            PyObject *problem = PyTuple_GET_ITEM(row, 4);
            if (PyUnicode_GET_LENGTH(problem)) {
                long long r4 = put_shared(st, problem);
                if (r4 == PUT_FAILED) goto done;
                if (!b->call_more && !(b->call_more = PyObject_GetAttr(b->store, s_call_more)))
                    goto done;
                PyObject *key = PyLong_FromLongLong(at);
                PyObject *value = Py_BuildValue("(Li)", r4, 0);
                int r = key && value ? PyObject_SetItem(b->call_more, key, value) : -1;
                Py_XDECREF(key);
                Py_XDECREF(value);
                if (r < 0) goto done;
            }
        }
    }
    if (nresults) {
        tail_put(b, 10, slot, (rb->size << k_count_bits) | nresults);
        for (long long k = 0; k < nresults; k++) {
            PyObject *row = PyList_GET_ITEM(results, k);
            if (col_append(rb, PyLong_AsLongLong(PyTuple_GET_ITEM(row, 0))) < 0) goto done;
            long long r1 = put_shared(st, PyTuple_GET_ITEM(row, 1));
            if (r1 == PUT_FAILED || col_append(ri, r1) < 0) goto done;
            long long r2 = put(st, PyTuple_GET_ITEM(row, 3));
            if (r2 == PUT_FAILED || col_append(rt, r2) < 0) goto done;
            if (col_append(re, PyTuple_GET_ITEM(row, 2) == Py_True) < 0) goto done;
        }
    }
    ok = 1;
    result = Py_True;
done:;
    Py_XDECREF(kind);
    Py_XDECREF(uid);
    Py_XDECREF(parent);
    Py_XDECREF(message);
    Py_XDECREF(calls);
    Py_XDECREF(results);
    if (ok) return 1;
    if (result == Py_None && !PyErr_Occurred()) return 0;
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "a line was half appended");
    return -1;
}

static PyObject *append(PyObject *const *args, Py_ssize_t nargs, int json) {
    if (nargs != 5 || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "append(store, line: bytes, start, end, line_no)");
        return NULL;
    }
    if (!ready()) return NULL;
    long long start = PyLong_AsLongLong(args[2]), end = PyLong_AsLongLong(args[3]);
    long long line = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    Batch b;
    if (batch_open(&b, args[0]) < 0) return NULL;
    int r = append_one(&b, PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]), start, end,
                       line, json);
    if (batch_flush(&b, r >= 0) < 0) return NULL;
    if (r) Py_RETURN_TRUE;
    Py_RETURN_NONE;
}

static PyObject *claude_code_append(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    return append(args, n, 1);
}

static PyObject *openclaw_append(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    return append(args, n, 2);
}

static inline int blank(ptr p, ptr end) {
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\v' && *p != '\f')
            return 0;
    return 1;
}

/* append_lines(store, chunk, pos, offset, line_no): the whole lines of `chunk` from `pos`
 * (the file's offset `offset`, line `line_no`) appended while each is one the appender
 * takes, a blank line passed over as the loader passes it; returns (pos, offset, line_no)
 * of the first line not taken (or not whole in the chunk). The store's state is read once
 * and written back once (`Batch`). */
static PyObject *append_lines(PyObject *const *args, Py_ssize_t nargs, int json) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "append_lines(store, chunk, pos, offset, line_no)");
        return NULL;
    }
    if (!ready()) return NULL;
    PyObject *store = args[0];
    long long pos = PyLong_AsLongLong(args[2]), offset = PyLong_AsLongLong(args[3]);
    long long line = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer chunk;
    if (PyObject_GetBuffer(args[1], &chunk, PyBUF_SIMPLE) < 0) return NULL;
    ptr base = (ptr)chunk.buf;
    Py_ssize_t size = chunk.len;
    if (pos < 0 || pos > size) {
        PyBuffer_Release(&chunk);
        PyErr_SetString(PyExc_ValueError, "append_lines: pos outside the chunk");
        return NULL;
    }
    Batch b;
    if (batch_open(&b, store) < 0) {
        PyBuffer_Release(&chunk);
        return NULL;
    }
    int failed = 0;
    while (pos < size) {
        ptr at = base + pos, newline = memchr(at, '\n', (size_t)(size - pos));
        if (!newline) break;
        ptr cut = newline > at && newline[-1] == '\r' ? newline - 1 : newline;
        long long length = newline - at;
        if (!(cut > at && *at == '{') && blank(at, cut)) {
            /* a blank line: kept in the gap after the record before it */
        } else {
            int r = append_one(&b, (const char *)at, cut - at, offset, offset + (cut - at), line,
                               json);
            if (r < 0) {
                failed = 1;
                break;
            }
            if (!r) break;
        }
        pos += length + 1;
        offset += length + 1;
        line++;
    }
    int flushed = batch_flush(&b, !failed);
    PyBuffer_Release(&chunk);
    if (failed || flushed < 0) return NULL;
    return Py_BuildValue("(LLL)", pos, offset, line);
}

static PyObject *claude_code_lines(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    return append_lines(args, n, 1);
}

static PyObject *openclaw_lines(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    return append_lines(args, n, 2);
}

static int constant(PyObject *values, const char *name, long long *out) {
    PyObject *v = PyDict_GetItemString(values, name);
    if (!v) {
        PyErr_Format(PyExc_KeyError, "configure_store: no %s", name);
        return -1;
    }
    *out = PyLong_AsLongLong(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int function(PyObject *values, const char *name, PyObject **out) {
    PyObject *v = PyDict_GetItemString(values, name);
    if (!v || !PyCallable_Check(v)) {
        PyErr_Format(PyExc_KeyError, "configure_store: no function %s", name);
        return -1;
    }
    Py_INCREF(v);
    Py_XSETREF(*out, v);
    return 0;
}

static PyObject *configure_store(PyObject *self, PyObject *values) {
    if (!PyDict_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "configure_store(values: dict)");
        return NULL;
    }
    long long roles[3];
    if (constant(values, "_CHUNK_MASK", &k_chunk_mask) < 0 ||
        constant(values, "_ARENA_CHUNK", &k_arena_chunk) < 0 ||
        constant(values, "_ARENA_BITS", &k_arena_bits) < 0 ||
        constant(values, "_LENGTH_BITS", &k_length_bits) < 0 ||
        constant(values, "_UUID", &k_uuid) < 0 || constant(values, "_WIDE", &k_wide) < 0 ||
        constant(values, "_SPAN_BITS", &k_span_bits) < 0 ||
        constant(values, "_LINE_BITS", &k_line_bits) < 0 ||
        constant(values, "_COUNT_BITS", &k_count_bits) < 0 ||
        constant(values, "_ROWS_LIMIT", &k_rows_limit) < 0 ||
        constant(values, "_RECENT", &k_recent) < 0 ||
        constant(values, "_ROLE_BITS", &k_role_bits) < 0 ||
        constant(values, "_OTHER_SHIFT", &k_other_shift) < 0 ||
        constant(values, "_HASH_MASK", &k_hash_mask) < 0 ||
        constant(values, "user", &roles[0]) < 0 || constant(values, "assistant", &roles[1]) < 0 ||
        constant(values, "tool", &roles[2]) < 0 ||
        function(values, "call_row", &f_call_row) < 0 ||
        function(values, "canonical_call_row", &f_canonical_row) < 0 ||
        function(values, "result_text", &f_result_text) < 0 ||
        function(values, "loads", &f_loads) < 0 ||
        function(values, "_name_problem", &f_name_problem) < 0 ||
        constant(values, "_ARGS_KEPT", &k_args_kept) < 0)
        return NULL;
    if (!name_problems && !(name_problems = PyDict_New())) return NULL;
    for (int k = 0; k < 3; k++) k_role_code[k] = roles[k];
    PyObject *role_objects = PyDict_GetItemString(values, "roles");
    if (!role_objects || !PyTuple_Check(role_objects) || PyTuple_GET_SIZE(role_objects) != 3) {
        PyErr_SetString(PyExc_KeyError, "configure_store: no roles");
        return NULL;
    }
    for (int k = 0; k < 3; k++) {
        Py_INCREF(PyTuple_GET_ITEM(role_objects, k));
        Py_XSETREF(k_role_objects[k], PyTuple_GET_ITEM(role_objects, k));
    }
    struct {
        PyObject **name;
        const char *text;
    } names[] = {
        {&s_count, "_count"}, {&s_tails, "_tails"}, {&s_kind_codes, "_kind_codes"},
        {&s_last_uid, "_last_uid"}, {&s_chained, "_chained"},
        {&s_last_message, "_last_message"}, {&s_arena, "_arena"},
        {&s_arena_used, "_arena_used"}, {&s_long, "_long"}, {&s_shared, "_shared"},
        {&s_uid_slots, "_uid_slots"}, {&s_call_more, "_call_more"},
        {&s_call_block, "_call_block"}, {&s_call_id, "_call_id"},
        {&s_call_name, "_call_name"}, {&s_call_args, "_call_args"},
        {&s_result_block, "_result_block"}, {&s_result_id, "_result_id"},
        {&s_result_text, "_result_text"}, {&s_result_error, "_result_error"},
        {&s_chunks, "chunks"}, {&s_size, "_size"}, {&s_grow, "grow"},
        {&s_grow_tails, "_grow_tails"}, {&s_set_kind, "_set_kind"}, {&k_kinds[0], "user"}, {&k_kinds[1], "assistant"},
        {&k_kinds[2], "toolResult"},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        if (*names[k].name) continue;
        *names[k].name = PyUnicode_InternFromString(names[k].text);
        if (!*names[k].name) return NULL;
    }
    store_ready = 1;
    Py_RETURN_NONE;
}

static PyObject *claude_code(PyObject *self, PyObject *arg) { return scan(arg, 1); }

static PyObject *openclaw(PyObject *self, PyObject *arg) { return scan(arg, 2); }

static PyObject *configure(PyObject *self, PyObject *args) {
    const char *first;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y#lll", &first, &n, &bit_sidechain, &bit_aborted,
                          &bit_interrupted))
        return NULL;
    memset(marker_first, 0, sizeof marker_first);
    for (Py_ssize_t k = 0; k < n; k++) marker_first[(unsigned char)first[k]] = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"claude_code", claude_code, METH_O, "Read a Claude Code line's stored fields, or None."},
    {"openclaw", openclaw, METH_O, "Read an OpenClaw entry's stored fields, or None."},
    {"claude_code_append", (PyCFunction)(void (*)(void))claude_code_append, METH_FASTCALL,
     "claude_code_append(store, line, start, end, line_no): True once appended, or None."},
    {"openclaw_append", (PyCFunction)(void (*)(void))openclaw_append, METH_FASTCALL,
     "openclaw_append(store, line, start, end, line_no): True once appended, or None."},
    {"claude_code_lines", (PyCFunction)(void (*)(void))claude_code_lines, METH_FASTCALL,
     "claude_code_lines(store, chunk, pos, offset, line_no): lines appended, to (pos, offset, "
     "line_no) of the first not taken."},
    {"openclaw_lines", (PyCFunction)(void (*)(void))openclaw_lines, METH_FASTCALL,
     "openclaw_lines(store, chunk, pos, offset, line_no): lines appended, to (pos, offset, "
     "line_no) of the first not taken."},
    {"args_digest", digest_of, METH_O,
     "args_digest(data): base.args_digest of the canonical arguments' bytes `data`."},
    {"canonical_args", canonical_args, METH_O,
     "canonical_args(value): orjson.dumps(orjson.loads(value), OPT_SORT_KEYS) of an object, "
     "or None where that is left to orjson."},
    {"configure_store", configure_store, METH_O,
     "configure_store(values): the store's constants and the row functions."},
    {"configure", configure, METH_VARARGS,
     "configure(marker_first, sidechain, aborted, interrupted): set the marker starts and bits."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linescan",
                                    "Claude Code and OpenClaw lines read without building them.",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__linescan(void) { return PyModule_Create(&module); }
