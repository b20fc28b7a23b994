// SPDX-License-Identifier: MIT
/*
 * Blocked-layout (NCHWc) planner pass and node runners.
 *
 * mi_cpu_plan_nchwc() runs before the NCHW planner.  It
 *  1. marks the live fp32 nodes that have an NCHWc kernel: Conv (groups 1:
 *     direct convolution; groups == channels: depthwise; other groups of
 *     whole blocks: a direct convolution per group), MaxPool /
 *     AveragePool, GlobalAveragePool, the squeeze-excitation channel scale
 *     Mul(x [N,C,H,W], s [N,C,1,1]) and same-shape Add; another
 *     provider's nodes (lib/quant's standalone DequantizeLinear and int8
 *     convs writing fp32, its QuantizeLinear nodes writing C4) count as
 *     producers / readers of a blocked tensor where their layout ops say
 *     so (struct mi_layout_ops.role, lib/cpu/cpu_plan.h): they stay that
 *     provider's nodes and are told their fp32 side's layout
 *     (.set_blocked), so the fp32 islands of mixed int8 files run as
 *     blocked chains;
 *  2. fuses into each convolution its single-consumer residual Add and
 *     activation (Relu, Clip, HardSwish, Sigmoid, x*sigmoid(x)), as the
 *     NCHW planner does;
 *  3. propagates the layout: a tensor is blocked when its producer and
 *     every consumer are marked and accept a blocked operand in that slot
 *     and it is not a graph output.  Depthwise, pooling, the channel scale
 *     and Add need a blocked input: a marked node whose input is not
 *     blocked is unmarked, and so is a direct convolution with neither
 *     input nor output blocked (nothing gained over the NCHW kernels);
 *     repeated until nothing changes.  Chains therefore start at a direct
 *     convolution (which reads NCHW natively: it is the reorder) and end
 *     at a node that writes NCHW (lane by lane) for its consumers;
 *  4. sets the blocked tensors' phys_bytes (channels rounded up to the
 *     block) for the arena planner, packs the weights, and claims the
 *     marked nodes (node->priv).
 * mi_cpu_plan_fini() undoes everything (fusions, phys_bytes) through
 * each node's fini.
 *
 * Which convolutions: every conv is marked; a 3x3 stride-1 conv that the
 * Winograd kernel takes (mi_cpu_wino_pays, plan.c) runs on the blocked
 * Winograd (struct mi_ncw, winograd.c; Winograd is ~2x the direct
 * convolution's FLOP rate there).  A grouped conv whose channels and
 * outputs per group are whole blocks runs as one direct conv per group
 * (conv.nchwc.group); other grouped convs are left to im2col.
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

/* ---- layout propagation ----------------------------------------------- */
/* Does node (kind, f) accept a blocked tensor in input slot j? */
static bool accepts(int kind, const struct nc_node *f, int j)
{
	switch (kind) {
	case NC_CONV:
	case NC_DW:
		return j == 0 || j == f->slot2;
	case NC_GAP:
	case NC_POOL:
	case NC_Q:
		return j == 0;
	case NC_MUL:
		return j != f->slot2;
	case NC_ADD:
	case NC_CAT:
		return true;
	default:
		return false;
	}
}

static bool produces_blocked(int kind)
{
	return kind == NC_CONV || kind == NC_DW || kind == NC_MUL ||
	       kind == NC_ADD || kind == NC_POOL || kind == NC_CAT ||
	       kind == NC_DQ;
}


static bool tensor_blocked(struct mi_graph *g, int t, const int *kind,
			   struct nc_node **fs, int b)
{
	struct mi_tensor *tt = &g->tensors[t];
	int uses = 0;

	if (tt->producer < 0 || !produces_blocked(kind[tt->producer]) ||
	    (tt->flags & MI_TF_OUTPUT) || tt->ndim != 4)
		return false;
	/* padding at most half the channels (8 of 16: half of every vector
	 * and of the tensor's memory wasted) */
	if (2 * nc_cb((int)tt->dims[1], b) * b > 3 * tt->dims[1])
		return false;
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++) {
			if (n->inputs[j] != t)
				continue;
			if (!kind[i] || !accepts(kind[i], fs[i], j))
				return false;
			uses++;
		}
	}
	return uses > 0;
}

