// SPDX-License-Identifier: MIT
/*
 * Runners of the blocked-layout pass's nodes: the element-wise, pooling
 * and depthwise jobs (items claimed dynamically), a direct conv's parts
 * of its work split as pieces, the fused 1x1 + depthwise bands, and
 * each node's fini (which undoes the pass's fusions).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"
#include "cpu/nchwc_pass.h"

/* ---- run ---------------------------------------------------------------- */
struct nc_job {
	const struct nc_node *f;
	const float *x, *b;
	float *y;
	int64_t items;
	int pad; /* conv: the padding copy */
	struct mi_work w;
};

/* Items [b, e) of job j (run on nt threads). */
static void nc_range(const struct nc_job *j, int64_t b, int64_t e, int nt)
{
	const struct nc_node *f = j->f;
	const struct mi_nc_kern *k = f->k;
	const int B = k->b;
	int64_t i;

	if (f->kind == NC_CONV && j->pad && f->pad == 2) {
		/* items: planes of the input image, every sh-th row and
		 * sw-th column copied into an ph x pw plane */
		int esz = f->xblk ? B : 1;

		for (i = b; i < e; i++) {
			const float *xp = j->x + i * f->h0 * f->w0 * esz;
			float *yp = j->y + i * f->ph * f->pw * esz;

			for (int r = 0; r < f->ph; r++) {
				const float *s = xp + (size_t)r * f->ssh * f->w0 * esz;
				float *d = yp + (size_t)r * f->pw * esz;

				/* constant sizes: inlined vector moves */
#define NC_SUBCOPY(E)                                                     \
	for (int q = 0; q < f->pw; q++)                                   \
		memcpy(d + (size_t)q * (E), s + (size_t)q * f->ssw * (E), \
		       (E) * sizeof(float))
				switch (esz) {
				case 16: NC_SUBCOPY(16); break;
				case 8: NC_SUBCOPY(8); break;
				case 4: NC_SUBCOPY(4); break;
				default: NC_SUBCOPY(1); break;
				}
#undef NC_SUBCOPY
			}
		}
		return;
	}
	if (f->kind == NC_CONV && j->pad) {
		/* items: planes of the input image */
		int esz = f->xblk ? B : 1;

		for (i = b; i < e; i++) {
			const float *xp = j->x + i * f->h0 * f->w0 * esz;
			float *yp = j->y + i * f->ph * f->pw * esz;
			int r, rows = f->h0 < f->ph - f->pt0 ? f->h0 : f->ph - f->pt0;
			int cols = f->w0 < f->pw - f->pl0 ? f->w0 : f->pw - f->pl0;
			size_t rw = (size_t)f->pw * esz;

			memset(yp, 0, f->pt0 * rw * sizeof(float));
			for (r = 0; r < rows; r++) {
				float *d = yp + (f->pt0 + r) * rw;

				memset(d, 0, (size_t)f->pl0 * esz * sizeof(float));
				memcpy(d + f->pl0 * esz, xp + (size_t)r * f->w0 * esz,
				       (size_t)cols * esz * sizeof(float));
				memset(d + (f->pl0 + cols) * esz, 0,
				       (size_t)(f->pw - f->pl0 - cols) * esz *
					       sizeof(float));
			}
			memset(yp + (f->pt0 + rows) * rw, 0,
			       (size_t)(f->ph - f->pt0 - rows) * rw * sizeof(float));
		}
		return;
	}
	if (f->kind == NC_DW || f->kind == NC_POOL) {
		/* items: image x channel block x output row */
		int cb = nc_cb(f->c, B);
		int oh = f->kind == NC_DW ? f->p.oh : f->pool.oh;
		int64_t ohw = f->kind == NC_DW ? (int64_t)f->p.oh * f->p.ow :
			      (int64_t)f->pool.oh * f->pool.ow;
		int64_t xi = img_size(f->c, f->kind == NC_DW ?
				      (int64_t)f->p.h * f->p.w : f->hw, 1, B);
		int64_t yi = img_size(f->m, ohw, f->yblk, B);
		int64_t ri = img_size(f->m, ohw, f->bblk, B);

		for (i = b; i < e;) {
			int n = (int)(i / ((int64_t)cb * oh));
			int c = (int)(i / oh % cb), r0 = (int)(i % oh);
			int r1 = e - i < oh - r0 ? (int)(r0 + e - i) : oh;

			if (f->kind == NC_DW)
				k->dw(&f->p, j->x + n * xi,
				      j->b ? j->b + n * ri : NULL, j->y + n * yi, c,
				      c + 1, r0, r1);
			else
				k->pool(&f->pool, f->c, j->x + n * xi,
					j->y + n * yi, f->yblk, c, c + 1, r0, r1);
			i += r1 - r0;
		}
		return;
	}
	{
		/* items: image x channel block */
		int cb = nc_cb(f->c, B);
		int64_t xi = img_size(f->c, f->hw, 1, B);
		int64_t yi = img_size(f->c, f->hw, f->yblk, B);

		for (i = b; i < e; i++) {
			int n = (int)(i / cb), c = (int)(i % cb);

			if (f->kind == NC_GAP)
				k->gap(j->x + n * xi, f->c, f->hw, j->y + n * f->c,
				       c, c + 1);
			else if (f->kind == NC_MUL)
				k->chmul(j->x + n * xi, j->b + n * f->c, f->c,
					 f->hw, j->y + n * yi, f->yblk, c, c + 1);
			else
				k->add(j->x + n * xi, j->b + n * xi, f->c, f->hw,
				       j->y + n * yi, f->yblk, f->act, f->lo,
				       f->hi, c, c + 1);
		}
	}
}


