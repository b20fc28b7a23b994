// SPDX-License-Identifier: MIT
/*
 * Fast CPU kernels vs scalar references, by normalized error
 * (max |y - ref| / max |ref|), over random shapes, with the kernel tables
 * of one ISA, so `make check-cpu` runs it once per ISA path the machine
 * has.  Usage: test-cpu-kernels [--isa ISA] [iterations-scale]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static int failures, checks;

static unsigned int rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned int)(rng >> 11);
}

static int rint_(int lo, int hi) /* [lo, hi] */
{
	return lo + (int)(rnd() % (unsigned int)(hi - lo + 1));
}

static float rfl(void)
{
	return (float)((rnd() % 2000001) / 1000000.0 - 1.0);
}

static float *rbuf(size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = rfl();
	return p;
}

/* Normalized by max |ref| (or by `floor` when larger: the magnitude of
 * the values before a clipping activation). */
static double nerr_floor(const float *y, const float *ref, size_t n,
			 double floor);

static double nerr(const float *y, const float *ref, size_t n)
{
	return nerr_floor(y, ref, n, 0);
}

static double nerr_floor(const float *y, const float *ref, size_t n,
			 double floor)
{
	double maxd = 0, maxr = floor;
	size_t i;

	for (i = 0; i < n; i++) {
		double d = fabs((double)y[i] - ref[i]);

		if (!(d <= maxd)) /* catches NaN */
			maxd = isnan(d) ? INFINITY : d;
		if (fabs(ref[i]) > maxr)
			maxr = fabs(ref[i]);
	}
	return maxd / (maxr > 1e-6 ? maxr : 1e-6);
}

static void check(const char *what, double err, double tol)
{
	checks++;
	if (err > tol || isnan(err)) {
		failures++;
		printf("FAIL %s: normalized error %.3g > %.3g\n", what, err,
		       tol);
	}
}

static const char *act_names[] = { "none", "relu", "clip", "hswish",
				   "sigmoid", "silu" };

static void rand_act(int *act, float *lo, float *hi)
{
	*act = rint_(0, MI_ACT_COUNT - 1);
	if (*act == MI_ACT_CLIP) {
		*lo = -0.5f;
		*hi = 0.7f;
	} else if (*act == MI_ACT_HSWISH) {
		*lo = 1.0f / 6;
		*hi = 0.5f;
	} else {
		*lo = *hi = 0;
	}
}

/* ---- GEMM ------------------------------------------------------------ */
/* narrow: few N panels, many M panels (threads split M, B packed once) */
static void test_gemm_one(int isa, int nthreads, int narrow)
{
	int64_t m = narrow ? rint_(20, 200) : rint_(1, 80);
	int64_t n = narrow ? (rint_(0, 1) ? rint_(1, 20) : rint_(1, 140)) :
			     rint_(1, 300);
	int64_t k = rint_(1, 600);
	int big = rint_(0, 3) == 0; /* several KC/NC blocks */
	int ta, tb, prea, preb, bias_kind, use_res;
	ptrdiff_t ldc;
	float *a, *b, *bias, *res, *c, *ref;
	struct mi_packed pa, pb;
	struct mi_sgemm_args ga = { 0 };
	char what[256];
	void *ws;
	int64_t i, j, p;
	double pre = 0;

	if (big && narrow)
		k = rint_(1025, 2100); /* several KC_NARROW blocks */
	if (big && !narrow) {
		k = rint_(257, 1100);
		n = rint_(300, 1500);
	}
	ta = rint_(0, 1), tb = rint_(0, 1);
	prea = rint_(0, 1), preb = rint_(0, 1);
	bias_kind = rint_(0, 2), use_res = rint_(0, 1);
	ldc = n + rint_(0, 5);
	a = rbuf(m * k), b = rbuf(k * n), bias = rbuf(m + n);
	res = rbuf(m * ldc), c = rbuf(m * ldc), ref = rbuf(m * ldc);
	memcpy(ref, c, m * ldc * sizeof(float));
	ga.isa = isa;
	ga.m = m, ga.n = n, ga.k = k;
	ga.a = a, ga.a_rs = ta ? 1 : k, ga.a_cs = ta ? m : 1;
	ga.b = b, ga.b_rs = tb ? 1 : n, ga.b_cs = tb ? k : 1;
	if (prea) {
		mi_sgemm_pack_a(isa, m, k, a, ga.a_rs, ga.a_cs, &pa);
		ga.pa = &pa;
	}
	if (preb) {
		mi_sgemm_pack_b(isa, k, n, b, ga.b_rs, ga.b_cs, &pb);
		ga.pb = &pb;
	}
	ga.c = c, ga.ldc = ldc;
	ga.epi.bias_kind = bias_kind;
	ga.epi.bias = bias_kind == MI_BIAS_ROW ? bias : bias + m;
	ga.epi.res = use_res ? res : NULL;
	ga.epi.ldr = ldc;
	rand_act(&ga.epi.act, &ga.epi.lo, &ga.epi.hi);
	ga.nthreads = nthreads;

	for (i = 0; i < m; i++)
		for (j = 0; j < n; j++) {
			double s = 0;

			for (p = 0; p < k; p++)
				s += (double)a[i * ga.a_rs + p * ga.a_cs] *
				     b[p * ga.b_rs + j * ga.b_cs];
			pre = fabs(s) > pre ? fabs(s) : pre;
			ref[i * ldc + j] =
				mi_epi_scalar(&ga.epi, (float)s, i, j);
		}
	ws = mi_cpu_alloc(mi_sgemm_ws_size(&ga));
	mi_sgemm(&ga, ws);
	/* compare only the m x n part; padding columns must be untouched */
	for (i = 0; i < m; i++)
		for (j = n; j < ldc; j++)
			if (c[i * ldc + j] != ref[i * ldc + j]) {
				printf("FAIL gemm wrote outside C\n");
				failures++;
				i = m;
				break;
			}
	snprintf(what, sizeof(what),
		 "gemm %s m=%lld n=%lld k=%lld ta=%d tb=%d pa=%d pb=%d bias=%d res=%d act=%s nt=%d",
		 mi_cpu_isa_name(isa), (long long)m, (long long)n,
		 (long long)k, ta, tb, prea, preb, bias_kind, use_res,
		 act_names[ga.epi.act], nthreads);
	/* fp32 accumulation error grows with K (the reference sums in double) */
	check(what, nerr_floor(c, ref, m * ldc, pre),
	      k * 4e-8 > 1e-5 ? k * 4e-8 : 1e-5);
	mi_cpu_free(ws);
	if (prea)
		mi_packed_free(&pa);
	if (preb)
		mi_packed_free(&pb);
	free(a), free(b), free(bias), free(res), free(c), free(ref);
}