/* The conv kernel's copy of f's layouts and activation. */
static void nc_conv_layouts(struct nc_node *f)
{
	f->p.xblk = f->xblk;
	f->p.yblk = f->yblk;
	f->p.rblk = f->bblk;
	f->p.act = f->act;
	f->p.lo = f->lo;
	f->p.hi = f->hi;
}

/* finish() for a conv on the blocked Winograd (f's layouts set). */
static int finish_wino(struct mi_graph *g, struct mi_node *n, struct nc_node *f,
		       struct nc_ws *ws)
{
	struct mi_tensor *w = mi_in(g, n, 1), *bs = mi_in(g, n, 2);
	int err;

	f->p.bias = mi_nc_pack_bias(f->k->b, f->m, bs ? bs->data : NULL);
	f->wino = calloc(1, sizeof(*f->wino));
	if (!f->p.bias || !f->wino)
		return -ENOMEM;
	nc_conv_layouts(f);
	f->h0 = f->p.h;
	f->w0 = f->p.w;
	err = mi_ncw_init(f->wino, f->k, &f->p, w->data, f->nthreads);
	if (err) {
		free(f->wino);
		f->wino = NULL;
		return err;
	}
	if (f->wino->ws_floats > ws->floats)
		ws->floats = f->wino->ws_floats;
	f->ws = ws;
	ws->refs++;
	if (mi_debug("nchwc"))
		fprintf(stderr,
			"nchwc winograd c%d m%d %dx%d: %d tiles, layouts %d%d%d\n",
			f->c, f->m, f->p.oh, f->p.ow, f->wino->nt, f->xblk,
			f->yblk, f->bblk);
	return 0;
}

