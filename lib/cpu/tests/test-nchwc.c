// SPDX-License-Identifier: MIT
/*
 * NCHWc (blocked channel layout) kernels and planner pass.
 *
 * Kernels: direct conv, depthwise, pooling, global average pool, channel
 * scale, Add and the reorders against the scalar references on random
 * shapes (channel counts that are not multiples of the block, strides,
 * pads, dilations, every layout combination, residual, activations);
 * outputs are pre-filled with NaN so an unwritten element fails.
 * Planner: small graphs (chains, chain boundaries, graph outputs inside a
 * chain, SE block, residuals) planned, run and compared with the
 * reference ops of lib/ops; mi_cpu_plan_fini() must restore the graph,
 * and re-planning must work.  Run once per ISA (--isa) by check-cpu.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"

#include "cpu-test.h"

static unsigned int seed = 4242;

static unsigned int rnd(unsigned int n)
{
	seed = seed * 1103515245u + 12345u;
	return (seed >> 8) % n;
}

static float rfl(void)
{
	return (float)rnd(20001) / 10000.0f - 1.0f;
}

static float *rbuf(size_t n)
{
	float *p = mi_cpu_alloc((n ? n : 1) * sizeof(float));

	for (size_t i = 0; i < n; i++)
		p[i] = rfl();
	return p;
}

static float *nanbuf(size_t n)
{
	float *p = mi_cpu_alloc((n ? n : 1) * sizeof(float));

	for (size_t i = 0; i < n; i++)
		p[i] = NAN;
	return p;
}

static double maxabs(const float *a, int64_t n)
{
	double m = 0;

	for (int64_t i = 0; i < n; i++)
		m = fabs(a[i]) > m ? fabs(a[i]) : m;
	return m;
}

static const struct mi_nc_kern *K;
static int B;

static int cb(int c)
{
	return (c + B - 1) / B;
}

/* NCHW [c][hw] -> layout blk (fresh buffer) */
static float *to_layout(const float *x, int c, int64_t hw, int blk)
{
	float *y;

	if (!blk) {
		y = mi_cpu_alloc(c * hw * sizeof(float) + 4);
		memcpy(y, x, c * hw * sizeof(float));
		return y;
	}
	y = nanbuf((size_t)cb(c) * B * hw);
	K->to_blk(x, c, hw, y, 0, cb(c));
	return y;
}

static float *from_layout(const float *y, int c, int64_t hw, int blk)
{
	float *o = nanbuf((size_t)c * hw);

	if (blk)
		K->from_blk(y, c, hw, o, 0, cb(c));
	else
		memcpy(o, y, c * hw * sizeof(float));
	return o;
}

static const int chans[] = { 1, 3, 17, 24, 40, 88 };

static void pick_act(int *act, float *lo, float *hi)
{
	*act = (int)rnd(MI_ACT_COUNT);
	*lo = -0.3f;
	*hi = 0.4f;
	if (*act == MI_ACT_HSWISH)
		*lo = 1.0f / 6.0f, *hi = 0.5f;
}

/*
 * Direct conv (dw = 0) or depthwise (dw = 1) with edge tiles.  planned:
 * a direct conv as the planner runs it (input pre-padded, every tap in
 * range: tiles across rows on narrow maps), split in bands of rows on
 * odd it.
 */
/* conv_case draws wide maps (17-80 columns, 1-5 rows) of 3x3 depthwise,
 * 1x1 or 3x3 convs (wide == 1), 5x5 depthwise (wide == 2): whole register
 * tiles of the row kernels (ncd3_row, ncd5_row, nc1_row, ncr_row) and their
 * tails */
static int wide;
/* p.ksplit of conv_case (0: the rule) */
static int case_ksplit;

static void conv_case(int dw, int it, int planned)
{
	struct mi_conv_shape s = { .n = 1, .group = 1 };
	struct mi_nc_conv p = { 0 };
	float *x, *w, *bias, *res = NULL, *ref, *pre, *xl, *rl = NULL, *y, *yo;
	int xblk = dw ? 1 : (int)rnd(2), yblk = (int)rnd(2);
	int rblk = (int)rnd(2), act, mb;
	float lo, hi;
	int64_t ohw;
	double e;

	s.c = chans[rnd(sizeof(chans) / sizeof(chans[0]) - (dw ? 0 : 1))];
	s.m = dw ? s.c : chans[rnd(sizeof(chans) / sizeof(chans[0]))];
	if (dw)
		s.group = s.c;
	s.kh = s.kw = dw ? 3 + 2 * (int)rnd(3) : 1 + 2 * (int)rnd(3);
	if (!rnd(4))
		s.kw = 1 + (int)rnd(3);
	s.sh = 1 + (int)rnd(2);
	s.sw = rnd(3) ? s.sh : 3 - s.sh;
	s.dh = s.dw = rnd(4) ? 1 : 2;
	s.h = 1 + (int)rnd(15);
	s.w = 1 + (int)rnd(20);
	s.pt = (int)rnd(s.kh);
	s.pl = (int)rnd(s.kw);
	s.pb = (int)rnd(s.kh);
	s.pr = (int)rnd(s.kw);
	if (wide) {
		/* conv: 1x1, or 3x3 (NCHW input: the p->koff rows);
		 * depthwise: 3x3, 5x5 (wide == 2) */
		s.kh = s.kw = dw || rnd(2) ? (dw && wide == 2 ? 5 : 3) : 1;
		s.dh = s.dw = 1;
		s.w = 17 + (int)rnd(64);
		s.h = 1 + (int)rnd(5);
		s.pt = (int)rnd(s.kh);
		s.pl = (int)rnd(s.kw);
		s.pb = (int)rnd(s.kh);
		s.pr = (int)rnd(s.kw);
		if (!dw && rnd(2))
			s.c = 1 + (int)rnd(40);
	}
	if (planned && it % 3 != 1) {
		/* as planned (input pre-padded): every tap in range, so
		 * tiles run across rows on narrow maps */
		s.pt = s.pl = s.pb = s.pr = 0;
		s.h += (s.kh - 1) * s.dh;
		s.w += (s.kw - 1) * s.dw;
		if (rnd(2))
			s.c = 24 + (int)rnd(60);
	}
	s.oh = (s.h + s.pt + s.pb - ((s.kh - 1) * s.dh + 1)) / s.sh + 1;
	s.ow = (s.w + s.pl + s.pr - ((s.kw - 1) * s.dw + 1)) / s.sw + 1;
	if (s.oh < 1 || s.ow < 1)
		return;
	ohw = (int64_t)s.oh * s.ow;
	pick_act(&act, &lo, &hi);
	x = rbuf((size_t)s.c * s.h * s.w);
	w = rbuf((size_t)s.m * (s.c / s.group) * s.kh * s.kw);
	bias = rnd(2) ? rbuf(s.m) : NULL;
	if (rnd(2)) {
		res = rbuf((size_t)s.m * ohw);
		rl = to_layout(res, s.m, ohw, rblk);
	}
	ref = nanbuf((size_t)s.m * ohw);
	mi_conv_ref(&s, x, w, bias, res, act, lo, hi, ref);
	xl = to_layout(x, s.c, (int64_t)s.h * s.w, xblk);
	p = (struct mi_nc_conv){
		.c = s.c, .h = s.h, .w = s.w, .m = s.m, .oh = s.oh, .ow = s.ow,
		.kh = s.kh, .kw = s.kw, .sh = s.sh, .sw = s.sw, .dh = s.dh,
		.dw = s.dw, .pt = s.pt, .pl = s.pl, .xblk = xblk,
		.yblk = yblk, .rblk = rblk, .act = act, .lo = lo, .hi = hi,
	};
	p.wp = mi_nc_pack_weights(B, dw, s.m, s.c, s.kh, s.kw, w);
	p.bias = mi_nc_pack_bias(B, s.m, bias);
	p.ksplit = case_ksplit;
	/* NCHW input: the tap-offset loop (as planned) on 3 of 4 (not by
	 * rnd(): the cases after this one keep their draws) */
	if (!dw && it % 4 != 2)
		p.koff = mi_nc_tap_offsets(&p);
	mb = cb(s.m);
	y = nanbuf(yblk ? (size_t)mb * B * ohw : (size_t)s.m * ohw);
	if (dw) {
		/* split like the planner: block ranges x row ranges */
		int r = s.oh / 2;

		K->dw(&p, xl, rl, y, 0, mb, 0, r);
		K->dw(&p, xl, rl, y, 0, mb, r, s.oh);
	} else if (planned && it % 3 == 1) {
		/* padded: row by row, the interior columns on their own */
		int a = (s.pl + s.sw - 1) / s.sw < s.ow ?
				(s.pl + s.sw - 1) / s.sw : s.ow;
		int b = a + (int)rnd(s.ow - a + 1);

		for (int r0 = 0; r0 < s.oh; r0++) {
			K->conv(&p, xl, rl, y, 0, mb, r0, r0 + 1, 0, a);
			K->conv(&p, xl, rl, y, 0, mb, r0, r0 + 1, a, b);
			K->conv(&p, xl, rl, y, 0, mb, r0, r0 + 1, b, s.ow);
		}
	} else if (planned && it % 3 == 0) {
		/* like the planner's threads: bands of rows x block groups */
		int rb = mi_nc_band_rows(s.oh, s.ow);

		for (int g = 0; g < mb; g += K->ob)
			for (int r0 = 0; r0 < s.oh; r0 += rb)
				K->conv(&p, xl, rl, y, g,
					g + K->ob < mb ? g + K->ob : mb, r0,
					r0 + rb < s.oh ? r0 + rb : s.oh, 0, s.ow);
	} else if (it & 1) {
		int m1 = mb / 2, c1 = s.ow / 2;

		K->conv(&p, xl, rl, y, 0, m1, 0, s.oh, 0, s.ow);
		K->conv(&p, xl, rl, y, m1, mb, 0, s.oh, 0, c1);
		K->conv(&p, xl, rl, y, m1, mb, 0, s.oh, c1, s.ow);
	} else {
		K->conv(&p, xl, rl, y, 0, mb, 0, s.oh, 0, s.ow);
	}
	yo = from_layout(y, s.m, ohw, yblk);
	/* relative to the sums' range too: Clip shrinks the output's
	 * range, not the rounding of long sums (2.2-6.3e-5 of [-0.3, 0.4]
	 * at c40-75 x 5x5 on every ISA) */
	pre = nanbuf((size_t)s.m * ohw);
	mi_conv_ref(&s, x, w, bias, res, MI_ACT_NONE, 0, 0, pre);
	e = nerr(yo, ref, (int64_t)s.m * ohw) *
	    fmax(maxabs(ref, (int64_t)s.m * ohw), 1e-6) /
	    fmax(fmax(maxabs(ref, (int64_t)s.m * ohw),
		      maxabs(pre, (int64_t)s.m * ohw)), 1e-6);
	CHECK(e < 2e-5,
	      "%s c%d m%d %dx%d k%dx%d s%d,%d d%d p%d,%d,%d,%d act%d res%d lay %d%d%d: err %g",
	      dw ? "dw" : "conv", s.c, s.m, s.h, s.w, s.kh, s.kw, s.sh, s.sw,
	      s.dh, s.pt, s.pl, s.pb, s.pr, act, !!res, xblk, yblk, rblk, e);
	mi_cpu_free(x);
	mi_cpu_free(w);
	mi_cpu_free(bias);
	mi_cpu_free(res);
	mi_cpu_free(rl);
	mi_cpu_free(ref);
	mi_cpu_free(pre);
	mi_cpu_free(xl);
	mi_cpu_free(y);
	mi_cpu_free(yo);
	mi_cpu_free((void *)p.wp);
	mi_cpu_free((void *)p.bias);
	mi_cpu_free((void *)p.koff);
}

