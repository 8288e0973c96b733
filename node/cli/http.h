/* http.h: a tiny HTTP/1.1 server for the status page.  One listening socket
 * and one thread, whose one poll loop serves up to HTTP_CLIENTS_MAX
 * connections at once, one request per connection.  Only GET and HEAD.
 * Each connection has its own deadlines: its request line and headers must
 * arrive within HTTP_READ_TIMEOUT_MS (at most HTTP_REQUEST_MAX bytes; else
 * 408 or 431), its reply must leave within HTTP_WRITE_TIMEOUT_MS.  No
 * connection waits for another's bytes: a silent or slow client delays no
 * other, which waits at most for the handler's runs for other requests.  When
 * every slot is taken, a new connection closes the one accepted first of
 * those still sending their request (or, failing those, already answered);
 * when every slot is sending a reply, the new connection is closed.  A
 * request whose Host header names another server is answered 421, so that a
 * web page whose name resolves to this address (DNS rebinding) cannot read
 * it: Host must be 127.0.0.1, localhost or [::1] (any case), or the address
 * bound when it is not a wildcard, with no port or the bound port; a request
 * without Host (HTTP/1.0) is served, one with two is a 400.  The server never
 * reads files: every reply comes from the handler. */
#ifndef BRIGADE_HTTP_H
#define BRIGADE_HTTP_H
#include <stddef.h>

#define HTTP_REQUEST_MAX     8192            /* request line + headers, bytes */
#define HTTP_READ_TIMEOUT_MS 2000            /* whole request must arrive by then */
#define HTTP_WRITE_TIMEOUT_MS 5000           /* whole reply must leave by then */
#define HTTP_BODY_MAX        (8u << 20)      /* a reply body larger than this is a 500 */
#define HTTP_CLIENTS_MAX     16              /* connections served at once */

typedef struct http_server http_server_t;

/* A reply under construction.  The server sets status 200, content type
 * "text/html; charset=utf-8" and an empty body before calling the handler. */
typedef struct {
    int status;              /* 200, 404, ... */
    char content_type[64];   /* Content-Type header value */
    char *body;              /* growable, NUL-terminated when len > 0 */
    size_t len;              /* bytes of body in use */
    size_t cap;              /* bytes allocated */
    int failed;              /* an append ran out of memory or past HTTP_BODY_MAX */
} http_reply_t;

/* Called on the server's thread for each GET/HEAD with the path (begins with
 * '/', query string and fragment removed, at most HTTP_REQUEST_MAX bytes).
 * Appends the body and sets status and content type.  Returns 0, or -1 to
 * answer 500.  Must not block for long: every client waits while it runs
 * (the server's one thread serves them all). */
typedef int (*http_handler_fn)(void *arg, const char *path, http_reply_t *reply);

/* Binds host:port (host NULL or "" means 127.0.0.1; port 0 picks a free
 * port, see http_port) with SO_REUSEADDR and serves it on a new thread.
 * Returns NULL with a reason in err, e.g. "cannot serve http on
 * 127.0.0.1:8080: Address already in use". */
http_server_t *http_start(const char *host, int port, http_handler_fn fn, void *arg,
                          char *err, size_t errlen);
/* The port actually bound. */
int http_port(const http_server_t *self);
/* Stops serving (the clients being served are dropped), joins the thread, closes
 * the socket, frees, sets *self_p to NULL.  NULL or *self_p NULL is a no-op.
 * Waits for a running handler: do not call it holding a lock the handler
 * takes. */
void http_stop(http_server_t **self_p);

/* Appends n bytes to the body.  Returns 0, or -1 (and sets failed) when out
 * of memory or past HTTP_BODY_MAX. */
int http_reply_append(http_reply_t *reply, const void *data, size_t n);
/* Appends printf-formatted text.  Returns 0 or -1 as http_reply_append. */
int http_reply_printf(http_reply_t *reply, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Sets the content type (truncated to fit). */
void http_reply_type(http_reply_t *reply, const char *content_type);
/* Frees the body and zeroes the reply (the server does this itself; for
 * callers that render into a reply outside the server, e.g. tests). */
void http_reply_free(http_reply_t *reply);
#endif
