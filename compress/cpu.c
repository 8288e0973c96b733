/* cpu.c: run-time choice of the kernels' instruction set.  See cpu.h. */
#include "compress/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_names[] = {"generic", "sse4.1", "avx2", "avx512"};

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>

/* F16C.  Its instructions are VEX-encoded, so the AVX state they need is
 * the one the avx2 test below already requires.  gcc's runtime knows the
 * name and answers from the CPUID it read once at start-up; clang's does not
 * know it, so there CPUID leaf 1 (ECX bit 29) is read on each call, which
 * costs a trap to the hypervisor on a virtual machine (about 15 us). */
static int s_has_f16c(void)
{
#if defined(__clang__)
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
#else
    return __builtin_cpu_supports("f16c") != 0;
#endif
}
#endif

cpu_level_t cpu_hw_level(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    int f16c = s_has_f16c();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("fma") && f16c)
        return CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
        return CPU_AVX2;
    if (__builtin_cpu_supports("sse4.1"))
        return CPU_SSE41;
#endif
    return CPU_GENERIC;
}

int cpu_level_parse(const char *s, cpu_level_t *out)
{
    if (!strcmp(s, "native")) {
        *out = cpu_hw_level();
        return 0;
    }
    for (int i = 0; i < (int)(sizeof s_names / sizeof s_names[0]); i++)
        if (!strcmp(s, s_names[i])) {
            *out = (cpu_level_t)i;
            return 0;
        }
    return -1;
}

cpu_level_t cpu_level(void)
{
    cpu_level_t hw = cpu_hw_level(), cap = hw;
    const char *e = getenv("BRIGADE_CPU");
    if (e && *e && cpu_level_parse(e, &cap) < 0)
        cap = CPU_GENERIC;
    return cap < hw ? cap : hw;
}

int cpu_env_check(char *err, int errlen)
{
    const char *e = getenv("BRIGADE_CPU");
    cpu_level_t l;
    if (!e || !*e || cpu_level_parse(e, &l) == 0)
        return 0;
    snprintf(err, (size_t)errlen, "BRIGADE_CPU=%s: must be generic, sse4.1, avx2, avx512 or native", e);
    return -1;
}

const char *cpu_level_name(cpu_level_t level)
{
    return (unsigned)level < sizeof s_names / sizeof s_names[0] ? s_names[level] : "?";
}
