// SPDX-License-Identifier: MIT
/*
 * Conv2d, NCHW fp32: 1x1 as GEMM, im2col fused into B packing, depthwise
 * per plane, Winograd F(4x4,3x3) (winograd.c).  Weights are packed once
 * at init; runs allocate nothing.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/conv_impl.h"

static inline int64_t rup(int64_t a, int64_t b)
{
	return (a + b - 1) / b * b;
}

size_t mi_dw_ws_floats(int k, int stride, int oh, int ow)
{
	/* matches dw_plane() in kern_impl.h for any VW <= 16 */
	size_t rows = (size_t)(oh - 1) * stride + k;
	size_t owv = (size_t)rup(ow, 16);
	size_t hw = owv + k / 2 + 32;
	size_t pw = owv + k - 1 + 16;

	return stride == 1 ? rows * pw + 16 : 2 * rows * hw + 16;
}

int mi_conv_supports(int algo, const struct mi_conv_shape *s)
{
	int cg = s->c / s->group;

	if (s->group < 1 || s->c % s->group || s->m % s->group)
		return 0;
	switch (algo) {
	case MI_CONV_GEMM:
		return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 &&
		       !s->pt && !s->pl && !s->pb && !s->pr &&
		       s->oh == s->h && s->ow == s->w;
	case MI_CONV_IM2COL:
		return 1;
	case MI_CONV_DEPTHWISE:
		return s->group == s->c && s->m == s->c && cg == 1 &&
		       s->kh == s->kw && (s->kh == 3 || s->kh == 5) &&
		       s->sh == s->sw && (s->sh == 1 || s->sh == 2) &&
		       s->dh == 1 && s->dw == 1 && s->pt < s->kh &&
		       s->pl < s->kw && s->pb < s->kh && s->pr < s->kw;
	case MI_CONV_WINOGRAD:
		return mi_wino_supports(s);
	default:
		return 0;
	}
}

/* ---- im2col as a B-panel producer ---------------------------------- */
struct im2col_ctx {
	const struct mi_conv_shape *s;
	const float *x; /* first channel of the group, this image */
	/* stride 2: even / odd input columns, [c][h][we] and [c][h][wo] */
	const float *xe, *xo;
	int we, wo;
};

/*
 * B(k, j) with k = (ci, ky, kx), j = (oy, ox).  For each k row the pixel
 * range is walked in runs that stay in one output row and one panel, so
 * stride-1 runs are plain copies with zeroed borders.
 */
static void im2col_packb(const void *vctx, int64_t k0, int kc, int64_t n0,
			 int nc, int nr, float *dst)
{
	const struct im2col_ctx *ctx = vctx;
	const struct mi_conv_shape *s = ctx->s;
	const int khw = s->kh * s->kw;
	int kk;

	for (kk = 0; kk < kc; kk++) {
		int64_t k = k0 + kk;
		int ci = (int)(k / khw), r = (int)(k % khw);
		int ky = r / s->kw, kx = r % s->kw;
		const float *xc = ctx->x + (size_t)ci * s->h * s->w;
		int64_t j = n0, jend = n0 + nc;
		int oy = (int)(j / s->ow), ox = (int)(j % s->ow);
		int jl = 0;

		while (j < jend) {
			int run = s->ow - ox;
			int pan = jl / nr, lane = jl % nr;
			float *d = dst + (size_t)pan * kc * nr +
				   (size_t)kk * nr + lane;
			int iy = oy * s->sh - s->pt + ky * s->dh;
			int t;

			if (run > nr - lane)
				run = nr - lane;
			if (run > jend - j)
				run = (int)(jend - j);
			if (iy < 0 || iy >= s->h) {
				memset(d, 0, run * sizeof(float));
			} else {
				const float *xr = xc + (size_t)iy * s->w;
				int ix0 = ox * s->sw - s->pl + kx * s->dw;

				int wrow = s->w;

				if (ctx->xe) {
					/* stride 2 on column phases: ix0 + 2t
					 * is index i0 + t of one phase row */
					int p = ix0 & 1;

					wrow = p ? ctx->wo : ctx->we;
					xr = (p ? ctx->xo : ctx->xe) +
					     ((size_t)ci * s->h + iy) * wrow;
					ix0 = (ix0 - p) / 2;
				}
				if (s->sw == 1 || ctx->xe) {
					int a = ix0 < 0 ? -ix0 : 0;
					int b = wrow - ix0;

					if (b > run)
						b = run;
					if (b < a)
						b = a;
					for (t = 0; t < a && t < run; t++)
						d[t] = 0.0f;
					if (b > a)
						memcpy(d + a, xr + ix0 + a,
						       (b - a) * sizeof(float));
					for (t = b; t < run; t++)
						d[t] = 0.0f;
				} else {
					/* valid t: 0 <= ix0 + t*sw < w */
					int sw = s->sw;
					int t0 = ix0 < 0 ? (-ix0 + sw - 1) / sw : 0;
					int t1 = ix0 < s->w ? (s->w - 1 - ix0) / sw + 1 : 0;

					if (t1 > run)
						t1 = run;
					if (t0 > t1)
						t0 = t1;
					for (t = 0; t < t0; t++)
						d[t] = 0.0f;
					for (; t < t1; t++)
						d[t] = xr[ix0 + t * sw];
					for (; t < run; t++)
						d[t] = 0.0f;
				}
			}
			j += run;
			jl += run;
			ox += run;
			if (ox == s->ow) {
				ox = 0;
				oy++;
			}
		}
		/* zero the padding lanes of the last panel */
		if (nc % nr) {
			float *d = dst + (size_t)(nc / nr) * kc * nr +
				   (size_t)kk * nr;
			int t;

			for (t = nc % nr; t < nr; t++)
				d[t] = 0.0f;
		}
	}
}

