/* statuspage.c: the status page and /status.json (statuspage.h). */
#include "node/cli/statuspage.h"
#include "node/engine/model.h"
#include "node/runtime/json.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Appends a string literal. */
#define S_LIT(o, lit) http_reply_append((o), (lit), sizeof(lit) - 1)

/* ---- loss history ---- */

void status_history_init(status_history_t *h)
{
    memset(h, 0, sizeof *h);
    h->stride = 1;
}

/* Mean of two point losses, ignoring a non-finite one. */
static double s_merge_loss(double a, double b)
{
    if (!isfinite(a)) return b;
    if (!isfinite(b)) return a;
    return 0.5 * (a + b);
}

void status_history_add(status_history_t *h, uint64_t update, double loss)
{
    if (h->stride == 0) h->stride = 1;   /* a zeroed history */
    if (isfinite(loss)) { h->acc += loss; h->acc_finite++; }
    h->acc_n++;
    h->last_update = update;
    if (h->acc_n < h->stride) return;
    h->p[h->n].update = (double)update;
    h->p[h->n].loss = h->acc_finite ? h->acc / (double)h->acc_finite : NAN;
    h->n++;
    h->acc = 0.0;
    h->acc_finite = h->acc_n = 0;
    if (h->n == STATUS_LOSS_MAX) {
        for (int i = 0; i < STATUS_LOSS_MAX / 2; i++) {
            h->p[i].update = h->p[2 * i + 1].update;
            h->p[i].loss = s_merge_loss(h->p[2 * i].loss, h->p[2 * i + 1].loss);
        }
        h->n = STATUS_LOSS_MAX / 2;
        h->stride *= 2;
    }
}

void status_history_copy(status_snapshot_t *out, const status_history_t *h)
{
    int n = h->n < STATUS_LOSS_MAX ? h->n : STATUS_LOSS_MAX;
    memcpy(out->loss_hist, h->p, (size_t)n * sizeof h->p[0]);
    if (h->acc_n > 0 && n < STATUS_LOSS_MAX) {
        out->loss_hist[n].update = (double)h->last_update;
        out->loss_hist[n].loss = h->acc_finite ? h->acc / (double)h->acc_finite : NAN;
        n++;
    }
    out->nloss = n;
}

/* ---- JSON ---- */

#define STATUS_STR_MAX 192   /* the longest string field of a snapshot (join_addr) */

/* Appends the first maxlen bytes of s as a JSON string (json_quote). */
static void s_json_str(http_reply_t *o, const char *s, size_t maxlen)
{
    char q[JSON_QUOTE_LEN(STATUS_STR_MAX)];
    http_reply_append(o, q, json_quote(q, sizeof q, s, maxlen < STATUS_STR_MAX ? maxlen : STATUS_STR_MAX));
}

/* Appends a JSON number, or null when x is not finite. */
static void s_json_num(http_reply_t *o, double x)
{
    char b[32];
    http_reply_printf(o, "%s", json_number(b, sizeof b, x));
}

/* Appends "key": (with a leading comma unless first). */
static void s_json_key(http_reply_t *o, const char *key, int first)
{
    http_reply_printf(o, "%s\"%s\":", first ? "" : ",", key);
}

static int s_stage_known(const status_snapshot_t *s, int stage)
{
    return stage >= 0 && stage < s->nstages;
}

static int s_is_alive(const status_peer_t *p)
{
    return strncmp(p->health, "alive", sizeof p->health) == 0 ||
           strncmp(p->health, "slow", sizeof p->health) == 0;
}

static int s_npeers(const status_snapshot_t *s)
{
    return s->npeers < 0 ? 0 : s->npeers > STATUS_PEERS_MAX ? STATUS_PEERS_MAX : s->npeers;
}

static int s_nloss(const status_snapshot_t *s)
{
    return s->nloss < 0 ? 0 : s->nloss > STATUS_LOSS_MAX ? STATUS_LOSS_MAX : s->nloss;
}

static double s_compression(const status_snapshot_t *s)
{
    return s->bytes_sent ? (double)s->bytes_sent_raw / (double)s->bytes_sent : NAN;
}

