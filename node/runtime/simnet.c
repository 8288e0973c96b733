/* simnet.c: the simulator's virtual network (simcore.h): every node's
 * uplink serializes its messages, every directed link adds its latency and
 * jitter and keeps order, messages may be lost or cut by a partition; and
 * the rogue nodes' garbage and replays. */
#include "node/runtime/simcore.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the virtual network ---- */

void sim_msg_free(simmsg_t *m)
{
    free(m);
}

static int s_addr_node(const sim_t *s, const char *addr)
{
    int idx, port;
    if (sscanf(addr, "n%d.sim:%d", &idx, &port) != 2 || idx < 0 || idx >= s->nnodes || port != SIM_PORT) return -1;
    return idx;
}

int sim_port_connect(void *arg, const char *addr, const uint8_t pub[32], char *err, size_t errlen)
{
    snode_t *n = arg;
    int dst = s_addr_node(n->sim, addr);
    if (dst < 0 || memcmp(n->sim->node[dst]->keys.pub, pub, 32) != 0) {
        snprintf(err, errlen, "no such node: %s", addr);
        return -1;
    }
    if (n->nlinks == n->caplinks) {
        int cap = n->caplinks ? 2 * n->caplinks : 16;
        int *l = realloc(n->links, sizeof(int) * (size_t)cap);
        if (!l) { snprintf(err, errlen, "out of memory"); return -1; }
        n->links = l;
        n->caplinks = cap;
    }
    n->links[n->nlinks] = dst;
    return n->nlinks++;
}

void sim_port_disconnect(void *arg, int link)
{
    snode_t *n = arg;
    if (link >= 0 && link < n->nlinks) n->links[link] = -1;
}

/* The last arrival time on the directed link src -> dst (its slot, made on first use). */
static double *s_pair_last(sim_t *s, int src, int dst)
{
    uint64_t key = ((uint64_t)(uint32_t)src << 32) | (uint32_t)dst;
    int i = idmap_get(&s->pair_ix, key);
    if (i >= 0) return &s->pair_last[i];
    if (s->npairs == s->cappairs) {
        int cap = s->cappairs ? 2 * s->cappairs : 1024;
        double *p = realloc(s->pair_last, sizeof(double) * (size_t)cap);
        if (!p) return NULL;
        s->pair_last = p;
        s->cappairs = cap;
    }
    if (idmap_put(&s->pair_ix, key, s->npairs) < 0) return NULL;
    s->pair_last[s->npairs] = 0;
    return &s->pair_last[s->npairs++];
}

static int s_control(int type)
{
    return type == WIRE_PEERS || type == WIRE_PING || type == WIRE_PONG || type == WIRE_JOIN || type == WIRE_WELCOME
           || type == WIRE_BYE || type == WIRE_DONE;
}

/* Puts a message on the wire from src to dst: uplink serialization, latency, jitter, loss. */
void sim_transmit(sim_t *s, simmsg_t *m)
{
    snode_t *src = s->node[m->src];
    s->res->bytes_sent += m->bytes;
    if (s_control(m->type)) s->res->control_bytes += m->bytes;
    s->res->type_msgs[m->type & 15]++;
    s->res->type_bytes[m->type & 15] += m->bytes;
    double start = src->egress_free > s->now ? src->egress_free : s->now;
    double ser = src->bps > 0 ? (double)m->bytes * 8.0 / src->bps : 0;
    src->egress_free = start + ser;
    if (m->type == WIRE_AVG) src->tm.avg_end = src->egress_free;
    double lat = sim_range(s, ((uint64_t)(uint32_t)m->src << 32) | (uint32_t)m->dst, s->so.lat_lo, s->so.lat_hi) * 1e-3;
    double at = src->egress_free + lat + (s->so.jitter_ms > 0 ? sim_uniform(s) * s->so.jitter_ms * 1e-3 : 0);
    double *last = s_pair_last(s, m->src, m->dst);
    if (last) {
        if (at < *last) at = *last;   /* TCP keeps order on a link */
        *last = at;
    }
    if (s->so.loss > 0 && sim_uniform(s) < s->so.loss) {
        s->res->bytes_dropped += m->bytes;
        sim_msg_free(m);
        return;
    }
    s->res->bytes_inflight += m->bytes;
    sim_push(s, at, EV_DELIVER, m->dst, 0, m);
}

