/*
 * tests/support/prom_text.h - a strict reader of the Prometheus text
 * exposition format (0.0.4) for the metrics tests. Header-only: include
 * it after cmocka.h; a malformed line fails the calling test.
 */
#ifndef RK_TEST_PROM_TEXT_H
#define RK_TEST_PROM_TEXT_H

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sample {
    char name[128];
    char labels[256]; /* canonical: k="v" pairs as written, unescaped */
    double value;
} sample;

typedef struct exposition {
    sample *s;
    size_t n, cap;
} exposition;

static inline bool
is_name_start(int c)
{
    return isalpha(c) || c == '_' || c == ':';
}

static inline bool
is_name_char(int c)
{
    return isalnum(c) || c == '_' || c == ':';
}

/* Reads a metric or label name at *p into out; false if none. */
static inline bool
read_name(const char **p, char *out, size_t cap, bool metric)
{
    size_t n = 0;

    if (!is_name_start((unsigned char)**p) || (!metric && **p == ':'))
        return false;
    while (is_name_char((unsigned char)**p) && n + 1 < cap) {
        if (!metric && **p == ':')
            return false;
        out[n++] = *(*p)++;
    }
    out[n] = '\0';
    return true;
}

/* Does name belong to the family declared by the last TYPE line? */
static inline bool
in_family(const char *name, const char *fam, const char *type)
{
    size_t fl = strlen(fam);

    if (strcmp(name, fam) == 0)
        return true;
    if (strncmp(name, fam, fl) != 0)
        return false;
    if (strcmp(type, "summary") == 0)
        return strcmp(name + fl, "_sum") == 0
            || strcmp(name + fl, "_count") == 0;
    if (strcmp(type, "histogram") == 0)
        return strcmp(name + fl, "_sum") == 0
            || strcmp(name + fl, "_count") == 0
            || strcmp(name + fl, "_bucket") == 0;
    return false;
}

/*
 * Parses a whole exposition, failing the test on the first malformed
 * line: comments are HELP or TYPE with a valid type; every sample belongs
 * to the family of the TYPE line before it; labels are name="value" with
 * only \\, \" and \n escapes; the value is a float; no series repeats;
 * the text ends with a newline.
 */
static inline void
parse_exposition(const char *text, exposition *e)
{
    char fam[128] = "", type[32] = "";
    const char *line = text;

    memset(e, 0, sizeof(*e));
    assert_true(*text == '\0' || text[strlen(text) - 1] == '\n');
    while (*line) {
        const char *eol = strchr(line, '\n'), *p = line;
        char name[128];
        assert_non_null(eol);
        if (*p == '#') {
            char kw[8], tname[128];
            p++;
            assert_true(*p == ' ');
            p++;
            assert_true(sscanf(p, "%7s", kw) == 1);
            p += strlen(kw);
            assert_true(*p == ' ');
            p++;
            assert_true(read_name(&p, tname, sizeof(tname), true));
            if (strcmp(kw, "TYPE") == 0) {
                assert_true(*p == ' ');
                p++;
                assert_true(sscanf(p, "%31s", type) == 1);
                assert_true(strcmp(type, "counter") == 0
                    || strcmp(type, "gauge") == 0
                    || strcmp(type, "summary") == 0
                    || strcmp(type, "histogram") == 0
                    || strcmp(type, "untyped") == 0);
                assert_int_equal(p + strlen(type), eol);
                /* A family is declared once. */
                for (size_t i = 0; i < e->n; i++)
                    assert_false(in_family(e->s[i].name, tname, type));
                snprintf(fam, sizeof(fam), "%s", tname);
            } else {
                assert_string_equal(kw, "HELP");
            }
            line = eol + 1;
            continue;
        }
        if (e->n == e->cap) {
            e->cap = e->cap ? 2 * e->cap : 256;
            assert_non_null(e->s = realloc(e->s, e->cap * sizeof(*e->s)));
        }
        sample *s = &e->s[e->n];
        memset(s, 0, sizeof(*s));
        assert_true(read_name(&p, name, sizeof(name), true));
        if (!in_family(name, fam, type))
            fail_msg(
                "sample %s outside its family (last TYPE: %s)", name, fam);
        snprintf(s->name, sizeof(s->name), "%s", name);
        if (*p == '{') {
            size_t o = 0;
            p++;
            while (*p != '}') {
                char lname[64];
                assert_true(read_name(&p, lname, sizeof(lname), false));
                assert_true(p[0] == '=' && p[1] == '"');
                p += 2;
                o += (size_t)snprintf(s->labels + o, sizeof(s->labels) - o,
                    "%s%s=\"", o ? "," : "", lname);
                while (*p != '"') {
                    char c = *p++;
                    assert_true(c != '\n' && c != '\0');
                    if (c == '\\') {
                        c = *p++;
                        assert_true(c == '\\' || c == '"' || c == 'n');
                        c = c == 'n' ? '\n' : c;
                    }
                    assert_true(o + 2 < sizeof(s->labels));
                    s->labels[o++] = c;
                }
                p++;
                s->labels[o++] = '"';
                s->labels[o] = '\0';
                if (*p == ',')
                    p++;
                else
                    assert_true(*p == '}');
            }
            p++;
        }
        assert_true(*p == ' ');
        p++;
        char *end;
        s->value = strtod(p, &end);
        assert_true(end != p);
        /* An optional integer timestamp may follow. */
        if (*end == ' ')
            strtoll(end + 1, &end, 10);
        assert_int_equal(end, eol);
        for (size_t i = 0; i < e->n; i++)
            if (strcmp(e->s[i].name, s->name) == 0
                && strcmp(e->s[i].labels, s->labels) == 0)
                fail_msg("series %s{%s} repeated", s->name, s->labels);
        e->n++;
        line = eol + 1;
    }
}

/* The value of name{labels}, failing the test when it is absent. */
static inline double
get(const exposition *e, const char *name, const char *labels)
{
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->s[i].name, name) == 0
            && strcmp(e->s[i].labels, labels) == 0)
            return e->s[i].value;
    fail_msg("no series %s{%s}", name, labels);
    return NAN;
}

static inline bool
has(const exposition *e, const char *name, const char *labels)
{
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->s[i].name, name) == 0
            && strcmp(e->s[i].labels, labels) == 0)
            return true;
    return false;
}

#endif /* RK_TEST_PROM_TEXT_H */
