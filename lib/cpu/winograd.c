// SPDX-License-Identifier: MIT
/*
 * Winograd F(4x4, 3x3) for 3x3 stride-1 convolutions (group 1, NCHW).
 *
 * Each output 4x4 tile needs a 6x6 input patch d; with the transforms
 * U = G g G^T (weights, once at init), V = B^T d B (input) and
 * Y = A^T (U . V) A (output), the 36 element-wise products over all
 * channels become 36 independent GEMMs  M[xi] = U[xi] (M x C) * V[xi]
 * (C x tiles), 4x fewer multiplications than direct 3x3.
 *
 * Per image:  1. input transform, parallel over channels, written
 * straight into the GEMM's packed-B panel layout;  2. the 36 GEMMs,
 * parallel over xi;  3. output transform + fused epilogue, parallel over
 * output channels.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/conv_impl.h"
#include "cpu/nchwc.h"

#define NXI 36

static inline size_t rup(size_t a, size_t b)
{
	return (a + b - 1) / b * b;
}

int mi_wino_supports(const struct mi_conv_shape *s)
{
	return s->group == 1 && s->kh == 3 && s->kw == 3 && s->sh == 1 &&
	       s->sw == 1 && s->dh == 1 && s->dw == 1 && s->pt <= 2 &&
	       s->pl <= 2 && s->oh >= 1 && s->ow >= 1 &&
	       s->oh == s->h + s->pt + s->pb - 2 &&
	       s->ow == s->w + s->pl + s->pr - 2;
}

struct geom {
	int th, tw, twv;   /* tile rows, tiles per row, tw rounded to 16 */
	size_t t, tp;      /* tiles, tiles rounded to NR */
	size_t v_floats;   /* packed V: 36 * C * tp */
	size_t m_floats;   /* GEMM outputs: 36 * M * t (+ slack) */
	size_t scratch;    /* per-thread floats */
};

static void geom(const struct mi_conv *cv, struct geom *g)
{
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(cv->isa);
	const struct mi_conv_shape *s = &cv->s;

	g->th = (s->oh + 3) / 4;
	g->tw = (s->ow + 3) / 4;
	g->twv = (int)rup(g->tw, 16);
	g->t = (size_t)g->th * g->tw;
	g->tp = rup(g->t, kt->nr);
	g->v_floats = (size_t)NXI * s->c * g->tp;
	g->m_floats = (size_t)NXI * s->m * g->t + 16;
	/* k_wino_in's scratch (padded plane, phases, staging of all
	 * tiles), or the out-staging 4*4*twv */
	g->scratch = (size_t)(g->th * 4 + 2) * (((g->tw * 4 + 2 + 3) / 4) * 4 + 64) +
		     (size_t)24 * (g->twv + 16) + (size_t)NXI * (g->t + 16);
	if (g->scratch < (size_t)16 * g->twv)
		g->scratch = (size_t)16 * g->twv;
	g->scratch = rup(g->scratch, 16);
}

static int wino_threads(const struct mi_conv *cv)
{
	return cv->nthreads < 1 ? 1 : cv->nthreads;
}

/* u[xi][m][c] = (G g G^T)[xi] of w [m][c][3][3], G of F(4,3) with the
 * points 0, 1, -1, 1/2, -2 (computed in double) */
static void wino_weights(int mo, int ci, const float *w, float *u)
{
	for (int m = 0; m < mo; m++)
		for (int c = 0; c < ci; c++) {
			const float *k = w + ((size_t)m * ci + c) * 9;
			double t[6][3], r[6][6];

			for (int j = 0; j < 3; j++) {
				double g0 = k[j], g1 = k[3 + j], g2 = k[6 + j];

				t[0][j] = g0;
				t[1][j] = (g0 + g1 + g2) / 6;
				t[2][j] = (-g0 + g1 - g2) / 6;
				t[3][j] = -(16 * g0 + 8 * g1 + 4 * g2) / 15;
				t[4][j] = g0 / 30 - g1 / 15 + 2 * g2 / 15;
				t[5][j] = g2;
			}
			for (int i = 0; i < 6; i++) {
				double g0 = t[i][0], g1 = t[i][1], g2 = t[i][2];

				r[i][0] = g0;
				r[i][1] = (g0 + g1 + g2) / 6;
				r[i][2] = (-g0 + g1 - g2) / 6;
				r[i][3] = -(16 * g0 + 8 * g1 + 4 * g2) / 15;
				r[i][4] = g0 / 30 - g1 / 15 + 2 * g2 / 15;
				r[i][5] = g2;
			}
			for (int i = 0; i < 6; i++)
				for (int j = 0; j < 6; j++)
					u[((size_t)(i * 6 + j) * mo + m) * ci + c] =
						(float)r[i][j];
		}
}