/* [{"stage", "peers", "alive"} for each stage]. */
static void s_json_stages(http_reply_t *o, const status_snapshot_t *s)
{
    int np = s_npeers(s);
    S_LIT(o, "[");
    for (int st = 0; st < s->nstages && st < MODEL_STAGES_MAX; st++) {
        int n = 0, alive = 0;
        for (int i = 0; i < np; i++) {
            if (s->peers[i].stage != st) continue;
            n++;
            alive += s_is_alive(&s->peers[i]);
        }
        http_reply_printf(o, "%s{\"stage\":%d,\"peers\":%d,\"alive\":%d}", st ? "," : "", st, n, alive);
    }
    S_LIT(o, "]");
}

/* [one object per known peer]. */
static void s_json_peers(http_reply_t *o, const status_snapshot_t *s)
{
    int np = s_npeers(s);
    S_LIT(o, "[");
    for (int i = 0; i < np; i++) {
        const status_peer_t *p = &s->peers[i];
        http_reply_append(o, i ? ",{" : "{", i ? 2 : 1);
        s_json_key(o, "id", 1);        s_json_str(o, p->id, sizeof p->id);
        s_json_key(o, "stage", 0);
        if (p->stage >= 0) http_reply_printf(o, "%d", p->stage);
        else S_LIT(o, "null");
        s_json_key(o, "addr", 0);      s_json_str(o, p->addr, sizeof p->addr);
        s_json_key(o, "rate", 0);      s_json_num(o, p->rate >= 0 ? p->rate : NAN);
        s_json_key(o, "rtt_ms", 0);    s_json_num(o, p->rtt_ms > 0 ? p->rtt_ms : NAN);
        s_json_key(o, "health", 0);    s_json_str(o, p->health, sizeof p->health);
        s_json_key(o, "version", 0);   http_reply_printf(o, "%" PRIu64, p->version);
        s_json_key(o, "self", 0);      http_reply_printf(o, "%s", p->self ? "true" : "false");
        S_LIT(o, "}");
    }
    S_LIT(o, "]");
}

/* [[update, loss] for each point of the loss history]. */
static void s_json_losses(http_reply_t *o, const status_snapshot_t *s)
{
    int nl = s_nloss(s);
    S_LIT(o, "[");
    for (int i = 0; i < nl; i++) {
        http_reply_append(o, i ? ",[" : "[", i ? 2 : 1);
        s_json_num(o, s->loss_hist[i].update);
        S_LIT(o, ",");
        s_json_num(o, s->loss_hist[i].loss);
        S_LIT(o, "]");
    }
    S_LIT(o, "]");
}

int status_render_json(http_reply_t *o, const status_snapshot_t *s)
{
    S_LIT(o, "{");
    s_json_key(o, "node", 1);        s_json_str(o, s->node, sizeof s->node);
    s_json_key(o, "role", 0);        s_json_str(o, s->role, sizeof s->role);
    s_json_key(o, "stage", 0);
    if (s->stage >= 0) http_reply_printf(o, "%d", s->stage);
    else S_LIT(o, "null");
    s_json_key(o, "nstages", 0);     http_reply_printf(o, "%d", s->nstages);
    s_json_key(o, "model", 0);       s_json_str(o, s->model, sizeof s->model);
    s_json_key(o, "run", 0);         s_json_str(o, s->run, sizeof s->run);
    s_json_key(o, "join_addr", 0);   s_json_str(o, s->join_addr, sizeof s->join_addr);
    s_json_key(o, "uptime_s", 0);    s_json_num(o, s->uptime_s);
    s_json_key(o, "updates", 0);     http_reply_printf(o, "%" PRIu64, s->updates);
    s_json_key(o, "version", 0);     http_reply_printf(o, "%" PRIu64, s->version);
    s_json_key(o, "steps_done", 0);  http_reply_printf(o, "%" PRIu64, s->steps_done);
    s_json_key(o, "steps_total", 0); http_reply_printf(o, "%" PRIu64, s->steps_total);
    s_json_key(o, "tokens", 0);      http_reply_printf(o, "%" PRIu64, s->tokens);
    s_json_key(o, "tokens_per_s", 0); s_json_num(o, s->tokens_per_s);
    s_json_key(o, "loss", 0);        s_json_num(o, s->loss);
    s_json_key(o, "bytes_sent", 0);  http_reply_printf(o, "%" PRIu64, s->bytes_sent);
    s_json_key(o, "bytes_sent_raw", 0); http_reply_printf(o, "%" PRIu64, s->bytes_sent_raw);
    s_json_key(o, "bytes_recv", 0);  http_reply_printf(o, "%" PRIu64, s->bytes_recv);
    s_json_key(o, "compression", 0); s_json_num(o, s_compression(s));
    s_json_key(o, "drops", 0);       http_reply_printf(o, "%" PRIu64, s->drops);
    s_json_key(o, "inflight", 0);    http_reply_printf(o, "%d", s->inflight);

    s_json_key(o, "stages", 0);       s_json_stages(o, s);
    s_json_key(o, "peers", 0);        s_json_peers(o, s);
    s_json_key(o, "loss_history", 0); s_json_losses(o, s);
    S_LIT(o, "}\n");
    return o->failed ? -1 : 0;
}

