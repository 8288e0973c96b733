/* test_http.c: the status page server (node/http.h), its rendering
 * (node/statuspage.h) and `brigade status` printing a node's reply, over
 * 127.0.0.1 only. */
#include "tests/check.h"
#include "tests/json_valid.h"
#include "node/cli/http.h"
#include "node/cli/statuspage.h"
#include "node/cli/cli.h"
#include "net/keys.h"
#include "net/transport.h"
#include "net/wire.h"
#include "node/runtime/proto.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void test_json_validator_itself(void)
{
    const char *good[] = {"{}", "[]", "{\"a\":[1,-2.5e3,null,true,false,\"x\\u00e9\\\"\"]}", " 0 "};
    const char *bad[] = {"{", "{\"a\":}", "[1,]", "{\"a\":nan}", "{\"a\":1}}", "\"\x01\"",
                         "{\"a\":inf}", "[01]", "{\"a\" 1}", "\"\\x\""};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) CHECKF(json_valid(good[i], strlen(good[i])), "%s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECKF(!json_valid(bad[i], strlen(bad[i])), "%s", bad[i]);
    /* a NUL byte is never an escape character or a hex digit */
    CHECK(!json_valid("\"\\\0\"", 4));
    CHECK(!json_valid("\"\\u00\0a\"", 8));
}

/* ---- a tiny HTTP client ---- */

static int connect_to(const char *ip, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {10, 0};   /* a hung server fails the test instead of hanging it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { close(fd); return -1; }
    return fd;
}

static int connect_local(int port)
{
    return connect_to("127.0.0.1", port);
}

typedef struct {
    int status;          /* status code, -1 when no parsable status line */
    char *raw;           /* whole response, NUL-terminated */
    size_t len;
    const char *body;    /* into raw */
    size_t body_len;
} resp_t;

/* Reads until EOF (or the 10 s socket timeout). */
static void read_all(int fd, resp_t *r)
{
    size_t cap = 1 << 16;
    r->raw = malloc(cap);
    r->len = 0;
    for (;;) {
        if (r->len + 4096 + 1 > cap) { cap *= 2; r->raw = realloc(r->raw, cap); }
        ssize_t got = recv(fd, r->raw + r->len, cap - 1 - r->len, 0);
        if (got <= 0) break;
        r->len += (size_t)got;
    }
    r->raw[r->len] = '\0';
    r->status = -1;
    int code;
    if (sscanf(r->raw, "HTTP/1.1 %d ", &code) == 1) r->status = code;
    const char *sep = strstr(r->raw, "\r\n\r\n");
    r->body = sep ? sep + 4 : r->raw + r->len;
    r->body_len = (size_t)(r->raw + r->len - r->body);
}

/* Sends req (n bytes) on a new connection and reads the whole response. */
static resp_t request_ex(int port, const char *req, size_t n, int half_close)
{
    resp_t r = {.status = -1};
    int fd = connect_local(port);
    if (fd < 0) { r.raw = calloc(1, 1); return r; }
    send(fd, req, n, MSG_NOSIGNAL);
    if (half_close) shutdown(fd, SHUT_WR);
    read_all(fd, &r);
    close(fd);
    return r;
}

static resp_t request(int port, const char *req, size_t n)
{
    return request_ex(port, req, n, 0);
}

static resp_t get(int port, const char *path)
{
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: test\r\n\r\n", path);
    return request(port, req, (size_t)n);
}

static void resp_free(resp_t *r)
{
    free(r->raw);
    memset(r, 0, sizeof *r);
}

/* ---- a snapshot to serve ---- */

static status_snapshot_t g_snap;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_calls;

static void fill_snapshot(status_snapshot_t *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->node, sizeof s->node, "a1b2c3d4");
    snprintf(s->role, sizeof s->role, "node");
    s->stage = 1;
    s->nstages = 3;
    snprintf(s->model, sizeof s->model, "gpt-tiny");
    snprintf(s->run, sizeof s->run, "0123456789abcdef");
    snprintf(s->join_addr, sizeof s->join_addr, "127.0.0.1:7000/abcdefghij");
    s->uptime_s = 12.5;
    s->updates = 42;
    s->version = 42;
    s->tokens = 1000000;
    s->tokens_per_s = 5000;
    s->loss = 2.5;
    s->bytes_sent = 1000;
    s->bytes_sent_raw = 4000;
    s->drops = 3;
    const char *health[] = {"alive", "slow", "gone", "alive"};
    for (int i = 0; i < 4; i++) {
        status_peer_t *p = &s->peers[s->npeers++];
        snprintf(p->id, sizeof p->id, "peer%d", i);
        p->stage = i % 3;
        snprintf(p->addr, sizeof p->addr, "127.0.0.1:%d", 7000 + i);
        p->rate = 3.5 + i;
        p->rtt_ms = 20 + i;
        snprintf(p->health, sizeof p->health, "%s", health[i]);
        p->version = 40 + (uint64_t)i;
        p->self = i == 1;
    }
    status_history_t *h = malloc(sizeof *h);
    status_history_init(h);
    for (int u = 1; u <= 300; u++) status_history_add(h, (uint64_t)u, 5.0 * exp(-u / 100.0) + 0.5);
    status_history_copy(s, h);
    free(h);
}

