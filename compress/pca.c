/* pca.c: the low-rank transform codec.  See pca.h. */
#include "compress/pca.h"
#include "compress/quant.h"

#include <math.h>
#include <string.h>

#define S_ITERS 3          /* subspace iterations (the Rayleigh-Ritz step sorts out the rest) */
#define S_JACOBI_SWEEPS 30
#define S_BASIS_SHARE 0.5  /* a direction's basis step over the one that would give it the coefficients'
                              error: its basis then adds about a quarter of that */

int pca_width_rank(int w) { return w < PCA_MAX_RANK ? w : PCA_MAX_RANK; }

size_t pca_raw_len(size_t m, int w, int r) { return 2 + (size_t)r * (2 + (size_t)w + m); }

int pca_rank_of(uint64_t raw_len, size_t m, int w)
{
    uint64_t per = 2 + (uint64_t)w + m;
    if (raw_len < 2 || (raw_len - 2) % per)
        return -1;
    uint64_t r = (raw_len - 2) / per, cap = (uint64_t)pca_width_rank(w);
    if (r > cap || r > m)
        return -1;
    return (int)r;
}

size_t pca_scratch_floats(size_t m, int w)
{
    size_t p = (size_t)pca_width_rank(w);
    return (size_t)w * (size_t)w + 3 * p * (size_t)w + m * p;
}

static uint16_t s_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static void s_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* The smallest fp16 number >= v (v >= 0 finite, below 65504). */
static uint16_t s_f16_up(float v)
{
    uint16_t h = quant_f32_to_f16(v);
    if (quant_f16_to_f32(h) < v)
        h++;
    return h;
}

/* A fixed +-1 start value for direction j, coordinate c. */
static float s_start(int j, int c)
{
    uint64_t h = ((uint64_t)(uint32_t)j << 32 | (uint32_t)c) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (h & 1) ? -1.0f : 1.0f;
}

/* ------------------------------------------------------------ eigen */

/* a . b over n floats, in 8 partial sums (which the compiler vectorizes;
 * the same bits on every machine). */
