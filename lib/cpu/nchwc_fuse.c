// SPDX-License-Identifier: MIT
/*
 * Fusions of the blocked-layout pass: a conv's residual Add and
 * activation (epilogue), a 1x1 conv running its depthwise consumer band
 * by band, the squeeze-excitation scale folded into a 1x1 conv's
 * weights, and a blocked Add taken over by the int8 conv producing its
 * operand.
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
#include "debug.h"

/* ---- fusion (plan.c's helpers: mi_cpu_depends/consumers/act_of) ------- */
void mi_nc_absorb(struct mi_graph *g, struct mi_node *n, struct nc_node *f,
		   int ci)
{
	struct mi_node *c = &g->nodes[ci];

	f->absorbed[f->nabsorbed++] = ci;
	c->dead = true;
	n->outputs[0] = c->outputs[0];
	g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
}

static int add_residual(struct mi_node *n, struct nc_node *f, int t)
{
	int *in = malloc(4 * sizeof(int));

	if (!in)
		return -ENOMEM;
	for (int i = 0; i < 3; i++)
		in[i] = i < n->ninputs ? n->inputs[i] : -1;
	in[3] = t;
	f->orig_inputs = n->inputs;
	n->inputs = in;
	n->ninputs = 4;
	f->slot2 = 3;
	return 0;
}

int mi_nc_fuse(struct mi_graph *g, struct mi_node *n, struct nc_node *f)
{
	int ni = (int)(n - g->nodes);

	while (f->nabsorbed < NC_MAX_ABSORB - 1 && f->act == MI_ACT_NONE) {
		int t = n->outputs[0], cons[2], nc, act;
		struct mi_tensor *tt = &g->tensors[t];
		struct mi_node *c;
		float lo = 0, hi = 0;

		if (tt->flags & MI_TF_OUTPUT)
			break;
		nc = mi_cpu_consumers(g, t, cons, 2);
		if (nc == 2) {
			int sgi, muli;

			if (!mi_cpu_silu_pair(g, t, cons, &sgi, &muli) ||
			    g->nodes[sgi].priv || g->nodes[muli].priv)
				break;
			f->act = MI_ACT_SILU;
			mi_nc_absorb(g, n, f, sgi);
			mi_nc_absorb(g, n, f, muli);
			break;
		}
		if (nc != 1)
			break;
		c = &g->nodes[cons[0]];
		if (c->priv || c->noutputs != 1 ||
		    !same_shape(mi_out(g, c, 0), tt) ||
		    mi_out(g, c, 0)->dtype != MI_DT_FLOAT)
			break;
		act = mi_cpu_act_of(g, c, &lo, &hi);
		if (act > 0) {
			f->act = act;
			f->lo = lo;
			f->hi = hi;
			mi_nc_absorb(g, n, f, cons[0]);
			break;
		}
		if (is_op(c, "Add") && c->ninputs == 2 && f->slot2 < 0) {
			int other = c->inputs[0] == t ? c->inputs[1] : c->inputs[0];
			struct mi_tensor *ot = &g->tensors[other];
			int cyc;

			if (other == t || !f32_4d(ot) || !same_shape(ot, tt))
				break;
			cyc = mi_cpu_depends(g, other, ni);
			if (cyc < 0)
				return cyc;
			if (cyc)
				break;
			if (add_residual(n, f, other))
				return -ENOMEM;
			mi_nc_absorb(g, n, f, cons[0]);
			continue;
		}
		break;
	}
	return 0;
}

void mi_nc_unfuse(struct mi_graph *g, struct mi_node *n, struct nc_node *f)
{
	for (int i = f->nabsorbed - 1; i >= 0; i--) {
		struct mi_node *c = &g->nodes[f->absorbed[i]];

		c->dead = false;
		g->tensors[c->outputs[0]].producer = f->absorbed[i];
	}
	n->outputs[0] = f->orig_out;
	g->tensors[f->orig_out].producer = (int)(n - g->nodes);
	if (f->orig_inputs) {
		free(n->inputs);
		n->inputs = f->orig_inputs;
		f->orig_inputs = NULL;
	}
	n->ninputs = f->orig_ninputs;
	f->nabsorbed = 0;
}

/*
 * A 1x1 conv whose blocked output is read only by a depthwise conv (the
 * expansion of an inverted residual) runs that depthwise conv too, band
 * by band (nc_xdw_thread).  Groups of XDW_GROUP channels; bands as tall
 * as fit XDW_BUF floats of buffer per group, unless the rows recomputed
 * at band edges would add more than a quarter to the 1x1 conv (then
 * nothing is fused).  A plan may name other bands (mi_nc_xdw_set_rows).
 */
#define XDW_GROUP 64
#define XDW_BUF (96 * 1024)

