/* SPDX-License-Identifier: MIT */
/*
 * Row kernels of struct mi_xform_kern (xform.h), compiled once per ISA:
 * the including file defines VW, XTAB and its #pragma GCC target.
 * Tails shorter than one vector go through a padded stack buffer, so
 * every kernel reads and writes exactly n (or rows*d) floats.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/vec.h"
#include "cpu/xform.h"

static inline vf vabs_(vf x)
{
	return (vf)((vi)x & 0x7fffffff);
}

static inline vf vsel_(vi m, vf a, vf b)
{
	return (vf)((m & (vi)a) | (~m & (vi)b));
}

/*
 * erfc(a) for a >= 0 split at 1:
 *   a < 1:  erfc = 1 - a P(a^2)            (P: degree 6, fitted)
 *   a < 4:  erfc = exp(-a^2) R(a - 2.5)    (R: degree 11, fitted)
 *   a >= 4: 0
 * Fitted in double; evaluated in float the error is <= ~2e-7 absolute
 * on erf (the float rounding floor of the Horner steps).
 */
static inline vf verf_small(vf a)
{
	vf t = a * a, p = vset1(7.8825002474e-05f);

	p = p * t + -8.0188589672e-04f;
	p = p * t + 5.1893128087e-03f;
	p = p * t + -2.6854329537e-02f;
	p = p * t + 1.1283597492e-01f;
	p = p * t + -3.7612626908e-01f;
	p = p * t + 1.1283791659e+00f;
	return a * p;
}

static inline vf verfc_big(vf a)
{
	vf b = vmin(a, vset1(4.0f)), u = b - 2.5f;
	vf r = vset1(-5.1541083129e-07f);

	r = r * u + 1.7141468117e-06f;
	r = r * u + -3.2160903444e-06f;
	r = r * u + 1.4123219218e-05f;
	r = r * u + -6.0666918777e-05f;
	r = r * u + 2.1340616540e-04f;
	r = r * u + -7.3208723140e-04f;
	r = r * u + 2.4656533923e-03f;
	r = r * u + -8.0020934713e-03f;
	r = r * u + 2.4938289324e-02f;
	r = r * u + -7.4347295585e-02f;
	r = r * u + 2.1080635406e-01f;
	r = vexp(-(b * b)) * r;
	return vsel_(a >= 4.0f, vset1(0.0f), r);
}

/* 1 + erf(u), accurate also where erf(u) is near -1 */
static inline vf vonepluserf(vf u)
{
	vf a = vabs_(u);
	vi neg = u < 0.0f, small = a < 1.0f;
	vf es = verf_small(a);           /* erf(a), a < 1 */
	vf c = verfc_big(a);             /* erfc(a), a >= 1 */
	vf pos = vsel_(small, 1.0f + es, 2.0f - c);
	vf ngv = vsel_(small, 1.0f - es, c);

	return vsel_(neg, ngv, pos);
}

static inline vf vgelu(vf x, int tanh_form)
{
	if (tanh_form) {
		vf z = x * (1.5957691216f + 0.0713548162f * x * x);

		return x * vrcp(1.0f + vexp(-z));
	}
	return 0.5f * x * vonepluserf(x * 0.70710678118654752f);
}

static inline vf verf_(vf x)
{
	vf a = vabs_(x);
	vf r = vsel_(a < 1.0f, verf_small(a), 1.0f - verfc_big(a));
	vi nan = x != x;

	r = (vf)((vi)r | ((vi)x & (vi)vset1(-0.0f)));
	return vsel_(nan, x, r);
}

static void x_gelu(const float *x, float *y, int64_t n, int tanh_form)
{
	int64_t i;

	for (i = 0; i + VW <= n; i += VW)
		vst(y + i, vgelu(vld(x + i), tanh_form));
	if (i < n) {
		float b[VW] = { 0 };

		memcpy(b, x + i, (n - i) * sizeof(float));
		vst(b, vgelu(vld(b), tanh_form));
		memcpy(y + i, b, (n - i) * sizeof(float));
	}
}