/* rows of w floats -> even columns (rows of (w+1)/2) and odd ones */
static void split_columns(const float *x, int rows, int w, float *xe,
			  float *xo)
{
	int we = (w + 1) / 2, wo = w / 2, r, j;

	for (r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * w;
		float *e = xe + (size_t)r * we, *o = xo + (size_t)r * wo;

		for (j = 0; j < wo; j++) {
			e[j] = xr[2 * j];
			o[j] = xr[2 * j + 1];
		}
		if (we > wo)
			e[wo] = xr[2 * wo];
	}
}

static void gemm_args(const struct mi_conv *cv, struct mi_sgemm_args *ga)
{
	const struct mi_conv_shape *s = &cv->s;
	int mg = s->m / s->group;

	memset(ga, 0, sizeof(*ga));
	ga->isa = cv->isa;
	ga->m = mg;
	ga->n = (int64_t)s->oh * s->ow;
	ga->k = (int64_t)(s->c / s->group) * s->kh * s->kw;
	ga->pa = &cv->wp[0];
	ga->ldc = ga->n;
	ga->nthreads = cv->nthreads;
	if (cv->algo == MI_CONV_GEMM) {
		ga->b_rs = (ptrdiff_t)s->h * s->w;
		ga->b_cs = 1;
	} else {
		ga->packb = im2col_packb;
	}
}

/* ---- depthwise ------------------------------------------------------- */
struct dw_job {
	const struct mi_conv *cv;
	const struct mi_cpu_kern *kt;
	const float *x;
	float *y;
	const float *res;
	int act;
	float lo, hi;
	char *ws;
	size_t ws_thread;
	struct mi_work work; /* planes */
};

static void dw_thread(void *vctx, int t, int nt)
{
	struct dw_job *j = vctx;
	const struct mi_conv_shape *s = &j->cv->s;
	int64_t b, e, p;
	size_t in_plane = (size_t)s->h * s->w, out_plane = (size_t)s->oh * s->ow;
	float *ws = (float *)(j->ws + j->ws_thread * t);

	while (mi_work_claim(&j->work, &b, &e)) {
		for (p = b; p < e; p++) {
			int img = (int)(p / s->c), c = (int)(p % s->c);
			struct mi_epi epi = {
				.bias_kind = j->cv->bias ? MI_BIAS_ROW : MI_BIAS_NONE,
				.bias = j->cv->bias,
				.res = j->res ? j->res + (size_t)img * s->c * out_plane :
						NULL,
				.ldr = (ptrdiff_t)out_plane,
				.act = j->act,
				.lo = j->lo,
				.hi = j->hi,
			};

			j->kt->dw(j->x + p * in_plane, s->h, s->w,
				  j->cv->wt + (size_t)c * s->kh * s->kw, s->kh, s->sh,
				  s->pt, s->pl,
				  j->y + p * out_plane, s->oh, s->ow,
				  &epi, c, ws);
		}
	}
}