static int xdw_in_rows(const struct mi_nc_conv *d, int rows)
{
	int r = (rows - 1) * d->sh + (d->kh - 1) * d->dh + 1;

	return r < d->h ? r : d->h;
}

bool mi_nc_plan_xdw(struct nc_node *f, const struct nc_node *d, int nthreads,
		    int rows)
{
	const int B = f->k->b, cbe = nc_cb(f->m, B);
	int gb = XDW_GROUP / B > f->k->ob ? XDW_GROUP / B : f->k->ob;
	int gmax, bands;
	bool forced = rows > 0;

	f->xg = (cbe + gb - 1) / gb;
	gmax = (cbe + f->xg - 1) / f->xg;
	if (!forced) {
		for (rows = d->p.oh; rows > 1; rows--)
			if ((int64_t)xdw_in_rows(&d->p, rows) * d->p.w * gmax * B <=
			    XDW_BUF)
				break;
	}
	rows = rows < d->p.oh ? rows : d->p.oh;
	bands = (d->p.oh + rows - 1) / rows;
	rows = (d->p.oh + bands - 1) / bands;
	if (!forced &&
	    4 * (int64_t)bands * xdw_in_rows(&d->p, rows) > 5 * (int64_t)d->p.h)
		return false;
	f->xrows = rows;
	f->xbands = bands;
	if (nthreads > 1) {
		/* threads claim items one by one: the group count (up to
		 * 4x more, smaller groups) with the shortest makespan in
		 * block-bands, ceil(items / nt) x the largest group (11
		 * groups of 3-4 blocks on 2 threads: 6 x 4 = 24 for 21) */
		int best = f->xg;
		int64_t bm = -1;

		for (int xg = f->xg; xg <= cbe && xg <= 4 * f->xg; xg++) {
			int64_t items = (int64_t)f->nb * bands * xg;
			int64_t ms = (items + nthreads - 1) / nthreads *
				     ((cbe + xg - 1) / xg);

			if (bm < 0 || ms < bm) {
				bm = ms;
				best = xg;
			}
		}
		f->xg = best;
		gmax = (cbe + f->xg - 1) / f->xg;
	}
	f->xslice = ((size_t)xdw_in_rows(&d->p, rows) * d->p.w * gmax * B + 15) &
		    ~(size_t)15;
	return true;
}

void mi_nc_fuse_xdw(struct mi_graph *g, struct nc_ws *ws, int nthreads)
{
	for (int ni = 0; ni < g->nnodes; ni++) {
		struct mi_node *n = &g->nodes[ni], *dn;
		const struct mi_cpu_kernel_hdr *h = n->priv;
		struct nc_node *f = n->priv, *d;
		int t = n->outputs[0], c;

		if (n->dead || !h || h->run != mi_nc_run || f->kind != NC_CONV ||
		    f->gk || !f->flat || f->pad || f->slot2 >= 0 ||
		    !f->yblk || f->xdw ||
		    (g->tensors[t].flags & MI_TF_OUTPUT) ||
		    mi_cpu_consumers(g, t, &c, 1) != 1)
			continue;
		dn = &g->nodes[c];
		h = dn->priv;
		d = dn->priv;
		if (!h || h->run != mi_nc_run || d->kind != NC_DW || d->slot2 >= 0 ||
		    dn->inputs[0] != t || d->nb != f->nb || d->c != f->m ||
		    (int64_t)d->p.h * d->p.w != f->p.ow ||
		    !mi_nc_plan_xdw(f, d, nthreads, 0))
			continue;
		if (mi_debug("nchwc"))
			fprintf(stderr,
				"nchwc xdw c%d m%d -> dw %dx%d k%dx%d s%d -> %dx%d: %d groups x %d bands of %d rows\n",
				f->c, f->m, d->p.h, d->p.w, d->p.kh, d->p.kw,
				d->p.sh, d->p.oh, d->p.ow, f->xg, f->xbands,
				f->xrows);
		f->xdw = d;
		f->xdw_node = c;
		f->xdw_t = t;
		dn->priv = NULL;
		dn->dead = true;
		n->outputs[0] = dn->outputs[0];
		g->tensors[n->outputs[0]].producer = ni;
		if (f->xslice * nthreads > ws->floats)
			ws->floats = f->xslice * nthreads;
		f->ws = ws;
		ws->refs++;
	}
}

int mi_nc_xdw_set_rows(struct mi_node *n, int rows)
{
	const struct mi_cpu_kernel_hdr *h = n->priv;
	struct nc_node *f = n->priv;
	float *buf;
	size_t need;

	if (!h || h->run != mi_nc_run || !f->xdw || rows < 1)
		return -EINVAL;
	mi_nc_plan_xdw(f, f->xdw, f->nthreads, rows);
	need = f->xslice * (f->nthreads > 1 ? f->nthreads : 1);
	if (need > f->ws->floats) {
		/* every node of the pass reads ws->buf when it runs */
		buf = mi_cpu_alloc(need * sizeof(float));
		if (!buf)
			return -ENOMEM;
		mi_cpu_free(f->ws->buf);
		f->ws->buf = buf;
		f->ws->floats = need;
	}
	return 0;
}

