// SPDX-License-Identifier: MIT
/*
 * The fingerprint database as a source of predictor measurements
 * (Documentation/predict.rst, "Feeding the fingerprint database in").
 *
 * Each measured micro-benchmark row (lib/fingerprint) becomes the node the
 * predictor would see for the same op in a model: op class, MACs (or
 * element work), input / weight / output bytes, kernel, stride, groups,
 * channels, output size, precision and variant.  A device is calibrated
 * from its rows (per point the variant a plan would run: the fastest
 * that is not the reference kernel): up to MI_PRED_REF_MAX of them,
 * spread over the op
 * classes, give its calibration embedding (mi_pred_embed), all of them
 * its per-class bias (mi_pred_refine); the fastest host <-> device
 * transfer gives its link bandwidth.  Rows that fell back or are stale
 * are not used.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "device/device.h"
#include "fingerprint/fingerprint.h"
#include "predict/predict.h"

static double elem_size(const char *dtype)
{
	if (!strcmp(dtype, "int8") || !strcmp(dtype, "uint8"))
		return 1;
	if (!strcmp(dtype, "int16"))
		return 2;
	return 4;
}

int mi_pred_fp_node(struct mi_predictor *p, const struct mi_fp_sample *s,
		    struct mi_pred_node *n)
{
	const int64_t *q = s->p;
	double es = elem_size(s->dtype);

	memset(n, 0, sizeof(*n));
	n->variant = p ? mi_pred_variant(p, s->variant, false) : -1;
	n->int8 = es < 4;
	n->threads = s->threads > 0 ? s->threads : 1;
	n->kh = n->kw = n->stride = n->groups = 1;
	switch (s->family) {
	case MI_FP_CONV:
	case MI_FP_DWCONV: {
		/* n, cin, h, w, cout, k, stride, groups; "same" padding */
		int64_t k = q[5] > 0 ? q[5] : 1, st = q[6] > 0 ? q[6] : 1;
		int64_t g = q[7] > 0 ? q[7] : 1;
		double oh = (double)((q[2] + 2 * (k / 2) - k) / st + 1);
		double ow = (double)((q[3] + 2 * (k / 2) - k) / st + 1);

		n->cls = g > 1 ? MI_PC_DWCONV : k == 1 ? MI_PC_CONV1X1 :
							 MI_PC_CONV;
		n->kh = n->kw = (int)k;
		n->stride = (int)st;
		n->groups = (int)g;
		n->macs = s->work;
		n->in_bytes = es * q[0] * q[1] * q[2] * q[3];
		n->w_bytes = es * q[4] * (q[1] / g) * k * k;
		n->out_bytes = es * q[0] * q[4] * oh * ow;
		n->cin = (double)q[1];
		n->cout = (double)q[4];
		n->out_hw = oh * ow;
		break;
	}
	case MI_FP_GEMM:
		/* m, k, n */
		n->cls = MI_PC_GEMM;
		n->macs = s->work;
		n->in_bytes = es * q[0] * q[1];
		n->w_bytes = es * q[1] * q[2];
		n->out_bytes = es * q[0] * q[2];
		n->cin = (double)q[1];
		n->cout = (double)q[2];
		n->out_hw = (double)q[0];
		break;
	case MI_FP_POOL: {
		/* n, c, h, w, k (0: global), stride; pads k / 2 */
		int64_t k = q[4], st = q[5] > 0 ? q[5] : 1;
		double oh = k ? (double)((q[2] + 2 * (k / 2) - k) / st + 1) : 1;
		double ow = k ? (double)((q[3] + 2 * (k / 2) - k) / st + 1) : 1;

		n->cls = MI_PC_POOL;
		n->kh = n->kw = k ? (int)k : 1;
		n->stride = (int)st;
		n->in_bytes = es * q[0] * q[1] * q[2] * q[3];
		n->out_bytes = es * q[0] * q[1] * oh * ow;
		n->macs = k ? (double)q[0] * q[1] * oh * ow * k * k :
			      (double)q[0] * q[1] * q[2] * q[3];
		n->cin = n->cout = (double)q[1];
		n->out_hw = oh * ow;
		break;
	}
	case MI_FP_ELTWISE:
	case MI_FP_QUANT:
		/* elements; work is the bytes moved (inputs + output) */
		n->cls = s->family == MI_FP_ELTWISE ? MI_PC_ELTWISE :
						      MI_PC_DATA;
		n->macs = (double)q[0];
		n->out_bytes = es * q[0];
		n->in_bytes = s->work > n->out_bytes ? s->work - n->out_bytes :
						       n->out_bytes;
		break;
	case MI_FP_REORDER: {
		double e = q[1] ? (double)q[0] * q[1] * q[2] * q[3] :
				  (double)q[0];

		n->cls = MI_PC_DATA;
		n->macs = e;
		n->in_bytes = n->out_bytes = s->work > 0 ? s->work / 2 : es * e;
		break;
	}
	default:
		return -EINVAL;	/* transfers are not nodes */
	}
	return 0;
}

