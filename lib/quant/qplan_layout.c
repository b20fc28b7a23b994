// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution: layout planning between int8 nodes
 * (C4 tensors, channel splits).
 */
#include "debug.h"
#include "quant/qplan-impl.h"

/*
 * int8 conv -> int8 conv through a tensor nobody else reads: the producer
 * writes it in C4 layout and the consumer skips its reorder pass (a 1x1
 * consumer reads it directly).
 */
/* p is an int8 conv that can write its output in C4 layout. */
static bool c4_writer(const struct mi_node *p)
{
	const struct qnode *qp = p->priv;

	return qp->is_conv && (qp->ep.mode == MI_QOUT_U8 || qp->ep.mode == MI_QOUT_S8) &&
	       !(qp->cv.s.oc % 4) && (qp->cv.depthwise || !((qp->cv.s.oc / qp->cv.s.group) % 4));
}

/*
 * p, a standalone QuantizeLinear, reads the output of an fp32 Conv (not
 * lib/quant's), which the NCHWc pass runs blocked: the Q then writes C4
 * from blocked floats by 32-bit moves (qdq_q4), as cheap as its planar
 * write.  An int8 depthwise conv may read such a Q's C4 bytes: otherwise
 * the Q writes planar bytes, which it reads from planar floats, and the
 * fp32 conv writing them ends its blocked chain, taking the chain's
 * earlier convs, residual Adds and fused depthwise convs back to NCHW
 * (MobileNetV2 min_cosine features.2-3).
 */
static bool q_of_fp32_conv(struct mi_graph *g, const struct mi_node *p)
{
	const struct qnode *qp = p->priv;
	int pi;

	if (p->dead || !qnode_is(p) || !qdq_like(qp) || qp->qdq_deq)
		return false;
	pi = g->tensors[p->inputs[0]].producer;
	/* through the activations the NCHWc pass fuses into the conv */
	for (int hop = 0; hop < 3 && pi >= 0; hop++) {
		struct mi_node *a = &g->nodes[pi];
		float lo, hi;
		int si;

		if (a->dead || qnode_is(a) || a->domain[0])
			return false;
		if (!strcmp(a->op_type, "Conv"))
			return true;
		if (!strcmp(a->op_type, "Mul") && a->ninputs == 2) { /* x * Sigmoid(x) */
			for (int k = 0; k < 2; k++) {
				si = g->tensors[a->inputs[k]].producer;
				if (si >= 0 && !strcmp(g->nodes[si].op_type, "Sigmoid") &&
				    g->nodes[si].inputs[0] == a->inputs[1 - k])
					break;
				si = -1;
			}
			if (si < 0)
				return false;
			pi = g->tensors[g->nodes[si].inputs[0]].producer;
			continue;
		}
		if (a->ninputs < 1 || mi_cpu_act_of(g, a, &lo, &hi) <= 0)
			return false;
		pi = g->tensors[a->inputs[0]].producer;
	}
	return false;
}

/* Every reader of dequantizing node n's output is an fp32 Conv (its data
 * input), which the NCHWc pass runs blocked. */
static bool qdq_convs_read(struct mi_graph *g, const struct mi_node *n)
{
	const struct qnode *q = n->priv;
	int uses = 0;

	if (!qnode_is(n) || !qdq_like(q) || !q->qdq_deq)
		return false;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *c = &g->nodes[i];

		for (int k = 0; k < c->ninputs && !c->dead; k++) {
			if (c->inputs[k] != n->outputs[0])
				continue;
			if (k || qnode_is(c) || c->domain[0] || strcmp(c->op_type, "Conv"))
				return false;
			uses++;
		}
	}
	return uses > 0;
}

/* c, an int8 conv, can read its input (t) in C4 layout: a dense conv, or
 * (AVX2) a depthwise conv that writes C4 too (ok: the tensors in C4) and
 * reads an int8 conv's output (conv_in; a QuantizeLinear writing C4 from
 * planar fp32 costs more than the depthwise conv saves) or a Q of an fp32
 * conv (q_of_fp32_conv). */
static bool c4_reader(const struct mi_node *c, int t, const bool *ok, bool conv_in)
{
	const struct qnode *qc = c->priv;

	if (!qc->is_conv || c->ninputs != 1 || c->inputs[0] != t)
		return false;
	if (qc->cv.depthwise)
		return conv_in && ok[c->outputs[0]] && mi_qconv_dw_c4(&qc->cv, &qc->ep);
	return !((qc->cv.s.c / qc->cv.s.group) % 4);
}