/*
 * The squeeze-excitation scale Mul(x, s) read only by a 1x1 conv folds
 * into that conv: W (s * x) = (W diag(s)) x, so the conv scales a copy of
 * its weights by s (per image, c * m multiplies) and reads x, instead of
 * a pass that writes and rereads the whole scaled map.  Done where the
 * weights are at most half the map (m <= hw / 2).
 */
int mi_nc_fuse_semul(struct mi_graph *g)
{
	for (int ni = 0; ni < g->nnodes; ni++) {
		struct mi_node *n = &g->nodes[ni], *mn;
		const struct mi_cpu_kernel_hdr *h = n->priv;
		struct nc_node *f = n->priv, *m;
		int t = n->ninputs > 0 ? n->inputs[0] : -1, pr, c, *in;
		size_t wn;
		float *wsc;

		if (n->dead || !h || h->run != mi_nc_run || f->kind != NC_CONV ||
		    f->gk || !f->flat || f->pad || f->xdw || f->sem || t < 0 ||
		    2 * (int64_t)f->m > f->p.ow ||
		    (g->tensors[t].flags & MI_TF_OUTPUT) ||
		    (pr = g->tensors[t].producer) < 0 ||
		    mi_cpu_consumers(g, t, &c, 1) != 1)
			continue;
		mn = &g->nodes[pr];
		h = mn->priv;
		m = mn->priv;
		if (mn->dead || !h || h->run != mi_nc_run || m->kind != NC_MUL ||
		    m->nb != f->nb || m->c != f->c || !m->xblk)
			continue;
		wn = (size_t)nc_cb(f->m, f->k->b) * f->c * f->k->b;
		wsc = mi_cpu_alloc(wn * sizeof(float));
		in = malloc((n->ninputs + 1) * sizeof(int));
		if (!wsc || !in) {
			mi_cpu_free(wsc);
			free(in);
			return -ENOMEM;
		}
		memcpy(in, n->inputs, n->ninputs * sizeof(int));
		in[0] = mn->inputs[1 - m->slot2];
		in[n->ninputs] = mn->inputs[m->slot2];
		f->sem = m;
		f->sem_node = pr;
		f->sem_slot = n->ninputs;
		f->sem_inputs = n->inputs;
		f->sem_ninputs = n->ninputs;
		n->inputs = in;
		n->ninputs++;
		f->wsrc = f->p.wp;
		f->p.wp = wsc;
		f->xblk = f->p.xblk = 1;
		mn->priv = NULL;
		mn->dead = true;
	}
	return 0;
}

/*
 * A blocked Add (node ai, f) whose operand is the blocked fp32 output of
 * an int8 conv (kind NC_DQ), read by nothing else, and whose other operand
 * is computed before that conv: the conv's epilogue adds it (its layout
 * ops' take_add), no pass over the three tensors here.  The later
 * conv of two candidates (ResNet's downsample and conv3).  The Add's
 * absorbed activation goes with it.  true: the Add is lib/quant's now.
 */
bool mi_nc_add_to_qconv(struct mi_graph *g, int ai, struct nc_node *f,
			 const int *kind, const char *blk)
{
	struct mi_node *n = &g->nodes[ai];
	int best = -1, bpos = -1, pos[2] = { -1, -1 }, a;
	const struct mi_layout_ops *lo;

	if (f->nabsorbed > 1 || !blk[n->outputs[0]])
		return false;
	for (int s = 0; s < 2; s++) {
		int p = g->tensors[n->inputs[s]].producer;

		for (int o = 0; p >= 0 && o < g->norder; o++)
			if (g->order[o] == p)
				pos[s] = o;
	}
	for (int s = 0; s < 2; s++) {
		int t = n->inputs[s], p = g->tensors[t].producer;

		if (p < 0 || kind[p] != NC_DQ || !blk[t] || pos[s] < 0 ||
		    (g->tensors[t].flags & MI_TF_OUTPUT) ||
		    mi_graph_sole_consumer(g, t) != ai || pos[1 - s] >= pos[s] ||
		    pos[s] <= bpos)
			continue;
		best = p;
		bpos = pos[s];
	}
	lo = best >= 0 ? nc_lops(&g->nodes[best]) : NULL;
	if (!lo || !lo->take_add)
		return false;
	a = f->nabsorbed ? f->absorbed[0] : -1;
	mi_nc_unfuse(g, n, f);
	if (!lo->take_add(g, &g->nodes[best], n, a, f->act, f->lo, f->hi))
		return true;
	if (a >= 0)
		mi_nc_absorb(g, n, f, a);
	return false;
}