/* ---- HTML ---- */

/* Appends the first maxlen bytes of s (up to its NUL) as HTML text: markup
 * characters as entities, control bytes dropped, bytes >= 0x80 as &#xXX;. */
static void s_html(http_reply_t *o, const char *s, size_t maxlen)
{
    size_t n = s ? strnlen(s, maxlen) : 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '&':  S_LIT(o, "&amp;"); break;
        case '<':  S_LIT(o, "&lt;"); break;
        case '>':  S_LIT(o, "&gt;"); break;
        case '"':  S_LIT(o, "&quot;"); break;
        case '\'': S_LIT(o, "&#39;"); break;
        default:
            if (c >= 0x80) http_reply_printf(o, "&#x%02x;", c);
            else if (c >= 0x20 && c != 0x7f) http_reply_append(o, (const char *)&c, 1);
        }
    }
}
#define S_HTML_FIELD(o, field) s_html((o), (field), sizeof(field))

/* Formats x with fmt, or "-" when x is not finite. */
static const char *s_fmt(char *buf, size_t len, const char *fmt, double x)
{
    if (isfinite(x)) snprintf(buf, len, fmt, x);
    else snprintf(buf, len, "-");
    return buf;
}

static const char *s_fmt_bytes(char *buf, size_t len, uint64_t b)
{
    static const char *unit[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    double x = (double)b;
    int u = 0;
    while (x >= 1000.0 && u < 5) { x /= 1000.0; u++; }
    if (u == 0) snprintf(buf, len, "%" PRIu64 " B", b);
    else snprintf(buf, len, "%.1f %s", x, unit[u]);
    return buf;
}

static const char s_css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em;color:#222;background:#fafafa}"
    "h1{margin:0 0 .2em;font-size:1.6em}h2{font-size:1.15em;margin:1.4em 0 .5em}"
    ".sub{color:#555;margin:0 0 1em}.mono{font-family:ui-monospace,monospace;font-size:.9em}"
    ".cards{display:flex;flex-wrap:wrap;gap:.6em}"
    ".card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.5em .8em;min-width:7em}"
    ".card b{display:block;font-size:1.25em}.card span{color:#666;font-size:.85em}"
    "table.map{border-collapse:collapse;background:#fff}"
    "table.map td,table.map th{border:1px solid #ddd;padding:.4em;vertical-align:top;text-align:left}"
    ".peer{display:inline-block;border-radius:5px;padding:.35em .55em;margin:.15em;font-size:.85em;"
    "border-left:6px solid #999;background:#f3f3f3;min-width:11em}"
    ".alive{border-left-color:#2a9d3a;background:#eef8ef}.slow{border-left-color:#e0a800;background:#fdf6e0}"
    ".gone{border-left-color:#c0392b;background:#fbeceb;color:#777}.me{outline:2px solid #3467c8}"
    ".empty{color:#c0392b}svg{background:#fff;border:1px solid #ddd;border-radius:6px}"
    "footer{margin-top:1.5em;color:#666;font-size:.85em}";

static void s_card(http_reply_t *o, const char *value, const char *label)
{
    S_LIT(o, "<div class=\"card\"><b>");
    s_html(o, value, 256);
    S_LIT(o, "</b><span>");
    s_html(o, label, 256);
    S_LIT(o, "</span></div>");
}

static void s_peer_box(http_reply_t *o, const status_peer_t *p)
{
    char h[8];
    snprintf(h, sizeof h, "%.*s", (int)strnlen(p->health, sizeof p->health), p->health);
    const char *cls = strcmp(h, "alive") == 0 ? "alive" : strcmp(h, "slow") == 0 ? "slow" :
                      strcmp(h, "gone") == 0 ? "gone" : "unknown";
    char a[32], b[32];
    http_reply_printf(o, "<div class=\"peer %s%s\"><b class=\"mono\">", cls, p->self ? " me" : "");
    S_HTML_FIELD(o, p->id);
    http_reply_printf(o, "</b>%s ", p->self ? " (this node)" : "");
    S_HTML_FIELD(o, p->health);
    S_LIT(o, "<br><span class=\"mono\">");
    S_HTML_FIELD(o, p->addr);
    http_reply_printf(o, "</span><br>%s ubatch/s &middot; RTT %s ms &middot; v%" PRIu64 "</div>",
                      s_fmt(a, sizeof a, "%.2f", p->rate >= 0 ? p->rate : NAN),
                      s_fmt(b, sizeof b, "%.1f", p->rtt_ms > 0 ? p->rtt_ms : NAN), p->version);
}

/* The swarm map: one row per stage, the peers serving it as boxes; peers
 * with a stage outside 0..nstages-1 in a last row. */
static void s_swarm_map(http_reply_t *o, const status_snapshot_t *s)
{
    int np = s_npeers(s);
    S_LIT(o, "<table class=\"map\"><tr><th>stage</th><th>peers: capacity in microbatches per compute-second (ubatch/s), "
          "round trip, weight version</th></tr>");
    for (int st = 0; st < s->nstages && st < MODEL_STAGES_MAX; st++) {
        int n = 0, alive = 0;
        for (int i = 0; i < np; i++)
            if (s->peers[i].stage == st) { n++; alive += s_is_alive(&s->peers[i]); }
        http_reply_printf(o, "<tr><td><b>%d</b><br><span class=\"%s\">%d alive</span> / %d</td><td>",
                          st, alive ? "" : "empty", alive, n);
        for (int i = 0; i < np; i++)
            if (s->peers[i].stage == st) s_peer_box(o, &s->peers[i]);
        if (n == 0) S_LIT(o, "<span class=\"empty\">no peer</span>");
        S_LIT(o, "</td></tr>");
    }
    int other = 0;
    for (int i = 0; i < np; i++) other += !s_stage_known(s, s->peers[i].stage);
    if (other) {
        S_LIT(o, "<tr><td><b>?</b><br>no stage yet</td><td>");
        for (int i = 0; i < np; i++)
            if (!s_stage_known(s, s->peers[i].stage)) s_peer_box(o, &s->peers[i]);
        S_LIT(o, "</td></tr>");
    }
    S_LIT(o, "</table>");
}

/* A round step (1, 2 or 5 x 10^k) that cuts range into about n parts. */
static double s_nice_step(double range, int n)
{
    double raw = range / n;
    if (!(raw > 0) || !isfinite(raw)) return 1.0;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

/* The loss plot's frame: the svg size W x H, margins L, R, T, B, the plot
 * area pw x ph inside them and the data ranges it spans. */
typedef struct {
    double W, H, L, R, T, B, pw, ph;
    double xmin, xmax, ymin, ymax;
} s_plot_t;

/* The grid with tick labels at round values, the axes and their names. */
static void s_svg_grid(http_reply_t *o, const s_plot_t *p)
{
    double ystep = s_nice_step(p->ymax - p->ymin, 4), xstep = fmax(1.0, s_nice_step(p->xmax - p->xmin, 5));
    for (int k = 0; k < 24; k++) {
        double vy = (ceil(p->ymin / ystep) + k) * ystep;
        if (vy > p->ymax) break;
        double fy = p->T + p->ph * (p->ymax - vy) / (p->ymax - p->ymin);
        http_reply_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>",
                          p->L, fy, p->L + p->pw, fy);
        http_reply_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%.4g</text>",
                          p->L - 6, fy + 4, fabs(vy) < 1e-9 * ystep ? 0.0 : vy);
    }
    for (int k = 0; k < 24; k++) {
        double vx = (ceil(p->xmin / xstep) + k) * xstep;
        if (vx > p->xmax) break;
        double fx = p->L + p->pw * (vx - p->xmin) / (p->xmax - p->xmin);
        http_reply_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>",
                          fx, p->T, fx, p->T + p->ph);
        http_reply_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">%.0f</text>",
                          fx, p->T + p->ph + 16, vx);
    }
    http_reply_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>",
                      p->L, p->T, p->L, p->T + p->ph, p->L, p->T + p->ph, p->L + p->pw, p->T + p->ph);
    http_reply_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#333\">update</text>",
                      p->L + p->pw / 2, p->H - 6);
    http_reply_printf(o, "<text x=\"14\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#333\" "
                      "transform=\"rotate(-90 14 %.1f)\">loss</text>", p->T + p->ph / 2, p->T + p->ph / 2);
}

