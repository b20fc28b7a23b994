// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution: Add, MaxPool and Concat of quantized
 * tensors.
 */
#include "quant/qplan-impl.h"

/* ---- Add and MaxPool on quantized tensors --------------------------------- */

struct qadd_job {
	const struct qnode *q;
	const uint8_t *a, *b;
	uint8_t *y;
};

static void qadd_range(void *arg, int64_t b, int64_t e)
{
	const struct qadd_job *j = arg;

	mi_qadd(j->a + b, j->b + b, e - b, &j->q->add, j->y + b);
}

int qadd_run(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;
	struct qadd_job j = { q, mi_in(g, n, 0)->data, mi_in(g, n, 1)->data,
			      mi_out(g, n, 0)->data };

	qp_par_rows(q->nthreads, mi_tensor_numel(mi_out(g, n, 0)), qp_px_row(mi_out(g, n, 0), q->px_c4),
		 16 << 10, qadd_range, &j);
	return 0;
}

/* Per-thread row buffer of the int8 MaxPool: whole cache lines, so two
 * threads never write the same line (false sharing). */
#define QPOOL_TMP(w) ((((size_t)(w) + 64) + 63) & ~(size_t)63)

struct qpool_job {
	const struct qnode *q;
	const uint8_t *x;
	uint8_t *y;
};

static void qpool_item(void *arg, int i, int tid)
{
	const struct qpool_job *j = arg;
	const struct mi_qpool_shape *s = &j->q->pool;

	mi_qmaxpool_plane(j->x + (size_t)i * s->h * s->w, s, j->q->pool_s8,
			  (uint8_t *)j->q->sh->ws + (size_t)tid * QPOOL_TMP(s->w),
			  j->y + (size_t)i * s->oh * s->ow);
}

/* C4 layout (in_c4: input and output): one quad plane of 4 channels. */
static void qpool_item_c4(void *arg, int i, int tid)
{
	const struct qpool_job *j = arg;
	const struct mi_qpool_shape *s = &j->q->pool;

	mi_qmaxpool_plane_c4(j->x + (size_t)i * s->h * s->w * 4, s, j->q->pool_s8,
			     (uint8_t *)j->q->sh->ws + (size_t)tid * QPOOL_TMP(4 * s->w),
			     j->y + (size_t)i * s->oh * s->ow * 4);
}

int qpool_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	struct qpool_job j = { n->priv, x->data, mi_out(g, n, 0)->data };

	qp_cur_threads = j.q->nthreads;
	if (j.q->in_c4)
		qp_pool_for((int)(x->dims[0] * x->dims[1] / 4), qpool_item_c4, &j);
	else
		qp_pool_for((int)(x->dims[0] * x->dims[1]), qpool_item, &j);
	return 0;
}

bool qp_same_q(const struct qact *a, const struct qact *b)
{
	return a->scale == b->scale && a->zp == b->zp && a->dtype == b->dtype;
}

/* Rewire a node to read xs[0..nx) and write c->out (Add, MaxPool). */
static void rewire_n(struct mi_graph *g, struct mi_node *n, const int *xs, int nx,
		     const struct chain *c)
{
	struct qnode *q = n->priv;

	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = n->ninputs > 1 ? n->inputs[1] : -1;
	q->orig_out0 = n->outputs[0];
	for (int i = 0; i < nx; i++)
		n->inputs[i] = xs[i];
	if (c->act)
		qp_kill(g, q, c->act);
	if (c->q)
		qp_kill(g, q, c->q);
	n->outputs[0] = c->out;
	g->tensors[c->out].producer = (int)(n - g->nodes);
}