/*
 * Blocked Winograd F(4x4, 3x3) (winograd.c mi_ncw_*, nchwc_impl.h
 * ncw_in / ncw_out): 1-170 input channels (partial blocks), maps of 1-30
 * (partial tiles), pads 0-2 on each side, every layout of input, output
 * and residual, the residual in place (y) on some, every activation,
 * 1-3 threads, NaN-filled workspace and output; against mi_conv_ref.
 */
static void wino_case(int it)
{
	struct mi_conv_shape s = { .n = 1, .group = 1, .kh = 3, .kw = 3,
				   .sh = 1, .sw = 1, .dh = 1, .dw = 1 };
	struct mi_nc_conv p;
	struct mi_ncw wg;
	float *x, *w, *bias, *res = NULL, *ref, *pre, *xl, *rl = NULL, *y, *yo,
		*ws;
	int xblk = (int)rnd(2), yblk = (int)rnd(2), rblk = (int)rnd(2);
	int act, nt = 1 + (int)rnd(3), inplace = 0;
	float lo, hi;
	int64_t ohw;
	double e;

	s.c = it % 4 == 0 ? 120 + (int)rnd(50) : 1 + (int)rnd(90);
	s.m = 1 + (int)rnd(70);
	/* (the references' time: smaller maps with many channels) */
	s.h = 1 + (int)rnd(s.c > 90 ? 14 : 30);
	s.w = 1 + (int)rnd(s.c > 90 ? 14 : 30);
	s.pt = (int)rnd(3);
	s.pl = (int)rnd(3);
	s.pb = (int)rnd(3);
	s.pr = (int)rnd(3);
	s.oh = s.h + s.pt + s.pb - 2;
	s.ow = s.w + s.pl + s.pr - 2;
	if (s.oh < 1 || s.ow < 1)
		return;
	ohw = (int64_t)s.oh * s.ow;
	pick_act(&act, &lo, &hi);
	x = rbuf((size_t)s.c * s.h * s.w);
	w = rbuf((size_t)s.m * s.c * 9);
	bias = rnd(2) ? rbuf(s.m) : NULL;
	y = nanbuf(yblk ? (size_t)cb(s.m) * B * ohw : (size_t)s.m * ohw);
	if (rnd(2)) {
		res = rbuf((size_t)s.m * ohw);
		inplace = rblk == yblk && !rnd(3);
		if (inplace) {
			/* the residual's memory is y's (in place) */
			rl = to_layout(res, s.m, ohw, rblk);
			memcpy(y, rl, (yblk ? (size_t)cb(s.m) * B : (size_t)s.m) *
					      ohw * sizeof(float));
			mi_cpu_free(rl);
			rl = y;
		} else {
			rl = to_layout(res, s.m, ohw, rblk);
		}
	}
	ref = nanbuf((size_t)s.m * ohw);
	mi_conv_ref(&s, x, w, bias, res, act, lo, hi, ref);
	xl = to_layout(x, s.c, (int64_t)s.h * s.w, xblk);
	p = (struct mi_nc_conv){
		.c = s.c, .h = s.h, .w = s.w, .m = s.m, .oh = s.oh, .ow = s.ow,
		.kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
		.pt = s.pt, .pl = s.pl, .xblk = xblk, .yblk = yblk,
		.rblk = rblk, .act = act, .lo = lo, .hi = hi,
	};
	p.bias = mi_nc_pack_bias(B, s.m, bias);
	CHECK(!mi_ncw_init(&wg, K, &p, w, nt), "mi_ncw_init");
	ws = nanbuf(wg.ws_floats);
	mi_ncw_run(&wg, xl, rl, y, ws);
	yo = from_layout(y, s.m, ohw, yblk);
	pre = nanbuf((size_t)s.m * ohw);
	mi_conv_ref(&s, x, w, bias, res, MI_ACT_NONE, 0, 0, pre);
	e = nerr(yo, ref, (int64_t)s.m * ohw) *
	    fmax(maxabs(ref, (int64_t)s.m * ohw), 1e-6) /
	    fmax(fmax(maxabs(ref, (int64_t)s.m * ohw),
		      maxabs(pre, (int64_t)s.m * ohw)), 1e-6);
	CHECK(e < 5e-5,
	      "wino c%d m%d %dx%d p%d,%d,%d,%d act%d res%d%s lay %d%d%d t%d: err %g",
	      s.c, s.m, s.h, s.w, s.pt, s.pl, s.pb, s.pr, act, !!res,
	      inplace ? " (in place)" : "", xblk, yblk, rblk, nt, e);
	mi_ncw_fini(&wg);
	mi_cpu_free(x);
	mi_cpu_free(w);
	mi_cpu_free(bias);
	mi_cpu_free(res);
	if (rl != y)
		mi_cpu_free(rl);
	mi_cpu_free(ref);
	mi_cpu_free(pre);
	mi_cpu_free(xl);
	mi_cpu_free(y);
	mi_cpu_free(yo);
	mi_cpu_free(ws);
	mi_cpu_free((void *)p.bias);
}

/*
 * 1x1 rows on nc1_rowk: rows of 17-260 positions (whole tiles of RM and
 * RM - 1, no tail), 1-130 input channels in chunks of 1-3 blocks
 * (p.kc1 made small: the partial sums through y), strides 1-2, every
 * layout, activation and residual, the residual aliasing y (in place: no
 * chunks then) on some; also the default chunk size, no chunks and the
 * plain nc1_row.
 */
