// SPDX-License-Identifier: MIT
/* Runtime ISA dispatch: cpuid, the per-model ISA cap, kernel tables. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"

extern const struct mi_cpu_kern mi_cpu_kern_generic;
#ifdef __x86_64__
extern const struct mi_cpu_kern mi_cpu_kern_avx2;
extern const struct mi_cpu_kern mi_cpu_kern_avx512;
#endif

static const char *const isa_names[] = {
	[MI_ISA_GENERIC] = "generic",
	[MI_ISA_AVX2] = "avx2",
	[MI_ISA_AVX512] = "avx512",
};
_Static_assert(sizeof(isa_names) / sizeof(isa_names[0]) == MI_ISA_COUNT,
	       "isa_names must name every enum mi_isa value");

int mi_cpu_isa_native(void)
{
#ifdef __x86_64__
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512dq"))
		return MI_ISA_AVX512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return MI_ISA_AVX2;
#endif
	return MI_ISA_GENERIC;
}

const char *mi_cpu_isa_name(int isa)
{
	return (isa >= 0 && isa < MI_ISA_COUNT) ? isa_names[isa] : "unknown";
}

int mi_cpu_isa(void)
{
	static atomic_int native = -1;
	int v = atomic_load_explicit(&native, memory_order_relaxed);

	if (v < 0) {
		v = mi_cpu_isa_native();
		atomic_store(&native, v);
	}
	return v;
}

int mi_cpu_opts_isa(const struct mi_cpu_opts *o)
{
	int native = mi_cpu_isa();

	return o && o->isa >= 0 && o->isa < native ? o->isa : native;
}

const struct mi_cpu_kern *mi_cpu_kern_get(int isa)
{
#ifdef __x86_64__
	if (isa == MI_ISA_AVX512)
		return &mi_cpu_kern_avx512;
	if (isa == MI_ISA_AVX2)
		return &mi_cpu_kern_avx2;
#endif
	return &mi_cpu_kern_generic;
}

float mi_epi_scalar(const struct mi_epi *e, float v, int64_t row, int64_t col)
{
	if (e->bias_kind == MI_BIAS_ROW)
		v += e->bias[row];
	else if (e->bias_kind == MI_BIAS_COL)
		v += e->bias[col];
	if (e->res)
		v += e->res[row * e->ldr + col];
	switch (e->act) {
	case MI_ACT_RELU:
		return v > 0.0f ? v : 0.0f;
	case MI_ACT_CLIP:
		return v < e->lo ? e->lo : (v > e->hi ? e->hi : v);
	case MI_ACT_HSWISH: {
		float t = v * e->lo + e->hi;

		t = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
		return v * t;
	}
	case MI_ACT_SIGMOID:
		return 1.0f / (1.0f + expf(-v));
	case MI_ACT_SILU:
		return v / (1.0f + expf(-v));
	default:
		return v;
	}
}

void *mi_cpu_alloc(size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, bytes ? (bytes + 63) / 64 * 64 : 64))
		return NULL;
	return p;
}

void mi_cpu_free(void *p)
{
	free(p);
}