/*
 * An int8 conv's output read only by DequantizeLinear nodes whose floats
 * go to nodes that read planar floats only (not the NCHWc pass's: ReduceMean,
 * Flatten, Gemm, ...; ShuffleNetV2's conv5 -> DQ -> ReduceMean): from C4
 * the DQ transposes (mi_dequantize_c4, 0.041 ms for 1024x7x7), from planes
 * it is one AVX2 pass (0.005 ms), and the conv writes planes as fast.
 */
static bool dq_planar_reader(struct mi_graph *g, const struct mi_node *d)
{
	static const char *const ops[] = { "ReduceMean", "ReduceMax", "ReduceSum", "Flatten",
					   "Reshape", "Gemm", "MatMul", "Transpose", "Squeeze",
					   "Softmax", NULL };
	const struct qnode *q = d->priv;
	int uses = 0;

	if (!qnode_is(d) || !qdq_like(q) || !q->qdq_deq || d->noutputs != 1 ||
	    (g->tensors[d->outputs[0]].flags & MI_TF_OUTPUT))
		return false;
	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *c = &g->nodes[i];
		bool known = false;

		for (int k = 0; k < c->ninputs && !c->dead; k++) {
			if (c->inputs[k] != d->outputs[0])
				continue;
			if (qnode_is(c) || c->domain[0])
				return false;
			for (int o = 0; ops[o] && !known; o++)
				known = !strcmp(c->op_type, ops[o]);
			if (!known)
				return false;
			uses++;
		}
	}
	return uses > 0;
}

/* How a node can take part in the C4 layout: a conv (writer and/or reader),
 * or a node indifferent to the layout as long as all its quantized inputs
 * and its output share it: int8 Add of equal shapes, byte table, MaxPool
 * (mi_qmaxpool_plane_c4), channel Concat (each input a contiguous block of
 * every image in both layouts
 * when channel counts are multiples of 4). */
enum { C4_NONE, C4_CONV, C4_SAME, C4_QDQ, C4_READ, C4_WRITE };

/* GlobalAveragePool planes apart per thread: at most 64 threads' 16 planes */
#define QGAP_C4_MAX 4096

/* An SE gate Mul whose output an int8 conv reads in C4 layout. */
static bool se_c4_ok(struct mi_graph *g, struct mi_node *p)
{
	struct qnode *qp = p->priv, *qc;
	struct mi_node *c;
	int ci;

	if (p->dead || !qnode_is(p) || qp->hdr.run != qse_run ||
	    mi_out(g, p, 0)->dims[1] % 4 || qp_kept(mi_out(g, p, 0)))
		return false;
	ci = mi_graph_sole_consumer(g, p->outputs[0]);
	if (ci < 0)
		return false;
	c = &g->nodes[ci];
	qc = c->priv;
	return qnode_is(c) && qc->is_conv && c->inputs[0] == p->outputs[0] &&
	       !qc->cv.depthwise && !((qc->cv.s.c / qc->cv.s.group) % 4);
}

static int c4_role(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;

	if (n->dead || !qnode_is(n))
		return C4_NONE;
	if (q->is_conv)
		return C4_CONV;
	/* a standalone 4-D Q writes, a DQ reads, either layout */
	if (qdq_like(q))
		return C4_QDQ;
	/* moves on bytes: read planes, may write C4 */
	if (q->hdr.run == qmv_run)
		return qmv_c4_writer(n) ? C4_WRITE : C4_NONE;
	if (q->hdr.run == qadd_run) {
		const struct mi_tensor *y = mi_out(g, n, 0);

		for (int k = 0; k < n->ninputs; k++) {
			const struct mi_tensor *x = mi_in(g, n, k);

			if (x->ndim != y->ndim || memcmp(x->dims, y->dims, y->ndim * sizeof(y->dims[0])))
				return C4_NONE;
		}
		return C4_SAME;
	}
	if ((q->hdr.run == qlut_run && q->lut8) || (q->hdr.run == qcat_run && q->cat->axis == 1) ||
	    q->hdr.run == qpool_run)
		return C4_SAME;
	/* reads input 0 in C4, writes planes (the SE Mul: C4 for its conv) */
	if (((q->hdr.run == qgap_run && q->gap_hw <= QGAP_C4_MAX) ||
			  (q->hdr.run == qse_run && se_c4_ok(g, n))))
		return C4_READ;
	return C4_NONE;
}

