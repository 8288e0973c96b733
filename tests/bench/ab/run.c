/* run.c: alternate the training steps of several engine builds in one
 * process (tests/bench/ab_engine.sh).
 *
 *   ab_run MODEL STEPS A.so B.so ...
 *
 * Each library is one tree's engine with step.c.  After 3 warm-up steps
 * each, the libraries take one step in turn, STEPS times; each step is
 * timed by the thread's CPU clock.  Alternating step by step inside one
 * process puts every build under the same load, cache and frequency, which
 * on a shared machine separates differences of 1% that separate runs cannot.
 * Prints per library the fastest, 25th percentile and median step, their
 * ratios to the first library's, and the last loss (equal losses mean the
 * builds compute the same numbers). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define S_MAX_LIBS 8

typedef struct {
    void *handle;                       /* dlopen's */
    void *engine;                       /* ab_new's */
    double (*step)(void *, float *);    /* ab_step */
    void (*destroy)(void **);           /* ab_destroy */
    double *t;                          /* step times, seconds */
    float loss;                         /* the last step's */
} s_lib_t;

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int s_open(s_lib_t *l, const char *path, const char *model, int steps)
{
    l->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!l->handle) { fprintf(stderr, "ab_run: %s\n", dlerror()); return -1; }
    void *(*make)(const char *, int) = (void *(*)(const char *, int))dlsym(l->handle, "ab_new");
    l->step = (double (*)(void *, float *))dlsym(l->handle, "ab_step");
    l->destroy = (void (*)(void **))dlsym(l->handle, "ab_destroy");
    if (!make || !l->step || !l->destroy) { fprintf(stderr, "ab_run: %s: not an ab library\n", path); return -1; }
    l->engine = make(model, 8);
    l->t = calloc((size_t)steps, sizeof(double));
    return l->engine && l->t ? 0 : -1;
}

int main(int argc, char **argv)
{
    int steps = argc > 2 ? atoi(argv[2]) : 0, n = argc - 3;
    if (argc < 4 || steps < 1 || n > S_MAX_LIBS) {
        fprintf(stderr, "usage: ab_run MODEL STEPS A.so B.so ... (at most %d libraries)\n", S_MAX_LIBS);
        return 2;
    }
    s_lib_t lib[S_MAX_LIBS] = {0};
    for (int i = 0; i < n; i++)
        if (s_open(&lib[i], argv[3 + i], argv[1], steps) < 0) return 1;
    for (int w = 0; w < 3; w++)
        for (int i = 0; i < n; i++) lib[i].step(lib[i].engine, &lib[i].loss);
    for (int s = 0; s < steps; s++)
        for (int i = 0; i < n; i++) lib[i].t[s] = lib[i].step(lib[i].engine, &lib[i].loss);
    for (int i = 0; i < n; i++) qsort(lib[i].t, (size_t)steps, sizeof(double), s_cmp);
    for (int i = 0; i < n; i++) {
        const double *t = lib[i].t, *t0 = lib[0].t;
        printf("%-40s %s min %8.3f ms  p25 %8.3f  median %8.3f  (/first: min %.4f, median %.4f)  loss %.6f\n",
               argv[3 + i], argv[1], 1e3 * t[0], 1e3 * t[steps / 4], 1e3 * t[steps / 2], t[0] / t0[0],
               t[steps / 2] / t0[steps / 2], (double)lib[i].loss);
    }
    for (int i = 0; i < n; i++) {
        lib[i].destroy(&lib[i].engine);
        free(lib[i].t);
    }
    return 0;
}