static void nc_thread(void *ctx, int t, int nt)
{
	struct nc_job *j = ctx;
	int64_t b, e;

	if (nt == 1) {
		nc_range(j, 0, j->items, 1);
		return;
	}
	while (mi_work_claim(&j->w, &b, &e))
		nc_range(j, b, e, nt);
}

static void nc_launch(struct nc_job *j, int nt)
{
	nt = nt < j->items ? nt : (int)j->items;
	nt = nt > 1 ? nt : 1;
	mi_work_init(&j->w, j->items, mi_work_grain(j->items, nt, NC_PER));
	mi_pool_run(nt, nc_thread, j);
}


/*
 * A conv's parts (mi_nc_plan_split) as pieces: thread t runs part t's pieces
 * from the front, then takes the pieces left in the other parts from
 * their back (a late or descheduled thread leaves its part's tail to the
 * others; the owner keeps its front, contiguous in weights and input).
 */

struct nc_part {
	uint64_t fb; /* front | back << 32, only through __atomic builtins */
} __attribute__((aligned(64)));

struct nc_cjob {
	const struct nc_node *f;
	const float *x, *r;
	float *y;
	int np;
	struct nc_part part[NC_MAXPART];
};

/* Part p's output blocks [*b0, *b1), units [*u0, *u1); returns its
 * pieces (group-major: groups of up to ob blocks x nsub unit ranges). */
static int nc_part_span(const struct nc_node *f, int p, int *b0, int *b1,
			int *u0, int *u1)
{
	int pg = p / f->sr, pr = p % f->sr, mb = nc_cb(f->m, f->k->b);

	*b0 = pg * mb / f->sg;
	*b1 = (pg + 1) * mb / f->sg;
	*u0 = (int)((int64_t)pr * f->units / f->sr);
	*u1 = (int)((int64_t)(pr + 1) * f->units / f->sr);
	if (f->gmaj)
		return (*b1 - *b0 + f->k->ob - 1) / f->k->ob *
		       (f->nsub < *u1 - *u0 ? f->nsub : *u1 - *u0);
	return *u1 - *u0;
}

/*
 * Output blocks [b0, b1) of a grouped conv: per group they cover, the
 * direct conv on that group's re-based parameters (f->p is group 0's:
 * group i's input, output and residual start i * cg and i * mg channels
 * later, in either layout since both are whole blocks; its weights and
 * bias i * mg / B output blocks later).
 */