int try_qadd(struct mi_graph *g, struct mi_node *n)
{
	struct mi_node *da, *db;
	struct qact a, b;
	struct chain c;
	struct mi_tensor *y = mi_out(g, n, 0);
	struct qnode *q;

	if (strcmp(n->op_type, "Add") || n->domain[0] || n->ninputs != 2 || n->noutputs != 1)
		return 0;
	da = qp_producer(g, n->inputs[0], "DequantizeLinear");
	db = qp_producer(g, n->inputs[1], "DequantizeLinear");
	if (!da || !db || !qp_act_params(g, da, 0, 1, 2, &a) || !qp_act_params(g, db, 0, 1, 2, &b))
		return qp_skip(n, "inputs are not per-tensor uint8/int8 DequantizeLinear");
	if (!mi_tensor_shape_known(y) || mi_tensor_numel(mi_in(g, n, 0)) != mi_tensor_numel(y) ||
	    mi_tensor_numel(mi_in(g, n, 1)) != mi_tensor_numel(y))
		return qp_skip(n, "broadcasting Add");
	qp_follow_chain(g, n->outputs[0], &c);
	if (!c.q || (c.act && strcmp(c.act->op_type, "Relu")))
		return qp_skip(n, "not followed by [Relu] QuantizeLinear");
	q = qnode_new(qadd_run);
	if (!q)
		return -ENOMEM;
	q->add = (struct mi_qadd_args){
		.sa = a.scale, .sb = b.scale, .sy = c.y.scale,
		.za = a.zp, .zb = b.zp, .zy = c.y.zp,
		.a_s8 = a.dtype == MI_DT_INT8, .b_s8 = b.dtype == MI_DT_INT8,
		.y_s8 = c.y.dtype == MI_DT_INT8, .relu = c.act != NULL,
		.lo = c.y.dtype == MI_DT_INT8 ? -128.0f : 0.0f,
		.hi = c.y.dtype == MI_DT_INT8 ? 127.0f : 255.0f,
	};
	n->priv = q;
	int xs[2] = { a.t, b.t };

	rewire_n(g, n, xs, 2, &c);
	return 0;
}

int try_qpool(struct mi_graph *g, struct mi_node *n)
{
	struct mi_node *dx;
	struct qact a;
	struct chain c;
	struct mi_spatial sp;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	const int64_t *ks;
	int cnt;
	struct qnode *q;

	if (strcmp(n->op_type, "MaxPool") || n->domain[0] || n->noutputs != 1)
		return 0;
	dx = qp_producer(g, n->inputs[0], "DequantizeLinear");
	if (!dx || !qp_act_params(g, dx, 0, 1, 2, &a) || !x || x->ndim != 4 ||
	    !mi_tensor_shape_known(x) || !mi_tensor_shape_known(y))
		return qp_skip(n, "input is not a per-tensor uint8/int8 DequantizeLinear of NCHW");
	qp_follow_chain(g, n->outputs[0], &c);
	if (!c.q || c.act || !qp_same_q(&a, &c.y))
		return qp_skip(n, "not followed by a QuantizeLinear with the input's parameters");
	ks = mi_attr_ints(n, "kernel_shape", &cnt);
	if (!ks || cnt != 2)
		return qp_skip(n, "kernel_shape");
	memset(&sp, 0, sizeof(sp));
	sp.kernel[0] = ks[0];
	sp.kernel[1] = ks[1];
	if (mi_ops_spatial(g, n, &sp, x, 1)) {
		g->err[0] = 0;
		return qp_skip(n, "pooling attributes");
	}
	q = qnode_new(qpool_run);
	if (!q)
		return -ENOMEM;
	q->pool = (struct mi_qpool_shape){
		.h = (int)x->dims[2], .w = (int)x->dims[3], .oh = (int)y->dims[2],
		.ow = (int)y->dims[3], .kh = (int)ks[0], .kw = (int)ks[1],
		.sh = (int)sp.stride[0], .sw = (int)sp.stride[1], .dh = (int)sp.dil[0],
		.dw = (int)sp.dil[1], .pt = (int)sp.pad_begin[0], .pl = (int)sp.pad_begin[1],
	};
	q->pool_s8 = a.dtype == MI_DT_INT8;
	if ((int64_t)QPOOL_TMP(4 * q->pool.w) * 64 > qp_shared_need) /* room for C4 rows */
		qp_shared_need = (int64_t)QPOOL_TMP(4 * q->pool.w) * 64;
	n->priv = q;
	rewire_n(g, n, &a.t, 1, &c);
	return 0;
}

/* ---- Concat of quantized tensors ------------------------------------------- */

/* y = Q(DQ(x)) elementwise (the reference ops' float operations), or a
 * copy when the parameters are equal. */
