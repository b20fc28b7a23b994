// SPDX-License-Identifier: MIT
/*
 * Which nodes the blocked-layout pass takes (classification: Conv,
 * depthwise, pooling, GlobalAveragePool, the channel scale Mul, Add,
 * pass-through Concat and lib/quant's Q/DQ nodes) and the weight and
 * bias packing of its convs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ops/ops.h"
#include "cpu/cpu.h"
#include "cpu/cpu_plan.h"
#include "cpu/nchwc.h"
#include "cpu/nchwc_pass.h"

const struct mi_nc_kern *mi_nc_kern_get(int isa)
{
#ifdef __x86_64__
	if (isa == MI_ISA_AVX512)
		return &mi_nc_kern_avx512;
	if (isa == MI_ISA_AVX2)
		return &mi_nc_kern_avx2;
#endif
	(void)isa;
	return &mi_nc_kern_generic;
}

float *mi_nc_pack_weights(int b, int dw, int m, int c, int kh, int kw,
			  const float *w)
{
	int mb = (m + b - 1) / b;
	size_t n = dw ? (size_t)mb * kh * kw * b : (size_t)mb * kh * kw * c * b;
	float *p = mi_cpu_alloc(n * sizeof(float));

	if (!p)
		return NULL;
	memset(p, 0, n * sizeof(float));
	for (int o = 0; o < m; o++)
		for (int ky = 0; ky < kh; ky++)
			for (int kx = 0; kx < kw; kx++) {
				if (dw) {
					p[(((size_t)(o / b) * kh + ky) * kw + kx) * b +
					  o % b] = w[((size_t)o * kh + ky) * kw + kx];
					continue;
				}
				for (int i = 0; i < c; i++)
					p[((((size_t)(o / b) * kh + ky) * kw + kx) *
						   c + i) * b + o % b] =
						w[(((size_t)o * c + i) * kh + ky) * kw + kx];
			}
	return p;
}

float *mi_nc_pack_bias(int b, int m, const float *bias)
{
	size_t n = (size_t)(m + b - 1) / b * b;
	float *p = mi_cpu_alloc(n * sizeof(float));

	if (!p)
		return NULL;
	memset(p, 0, n * sizeof(float));
	if (bias)
		memcpy(p, bias, m * sizeof(float));
	return p;
}

/* ---- classification -------------------------------------------------- */
int32_t *mi_nc_tap_offsets(const struct mi_nc_conv *p)
{
	int64_t nk = (int64_t)p->c * p->kh * p->kw;
	int64_t hw = (int64_t)p->h * p->w;
	int32_t *t;

	if (p->xblk || p->kh * p->kw < 2 || p->sw > 2 || nk > MI_NC_KOFF_MAX ||
	    (int64_t)p->c * hw > INT32_MAX)
		return NULL;
	t = mi_cpu_alloc((size_t)nk * sizeof(*t));
	if (!t)
		return NULL;
	for (int ky = 0; ky < p->kh; ky++)
		for (int kx = 0; kx < p->kw; kx++)
			for (int ic = 0; ic < p->c; ic++)
				t[(ky * p->kw + kx) * p->c + ic] =
					(int32_t)(ic * hw +
						  (int64_t)ky * p->dh * p->w +
						  kx * p->dw);
	return t;
}

static int conv_shape(struct mi_graph *g, struct mi_node *n,
		      struct mi_conv_shape *s)
{
	struct mi_tensor *x = mi_in(g, n, 0), *w = mi_in(g, n, 1);
	struct mi_tensor *b = mi_in(g, n, 2), *y = mi_out(g, n, 0);
	struct mi_spatial sp = { 0 };
	char saved[sizeof(g->err)];
	int err;