static void x_erf(const float *x, float *y, int64_t n)
{
	int64_t i;

	for (i = 0; i + VW <= n; i += VW)
		vst(y + i, verf_(vld(x + i)));
	if (i < n) {
		float b[VW] = { 0 };

		memcpy(b, x + i, (n - i) * sizeof(float));
		vst(b, verf_(vld(b)));
		memcpy(y + i, b, (n - i) * sizeof(float));
	}
}

static inline float hsum_(vf v)
{
	double s = 0;

	for (int k = 0; k < VW; k++)
		s += v[k];
	return (float)s;
}

static inline float hmax_(vf v)
{
	float m = v[0];

	for (int k = 1; k < VW; k++)
		m = v[k] > m ? v[k] : m;
	return m;
}

static void x_layernorm(const float *x, float *y, int64_t rows, int64_t d,
			const float *scale, const float *bias, float eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * d;
		float *yr = y + r * d;
		vf s0 = vset1(0.0f), s1 = vset1(0.0f);
		float mean, var, inv;
		int64_t i;
		double ts = 0, tq = 0;

		for (i = 0; i + 2 * VW <= d; i += 2 * VW) {
			s0 += vld(xr + i);
			s1 += vld(xr + i + VW);
		}
		for (; i < d; i++)
			ts += xr[i];
		mean = (float)(((double)hsum_(s0) + hsum_(s1) + ts) / d);
		s0 = s1 = vset1(0.0f);
		for (i = 0; i + 2 * VW <= d; i += 2 * VW) {
			vf a = vld(xr + i) - mean, b = vld(xr + i + VW) - mean;

			s0 += a * a;
			s1 += b * b;
		}
		for (; i < d; i++)
			tq += (double)(xr[i] - mean) * (xr[i] - mean);
		var = (float)(((double)hsum_(s0) + hsum_(s1) + tq) / d);
		inv = (float)(1.0 / sqrt((double)var + eps));
		for (i = 0; i + VW <= d; i += VW) {
			vf v = (vld(xr + i) - mean) * inv * vld(scale + i);

			if (bias)
				v += vld(bias + i);
			vst(yr + i, v);
		}
		for (; i < d; i++)
			yr[i] = (xr[i] - mean) * inv * scale[i] +
				(bias ? bias[i] : 0.0f);
	}
}

static void x_softmax(const float *x, float *y, int64_t rows, int64_t d)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * d;
		float *yr = y + r * d;
		vf m = vset1(-INFINITY), s = vset1(0.0f);
		float mx, rs;
		double ts = 0;
		int64_t i;

		for (i = 0; i + VW <= d; i += VW)
			m = vmax(m, vld(xr + i));
		mx = hmax_(m);
		for (; i < d; i++)
			mx = xr[i] > mx ? xr[i] : mx;
		for (i = 0; i + VW <= d; i += VW) {
			vf e = vexp(vld(xr + i) - mx);

			s += e;
			vst(yr + i, e);
		}
		if (i < d) {
			float b[VW];

			for (int k = 0; k < VW; k++)
				b[k] = -INFINITY;
			memcpy(b, xr + i, (d - i) * sizeof(float));
			vst(b, vexp(vld(b) - mx));
			for (int64_t k = 0; k < d - i; k++) {
				yr[i + k] = b[k];
				ts += b[k];
			}
		}
		rs = (float)(1.0 / ((double)hsum_(s) + ts));
		for (i = 0; i + VW <= d; i += VW)
			vst(yr + i, vld(yr + i) * rs);
		for (; i < d; i++)
			yr[i] *= rs;
	}
}

const struct mi_xform_kern XTAB = {
	.gelu = x_gelu,
	.erf = x_erf,
	.layernorm = x_layernorm,
	.softmax = x_softmax,
};