/* A message from node src to dst with the given header and frames (copied). */
simmsg_t *sim_msg_new(sim_t *s, int src, int dst, const wire_hdr_t *h, const void *const *f, const size_t *l,
                           int nf, uint64_t virt)
{
    if (nf < 0 || nf > TRANSPORT_MAX_FRAMES) return NULL;
    size_t total = 0;
    for (int i = 0; i < nf; i++) total += l[i];
    simmsg_t *m = malloc(sizeof *m + total);
    if (!m) return NULL;
    memset(m, 0, sizeof *m);
    m->src = src;
    m->dst = dst;
    m->dst_inc = s->node[dst]->inc;
    wire_hdr_t hh = *h;
    hh.magic = WIRE_MAGIC;
    hh.version = WIRE_VERSION;
    hh.sender = s->node[src]->id;
    wire_hdr_encode(m->hdr, &hh);
    m->type = h->type;
    m->nframes = nf;
    size_t off = 0;
    for (int i = 0; i < nf; i++) {
        m->len[i] = l[i];
        if (l[i]) memcpy(m->data + off, f[i], l[i]);
        off += l[i];
    }
    m->virt = virt;
    m->bytes = WIRE_HDR_LEN + total + virt;
    return m;
}

int sim_port_send(void *arg, int link, const transport_msg_t *to, const wire_hdr_t *h,
                       const void *const *f, const size_t *l, int nf, uint64_t virt)
{
    snode_t *n = arg;
    sim_t *s = n->sim;
    int dst = -1;
    if (link >= 0) dst = link < n->nlinks ? n->links[link] : -1;
    else if (to && to->route_len == sizeof(int)) memcpy(&dst, to->route, sizeof(int));
    if (dst < 0 || dst >= s->nnodes) return -1;
    simmsg_t *m = sim_msg_new(s, n->idx, dst, h, f, l, nf, virt);
    if (!m) return -1;
    sim_transmit(s, m);
    return 0;
}

void sim_deliver(sim_t *s, simmsg_t *m)
{
    snode_t *n = s->node[m->dst];
    s->res->bytes_inflight -= m->bytes;
    int cut = s->part_active && s->part[m->src] != s->part[m->dst];
    transport_msg_t tm;
    memset(&tm, 0, sizeof tm);
    char err[160];
    if (!n->alive || !n->net || n->inc != m->dst_inc || cut || wire_hdr_decode(&tm.hdr, m->hdr, WIRE_HDR_LEN, err, sizeof err) < 0) {
        s->res->bytes_dropped += m->bytes;
        sim_msg_free(m);
        return;
    }
    s->res->bytes_delivered += m->bytes;
    memcpy(tm.sender_pub, s->node[m->src]->keys.pub, 32);
    tm.sender = s->node[m->src]->id;
    tm.link = -1;
    tm.nframes = m->nframes;
    size_t off = 0;
    for (int i = 0; i < m->nframes; i++) {
        tm.frame[i] = m->data + off;
        tm.len[i] = m->len[i];
        off += m->len[i];
    }
    memcpy(tm.route, &m->src, sizeof(int));
    tm.route_len = sizeof(int);
    sim_fold(s, ((uint64_t)m->type << 48) ^ tm.hdr.mb ^ ((uint64_t)m->src << 24) ^ (uint64_t)m->dst ^ m->bytes);
    netside_on_msg(n->net, &tm, m->virt);
    if (n->rogue) { sim_msg_free(n->last_in); n->last_in = m; }
    else sim_msg_free(m);
    sim_check_join(n);
    sim_check_learned(n);
    sim_net_kick(n);
}

/* A rogue node sends something bad to a random live node: garbage or a replay. */
void sim_rogue_send(sim_t *s, snode_t *n)
{
    int dst = (int)(sim_uniform(s) * s->nnodes);
    if (dst == n->idx || !s->node[dst]->alive) return;
    simmsg_t *m = NULL;
    if (n->last_in && sim_uniform(s) < 0.5) {
        /* a replay of what it received, as its own */
        wire_hdr_t h;
        char err[120];
        if (wire_hdr_decode(&h, n->last_in->hdr, WIRE_HDR_LEN, err, sizeof err) < 0) return;
        const void *f[TRANSPORT_MAX_FRAMES];
        size_t off = 0;
        for (int i = 0; i < n->last_in->nframes; i++) { f[i] = n->last_in->data + off; off += n->last_in->len[i]; }
        m = sim_msg_new(s, n->idx, dst, &h, f, n->last_in->len, n->last_in->nframes, n->last_in->virt);
    } else {
        /* garbage: any type of this run, frames of random bytes */
        uint8_t junk[512];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(sim_uniform(s) * 256);
        wire_hdr_t h;
        wire_hdr_init(&h, (wire_type_t)(1 + (int)(sim_uniform(s) * (WIRE_TYPE_END - 1))));
        h.run = netside_run(n->net);
        h.stage = (uint16_t)(sim_uniform(s) * n->o.stages);
        h.mb = sim_mix(s->rng);
        const void *f[2] = { junk, junk + 256 };
        size_t l[2] = { (size_t)(sim_uniform(s) * 256), (size_t)(sim_uniform(s) * 256) };
        m = sim_msg_new(s, n->idx, dst, &h, f, l, 1 + (sim_uniform(s) < 0.5), 0);
    }
    if (m) {
        s->rogue_sent += m->bytes;
        sim_transmit(s, m);
    }
}