int mi_wino_init(struct mi_conv *cv, const float *w)
{
	const struct mi_conv_shape *s = &cv->s;
	struct geom g;
	float *u;
	int err = 0, xi;

	u = malloc((size_t)NXI * s->m * s->c * sizeof(float));
	cv->wp = calloc(NXI, sizeof(*cv->wp));
	if (!u || !cv->wp) {
		free(u);
		return -ENOMEM;
	}
	cv->nwp = NXI;
	wino_weights(s->m, s->c, w, u);
	for (xi = 0; xi < NXI && !err; xi++)
		err = mi_sgemm_pack_a(cv->isa, s->m, s->c,
				      u + (size_t)xi * s->m * s->c, s->c, 1,
				      &cv->wp[xi]);
	free(u);
	if (err)
		return err;
	geom(cv, &g);
	cv->ws_size = (g.v_floats + g.m_floats +
		       g.scratch * wino_threads(cv)) * sizeof(float) + 64;
	return 0;
}

struct wjob {
	const struct mi_conv *cv;
	const struct mi_cpu_kern *kt;
	struct geom g;
	const float *x;
	float *y, *v, *mb, *scratch;
	const struct mi_epi *epi;
	struct mi_work work; /* claimed ranges of the current phase */
};

/* 1. input transform of channels [b, e) into packed V */
static void in_thread(void *ctx, int t, int nt)
{
	struct wjob *j = ctx;
	const struct mi_conv_shape *s = &j->cv->s;
	const int nr = j->kt->nr;
	float *scratch = j->scratch + j->g.scratch * t;
	size_t xs = (size_t)s->c * j->g.tp, ps = (size_t)s->c * nr;
	int64_t b, e, c;

	while (mi_work_claim(&j->work, &b, &e)) {
		for (c = b; c < e; c++) {
			j->kt->wino_in(j->x + (size_t)c * s->h * s->w, s->h, s->w,
				       s->pt, s->pl, j->g.th, j->g.tw, scratch, j->v,
				       xs, ps, nr, (int)c);
			/* padding lanes of the last panel */
			if (j->g.tp > j->g.t)
				for (int xi = 0; xi < NXI; xi++) {
					float *vx = j->v + xi * xs +
						    (j->g.t / nr) * ps + (size_t)c * nr;

					memset(vx + j->g.t % nr, 0,
					       (nr - j->g.t % nr) * sizeof(float));
				}
		}
	}
}

/* 2. the 36 GEMMs */
static void gemm_thread(void *ctx, int t, int nt)
{
	struct wjob *j = ctx;
	const struct mi_conv_shape *s = &j->cv->s;
	int64_t b, e, xi;

	while (mi_work_claim(&j->work, &b, &e)) {
		for (xi = b; xi < e; xi++) {
			struct mi_packed pb = {
				.isa = j->cv->isa,
				.rows = (int64_t)j->g.t,
				.k = s->c,
				.data = j->v + (size_t)xi * s->c * j->g.tp,
			};
			struct mi_sgemm_args ga = {
				.isa = j->cv->isa,
				.m = s->m,
				.n = (int64_t)j->g.t,
				.k = s->c,
				.pa = &j->cv->wp[xi],
				.pb = &pb,
				.c = j->mb + (size_t)xi * s->m * j->g.t,
				.ldc = (ptrdiff_t)j->g.t,
				.nthreads = 1,
			};

			mi_sgemm(&ga, NULL);
		}
	}
}

/* 3. output transform + epilogue of output channels [b, e) */
static void out_thread(void *ctx, int t, int nt)
{
	struct wjob *j = ctx;
	const struct mi_conv_shape *s = &j->cv->s;
	float *ostg = j->scratch + j->g.scratch * t;
	size_t xs = (size_t)s->m * j->g.t;
	int64_t b, e, m;

	while (mi_work_claim(&j->work, &b, &e)) {
		for (m = b; m < e; m++) {
			for (int ty = 0; ty < j->g.th; ty++) {
				j->kt->wino_out(j->mb + (size_t)m * j->g.t +
							(size_t)ty * j->g.tw,
						xs, j->g.tw, j->g.twv, ostg);
				for (int i = 0; i < 4 && ty * 4 + i < s->oh; i++) {
					int oy = ty * 4 + i;

					j->kt->epi_row(j->epi,
						       ostg + (size_t)i * 4 * j->g.twv,
						       j->y + ((size_t)m * s->oh + oy) * s->ow,
						       s->ow, m, (int64_t)oy * s->ow);
				}
			}
		}
	}
}