static void row1k_case(int it)
{
	struct mi_conv_shape s = { .n = 1, .group = 1, .kh = 1, .kw = 1,
				   .dh = 1, .dw = 1 };
	struct mi_nc_conv p = { 0 };
	int xblk = (int)rnd(2), yblk = (int)rnd(2), rblk = (int)rnd(2), act;
	int mb, inplace;
	float *x, *w, *bias, *res = NULL, *rl = NULL, *ref, *xl, *y, *yo;
	float lo, hi;
	int64_t ohw;
	double e;

	s.c = 1 + (int)rnd(130);
	s.m = 1 + (int)rnd(100);
	s.sh = s.sw = 1 + (int)rnd(2);
	s.h = 1 + (int)rnd(3);
	s.w = (17 + (int)rnd(244)) * s.sw;
	s.oh = (s.h - 1) / s.sh + 1;
	s.ow = (s.w - 1) / s.sw + 1;
	ohw = (int64_t)s.oh * s.ow;
	inplace = yblk && rblk && !rnd(4);
	pick_act(&act, &lo, &hi);
	x = rbuf((size_t)s.c * s.h * s.w);
	w = rbuf((size_t)s.m * s.c);
	bias = rnd(2) ? rbuf(s.m) : NULL;
	if (inplace || rnd(2)) {
		res = rbuf((size_t)s.m * ohw);
		rl = to_layout(res, s.m, ohw, rblk);
	}
	ref = nanbuf((size_t)s.m * ohw);
	mi_conv_ref(&s, x, w, bias, res, act, lo, hi, ref);
	xl = to_layout(x, s.c, (int64_t)s.h * s.w, xblk);
	p = (struct mi_nc_conv){
		.c = s.c, .h = s.h, .w = s.w, .m = s.m, .oh = s.oh, .ow = s.ow,
		.kh = 1, .kw = 1, .sh = s.sh, .sw = s.sw, .dh = 1, .dw = 1,
		.xblk = xblk, .yblk = yblk, .rblk = rblk, .act = act,
		.lo = lo, .hi = hi,
	};
	p.wp = mi_nc_pack_weights(B, 0, s.m, s.c, 1, 1, w);
	p.bias = mi_nc_pack_bias(B, s.m, bias);
	mb = cb(s.m);
	y = inplace ? rl : nanbuf(yblk ? (size_t)mb * B * ohw : (size_t)s.m * ohw);
	switch (it % 5) {
	case 0:
		p.kc1 = MI_NC_KC1_ROW;
		break;
	case 1:
		p.kc1 = MI_NC_KC1_NONE;
		break;
	case 2:
		p.kc1 = 0;
		break;
	default: /* 1-3 blocks of a full group's weights */
		p.kc1 = (1 + (int)rnd(3)) * B * B * 4 * K->ob;
	}
	if (it & 1) {
		/* as the planner's group-major pieces */
		for (int g = 0; g < mb; g += K->ob)
			K->conv(&p, xl, rl, y, g, g + K->ob < mb ? g + K->ob : mb,
				0, s.oh, 0, s.ow);
	} else {
		int c1 = s.ow / 3;

		K->conv(&p, xl, rl, y, 0, mb, 0, s.oh, 0, c1);
		K->conv(&p, xl, rl, y, 0, mb, 0, s.oh, c1, s.ow);
	}
	yo = from_layout(y, s.m, ohw, yblk);
	e = nerr(yo, ref, (int64_t)s.m * ohw);
	CHECK(e < 2e-5, "1x1 row c%d m%d %dx%d s%d act%d res%d%s lay %d%d%d kc %d: err %g",
	      s.c, s.m, s.h, s.w, s.sw, act, !!res, inplace ? " in place" : "",
	      xblk, yblk, rblk, it % 5, e);
	mi_cpu_free(x);
	mi_cpu_free(w);
	mi_cpu_free(bias);
	mi_cpu_free(res);
	mi_cpu_free(ref);
	mi_cpu_free(xl);
	if (!inplace)
		mi_cpu_free(y);
	mi_cpu_free(rl);
	mi_cpu_free(yo);
	mi_cpu_free((void *)p.wp);
	mi_cpu_free((void *)p.bias);
}

static void pool_case(void)
{
	struct mi_pool2d p = { 0 };
	int c = chans[rnd(6)], yblk = (int)rnd(2);
	float *x, *xl, *ref, *y, *yo;
	int64_t ihw, ohw;
	double e;
	static int sq;

	p.kh = 1 + (int)rnd(4);
	p.kw = 1 + (int)rnd(4);
	if (sq++ % 2) /* the unrolled 2x2 / 3x3 interiors */
		p.kh = p.kw = 2 + sq / 2 % 2;
	p.s = 1 + (int)rnd(2);
	p.ih = p.kh + (int)rnd(12);
	p.iw = p.kw + (int)rnd(12);
	p.pt = (int)rnd(p.kh);
	p.pl = (int)rnd(p.kw);
	p.pb = (int)rnd(p.kh);
	p.pr = (int)rnd(p.kw);
	p.avg = (int)rnd(2);
	p.include_pad = (int)rnd(2);
	p.oh = (p.ih + p.pt + p.pb - p.kh) / p.s + 1;
	p.ow = (p.iw + p.pl + p.pr - p.kw) / p.s + 1;
	if (rnd(3) == 0) {
		/* ceil_mode overhang: one more output when it starts inside */
		if ((p.oh) * p.s - p.pt < p.ih)
			p.oh++;
		if ((p.ow) * p.s - p.pl < p.iw)
			p.ow++;
	}
	ihw = (int64_t)p.ih * p.iw;
	ohw = (int64_t)p.oh * p.ow;
	x = rbuf((size_t)c * ihw);
	ref = nanbuf((size_t)c * ohw);
	for (int i = 0; i < c; i++)
		mi_pool_ref(&p, x + i * ihw, ref + i * ohw);
	xl = to_layout(x, c, ihw, 1);
	y = nanbuf(yblk ? (size_t)cb(c) * B * ohw : (size_t)c * ohw);
	K->pool(&p, c, xl, y, yblk, 0, cb(c), 0, p.oh / 2);
	K->pool(&p, c, xl, y, yblk, 0, cb(c), p.oh / 2, p.oh);
	yo = from_layout(y, c, ohw, yblk);
	e = nerr(yo, ref, c * ohw);
	CHECK(e < 1e-6, "%s c%d %dx%d k%dx%d s%d p%d,%d,%d,%d inc%d -> %dx%d: err %g",
	      p.avg ? "avg" : "max", c, p.ih, p.iw, p.kh, p.kw, p.s, p.pt,
	      p.pl, p.pb, p.pr, p.include_pad, p.oh, p.ow, e);
	mi_cpu_free(x);
	mi_cpu_free(xl);
	mi_cpu_free(ref);
	mi_cpu_free(y);
	mi_cpu_free(yo);
}

/* GAP, channel scale, Add(+act), reorder round trip */
static void misc_case(void)
{
	int c = chans[rnd(6)], yblk = (int)rnd(2), act;
	int64_t hw = 1 + rnd(150), n = c * hw;
	float *a = rbuf(n), *b = rbuf(n), *s = rbuf(c), *al, *bl, *y, *yo;
	float *ref = nanbuf(n), *g = nanbuf(c + 1), lo, hi;
	struct mi_epi ep = { 0 };

	pick_act(&act, &lo, &hi);
	ep.act = act, ep.lo = lo, ep.hi = hi;
	al = to_layout(a, c, hw, 1);
	bl = to_layout(b, c, hw, 1);
	yo = from_layout(al, c, hw, 1);
	CHECK(!memcmp(yo, a, n * sizeof(float)), "reorder round trip c%d", c);
	mi_cpu_free(yo);
	/* GAP */
	K->gap(al, c, hw, g, 0, cb(c));
	for (int i = 0; i < c; i++) {
		double acc = 0;

		for (int64_t j = 0; j < hw; j++)
			acc += a[i * hw + j];
		ref[i] = (float)(acc / hw);
	}
	CHECK(nerr(g, ref, c) < 1e-6, "gap c%d hw%lld: %g", c, (long long)hw,
	      nerr(g, ref, c));
	CHECK(isnan(g[c]), "gap wrote past c");
	/* channel scale */
	y = nanbuf(yblk ? (size_t)cb(c) * B * hw : n);
	K->chmul(al, s, c, hw, y, yblk, 0, cb(c));
	yo = from_layout(y, c, hw, yblk);
	for (int64_t i = 0; i < n; i++)
		ref[i] = a[i] * s[i / hw];
	CHECK(nerr(yo, ref, n) < 1e-6, "chmul c%d: %g", c, nerr(yo, ref, n));
	mi_cpu_free(y);
	mi_cpu_free(yo);
	/* Add + act */
	y = nanbuf(yblk ? (size_t)cb(c) * B * hw : n);
	K->add(al, bl, c, hw, y, yblk, act, lo, hi, 0, cb(c));
	yo = from_layout(y, c, hw, yblk);
	for (int64_t i = 0; i < n; i++)
		ref[i] = mi_epi_scalar(&ep, a[i] + b[i], 0, 0);
	CHECK(nerr(yo, ref, n) < 1e-6, "add c%d act%d: %g", c, act,
	      nerr(yo, ref, n));
	mi_cpu_free(y);
	mi_cpu_free(yo);
	mi_cpu_free(a);
	mi_cpu_free(b);
	mi_cpu_free(s);
	mi_cpu_free(al);
	mi_cpu_free(bl);
	mi_cpu_free(ref);
	mi_cpu_free(g);
}

