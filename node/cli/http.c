/* http.c: the status page's HTTP server (http.h). */
#include "node/cli/http.h"
#include <arpa/inet.h>
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
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>

#define S_DRAIN_MAX   65536   /* bytes discarded after the reply before close */
#define S_DRAIN_MS    200     /* and for at most this long */

/* What a client's slot is doing. */
enum { S_FREE, S_READING, S_WRITING, S_DRAINING };

/* One connection: its request head as it arrives, then its reply as it leaves. */
typedef struct {
    int fd;                  /* the connection, -1 when the slot is free */
    int state;               /* S_FREE, S_READING, S_WRITING or S_DRAINING */
    double since_ms;         /* when it was accepted (monotonic) */
    double deadline_ms;      /* when its state must have ended */
    size_t len;              /* reading: bytes in head; draining: bytes discarded */
    char head[HTTP_REQUEST_MAX + 1];  /* the request head, NUL-terminated */
    char out_head[512];      /* the reply's status line and headers */
    size_t out_head_len;     /* bytes in out_head */
    http_reply_t reply;      /* the reply, whose body follows out_head unless the request was HEAD */
    size_t out_len;          /* bytes of the reply to send (head, then body) */
    size_t sent;             /* bytes of it sent */
} s_client_t;

struct http_server {
    int fd;                  /* listening socket */
    int stop_r, stop_w;      /* stop pipe: a byte on stop_w ends the thread */
    int port;                /* bound port */
    char host[64];           /* the bound address as a Host header names it, "" for a wildcard */
    http_handler_fn fn;      /* request handler */
    void *arg;               /* its argument */
    pthread_t thread;        /* the serving thread */
    s_client_t client[HTTP_CLIENTS_MAX];  /* the connections served */
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
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default:  return "Unknown";
    }
}

/* Frees the slot: closes the connection and drops its reply. */
static void s_client_close(s_client_t *c)
{
    if (c->fd >= 0) close(c->fd);
    http_reply_free(&c->reply);
    c->fd = -1;
    c->state = S_FREE;
}

/* Sends what the socket takes of the reply.  Once all of it is sent: stops
 * sending, and reads and discards what the client still sends (bounded,
 * s_client_drain), so that closing does not reset the connection before the
 * client has read the reply. */
