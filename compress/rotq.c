/* rotq.c: rotated quantizers.  See rotq.h. */
#include "compress/rotq.h"
#include "compress/quant.h"

#include <math.h>
#include <string.h>

/* Lloyd-Max levels of a unit normal (Max 1960), ascending. */
static const float s_l1[2] = {-0.7979f, 0.7979f};
static const float s_l2[4] = {-1.5104f, -0.4528f, 0.4528f, 1.5104f};
static const float s_l3[8] = {-2.1520f, -1.3439f, -0.7560f, -0.2451f, 0.2451f, 0.7560f, 1.3439f, 2.1520f};
static const float s_l4[16] = {-2.7326f, -2.0690f, -1.6181f, -1.2562f, -0.9424f, -0.6568f, -0.3881f, -0.1284f,
                               0.1284f, 0.3881f, 0.6568f, 0.9424f, 1.2562f, 1.6181f, 2.0690f, 2.7326f};

const float *rotq_levels(int bits)
{
    switch (bits) {
    case 1: return s_l1;
    case 2: return s_l2;
    case 3: return s_l3;
    case 4: return s_l4;
    default: return NULL;
    }
}

float rotq_sign(int j)
{
    uint64_t h = (uint64_t)(uint32_t)j * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return (h >> 63) ? -1.0f : 1.0f;
}

int rotq_tile_ok(int bs)
{
    return bs >= ROTQ_MIN_TILE && bs <= ROTQ_MAX_TILE && (bs & (bs - 1)) == 0;
}

size_t rotq_code_bytes(size_t n, int bs, int bits)
{
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    return nb * (size_t)bs * (size_t)bits / 8;
}

double rotq_gain(int bs, int bits)
{
    const float *l = rotq_levels(bits);
    return l ? (double)l[(1 << bits) - 1] * sqrt((double)bs) : 0.0;
}

/* ------------------------------------------------------------ shared steps */

/* The tile's scale: the RMS of its scaled values (padding counts as 0),
 * summed in double in index order, as an fp16 number. */
static uint16_t s_tile_scale(const float *x, size_t len, int bs, float p2ne)
{
    double ss = 0.0;
    for (size_t j = 0; j < len; j++) {
        double v = (double)(x[j] * p2ne);
        ss += v * v;
    }
    return quant_f32_to_f16((float)sqrt(ss / bs));
}

/* The code of u (a rotated value over the scale): how many of the
 * thresholds (midpoints of adjacent levels) lie below it. */
static int s_code(double u, const float *lv, int nl)
{
    int c = 0;
    for (int k = 0; k + 1 < nl; k++)
        c += u > 0.5 * ((double)lv[k] + (double)lv[k + 1]);
    return c;
}

/* Packs bs codes (bs a multiple of 8) at bits each into q. */
static void s_pack(uint8_t *q, const uint8_t *c, int bs, int bits)
{
    for (int g = 0; g < bs; g += 8) {
        uint64_t acc = 0;
        for (int j = 0; j < 8; j++)
            acc |= (uint64_t)c[g + j] << (j * bits);
        for (int b = 0; b < bits; b++)
            *q++ = (uint8_t)(acc >> (8 * b));
    }
}

static void s_unpack(uint8_t *c, const uint8_t *q, int bs, int bits)
{
    unsigned mask = (1u << bits) - 1;
    for (int g = 0; g < bs; g += 8) {
        uint64_t acc = 0;
        for (int b = 0; b < bits; b++)
            acc |= (uint64_t)*q++ << (8 * b);
        for (int j = 0; j < 8; j++)
            c[g + j] = (uint8_t)((acc >> (j * bits)) & mask);
    }
}

static int s_parity(int v) { return __builtin_parity((unsigned)v); }

/* ------------------------------------------------------------ reference */

void rotq_quant_ref(uint16_t *d, uint8_t *q, const float *x, size_t n, int bs, int bits, float p2ne)
{
    const float *lv = rotq_levels(bits);
    int nl = 1 << bits;
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    double t[ROTQ_MAX_TILE];
    uint8_t c[ROTQ_MAX_TILE];
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * (size_t)bs, len = n - i0 < (size_t)bs ? n - i0 : (size_t)bs;
        d[b] = s_tile_scale(x + i0, len, bs, p2ne);
        double sf = (double)quant_f16_to_f32(d[b]);
        for (int j = 0; j < bs; j++)
            t[j] = (size_t)j < len ? (double)(x[i0 + j] * p2ne) * rotq_sign(j) : 0.0;
        for (int k = 0; k < bs; k++) {
            double v = 0.0;
            for (int j = 0; j < bs; j++)
                v += s_parity(j & k) ? -t[j] : t[j];
            v /= sqrt((double)bs);
            c[k] = (uint8_t)s_code(sf > 0 ? v / sf : 0.0, lv, nl);
        }
        s_pack(q + b * (size_t)bs * (size_t)bits / 8, c, bs, bits);
    }
}