	if (!f32_4d(x) || !is_const(w) || w->dtype != MI_DT_FLOAT ||
	    w->ndim != 4 || !f32_4d(y) || n->ninputs > 3)
		return -EOPNOTSUPP;
	if (b && (!is_const(b) || b->dtype != MI_DT_FLOAT ||
		  mi_tensor_numel(b) != w->dims[0]))
		return -EOPNOTSUPP;
	sp.kernel[0] = w->dims[2];
	sp.kernel[1] = w->dims[3];
	memcpy(saved, g->err, sizeof(saved));
	err = mi_ops_spatial(g, n, &sp, x, 0);
	memcpy(g->err, saved, sizeof(saved));
	if (err || sp.nsp != 2)
		return -EOPNOTSUPP;
	*s = (struct mi_conv_shape){
		.n = (int)x->dims[0], .c = (int)x->dims[1],
		.h = (int)x->dims[2], .w = (int)x->dims[3],
		.m = (int)w->dims[0], .kh = (int)w->dims[2],
		.kw = (int)w->dims[3],
		.group = (int)mi_attr_int(n, "group", 1),
		.sh = (int)sp.stride[0], .sw = (int)sp.stride[1],
		.dh = (int)sp.dil[0], .dw = (int)sp.dil[1],
		.pt = (int)sp.pad_begin[0], .pl = (int)sp.pad_begin[1],
		.pb = (int)sp.pad_end[0], .pr = (int)sp.pad_end[1],
		.oh = (int)y->dims[2], .ow = (int)y->dims[3],
	};
	if (s->group < 1 || s->c % s->group || s->m % s->group ||
	    w->dims[1] * s->group != s->c || y->dims[0] != s->n ||
	    y->dims[1] != s->m || sp.out[0] != s->oh || sp.out[1] != s->ow ||
	    s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0 || s->sh < 1 ||
	    s->sw < 1 || s->dh < 1 || s->dw < 1 || s->oh < 1 || s->ow < 1)
		return -EOPNOTSUPP;
	if (s->group > 1 && s->group == s->c && s->m == s->c)
		return NC_DW;
	/* groups > 1: group_merge() says whether the block fits them */
	return NC_CONV;
}

/*
 * A grouped conv (1 < groups, not depthwise) runs as one direct conv per
 * group when the channels and outputs per group are whole blocks of b:
 * group i then reads input blocks [i*cg/b, (i+1)*cg/b) and writes output
 * blocks [i*mg/b, (i+1)*mg/b), and no block mixes two groups (returns 1).
 * Where pairs of groups are whole blocks (8 channels per group with
 * AVX-512's 16), each pair runs as one group of 2*cg inputs whose weights
 * are zero across the two halves (returns 2): twice the MACs, but the
 * direct conv runs 2.5-3x im2col's rate there.  Others (ResNeXt's 4
 * channels per group on AVX2 and AVX-512, odd group counts) stay on
 * im2col (0).
 */
static int group_merge(const struct mi_conv_shape *s, int b)
{
	int cg = s->c / s->group, mg = s->m / s->group;

	if (s->group < 2)
		return 0;
	if (!(cg % b) && !(mg % b))
		return 1;
	if (!(s->group % 2) && !(2 * cg % b) && !(2 * mg % b))
		return 2;
	return 0;
}

float *mi_nc_pack_merged(int b, int m, int mg, int cg, int k, int kh, int kw,
			 const float *w)
{
	const int ci = k * cg;
	const size_t tap = (size_t)kh * kw;
	float *e, *p;

	e = calloc((size_t)m * ci * tap, sizeof(float));
	if (!e)
		return NULL;
	/* output o (group o / mg) reads inputs [sub * cg, (sub + 1) * cg)
	 * of its merged group's k * cg, sub = (o / mg) % k; zeros else */
	for (int o = 0; o < m; o++)
		memcpy(e + ((size_t)o * ci + (size_t)(o / mg % k) * cg) * tap,
		       w + (size_t)o * cg * tap, (size_t)cg * tap * sizeof(float));
	p = mi_nc_pack_weights(b, 0, m, ci, kh, kw, e);
	free(e);
	return p;
}

/* The ISA whose kernel table k is (the pass plans for one ISA). */
static int nc_isa_of(const struct mi_nc_kern *k)
{
	for (int i = MI_ISA_COUNT - 1; i > 0; i--)
		if (mi_nc_kern_get(i) == k)
			return i;
	return MI_ISA_GENERIC;
}

/*
 * Direct convolution vs the NCHW kernels (build/mi-cpu-bench -f nchwc,
 * AVX-512, 1 thread): faster everywhere except (a) Winograd's shapes and
 * (b) KxK convs whose weights per register tile of output blocks
 * (kh*kw*c*ob*B floats, streamed once per row tile) outgrow the L2:
 * 3x3 c=512 on 7x7 ran at 55 GFLOP/s vs im2col's 84, c=256 at 115 vs
 * 106 (590 KiB).
 */
static bool direct_pays(const struct mi_conv_shape *s,
			const struct mi_nc_kern *k)
{
	int64_t mt = s->m < k->ob * k->b ? s->m : k->ob * k->b;

	if (mi_cpu_wino_pays(s, nc_isa_of(k)))
		return false;
	/* narrow maps: tiles across rows reuse each weight vector for a
	 * full register tile (3x3 c=512 on 7x7: 1.9 vs im2col's 3.1 ms) */
	if (s->ow < MI_NC_FLAT_W)
		return true;
	return (int64_t)s->kh * s->kw * s->c * mt * 4 <= (1 << 20);
}