static void s_client_write(s_client_t *c)
{
    while (c->sent < c->out_len) {
        const char *p = c->sent < c->out_head_len ? c->out_head + c->sent : c->reply.body + (c->sent - c->out_head_len);
        size_t n = c->sent < c->out_head_len ? c->out_head_len - c->sent : c->out_len - c->sent;
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) { c->sent += (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;   /* poll says when it takes more */
        s_client_close(c);
        return;
    }
    shutdown(c->fd, SHUT_WR);
    c->state = S_DRAINING;
    c->len = 0;
    c->deadline_ms = s_mono_ms() + S_DRAIN_MS;
}

/* Discards what the client sends after its reply; closes at its end, after
 * S_DRAIN_MAX bytes or on an error. */
static void s_client_drain(s_client_t *c)
{
    char sink[4096];
    ssize_t got = recv(c->fd, sink, sizeof sink, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got > 0 && (c->len += (size_t)got) < S_DRAIN_MAX) return;
    s_client_close(c);
}

/* Takes the reply r (its body moves into the slot and r is zeroed) and
 * starts sending the status line, the headers and, unless head_only, the
 * body, within HTTP_WRITE_TIMEOUT_MS. */
static void s_client_reply(s_client_t *c, http_reply_t *r, int head_only)
{
    int n = snprintf(c->out_head, sizeof c->out_head,
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "X-Content-Type-Options: nosniff\r\n"
                     "%s"
                     "Connection: close\r\n\r\n",
                     r->status, s_reason(r->status), r->content_type, r->len,
                     r->status == 405 ? "Allow: GET, HEAD\r\n" : "");   /* a 405 must name the methods served */
    assert(n > 0 && (size_t)n < sizeof c->out_head);
    http_reply_free(&c->reply);
    c->reply = *r;
    memset(r, 0, sizeof *r);
    c->out_head_len = (size_t)n;
    c->out_len = c->out_head_len + (head_only ? 0 : c->reply.len);
    c->sent = 0;
    c->state = S_WRITING;
    c->deadline_ms = s_mono_ms() + HTTP_WRITE_TIMEOUT_MS;
    s_client_write(c);
}

/* A short plain-text reply for errors the server answers itself. */
static void s_client_error(s_client_t *c, int status)
{
    http_reply_t r = {.status = status};
    http_reply_type(&r, "text/plain; charset=utf-8");
    http_reply_printf(&r, "%d %s\n", status, s_reason(status));
    s_client_reply(c, &r, 0);
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

/* 1 when the Host value v (n bytes) names this server: 127.0.0.1,
 * localhost or [::1] (in any case), or the bound address when it is not a
 * wildcard, without a port or with any (a tunnel, ssh -L 9090:localhost:P,
 * names its own port; the name alone keeps DNS rebinding out). */
static int s_host_ok(const http_server_t *self, const char *v, size_t n)
{
    const char *end = v[0] == '[' ? memchr(v, ']', n) : memchr(v, ':', n);
    if (v[0] == '[' && !end) return 0;
    size_t name = !end ? n : v[0] == '[' ? (size_t)(end - v) + 1 : (size_t)(end - v);
    if (name < n) {   /* ":PORT" */
        if (v[name] != ':' || n - name < 2 || n - name > 6) return 0;
        for (size_t i = name + 1; i < n; i++)
            if (v[i] < '0' || v[i] > '9') return 0;
    }
    const char *ours[] = {"127.0.0.1", "localhost", "[::1]", self->host};
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++)
        if (ours[i][0] && strlen(ours[i]) == name && strncasecmp(v, ours[i], name) == 0) return 1;
    return 0;
}

/* The request's Host header against DNS rebinding (a page of another site
 * whose name the attacker points at this address must not read it): 0 when
 * there is none (HTTP/1.0) or it names this server (s_host_ok), 400 when
 * there are two, else 421.  head ends with its blank line. */
static int s_check_host(const http_server_t *self, const char *head)
{
    const char *value = NULL, *value_end = NULL;
    int seen = 0;
    for (const char *nl = strchr(head, '\n'); nl && nl[1]; nl = strchr(nl + 1, '\n')) {
        const char *v = nl + 1, *e = strchr(v, '\n');
        if (!e || strncasecmp(v, "host:", 5) != 0) continue;
        for (v += 5; v < e && (*v == ' ' || *v == '\t'); v++) {}
        while (e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
        value = v;
        value_end = e;
        seen++;
    }
    if (seen == 0) return 0;
    if (seen > 1) return 400;
    return value < value_end && s_host_ok(self, value, (size_t)(value_end - value)) ? 0 : 421;
}

/* Answers a whole request head: the error the server gives itself, or the
 * handler's reply. */
static void s_answer(http_server_t *self, s_client_t *c)
{
    char method[16], path[HTTP_REQUEST_MAX + 1];
    int status = s_parse_request_line(c->head, method, sizeof method, path, sizeof path);
    if (status == 0) status = s_check_host(self, c->head);
    if (status != 0) {
        s_client_error(c, status);
        return;
    }
    http_reply_t r = {.status = 200};
    http_reply_type(&r, "text/html; charset=utf-8");
    int rc = self->fn(self->arg, path, &r);
    if (rc != 0 || r.failed || r.status < 100 || r.status > 599) {
        http_reply_free(&r);
        s_client_error(c, 500);
        return;
    }
    s_client_reply(c, &r, strcmp(method, "HEAD") == 0);
}

/* Reads what arrived of the request head; answers once the blank line that
 * ends it is in (what follows it is ignored; a NUL byte in it is a 400), 431
 * when it does not fit; closes when the client closed or failed. */
static void s_client_read(http_server_t *self, s_client_t *c)
{
    size_t cap = sizeof c->head;
    ssize_t got = recv(c->fd, c->head + c->len, cap - 1 - c->len, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got <= 0) { s_client_close(c); return; }
    size_t from = c->len >= 3 ? c->len - 3 : 0;
    c->len += (size_t)got;
    c->head[c->len] = '\0';
    for (size_t i = from; i < c->len; i++) {
        if (c->head[i] != '\n') continue;
        if ((i >= 1 && c->head[i - 1] == '\n') || (i >= 2 && c->head[i - 1] == '\r' && c->head[i - 2] == '\n')) {
            c->head[i + 1] = '\0';
            if (memchr(c->head, '\0', i + 1)) s_client_error(c, 400);   /* text only: a NUL would hide a Host after it */
            else s_answer(self, c);
            return;
        }
    }
    if (c->len >= cap - 1) s_client_error(c, 431);
}

/* A slot for a new connection: a free one; else the reading client accepted
 * first (it has waited longest without sending a whole request), else the
 * draining one accepted first (it has its reply), closed to make room; -1
 * when every slot is sending a reply. */
static int s_free_slot(http_server_t *self)
{
    int victim = -1;
    for (int i = 0; i < HTTP_CLIENTS_MAX; i++) {
        const s_client_t *c = &self->client[i], *v = victim >= 0 ? &self->client[victim] : NULL;
        if (c->state == S_FREE) return i;
        if (c->state == S_WRITING) continue;
        int better = !v || (c->state == S_READING && v->state != S_READING)
                     || (c->state == v->state && c->since_ms < v->since_ms);
        if (better) victim = i;
    }
    if (victim >= 0) s_client_close(&self->client[victim]);
    return victim;
}

/* Accepts one connection into a slot (s_free_slot), or closes it at once
 * when there is none. */
static void s_accept(http_server_t *self)
{
    int cfd = accept4(self->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) {
        /* EAGAIN: the client went away; EMFILE and friends: back off a little */
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
            struct pollfd p = {.fd = self->stop_r, .events = POLLIN};
            poll(&p, 1, 100);
        }
        return;
    }
    int i = s_free_slot(self);
    if (i < 0) { close(cfd); return; }
    s_client_t *c = &self->client[i];
    c->fd = cfd;
    c->state = S_READING;
    c->len = 0;
    c->since_ms = s_mono_ms();
    c->deadline_ms = c->since_ms + HTTP_READ_TIMEOUT_MS;
}

/* Ends what ran out of time: a request head not in by its deadline is
 * answered 408; a reply not sent or a drain not ended by theirs is closed. */
static void s_expire(http_server_t *self, double now)
{
    for (int i = 0; i < HTTP_CLIENTS_MAX; i++) {
        s_client_t *c = &self->client[i];
        if (c->state == S_FREE || now < c->deadline_ms) continue;
        if (c->state == S_READING) s_client_error(c, 408);
        else s_client_close(c);
    }
}

/* Milliseconds from now to the nearest deadline, -1 when there is none. */
static int s_timeout(const http_server_t *self, double now)
{
    double next = -1;
    for (int i = 0; i < HTTP_CLIENTS_MAX; i++) {
        const s_client_t *c = &self->client[i];
        if (c->state != S_FREE && (next < 0 || c->deadline_ms < next)) next = c->deadline_ms;
    }
    if (next < 0) return -1;
    return next <= now ? 0 : (int)(next - now) + 1;
}

/* The poll loop: the stop pipe, the listening socket and every client,
 * each served as its socket is ready and ended at its deadline. */
static void *s_thread(void *arg)
{
    http_server_t *self = arg;
    struct pollfd p[HTTP_CLIENTS_MAX + 2];
    for (;;) {
        p[0] = (struct pollfd){.fd = self->stop_r, .events = POLLIN};
        p[1] = (struct pollfd){.fd = self->fd, .events = POLLIN};
        for (int i = 0; i < HTTP_CLIENTS_MAX; i++)   /* a free slot's fd is -1: poll skips it */
            p[2 + i] = (struct pollfd){.fd = self->client[i].fd,
                                       .events = self->client[i].state == S_WRITING ? POLLOUT : POLLIN};
        int rc = poll(p, HTTP_CLIENTS_MAX + 2, s_timeout(self, s_mono_ms()));
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0 || p[0].revents) break;
        for (int i = 0; i < HTTP_CLIENTS_MAX; i++) {
            s_client_t *c = &self->client[i];
            if (!p[2 + i].revents) continue;
            if (c->state == S_READING) s_client_read(self, c);
            else if (c->state == S_WRITING) s_client_write(c);
            else if (c->state == S_DRAINING) s_client_drain(c);
        }
        s_expire(self, s_mono_ms());
        if (p[1].revents) s_accept(self);
    }
    for (int i = 0; i < HTTP_CLIENTS_MAX; i++) s_client_close(&self->client[i]);
    return NULL;
}

