/* json_valid.h: a tiny JSON validator for the tests (the full grammar, no
 * values kept).  json_valid(s, n) is 1 when s[0..n) is exactly one JSON
 * value, surrounding whitespace allowed. */
#ifndef BRIGADE_TESTS_JSON_VALID_H
#define BRIGADE_TESTS_JSON_VALID_H
#include <string.h>

typedef struct { const char *p, *end; int depth; } jp_t;

static void jp_ws(jp_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static int jp_lit(jp_t *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0) return 0;
    j->p += n;
    return 1;
}

static int jp_string(jp_t *j)
{
    if (j->p >= j->end || *j->p != '"') return 0;
    j->p++;
    while (j->p < j->end) {
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"') return 1;
        if (c < 0x20) return 0;
        if (c == '\\') {
            if (j->p >= j->end) return 0;
            char e = *j->p++;
            if (e == 'u') {
                for (int k = 0; k < 4; k++, j->p++)
                    if (j->p >= j->end || !*j->p || !strchr("0123456789abcdefABCDEF", *j->p)) return 0;
            } else if (!e || !strchr("\"\\/bfnrt", e)) {
                return 0;
            }
        }
    }
    return 0;
}

static int jp_digits(jp_t *j)
{
    const char *s = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    return j->p > s;
}

static int jp_number(jp_t *j)
{
    if (j->p < j->end && *j->p == '-') j->p++;
    if (j->p < j->end && *j->p == '0') j->p++;
    else if (!jp_digits(j)) return 0;
    if (j->p < j->end && *j->p == '.') { j->p++; if (!jp_digits(j)) return 0; }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        if (!jp_digits(j)) return 0;
    }
    return 1;
}

static int jp_value(jp_t *j)
{
    jp_ws(j);
    if (j->p >= j->end || ++j->depth > 64) return 0;
    int ok = 0;
    char c = *j->p;
    if (c == '{') {
        j->p++; jp_ws(j);
        if (j->p < j->end && *j->p == '}') { j->p++; ok = 1; }
        else for (;;) {
            jp_ws(j);
            if (!jp_string(j)) break;
            jp_ws(j);
            if (j->p >= j->end || *j->p++ != ':') break;
            if (!jp_value(j)) break;
            jp_ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == '}') { j->p++; ok = 1; }
            break;
        }
    } else if (c == '[') {
        j->p++; jp_ws(j);
        if (j->p < j->end && *j->p == ']') { j->p++; ok = 1; }
        else for (;;) {
            if (!jp_value(j)) break;
            jp_ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == ']') { j->p++; ok = 1; }
            break;
        }
    } else if (c == '"') ok = jp_string(j);
    else if (c == 't') ok = jp_lit(j, "true");
    else if (c == 'f') ok = jp_lit(j, "false");
    else if (c == 'n') ok = jp_lit(j, "null");
    else ok = jp_number(j);
    j->depth--;
    return ok;
}

/* 1 when s[0..n) is exactly one JSON value (surrounding whitespace allowed). */
static int json_valid(const char *s, size_t n)
{
    jp_t j = {s, s + n, 0};
    if (!jp_value(&j)) return 0;
    jp_ws(&j);
    return j.p == j.end;
}

#endif