static int dw_threads(const struct mi_conv_shape *s, int nthreads)
{
	int64_t planes = (int64_t)s->n * s->c;

	if (nthreads < 1)
		nthreads = 1;
	return planes < nthreads ? (int)planes : nthreads;
}

/* ---- init / run -------------------------------------------------------- */
int mi_conv_init(struct mi_conv *cv, int algo, int isa, int nthreads,
		 const struct mi_conv_shape *s, const float *w,
		 const float *bias)
{
	int g, err = 0;
	int mg = s->m / s->group;
	int64_t kg = (int64_t)(s->c / s->group) * s->kh * s->kw;

	memset(cv, 0, sizeof(*cv));
	if (!mi_conv_supports(algo, s))
		return -EOPNOTSUPP;
	cv->algo = algo;
	cv->isa = isa;
	cv->nthreads = nthreads < 1 ? 1 : nthreads;
	cv->s = *s;
	if (bias) {
		cv->bias = malloc(s->m * sizeof(float));
		if (!cv->bias)
			return -ENOMEM;
		memcpy(cv->bias, bias, s->m * sizeof(float));
	}
	switch (algo) {
	case MI_CONV_GEMM:
	case MI_CONV_IM2COL: {
		struct mi_sgemm_args ga;

		cv->wp = calloc(s->group, sizeof(*cv->wp));
		if (!cv->wp) {
			err = -ENOMEM;
			break;
		}
		cv->nwp = s->group;
		for (g = 0; g < s->group && !err; g++)
			err = mi_sgemm_pack_a(isa, mg, kg,
					      w + (size_t)g * mg * kg, kg, 1,
					      &cv->wp[g]);
		gemm_args(cv, &ga);
		cv->ws_size = mi_sgemm_ws_size(&ga);
		if (algo == MI_CONV_IM2COL && s->sw == 2) {
			/* room for the column phases of one image */
			cv->ws_split = rup(cv->ws_size, 64);
			cv->ws_size = cv->ws_split +
				      rup((size_t)s->c * s->h * (s->w + 1) *
						  sizeof(float),
					  64);
		}
		break;
	}
	case MI_CONV_DEPTHWISE: {
		size_t taps = (size_t)s->m * s->kh * s->kw;
		size_t per = mi_dw_ws_floats(s->kh, s->sh, s->oh, s->ow) *
			     sizeof(float);

		cv->wt = mi_cpu_alloc(taps * sizeof(float));
		if (!cv->wt) {
			err = -ENOMEM;
			break;
		}
		memcpy(cv->wt, w, taps * sizeof(float));
		cv->ws_size = rup(per, 64) * dw_threads(s, cv->nthreads);
		break;
	}
	case MI_CONV_WINOGRAD:
		err = mi_wino_init(cv, w);
		break;
	}
	if (err)
		mi_conv_fini(cv);
	return err;
}

void mi_conv_fini(struct mi_conv *cv)
{
	int g;

	if (cv->wp) {
		for (g = 0; g < cv->nwp; g++)
			mi_packed_free(&cv->wp[g]);
		free(cv->wp);
	}
	mi_cpu_free(cv->wt);
	free(cv->bias);
	memset(cv, 0, sizeof(*cv));
}