/* The loss curve of the n points of s, split at gaps (non-finite points),
 * and a dot on its last point. */
static void s_svg_curve(http_reply_t *o, const status_snapshot_t *s, int n, const s_plot_t *p)
{
    int open = 0;
    double lx = 0, ly = 0;
    for (int i = 0; i < n; i++) {
        double x = s->loss_hist[i].update, y = s->loss_hist[i].loss;
        if (!isfinite(x) || !isfinite(y)) {
            if (open) S_LIT(o, "\"/>");
            open = 0;
            continue;
        }
        lx = p->L + p->pw * (x - p->xmin) / (p->xmax - p->xmin);
        ly = p->T + p->ph * (p->ymax - y) / (p->ymax - p->ymin);
        if (!open) {
            S_LIT(o, "<polyline fill=\"none\" stroke=\"#3467c8\" stroke-width=\"1.6\" "
                              "stroke-linejoin=\"round\" points=\"");
            open = 1;
        }
        http_reply_printf(o, "%.1f,%.1f ", lx, ly);
    }
    if (open) S_LIT(o, "\"/>");
    http_reply_printf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#3467c8\"/>", lx, ly);
}

/* The loss curve: inline SVG with axes, grid, tick labels and one polyline
 * per run of finite points. */
static void s_loss_svg(http_reply_t *o, const status_snapshot_t *s)
{
    s_plot_t p = {.W = 720, .H = 280, .L = 60, .R = 16, .T = 14, .B = 40,
                  .xmin = INFINITY, .xmax = -INFINITY, .ymin = INFINITY, .ymax = -INFINITY};
    p.pw = p.W - p.L - p.R;
    p.ph = p.H - p.T - p.B;
    int n = s_nloss(s), nfin = 0;
    for (int i = 0; i < n; i++) {
        double x = s->loss_hist[i].update, y = s->loss_hist[i].loss;
        if (!isfinite(x) || !isfinite(y)) continue;
        nfin++;
        p.xmin = fmin(p.xmin, x); p.xmax = fmax(p.xmax, x);
        p.ymin = fmin(p.ymin, y); p.ymax = fmax(p.ymax, y);
    }
    http_reply_printf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                      "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"training loss\" "
                      "font-family=\"sans-serif\" font-size=\"11\">", p.W, p.H, p.W, p.H);
    if (nfin == 0) {
        http_reply_printf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#888\">"
                          "no loss yet (the last stage reports it)</text></svg>", p.W / 2, p.H / 2);
        return;
    }
    if (p.xmax - p.xmin < 1.0) { p.xmin -= 0.5; p.xmax += 0.5; }
    if (p.ymax - p.ymin < 1e-6 * fmax(1.0, fabs(p.ymax))) { p.ymin -= 0.5; p.ymax += 0.5; }
    else { double pad = 0.05 * (p.ymax - p.ymin); p.ymin -= pad; p.ymax += pad; }
    s_svg_grid(o, &p);
    s_svg_curve(o, s, n, &p);
    S_LIT(o, "</svg>");
}