void mi_wino_run(const struct mi_conv *cv, const float *x, float *y,
		 const float *res, int act, float lo, float hi, void *ws)
{
	const struct mi_conv_shape *s = &cv->s;
	struct wjob j = { .cv = cv, .kt = mi_cpu_kern_get(cv->isa) };
	struct mi_epi epi = {
		.bias_kind = cv->bias ? MI_BIAS_ROW : MI_BIAS_NONE,
		.bias = cv->bias,
		.ldr = (ptrdiff_t)s->oh * s->ow,
		.act = act,
		.lo = lo,
		.hi = hi,
	};
	int nt = wino_threads(cv);
	float *base = (float *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);

	geom(cv, &j.g);
	j.v = base;
	j.mb = j.v + j.g.v_floats;
	j.scratch = j.mb + j.g.m_floats;
	j.epi = &epi;
	for (int img = 0; img < s->n; img++) {
		j.x = x + (size_t)img * s->c * s->h * s->w;
		j.y = y + (size_t)img * s->m * s->oh * s->ow;
		epi.res = res ? res + (size_t)img * s->m * s->oh * s->ow : NULL;
		mi_work_init(&j.work, s->c, mi_work_grain(s->c, nt, 4));
		mi_pool_run(nt < s->c ? nt : s->c, in_thread, &j);
		mi_work_init(&j.work, NXI, 1);
		mi_pool_run(nt, gemm_thread, &j);
		mi_work_init(&j.work, s->m, mi_work_grain(s->m, nt, 4));
		mi_pool_run(nt < s->m ? nt : s->m, out_thread, &j);
	}
}

/* ---- blocked layout (NCHWc): struct mi_ncw -------------------------------
 *
 * The same F(4x4, 3x3) with the transforms vectorized over a channel
 * block instead of over tiles: V[xi] = B^T d B of every tile is a blocked
 * map [cb][tiles][b] (k->wino_in), so each of the 36 GEMMs
 * M[xi] = U[xi] V[xi] is a 1x1 conv c -> m over the tiles, run by the
 * blocked 1x1 kernel (k->conv, L1-resident weight blocks, whole register
 * tiles), and the output transform (k->wino_out) reads M[xi] as blocked
 * maps too and writes the conv's output in either layout with bias,
 * residual and activation.  The conv's neighbours then stay blocked
 * (ResNet bottlenecks: the 1x1 convs around the 3x3 ran on the NCHW
 * GEMM).  Per image: [reorder of an NCHW input,] input transform over
 * (block, tile row), the GEMMs over (xi, group of output blocks), output
 * transform over (block, tile row), each claimed dynamically.
 */
bool mi_ncw_supports(const struct mi_nc_conv *p)
{
	return p->kh == 3 && p->kw == 3 && p->sh == 1 && p->sw == 1 &&
	       p->dh == 1 && p->dw == 1 && p->pt >= 0 && p->pt <= 2 &&
	       p->pl >= 0 && p->pl <= 2 && p->oh >= 1 && p->ow >= 1 &&
	       p->c >= 1 && p->m >= 1;
}

int mi_ncw_init(struct mi_ncw *wg, const struct mi_nc_kern *k,
		const struct mi_nc_conv *p, const float *w, int nthreads)
{
	const int B = k->b, m = p->m, c = p->c;
	const int cbc = (c + B - 1) / B, mbm = (m + B - 1) / B;
	const size_t us = (size_t)mbm * c * B; /* floats of one U[xi] */
	float *u;

	memset(wg, 0, sizeof(*wg));
	if (!mi_ncw_supports(p))
		return -EINVAL;
	wg->k = k;
	wg->p = *p;
	wg->p.wp = NULL;
	wg->nthreads = nthreads < 1 ? 1 : nthreads;
	wg->th = (p->oh + 3) / 4;
	wg->tw = (p->ow + 3) / 4;
	wg->nt = wg->th * wg->tw;
	wg->xs_v = rup((size_t)cbc * B * wg->nt, 16);
	wg->xs_m = rup((size_t)mbm * B * wg->nt, 16);
	wg->ws_floats = NXI * (wg->xs_v + wg->xs_m) +
			(p->xblk ? 0 : rup((size_t)cbc * B * p->h * p->w, 16));
	u = malloc((size_t)NXI * m * c * sizeof(float));
	wg->u = mi_cpu_alloc(NXI * us * sizeof(float));
	wg->g = (struct mi_nc_conv){
		.c = c, .h = 1, .w = wg->nt, .m = m, .oh = 1, .ow = wg->nt,
		.kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
		.xblk = 1, .yblk = 1, .act = MI_ACT_NONE,
		.bias = mi_nc_pack_bias(B, m, NULL),
	};
	if (!u || !wg->u || !wg->g.bias) {
		free(u);
		mi_ncw_fini(wg);
		return -ENOMEM;
	}
	wino_weights(m, c, w, u);
	for (int xi = 0; xi < NXI; xi++) {
		float *pk = mi_nc_pack_weights(B, 0, m, c, 1, 1,
					       u + (size_t)xi * m * c);

		if (!pk) {
			free(u);
			mi_ncw_fini(wg);
			return -ENOMEM;
		}
		memcpy(wg->u + xi * us, pk, us * sizeof(float));
		mi_cpu_free(pk);
	}
	free(u);
	return 0;
}