/* The port a socket is bound to, and in host its address as a Host header
 * names it ("192.0.2.7", "[2001:db8::1]"; "" for a wildcard address). */
static int s_bound(int fd, int port, char *host, size_t hostlen)
{
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    char ip[INET6_ADDRSTRLEN];
    host[0] = '\0';
    if (getsockname(fd, (struct sockaddr *)&sa, &salen) != 0) return port;
    if (sa.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&sa;
        if (a->sin_addr.s_addr != htonl(INADDR_ANY) && inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip))
            snprintf(host, hostlen, "%s", ip);
        return ntohs(a->sin_port);
    }
    if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&sa;
        if (!IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr) && inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip))
            snprintf(host, hostlen, "[%s]", ip);
        return ntohs(a->sin6_port);
    }
    return port;
}

/* A listening socket bound to host:port (the first address of host that
 * takes it).  Returns it, or -1 with a reason in err. */
static int s_listen(const char *host, int port, char *err, size_t errlen)
{
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "cannot serve http on %s:%d: %s", host, port, gai_strerror(gai));
        return -1;
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
    if (fd < 0) snprintf(err, errlen, "cannot serve http on %s:%d: %s", host, port, strerror(last_errno));
    return fd;
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
    int fd = s_listen(host, port, err, errlen);
    if (fd < 0) return NULL;
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
    self->port = s_bound(fd, port, self->host, sizeof self->host);
    for (int i = 0; i < HTTP_CLIENTS_MAX; i++) self->client[i].fd = -1;
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
