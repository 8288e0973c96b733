/* json.h: the one JSON string writer.  Metrics lines and the status page
 * write every string through json_quote, so no input (a peer's address, a
 * reason built from network data, a file name) can end a string early or
 * add keys. */
#ifndef BRIGADE_JSON_H
#define BRIGADE_JSON_H
#include <stddef.h>

/* Bytes json_quote needs for an input of n bytes: every byte may become a
 * six-byte \u00XX escape, plus two quotes and the NUL. */
#define JSON_QUOTE_LEN(n) (6 * (size_t)(n) + 3)

/* Writes the first maxlen bytes of s (up to its NUL) as a JSON string
 * literal, quotes included, NUL-terminated, into out (outlen bytes).
 * '"' and '\\' are escaped, \n \r \t by name, every other byte below 0x20
 * or from 0x7f up as \u00XX, so the output is plain ASCII and valid JSON
 * whatever the input.  When the escaped text does not fit, it is cut before
 * the first escape that does not fit and still closed with a quote.  NULL s
 * is written as the empty string.  outlen must be at least 3.  Returns the
 * length written (without the NUL). */
size_t json_quote(char *out, size_t outlen, const char *s, size_t maxlen);

/* Writes x as a JSON number (%.9g), or null when x is NaN or infinite, into
 * out (outlen bytes, at least 5).  Returns out. */
const char *json_number(char *out, size_t outlen, double x);
#endif
