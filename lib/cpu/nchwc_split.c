// SPDX-License-Identifier: MIT
/* How the threads share a blocked direct conv (one image). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"
#include "cpu/nchwc_pass.h"
#include "debug.h"

/*
 * How the threads share a direct conv (one image).  Work is output blocks
 * (in groups of k->ob, the register tile's) x position units (bands of
 * rows, or chunks of ~48 pixels of a flat 1x1 conv), cut into sg x sr
 * rectangular parts, one per thread.  The choice minimizes the largest
 * part's cost: its FLOPs plus the bytes it must fetch from outside its
 * core's L2, weighted NC_FLOP_PER_BYTE (a core does ~150 GFLOP/s and
 * pulls ~20 GB/s from L3).  A part streams its groups' weights once if
 * they fit in the L2 budget or when it runs group-major, and its input
 * once if it fits or when it runs unit-major; so where weights dominate
 * (7x7 and 14x14 maps of 256-2048 channels) the threads split the output
 * channels and each keeps only its half of the weights, and where
 * activations dominate (56x56 maps) they split rows.
 */
#define NC_FLOP_PER_BYTE 8.0

static double nc_l2_budget(void)
{
	static double l2;

	if (!l2) {
		long v = sysconf(_SC_LEVEL2_CACHE_SIZE);

		/* half the L2: room for the input, output and the other
		 * operand of the tile */
		l2 = v > 0 ? (double)v / 2 : 512.0 * 1024;
	}
	return l2;
}

/* Cost of the largest part of an sg x sr split; *gmaj its best order. */
static double split_cost(const struct nc_node *f, int sg, int sr, int *gmaj)
{
	const int B = f->k->b, mb = nc_cb(f->m, B);
	const double l2 = nc_l2_budget();
	int blocks = (mb + sg - 1) / sg, nu = (f->units + sr - 1) / sr;
	int ng = (blocks + f->k->ob - 1) / f->k->ob;
	int r0, r1, c0, c1, ih, xc = f->xblk ? nc_cb(f->c, B) * B : f->c;
	double pos, flops, wp, xp, bg, bu;

	/* grouped: an output block reads its group's f->p.c channels, a
	 * part the groups its blocks span */
	if (f->grp > 1) {
		int span = blocks / (f->p.m / B) + 1;

		xc = (span < f->grp ? span : f->grp) * f->p.c;
	}
	nc_unit_span(f, 0, nu, &r0, &r1, &c0, &c1);
	pos = (double)(r1 - r0) * (c1 - c0);
	flops = 2.0 * f->p.kh * f->p.kw * f->p.c * blocks * B * pos;
	wp = 4.0 * f->p.kh * f->p.kw * f->p.c * blocks * B;
	/* input rows the part reads */
	ih = (r1 - r0 - 1) * f->p.sh + (f->p.kh - 1) * f->p.dh + 1;
	ih = ih < f->p.h ? ih : f->p.h;
	xp = 4.0 * xc * ih * (f->flat ? (double)(c1 - c0) : f->p.w);
	bg = wp + xp * (xp <= l2 ? 1 : ng);
	bu = xp + wp * (wp <= l2 ? 1 : nu);
	/* ties of flat 1x1 convs: unit-major while the weights take at
	 * most half the budget (each unit's input stays in L1 for every
	 * group: ResNet-50's 64 -> 256 on 56x56 and 128 -> 512 on 28x28
	 * 1.3-1.4x faster than group-major at 1 thread), group-major above
	 * (1024 -> 256 on 14x14: 3-5 % faster) */
	*gmaj = f->flat ? bg < bu || (bg == bu && wp > l2 / 2) :
			  bg < bu;
	return flops / NC_FLOP_PER_BYTE + (*gmaj ? bg : bu);
}

/* The split of least cost (MI_DEBUG=nchwc prints each); a plan may name
 * another (mi_nc_conv_set_split). */
#define NC_SPLIT_WBYTES (64 * 1024)
void mi_nc_plan_split(struct nc_node *f)
{
	const int B = f->k->b, mb = nc_cb(f->m, B);
	int nt = f->nthreads > 1 ? f->nthreads : 1;
	double best = -1;

	/* as the other node runs: small convs stay on one thread, unless
	 * their weights alone (read once, mostly from beyond the L2: the
	 * squeeze-excitation FCs on 1x1 maps) take longer than a split */
	if ((double)f->p.oh * f->p.ow * f->m * f->p.c * f->p.kh * f->p.kw <
		    65536.0 &&
	    4.0 * f->m * f->p.c * f->p.kh * f->p.kw < NC_SPLIT_WBYTES)
		nt = 1;
	nt = nt < NC_MAXPART ? nt : NC_MAXPART;

	f->mg = (mb + f->k->ob - 1) / f->k->ob;
	f->rb = mi_nc_band_rows(f->p.oh, f->p.ow);
	f->units = f->flat ? (f->p.ow + 47) / 48 :
			     (f->p.oh + f->rb - 1) / f->rb;
	f->steal = 0;
	f->sg = f->sr = 1;
	for (int np = nt; np >= 1; np--)
		for (int sg = 1; sg <= np; sg++) {
			int sr = np / sg, gm;
			double c;

			if (sg * sr != np || sg > mb || sr > f->units)
				continue;
			c = split_cost(f, sg, sr, &gm);
			if (best < 0 || c < best) {
				best = c;
				f->sg = sg;
				f->sr = sr;
				f->gmaj = gm;
			}
		}
	mi_nc_split_pieces(f);
}

/* group-major parts: enough pieces per part to rebalance */
void mi_nc_split_pieces(struct nc_node *f)
{
	const int mb = nc_cb(f->m, f->k->b);
	int ng = ((mb + f->sg - 1) / f->sg + f->k->ob - 1) / f->k->ob;
	int nu = (f->units + f->sr - 1) / f->sr;

	f->nsub = f->sg * f->sr == 1 ? 1 : (NC_PER + ng - 1) / ng;
	f->nsub = f->nsub < nu ? f->nsub : nu;
	f->nsub = f->nsub > 1 ? f->nsub : 1;
	if (mi_debug("nchwc"))
		fprintf(stderr,
			"nchwc conv c%d m%d %dx%d -> %dx%d k%dx%d: %d groups x %d units, split %dx%d %s-major, %d sub\n",
			f->c, f->m, f->p.h, f->p.w, f->p.oh, f->p.ow, f->p.kh,
			f->p.kw, f->mg, f->units, f->sg, f->sr,
			f->gmaj ? "group" : "unit", f->nsub);
}

int mi_nc_conv_set_split(struct mi_node *n, int sg, int sr, bool gmaj,
			 bool steal)
{
	const struct mi_cpu_kernel_hdr *h = n->priv;
	struct nc_node *f = n->priv;
	int nt = f && f->nthreads > 1 ? f->nthreads : 1;

	if (!h || h->run != mi_nc_run || f->kind != NC_CONV || f->wino ||
	    f->xdw || sg < 1 || sr < 1 || sg * sr > nt ||
	    sg * sr > NC_MAXPART || sg > nc_cb(f->m, f->k->b) ||
	    sr > f->units)
		return -EINVAL;
	f->sg = sg;
	f->sr = sr;
	f->gmaj = gmaj;
	f->steal = steal;
	mi_nc_split_pieces(f);
	return 0;
}