/*
 * Sigmoid and SiLU (vec.h's short exp and division) through the Add
 * kernel (b = 0) on [-100, 100] and at +-inf / NaN, element by element
 * against double precision: sigmoid within 1e-6 absolute and 2e-6
 * relative where it is above 1e-30 (|x| < ~69), SiLU within 2e-6
 * relative plus 1e-30; a NaN stays NaN.  The conv cases' random data
 * (|x| < ~10) and their normalized error do not see the clamps or the
 * tails.
 */
static void act_range_case(void)
{
	const int c = 2 * B + 3;
	const int64_t hw = 1001, n = c * hw;
	float *a = nanbuf(n), *z = nanbuf(n), *al, *zl, *y, *yo;

	for (int64_t i = 0; i < n; i++) {
		a[i] = -100.0f + 200.0f * (float)i / (float)(n - 1);
		z[i] = 0.0f;
	}
	a[0] = NAN, a[1] = INFINITY, a[2] = -INFINITY, a[n - 1] = NAN;
	al = to_layout(a, c, hw, 1);
	zl = to_layout(z, c, hw, 1);
	for (int silu = 0; silu < 2; silu++) {
		int act = silu ? MI_ACT_SILU : MI_ACT_SIGMOID, bad = 0;
		double worst = 0;
		int64_t at = -1;

		y = nanbuf((size_t)cb(c) * B * hw);
		K->add(al, zl, c, hw, y, 1, act, 0, 0, 0, cb(c));
		yo = from_layout(y, c, hw, 1);
		for (int64_t i = 0; i < n; i++) {
			double x = a[i], sg = 1.0 / (1.0 + exp(-x));
			double ref = silu ? x * sg : sg, d = fabs(yo[i] - ref), e;

			if (isnan(x) || (silu && isinf(x))) {
				/* SiLU(+inf) = +inf; -inf * sigmoid(-inf):
				 * NaN or -inf, either */
				if ((isnan(x) && !isnan(yo[i])) ||
				    (x > 0 && yo[i] != x))
					bad++, at = i;
				continue;
			}
			if (silu)
				e = d / (2e-6 * fabs(ref) + 1e-30);
			else
				e = fmax(d / 1e-6, ref > 1e-30 ?
						   d / (2e-6 * ref) : 0);
			if (!(e <= 1))
				bad++;
			if (!(e <= worst))
				worst = e, at = i;
		}
		CHECK(!bad, "%s on [-100, 100]: %d bad, worst %g x tolerance at x=%g (%g)",
		      silu ? "silu" : "sigmoid", bad, worst,
		      at >= 0 ? a[at] : 0.0, at >= 0 ? yo[at] : 0.0);
		mi_cpu_free(y);
		mi_cpu_free(yo);
	}
	mi_cpu_free(a);
	mi_cpu_free(z);
	mi_cpu_free(al);
	mi_cpu_free(zl);
}

/* ---- planner ------------------------------------------------------------ */
static int tensor(struct mi_graph *g, const char *name, int64_t d0, int64_t d1,
		  int64_t d2, int64_t d3, unsigned int flags, bool fill)
{
	int t = mi_graph_add_tensor(g, name);
	struct mi_tensor *x = &g->tensors[t];
	int64_t dims[4] = { d0, d1, d2, d3 };

	mi_tensor_set_shape(x, MI_DT_FLOAT, 4, dims);
	if (fill) {
		mi_tensor_alloc(x);
		for (int64_t i = 0; i < mi_tensor_numel(x); i++)
			((float *)x->data)[i] = rfl() * 0.5f;
	}
	x->flags |= flags;
	return t;
}

static int node(struct mi_graph *g, const char *op, int nin, const int *in,
		int out)
{
	int nd = mi_graph_add_node(g, op, op, in, nin, &out, 1);

	g->nodes[nd].def = mi_op_find(op, "");
	return nd;
}

/* y becomes the graph's only output. */
static void set_output(struct mi_graph *g, int y)
{
	g->outputs = malloc(sizeof(int));
	g->noutputs = 1;
	g->outputs[0] = y;
	g->tensors[y].flags |= MI_TF_OUTPUT;
}

/* Conv node: x -> y with random weights/bias; returns the node. */
static int conv(struct mi_graph *g, int x, int c, int m, int k, int s,
		int group, int y)
{
	int w = tensor(g, "w", m, c / group, k, k,
		       MI_TF_CONST | MI_TF_INITIALIZER, true);
	int b = tensor(g, "b", 1, 1, 1, m, MI_TF_CONST | MI_TF_INITIALIZER,
		       true);
	int64_t pads[4] = { k / 2, k / 2, k / 2, k / 2 };
	int64_t st[2] = { s, s };
	int nd;

	mi_tensor_set_shape(&g->tensors[b], MI_DT_FLOAT, 1, (int64_t[]){ m });
	nd = node(g, "Conv", 3, (int[]){ x, w, b }, y);
	mi_node_set_ints(&g->nodes[nd], "pads", pads, 4);
	mi_node_set_ints(&g->nodes[nd], "strides", st, 2);
	if (group > 1) {
		struct mi_node *n = &g->nodes[nd];

		n->attrs = realloc(n->attrs, (n->nattrs + 1) * sizeof(*n->attrs));
		memset(&n->attrs[n->nattrs], 0, sizeof(*n->attrs));
		n->attrs[n->nattrs].name = strdup("group");
		n->attrs[n->nattrs].type = MI_ATTR_INT;
		n->attrs[n->nattrs].i = group;
		n->nattrs++;
	}
	return nd;
}

/* Run the graph's live nodes in order (fast kernels where planned),
 * NaN-filled outputs; copy every graph output into outs[i]. */
static int run_graph(struct mi_graph *g, float **outs)
{
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		struct mi_tensor *y = mi_out(g, n, 0);
		int err;

		if (!y->data) {
			if (mi_tensor_alloc(y))
				return -1;
			for (size_t i = 0; i < y->nbytes / 4; i++)
				((float *)y->data)[i] = NAN;
		}
		err = n->priv ? mi_cpu_node_run(g, n) : n->def->run(g, n);
		if (err)
			return err;
	}
	for (int i = 0; i < g->noutputs; i++) {
		struct mi_tensor *t = &g->tensors[g->outputs[i]];
		size_t nb = mi_tensor_numel(t) * sizeof(float);

		outs[i] = malloc(nb);
		memcpy(outs[i], t->data, nb);
	}
	return 0;
}

static void free_activations(struct mi_graph *g)
{
	for (int i = 0; i < g->ntensors; i++) {
		struct mi_tensor *t = &g->tensors[i];

		if (!(t->flags & (MI_TF_CONST | MI_TF_INPUT)))
			mi_tensor_free_data(t);
	}
}

static int count_planned(const struct mi_graph *g)
{
	int c = 0;

	for (int i = 0; i < g->nnodes; i++)
		c += !g->nodes[i].dead && g->nodes[i].priv != NULL;
	return c;
}

/*
 * Inverted residual with squeeze-excitation, plus a graph output inside
 * the chain and a MaxPool:
 *   x -> Conv5x5 + Relu -> dw3x3 s1 + HardSwish -(t2)-> GAP -> Conv1x1
 *   (on 1x1) -> Sigmoid -> Mul(t2, s) -> Conv1x1 -> Add(x) -> MaxPool
 *   -> y; outputs y and the GAP's, or (out_mid) y and t2
 */