/*
 * Which int8 activations are stored in C4 layout: the largest set of 4-D
 * tensors (channels a multiple of 4, not graph outputs nor device job
 * borders: qp_kept) whose producer writes C4 and whose readers all read
 * it, where a layout-indifferent node keeps its inputs and output in one
 * layout.  Found by removing tensors that break a rule until none does.
 */
void qp_plan_c4_tensors(struct mi_graph *g)
{
	int nt = g->ntensors;
	bool *ok = calloc(nt, sizeof(bool));
	int *prod = malloc(nt * sizeof(int));
	bool changed = true;

	if (!ok || !prod) {
		free(ok);
		free(prod);
		return;
	}
	for (int t = 0; t < nt; t++) {
		const struct mi_tensor *x = &g->tensors[t];

		prod[t] = -1;
		ok[t] = x->ndim == 4 && mi_tensor_shape_known(x) && !(x->dims[1] % 4) &&
			!qp_kept(x) &&
			(x->dtype == MI_DT_UINT8 || x->dtype == MI_DT_INT8);
	}
	for (int i = 0; i < g->nnodes; i++)
		if (!g->nodes[i].dead && c4_role(g, &g->nodes[i]) != C4_NONE &&
		    c4_role(g, &g->nodes[i]) != C4_READ)
			prod[g->nodes[i].outputs[0]] = i;
	for (int t = 0; t < nt; t++)
		if (ok[t] && (prod[t] < 0 || (c4_role(g, &g->nodes[prod[t]]) == C4_CONV &&
					      !c4_writer(&g->nodes[prod[t]]))))
			ok[t] = false;
	/* a Q read only by DQs: nothing gains from C4 there, unless both
	 * fp32 sides are blocked chains (q_of_fp32_conv, qdq_convs_read):
	 * C4 <-> blocked are 32-bit moves, planar <-> blocked byte
	 * transposes, and a planar Q ends its producer's chain */
	for (int t = 0; t < nt; t++) {
		bool other = false, blk;

		if (!ok[t] || c4_role(g, &g->nodes[prod[t]]) != C4_QDQ)
			continue;
		blk = q_of_fp32_conv(g, &g->nodes[prod[t]]);
		for (int i = 0; i < g->nnodes && !other; i++) {
			struct mi_node *n = &g->nodes[i];

			for (int k = 0; k < n->ninputs && !n->dead; k++)
				if (n->inputs[k] == t && c4_role(g, n) != C4_QDQ)
					other = true;
				else if (n->inputs[k] == t && blk)
					blk = qdq_convs_read(g, n);
		}
		ok[t] = other || blk;
	}
	for (int t = 0; t < nt; t++) {
		bool dq_only = true;
		int uses = 0;

		if (!ok[t] || c4_role(g, &g->nodes[prod[t]]) != C4_CONV)
			continue;
		for (int i = 0; i < g->nnodes && dq_only; i++) {
			struct mi_node *n = &g->nodes[i];

			for (int k = 0; k < n->ninputs && !n->dead; k++)
				if (n->inputs[k] == t) {
					dq_only &= dq_planar_reader(g, n);
					uses++;
				}
		}
		if (dq_only && uses)
			ok[t] = false;
	}
	while (changed) {
		changed = false;
		for (int i = 0; i < g->nnodes; i++) {
			struct mi_node *n = &g->nodes[i];
			int role = c4_role(g, n);
			bool all = role == C4_SAME && ok[n->outputs[0]];

			if (n->dead)
				continue;
			for (int k = 0; k < n->ninputs; k++) {
				int t = n->inputs[k];
				bool conv_in = prod[t] >= 0 &&
					       (c4_role(g, &g->nodes[prod[t]]) == C4_CONV ||
						q_of_fp32_conv(g, &g->nodes[prod[t]]));

				if (!ok[t] && role == C4_SAME)
					all = false;
				if (ok[t] && (role == C4_NONE || role == C4_WRITE || (role == C4_READ && k) ||
					      (role == C4_CONV && !c4_reader(n, t, ok, conv_in)))) {
					ok[t] = false; /* a reader that needs the planar layout */
					changed = true;
				}
			}
			if (role != C4_SAME || all)
				continue;
			for (int k = 0; k < n->ninputs; k++)
				changed |= ok[n->inputs[k]];
			changed |= ok[n->outputs[0]];
			for (int k = 0; k < n->ninputs; k++)
				ok[n->inputs[k]] = false;
			ok[n->outputs[0]] = false;
		}
	}
	int nc4 = 0, nmvc4 = 0;

	for (int t = 0; t < nt; t++)
		nc4 += ok[t];
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];
		struct qnode *q = n->priv;

		if (n->dead || !qnode_is(n))
			continue;
		if (q->hdr.run == qpool_run && ok[n->outputs[0]])
			q->in_c4 = true; /* and writes C4 */
		if (c4_role(g, n) == C4_READ && ok[n->inputs[0]]) {
			q->se_in_c4 = true;
			if (q->hdr.run == qgap_run &&
			    (int64_t)QGAP_PLANES * q->gap_hw * 64 > qp_shared_need)
				qp_shared_need = (int64_t)QGAP_PLANES * q->gap_hw * 64;
		}
		if (c4_role(g, n) == C4_SAME)
			q->px_c4 = ok[n->outputs[0]];
		if (qdq_like(q))
			q->qdq_c4 = ok[n->inputs[0]] || ok[n->outputs[0]];
		if (c4_role(g, n) == C4_WRITE && ok[n->outputs[0]]) {
			q->mv->out[0].c4 = true;
			nmvc4++;
		}
		if (c4_role(g, n) != C4_CONV)
			continue;
		if (ok[n->outputs[0]])
			q->ep.out_c4 = true;
		if (ok[n->inputs[0]])
			q->in_c4 = true;
	}
	if (mi_debug("quant"))
		fprintf(stderr, "metainfer: int8: %d activations in C4 layout (%d written by moves)\n",
			nc4, nmvc4);
	free(ok);
	free(prod);
}

