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
#include <string.h>

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
        while (end - p >= 8 && plain8(p)) p += 8;
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

static PyObject *scan(PyObject *arg, int json) {
    char *data;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(arg, &data, &size) < 0) return NULL;
    Content c;
    Line l;
    memset(&l, 0, sizeof l);
    c.json = json;
    c.blocks = 0;
    c.other = 0;
    c.ncalls = c.nresults = 0;
    c.texts_only = 0;
    l.m.c = &c;
    Scan s = {(ptr)data, (ptr)data + size, (ptr)data, 0};
    ws(&s);
    if (!members(&s, line_member, &l)) Py_RETURN_NONE;
    ws(&s);
    if (s.p != s.end || !l.message_object) Py_RETURN_NONE;
    Message *m = &l.m;
    const char *kind;
    int role;
    long bits = 0;
    if (!optional_str(&l.type) || !optional_str(&l.uid) || !optional_str(&l.parent))
        Py_RETURN_NONE;
    PyObject *kind_text = NULL;
    if (json == 1) {
        if (str_is(&l.type, "assistant")) {
            kind = "assistant";
            role = 1;
            if (is_true(&l.api_error)) Py_RETURN_NONE; /* maybe a failed request's note */
            if (!optional_str(&m->id)) Py_RETURN_NONE;
        } else if (str_is(&l.type, "user")) {
            kind = "user";
            role = 0;
        } else {
            Py_RETURN_NONE;
        }
        if (is_true(&l.sidechain)) bits |= bit_sidechain;
        if (!c.blocks && m->content.seen && m->content.first == '"' && m->content.str.len > 0)
            c.other = 1;
    } else {
        if (!str_is(&l.type, "message")) Py_RETURN_NONE;
        if (!m->role.seen || m->role.first != '"' || m->role.str.escaped) Py_RETURN_NONE;
        if (str_is(&m->role, "assistant")) {
            kind = "assistant";
            role = 1;
            if (!optional_str(&m->stop)) Py_RETURN_NONE;
            int stopped = str_is(&m->stop, "error") || str_is(&m->stop, "aborted");
            int interrupted = stopped || str_is(&m->stop, "length");
            if (m->error.seen && m->error.first == '"') {
                int nonempty = stripped_nonempty(&m->error);
                if (nonempty < 0) Py_RETURN_NONE;
                interrupted |= nonempty;
            }
            if (stopped) bits |= bit_aborted;
            if (interrupted) bits |= bit_interrupted;
            if (!c.blocks && m->content.seen && m->content.first == '"') c.other = 1;
        } else if (str_is(&m->role, "toolResult")) {
            kind = "toolResult";
            role = 2;
            Val *id = m->call_id.seen ? &m->call_id : &m->use_id;
            if (!optional_str(id)) Py_RETURN_NONE;
            /* its content is its text: a call block read in it before the role was seen
             * (content written before role) is no call of this entry */
            c.ncalls = 0;
            c.nresults = 1;
            c.results[0].block = 0;
            c.results[0].id = *id;
            c.results[0].body = m->content;
            c.results[0].flag = is_true(&m->is_error);
            c.results[0].plain = m->plain;
            c.other = 0;
        } else {
            /* another role: a user's message, its content a text or texts */
            kind = NULL;
            role = 0;
            if (!(m->content.seen && m->content.first == '"') && !(c.blocks && c.texts_only))
                Py_RETURN_NONE;
            if (c.ncalls || c.nresults) Py_RETURN_NONE;
            c.other = 1;
            kind_text = PyUnicode_DecodeUTF8((const char *)m->role.str.at, m->role.str.len,
                                             NULL);
            if (!kind_text) return NULL;
        }
    }
    if (!kind_text) kind_text = PyUnicode_FromString(kind);
    if (!kind_text) return NULL;
    PyObject *uid = text_or_none(&l.uid), *parent = text_or_none(&l.parent);
    PyObject *message_id =
        json == 1 && role == 1 ? text_or_none(&m->id) : (Py_INCREF(Py_None), Py_None);
    PyObject *calls = items(c.calls, c.ncalls, s.base, 0);
    PyObject *results = items(c.results, c.nresults, s.base, 1);
    if (!uid || !parent || !message_id || !calls || !results) {
        Py_XDECREF(kind_text);
        Py_XDECREF(uid);
        Py_XDECREF(parent);
        Py_XDECREF(message_id);
        Py_XDECREF(calls);
        Py_XDECREF(results);
        return NULL;
    }
    return Py_BuildValue("(NilNNNlNN)", kind_text, role, bits, uid, parent, message_id, c.other,
                         calls, results);
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
    {"configure", configure, METH_VARARGS,
     "configure(marker_first, sidechain, aborted, interrupted): set the marker starts and bits."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linescan",
                                    "Claude Code and OpenClaw lines read without building them.",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__linescan(void) { return PyModule_Create(&module); }
