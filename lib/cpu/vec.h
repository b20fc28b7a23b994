/* SPDX-License-Identifier: MIT */
/*
 * Width-generic vector helpers on GCC/clang vector extensions, included
 * by each per-ISA kernel file after it defines VW (floats per vector: 4,
 * 8 or 16) and, for x86 files, selects its target with #pragma GCC
 * target.  Everything here is static: each ISA file gets its own copy
 * compiled for its own instruction set.
 */
#ifndef MI_CPU_VEC_H
#define MI_CPU_VEC_H

#include <stdint.h>
#include <string.h>

#ifndef VW
#error "define VW before including vec.h"
#endif

typedef float vf __attribute__((vector_size(VW * 4)));
typedef float vfu __attribute__((vector_size(VW * 4), aligned(4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
typedef uint32_t vu __attribute__((vector_size(VW * 4)));

static inline vf vld(const float *p)
{
	return *(const vfu *)p;
}

static inline void vst(float *p, vf v)
{
	*(vfu *)p = v;
}

#if defined(__x86_64__) && VW == 16
#include <immintrin.h>
static inline vf vset1(float x) { return _mm512_set1_ps(x); }
static inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vmin(vf a, vf b) { return _mm512_min_ps(a, b); }
#elif defined(__x86_64__) && VW == 8
#include <immintrin.h>
static inline vf vset1(float x) { return _mm256_set1_ps(x); }
static inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }
#elif defined(__x86_64__) && VW == 4
#include <immintrin.h>
static inline vf vset1(float x) { return _mm_set1_ps(x); }
static inline vf vmax(vf a, vf b) { return _mm_max_ps(a, b); }
static inline vf vmin(vf a, vf b) { return _mm_min_ps(a, b); }
#else
static inline vf vset1(float x)
{
	vf r;
	int i;

	for (i = 0; i < VW; i++)
		r[i] = x;
	return r;
}
static inline vf vmax(vf a, vf b)
{
	vi m = a > b;
	return (vf)((m & (vi)a) | (~m & (vi)b));
}
static inline vf vmin(vf a, vf b)
{
	vi m = a < b;
	return (vf)((m & (vi)a) | (~m & (vi)b));
}
#endif

/* exp(x), Cephes-style: range reduction by ln2, degree-6 polynomial,
 * exponent rebuilt from integer bits.  ~2 ulp over the clamped range. */
static inline vf vexp(vf x)
{
	const float rnd = 12582912.0f; /* 1.5 * 2^23: round to nearest */
	vf t, n, r, p, r2;
	vi e;

	x = vmin(x, vset1(88.3762626647949f));
	x = vmax(x, vset1(-87.3365447504f));
	t = x * 1.44269504088896341f;
	n = (t + rnd) - rnd;
	r = x - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	p = vset1(1.9875691500E-4f);
	p = p * r + 1.3981999507E-3f;
	p = p * r + 8.3334519073E-3f;
	p = p * r + 4.1665795894E-2f;
	p = p * r + 1.6666665459E-1f;
	p = p * r + 5.0000001201E-1f;
	r2 = r * r;
	p = p * r2 + r + 1.0f;
	e = __builtin_convertvector(n, vi);
	e = (e + 127) << 23;
	return p * (vf)e;
}

/* 1/d: hardware estimate + one Newton step where there is one (rel.
 * error ~1e-7, well inside the fp32 tolerance), a division elsewhere. */
static inline vf vrcp(vf d)
{
#if defined(__x86_64__) && VW == 16
	vf r = _mm512_rcp14_ps(d);

	return r * (2.0f - d * r);
#elif defined(__x86_64__) && VW == 8
	vf r = _mm256_rcp_ps(d);

	r = r * (2.0f - d * r);
	return r * (2.0f - d * r);
#else
	return 1.0f / d;
#endif
}

/*
 * 1 + exp(-x), the denominator of sigmoid / SiLU: -x clamped to [-87, 87]
 * (the constant first in vmin / vmax, which return their second operand
 * for a NaN, so a NaN passes through), n = round(-x / ln2) by the magic
 * sum, whose low mantissa bits then hold 127 + n: shifted into the
 * exponent field they are 2^n; r = -x - n ln2, e^r by a degree-5 fit on
 * [-ln2/2, ln2/2] (relative error 2.9e-7; with FMA, 2.4e-7 more from
 * the one-part ln2 at |n| = 126).  12 operations against vexp's 19, and a division
 * instead of the reciprocal estimate and its Newton step: in a loop of
 * SiLU alone 4.1 against 6 ns per 16 floats (AVX-512), 2.3 against 4.4
 * per 8 (AVX2), where the activation was about half of a small-K
 * expansion conv's time (EfficientNet's K = 16 .. 40).
 */
static inline vf vsig_den(vf x)
{
	const float rnd = 12582912.0f + 127.0f; /* 1.5 * 2^23 + bias */
	vf a = vmax(vset1(-87.0f), vmin(vset1(87.0f), -x));
	vf tr = a * 1.44269504088896341f + rnd;
	vf n = tr - rnd, r, p;

#ifdef __FMA__
	r = a - n * 0.693147180559945f; /* one rounding */
#else
	r = a - n * 0.693359375f; /* exact product, then the rest of ln2 */
	r = r - n * -2.12194440e-4f;
#endif

	p = vset1(8.072146214544773e-3f);
	p = p * r + 4.188502952456474e-2f;
	p = p * r + 1.6670504212379456e-1f;
	p = p * r + 4.999919831752777e-1f;
	p = p * r + 9.999989867210388e-1f;
	p = p * r + 1.0f;
	return p * (vf)((vu)tr << 23) + 1.0f;
}

static inline vf vsigmoid(vf x)
{
	return 1.0f / vsig_den(x);
}

/* x * sigmoid(x) */
static inline vf vsilu(vf x)
{
	return x / vsig_den(x);
}

/* Activation of enum mi_act (cpu.h) on a vector. */
static inline vf vact(int act, vf x, float lo, float hi)
{
	switch (act) {
	case 1: /* RELU */
		return vmax(x, vset1(0.0f));
	case 2: /* CLIP */
		return vmin(vmax(x, vset1(lo)), vset1(hi));
	case 3: /* HSWISH */
		return x * vmin(vmax(x * lo + hi, vset1(0.0f)), vset1(1.0f));
	case 4: /* SIGMOID */
		return vsigmoid(x);
	case 5: /* SILU */
		return vsilu(x);
	default:
		return x;
	}
}

#endif /* MI_CPU_VEC_H */