static int pool_shape(struct mi_graph *g, struct mi_node *n,
		      struct mi_pool2d *p)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	struct mi_spatial sp = { 0 };
	char saved[sizeof(g->err)];
	const int64_t *ks;
	int nk = 0, err;

	if (!f32_4d(x) || !f32_4d(y) || n->noutputs != 1)
		return -EOPNOTSUPP;
	ks = mi_attr_ints(n, "kernel_shape", &nk);
	if (!ks || nk != 2 || ks[0] < 1 || ks[1] < 1 || ks[0] > 64 || ks[1] > 64)
		return -EOPNOTSUPP;
	sp.kernel[0] = ks[0];
	sp.kernel[1] = ks[1];
	memcpy(saved, g->err, sizeof(saved));
	err = mi_ops_spatial(g, n, &sp, x, 1);
	memcpy(g->err, saved, sizeof(saved));
	if (err || sp.nsp != 2 || sp.dil[0] != 1 || sp.dil[1] != 1 ||
	    sp.stride[0] != sp.stride[1] || sp.out[0] != y->dims[2] ||
	    sp.out[1] != y->dims[3] || y->dims[0] != x->dims[0] ||
	    y->dims[1] != x->dims[1] || sp.pad_begin[0] < 0 ||
	    sp.pad_begin[1] < 0 || sp.pad_end[0] < 0 || sp.pad_end[1] < 0)
		return -EOPNOTSUPP;
	*p = (struct mi_pool2d){
		.ih = (int)x->dims[2], .iw = (int)x->dims[3],
		.oh = (int)y->dims[2], .ow = (int)y->dims[3],
		.kh = (int)ks[0], .kw = (int)ks[1], .s = (int)sp.stride[0],
		.pt = (int)sp.pad_begin[0], .pl = (int)sp.pad_begin[1],
		.pb = (int)sp.pad_end[0], .pr = (int)sp.pad_end[1],
		.avg = is_op(n, "AveragePool"),
		.include_pad = (int)mi_attr_int(n, "count_include_pad", 0),
	};
	/* a window entirely in the padding has no ONNX max */
	if (!p->avg && (p->pt >= p->kh || p->pl >= p->kw))
		return -EOPNOTSUPP;
	return NC_POOL;
}

/*
 * A channel Concat of 4-D tensors whose channel counts are all multiples
 * of the block is the same bytes in NCHW and in NCHWc (per image, input
 * k's blocks follow the blocks before it): the NCHW Concat kernel (and
 * the in-place Concat of exec.c) serves blocked tensors unchanged, so the
 * node passes the layout through and is not claimed (NC_CAT).
 */
static bool concat_blocks(struct mi_graph *g, struct mi_node *n, int b)
{
	struct mi_tensor *y = mi_out(g, n, 0);
	int64_t axis = mi_attr_int(n, "axis", 0), c = 0;

	if (n->ninputs < 1 || (axis != 1 && axis != -3))
		return false;
	for (int i = 0; i < n->ninputs; i++) {
		struct mi_tensor *x = mi_in(g, n, i);

		if (!f32_4d(x) || x->dims[1] % b || x->dims[0] != y->dims[0] ||
		    x->dims[2] != y->dims[2] || x->dims[3] != y->dims[3])
			return false;
		c += x->dims[1];
	}
	return c == y->dims[1];
}

