/*
 * tests/support/json_check.h - a strict JSON (RFC 8259) validator for the
 * telemetry tests and fuzz/fuzz_stats_json.c: objects, arrays, strings
 * (escapes checked, raw bytes must be valid UTF-8 and not control
 * characters), numbers, true/false/null, nesting up to 64. Header-only,
 * static: each includer gets its own copy.
 */
#ifndef RK_TEST_JSON_CHECK_H
#define RK_TEST_JSON_CHECK_H

#include <stddef.h>
#include <string.h>

struct jc {
    const unsigned char *p, *end;
    int depth;
};

static void
jc_ws(struct jc *j)
{
    while (j->p < j->end
        && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int jc_value(struct jc *j);

/* Length of the valid UTF-8 sequence at p (1-4), 0 if invalid. */
static size_t
jc_utf8(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0], lo = 0x80, hi = 0xbf;
    size_t k, n = (size_t)(end - p);

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 1;
    else if (c >= 0xe0 && c <= 0xef) {
        k = 2;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 3;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0;
    if (k >= n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i <= k; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return k + 1;
}

static int
jc_string(struct jc *j)
{
    if (j->p >= j->end || *j->p != '"')
        return 0;
    j->p++;
    while (j->p < j->end && *j->p != '"') {
        if (*j->p < 0x20)
            return 0;
        if (*j->p == '\\') {
            if (++j->p >= j->end)
                return 0;
            if (*j->p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (j->p + i >= j->end
                        || strchr("0123456789abcdefABCDEF", j->p[i]) == NULL
                        || j->p[i] == '\0')
                        return 0;
                j->p += 5;
            } else if (strchr("\"\\/bfnrt", *j->p) != NULL && *j->p != '\0') {
                j->p++;
            } else {
                return 0;
            }
            continue;
        }
        size_t k = jc_utf8(j->p, j->end);
        if (k == 0)
            return 0;
        j->p += k;
    }
    if (j->p >= j->end)
        return 0;
    j->p++;
    return 1;
}

static int
jc_digits(struct jc *j)
{
    const unsigned char *s = j->p;

    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    return j->p > s;
}

static int
jc_number(struct jc *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (!jc_digits(j))
        return 0;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!jc_digits(j))
            return 0;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (!jc_digits(j))
            return 0;
    }
    return 1;
}

static int
jc_lit(struct jc *j, const char *lit)
{
    size_t n = strlen(lit);

    if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
        return 0;
    j->p += n;
    return 1;
}

static int
jc_container(struct jc *j, unsigned char close, int is_obj)
{
    if (++j->depth > 64)
        return 0;
    j->p++;
    jc_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        j->depth--;
        return 1;
    }
    for (;;) {
        jc_ws(j);
        if (is_obj) {
            if (!jc_string(j))
                return 0;
            jc_ws(j);
            if (j->p >= j->end || *j->p != ':')
                return 0;
            j->p++;
        }
        if (!jc_value(j))
            return 0;
        jc_ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            j->depth--;
            return 1;
        }
        return 0;
    }
}

static int
jc_value(struct jc *j)
{
    jc_ws(j);
    if (j->p >= j->end)
        return 0;
    switch (*j->p) {
    case '{':
        return jc_container(j, '}', 1);
    case '[':
        return jc_container(j, ']', 0);
    case '"':
        return jc_string(j);
    case 't':
        return jc_lit(j, "true");
    case 'f':
        return jc_lit(j, "false");
    case 'n':
        return jc_lit(j, "null");
    default:
        return jc_number(j);
    }
}

/* True if s[0..n) is exactly one valid JSON value (whitespace around). */
static inline int
json_valid(const char *s, size_t n)
{
    struct jc j
        = { (const unsigned char *)s, (const unsigned char *)s + n, 0 };

    if (!jc_value(&j))
        return 0;
    jc_ws(&j);
    return j.p == j.end;
}

#endif /* RK_TEST_JSON_CHECK_H */
