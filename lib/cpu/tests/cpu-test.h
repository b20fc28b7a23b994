/* SPDX-License-Identifier: MIT */
/*
 * What the lib/cpu graph tests share: a CHECK that counts and goes on
 * (each test program prints "N checks, M failed" and exits non-zero on
 * any failure), and the normalized error every fast kernel is judged by.
 */
#ifndef MI_CPU_TEST_H
#define MI_CPU_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"

static int failures, checks;

/* The ISA under test: "--isa NAME" (generic, avx2, avx512; at most the
 * CPU's own, a higher one runs the CPU's) or the CPU's; every planner
 * call passes it in struct mi_cpu_opts.isa, kernels come from its tables.
 * Returns argv's first index after the option. */
static int test_isa;

static inline int test_isa_arg(int argc, char **argv)
{
	test_isa = mi_cpu_isa();
	if (argc > 2 && !strcmp(argv[1], "--isa")) {
		for (int i = 0; i < MI_ISA_COUNT; i++)
			if (!strcmp(argv[2], mi_cpu_isa_name(i)) && i <= test_isa)
				test_isa = i;
		return 3;
	}
	return 1;
}

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		checks++;                                                  \
		if (!(cond)) {                                             \
			failures++;                                        \
			printf("FAIL %s:%d: %s: ", __func__, __LINE__, #cond); \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

/* max |y - ref| / max |ref| (floor 1e-6); a NaN in y counts as infinite */
static inline double nerr(const float *y, const float *ref, int64_t n)
{
	double md = 0, mr = 0;

	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)y[i] - ref[i]);

		md = d > md || isnan(d) ? d : md;
		mr = fabs(ref[i]) > mr ? fabs(ref[i]) : mr;
	}
	return md / (mr > 1e-6 ? mr : 1e-6);
}

#endif