static void nc_piece_grouped(const struct nc_cjob *j, int b0, int b1, int r0,
			     int r1, int c0, int c1)
{
	const struct nc_node *f = j->f;
	const int B = f->k->b, mbg = f->p.m / B;
	const int64_t xg = (int64_t)f->p.c * f->p.h * f->p.w;
	const int64_t yg = (int64_t)f->p.m * f->p.oh * f->p.ow;
	const size_t wg = (size_t)f->p.kh * f->p.kw * f->p.c * f->p.m;

	while (b0 < b1) {
		int gi = b0 / mbg, e = (gi + 1) * mbg < b1 ? (gi + 1) * mbg : b1;
		struct mi_nc_conv p = f->p;

		p.wp += gi * wg;
		p.bias += (size_t)gi * f->p.m;
		f->k->conv(&p, j->x + gi * xg, j->r ? j->r + gi * yg : NULL,
			   j->y + gi * yg, b0 - gi * mbg, e - gi * mbg, r0, r1,
			   c0, c1);
		b0 = e;
	}
}

static void nc_piece(const struct nc_cjob *j, int p, int k)
{
	const struct nc_node *f = j->f;
	const int ob = f->k->ob;
	int b0, b1, u0, u1, r0, r1, c0, c1;

	nc_part_span(f, p, &b0, &b1, &u0, &u1);
	if (f->gmaj) {
		int nu = u1 - u0, ns = f->nsub < nu ? f->nsub : nu;
		int s = k % ns;

		b0 += k / ns * ob;
		b1 = b0 + ob < b1 ? b0 + ob : b1;
		u1 = u0 + (s + 1) * nu / ns;
		u0 += s * nu / ns;
	} else {
		u0 += k;
		u1 = u0 + 1;
	}
	nc_unit_span(f, u0, u1, &r0, &r1, &c0, &c1);
	if (f->grp > 1) {
		nc_piece_grouped(j, b0, b1, r0, r1, c0, c1);
		return;
	}
	f->k->conv(&f->p, j->x, j->r, j->y, b0, b1, r0, r1, c0, c1);
}