static void requant_copy(const uint8_t *x, const struct qact *a, const struct qact *y,
			 int64_t n, uint8_t *out)
{
	float buf[1024];

	if (a->scale == y->scale && a->zp == y->zp && a->dtype == y->dtype) {
		memcpy(out, x, n);
		return;
	}
	if (n >= 256) {
		/* 256 possible bytes: requantize them once, then look up */
		uint8_t idx[256], tab[256];

		for (int k = 0; k < 256; k++)
			idx[k] = (uint8_t)k;
		mi_dequantize(idx, a->dtype, 256, a->scale, a->zp, buf);
		mi_quantize_f32(buf, 256, y->scale, y->zp, y->dtype, tab);
		qp_lut8_any(x, tab, n, out);
		return;
	}
	for (int64_t i = 0; i < n; i += 1024) {
		int64_t c = n - i < 1024 ? n - i : 1024;

		mi_dequantize(x + i, a->dtype, c, a->scale, a->zp, buf);
		mi_quantize_f32(buf, c, y->scale, y->zp, y->dtype, out + i);
	}
}

struct qcat_job {
	const struct qcat *c;
	const uint8_t *x[QCAT_MAX];
	int64_t inner[QCAT_MAX], row; /* bytes per input / output per outer index */
	uint8_t *out;
};

/* Output bytes [b, e): the pieces of the inputs they copy, as in order. */
static void qcat_range(void *arg, int64_t b, int64_t e)
{
	const struct qcat_job *j = arg;

	while (b < e) {
		int64_t o = b / j->row, r = b - o * j->row;
		int i = 0;

		while (r >= j->inner[i])
			r -= j->inner[i++];
		int64_t cnt = j->inner[i] - r < e - b ? j->inner[i] - r : e - b;

		requant_copy(j->x[i] + o * j->inner[i] + r, &j->c->in[i], &j->c->y, cnt,
			     j->out + b);
		b += cnt;
	}
}

int qcat_run(struct mi_graph *g, struct mi_node *n)
{
	struct qnode *q = n->priv;
	const struct qcat *c = q->cat;
	struct mi_tensor *y = mi_out(g, n, 0);
	struct qcat_job j = { .c = c, .out = y->data };

	for (int i = 0; i < c->n; i++) {
		struct mi_tensor *x = mi_in(g, n, i);

		j.x[i] = x->data;
		j.inner[i] = mi_ops_prod(x->dims, c->axis, x->ndim);
		j.row += j.inner[i];
	}
	/* split like a byte table (copies and lookups, ~2-3 us per range); each
	 * output byte is the same function of its input byte either way */
	if (j.row > 0)
		qp_par_range(q->nthreads, mi_tensor_numel(y), 32 << 10, qcat_range, &j);
	return 0;
}

int try_qconcat(struct mi_graph *g, struct mi_node *n)
{
	struct chain ch;
	struct qcat *c;
	struct qnode *q;
	struct mi_tensor *y = mi_out(g, n, 0);
	int axis, xs[QCAT_MAX];

	if (strcmp(n->op_type, "Concat") || n->domain[0] || n->noutputs != 1 ||
	    n->ninputs < 1 || n->ninputs > QCAT_MAX || !mi_tensor_shape_known(y))
		return 0;
	axis = (int)mi_attr_int(n, "axis", 0);
	if (axis < 0)
		axis += y->ndim;
	if (axis < 0 || axis >= y->ndim)
		return 0;
	qp_follow_chain(g, n->outputs[0], &ch);
	if (!ch.q || ch.act)
		return qp_skip(n, "not followed by a QuantizeLinear");
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->n = n->ninputs;
	c->axis = axis;
	c->y = ch.y;
	for (int i = 0; i < n->ninputs; i++) {
		struct mi_node *d = qp_producer(g, n->inputs[i], "DequantizeLinear");

		if (!d || !qp_act_params(g, d, 0, 1, 2, &c->in[i]) ||
		    !mi_tensor_shape_known(mi_in(g, n, i))) {
			free(c);
			return qp_skip(n, "inputs are not per-tensor uint8/int8 DequantizeLinear");
		}
		xs[i] = c->in[i].t;
	}
	q = qnode_new(qcat_run);
	if (!q) {
		free(c);
		return -ENOMEM;
	}
	q->cat = c;
	n->priv = q;
	/* rewire all inputs (undo keeps in0/in1; save the rest) */
	q->cat_orig = malloc(n->ninputs * sizeof(int));
	if (!q->cat_orig) {
		n->priv = NULL;
		qnode_free(q);
		return -ENOMEM;
	}
	memcpy(q->cat_orig, n->inputs, n->ninputs * sizeof(int));
	rewire_n(g, n, xs, n->ninputs, &ch);
	return 0;
}