/* Pack weights, set layouts; node n becomes f's. */
static int finish(struct mi_graph *g, struct mi_node *n, struct nc_node *f,
		  const char *blk, struct nc_ws *ws)
{
	const int B = f->k->b;
	int xs = f->kind == NC_MUL ? 1 - f->slot2 : 0;
	struct mi_tensor *x = mi_in(g, n, xs), *y = mi_out(g, n, 0);

	memcpy(f->xdims, x->dims, sizeof(f->xdims));
	f->xblk = blk[n->inputs[xs]];
	f->yblk = blk[n->outputs[0]];
	f->bblk = f->slot2 >= 0 && n->inputs[f->slot2] >= 0 ?
			  blk[n->inputs[f->slot2]] : 0;
	if (f->yblk) {
		f->phys_t = n->outputs[0];
		y->phys_bytes = (size_t)img_size(f->m, y->dims[2] * y->dims[3],
						 1, B) * f->nb * sizeof(float);
	}
	/* what a plan reads back (lib/plan/); the other kinds are named
	 * "<op>.nchwc" */
	f->hdr.variant = f->kind == NC_DW ? "conv.nchwc.dw" :
			 f->kind != NC_CONV ? NULL :
			 f->gk ? MI_NC_VARIANT_GROUP :
			 f->wgo ? MI_NC_VARIANT_WINO : MI_NC_VARIANT_DIRECT;
	f->hdr.lay_in = f->xblk ? MI_LAYOUT_NCHWC : MI_LAYOUT_NCHW;
	f->hdr.blk_in = f->xblk ? B : 0;
	f->hdr.lay_out = f->yblk ? MI_LAYOUT_NCHWC : MI_LAYOUT_NCHW;
	f->hdr.blk_out = f->yblk ? B : 0;
	if (f->kind == NC_CONV && f->wgo)
		return finish_wino(g, n, f, ws);
	if (f->kind == NC_CONV || f->kind == NC_DW) {
		struct mi_tensor *w = mi_in(g, n, 1), *bs = mi_in(g, n, 2);

		/* grouped: [m][c / groups][kh][kw] packs as a dense conv of
		 * c / groups inputs, output block o in group o * B / mg */
		if (f->gk > 1)
			f->p.wp = mi_nc_pack_merged(B, f->m, f->m / (f->grp * f->gk),
						    f->p.c / f->gk, f->gk, f->p.kh,
						    f->p.kw, w->data);
		else
			f->p.wp = mi_nc_pack_weights(B, f->kind == NC_DW, f->m,
						     f->p.c, f->p.kh, f->p.kw,
						     w->data);
		f->p.bias = mi_nc_pack_bias(B, f->m, bs ? bs->data : NULL);
		if (!f->p.wp || !f->p.bias)
			return -ENOMEM;
		nc_conv_layouts(f);
		f->h0 = f->p.h;
		f->w0 = f->p.w;
		if (f->kind == NC_CONV && f->p.kh == 1 && f->p.kw == 1 &&
		    (f->p.sh > 1 || f->p.sw > 1) && !f->p.pt && !f->p.pl &&
		    (f->p.oh - 1) * f->p.sh < f->p.h &&
		    (f->p.ow - 1) * f->p.sw < f->p.w) {
			/* (an end pad that a sample would read: pad copy) */
			/* strided 1x1 (ResNet downsampling): the input's
			 * sampled pixels are copied into the workspace, the
			 * conv runs flat on them (full register tiles,
			 * contiguous input) */
			size_t fl = (size_t)(f->xblk ? nc_cb(f->c, B) * B : f->c) *
				    f->p.oh * f->p.ow;

			f->pad = 2;
			f->ssh = f->p.sh;
			f->ssw = f->p.sw;
			f->ph = f->p.h = f->p.oh;
			f->pw = f->p.w = f->p.ow;
			f->p.sh = f->p.sw = 1;
			if (fl > ws->floats)
				ws->floats = fl;
			f->ws = ws;
			ws->refs++;
		}
		if (f->kind == NC_CONV && f->p.kh == 1 && f->p.kw == 1 &&
		    f->p.sh == 1 && f->p.sw == 1 && !f->p.pt && !f->p.pl &&
		    f->p.oh == f->p.h && f->p.ow == f->p.w) {
			/* one row of h*w pixels: no row tails */
			f->flat = 1;
			f->p.w = f->p.ow = f->p.h * f->p.w;
			f->p.h = f->p.oh = 1;
		}
		if (!f->pad) {
			f->h0 = f->p.h;
			f->w0 = f->p.w;
		}
		if (f->kind == NC_CONV && !f->pad &&
		    (f->p.pt || f->p.pl ||
		     (f->p.oh - 1) * f->p.sh - f->p.pt + (f->p.kh - 1) * f->p.dh >= f->p.h ||
		     (f->p.ow - 1) * f->p.sw - f->p.pl + (f->p.kw - 1) * f->p.dw >= f->p.w)) {
			int eh = (f->p.oh - 1) * f->p.sh + (f->p.kh - 1) * f->p.dh + 1;
			int ew = (f->p.ow - 1) * f->p.sw + (f->p.kw - 1) * f->p.dw + 1;
			size_t fl;

			f->pad = 1;
			f->pt0 = f->p.pt;
			f->pl0 = f->p.pl;
			f->ph = eh > f->p.pt + f->p.h ? eh : f->p.pt + f->p.h;
			f->pw = ew > f->p.pl + f->p.w ? ew : f->p.pl + f->p.w;
			f->p.h = f->ph;
			f->p.w = f->pw;
			f->p.pt = f->p.pl = 0;
			fl = (size_t)(f->xblk ? nc_cb(f->c, B) * B : f->c) * f->ph *
			     f->pw;
			if (fl > ws->floats)
				ws->floats = fl;
			f->ws = ws;
			ws->refs++;
		}
		if (f->kind == NC_CONV) {
			/* NULL (not needed) on failure */
			f->p.koff = mi_nc_tap_offsets(&f->p);
			mi_nc_plan_split(f);
		}
	}
	return 0;
}

/*
 * A 1x1 stride-1 conv reading NCHW (a chain start) stays blocked when its
 * output's only reader is a depthwise conv, which needs a blocked input:
 * the pair then runs as one node (mi_nc_fuse_xdw) instead of both on the NCHW
 * kernels.  Such starts: ShuffleNet's channel shuffles, fp32 islands of
 * mixed int8 files after an int8 node writing NCHW fp32 (per-node CPU
 * time, 1 thread: ShuffleNetV2 fp32 4.1 -> 3.5 ms, seven depthwise convs
 * fused; MobileNetV2 min_cosine file features.4 0.47 -> 0.38 ms).
 */