static int handler(void *arg, const char *path, http_reply_t *reply)
{
    (void)arg;
    pthread_mutex_lock(&g_lock);
    g_calls++;
    int rc;
    if (strcmp(path, "/fail") == 0) rc = -1;
    else rc = status_serve(&g_snap, path, reply);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static int has_key(const char *json, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    return strstr(json, k) != NULL;
}

/* ---- server tests ---- */

static http_server_t *start(void)
{
    char err[256] = "";
    http_server_t *srv = http_start("127.0.0.1", 0, handler, NULL, err, sizeof err);
    CHECKF(srv != NULL, "%s", err);
    if (srv) CHECK(http_port(srv) > 0);
    return srv;
}

static void test_serves_pages(void)
{
    fill_snapshot(&g_snap);
    http_server_t *srv = start();
    if (!srv) return;
    int port = http_port(srv);

    resp_t r = get(port, "/");
    CHECKF(r.status == 200, "status %d", r.status);
    CHECK(strstr(r.raw, "Content-Type: text/html") != NULL);
    CHECK(strstr(r.raw, "Connection: close") != NULL);
    CHECK(strstr(r.body, "<html") != NULL);
    CHECK(strstr(r.body, "<svg") != NULL);
    CHECK(strstr(r.body, "<polyline") != NULL);
    CHECK(strstr(r.body, "http-equiv=\"refresh\"") != NULL);
    CHECK(strstr(r.body, "peer2") != NULL);
    CHECK(strstr(r.body, "</html>") != NULL);
    CHECK(strstr(r.body, "src=\"http") == NULL && strstr(r.body, "<script") == NULL);
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", r.body_len);
    CHECKF(strstr(r.raw, cl) != NULL, "body %zu bytes", r.body_len);
    resp_free(&r);

    r = get(port, "/status.json?x=1");
    CHECKF(r.status == 200, "status %d", r.status);
    CHECK(strstr(r.raw, "Content-Type: application/json") != NULL);
    CHECK(json_valid(r.body, r.body_len));
    const char *keys[] = {"node", "stage", "nstages", "model", "run", "updates", "version", "tokens",
                          "tokens_per_s", "bytes_sent", "bytes_sent_raw", "drops", "peers", "stages",
                          "loss_history", "rate", "rtt_ms", "health", "id", "addr"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) CHECKF(has_key(r.body, keys[i]), "key %s", keys[i]);
    CHECK(strstr(r.body, "\"compression\":4,") != NULL);
    CHECK(strstr(r.body, "\"health\":\"gone\"") != NULL);
    CHECK(strstr(r.body, "{\"stage\":0,\"peers\":2,\"alive\":2}") != NULL);
    CHECK(strstr(r.body, "[300,") != NULL);   /* the latest point is there */
    resp_free(&r);

    r = get(port, "/nope");
    CHECKF(r.status == 404, "status %d", r.status);
    resp_free(&r);
    r = get(port, "/../../etc/passwd");
    CHECKF(r.status == 404, "status %d", r.status);
    CHECK(strstr(r.body, "root:") == NULL);
    resp_free(&r);
    r = get(port, "/fail");
    CHECKF(r.status == 500, "status %d", r.status);
    resp_free(&r);

    const char head[] = "HEAD / HTTP/1.0\r\n\r\n";
    r = request(port, head, sizeof head - 1);
    CHECKF(r.status == 200, "status %d", r.status);
    CHECK(r.body_len == 0);
    resp_free(&r);

    /* bare LF line ends are accepted */
    const char lf[] = "GET /status.json HTTP/1.1\n\n";
    r = request(port, lf, sizeof lf - 1);
    CHECKF(r.status == 200, "status %d", r.status);
    resp_free(&r);
    http_stop(&srv);
    CHECK(srv == NULL);
    http_stop(&srv);   /* no-op */
}

static void test_hostile_clients(void)
{
    fill_snapshot(&g_snap);
    http_server_t *srv = start();
    if (!srv) return;
    int port = http_port(srv);
    pthread_mutex_lock(&g_lock);
    g_calls = 0;
    pthread_mutex_unlock(&g_lock);

    const char post[] = "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
    resp_t r = request(port, post, sizeof post - 1);
    CHECKF(r.status == 405, "POST: status %d", r.status);
    CHECKF(r.raw && strstr(r.raw, "\r\nAllow: GET, HEAD\r\n") != NULL, "405 without an Allow header");
    resp_free(&r);

    unsigned char garbage[600];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof garbage; i++) { x = x * 1664525u + 1013904223u; garbage[i] = (unsigned char)(x >> 24); }
    memcpy(garbage + sizeof garbage - 4, "\r\n\r\n", 4);
    r = request(port, (const char *)garbage, sizeof garbage);
    CHECKF(r.status == 400 || r.status == -1, "garbage: status %d", r.status);
    resp_free(&r);

    const char *bad[] = {"\r\n\r\n", "GET\r\n\r\n", "GET / \r\n\r\n", "GET / HTTP/2.0\r\n\r\n",
                         "GET nothing HTTP/1.1\r\n\r\n", "GET /\x01 HTTP/1.1\r\n\r\n",
                         "GET  HTTP/1.1\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = request(port, bad[i], strlen(bad[i]));
        CHECKF(r.status == 400, "bad request %zu: status %d", i, r.status);
        resp_free(&r);
    }
    const char nul[] = "GET / HTTP/1.1\0\r\n\r\n";
    r = request(port, nul, sizeof nul - 1);
    CHECKF(r.status == 400, "NUL: status %d", r.status);
    resp_free(&r);

    /* an oversized request head: 20 KiB of headers */
    size_t big = 20 * 1024;
    char *huge = malloc(big);
    memcpy(huge, "GET / HTTP/1.1\r\nX-Pad: ", 23);
    memset(huge + 23, 'A', big - 23);
    r = request(port, huge, big);
    CHECKF(r.status == 431, "oversized: status %d", r.status);
    resp_free(&r);
    /* an oversized path */
    memcpy(huge, "GET /", 5);
    memset(huge + 5, 'b', big - 5);
    r = request(port, huge, big);
    CHECKF(r.status == 431, "long path: status %d", r.status);
    resp_free(&r);
    free(huge);

    /* random bytes, random lengths, some with a request line in front; the
     * client half-closes so that the server sees the end at once */
    char fuzz[1024];
    int answered = 0;
    for (int it = 0; it < 300; it++) {
        size_t n = 1 + (x = x * 1664525u + 1013904223u) % sizeof fuzz;
        for (size_t i = 0; i < n; i++) { x = x * 1664525u + 1013904223u; fuzz[i] = (char)(x >> 24); }
        if (it % 3 == 0 && n > 16) memcpy(fuzz, "GET /", 5);
        if (it % 5 == 0 && n > 4) memcpy(fuzz + n - 4, "\r\n\r\n", 4);
        r = request_ex(port, fuzz, n, 1);
        CHECKF(r.status == -1 || r.status == 400 || r.status == 405 || r.status == 404 || r.status == 200,
               "fuzz %d: status %d", it, r.status);
        answered += r.status != -1;
        resp_free(&r);
    }
    CHECK(answered > 0);

    /* a client that connects and closes at once, one that sends half a line */
    int fd = connect_local(port);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    fd = connect_local(port);
    CHECK(fd >= 0);
    if (fd >= 0) { send(fd, "GET / HT", 8, MSG_NOSIGNAL); close(fd); }

    pthread_mutex_lock(&g_lock);
    CHECKF(g_calls == 0, "handler called %d times for bad requests", g_calls);
    pthread_mutex_unlock(&g_lock);

    /* a silent client: the next request is served meanwhile; the silent one gets its 408 */
    int silent = connect_local(port);
    CHECK(silent >= 0);
    r = get(port, "/status.json");
    CHECKF(r.status == 200, "after a silent client: status %d", r.status);
    CHECK(json_valid(r.body, r.body_len));
    resp_free(&r);
    if (silent >= 0) {
        /* the server gave up on it: it got a 408 or a close */
        resp_t s;
        read_all(silent, &s);
        CHECKF(s.status == 408 || s.len == 0, "silent client got %d", s.status);
        resp_free(&s);
        close(silent);
    }

    /* still healthy */
    r = get(port, "/");
    CHECKF(r.status == 200, "status %d", r.status);
    resp_free(&r);

    /* stop while a silent client is connected returns */
    silent = connect_local(port);
    CHECK(silent >= 0);
    usleep(50 * 1000);
    http_stop(&srv);
    CHECK(srv == NULL);
    if (silent >= 0) close(silent);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Idle connections do not hold the server: with 8 of them open (then 40,
 * more than its HTTP_CLIENTS_MAX slots) a request is answered at once.  It
 * took 2 s per idle connection when one client was served at a time; 1.5 s
 * is a generous bound on "at once", not a speed benchmark. */
static void test_idle_clients_do_not_delay(void)
{
    fill_snapshot(&g_snap);
    http_server_t *srv = start();
    if (!srv) return;
    int port = http_port(srv);
    int idle[40];
    int counts[] = {8, 40};
    for (int k = 0; k < 2; k++) {
        int n = counts[k];
        for (int i = 0; i < n; i++) idle[i] = connect_local(port);
        if (n < HTTP_CLIENTS_MAX) send(idle[0], "GET / HT", 8, MSG_NOSIGNAL);   /* half a request line */
        usleep(100 * 1000);   /* accepted by now */
        double t = now_s();
        resp_t r = get(port, "/status.json");
        double dt = now_s() - t;
        CHECKF(r.status == 200, "%d idle: status %d", n, r.status);
        CHECKF(dt < 1.5, "%d idle connections delayed a request by %.2f s", n, dt);
        resp_free(&r);
        for (int i = 0; i < n; i++) if (idle[i] >= 0) close(idle[i]);
    }
    /* an idle client that stays still gets its 408 after HTTP_READ_TIMEOUT_MS */
    int fd = connect_local(port);
    double t = now_s();
    resp_t s = {0};
    if (fd >= 0) { read_all(fd, &s); close(fd); }
    double dt = now_s() - t;
    CHECKF(s.status == 408 && dt > HTTP_READ_TIMEOUT_MS / 1e3 - 0.2 && dt < HTTP_READ_TIMEOUT_MS / 1e3 + 1,
           "idle client: %d after %.2f s", s.status, dt);
    resp_free(&s);
    http_stop(&srv);
}

/* Sends a GET of /status.json with the given header lines (each ending in
 * CRLF) and returns the status. */
static int get_with(const char *ip, int port, const char *version, const char *headers)
{
    char req[1024];
    int n = snprintf(req, sizeof req, "GET /status.json %s\r\n%s\r\n", version, headers);
    resp_t r = {.status = -1};
    int fd = connect_to(ip, port);
    if (fd >= 0) {
        send(fd, req, (size_t)n, MSG_NOSIGNAL);
        read_all(fd, &r);
        close(fd);
    }
    int status = r.status;
    resp_free(&r);
    return status;
}

/* DNS rebinding: a page of evil.example whose name resolves to 127.0.0.1
 * sends Host: evil.example; the server answers it 421, without the swarm's
 * join address or its peers. */
static void test_host_header(void)
{
    fill_snapshot(&g_snap);
    http_server_t *srv = start();
    if (!srv) return;
    int port = http_port(srv);
    char good[7][64], bad[9][64];
    snprintf(good[0], 64, "Host: 127.0.0.1:%d\r\n", port);
    snprintf(good[1], 64, "Host: 127.0.0.1\r\n");
    snprintf(good[2], 64, "HOST:LocalHost:%d  \r\n", port);
    snprintf(good[3], 64, "host: localhost\r\n");
    snprintf(good[4], 64, "Host: [::1]:%d\r\n", port);
    snprintf(good[5], 64, "User-Agent: x\r\nHost: [::1]\r\n");
    snprintf(good[6], 64, "Host: localhost:%d\r\n", port == 9090 ? 9091 : 9090);   /* ssh -L 9090:localhost:PORT */
    for (int i = 0; i < 7; i++) CHECKF(get_with("127.0.0.1", port, "HTTP/1.1", good[i]) == 200, "%s refused", good[i]);
    CHECK(get_with("127.0.0.1", port, "HTTP/1.0", "") == 200);   /* no Host at all */
    snprintf(bad[0], 64, "Host: evil.example\r\n");
    snprintf(bad[1], 64, "Host: evil.example:%d\r\n", port);
    snprintf(bad[2], 64, "Host: 127.0.0.2:%d\r\n", port);
    snprintf(bad[3], 64, "Host: localhost.evil.example:%d\r\n", port);
    snprintf(bad[4], 64, "Host: 127.0.0.1.evil.example\r\n");
    snprintf(bad[5], 64, "Host: \r\n");
    snprintf(bad[6], 64, "Host: [::1]x\r\n");
    snprintf(bad[7], 64, "Host: localhost:%dx\r\n", port);
    snprintf(bad[8], 64, "Host: 0.0.0.0:%d\r\n", port);
    for (int i = 0; i < 9; i++) CHECKF(get_with("127.0.0.1", port, "HTTP/1.1", bad[i]) == 421, "%s served", bad[i]);
    char two[128];
    snprintf(two, sizeof two, "Host: localhost\r\nHost: evil.example\r\n");
    CHECK(get_with("127.0.0.1", port, "HTTP/1.1", two) == 400);
    /* a NUL before the Host line hides nothing */
    const char nul[] = "GET /status.json HTTP/1.1\r\nX-A: \0\r\nHost: evil.example\r\n\r\n";
    resp_t r = request(port, nul, sizeof nul - 1);
    CHECKF(r.status == 400, "NUL in a header: status %d", r.status);
    resp_free(&r);
    pthread_mutex_lock(&g_lock);
    g_calls = 0;
    pthread_mutex_unlock(&g_lock);
    CHECK(get_with("127.0.0.1", port, "HTTP/1.1", bad[0]) == 421);
    pthread_mutex_lock(&g_lock);
    CHECKF(g_calls == 0, "handler called for a foreign Host");
    pthread_mutex_unlock(&g_lock);
    http_stop(&srv);

    /* bound to one address (127.0.0.2 here): that address names it too */
    char err[256] = "";
    srv = http_start("127.0.0.2", 0, handler, NULL, err, sizeof err);
    if (!srv) { printf("  skip: cannot bind 127.0.0.2: %s\n", err); return; }
    port = http_port(srv);
    snprintf(good[0], 64, "Host: 127.0.0.2:%d\r\n", port);
    CHECKF(get_with("127.0.0.2", port, "HTTP/1.1", good[0]) == 200, "%s refused", good[0]);
    CHECK(get_with("127.0.0.2", port, "HTTP/1.1", "Host: localhost\r\n") == 200);
    CHECK(get_with("127.0.0.2", port, "HTTP/1.1", "Host: 127.0.0.3\r\n") == 421);
    http_stop(&srv);
}

static void test_port_in_use(void)
{
    http_server_t *a = start();
    if (!a) return;
    char err[256] = "";
    http_server_t *b = http_start("127.0.0.1", http_port(a), handler, NULL, err, sizeof err);
    CHECK(b == NULL);
    char want[128];
    snprintf(want, sizeof want, "cannot serve http on 127.0.0.1:%d: Address already in use", http_port(a));
    CHECKF(strcmp(err, want) == 0, "err \"%s\"", err);
    http_stop(&b);

    b = http_start("127.0.0.1", 70000, handler, NULL, err, sizeof err);
    CHECK(b == NULL);
    CHECKF(strstr(err, "70000") != NULL, "err \"%s\"", err);
    b = http_start("no-such-host.invalid", 0, handler, NULL, err, sizeof err);
    CHECK(b == NULL);
    CHECKF(strstr(err, "cannot serve http on no-such-host.invalid:0") == err, "err \"%s\"", err);
    http_stop(&a);

    /* default host is loopback */
    a = http_start(NULL, 0, handler, NULL, err, sizeof err);
    CHECKF(a != NULL, "%s", err);
    if (a) {
        fill_snapshot(&g_snap);
        resp_t r = get(http_port(a), "/status.json");
        CHECK(r.status == 200);
        resp_free(&r);
        http_stop(&a);
    }
}

/* ---- rendering ---- */

/* 1 when printf's spelling of a non-finite number appears as a value. */
static int has_nonfinite_text(const char *s)
{
    const char *bad[] = {"nan", "NaN", ":inf", ":-inf", ",inf", ",-inf", "[inf", "[-inf", ">inf", ">-inf"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (strstr(s, bad[i])) return 1;
    return 0;
}

static void test_json_escapes_and_nonfinite(void)
{
    status_snapshot_t *s = calloc(1, sizeof *s);
    s->stage = -1;
    s->nstages = 2;
    snprintf(s->node, sizeof s->node, "q\"b\\s\n\x01");
    snprintf(s->model, sizeof s->model, "m\t\x7f\xc3\xa9");
    s->loss = NAN;
    s->tokens_per_s = INFINITY;
    s->uptime_s = -INFINITY;
    s->npeers = 1;
    snprintf(s->peers[0].id, sizeof s->peers[0].id, "</script>");
    snprintf(s->peers[0].addr, sizeof s->peers[0].addr, "\"},{\"evil\":1");
    s->peers[0].stage = 7;   /* outside 0..nstages-1 */
    s->peers[0].rate = NAN;
    s->peers[0].rtt_ms = INFINITY;
    /* the fixed fields need not be NUL-terminated */
    memset(s->peers[0].health, 'x', sizeof s->peers[0].health);
    s->nloss = 3;
    s->loss_hist[0] = (status_point_t){1, NAN};
    s->loss_hist[1] = (status_point_t){2, INFINITY};
    s->loss_hist[2] = (status_point_t){3, -INFINITY};

    http_reply_t o = {0};
    CHECK(status_render_json(&o, s) == 0);
    CHECK(o.len > 0);
    if (o.len) {
        CHECKF(json_valid(o.body, o.len), "%s", o.body);
        CHECK(strstr(o.body, "\"node\":\"q\\\"b\\\\s\\n\\u0001\"") != NULL);
        CHECK(strstr(o.body, "\"model\":\"m\\t\\u007f\\u00c3\\u00a9\"") != NULL);
        CHECK(strstr(o.body, "\"loss\":null") != NULL);
        CHECK(strstr(o.body, "\"tokens_per_s\":null") != NULL);
        CHECK(strstr(o.body, "\"uptime_s\":null") != NULL);
        CHECK(strstr(o.body, "\"stage\":null") != NULL);
        CHECK(strstr(o.body, "\"compression\":null") != NULL);
        CHECK(strstr(o.body, "\"rate\":null,\"rtt_ms\":null") != NULL);
        CHECK(strstr(o.body, "\"health\":\"xxxxxxxx\"") != NULL);
        CHECK(strstr(o.body, "[[1,null],[2,null],[3,null]]") != NULL);
        CHECK(!has_nonfinite_text(o.body));
        CHECK(strstr(o.body, "\"evil\"") == NULL);
    }
    http_reply_free(&o);

    CHECK(status_render_html(&o, s) == 0);
    if (o.len) {
        CHECK(strstr(o.body, "<svg") != NULL);
        CHECK(strstr(o.body, "no loss yet") != NULL);
        CHECK(strstr(o.body, "</script>") == NULL);
        CHECK(strstr(o.body, "&lt;/script&gt;") != NULL);
        CHECK(strstr(o.body, "&quot;},{&quot;evil&quot;:1") != NULL);
        CHECK(strstr(o.body, "no stage yet") != NULL);
        CHECK(!has_nonfinite_text(o.body));
        for (size_t i = 0; i < o.len; i++) {
            unsigned char c = (unsigned char)o.body[i];
            if (c < 0x20 && c != '\n') { CHECKF(0, "control byte %u at %zu", c, i); break; }
        }
    }
    http_reply_free(&o);

    /* a curve with a gap: two polylines; a single point renders too */
    s->nloss = 5;
    s->loss_hist[0] = (status_point_t){1, 3.0};
    s->loss_hist[1] = (status_point_t){2, 2.0};
    s->loss_hist[2] = (status_point_t){3, NAN};
    s->loss_hist[3] = (status_point_t){4, 1.5};
    s->loss_hist[4] = (status_point_t){5, 1.0};
    CHECK(status_render_html(&o, s) == 0);
    int lines = 0;
    for (const char *p = o.body; p && (p = strstr(p, "<polyline")); p++) lines++;
    CHECKF(lines == 2, "%d polylines", lines);
    CHECK(!has_nonfinite_text(o.body));
    http_reply_free(&o);
    s->nloss = 1;
    s->loss_hist[0] = (status_point_t){7, 2.0};
    CHECK(status_render_html(&o, s) == 0);
    CHECK(strstr(o.body, "<circle") != NULL);
    CHECK(!has_nonfinite_text(o.body));
    http_reply_free(&o);

    /* out-of-range counts are clamped, not trusted */
    s->npeers = 100000;
    s->nloss = -5;
    CHECK(status_render_json(&o, s) == 0);
    CHECK(json_valid(o.body, o.len));
    http_reply_free(&o);
    free(s);
}

/* Counters print exactly, as the metrics do: 1234567891 tokens is not
 * 1.23456789e+09; the progress card says what it counts. */
static void test_exact_counters(void)
{
    status_snapshot_t *s = calloc(1, sizeof *s);
    s->tokens = 1234567891ull;
    s->steps_done = 12;
    s->steps_total = 40;
    http_reply_t o = {0};
    CHECK(status_render_json(&o, s) == 0);
    CHECKF(strstr(o.body, "\"tokens\":1234567891,") != NULL, "%s", o.body);
    http_reply_free(&o);
    CHECK(status_render_html(&o, s) == 0);
    CHECK(strstr(o.body, ">1234567891<") != NULL);
    CHECK(strstr(o.body, "e+09") == NULL);
    CHECK(strstr(o.body, "run microbatches") != NULL && strstr(o.body, "run steps") == NULL);
    CHECK(strstr(o.body, "tokens/s since start") != NULL);
    http_reply_free(&o);
    free(s);
}

static void test_empty_snapshot(void)
{
    status_snapshot_t *s = calloc(1, sizeof *s);
    http_reply_t o = {0};
    CHECK(status_serve(s, "/status.json", &o) == 0);
    CHECK(o.status == 200);
    CHECK(strcmp(o.content_type, "application/json") == 0);
    CHECK(json_valid(o.body, o.len));
    CHECK(strstr(o.body, "\"peers\":[]") != NULL);
    CHECK(strstr(o.body, "\"loss_history\":[]") != NULL);
    http_reply_free(&o);
    CHECK(status_serve(s, "/", &o) == 0);
    CHECK(o.status == 200);
    CHECK(strstr(o.body, "<svg") != NULL);
    http_reply_free(&o);
    CHECK(status_serve(s, "/x", &o) == 0);
    CHECK(o.status == 404);
    http_reply_free(&o);
    free(s);
}

static void test_history(void)
{
    status_history_t *h = malloc(sizeof *h);
    status_snapshot_t *s = calloc(1, sizeof *s);
    status_history_init(h);
    for (uint64_t u = 1; u <= 10; u++) status_history_add(h, u, (double)u);
    status_history_copy(s, h);
    CHECK(s->nloss == 10);
    CHECK_NEAR(s->loss_hist[9].update, 10, 0);
    CHECK_NEAR(s->loss_hist[9].loss, 10, 0);

    /* far more updates than points: the whole run stays, bounded */
    status_history_init(h);
    const uint64_t N = 100000;
    for (uint64_t u = 1; u <= N; u++) status_history_add(h, u, u == 500 ? NAN : (double)u);
    status_history_copy(s, h);
    CHECKF(s->nloss > STATUS_LOSS_MAX / 2 - 1 && s->nloss <= STATUS_LOSS_MAX, "%d points", s->nloss);
    CHECKF(s->loss_hist[0].update < N / 50.0, "first point at update %g", s->loss_hist[0].update);
    CHECK_NEAR(s->loss_hist[s->nloss - 1].update, (double)N, 0);
    int mono = 1, finite = 1;
    for (int i = 0; i < s->nloss; i++) {
        if (i && s->loss_hist[i].update <= s->loss_hist[i - 1].update) mono = 0;
        if (!isfinite(s->loss_hist[i].loss)) finite = 0;
        /* a point's loss is the mean of the updates it covers: between them */
        if (i && isfinite(s->loss_hist[i].loss))
            CHECKF(s->loss_hist[i].loss > s->loss_hist[i - 1].update - 1 &&
                   s->loss_hist[i].loss <= s->loss_hist[i].update, "point %d", i);
    }
    CHECK(mono);
    CHECK(finite);   /* one NaN among many finite losses leaves no gap */

    /* a zeroed history works too; all-NaN buckets are gaps */
    memset(h, 0, sizeof *h);
    status_history_add(h, 1, NAN);
    status_history_add(h, 2, 1.0);
    status_history_copy(s, h);
    CHECK(s->nloss == 2);
    CHECK(isnan(s->loss_hist[0].loss));
    CHECK_NEAR(s->loss_hist[1].loss, 1.0, 0);
    free(h);
    free(s);
}

static void test_reply_buffer(void)
{
    http_reply_t o = {0};
    for (int i = 0; i < 1000; i++) CHECK(http_reply_printf(&o, "%04d,", i) == 0);
    CHECK(o.len == 5000);
    CHECK(strncmp(o.body + 4995, "0999,", 5) == 0);
    char big[2000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(http_reply_printf(&o, "[%s]", big) == 0);
    CHECK(o.len == 5000 + 2001);
    CHECK(o.body[o.len - 1] == ']' && o.body[o.len] == '\0');
    /* past the cap: refused, marked failed, nothing written */
    size_t before = o.len;
    CHECK(http_reply_append(&o, big, HTTP_BODY_MAX) == -1);
    CHECK(o.failed);
    CHECK(o.len == before);
    CHECK(http_reply_append(&o, "x", 1) == -1);
    http_reply_free(&o);
    CHECK(o.body == NULL && o.len == 0 && !o.failed);
}

/* ---- `brigade status` against a node that answers with a hostile reply ---- */

typedef struct {
    transport_t *tr;           /* the fake node */
    uint32_t nstages;          /* what its reply claims */
    const char *model;         /* and its model name */
    int answered;              /* replies sent */
} fake_node_t;

static void *fake_node_thread(void *arg)
{
    fake_node_t *f = arg;
    for (int i = 0; i < 1000 && !f->answered; i++) {   /* at most ~10 s */
        transport_msg_t m;
        if (transport_poll(f->tr, 10, &m) != 1) continue;
        if (m.hdr.type == WIRE_STATUS_REQ) {
            wbuf_t w;
            wbuf_init(&w, 1 << 16);
            proto_status_t st = {.nstages = f->nstages, .target = 100, .completed = 5, .loss = 2.5f};
            snprintf(st.model, sizeof st.model, "%s", f->model);
            proto_put_status(&w, &st);
            proto_put_table(&w, NULL, NULL, 0);   /* no peer records */
            wire_hdr_t h;
            wire_hdr_init(&h, WIRE_STATUS);
            const void *fr[1] = { w.data };
            size_t l[1] = { w.len };
            transport_reply(f->tr, &m, &h, fr, l, 1);
            wbuf_free(&w);
            f->answered = 1;
        }
        transport_msg_close(&m);
    }
    for (int i = 0; i < 20; i++) {   /* let the reply leave */
        transport_msg_t m;
        if (transport_poll(f->tr, 10, &m) == 1) transport_msg_close(&m);
    }
    return NULL;
}

/* Runs `brigade status` against a fake node replying nstages and model;
 * returns its exit status with its stdout in out (NUL-terminated, cut). */
static int status_against(uint32_t nstages, const char *model, char *out, size_t outlen)
{
    keypair_t kp;
    char err[256];
    out[0] = '\0';
    if (keypair_generate(&kp, err, sizeof err) != 0) { CHECKF(0, "keygen: %s", err); return -1; }
    transport_opts_t to = {.listen_host = "127.0.0.1", .keys = &kp};
    fake_node_t f = {.nstages = nstages, .model = model};
    f.tr = transport_new(&to, err, sizeof err);
    if (!f.tr) { CHECKF(0, "transport_new: %s", err); return -1; }
    char addr[128];
    snprintf(addr, sizeof addr, "127.0.0.1:%d/%s", transport_port(f.tr), kp.pub_z85);
    pthread_t th;
    pthread_create(&th, NULL, fake_node_thread, &f);
    FILE *tmp = tmpfile();
    fflush(stdout);
    int saved = dup(1);
    dup2(fileno(tmp), 1);
    char *argv[] = {"brigade", "status", addr, NULL};
    int rc = cmd_status(3, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    pthread_join(th, NULL);
    transport_destroy(&f.tr);
    rewind(tmp);
    size_t got = fread(out, 1, outlen - 1, tmp);
    out[got] = '\0';
    fclose(tmp);
    CHECK(f.answered);
    return rc;
}

static void test_status_command_hostile_reply(void)
{
    static char out[1 << 20];
    /* a reply that claims a million stages is malformed, not a million lines */
    int rc = status_against(1000000u, "gpt-tiny", out, sizeof out);
    int lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    CHECKF(rc != 0, "status exit %d with a million stages", rc);
    CHECKF(lines < 200, "%d lines printed", lines);
    /* a model name with terminal control bytes is printed without them */
    rc = status_against(2, "gpt\x1b]0;owned\x07\x1b[2J\r\n-tiny\x9b", out, sizeof out);
    CHECKF(rc == 0, "status exit %d", rc);
    CHECK(strstr(out, "gpt") != NULL && strstr(out, "-tiny") != NULL);
    int ctl = 0;
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
        ctl += (*p < 0x20 && *p != '\n') || *p >= 0x7f;
    CHECKF(ctl == 0, "%d control bytes printed", ctl);
    lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    CHECKF(lines == 4, "%d lines printed for 2 stages:\n%s", lines, out);
}

int main(void)
{
    RUN(test_json_validator_itself);
    RUN(test_reply_buffer);
    RUN(test_history);
    RUN(test_empty_snapshot);
    RUN(test_exact_counters);
    RUN(test_json_escapes_and_nonfinite);
    RUN(test_serves_pages);
    RUN(test_port_in_use);
    RUN(test_hostile_clients);
    RUN(test_idle_clients_do_not_delay);
    RUN(test_host_header);
    RUN(test_status_command_hostile_reply);
    CHECK_EXIT();
}
