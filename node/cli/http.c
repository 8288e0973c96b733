/* http.c: the status page's HTTP server (http.h). */
#include "node/cli/http.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>

#define S_DRAIN_MAX   65536   /* bytes discarded after the reply before close */
#define S_DRAIN_MS    200     /* and for at most this long */

struct http_server {
    int fd;                  /* listening socket */
    int stop_r, stop_w;      /* stop pipe: a byte on stop_w ends the thread */
    int port;                /* bound port */
    http_handler_fn fn;      /* request handler */
    void *arg;               /* its argument */
    pthread_t thread;        /* the serving thread */
};

static double s_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

int http_reply_append(http_reply_t *r, const void *data, size_t n)
{
    if (r->failed) return -1;
    if (n > HTTP_BODY_MAX || r->len + n > HTTP_BODY_MAX) { r->failed = 1; return -1; }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1) cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b) { r->failed = 1; return -1; }
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return 0;
}

int http_reply_printf(http_reply_t *r, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) { r->failed = 1; return -1; }
    if ((size_t)n < sizeof small) return http_reply_append(r, small, (size_t)n);
    if ((size_t)n > HTTP_BODY_MAX) { r->failed = 1; return -1; }
    char *big = malloc((size_t)n + 1);
    if (!big) { r->failed = 1; return -1; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = http_reply_append(r, big, (size_t)n);
    free(big);
    return rc;
}

void http_reply_type(http_reply_t *r, const char *content_type)
{
    snprintf(r->content_type, sizeof r->content_type, "%s", content_type);
}

void http_reply_free(http_reply_t *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

static const char *s_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default:  return "Unknown";
    }
}

/* Waits for fd to become ready for `events` until deadline_ms (monotonic).
 * Returns 1 ready, 0 timed out, -1 stop requested or poll error. */
static int s_wait(http_server_t *self, int fd, short events, double deadline_ms)
{
    for (;;) {
        double left = deadline_ms - s_mono_ms();
        if (left <= 0) return 0;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = self->stop_r, .events = POLLIN}};
        int rc = poll(p, 2, (int)left + 1);
        if (rc < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (p[1].revents) return -1;
        if (p[0].revents) return 1;
    }
}

/* Sends all n bytes before deadline.  Returns 0 or -1. */
static int s_send_all(http_server_t *self, int fd, const char *buf, size_t n, double deadline_ms)
{
    while (n > 0) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w > 0) { buf += w; n -= (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (s_wait(self, fd, POLLOUT, deadline_ms) != 1) return -1;
            continue;
        }
        return -1;
    }
    return 0;
}

/* Writes the status line, headers and (unless head_only) the body. */
static void s_respond(http_server_t *self, int fd, const http_reply_t *r, int head_only)
{
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "X-Content-Type-Options: nosniff\r\n"
                     "%s"
                     "Connection: close\r\n\r\n",
                     r->status, s_reason(r->status), r->content_type, r->len,
                     r->status == 405 ? "Allow: GET, HEAD\r\n" : "");   /* a 405 must name the methods served */
    assert(n > 0 && (size_t)n < sizeof head);
    double deadline = s_mono_ms() + HTTP_WRITE_TIMEOUT_MS;
    if (s_send_all(self, fd, head, (size_t)n, deadline) != 0) return;
    if (!head_only && r->len) s_send_all(self, fd, r->body, r->len, deadline);
}

/* A short plain-text reply for errors the server answers itself. */
static void s_respond_error(http_server_t *self, int fd, int status)
{
    char body[96];
    int n = snprintf(body, sizeof body, "%d %s\n", status, s_reason(status));
    http_reply_t r = {.status = status, .body = body, .len = (size_t)n};
    http_reply_type(&r, "text/plain; charset=utf-8");
    s_respond(self, fd, &r, 0);
}

/* Reads the request head (up to the blank line) into buf.  Returns its length
 * (the blank line included), 0 when the client closed, -408 on timeout,
 * -431 when it does not fit, -1 on stop or a socket error. */