static void test_chain(int c, int e, int hw, int nthreads, bool out_mid)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = nthreads, .isa = test_isa };
	int x, t0, t1, t1a, t2, gp, sq, sg, t3, t4, t5, y;
	int ncv1, ndw, nmul, nadd, npool, nrelu, nhs;
	float *fast[2] = { 0 }, *ref[2] = { 0 };
	int64_t ks[2] = { 3, 3 }, st[2] = { 2, 2 }, pads[4] = { 1, 1, 1, 1 };
	int ysz = hw / 2 + (hw & 1);

	mi_graph_init(&g);
	g.opset = 17;
	x = tensor(&g, "x", 1, c, hw, hw, MI_TF_INPUT, true);
	t0 = tensor(&g, "t0", 1, e, hw, hw, 0, false);
	t1 = tensor(&g, "t1", 1, e, hw, hw, 0, false);
	t1a = tensor(&g, "t1a", 1, e, hw, hw, 0, false);
	t2 = tensor(&g, "t2", 1, e, hw, hw, 0, false);
	gp = tensor(&g, "gp", 1, e, 1, 1, 0, false);
	sq = tensor(&g, "sq", 1, e, 1, 1, 0, false);
	sg = tensor(&g, "sg", 1, e, 1, 1, 0, false);
	t3 = tensor(&g, "t3", 1, e, hw, hw, 0, false);
	t4 = tensor(&g, "t4", 1, c, hw, hw, 0, false);
	t5 = tensor(&g, "t5", 1, c, hw, hw, 0, false);
	y = tensor(&g, "y", 1, c, ysz, ysz, 0, false);
	ncv1 = conv(&g, x, c, e, 5, 1, 1, t0);
	nrelu = node(&g, "Relu", 1, (int[]){ t0 }, t1);
	ndw = conv(&g, t1, e, e, 3, 1, e, t1a);
	nhs = node(&g, "HardSwish", 1, (int[]){ t1a }, t2);
	node(&g, "GlobalAveragePool", 1, (int[]){ t2 }, gp);
	conv(&g, gp, e, e, 1, 1, 1, sq);
	node(&g, "Sigmoid", 1, (int[]){ sq }, sg);
	/* either operand order */
	nmul = node(&g, "Mul", 2, hw & 1 ? (int[]){ sg, t2 } : (int[]){ t2, sg },
		    t3);
	conv(&g, t3, e, c, 1, 1, 1, t4);
	nadd = node(&g, "Add", 2, (int[]){ t4, x }, t5);
	npool = node(&g, "MaxPool", 1, (int[]){ t5 }, y);
	mi_node_set_ints(&g.nodes[npool], "kernel_shape", ks, 2);
	mi_node_set_ints(&g.nodes[npool], "strides", st, 2);
	mi_node_set_ints(&g.nodes[npool], "pads", pads, 4);
	g.outputs = malloc(2 * sizeof(int));
	g.noutputs = 2;
	g.outputs[0] = y;
	g.outputs[1] = out_mid ? t2 : gp;
	g.tensors[y].flags |= MI_TF_OUTPUT;
	g.tensors[g.outputs[1]].flags |= MI_TF_OUTPUT;
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	for (int round = 0; round < 2; round++) {
		CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		/* the Mul runs planned, or folded into the 1x1 after it */
		CHECK(g.nodes[ncv1].priv && g.nodes[ndw].priv &&
			      (g.nodes[nmul].priv || g.nodes[nmul].dead) &&
			      g.nodes[npool].priv,
		      "chain not planned (c%d e%d)", c, e);
		CHECK(g.nodes[nrelu].dead && g.nodes[nhs].dead &&
			      g.nodes[nadd].dead,
		      "act / residual not fused");
		CHECK(g.tensors[t1].phys_bytes >=
			      (size_t)(e + B - 1) / B * B * hw * hw * 4,
		      "t1 not blocked (phys %zu)", g.tensors[t1].phys_bytes);
		CHECK(!g.tensors[y].phys_bytes && !g.tensors[gp].phys_bytes,
		      "graph output / GAP output blocked");
		CHECK(!g.tensors[t2].phys_bytes == out_mid,
		      "t2 blocked %zu, graph output %d", g.tensors[t2].phys_bytes,
		      out_mid);
		CHECK(!run_graph(&g, fast), "planned run: %s", g.err);
		mi_cpu_plan_fini(&g);
		CHECK(!g.nodes[nrelu].dead && !g.nodes[nhs].dead &&
			      !g.nodes[nadd].dead && !count_planned(&g),
		      "fini did not restore the graph");
		CHECK(!g.tensors[t1].phys_bytes, "fini left phys_bytes");
		CHECK(g.nodes[ncv1].outputs[0] == t0 &&
			      g.nodes[ncv1].ninputs == 3,
		      "conv not restored");
		free_activations(&g);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK(!run_graph(&g, ref), "reference run: %s", g.err);
		for (int i = 0; i < 2 && fast[0] && ref[0]; i++) {
			int64_t n = mi_tensor_numel(&g.tensors[g.outputs[i]]);
			double er = nerr(fast[i], ref[i], n);

			CHECK(er < 1e-5, "chain c%d e%d hw%d t%d output %d: err %g",
			      c, e, hw, nthreads, i, er);
		}
		for (int i = 0; i < 2; i++) {
			free(fast[i]);
			free(ref[i]);
			fast[i] = ref[i] = NULL;
		}
		free_activations(&g);
	}
	mi_graph_fini(&g);
}

/*
 * Expansion 1x1 conv + depthwise conv run as one node (nchwc.c fuse_xdw):
 *   x -> Conv3x3 -> Conv1x1 (c -> e) + Relu -> dw kxk stride s + HardSwish
 *   -> y (graph output, NCHW), or (pool) -> MaxPool 2x2 -> y (the
 * depthwise output blocked).  rows > 0 names that many depthwise output
 * rows per band (mi_nc_xdw_set_rows), so band edges, padding rows and
 * channel groups all get hit.
 */
static int xdw_nb = 1;

static void test_xdw(int c, int e, int hw, int k, int s, int nthreads,
		     int rows, bool pool, bool planar)
{
	const int nb = xdw_nb;
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = nthreads, .isa = test_isa };
	int oh = (hw + 2 * (k / 2) - k) / s + 1;
	int x, t0, t1, t1r, t2, t2h, y, npw, ndw, nrelu, nhs;
	float *fast[1] = { 0 }, *ref[1] = { 0 };

	mi_graph_init(&g);
	g.opset = 17;
	x = tensor(&g, "x", nb, c, hw, hw, MI_TF_INPUT, true);
	t0 = tensor(&g, "t0", nb, c, hw, hw, 0, false);
	t1 = tensor(&g, "t1", nb, e, hw, hw, 0, false);
	t1r = tensor(&g, "t1r", nb, e, hw, hw, 0, false);
	t2 = tensor(&g, "t2", nb, e, oh, oh, 0, false);
	t2h = tensor(&g, "t2h", nb, e, oh, oh, 0, false);
	/* planar: the 1x1 conv reads the (NCHW) graph input */
	if (!planar)
		conv(&g, x, c, c, 3, 1, 1, t0);
	npw = conv(&g, planar ? x : t0, c, e, 1, 1, 1, t1);
	nrelu = node(&g, "Relu", 1, (int[]){ t1 }, t1r);
	ndw = conv(&g, t1r, e, e, k, s, e, t2);
	nhs = node(&g, "HardSwish", 1, (int[]){ t2 }, t2h);
	if (pool) {
		int64_t ks[2] = { 2, 2 };

		y = tensor(&g, "y", nb, e, oh - 1, oh - 1, 0, false);
		mi_node_set_ints(&g.nodes[node(&g, "MaxPool", 1,
					       (int[]){ t2h }, y)],
				 "kernel_shape", ks, 2);
	} else {
		y = t2h;
	}
	set_output(&g, y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	for (int round = 0; round < 2; round++) {
		CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK(g.nodes[npw].priv && g.nodes[ndw].dead &&
			      !g.nodes[ndw].priv && g.nodes[nrelu].dead &&
			      g.nodes[nhs].dead && g.nodes[npw].outputs[0] == t2h,
		      "xdw c%d e%d hw%d k%d s%d: pair not fused", c, e, hw, k, s);
		if (rows > 0)
			CHECK(!mi_nc_xdw_set_rows(&g.nodes[npw], rows),
			      "xdw: %d rows per band refused", rows);
		CHECK(!run_graph(&g, fast), "planned run: %s", g.err);
		mi_cpu_plan_fini(&g);
		CHECK(!g.nodes[ndw].dead && !g.nodes[nrelu].dead &&
			      !g.nodes[nhs].dead && !count_planned(&g) &&
			      g.nodes[npw].outputs[0] == t1 &&
			      g.nodes[ndw].outputs[0] == t2 &&
			      g.tensors[t1].producer == npw &&
			      g.tensors[t2h].producer == nhs &&
			      !g.tensors[t2].phys_bytes,
		      "xdw: fini did not restore the graph");
		free_activations(&g);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK(!run_graph(&g, ref), "reference run: %s", g.err);
		if (fast[0] && ref[0]) {
			double er = nerr(fast[0], ref[0],
					 mi_tensor_numel(&g.tensors[y]));

			CHECK(er < 1e-5,
			      "xdw c%d e%d hw%d k%d s%d t%d rows %d pool %d: err %g",
			      c, e, hw, k, s, nthreads, rows, pool, er);
		}
		free(fast[0]);
		free(ref[0]);
		fast[0] = ref[0] = NULL;
		free_activations(&g);
	}
	mi_graph_fini(&g);
}