void rotq_dequant_ref(float *y, const uint16_t *d, const uint8_t *q, size_t n, int bs, int bits, float p2e)
{
    const float *lv = rotq_levels(bits);
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    uint8_t c[ROTQ_MAX_TILE];
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * (size_t)bs, len = n - i0 < (size_t)bs ? n - i0 : (size_t)bs;
        double sf = (double)quant_f16_to_f32(d[b]);
        s_unpack(c, q + b * (size_t)bs * (size_t)bits / 8, bs, bits);
        for (size_t j = 0; j < len; j++) {
            double v = 0.0;
            for (int k = 0; k < bs; k++)
                v += (s_parity((int)j & k) ? -1.0 : 1.0) * lv[c[k]] * sf;
            y[i0 + j] = (float)(v / sqrt((double)bs) * rotq_sign((int)j) * p2e);
        }
    }
}

/* ------------------------------------------------------------ fast */

/* In-place unnormalized Walsh-Hadamard transform of t[0..bs). */
static void s_fwht(float *t, int bs)
{
    for (int h = 1; h < bs; h *= 2)
        for (int i = 0; i < bs; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                float a = t[j], b = t[j + h];
                t[j] = a + b;
                t[j + h] = a - b;
            }
}

void rotq_quant(uint16_t *d, uint8_t *q, const float *x, size_t n, int bs, int bits, float p2ne)
{
    const float *lv = rotq_levels(bits);
    int nl = 1 << bits;
    float thr[15], t[ROTQ_MAX_TILE], sg[ROTQ_MAX_TILE];
    uint8_t c[ROTQ_MAX_TILE];
    for (int k = 0; k + 1 < nl; k++)
        thr[k] = 0.5f * (lv[k] + lv[k + 1]);
    for (int j = 0; j < bs; j++)
        sg[j] = rotq_sign(j);
    float norm = (float)(1.0 / sqrt((double)bs));
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * (size_t)bs, len = n - i0 < (size_t)bs ? n - i0 : (size_t)bs;
        d[b] = s_tile_scale(x + i0, len, bs, p2ne);
        float sf = quant_f16_to_f32(d[b]);
        for (size_t j = 0; j < len; j++)
            t[j] = x[i0 + j] * p2ne * sg[j];
        for (size_t j = len; j < (size_t)bs; j++)
            t[j] = 0.0f;
        s_fwht(t, bs);
        float inv = sf > 0 ? norm / sf : 0.0f;
        for (int k = 0; k < bs; k++) {
            float u = t[k] * inv;
            int code = 0;
            for (int m = 0; m + 1 < nl; m++)
                code += u > thr[m];
            c[k] = (uint8_t)code;
        }
        s_pack(q + b * (size_t)bs * (size_t)bits / 8, c, bs, bits);
    }
}

int rotq_dequant(float *y, const uint16_t *d, const uint8_t *q, size_t n, int bs, int bits, float p2e)
{
    const float *lv = rotq_levels(bits);
    float t[ROTQ_MAX_TILE], g[ROTQ_MAX_TILE];
    uint8_t c[ROTQ_MAX_TILE];
    float norm = (float)(1.0 / sqrt((double)bs)) * p2e;
    for (int j = 0; j < bs; j++)
        g[j] = norm * rotq_sign(j);
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    uint32_t bad = 0;
    for (size_t b = 0; b < nb; b++) {
        if ((d[b] & 0x8000u) || (d[b] & 0x7c00u) == 0x7c00u)
            return -1;
        size_t i0 = b * (size_t)bs, len = n - i0 < (size_t)bs ? n - i0 : (size_t)bs;
        float sf = quant_f16_to_f32(d[b]);
        s_unpack(c, q + b * (size_t)bs * (size_t)bits / 8, bs, bits);
        for (int k = 0; k < bs; k++)
            t[k] = lv[c[k]] * sf;
        s_fwht(t, bs);
        for (size_t j = 0; j < len; j++) {
            float v = t[j] * g[j];
            uint32_t u;
            memcpy(&u, &v, 4);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
            y[i0 + j] = v;
        }
    }
    return bad ? -2 : 0;
}
