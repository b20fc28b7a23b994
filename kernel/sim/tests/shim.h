/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Userspace shim for the sim's pure-computation files (mi_sim_exec.c,
 * mi_sim_model.c), in the spirit of the kernel's tools/testing harnesses:
 * just enough of the kernel API to compile them unchanged as userspace C.
 * Force-included (-include) before everything; the shim/linux headers
 * are empty.
 */
#ifndef MI_SIM_UT_SHIM_H
#define MI_SIM_UT_SHIM_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <stdio.h>
#include <errno.h>
#include <sys/types.h>
#include "/usr/include/linux/types.h"

typedef uint8_t u8;
typedef int8_t s8;
typedef uint16_t u16;
typedef int16_t s16;
typedef uint32_t u32;
typedef int32_t s32;
typedef uint64_t u64;
typedef int64_t s64;
typedef size_t __kernel_size_t;
typedef unsigned int drm_handle_t;

#define S8_MIN INT8_MIN
#define S8_MAX INT8_MAX
#define U8_MAX UINT8_MAX
#define S16_MIN INT16_MIN
#define S16_MAX INT16_MAX
#define S32_MIN INT32_MIN
#define S32_MAX INT32_MAX
#define S64_MAX INT64_MAX
#define U32_MAX UINT32_MAX
#define U64_MAX UINT64_MAX
#define NSEC_PER_SEC 1000000000ULL
#define NSEC_PER_MSEC 1000000ULL

#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define max_t(t, a, b) ((t)(a) > (t)(b) ? (t)(a) : (t)(b))
#define clamp_t(t, v, lo, hi) min_t(t, max_t(t, v, lo), hi)
#define READ_ONCE(x) (x)
#define check_mul_overflow(a, b, d) __builtin_mul_overflow(a, b, d)
#define check_add_overflow(a, b, d) __builtin_add_overflow(a, b, d)

#define BIT(n) (1UL << (n))
#define BITS_PER_LONG (8 * sizeof(long))
#define BITS_TO_LONGS(n) (((n) + BITS_PER_LONG - 1) / BITS_PER_LONG)

static inline void bitmap_zero(unsigned long *b, unsigned int n)
{
	memset(b, 0, BITS_TO_LONGS(n) * sizeof(long));
}

static inline void __set_bit(unsigned int i, unsigned long *b)
{
	b[i / BITS_PER_LONG] |= 1UL << (i % BITS_PER_LONG);
}

static inline bool test_bit(unsigned int i, const unsigned long *b)
{
	return (b[i / BITS_PER_LONG] >> (i % BITS_PER_LONG)) & 1;
}

static inline u64 div64_u64(u64 a, u64 b)
{
	return a / b;
}

static inline u64 div64_u64_rem(u64 a, u64 b, u64 *r)
{
	*r = a % b;
	return a / b;
}

static inline u64 div_u64(u64 a, u32 b)
{
	return a / b;
}

static inline s64 div64_s64(s64 a, s64 b)
{
	return a / b;
}

static inline s64 div_s64(s64 a, s32 b)
{
	return a / b;
}

static inline void cond_resched(void)
{
}

typedef struct {
	int unused;
} spinlock_t;
typedef struct {
	int unused;
} atomic_t;
struct hrtimer {
	int unused;
};
struct work_struct {
	int unused;
};
struct device {
	int unused;
};
struct platform_device {
	struct device dev;
};
struct list_head {
	void *next, *prev;
};
struct dentry;

#endif
