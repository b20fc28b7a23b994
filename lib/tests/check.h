/* SPDX-License-Identifier: MIT */
/*
 * What the library's test programs share: CHECK counts a check and, when
 * it fails, prints one FAIL line (the place, the condition, the message,
 * the library's last error if any) and goes on; a program prints its
 * totals from fails / checks and exits non-zero on any failure.  now_s()
 * is the monotonic clock in seconds.
 */
#ifndef MI_TEST_CHECK_H
#define MI_TEST_CHECK_H

#include <stdio.h>
#include <time.h>

#include <metainfer/metainfer.h>

static int fails, checks;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		checks++;                                                 \
		if (!(cond)) {                                            \
			fails++;                                          \
			printf("FAIL %s:%d: %s:", __FILE__, __LINE__,     \
			       #cond);                                    \
			printf(" " __VA_ARGS__);                          \
			if (mi_last_error()[0])                           \
				printf(" (%s)", mi_last_error());         \
			printf("\n");                                     \
		}                                                         \
	} while (0)

static inline double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

#endif