static float s_dot(const float *a, const float *b, int n)
{
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += a[i + k] * b[i + k];
    for (; i < n; i++)
        acc[0] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* y += a * x over n floats, 8 at a time (vectorized as s_dot). */
static void s_axpy(float *restrict y, float a, const float *restrict x, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            y[i + k] += a * x[i + k];
    for (; i < n; i++)
        y[i] += a * x[i];
}

/* G = X^T X (w x w) of the scaled rows. */
static void s_gram(float *restrict g, const float *restrict x, size_t m, int w, float p2ne)
{
    memset(g, 0, sizeof(float) * (size_t)w * (size_t)w);
    for (size_t i = 0; i < m; i++) {
        const float *restrict r = x + i * (size_t)w;
        for (int a = 0; a < w; a++) {                /* the upper triangle */
            float xa = r[a] * p2ne * p2ne;
            s_axpy(g + (size_t)a * (size_t)w + a, xa, r + a, w - a);
        }
    }
    for (int a = 0; a < w; a++)
        for (int b = 0; b < a; b++)
            g[(size_t)a * (size_t)w + b] = g[(size_t)b * (size_t)w + a];
}

/* t[j] = G v[j] for the p rows of v (each w long). */
static void s_apply(float *t, const float *g, const float *v, int p, int w)
{
    for (int j = 0; j < p; j++) {
        const float *vj = v + (size_t)j * (size_t)w;
        for (int a = 0; a < w; a++)
            t[(size_t)j * (size_t)w + a] = s_dot(g + (size_t)a * (size_t)w, vj, w);
    }
}

/* Gram-Schmidt (each row twice against those before it) on the p rows of
 * v; a row that is (nearly) in the
 * span of those before it becomes zero. */
static void s_orthonormalize(float *v, int p, int w)
{
    double top = 0.0;
    for (int j = 0; j < p; j++) {
        float *vj = v + (size_t)j * (size_t)w;
        for (int pass = 0; pass < 2; pass++)         /* twice: the second mends what rounding left */
            for (int k = 0; k < j; k++) {
                const float *vk = v + (size_t)k * (size_t)w;
                s_axpy(vj, -s_dot(vj, vk, w), vk, w);
            }
        double nn = (double)s_dot(vj, vj, w);
        if (nn > top)
            top = nn;
        float inv = nn > 1e-10 * top && nn > 0.0 ? (float)(1.0 / sqrt(nn)) : 0.0f;
        for (int c = 0; c < w; c++)
            vj[c] *= inv;
    }
}

/* Eigenvalues (lam, descending) and eigenvectors (columns of q, p x p) of
 * the symmetric s (p x p, destroyed), by cyclic Jacobi rotations. */
static void s_jacobi(double *s, double *q, double *lam, int p)
{
    for (int i = 0; i < p * p; i++)
        q[i] = 0.0;
    for (int i = 0; i < p; i++)
        q[i * p + i] = 1.0;
    for (int sweep = 0; sweep < S_JACOBI_SWEEPS; sweep++) {
        double off = 0.0, diag = 0.0;
        for (int i = 0; i < p; i++)
            for (int k = 0; k < p; k++)
                *(i == k ? &diag : &off) += s[i * p + k] * s[i * p + k];
        if (off <= 1e-24 * diag || off == 0.0)
            break;
        for (int a = 0; a < p - 1; a++)
            for (int b = a + 1; b < p; b++) {
                double sab = s[a * p + b];
                if (fabs(sab) <= 1e-9 * sqrt(fabs(s[a * p + a] * s[b * p + b])))
                    continue;                        /* already as good as the float basis */
                double th = (s[b * p + b] - s[a * p + a]) / (2.0 * sab);
                double t = (th >= 0 ? 1.0 : -1.0) / (fabs(th) + sqrt(th * th + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), sn = t * c;
                for (int k = 0; k < p; k++) {          /* columns a, b */
                    double xa = s[k * p + a], xb = s[k * p + b];
                    s[k * p + a] = c * xa - sn * xb;
                    s[k * p + b] = sn * xa + c * xb;
                }
                for (int k = 0; k < p; k++) {          /* rows a, b */
                    double xa = s[a * p + k], xb = s[b * p + k];
                    s[a * p + k] = c * xa - sn * xb;
                    s[b * p + k] = sn * xa + c * xb;
                }
                for (int k = 0; k < p; k++) {
                    double xa = q[k * p + a], xb = q[k * p + b];
                    q[k * p + a] = c * xa - sn * xb;
                    q[k * p + b] = sn * xa + c * xb;
                }
            }
    }
    for (int i = 0; i < p; i++)
        lam[i] = s[i * p + i];
    for (int i = 0; i < p; i++) {                    /* sort descending, columns with them */
        int best = i;
        for (int k = i + 1; k < p; k++)
            if (lam[k] > lam[best])
                best = k;
        if (best == i)
            continue;
        double tl = lam[i];
        lam[i] = lam[best];
        lam[best] = tl;
        for (int k = 0; k < p; k++) {
            double tq = q[k * p + i];
            q[k * p + i] = q[k * p + best];
            q[k * p + best] = tq;
        }
    }
}

/* The top p principal directions of the rows, as the p rows of v (w
 * long), strongest first (zero rows past the rank).  g is w*w, t p*w. */
static void s_directions(float *v, float *g, float *t, const float *x, size_t m, int w, int p, float p2ne)
{
    double s[PCA_MAX_RANK * PCA_MAX_RANK], q[PCA_MAX_RANK * PCA_MAX_RANK];   /* 64 KiB of stack */
    double lam[PCA_MAX_RANK];
    s_gram(g, x, m, w, p2ne);
    for (int j = 0; j < p; j++)
        for (int c = 0; c < w; c++)
            v[(size_t)j * (size_t)w + c] = s_start(j, c);
    s_orthonormalize(v, p, w);
    for (int it = 0; it < S_ITERS; it++) {
        s_apply(t, g, v, p, w);
        memcpy(v, t, sizeof(float) * (size_t)p * (size_t)w);
        s_orthonormalize(v, p, w);
    }
    s_apply(t, g, v, p, w);                          /* Rayleigh-Ritz */
    for (int a = 0; a < p; a++)
        for (int b = 0; b < p; b++)
            s[a * p + b] = s_dot(v + (size_t)a * (size_t)w, t + (size_t)b * (size_t)w, w);
    for (int a = 0; a < p; a++)                      /* symmetric by construction, up to rounding */
        for (int b = a + 1; b < p; b++)
            s[a * p + b] = s[b * p + a] = 0.5 * (s[a * p + b] + s[b * p + a]);
    s_jacobi(s, q, lam, p);
    for (int k = 0; k < p; k++) {
        float *tk = t + (size_t)k * (size_t)w;
        memset(tk, 0, sizeof(float) * (size_t)w);
        for (int j = 0; j < p; j++)
            s_axpy(tk, (float)q[j * p + k], v + (size_t)j * (size_t)w, w);
    }
    memcpy(v, t, sizeof(float) * (size_t)p * (size_t)w);
}

/* ------------------------------------------------------------ codec */

/* y[j*m + i] = row i . basis row j (times p2ne) for the p basis rows;
 * returns the largest |y|. */
static float s_coefs(float *y, const float *x, const float *basis, size_t m, int w, int p, float p2ne)
{
    float ymax = 0.0f;
    for (size_t i = 0; i < m; i++)
        for (int j = 0; j < p; j++) {
            float s = s_dot(x + i * (size_t)w, basis + (size_t)j * (size_t)w, w) * p2ne;
            y[(size_t)j * m + i] = s;
            ymax = fmaxf(ymax, fabsf(s));
        }
    return ymax;
}

/* Codes direction v (w long) into d (its scale, then w codes) and vq (as
 * decoded), with a step of at least floor: a direction whose coefficients
 * carry energy e is coded no finer than its coefficients' error needs
 * (floor = step * sqrt(m / (w e)) makes the basis's share of the error
 * about that of the coefficients), so a weak direction's codes are small. */
static void s_code_basis(uint8_t *d, float *vq, const float *v, int w, float floor)
{
    float amax = 0.0f;
    for (int c = 0; c < w; c++)
        amax = fmaxf(amax, fabsf(v[c]));
    uint16_t hs = s_f16_up(fmaxf(amax / 127.0f, floor));
    float sc = quant_f16_to_f32(hs);
    s_put16(d, hs);
    for (int c = 0; c < w; c++) {
        float code = sc > 0 ? fminf(fmaxf(rintf(v[c] / sc), -127.0f), 127.0f) : 0.0f;
        d[2 + c] = (uint8_t)(int8_t)code;
        vq[c] = code * sc;
    }
}

size_t pca_encode(uint8_t *raw, const float *x, size_t m, int w, float p2ne, float eps, float *scratch)
{
    int p = pca_width_rank(w);
    if ((size_t)p > m)
        p = (int)m;
    float *g = scratch, *v = g + (size_t)w * (size_t)w, *t = v + (size_t)p * (size_t)w;
    float *vq = t + (size_t)p * (size_t)w, *y = vq + (size_t)p * (size_t)w;
    size_t n = m * (size_t)w;
    double msq = 0.0;
    for (size_t i = 0; i < n; i++)
        msq += (double)(x[i] * p2ne) * (double)(x[i] * p2ne);
    msq /= (double)(n ? n : 1);
    s_put16(raw, 0);
    if (p == 0 || msq == 0.0)
        return pca_raw_len(m, w, 0);
    s_directions(v, g, t, x, m, w, p, p2ne);
    float ymax = s_coefs(y, x, v, m, w, p, p2ne);
    float step = fmaxf((float)sqrt(12.0 * (double)eps * msq), ymax / 127.0f);
    uint16_t hstep = s_f16_up(step);
    step = quant_f16_to_f32(hstep);
    s_put16(raw, hstep);
    size_t per = 2 + (size_t)w + m;
    uint8_t *dir = raw + 2;
    for (int j = 0; j < p; j++) {
        double e = 0.0;
        for (size_t i = 0; i < m; i++)
            e += (double)y[(size_t)j * m + i] * y[(size_t)j * m + i];
        float floor = e > 0 ? (float)(S_BASIS_SHARE * step * sqrt((double)m / ((double)w * e))) : 0.0f;
        s_code_basis(dir + (size_t)j * per, vq + (size_t)j * (size_t)w, v + (size_t)j * (size_t)w, w, floor);
    }
    /* the coefficients stay those on the exact basis: on the coded one,
     * which is not quite orthonormal, X Vq Vq^T would add the directions'
     * overlaps to the error */
    int r = 0;
    for (int j = 0; j < p; j++) {
        int8_t *cq = (int8_t *)(dir + (size_t)j * per + 2 + (size_t)w);
        int any = 0;
        for (size_t i = 0; i < m; i++) {
            float code = step > 0 ? fminf(fmaxf(rintf(y[(size_t)j * m + i] / step), -127.0f), 127.0f) : 0.0f;
            cq[i] = (int8_t)code;
            any |= code != 0.0f;
        }
        if (any)
            r = j + 1;
    }
    return pca_raw_len(m, w, r);
}

/* The direction j's fields. */
static void s_dir(const uint8_t *raw, size_t m, int w, int j, float *scale, const int8_t **basis, const int8_t **coef)
{
    const uint8_t *d = raw + 2 + (size_t)j * (2 + (size_t)w + m);
    *scale = quant_f16_to_f32(s_get16(d));
    *basis = (const int8_t *)(d + 2);
    *coef = (const int8_t *)(d + 2 + w);
}

static int s_bad_half(uint16_t h) { return (h & 0x8000u) || (h & 0x7c00u) == 0x7c00u; }

int pca_decode(float *y, const uint8_t *raw, size_t raw_len, size_t m, int w, float p2e)
{
    int r = pca_rank_of(raw_len, m, w);
    if (r < 0 || s_bad_half(s_get16(raw)))
        return PCA_E_SCALE;
    for (int j = 0; j < r; j++) {
        const uint8_t *d = raw + 2 + (size_t)j * (2 + (size_t)w + m);
        if (s_bad_half(s_get16(d)))
            return PCA_E_SCALE;
        for (size_t k = 0; k < (size_t)w + m; k++)
            if (d[2 + k] == 0x80)
                return PCA_E_CODE;
    }
    float step = quant_f16_to_f32(s_get16(raw));
    uint32_t bad = 0;
    for (size_t i = 0; i < m; i++) {
        float *row = y + i * (size_t)w;
        memset(row, 0, sizeof(float) * (size_t)w);
        for (int j = 0; j < r; j++) {
            float sc;
            const int8_t *b, *cf;
            s_dir(raw, m, w, j, &sc, &b, &cf);
            float a = (float)cf[i] * step;
            if (a == 0.0f)
                continue;
            int c = 0;
            for (; c + 8 <= w; c += 8)                /* 8 at a time: vectorized */
                for (int k = 0; k < 8; k++)
                    row[c + k] += a * ((float)b[c + k] * sc);
            for (; c < w; c++)
                row[c] += a * ((float)b[c] * sc);
        }
        for (int c = 0; c < w; c++) {
            row[c] *= p2e;
            uint32_t u;
            memcpy(&u, &row[c], 4);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
    }
    return bad ? PCA_E_NONFINITE : 0;
}

void pca_decode_ref(float *y, const uint8_t *raw, size_t raw_len, size_t m, int w, float p2e)
{
    int r = pca_rank_of(raw_len, m, w);
    double step = quant_f16_to_f32(s_get16(raw));
    for (size_t i = 0; i < m; i++)
        for (int c = 0; c < w; c++) {
            double s = 0.0;
            for (int j = 0; j < r; j++) {
                float sc;
                const int8_t *b, *cf;
                s_dir(raw, m, w, j, &sc, &b, &cf);
                s += (double)cf[i] * step * ((double)b[c] * sc);
            }
            y[i * (size_t)w + c] = (float)(s * p2e);
        }
}
