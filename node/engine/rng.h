/* rng.h: small deterministic random numbers (splitmix64 streams). */
#ifndef BRIGADE_RNG_H
#define BRIGADE_RNG_H
#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t state;  /* advances by the golden-ratio increment */
    float spare;     /* second Box-Muller value */
    int has_spare;   /* spare is valid */
} rng_t;

static inline uint64_t rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A stream keyed by (seed, stream): different streams are independent. */
static inline void rng_seed(rng_t *r, uint64_t seed, uint64_t stream)
{
    r->state = rng_mix(seed ^ rng_mix(stream + 0x9e3779b97f4a7c15ULL));
    r->has_spare = 0;
}

static inline uint64_t rng_u64(rng_t *r)
{
    r->state += 0x9e3779b97f4a7c15ULL;
    return rng_mix(r->state);
}

/* Uniform in [0, 1). */
static inline float rng_uniform(rng_t *r)
{
    return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f);
}

/* Standard normal (Box-Muller). */
static inline float rng_normal(rng_t *r)
{
    if (r->has_spare) { r->has_spare = 0; return r->spare; }
    double u1 = ((double)(rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    double m = sqrt(-2.0 * log(u1));
    r->spare = (float)(m * sin(6.283185307179586 * u2));
    r->has_spare = 1;
    return (float)(m * cos(6.283185307179586 * u2));
}
#endif