static bool x1_keep(struct mi_graph *g, struct mi_node *n, const struct nc_node *f,
		    const int *kind, const char *blk)
{
	int c[2];

	if (!blk[n->outputs[0]]) {
		/* also one writing NCHW whose input is a blocked SE scale Mul
		 * read by it alone, where mi_nc_fuse_semul folds the Mul into it
		 * (mixed int8 files: the project conv of an fp32 block before
		 * an int8 one; EfficientNet-B0 min_cosine features.2.0 Mul +
		 * project 0.40 -> 0.22 ms) */
		int t = n->inputs[0], p = g->tensors[t].producer;

		return blk[t] && p >= 0 && kind[p] == NC_MUL &&
		       2 * (int64_t)f->m <= (int64_t)f->p.oh * f->p.ow &&
		       mi_cpu_consumers(g, t, c, 2) == 1;
	}
	return mi_cpu_consumers(g, n->outputs[0], c, 2) == 1 && kind[c[0]] == NC_DW;
}

/* What a plan asks of node ni's conv: -1 nothing (the cost rules
 * choose), 0 the direct kernel, 1 the blocked Winograd, 2 the grouped
 * direct kernel. */
static int want_wgo(const struct mi_cpu_opts *opts, int ni)
{
	const char *v = mi_cpu_plan_variant(opts, ni);

	if (!v)
		return -1;
	if (!strcmp(v, MI_NC_VARIANT_WINO))
		return 1;
	if (!strcmp(v, MI_NC_VARIANT_GROUP))
		return 2;
	return !strcmp(v, MI_NC_VARIANT_DIRECT) ? 0 : -1;
}