static int s_read_head(http_server_t *self, int fd, char *buf, size_t cap)
{
    double deadline = s_mono_ms() + HTTP_READ_TIMEOUT_MS;
    size_t len = 0;
    for (;;) {
        int ready = s_wait(self, fd, POLLIN, deadline);
        if (ready == 0) return -408;
        if (ready < 0) return -1;
        ssize_t got = recv(fd, buf + len, cap - 1 - len, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (got < 0) return -1;
        if (got == 0) return 0;
        size_t from = len >= 3 ? len - 3 : 0;
        len += (size_t)got;
        buf[len] = '\0';
        for (size_t i = from; i < len; i++) {
            if (buf[i] != '\n') continue;
            if (i >= 1 && buf[i - 1] == '\n') return (int)(i + 1);
            if (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n') return (int)(i + 1);
        }
        if (len >= cap - 1) return -431;
    }
}

/* Parses "METHOD SP TARGET SP HTTP/x.y" from the head.  Fills method and path
 * (query and fragment removed).  Returns 0, or the HTTP status to answer. */
static int s_parse_request_line(const char *head, char *method, size_t mcap,
                                char *path, size_t pcap)
{
    const char *eol = strchr(head, '\n');
    if (!eol) return 400;
    size_t linelen = (size_t)(eol - head);
    if (linelen > 0 && head[linelen - 1] == '\r') linelen--;
    for (size_t i = 0; i < linelen; i++) {
        unsigned char c = (unsigned char)head[i];
        if (c < 0x20 || c >= 0x7f) return 400;
    }
    const char *sp1 = memchr(head, ' ', linelen);
    if (!sp1) return 400;
    const char *rest = sp1 + 1;
    const char *sp2 = memchr(rest, ' ', linelen - (size_t)(rest - head));
    if (!sp2) return 400;
    size_t mlen = (size_t)(sp1 - head), tlen = (size_t)(sp2 - rest);
    const char *ver = sp2 + 1;
    size_t vlen = linelen - (size_t)(ver - head);
    if (mlen == 0 || mlen >= mcap || tlen == 0 || tlen >= pcap) return 400;
    if (vlen != 8 || strncmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1')) return 400;
    memcpy(method, head, mlen);
    method[mlen] = '\0';
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) return 405;
    /* origin-form only; an absolute-form "http://host/path" is reduced to its path */
    const char *t = rest;
    size_t tl = tlen;
    if (tl > 7 && strncmp(t, "http://", 7) == 0) {
        const char *slash = memchr(t + 7, '/', tl - 7);
        if (!slash) { t = "/"; tl = 1; }
        else { tl -= (size_t)(slash - t); t = slash; }
    }
    if (t[0] != '/') return 400;
    size_t plen = 0;
    while (plen < tl && t[plen] != '?' && t[plen] != '#') plen++;
    memcpy(path, t, plen);
    path[plen] = '\0';
    return 0;
}

/* After the reply: stop sending, read and discard what the client still
 * sends (bounded), so that closing does not reset the connection before the
 * client has read the reply. */
static void s_linger_close(http_server_t *self, int fd)
{
    shutdown(fd, SHUT_WR);
    double deadline = s_mono_ms() + S_DRAIN_MS;
    char sink[4096];
    size_t total = 0;
    while (total < S_DRAIN_MAX) {
        if (s_wait(self, fd, POLLIN, deadline) != 1) break;
        ssize_t got = recv(fd, sink, sizeof sink, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (got <= 0) break;
        total += (size_t)got;
    }
    close(fd);
}

static void s_serve_client(http_server_t *self, int fd)
{
    char head[HTTP_REQUEST_MAX + 1];
    int n = s_read_head(self, fd, head, sizeof head);
    if (n == -1 || n == 0) { close(fd); return; }
    if (n < 0) {
        s_respond_error(self, fd, -n);
        s_linger_close(self, fd);
        return;
    }
    char method[16], path[HTTP_REQUEST_MAX + 1];
    int status = s_parse_request_line(head, method, sizeof method, path, sizeof path);
    if (status != 0) {
        s_respond_error(self, fd, status);
        s_linger_close(self, fd);
        return;
    }
    http_reply_t r = {.status = 200};
    http_reply_type(&r, "text/html; charset=utf-8");
    int rc = self->fn(self->arg, path, &r);
    if (rc != 0 || r.failed || r.status < 100 || r.status > 599) s_respond_error(self, fd, 500);
    else s_respond(self, fd, &r, strcmp(method, "HEAD") == 0);
    http_reply_free(&r);
    s_linger_close(self, fd);
}

static void *s_thread(void *arg)
{
    http_server_t *self = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = self->fd, .events = POLLIN}, {.fd = self->stop_r, .events = POLLIN}};
        int rc = poll(p, 2, -1);
        if (rc < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[1].revents) break;
        if (!p[0].revents) continue;
        int cfd = accept4(self->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            /* EAGAIN: the client went away; EMFILE and friends: back off a little */
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                poll(p + 1, 1, 100);
            continue;
        }
        s_serve_client(self, cfd);
    }
    return NULL;
}

http_server_t *http_start(const char *host, int port, http_handler_fn fn, void *arg,
                          char *err, size_t errlen)
{
    assert(fn);
    if (!host || !*host) host = "127.0.0.1";
    if (port < 0 || port > 65535) {
        snprintf(err, errlen, "cannot serve http on %s:%d: port out of range 0..65535", host, port);
        return NULL;
    }
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "cannot serve http on %s:%d: %s", host, port, gai_strerror(gai));
        return NULL;
    }
    int fd = -1, last_errno = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) { last_errno = errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0) break;
        last_errno = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "cannot serve http on %s:%d: %s", host, port, strerror(last_errno));
        return NULL;
    }
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    int bound = port;
    if (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0) {
        if (sa.ss_family == AF_INET) bound = ntohs(((struct sockaddr_in *)&sa)->sin_port);
        else if (sa.ss_family == AF_INET6) bound = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    }
    http_server_t *self = calloc(1, sizeof *self);
    int pipefd[2];
    if (!self || pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "cannot serve http on %s:%d: %s", host, port,
                 self ? strerror(errno) : "out of memory");
        free(self);
        close(fd);
        return NULL;
    }
    self->fd = fd;
    self->stop_r = pipefd[0];
    self->stop_w = pipefd[1];
    self->port = bound;
    self->fn = fn;
    self->arg = arg;
    int prc = pthread_create(&self->thread, NULL, s_thread, self);
    if (prc != 0) {
        snprintf(err, errlen, "cannot serve http on %s:%d: %s", host, port, strerror(prc));
        close(fd);
        close(pipefd[0]);
        close(pipefd[1]);
        free(self);
        return NULL;
    }
    return self;
}

int http_port(const http_server_t *self)
{
    return self->port;
}

void http_stop(http_server_t **self_p)
{
    if (!self_p || !*self_p) return;
    http_server_t *self = *self_p;
    char c = 'x';
    ssize_t w;
    do w = write(self->stop_w, &c, 1); while (w < 0 && errno == EINTR);
    pthread_join(self->thread, NULL);
    close(self->fd);
    close(self->stop_r);
    close(self->stop_w);
    free(self);
    *self_p = NULL;
}