/*
 * Channel Concat between blocked nodes (nchwc.c concat_blocks): batch nb,
 *   x -> Conv3x3 (c -> a) + Conv3x3 (c -> b) -> Concat(axis 1) -> Conv1x1
 *   -> MaxPool 2x2 -> y.
 * With a and b multiples of the block the Concat keeps the blocked
 * layout (its inputs and the 1x1's are blocked); otherwise everything
 * around it stays NCHW.  Both must match the reference.
 */
static void test_concat(int c, int a, int b, int nb, int hw, int nthreads)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = nthreads, .isa = test_isa };
	int x, ta, tb, tc, t1, y, na, npw, ncat;
	float *fast[1] = { 0 }, *ref[1] = { 0 };
	int64_t ks[2] = { 2, 2 };
	bool blocked = a % B == 0 && b % B == 0;

	mi_graph_init(&g);
	g.opset = 17;
	x = tensor(&g, "x", nb, c, hw, hw, MI_TF_INPUT, true);
	ta = tensor(&g, "ta", nb, a, hw, hw, 0, false);
	tb = tensor(&g, "tb", nb, b, hw, hw, 0, false);
	tc = tensor(&g, "tc", nb, a + b, hw, hw, 0, false);
	t1 = tensor(&g, "t1", nb, c, hw, hw, 0, false);
	y = tensor(&g, "y", nb, c, hw - 1, hw - 1, 0, false);
	na = conv(&g, x, c, a, 3, 1, 1, ta);
	conv(&g, x, c, b, 3, 1, 1, tb);
	ncat = node(&g, "Concat", 2, (int[]){ ta, tb }, tc);
	mi_node_set_int(&g.nodes[ncat], "axis", 1);
	npw = conv(&g, tc, a + b, c, 1, 1, 1, t1);
	mi_node_set_ints(&g.nodes[node(&g, "MaxPool", 1, (int[]){ t1 }, y)],
			 "kernel_shape", ks, 2);
	set_output(&g, y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	for (int round = 0; round < 2; round++) {
		CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK((g.nodes[na].priv && g.nodes[npw].priv &&
		       g.tensors[ta].phys_bytes && g.tensors[t1].phys_bytes) ==
			      blocked,
		      "concat a%d b%d: blocked chain %d", a, b, blocked);
		CHECK(!run_graph(&g, fast), "planned run: %s", g.err);
		mi_cpu_plan_fini(&g);
		CHECK(!g.tensors[ta].phys_bytes && !count_planned(&g),
		      "concat: fini did not restore the graph");
		free_activations(&g);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK(!run_graph(&g, ref), "reference run: %s", g.err);
		if (fast[0] && ref[0]) {
			double er = nerr(fast[0], ref[0],
					 mi_tensor_numel(&g.tensors[y]));

			CHECK(er < 1e-5, "concat c%d a%d b%d n%d t%d: err %g", c,
			      a, b, nb, nthreads, er);
		}
		free(fast[0]);
		free(ref[0]);
		fast[0] = ref[0] = NULL;
		free_activations(&g);
	}
	mi_graph_fini(&g);
}

/* Nodes a and b run the same kernel function. */
static bool same_kernel(const struct mi_graph *g, int a, int b)
{
	const struct mi_cpu_kernel_hdr *ha = g->nodes[a].priv;
	const struct mi_cpu_kernel_hdr *hb = g->nodes[b].priv;

	return ha && hb && ha->run == hb->run;
}

/*
 * Squeeze-excitation scale folded into the next 1x1 conv (nchwc.c
 * fuse_semul), batch nb (the scale differs per image):
 *   x -> Conv3x3 (c -> e) -(t1)-> GAP -> Conv1x1 (1x1 map) -> Sigmoid -> s;
 *   Mul(t1, s) -> Conv1x1 (e -> m) -> MaxPool 2x2 -> y.
 * Folded when m <= hw * hw / 2, else the Mul runs on its own.  With
 * r > 0 the squeeze is two FCs, Conv1x1 (e -> r) + Relu and Conv1x1
 * (r -> e), both direct convs on the 1x1 map (NCHW or blocked between
 * them; split over the threads when their weights are large).  nchw_out:
 * the 1x1 conv writes the graph output (NCHW) instead of the MaxPool, and
 * stays blocked for the fold (x1_keep).
 */
static void test_semul(int c, int e, int m, int hw, int nb, int nthreads,
		       int r, bool nchw_out)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = nthreads, .isa = test_isa };
	int x, t1, gp, sq, sg, t3, t4, y, nmul, npw, nfc1 = -1, nfc2;
	float *fast[1] = { 0 }, *ref[1] = { 0 };
	int64_t ks[2] = { 2, 2 };
	bool fold = 2 * m <= hw * hw;

	mi_graph_init(&g);
	g.opset = 17;
	x = tensor(&g, "x", nb, c, hw, hw, MI_TF_INPUT, true);
	t1 = tensor(&g, "t1", nb, e, hw, hw, 0, false);
	gp = tensor(&g, "gp", nb, e, 1, 1, 0, false);
	sq = tensor(&g, "sq", nb, e, 1, 1, 0, false);
	sg = tensor(&g, "sg", nb, e, 1, 1, 0, false);
	t3 = tensor(&g, "t3", nb, e, hw, hw, 0, false);
	t4 = tensor(&g, "t4", nb, m, hw, hw, 0, false);
	y = tensor(&g, "y", nb, m, hw - 1, hw - 1, 0, false);
	conv(&g, x, c, e, 3, 1, 1, t1);
	node(&g, "GlobalAveragePool", 1, (int[]){ t1 }, gp);
	if (r > 0) {
		int sr = tensor(&g, "sr", nb, r, 1, 1, 0, false);
		int sa = tensor(&g, "sa", nb, r, 1, 1, 0, false);

		nfc1 = conv(&g, gp, e, r, 1, 1, 1, sr);
		node(&g, "Relu", 1, (int[]){ sr }, sa);
		nfc2 = conv(&g, sa, r, e, 1, 1, 1, sq);
	} else {
		nfc2 = conv(&g, gp, e, e, 1, 1, 1, sq);
	}
	node(&g, "Sigmoid", 1, (int[]){ sq }, sg);
	nmul = node(&g, "Mul", 2, nb & 1 ? (int[]){ sg, t1 } : (int[]){ t1, sg },
		    t3);
	npw = conv(&g, t3, e, m, 1, 1, 1, t4);
	if (nchw_out) {
		y = t4;
	} else {
		mi_node_set_ints(&g.nodes[node(&g, "MaxPool", 1, (int[]){ t4 }, y)],
				 "kernel_shape", ks, 2);
	}
	set_output(&g, y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	for (int round = 0; round < 2; round++) {
		CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK(g.tensors[t1].phys_bytes && (g.nodes[npw].priv || (nchw_out && !fold)),
		      "semul: chain not blocked");
		/* the FCs run on the blocked path's kernel (as the 1x1 conv
		 * after the Mul does), not on the NCHW GEMM (an NCHW-output 1x1
		 * left unfolded is on the NCHW kernels itself) */
		CHECK((nchw_out && !fold) ||
			      (g.nodes[nfc2].priv && (nfc1 < 0 || g.nodes[nfc1].priv) &&
			       same_kernel(&g, nfc2, npw) &&
			       (nfc1 < 0 || same_kernel(&g, nfc1, npw))),
		      "semul e%d r%d: FCs on the 1x1 map not blocked convs", e, r);
		CHECK((g.nodes[nmul].dead && !g.nodes[nmul].priv &&
		       g.nodes[npw].inputs[0] == t1 && g.nodes[npw].ninputs == 4) ==
			      fold,
		      "semul e%d m%d hw%d%s: folded %d, expected %d", e, m, hw,
		      nchw_out ? " nchw out" : "", g.nodes[nmul].dead, fold);
		CHECK(!run_graph(&g, fast), "planned run: %s", g.err);
		mi_cpu_plan_fini(&g);
		CHECK(!g.nodes[nmul].dead && !count_planned(&g) &&
			      g.nodes[npw].inputs[0] == t3 &&
			      g.nodes[npw].ninputs == 3,
		      "semul: fini did not restore the graph");
		free_activations(&g);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK(!run_graph(&g, ref), "reference run: %s", g.err);
		if (fast[0] && ref[0]) {
			double er = nerr(fast[0], ref[0],
					 mi_tensor_numel(&g.tensors[y]));

			CHECK(er < 1e-5, "semul c%d e%d m%d hw%d n%d t%d r%d: err %g",
			      c, e, m, hw, nb, nthreads, r, er);
		}
		free(fast[0]);
		free(ref[0]);
		fast[0] = ref[0] = NULL;
		free_activations(&g);
	}
	mi_graph_fini(&g);
}