int mi_cpu_plan_nchwc(struct mi_graph *g, int nthreads, int isa,
		      const struct mi_cpu_opts *opts)
{
	int *kind = NULL, err = 0;
	struct nc_node **fs = NULL;
	char *blk = NULL;
	struct nc_ws *ws;
	bool changed;

	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	kind = calloc(g->nnodes + 1, sizeof(*kind));
	fs = calloc(g->nnodes + 1, sizeof(*fs));
	blk = calloc(g->ntensors + 1, 1);
	if (!kind || !fs || !blk) {
		err = -ENOMEM;
		goto out;
	}
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];
		struct nc_node *f = calloc(1, sizeof(*f));

		if (!f) {
			err = -ENOMEM;
			goto out;
		}
		f->k = mi_nc_kern_get(isa);
		f->want_wgo = want_wgo(opts, ni);
		if (n->dead || !(kind[ni] = mi_nc_classify(g, n, f))) {
			free(f);
			continue;
		}
		f->kind = kind[ni];
		f->k = mi_nc_kern_get(isa);
		f->nthreads = nthreads;
		f->phys_t = -1;
		f->orig_out = n->outputs[0];
		f->orig_ninputs = n->ninputs;
		f->hdr.run = mi_nc_run;
		f->hdr.fini = mi_nc_fini;
		fs[ni] = f;
		if (kind[ni] == NC_CONV || kind[ni] == NC_DW) {
			err = mi_nc_fuse(g, n, f);
			if (err)
				goto out;
		}
		if (kind[ni] == NC_ADD) {
			/* a following activation */
			int c[2];
			struct mi_tensor *tt = mi_out(g, n, 0);

			if (!(tt->flags & MI_TF_OUTPUT) &&
			    mi_cpu_consumers(g, n->outputs[0], c, 2) == 1 &&
			    !g->nodes[c[0]].priv &&
			    g->nodes[c[0]].noutputs == 1 &&
			    same_shape(mi_out(g, &g->nodes[c[0]], 0), tt) &&
			    (f->act = mi_cpu_act_of(g, &g->nodes[c[0]], &f->lo,
					     &f->hi)) > 0)
				mi_nc_absorb(g, n, f, c[0]);
			else
				f->act = MI_ACT_NONE;
			f->slot2 = 1;
		}
	}
	do {
		changed = false;
		for (int t = 0; t < g->ntensors; t++)
			blk[t] = tensor_blocked(g, t, kind, fs,
						 mi_nc_kern_get(isa)->b);
		for (int i = 0; i < g->nnodes; i++) {
			struct mi_node *n = &g->nodes[i];
			bool drop = false;

			if (!kind[i])
				continue;
			switch (kind[i]) {
			case NC_CONV:
				/* a plan named its kernel: it stays, reading
				 * and writing NCHW at a chain's ends */
				if (fs[i]->want_wgo >= 0)
					break;
				/* a grouped conv's alternative is im2col
				 * (several times slower): it stays blocked,
				 * reading and writing NCHW where it must */
				if (fs[i]->gk)
					break;
				/* on a 1x1 map (squeeze-excitation FCs) NCHW
				 * and blocked are the same pixel: the lane by
				 * lane ends cost nothing, and the NCHW GEMM has
				 * N = 1 (edge tiles, B packed per call) */
				if (fs[i]->p.h * fs[i]->p.w == 1 &&
				    fs[i]->p.oh * fs[i]->p.ow == 1)
					break;
				/* at a chain boundary a 1x1 stride-1 conv reads
				 * or writes NCHW lane by lane where the NCHW
				 * GEMM streams it (ResNet-50, ShuffleNet ran
				 * slower): chains need more than that */
				drop = !blk[n->inputs[0]] && !blk[n->outputs[0]];
				if (fs[i]->p.kh == 1 && fs[i]->p.kw == 1 &&
				    fs[i]->p.sh == 1 && fs[i]->p.sw == 1 &&
				    (!blk[n->inputs[0]] || !blk[n->outputs[0]]) &&
				    !x1_keep(g, n, fs[i], kind, blk))
					drop = true;
				break;
			case NC_MUL:
				drop = !blk[n->inputs[1 - fs[i]->slot2]];
				break;
			case NC_ADD:
				drop = !blk[n->inputs[0]] || !blk[n->inputs[1]];
				break;
			case NC_CAT:
				drop = !blk[n->outputs[0]];
				for (int j = 0; j < n->ninputs; j++)
					drop |= !blk[n->inputs[j]];
				break;
			case NC_DQ: /* writes either layout */
				break;
			default:
				drop = !blk[n->inputs[0]];
				break;
			}
			if (drop) {
				kind[i] = NC_NONE;
				changed = true;
			}
		}
	} while (changed);
	/* mi_nc_unfuse the dropped ones first (their absorbed nodes come back) */
	for (int i = g->nnodes - 1; i >= 0; i--)
		if (fs[i] && !kind[i]) {
			mi_nc_unfuse(g, &g->nodes[i], fs[i]);
			free(fs[i]);
			fs[i] = NULL;
		}
	/* pass 1: the Adds, after every int8 conv was told its layout */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < g->nnodes; i++) {
			if (!fs[i] || (kind[i] == NC_ADD) != pass)
				continue;
			if (kind[i] == NC_DQ || kind[i] == NC_Q) {
				/* lib/quant's node: told its fp32 side's layout */
				struct mi_node *n = &g->nodes[i];

				if (blk[kind[i] == NC_DQ ? n->outputs[0] : n->inputs[0]])
					nc_lops(n)->set_blocked(g, n, isa);
			}
			/* a Concat passes the layout through, run by the NCHW
			 * kernel; lib/quant's nodes and the Adds it takes over
			 * are not the NCHWc pass's either */
			if (kind[i] == NC_DQ || kind[i] == NC_Q || kind[i] == NC_CAT ||
			    (pass && mi_nc_add_to_qconv(g, i, fs[i], kind, blk))) {
				free(fs[i]);
				fs[i] = NULL;
				continue;
			}
			g->nodes[i].priv = fs[i];
			err = finish(g, &g->nodes[i], fs[i], blk, ws);
			fs[i] = NULL;
			if (err)
				goto out;
		}
	/* node merges: not where every node is to keep its own time */
	if (!(opts && opts->no_merge)) {
		mi_nc_fuse_xdw(g, ws, nthreads);
		err = mi_nc_fuse_semul(g);
	}
	if (!err && ws->refs) {
		ws->buf = mi_cpu_alloc(ws->floats * sizeof(float));
		if (!ws->buf)
			err = -ENOMEM;
	}
out:
	if (!ws->refs)
		free(ws);
	if (fs)
		for (int i = g->nnodes - 1; i >= 0; i--)
			if (fs[i]) {
				mi_nc_unfuse(g, &g->nodes[i], fs[i]);
				free(fs[i]);
			}
	free(kind);
	free(fs);
	free(blk);
	return err;
}
