/* cpu.h: the instruction-set level the fast kernels run at.
 *
 * brigade is built for baseline x86-64, so one binary runs on every x86-64
 * machine.  The kernels that gain from newer instructions are compiled for
 * them with target attributes, next to a plain C version, and each call
 * picks one by cpu_level(): compress/quant.c (SSE4.1 quantizers, F16C fp16
 * conversion), node/engine/attention.c (the AVX-512 attention kernels) and
 * node/engine/gemm.c (the AVX-512 matrix product; BRIGADE_GEMM=blas sends
 * the products to OpenBLAS instead).  Every fast kernel gives the same bits as its plain
 * version, except where its header says otherwise (attention and gemm:
 * fused multiply-adds).
 *
 * BRIGADE_CPU in the environment caps the level: `generic` (plain C only),
 * `sse4.1`, `avx2`, `avx512`, or `native` (the default: the best this CPU
 * runs).  On other architectures the level is always generic.
 * No state: every call reads the CPU features the compiler's runtime read
 * once at start-up, and the environment; kernels call cpu_level() on each
 * call, so it must stay cheap (no CPUID instruction on that path with gcc:
 * on a virtual machine each one traps to the hypervisor). */
#ifndef BRIGADE_CPU_H
#define BRIGADE_CPU_H

typedef enum {
    CPU_GENERIC = 0,   /* plain C */
    CPU_SSE41 = 1,     /* SSE4.1 (x86-64-v2) */
    CPU_AVX2 = 2,      /* AVX2, FMA, F16C (x86-64-v3) */
    CPU_AVX512 = 3,    /* AVX-512 F, BW, DQ, VL (x86-64-v4) */
} cpu_level_t;

/* The best level this CPU (and its OS) runs. */
cpu_level_t cpu_hw_level(void);

/* The level the kernels use: cpu_hw_level() capped by BRIGADE_CPU (an
 * unknown value counts as generic; cpu_env_check reports it). */
cpu_level_t cpu_level(void);

/* Parses a BRIGADE_CPU value; "native" gives the hardware level.
 * Returns 0, or -1 if s names no level. */
int cpu_level_parse(const char *s, cpu_level_t *out);

/* 0 if BRIGADE_CPU is unset or valid; else -1 and a one-line reason. */
int cpu_env_check(char *err, int errlen);

/* "generic", "sse4.1", "avx2" or "avx512". */
const char *cpu_level_name(cpu_level_t level);

#endif