void mi_conv_run(const struct mi_conv *cv, const float *x, float *y,
		 const float *res, int act, float lo, float hi, void *ws)
{
	const struct mi_conv_shape *s = &cv->s;
	size_t in_img = (size_t)s->c * s->h * s->w;
	size_t out_img = (size_t)s->m * s->oh * s->ow;

	if (cv->algo == MI_CONV_DEPTHWISE) {
		struct dw_job j = {
			.cv = cv, .kt = mi_cpu_kern_get(cv->isa),
			.x = x, .y = y, .res = res, .act = act, .lo = lo,
			.hi = hi, .ws = ws,
		};
		int nt = dw_threads(s, cv->nthreads);

		if (nt < 1) /* empty batch: no plane to write */
			return;
		j.ws_thread = cv->ws_size / nt;
		mi_work_init(&j.work, (int64_t)s->n * s->c,
			     mi_work_grain((int64_t)s->n * s->c, nt, 4));
		mi_pool_run(nt, dw_thread, &j);
		return;
	}
	if (cv->algo == MI_CONV_WINOGRAD) {
		mi_wino_run(cv, x, y, res, act, lo, hi, ws);
		return;
	}

	{
		struct mi_sgemm_args ga;
		struct im2col_ctx ictx = { .s = s };
		float *phases = (float *)((char *)ws + cv->ws_split);
		int mg = s->m / s->group, cg = s->c / s->group;
		size_t ohw = (size_t)s->oh * s->ow;
		int img, g;

		gemm_args(cv, &ga);
		ga.packb_ctx = &ictx;
		ga.epi.bias_kind = cv->bias ? MI_BIAS_ROW : MI_BIAS_NONE;
		ga.epi.act = act;
		ga.epi.lo = lo;
		ga.epi.hi = hi;
		ga.epi.ldr = (ptrdiff_t)ohw;
		ictx.we = (s->w + 1) / 2;
		ictx.wo = s->w / 2;
		for (img = 0; img < s->n; img++) {
			if (cv->ws_split)
				split_columns(x + img * in_img, s->c * s->h, s->w,
					      phases,
					      phases + (size_t)s->c * s->h * ictx.we);
			for (g = 0; g < s->group; g++) {
				const float *xg = x + img * in_img +
						  (size_t)g * cg * s->h * s->w;
				size_t coff = img * out_img +
					      (size_t)g * mg * ohw;

				ga.pa = &cv->wp[g];
				ga.c = y + coff;
				ga.epi.bias = cv->bias ? cv->bias + g * mg :
							 NULL;
				ga.epi.res = res ? res + coff : NULL;
				if (cv->algo == MI_CONV_GEMM) {
					ga.b = xg;
				} else {
					ictx.x = xg;
					if (cv->ws_split) {
						size_t cs = (size_t)cg * s->h;

						ictx.xe = phases + g * cs * ictx.we;
						ictx.xo = phases +
							  (size_t)s->c * s->h * ictx.we +
							  g * cs * ictx.wo;
					}
				}
				mi_sgemm(&ga, ws);
			}
		}
	}
}

/* ---- scalar reference ------------------------------------------------ */
void mi_conv_ref(const struct mi_conv_shape *s, const float *x, const float *w,
		 const float *bias, const float *res, int act, float lo,
		 float hi, float *y)
{
	int cg = s->c / s->group, mg = s->m / s->group;
	struct mi_epi e = { .act = act, .lo = lo, .hi = hi };
	int img, m, oy, ox, ci, ky, kx;

	for (img = 0; img < s->n; img++)
		for (m = 0; m < s->m; m++) {
			int g = m / mg;

			for (oy = 0; oy < s->oh; oy++)
				for (ox = 0; ox < s->ow; ox++) {
					double acc = bias ? bias[m] : 0.0;
					size_t o = (((size_t)img * s->m + m) *
							    s->oh +
						    oy) * s->ow +
						   ox;

					for (ci = 0; ci < cg; ci++)
						for (ky = 0; ky < s->kh; ky++)
							for (kx = 0; kx < s->kw;
							     kx++) {
								int iy = oy * s->sh -
									 s->pt +
									 ky * s->dh;
								int ix = ox * s->sw -
									 s->pl +
									 kx * s->dw;

								if (iy < 0 ||
								    iy >= s->h ||
								    ix < 0 ||
								    ix >= s->w)
									continue;
								acc += (double)x[(((size_t)img * s->c + g * cg + ci) * s->h + iy) * s->w + ix] *
								       w[(((size_t)m * cg + ci) * s->kh + ky) * s->kw + kx];
							}
					if (res)
						acc += res[o];
					y[o] = mi_epi_scalar(&e, (float)acc, 0,
							     0);
				}
		}
}