void mi_ncw_fini(struct mi_ncw *wg)
{
	mi_cpu_free(wg->u);
	mi_cpu_free((void *)wg->g.bias);
	wg->u = NULL;
	wg->g.bias = NULL;
}

enum { NCW_REORDER, NCW_IN, NCW_GEMM, NCW_OUT };

struct ncw_job {
	const struct mi_ncw *wg;
	const float *x, *res;
	float *y, *v, *mt;
	int phase, ng; /* ng: groups of output blocks per GEMM */
	struct mi_work work;
};

static void ncw_range(const struct ncw_job *j, int64_t b, int64_t e)
{
	const struct mi_ncw *wg = j->wg;
	const struct mi_nc_kern *k = wg->k;
	const int B = k->b, th = wg->th, mbm = (wg->p.m + B - 1) / B;

	switch (j->phase) {
	case NCW_REORDER:
		k->to_blk(j->x, wg->p.c, (int64_t)wg->p.h * wg->p.w, j->v, (int)b,
			  (int)e);
		return;
	case NCW_IN:
	case NCW_OUT:
		/* items: block x tile row, runs of one block per call */
		while (b < e) {
			int blk = (int)(b / th), ty0 = (int)(b % th);
			int ty1 = e - b < th - ty0 ? (int)(ty0 + e - b) : th;

			if (j->phase == NCW_IN)
				k->wino_in(&wg->p, j->x, j->v, wg->xs_v, wg->tw,
					   wg->nt, blk, ty0, ty1);
			else
				k->wino_out(&wg->p, j->mt, wg->xs_m, wg->tw,
					    wg->nt, j->res, j->y, blk, ty0, ty1);
			b += ty1 - ty0;
		}
		return;
	default:
		/* items: xi x group of k->ob output blocks */
		while (b < e) {
			int xi = (int)(b / j->ng), g0 = (int)(b % j->ng);
			int g1 = e - b < j->ng - g0 ? (int)(g0 + e - b) : j->ng;
			struct mi_nc_conv gp = wg->g;
			int mb1 = g1 * k->ob < mbm ? g1 * k->ob : mbm;

			gp.wp = wg->u + (size_t)xi * mbm * wg->p.c * B;
			k->conv(&gp, j->v + (size_t)xi * wg->xs_v, NULL,
				j->mt + (size_t)xi * wg->xs_m, g0 * k->ob, mb1, 0,
				1, 0, wg->nt);
			b += g1 - g0;
		}
		return;
	}
}

static void ncw_thread(void *ctx, int t, int nt)
{
	struct ncw_job *j = ctx;
	int64_t b, e;

	while (mi_work_claim(&j->work, &b, &e))
		ncw_range(j, b, e);
}

static void ncw_phase(struct ncw_job *j, int phase, int64_t items)
{
	int nt = j->wg->nthreads < items ? j->wg->nthreads : (int)items;

	j->phase = phase;
	mi_work_init(&j->work, items, mi_work_grain(items, nt, 4));
	mi_pool_run(nt, ncw_thread, j);
}

void mi_ncw_run(const struct mi_ncw *wg, const float *x, const float *res,
		float *y, float *ws)
{
	const int B = wg->k->b;
	const int cbc = (wg->p.c + B - 1) / B, mbm = (wg->p.m + B - 1) / B;
	struct ncw_job j = { .wg = wg, .x = x, .res = res, .y = y };

	j.v = ws;
	j.mt = ws + NXI * wg->xs_v;
	j.ng = (mbm + wg->k->ob - 1) / wg->k->ob;
	if (!wg->p.xblk) {
		/* NCHW input: reordered behind V and M first */
		float *xb = j.mt + NXI * wg->xs_m;

		j.x = x;
		j.v = xb;
		ncw_phase(&j, NCW_REORDER, cbc);
		j.v = ws;
		j.x = xb;
	}
	ncw_phase(&j, NCW_IN, (int64_t)cbc * wg->th);
	ncw_phase(&j, NCW_GEMM, (int64_t)NXI * j.ng);
	ncw_phase(&j, NCW_OUT, (int64_t)mbm * wg->th);
}
