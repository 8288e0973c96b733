/* json.c: the JSON string writer (json.h). */
#include "node/runtime/json.h"
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Writes the escaped form of byte c into e (at most 6 bytes); returns its length. */
static size_t s_escape(char e[6], unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    switch (c) {
    case '"':  e[0] = '\\'; e[1] = '"';  return 2;
    case '\\': e[0] = '\\'; e[1] = '\\'; return 2;
    case '\n': e[0] = '\\'; e[1] = 'n';  return 2;
    case '\r': e[0] = '\\'; e[1] = 'r';  return 2;
    case '\t': e[0] = '\\'; e[1] = 't';  return 2;
    default:
        if (c >= 0x20 && c < 0x7f) { e[0] = (char)c; return 1; }
        memcpy(e, "\\u00", 4);
        e[4] = hex[c >> 4];
        e[5] = hex[c & 15];
        return 6;
    }
}

size_t json_quote(char *out, size_t outlen, const char *s, size_t maxlen)
{
    assert(outlen >= 3);
    size_t k = 0, n = s ? strnlen(s, maxlen) : 0;
    out[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        char e[6];
        size_t m = s_escape(e, (unsigned char)s[i]);
        if (k + m + 2 > outlen) break;   /* room for the closing quote and the NUL */
        memcpy(out + k, e, m);
        k += m;
    }
    out[k++] = '"';
    out[k] = '\0';
    return k;
}

const char *json_number(char *out, size_t outlen, double x)
{
    assert(outlen >= 5);
    if (isfinite(x)) snprintf(out, outlen, "%.9g", x);
    else snprintf(out, outlen, "null");
    return out;
}
