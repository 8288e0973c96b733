/* test_json: JSON strings and numbers as the metrics and the status page
 * write them (node/runtime/json.h). */
#include "tests/check.h"
#include "tests/json_valid.h"
#include "node/runtime/json.h"

#include <math.h>
#include <string.h>

static void test_json_quote(void)
{
    char q[JSON_QUOTE_LEN(16)];
    CHECK(json_quote(q, sizeof q, "a\"b\\c\n\r\t", 64) == strlen(q));
    CHECK(strcmp(q, "\"a\\\"b\\\\c\\n\\r\\t\"") == 0);
    json_quote(q, sizeof q, "\x01\x1f\x7f\xff z", 64);
    CHECK(strcmp(q, "\"\\u0001\\u001f\\u007f\\u00ff z\"") == 0);
    json_quote(q, sizeof q, NULL, 64);
    CHECK(strcmp(q, "\"\"") == 0);
    json_quote(q, sizeof q, "abcdef", 3);   /* maxlen cuts the input */
    CHECK(strcmp(q, "\"abc\"") == 0);
    /* output too small: cut before the escape that does not fit, still closed */
    for (size_t cap = 3; cap <= 16; cap++) {
        char small[16];
        size_t k = json_quote(small, cap, "\"\"\"\"\"\"\"\"", 64);
        CHECKF(k < cap && json_valid(small, k), "cap %zu: %s", cap, small);
    }
    char b[32];
    CHECK(strcmp(json_number(b, sizeof b, NAN), "null") == 0);
    CHECK(strcmp(json_number(b, sizeof b, -INFINITY), "null") == 0);
    CHECK(strcmp(json_number(b, sizeof b, 0.25), "0.25") == 0);
}

int main(void)
{
    RUN(test_json_quote);
    CHECK_EXIT();
}