void qp_plan_c4(struct mi_graph *g)
{
	qp_plan_c4_tensors(g);
	/* SE gate Muls feeding an int8 conv (elementwise: any layout) */
	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *p = &g->nodes[i];

		if (!se_c4_ok(g, p))
			continue;
		((struct qnode *)p->priv)->se_c4 = true;
		((struct qnode *)g->nodes[mi_graph_sole_consumer(g, p->outputs[0])].priv)->in_c4 = true;
	}
}

/*
 * Readers of tensor t that split their work by channels on the threads
 * (depth 0: also through one byte table): int8 depthwise convs on maps
 * of fewer than 32 pixel vectors with 4+ channel quads per thread
 * (dwt_run), reading t planar.  A table keeps its layout; its planes
 * are shorter than 128 bytes per thread, so qp_par_rows cuts the tensor in
 * flat ranges, i.e. channel ranges too.
 */
static bool chan_readers(struct mi_graph *g, int t, int depth)
{
	int nr = 0;

	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];
		const struct qnode *q = n->priv;
		bool reads = false;

		for (int k = 0; k < n->ninputs && !n->dead; k++)
			reads |= n->inputs[k] == t;
		if (!reads)
			continue;
		nr++;
		if (!qnode_is(n))
			return false;
		if (q->hdr.run == qlut_run && q->lut8 && depth == 0 && !q->px_c4) {
			const struct mi_tensor *y = mi_out(g, n, 0);

			if (y->ndim != 4 || y->dims[2] * y->dims[3] >= 128 * q->nthreads ||
			    !chan_readers(g, n->outputs[0], 1))
				return false;
			continue;
		}
		if (!q->is_conv || !q->cv.depthwise || q->in_c4 || n->inputs[0] != t ||
		    (q->cv.s.oh * q->cv.s.ow + 15) / 16 >= 32 || q->cv.s.c < 16 * q->nthreads)
			return false;
	}
	return nr > 0;
}

/*
 * A 1x1 conv reading its C4 input in place, on a small map, whose output
 * only channel-split readers take: with MI_QCONV_CHAN each thread computes
 * its chunk of output channels over the whole map, so the depthwise conv
 * after it reads the planes its own core wrote (split by pixels, half of
 * them crossed cores: ~10-40 ns per cache line on the benchmark VM).
 */
void qp_plan_chan(struct mi_graph *g)
{
	int nchan = 0;

	for (int i = 0; i < g->nnodes; i++) {
		struct mi_node *n = &g->nodes[i];
		struct qnode *q = n->priv;

		if (n->dead || !qnode_is(n) || !q->is_conv || q->cv.depthwise ||
		    !q->in_c4 || !q->cv.direct1x1 || q->ep.out_c4 || q->nthreads < 2 ||
		    q->cv.s.oh * q->cv.s.ow >= 256)
			continue;
		q->chan = chan_readers(g, n->outputs[0], 0);
		nchan += q->chan;
	}
	if (nchan && mi_debug("quant"))
		fprintf(stderr, "metainfer: int8: %d convs split by output channels\n", nchan);
}

/* DequantizeLinear nodes nobody reads any more (every consumer now takes
 * the quantized tensor): dead, undone with the node that bypassed them. */