/* ---- conv ------------------------------------------------------------ */
static int conv_out(int in, int k, int s, int d, int p0, int p1)
{
	return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

static void conv_case(int isa, int algo, struct mi_conv_shape *s,
		      int nthreads)
{
	size_t nx = (size_t)s->n * s->c * s->h * s->w;
	size_t nw = (size_t)s->m * (s->c / s->group) * s->kh * s->kw;
	size_t ny = (size_t)s->n * s->m * s->oh * s->ow;
	float *x = rbuf(nx), *w = rbuf(nw), *bias = rbuf(s->m);
	float *res = rbuf(ny), *y = rbuf(ny), *ref = rbuf(ny);
	int use_bias = rint_(0, 3) != 0, use_res = rint_(0, 2) == 0;
	int act, err;
	float lo, hi;
	double pre = 0;
	struct mi_conv cv;
	char what[320];
	void *ws;

	rand_act(&act, &lo, &hi);
	err = mi_conv_init(&cv, algo, isa, nthreads, s, w,
			   use_bias ? bias : NULL);
	snprintf(what, sizeof(what),
		 "conv algo=%d %s n=%d c=%d h=%d w=%d m=%d k=%dx%d g=%d s=%d,%d d=%d,%d p=%d,%d,%d,%d bias=%d res=%d act=%s nt=%d",
		 algo, mi_cpu_isa_name(isa), s->n, s->c, s->h, s->w, s->m,
		 s->kh, s->kw, s->group, s->sh, s->sw, s->dh, s->dw, s->pt,
		 s->pl, s->pb, s->pr, use_bias, use_res, act_names[act],
		 nthreads);
	if (err) {
		printf("FAIL %s: init returned %d\n", what, err);
		failures++;
		goto out;
	}
	/* magnitude before the activation: the error scale of a clip */
	mi_conv_ref(s, x, w, use_bias ? bias : NULL, use_res ? res : NULL,
		    MI_ACT_NONE, 0, 0, ref);
	for (size_t i = 0; i < ny; i++)
		pre = fabs(ref[i]) > pre ? fabs(ref[i]) : pre;
	mi_conv_ref(s, x, w, use_bias ? bias : NULL, use_res ? res : NULL,
		    act, lo, hi, ref);
	ws = mi_cpu_alloc(cv.ws_size);
	mi_conv_run(&cv, x, y, use_res ? res : NULL, act, lo, hi, ws);
	/* Winograd's transforms add rounding: looser tolerance */
	check(what, nerr_floor(y, ref, ny, pre),
	      algo == MI_CONV_WINOGRAD ? 5e-5 : 1e-5);
	mi_cpu_free(ws);
	mi_conv_fini(&cv);
out:
	free(x), free(w), free(bias), free(res), free(y), free(ref);
}

static void rand_shape(struct mi_conv_shape *s, int algo)
{
	do {
		memset(s, 0, sizeof(*s));
		s->n = rint_(1, 2);
		s->h = rint_(1, 20);
		s->w = rint_(1, 20);
		s->sh = s->sw = 1;
		s->dh = s->dw = 1;
		switch (algo) {
		case MI_CONV_GEMM:
			s->c = rint_(1, 70);
			s->m = rint_(1, 70);
			s->group = rint_(0, 3) ? 1 : rint_(1, 3);
			s->c = (s->c + s->group - 1) / s->group * s->group;
			s->m = (s->m + s->group - 1) / s->group * s->group;
			s->kh = s->kw = 1;
			break;
		case MI_CONV_IM2COL:
			s->group = rint_(0, 2) ? 1 : rint_(1, 4);
			s->c = rint_(1, 12) * s->group;
			s->m = rint_(1, 24) * s->group;
			s->kh = rint_(1, 5);
			s->kw = rint_(1, 5);
			s->sh = rint_(1, 3);
			s->sw = rint_(1, 3);
			s->dh = rint_(1, 2);
			s->dw = rint_(1, 2);
			s->pt = rint_(0, 2);
			s->pl = rint_(0, 2);
			s->pb = rint_(0, 2);
			s->pr = rint_(0, 2);
			break;
		case MI_CONV_DEPTHWISE:
			s->c = s->m = s->group = rint_(1, 40);
			s->kh = s->kw = rint_(0, 1) ? 3 : 5;
			s->sh = s->sw = rint_(1, 2);
			s->pt = rint_(0, s->kh / 2);
			s->pl = rint_(0, s->kw / 2);
			s->pb = rint_(0, s->kh / 2);
			s->pr = rint_(0, s->kw / 2);
			s->h = rint_(1, 40);
			s->w = rint_(1, 40);
			break;
		case MI_CONV_WINOGRAD:
			s->group = 1;
			s->c = rint_(1, 40);
			s->m = rint_(1, 40);
			s->kh = s->kw = 3;
			s->pt = rint_(0, 1);
			s->pl = rint_(0, 1);
			s->pb = rint_(0, 1);
			s->pr = rint_(0, 1);
			s->h = rint_(1, 30);
			s->w = rint_(1, 30);
			break;
		}
		s->oh = conv_out(s->h, s->kh, s->sh, s->dh, s->pt, s->pb);
		s->ow = conv_out(s->w, s->kw, s->sw, s->dw, s->pl, s->pr);
	} while (s->oh < 1 || s->ow < 1 || !mi_conv_supports(algo, s));
}

/* ---- epilogue rows -------------------------------------------------- */
static void test_epi_row(int isa)
{
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(isa);
	int n = 1000, act;
	float *x = rbuf(n), *y = rbuf(n), *ref = rbuf(n), *bias = rbuf(4);
	char what[64];
	int i;

	for (i = 0; i < n; i++)
		x[i] *= 30.0f; /* exercise exp's clamping */
	for (act = 0; act < MI_ACT_COUNT; act++) {
		struct mi_epi e = { .bias_kind = MI_BIAS_ROW, .bias = bias,
				    .act = act };

		if (act == MI_ACT_CLIP)
			e.lo = -3, e.hi = 6;
		if (act == MI_ACT_HSWISH)
			e.lo = 1.0f / 6, e.hi = 0.5f;
		for (i = 0; i < n; i++)
			ref[i] = mi_epi_scalar(&e, x[i], 2, i);
		kt->epi_row(&e, x, y, n, 2, 0);
		snprintf(what, sizeof(what), "epi_row %s act=%s",
			 mi_cpu_isa_name(isa), act_names[act]);
		check(what, nerr(y, ref, n), 2e-6);
	}
	free(x), free(y), free(ref), free(bias);
}

/* ---- pooling ---------------------------------------------------------- */
static void test_pool(int isa)
{
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(isa);
	struct mi_pool2d p;
	float *x, *y, *ref, *ws;
	char what[200];
	int ceil_mode;

	do {
		memset(&p, 0, sizeof(p));
		p.ih = rint_(1, 40);
		p.iw = rint_(1, 40);
		p.kh = rint_(1, 5);
		p.kw = rint_(1, 5);
		if (rint_(0, 1)) /* the specialized square windows */
			p.kh = p.kw = rint_(2, 3);
		p.s = rint_(1, 2);
		p.pt = rint_(0, p.kh - 1);
		p.pl = rint_(0, p.kw - 1);
		p.pb = rint_(0, p.kh - 1);
		p.pr = rint_(0, p.kw - 1);
		p.avg = rint_(0, 1);
		p.include_pad = rint_(0, 1);
		ceil_mode = rint_(0, 1);
		p.oh = (p.ih + p.pt + p.pb - p.kh + (ceil_mode ? p.s - 1 : 0)) /
			       p.s + 1;
		p.ow = (p.iw + p.pl + p.pr - p.kw + (ceil_mode ? p.s - 1 : 0)) /
			       p.s + 1;
	} while (p.ih + p.pt + p.pb < p.kh || p.iw + p.pl + p.pr < p.kw ||
		 !mi_pool_supports(&p));
	x = rbuf((size_t)p.ih * p.iw);
	y = rbuf((size_t)p.oh * p.ow);
	ref = rbuf((size_t)p.oh * p.ow);
	ws = mi_cpu_alloc(mi_pool_ws_floats(&p) * sizeof(float));
	mi_pool_ref(&p, x, ref);
	kt->pool(&p, x, y, ws);
	snprintf(what, sizeof(what),
		 "pool %s %s in=%dx%d k=%dx%d s=%d p=%d,%d,%d,%d incl=%d out=%dx%d",
		 mi_cpu_isa_name(isa), p.avg ? "avg" : "max", p.ih, p.iw, p.kh,
		 p.kw, p.s, p.pt, p.pl, p.pb, p.pr, p.include_pad, p.oh, p.ow);
	check(what, nerr(y, ref, (size_t)p.oh * p.ow), 1e-6);
	free(x), free(y), free(ref);
	mi_cpu_free(ws);
}

static void test_reduce(int isa)
{
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(isa);
	int n = rint_(1, 3000), i;
	float *x = rbuf(n), s, m;
	double rs = 0, rm = -INFINITY;
	char what[64];

	for (i = 0; i < n; i++) {
		rs += x[i];
		rm = x[i] > rm ? x[i] : rm;
	}
	s = kt->sum(x, n);
	m = kt->max(x, n);
	snprintf(what, sizeof(what), "sum/max %s n=%d", mi_cpu_isa_name(isa),
		 n);
	check(what, fabs(s - rs) / (fabs(rs) > 1 ? fabs(rs) : 1) +
			    fabs(m - rm),
	      1e-5);
	free(x);
}

/* test-cpu-kernels [--isa generic|avx2|avx512] [SCALE]: the kernel tables
 * of that ISA (at most the CPU's own), SCALE x the default cases. */
int main(int argc, char **argv)
{
	int isa = mi_cpu_isa(), a = 1, scale;
	int i, algo;

	if (argc > 2 && !strcmp(argv[1], "--isa")) {
		for (i = 0; i < MI_ISA_COUNT; i++)
			if (!strcmp(argv[2], mi_cpu_isa_name(i)) &&
			    i <= mi_cpu_isa())
				isa = i;
		a = 3;
	}
	scale = argc > a ? atoi(argv[a]) : 1;

	if (scale < 1)
		scale = 1;
	printf("test-cpu-kernels: isa=%s (native %s)\n", mi_cpu_isa_name(isa),
	       mi_cpu_isa_name(mi_cpu_isa_native()));
	test_epi_row(isa);
	for (i = 0; i < 60 * scale; i++)
		test_gemm_one(isa, rint_(1, 3), 0);
	for (i = 0; i < 24 * scale; i++)
		test_gemm_one(isa, rint_(1, 3), 1);
	for (i = 0; i < 100 * scale; i++)
		test_pool(isa);
	for (i = 0; i < 20 * scale; i++)
		test_reduce(isa);
	for (algo = 0; algo < MI_CONV_COUNT; algo++) {
		struct mi_conv_shape s;

		if (algo == MI_CONV_WINOGRAD) {
			/* skip when the algorithm is not built in */
			memset(&s, 0, sizeof(s));
			s.n = s.c = s.m = s.group = 1;
			s.h = s.w = s.oh = s.ow = 4;
			s.kh = s.kw = 3;
			s.sh = s.sw = s.dh = s.dw = 1;
			s.pt = s.pl = s.pb = s.pr = 1;
			if (!mi_conv_supports(algo, &s))
				continue;
		}
		for (i = 0; i < 40 * scale; i++) {
			rand_shape(&s, algo);
			conv_case(isa, algo, &s, rint_(1, 3));
		}
	}
	printf("test-cpu-kernels: isa=%s %d checks, %d failed\n",
	       mi_cpu_isa_name(isa), checks, failures);
	return failures ? 1 : 0;
}