/* Kind of node n (or NC_NONE); fills f's shape fields. */
int mi_nc_classify(struct mi_graph *g, struct mi_node *n, struct nc_node *f)
{
	struct mi_tensor *y = mi_out(g, n, 0), *a, *b;

	if (!n->dead && n->priv) {
		/* another provider's node (lib/quant's standalone Q / DQ
		 * and int8 convs writing fp32): its layout ops say whether
		 * its fp32 side can be blocked */
		const struct mi_layout_ops *lo = nc_lops(n);
		int k = lo && lo->role && lo->set_blocked ? lo->role(g, n) :
							     MI_LAYOUT_FIXED;

		f->slot2 = -1;
		return k == MI_LAYOUT_PRODUCER ? NC_DQ :
		       k == MI_LAYOUT_CONSUMER ? NC_Q : NC_NONE;
	}
	if (n->dead || n->priv || n->noutputs != 1 || n->domain[0] ||
	    !f32_4d(y) || y->data)
		return NC_NONE;
	f->slot2 = -1;
	if (is_op(n, "Conv")) {
		struct mi_conv_shape s;
		int kind = conv_shape(g, n, &s), gd;

		if (kind < 0)
			return NC_NONE;
		/* a plan naming a dense kernel for a grouped conv or the
		 * grouped one for a dense conv: the rules choose, and the
		 * plan's read-back names the node and what it runs */
		if (kind == NC_CONV && f->want_wgo >= 0 &&
		    (s.group > 1) != (f->want_wgo == 2))
			f->want_wgo = -1;
		if (kind == NC_CONV && s.group > 1) {
			/* the grouped direct conv, or im2col (NCHW) */
			f->gk = group_merge(&s, f->k->b);
			if (!f->gk)
				return NC_NONE;
			f->grp = s.group / f->gk;
		} else if (kind == NC_CONV && f->want_wgo == 1) {
			f->wgo = 1;	/* a plan names the blocked Winograd */
		} else if (kind != NC_CONV && f->want_wgo >= 0) {
			return NC_NONE;	/* named a conv variant */
		} else if (kind == NC_CONV && f->want_wgo < 0 &&
			   !direct_pays(&s, f->k)) {
			/* Winograd's shapes: the blocked Winograd */
			if (!mi_cpu_wino_pays(&s, nc_isa_of(f->k)))
				return NC_NONE;
			f->wgo = 1;
		}
		/* grouped: one group's conv (nchwc_pass.h) */
		gd = f->gk ? f->grp : 1;
		f->p = (struct mi_nc_conv){
			.c = s.c / gd, .h = s.h, .w = s.w, .m = s.m / gd,
			.oh = s.oh,
			.ow = s.ow, .kh = s.kh, .kw = s.kw, .sh = s.sh,
			.sw = s.sw, .dh = s.dh, .dw = s.dw, .pt = s.pt,
			.pl = s.pl,
		};
		if (f->wgo && !mi_ncw_supports(&f->p))
			return NC_NONE;
		f->nb = s.n;
		f->c = s.c;
		f->m = s.m;
		return kind;
	}
	if (is_op(n, "Concat"))
		return concat_blocks(g, n, f->k->b) ? NC_CAT : NC_NONE;
	a = mi_in(g, n, 0);
	if (!f32_4d(a))
		return NC_NONE;
	f->nb = (int)a->dims[0];
	f->c = f->m = (int)a->dims[1];
	f->hw = a->dims[2] * a->dims[3];
	f->ohw = y->dims[2] * y->dims[3];
	if (is_op(n, "GlobalAveragePool"))
		return y->dims[2] == 1 && y->dims[3] == 1 ? NC_GAP : NC_NONE;
	if (is_op(n, "MaxPool") || is_op(n, "AveragePool"))
		return pool_shape(g, n, &f->pool) < 0 ? NC_NONE : NC_POOL;
	if (n->ninputs != 2 || !f32_4d(b = mi_in(g, n, 1)))
		return NC_NONE;
	if (is_op(n, "Add"))
		return same_shape(a, y) && same_shape(b, y) ? NC_ADD : NC_NONE;
	if (is_op(n, "Mul")) {
		int xs = same_shape(a, y) ? 0 : 1;
		struct mi_tensor *x = xs ? b : a, *s = xs ? a : b;

		if (!same_shape(x, y) || s->dims[0] != x->dims[0] ||
		    s->dims[1] != x->dims[1] || s->dims[2] != 1 ||
		    s->dims[3] != 1 || f->ohw < 2)
			return NC_NONE;
		f->hw = f->ohw;
		f->slot2 = 1 - xs;
		return NC_MUL;
	}
	return NC_NONE;
}

int mi_cpu_nchwc_conv_variants(struct mi_graph *g, struct mi_node *n,
			       int isa, const char **names, int max)
{
	struct mi_conv_shape s;
	struct mi_nc_conv p;
	int k = 0;

	if (n->dead || !is_op(n, "Conv") || conv_shape(g, n, &s) != NC_CONV)
		return 0;
	if (s.group > 1) {
		if (!group_merge(&s, mi_nc_kern_get(isa)->b))
			return 0;
		if (max > 0)
			names[0] = MI_NC_VARIANT_GROUP;
		return 1;
	}
	if (k < max)
		names[k] = MI_NC_VARIANT_DIRECT;
	k++;
	p = (struct mi_nc_conv){
		.c = s.c, .h = s.h, .w = s.w, .m = s.m, .oh = s.oh, .ow = s.ow,
		.kh = s.kh, .kw = s.kw, .sh = s.sh, .sw = s.sw, .dh = s.dh,
		.dw = s.dw, .pt = s.pt, .pl = s.pl,
	};
	if (mi_ncw_supports(&p)) {
		if (k < max)
			names[k] = MI_NC_VARIANT_WINO;
		k++;
	}
	return k;
}