int status_render_html(http_reply_t *o, const status_snapshot_t *s)
{
    char a[64], b[64], c[64];
    S_LIT(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                      "<meta http-equiv=\"refresh\" content=\"2\">"
                      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                      "<title>brigade &middot; ");
    S_HTML_FIELD(o, s->node);
    http_reply_printf(o, "</title><style>%s</style></head><body>\n", s_css);
    S_LIT(o, "<h1>brigade</h1><p class=\"sub\">");
    S_HTML_FIELD(o, s->role);
    S_LIT(o, " <b class=\"mono\">");
    S_HTML_FIELD(o, s->node);
    if (s->stage >= 0) http_reply_printf(o, "</b> &middot; stage %d of %d", s->stage, s->nstages);
    else http_reply_printf(o, "</b> &middot; no stage yet (%d stages)", s->nstages);
    S_LIT(o, " &middot; model ");
    S_HTML_FIELD(o, s->model);
    S_LIT(o, " &middot; run <span class=\"mono\">");
    S_HTML_FIELD(o, s->run);
    http_reply_printf(o, "</span> &middot; up %s s</p>\n", s_fmt(a, sizeof a, "%.0f", s->uptime_s));

    S_LIT(o, "<div class=\"cards\">");
    snprintf(a, sizeof a, "%" PRIu64, s->updates);
    s_card(o, a, "updates");
    snprintf(a, sizeof a, "%" PRIu64, s->version);
    s_card(o, a, "weight version");
    if (s->steps_total) {
        snprintf(a, sizeof a, "%" PRIu64 " / %" PRIu64, s->steps_done, s->steps_total);
        s_card(o, a, "run microbatches");
    }
    s_card(o, s_fmt(a, sizeof a, "%.4f", s->loss), "loss");
    s_card(o, s_fmt(a, sizeof a, "%.0f", s->tokens_per_s), "tokens/s since start");
    snprintf(a, sizeof a, "%" PRIu64, s->tokens);
    s_card(o, a, "tokens");
    snprintf(c, sizeof c, "%s sent (%s raw)", s_fmt_bytes(a, sizeof a, s->bytes_sent),
             s_fmt_bytes(b, sizeof b, s->bytes_sent_raw));
    s_card(o, c, "on the wire");
    s_card(o, s_fmt(a, sizeof a, "%.2fx", s_compression(s)), "compression");
    s_card(o, s_fmt_bytes(a, sizeof a, s->bytes_recv), "received");
    snprintf(a, sizeof a, "%" PRIu64, s->drops);
    s_card(o, a, "dropped messages");
    snprintf(a, sizeof a, "%d", s->inflight);
    s_card(o, a, "in flight");
    S_LIT(o, "</div>\n<h2>Swarm map</h2>");
    s_swarm_map(o, s);
    S_LIT(o, "\n<h2>Training loss</h2>");
    s_loss_svg(o, s);
    S_LIT(o, "\n<footer>");
    if (s->join_addr[0]) {
        S_LIT(o, "join with: <span class=\"mono\">--join ");
        S_HTML_FIELD(o, s->join_addr);
        S_LIT(o, "</span><br>");
    }
    S_LIT(o, "the same data as JSON: <a href=\"/status.json\">/status.json</a>"
                      " &middot; this page reloads every 2 s</footer>\n</body></html>\n");
    return o->failed ? -1 : 0;
}

int status_serve(const status_snapshot_t *s, const char *path, http_reply_t *reply)
{
    if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0) {
        reply->status = 200;
        http_reply_type(reply, "text/html; charset=utf-8");
        return status_render_html(reply, s);
    }
    if (strcmp(path, "/status.json") == 0) {
        reply->status = 200;
        http_reply_type(reply, "application/json");
        return status_render_json(reply, s);
    }
    reply->status = 404;
    http_reply_type(reply, "text/plain; charset=utf-8");
    return http_reply_printf(reply, "404 not found: try / or /status.json\n");
}