/*
 * Thread splits of direct convs (nchwc.c plan_split):
 *   x -> Conv k1 x k1 stride s (c -> e) + Relu -(t)-> Conv k2 x k2 (e -> m)
 *   -(u)-> MaxPool 2x2 -> y
 * both blocked direct convs (the second a flat 1x1 when k2 = 1), random
 * sizes (several block groups, narrow and wide maps), batch 1-2, 1-3
 * threads, each split named by mi_nc_conv_set_split (groups x units, group-
 * or unit-major; every 4th with the parts taken from the back by one
 * thread) or the planner's own choice.
 */
static void test_split(int it)
{
	struct mi_graph g;
	int nt = 1 + (int)rnd(3), nb = 1 + (int)rnd(2);
	/* e, m: at most a quarter block of pad lanes (blocked) */
	int c = 3 + (int)rnd(40), e = B * (1 + (int)rnd(127 / B)) - (int)rnd(B / 4 + 1);
	int m = B * (1 + (int)rnd(144 / B)) - (int)rnd(B / 4 + 1);
	int hw = 3 + (int)rnd(26), k1 = 1 + 2 * (int)rnd(3), s1 = 1 + (int)rnd(2);
	int k2 = rnd(2) ? 1 : 3, oh, ph, oh2;
	/* every third 1x1 second conv strided (blocked input subsampled
	 * into the workspace, pad 2), as the first one always is (NCHW) */
	int s2 = k2 == 1 && it % 3 == 2 ? 2 : 1;
	int64_t ks[2] = { 2, 2 };
	struct mi_cpu_opts o = { .nthreads = nt, .isa = test_isa };
	int x, t0, t, u, y, n1, n2;
	float *fast[1] = { 0 }, *ref[1] = { 0 };
	char sp[32] = "auto";
	int sg = 0;
	bool gmaj = false, steal = false;

	/* 1x1 s1 convs reading NCHW, and Winograd's shapes (e < 128), are
	 * not blocked */
	if (k1 == 1)
		s1 = 2;
	oh = (hw + 2 * (k1 / 2) - k1) / s1 + 1;
	oh2 = (oh - 1) / s2 + 1;
	ph = oh2 > 1 ? oh2 - 1 : 1;
	if (it % 4) {
		/* a named split (where it fits the conv) */
		sg = 1 + (int)rnd(nt);
		while (nt % sg)
			sg--;
		gmaj = rnd(2);
		steal = it % 4 == 3;
		snprintf(sp, sizeof(sp), "%dx%d%c%s", sg, nt / sg,
			 gmaj ? 'g' : 'u', steal ? "s" : "");
	}
	mi_graph_init(&g);
	g.opset = 17;
	x = tensor(&g, "x", nb, c, hw, hw, MI_TF_INPUT, true);
	t0 = tensor(&g, "t0", nb, e, oh, oh, 0, false);
	t = tensor(&g, "t", nb, e, oh, oh, 0, false);
	u = tensor(&g, "u", nb, m, oh2, oh2, 0, false);
	y = tensor(&g, "y", nb, m, ph, ph, 0, false);
	n1 = conv(&g, x, c, e, k1, s1, 1, t0);
	node(&g, "Relu", 1, (int[]){ t0 }, t);
	n2 = conv(&g, t, e, m, k2, s2, 1, u);
	ks[0] = ks[1] = oh2 > 1 ? 2 : 1;
	mi_node_set_ints(&g.nodes[node(&g, "MaxPool", 1, (int[]){ u }, y)],
			 "kernel_shape", ks, 2);
	set_output(&g, y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	if (sg)
		for (int i = 0; i < 2; i++) {
			int r = mi_nc_conv_set_split(&g.nodes[i ? n2 : n1], sg,
						     nt / sg, gmaj, steal);

			CHECK(!r || r == -EINVAL, "split %s: %d", sp, r);
		}
	CHECK(g.nodes[n1].priv && g.nodes[n2].priv && g.tensors[t].phys_bytes &&
		      g.tensors[u].phys_bytes,
	      "split: chain not blocked (c%d e%d m%d hw%d k%d s%d k%d: %d %d)", c, e,
	      m, hw, k1, s1, k2, !!g.tensors[t].phys_bytes, !!g.tensors[u].phys_bytes);
	/* blocked by the block of the ISA in o.isa, not the CPU's own */
	CHECK(!g.tensors[t].phys_bytes ||
		      g.tensors[t].phys_bytes ==
			      (size_t)nb * cb(e) * B * oh * oh * sizeof(float),
	      "split: t blocked by another ISA's block (%zu bytes)",
	      g.tensors[t].phys_bytes);
	CHECK(!run_graph(&g, fast), "planned run: %s", g.err);
	mi_cpu_plan_fini(&g);
	free_activations(&g);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!run_graph(&g, ref), "reference run: %s", g.err);
	if (fast[0] && ref[0]) {
		double er = nerr(fast[0], ref[0], mi_tensor_numel(&g.tensors[y]));

		CHECK(er < 2e-5,
		      "split %s t%d n%d c%d e%d m%d hw%d k%d s%d k%d s%d: err %g",
		      sp, nt, nb, c, e, m, hw, k1, s1, k2, s2, er);
	}
	free(fast[0]);
	free(ref[0]);
	free_activations(&g);
	mi_graph_fini(&g);
}

/*
 * Strided 1x1 convs on a blocked input, with end pads (the last sample
 * in the padding: the padding copy, not the subsample copy) or without:
 *   x -> Conv3x3 (c -> e) -> Conv1x1 stride 2 pads (0, 0, pe, pe)
 *   (e -> m) -> MaxPool 2x2 -> y
 */
static void test_strided_1x1(int c, int e, int m, int hw, int pe, int nb,
			     int nthreads)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = nthreads, .isa = test_isa };
	int oh = (hw + pe - 1) / 2 + 1;
	int x, t, u, y, n2;
	int64_t ks[2] = { 2, 2 }, pads[4] = { 0, 0, pe, pe };
	float *fast[1] = { 0 }, *ref[1] = { 0 };

	mi_graph_init(&g);
	g.opset = 17;
	x = tensor(&g, "x", nb, c, hw, hw, MI_TF_INPUT, true);
	t = tensor(&g, "t", nb, e, hw, hw, 0, false);
	u = tensor(&g, "u", nb, m, oh, oh, 0, false);
	y = tensor(&g, "y", nb, m, oh - 1, oh - 1, 0, false);
	conv(&g, x, c, e, 3, 1, 1, t);
	n2 = conv(&g, t, e, m, 1, 2, 1, u);
	mi_node_set_ints(&g.nodes[n2], "pads", pads, 4);
	mi_node_set_ints(&g.nodes[node(&g, "MaxPool", 1, (int[]){ u }, y)],
			 "kernel_shape", ks, 2);
	set_output(&g, y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(g.nodes[n2].priv && g.tensors[t].phys_bytes &&
		      g.tensors[u].phys_bytes,
	      "strided 1x1: not blocked");
	CHECK(!run_graph(&g, fast), "planned run: %s", g.err);
	mi_cpu_plan_fini(&g);
	free_activations(&g);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!run_graph(&g, ref), "reference run: %s", g.err);
	if (fast[0] && ref[0]) {
		double er = nerr(fast[0], ref[0], mi_tensor_numel(&g.tensors[y]));

		CHECK(er < 1e-5, "strided 1x1 c%d e%d m%d hw%d pe%d n%d t%d: err %g",
		      c, e, m, hw, pe, nb, nthreads, er);
	}
	free(fast[0]);
	free(ref[0]);
	free_activations(&g);
	mi_graph_fini(&g);
}

/*
 * Winograd's convs in a blocked chain (nchwc.c, the blocked Winograd):
 *   x -> Conv3x3 s2 (c0 -> c) + Relu -(t1)-> Conv3x3 s1 (c -> c)
 *   + Add(t1) + Relu -(v1)-> Conv1x1 (c -> m) -> MaxPool 2x2 s1 -> y
 * with c >= 128 and >= 25 tiles (Winograd's shapes): t1 and v1 must be
 * blocked and the Add / Relu fused; or (nchw_in) x -> the Winograd conv
 * directly (its NCHW input reordered).
 */