static bool usable(const struct mi_fp_sample *s, int threads)
{
	return !s->fell_back && !s->stale && s->median_ns > 0 &&
	       (threads <= 0 || s->threads == threads);
}

static bool same_point(const struct mi_fp_sample *a,
		       const struct mi_fp_sample *b)
{
	return a->family == b->family && a->threads == b->threads &&
	       !strcmp(a->op, b->op) && !strcmp(a->dtype, b->dtype) &&
	       !strcmp(a->layout, b->layout) &&
	       !memcmp(a->p, b->p, sizeof(a->p));
}

/*
 * Of the variants measured at one point, the one a plan would run: the
 * fastest that is not the reference kernel (the reference only where it
 * is all there is).  The per-class bias is not per variant, so mixing a
 * 30x slower reference row in would skew it.
 */
static bool chosen(const struct mi_fp_sample *s, int n, int i, int threads)
{
	bool ref = !strcmp(s[i].variant, "ref");

	for (int j = 0; j < n; j++) {
		bool jref;

		if (j == i || !usable(&s[j], threads) ||
		    !same_point(&s[i], &s[j]))
			continue;
		jref = !strcmp(s[j].variant, "ref");
		if (ref && !jref)
			return false;
		if (ref == jref && (s[j].median_ns < s[i].median_ns ||
				    (s[j].median_ns == s[i].median_ns && j < i)))
			return false;
	}
	return true;
}

int mi_pred_dev_from_fp(struct mi_predictor *p, struct mi_fp_db *db,
			struct mi_dev *d, int threads, struct mi_pred_dev *pd)
{
	struct mi_pred_node *nodes = NULL, ref[MI_PRED_REF_MAX];
	double *ns = NULL, ref_ns[MI_PRED_REF_MAX], link = 0;
	struct mi_fp_sample *s = NULL;
	bool *taken = NULL;
	int n, k = 0, nref = 0, err = 0;

	n = mi_fp_lookup(db, d, -1, NULL, NULL, NULL, 0);
	if (n < 0)
		return n;
	s = calloc(n ? n : 1, sizeof(*s));
	nodes = calloc(n ? n : 1, sizeof(*nodes));
	ns = calloc(n ? n : 1, sizeof(*ns));
	taken = calloc(n ? n : 1, sizeof(*taken));
	if (!s || !nodes || !ns || !taken) {
		err = mi_set_error(-ENOMEM, "fingerprint rows: out of memory");
		goto out;
	}
	n = mi_fp_lookup(db, d, -1, NULL, NULL, s, n);
	if (n < 0) {
		err = n;
		goto out;
	}
	/* a thread count the fingerprint lacks: take what it has */
	for (int i = 0; i < n && threads > 0; i++)
		if (usable(&s[i], threads))
			goto have_threads;
	threads = 0;
have_threads:
	for (int i = 0; i < n; i++) {
		if (!usable(&s[i], s[i].family == MI_FP_TRANSFER ? 0 : threads))
			continue;
		if (s[i].family == MI_FP_TRANSFER) {
			if (s[i].rate > link)
				link = s[i].rate;
			continue;
		}
		if (!chosen(s, n, i, threads) ||
		    mi_pred_fp_node(p, &s[i], &nodes[k]))
			continue;
		ns[k++] = s[i].median_ns;
	}
	if (!k) {
		err = mi_set_error(-ENOENT,
				   "%s: no usable fingerprint rows (all fell "
				   "back or stale; run metainfer fingerprint)",
				   d->name);
		goto out;
	}
	/* reference points: round robin over the classes, in row order */
	while (nref < MI_PRED_REF_MAX) {
		int before = nref;

		for (int c = 0; c < MI_PC_COUNT && nref < MI_PRED_REF_MAX;
		     c++)
			for (int i = 0; i < k; i++)
				if (!taken[i] && nodes[i].cls == c) {
					taken[i] = true;
					ref[nref] = nodes[i];
					ref_ns[nref++] = ns[i];
					break;
				}
		if (nref == before)
			break;
	}
	if (link > 0 && d->kind != MI_DEV_CPU)
		pd->caps.link_bytes_per_s = link;
	mi_pred_embed(pd, ref, ref_ns, nref);
	memset(pd->bias_sum, 0, sizeof(pd->bias_sum));
	memset(pd->bias_n, 0, sizeof(pd->bias_n));
	for (int i = 0; i < k; i++)
		mi_pred_refine(p, pd, &nodes[i], ns[i]);
	err = k;
out:
	free(s);
	free(nodes);
	free(ns);
	free(taken);
	return err;
}