/* Take a piece of part q: the front one (own) or the back one. */
static int nc_take(struct nc_part *q, bool front)
{
	uint64_t s = __atomic_load_n(&q->fb, __ATOMIC_RELAXED), n;
	uint32_t fr, bk;

	do {
		fr = (uint32_t)s;
		bk = (uint32_t)(s >> 32);
		if (fr >= bk)
			return -1;
		n = front ? s + 1 : s - (1ull << 32);
	} while (!__atomic_compare_exchange_n(&q->fb, &s, n, true,
					      __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return front ? (int)fr : (int)bk - 1;
}

static void nc_conv_thread(void *ctx, int t, int nt)
{
	struct nc_cjob *j = ctx;
	int k;

	for (int i = 0; i < j->np; i++) {
		int p = (t + i) % j->np;

		while ((k = nc_take(&j->part[p], i == 0)) >= 0)
			nc_piece(j, p, k);
	}
}

static void nc_conv_launch(struct nc_cjob *j)
{
	const struct nc_node *f = j->f;
	int g0, g1, u0, u1;

	j->np = f->sg * f->sr;
	for (int p = 0; p < j->np; p++)
		__atomic_store_n(&j->part[p].fb,
				 (uint64_t)nc_part_span(f, p, &g0, &g1, &u0, &u1)
					 << 32,
				 __ATOMIC_RELAXED);
	if (f->steal)
		nc_conv_thread(j, 0, j->np);
	else
		mi_pool_run(j->np, nc_conv_thread, j);
}

/*
 * 1x1 conv + depthwise conv in one pass (mi_nc_fuse_xdw): an item is (image,
 * band of depthwise output rows, group of expanded channel blocks).  It
 * computes the expanded channels of the group for the input rows the band
 * needs into the thread's buffer (blocked, L2-sized), then the depthwise
 * rows from there: the expanded tensor never goes to memory, and each
 * thread reads only its own groups' weights.  Both kernels run unchanged
 * on re-based parameters: the group's channels start at block 0 (weights,
 * bias and depthwise output offset), the buffer holds input rows
 * [i0, i1) (the depthwise sees a map of i1 - i0 rows and top pad pt + i0;
 * rows outside [i0, i1) are padding or not needed by the band).
 */
struct nc_xjob {
	const struct nc_node *f;
	const float *x;
	float *y;
	struct mi_work w;
};

static void nc_xdw_thread(void *ctx, int t, int nt)
{
	struct nc_xjob *j = ctx;
	const struct nc_node *f = j->f, *d = f->xdw;
	const struct mi_nc_kern *k = f->k;
	const int B = k->b, cbe = nc_cb(f->m, B);
	const int H = d->p.h, W = d->p.w;
	const int64_t xi = img_size(f->c, (int64_t)H * W, f->xblk, B);
	const int64_t ohw = (int64_t)d->p.oh * d->p.ow;
	const int64_t yi = img_size(d->m, ohw, d->yblk, B);
	float *buf = f->ws->buf + (size_t)t * f->xslice;
	int64_t b, e, i;

	while (mi_work_claim(&j->w, &b, &e))
		for (i = b; i < e; i++) {
			int g = (int)(i % f->xg);
			int band = (int)(i / f->xg % f->xbands);
			int n = (int)(i / ((int64_t)f->xg * f->xbands));
			int g0 = g * cbe / f->xg, g1 = (g + 1) * cbe / f->xg;
			int r0 = band * f->xrows;
			int r1 = r0 + f->xrows < d->p.oh ? r0 + f->xrows : d->p.oh;
			int i0 = r0 * d->p.sh - d->p.pt;
			int i1 = (r1 - 1) * d->p.sh - d->p.pt +
				 (d->p.kh - 1) * d->p.dh + 1;
			struct mi_nc_conv pa = f->p, pd = d->p;

			i0 = i0 > 0 ? i0 : 0;
			i1 = i1 < H ? i1 : H;
			i1 = i1 > i0 ? i1 : i0;
			pa.ow = (i1 - i0) * W;
			pa.m = f->m - g0 * B < (g1 - g0) * B ? f->m - g0 * B :
							       (g1 - g0) * B;
			pa.wp += (size_t)g0 * f->p.kh * f->p.kw * f->p.c * B;
			pa.bias += (size_t)g0 * B;
			pa.yblk = 1;
			if (pa.ow)
				k->conv(&pa, j->x + n * xi + (int64_t)i0 * W *
							    (f->xblk ? B : 1),
					NULL, buf, 0, g1 - g0, 0, 1, 0, pa.ow);
			pd.h = i1 - i0;
			pd.pt = d->p.pt + i0;
			pd.c = pd.m = d->m - g0 * B;
			pd.wp += (size_t)g0 * d->p.kh * d->p.kw * B;
			pd.bias += (size_t)g0 * B;
			k->dw(&pd, buf, NULL, j->y + n * yi + (int64_t)g0 * B * ohw,
			      0, g1 - g0, r0, r1);
		}
}

static void nc_xdw_run(const struct nc_node *f, const float *x, float *y)
{
	const struct nc_node *d = f->xdw;
	struct nc_xjob j = { .f = f, .x = x, .y = y };
	int64_t items = (int64_t)f->nb * f->xbands * f->xg;
	double work = (double)f->nb * f->p.ow * f->m * f->c +
		      (double)f->nb * d->p.oh * d->p.ow * d->c * d->p.kh * d->p.kw;
	int nt = work < 65536.0 ? 1 : f->nthreads;

	nt = nt < items ? nt : (int)items;
	/* items are a band of a group of channels: claimed one by one */
	mi_work_init(&j.w, items, nt > 1 ? 1 : items);
	mi_pool_run(nt, nc_xdw_thread, &j);
}

/* p.wp = wsrc with input channel ic scaled by s[ic] (mi_nc_fuse_semul). */
static void scale_weights(const struct nc_node *f, const float *s)
{
	const int B = f->k->b, c = f->c, mb = nc_cb(f->m, B);
	float *w = (float *)f->p.wp;

	for (int o = 0; o < mb; o++)
		for (int ic = 0; ic < c; ic++) {
			const float *a = f->wsrc + ((size_t)o * c + ic) * B;
			float *d = w + ((size_t)o * c + ic) * B;
			float sc = s[ic];

			for (int l = 0; l < B; l++)
				d[l] = a[l] * sc;
		}
}

int mi_nc_run(struct mi_graph *g, struct mi_node *n)
{
	const struct nc_node *f = n->priv;
	int xs = f->kind == NC_MUL ? 1 - f->slot2 : 0;
	struct mi_tensor *x = mi_in(g, n, xs), *y = mi_out(g, n, 0);
	struct mi_tensor *b = f->slot2 >= 0 ? mi_in(g, n, f->slot2) : NULL;
	struct nc_job j = { .f = f };
	int B = f->k->b, nt = f->nthreads;
	double work;

	if (!x->data || !y->data || (b && !b->data))
		return mi_graph_err(g, n, -EINVAL, "fast kernel: missing data");
	if (x->ndim != 4 || memcmp(x->dims, f->xdims, sizeof(f->xdims)))
		return mi_graph_err(g, n, -EINVAL,
				    "fast kernel planned for another input shape");
	j.x = x->data;
	j.b = b ? b->data : NULL;
	j.y = y->data;
	if (f->xdw) {
		nc_xdw_run(f, x->data, y->data);
		return 0;
	}
	if (f->kind == NC_CONV) {
		int64_t xi = img_size(f->c, (int64_t)f->h0 * f->w0, f->xblk, B);
		int64_t yi = img_size(f->m, (int64_t)f->p.oh * f->p.ow, f->yblk, B);
		int64_t ri = img_size(f->m, (int64_t)f->p.oh * f->p.ow, f->bblk, B);
		const float *x0 = x->data, *r0 = j.b;
		struct nc_cjob cj = { .f = f };

		work = (double)f->p.oh * f->p.ow * f->m * f->c * f->p.kh *
		       f->p.kw;
		for (int i = 0; i < f->nb; i++) {
			if (f->sem)
				scale_weights(f, (const float *)mi_in(g, n,
						f->sem_slot)->data + (int64_t)i * f->c);
			cj.x = x0 + i * xi;
			cj.r = r0 ? r0 + i * ri : NULL;
			cj.y = (float *)y->data + i * yi;
			if (f->wino) {
				mi_ncw_run(f->wino, cj.x, cj.r, cj.y, f->ws->buf);
				continue;
			}
			if (f->pad) {
				struct nc_job pj = j;

				pj.x = cj.x;
				pj.pad = 1; /* f->pad: which copy */
				pj.y = f->ws->buf;
				pj.items = f->xblk ? nc_cb(f->c, B) : f->c;
				nc_launch(&pj, work < 65536.0 ? 1 : nt);
				cj.x = f->ws->buf;
			}
			nc_conv_launch(&cj);
		}
		return 0;
	}
	switch (f->kind) {
	case NC_DW:
		j.items = (int64_t)f->nb * nc_cb(f->c, B) * f->p.oh;
		work = (double)f->nb * f->p.oh * f->p.ow * f->c * f->p.kh *
		       f->p.kw;
		break;
	case NC_POOL:
		j.items = (int64_t)f->nb * nc_cb(f->c, B) * f->pool.oh;
		work = (double)f->nb * f->ohw * f->c * f->pool.kh * f->pool.kw;
		break;
	default:
		j.items = (int64_t)f->nb * nc_cb(f->c, B);
		work = (double)f->nb * f->hw * f->c;
		break;
	}
	nc_launch(&j, work < 65536.0 ? 1 : nt);
	return 0;
}

void mi_nc_fini(struct mi_graph *g, struct mi_node *n)
{
	struct nc_node *f = n->priv;

	if (f->xdw) {
		struct mi_node *d = &g->nodes[f->xdw_node];

		g->tensors[n->outputs[0]].producer = f->xdw_node;
		d->dead = false;
		n->outputs[0] = f->xdw_t;
		d->priv = f->xdw;
		mi_nc_fini(g, d);
		d->priv = NULL;
		f->xdw = NULL;
	}
	if (f->sem) {
		struct mi_node *mn = &g->nodes[f->sem_node];

		mn->dead = false;
		free(n->inputs);
		n->inputs = f->sem_inputs;
		n->ninputs = f->sem_ninputs;
		mn->priv = f->sem;
		mi_nc_fini(g, mn);
		mn->priv = NULL;
		f->sem = NULL;
		mi_cpu_free((void *)f->p.wp);
		f->p.wp = f->wsrc;
	}
	if (f->wino) {
		mi_ncw_fini(f->wino);
		free(f->wino);
	}
	mi_nc_unfuse(g, n, f);
	if (f->phys_t >= 0)
		g->tensors[f->phys_t].phys_bytes = 0;
	if (f->ws && --f->ws->refs == 0) {
		mi_cpu_free(f->ws->buf);
		free(f->ws);
	}
	mi_cpu_free((void *)f->p.wp);
	mi_cpu_free((void *)f->p.bias);
	mi_cpu_free((void *)f->p.koff);
	free(f);
}