static void test_wino(int c0, int c, int m, int hw, int nb, int nthreads,
		      bool nchw_in)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = nthreads, .isa = test_isa };
	int h1 = nchw_in ? hw : (hw + 1) / 2, x, t0, t1, u, v, v1, z, y;
	int nw, nadd, nrelu;
	int64_t ks[2] = { 2, 2 };
	float *fast[1] = { 0 }, *ref[1] = { 0 };

	mi_graph_init(&g);
	g.opset = 17;
	x = tensor(&g, "x", nb, nchw_in ? c : c0, hw, hw, MI_TF_INPUT, true);
	t0 = tensor(&g, "t0", nb, c, h1, h1, 0, false);
	t1 = tensor(&g, "t1", nb, c, h1, h1, 0, false);
	u = tensor(&g, "u", nb, c, h1, h1, 0, false);
	v = tensor(&g, "v", nb, c, h1, h1, 0, false);
	v1 = tensor(&g, "v1", nb, c, h1, h1, 0, false);
	z = tensor(&g, "z", nb, m, h1, h1, 0, false);
	y = tensor(&g, "y", nb, m, h1 - 1, h1 - 1, 0, false);
	if (nchw_in) {
		t1 = x;
	} else {
		conv(&g, x, c0, c, 3, 2, 1, t0);
		node(&g, "Relu", 1, (int[]){ t0 }, t1);
	}
	nw = conv(&g, t1, c, c, 3, 1, 1, u);
	nadd = node(&g, "Add", 2, (int[]){ u, t1 }, v);
	nrelu = node(&g, "Relu", 1, (int[]){ v }, v1);
	conv(&g, v1, c, m, 1, 1, 1, z);
	mi_node_set_ints(&g.nodes[node(&g, "MaxPool", 1, (int[]){ z }, y)],
			 "kernel_shape", ks, 2);
	set_output(&g, y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	for (int round = 0; round < 1; round++) {
		CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK(g.nodes[nw].priv && g.nodes[nadd].dead && g.nodes[nrelu].dead,
		      "wino conv not planned / fused");
		CHECK((g.tensors[v1].phys_bytes == 0) == round &&
			      (nchw_in || (g.tensors[t1].phys_bytes == 0) == round),
		      "wino round %d: t1 blocked %d, v1 blocked %d", round,
		      !!g.tensors[t1].phys_bytes, !!g.tensors[v1].phys_bytes);
		CHECK(!run_graph(&g, fast), "planned run: %s", g.err);
		mi_cpu_plan_fini(&g);
		free_activations(&g);
		CHECK(!mi_graph_toposort(&g), "%s", g.err);
		CHECK(!run_graph(&g, ref), "reference run: %s", g.err);
		if (fast[0] && ref[0]) {
			double er = nerr(fast[0], ref[0],
					 mi_tensor_numel(&g.tensors[y]));

			CHECK(er < 5e-5,
			      "wino chain c%d m%d hw%d n%d t%d nchw_in %d round %d: err %g",
			      c, m, hw, nb, nthreads, nchw_in, round, er);
		}
		free(fast[0]);
		free(ref[0]);
		fast[0] = ref[0] = NULL;
		free_activations(&g);
	}
	mi_graph_fini(&g);
}

/* A Conv feeding only NCHW ops stays off the blocked path. */
static void test_lone_conv(void)
{
	struct mi_graph g;
	struct mi_cpu_opts o = { .nthreads = 1, .isa = test_isa };
	int x, t, y, cv;

	mi_graph_init(&g);
	g.opset = 17;
	x = tensor(&g, "x", 1, 8, 9, 9, MI_TF_INPUT, true);
	t = tensor(&g, "t", 1, 16, 9, 9, 0, false);
	y = tensor(&g, "y", 1, 16, 9, 9, 0, false);
	cv = conv(&g, x, 8, 16, 3, 1, 1, t);
	node(&g, "Softmax", 1, (int[]){ t }, y);
	set_output(&g, y);
	CHECK(!mi_graph_toposort(&g), "%s", g.err);
	CHECK(!mi_cpu_plan(&g, &o), "%s", g.err);
	CHECK(g.nodes[cv].priv, "conv not planned");
	CHECK(!g.tensors[t].phys_bytes, "lone conv output blocked");
	mi_cpu_plan_fini(&g);
	mi_graph_fini(&g);
}

int main(int argc, char **argv)
{
	int it;

	test_isa_arg(argc, argv);
	K = mi_nc_kern_get(test_isa);
	B = K->b;
	printf("test-nchwc: isa=%s block=%d\n", mi_cpu_isa_name(test_isa), B);
	for (it = 0; it < 150; it++)
		conv_case(0, it, 0);
	for (it = 0; it < 100; it++)
		conv_case(1, it, 0);
	for (it = 0; it < 100; it++)
		pool_case();
	for (it = 0; it < 40; it++)
		misc_case();
	act_range_case();
	test_chain(3, 24, 9, 1, false);
	test_chain(17, 40, 14, 2, false);
	test_chain(16, 88, 7, 2, true);
	test_xdw(16, 88, 12, 3, 1, 2, 0, false, false);
	test_xdw(12, 200, 11, 3, 2, 3, 2, true, false);
	test_xdw(16, 40, 9, 5, 1, 2, 1, false, false);
	test_xdw(24, 88, 13, 3, 2, 1, 3, true, false);
	test_xdw(24, 72, 10, 5, 2, 2, 2, false, false);
	test_xdw(32, 136, 15, 3, 1, 3, 4, true, false);
	/* the 1x1 reads NCHW (chain start kept for its depthwise reader) */
	test_xdw(16, 88, 12, 3, 1, 2, 0, false, true);
	test_xdw(12, 200, 11, 3, 2, 3, 2, true, true);
	test_xdw(20, 72, 10, 5, 2, 1, 3, false, true);
	test_concat(16, 2 * B, 3 * B, 1, 9, 2);
	test_concat(24, 4 * B, B, 2, 7, 3);
	test_concat(16, 2 * B, B + B / 2, 1, 8, 2);
	test_semul(16, 40, 24, 8, 2, 2, 0, false);
	test_semul(24, 88, 16, 7, 1, 3, 0, false);
	test_semul(16, 32, 24, 5, 2, 2, 0, false);
	/* two FCs; r a partial block (NCHW between them) or blocked;
	 * weights >= 64 KiB: split over 2-3 threads */
	test_semul(16, 40, 24, 8, 2, 2, 10, false);
	test_semul(8, 300, 40, 6, 1, 3, 4 * B - 3, false);
	test_semul(8, 280, 24, 7, 2, 2, 64, false);
	/* the 1x1 writes NCHW (a mixed int8 file's fp32 project conv) */
	test_semul(16, 40, 24, 8, 2, 2, 0, true);
	test_semul(24, 88, 20, 7, 1, 3, 10, true);
	test_semul(16, 32, 24, 5, 2, 1, 0, true);
	test_lone_conv();
	test_strided_1x1(8, 40, 24, 10, 1, 2, 2);
	test_strided_1x1(8, 24, 40, 9, 0, 1, 3);
	test_strided_1x1(8, 3 * B, 2 * B, 12, 0, 2, 1);
	for (it = 0; it < 120; it++)
		conv_case(0, it, 1);
	for (it = 0; it < 24; it++)
		test_split(it);
	/* another ISA in the same process: the planner takes the ISA of
	 * each plan's options, not a process-wide one */
	if (test_isa != MI_ISA_GENERIC) {
		int isa = test_isa;

		test_isa = MI_ISA_GENERIC;
		K = mi_nc_kern_get(test_isa);
		B = K->b;
		for (it = 0; it < 6; it++)
			test_split(it);
		test_isa = isa;
		K = mi_nc_kern_get(test_isa);
		B = K->b;
	}
	/* input-channel chunks of 1-3 blocks (large groups only by default) */
	for (it = 0; it < 60; it++) {
		case_ksplit = 1 + it % 3;
		conv_case(0, it, 1);
	}
	case_ksplit = 0;
	/* wide rows: the row kernels' whole tiles and tails, every
	 * layout, residual and activation */
	wide = 1;
	for (it = 0; it < 80; it++)
		conv_case(it & 1, it, 0);
	wide = 2;
	for (it = 0; it < 40; it++)
		conv_case(1, it, 0);
	wide = 0;
	for (it = 0; it < 60; it++)
		row1k_case(it);
	for (it = 0; it < 60; it++)
		wino_case(it);
	test_wino(16, 136, 24, 34, 2, 2, false);
	test_wino(8, 128, 40, 34, 1, 3, false);
	test_wino(0, 128, 16, 17, 1, 1, true);
	/* fused expand + depthwise on wide maps, batch 2 */
	xdw_nb = 2;
	test_xdw(16, 40, 37, 3, 2, 1, 0, false, false);
	test_xdw(24, 3 * B + 5, 41, 3, 1, 2, 0, false, true);
	test_xdw(16, 56, 36, 3, 2, 3, 5, false, false);
	xdw_nb = 1;
	printf("test-nchwc: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
