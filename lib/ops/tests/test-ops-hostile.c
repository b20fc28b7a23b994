// SPDX-License-Identifier: MIT
/*
 * Hostile-input test for every reference operator: random input dtypes,
 * ranks and shapes (with data), random subsets of attributes with hostile
 * values (negative, zero, huge, wrong lengths, wrong types, bad strings).
 * For each case infer() must either succeed or fail with a non-empty
 * one-line error; when it succeeds with a modest output size the outputs
 * are allocated and run() is called.  Built with ASan/UBSan, so any
 * out-of-bounds access, overflow UB or crash fails the test.
 *
 *   test-ops-hostile [iterations-per-op] [seed]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "ops/ops.h"

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int64_t rint_(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static const int dtypes[] = { MI_DT_FLOAT, MI_DT_FLOAT, MI_DT_FLOAT,
			      MI_DT_INT64, MI_DT_INT64, MI_DT_INT32,
			      MI_DT_BOOL,  MI_DT_UINT8, MI_DT_DOUBLE,
			      MI_DT_FLOAT16, MI_DT_INT8, MI_DT_UINT64 };

static int64_t hostile_int(void)
{
	static const int64_t v[] = { 0,	 1,  -1, 2,  -2, 3,  4,	 -5,
				     7,	 64, 1000, -1000, INT64_MAX, INT64_MIN,
				     INT64_C(1) << 31, -(INT64_C(1) << 40),
				     INT64_C(1) << 33 };

	return rnd() % 3 ? rint_(-3, 4) : v[rnd() % (sizeof(v) / sizeof(v[0]))];
}

static float hostile_float(void)
{
	static const float v[] = { 0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e30f,
				   -1e30f, 1e-30f, __builtin_nanf(""),
				   __builtin_inff(), 1e9f };

	return v[rnd() % (sizeof(v) / sizeof(v[0]))];
}

static const char *const attr_names[] = {
	"axis", "axes", "perm", "kernel_shape", "strides", "pads", "dilations",
	"group", "auto_pad", "mode", "keepdims", "split", "starts", "ends",
	"to", "value", "blocksize", "scales", "alpha", "beta", "gamma",
	"epsilon", "transA", "transB", "output_padding", "output_shape",
	"storage_order", "ceil_mode", "count_include_pad", "allowzero",
	"start", "end", "k", "largest", "sorted", "exclusive", "reverse",
	"upper", "batch_dims", "coordinate_transformation_mode",
	"nearest_mode", "training_mode", "direction", "fmod",
	"noop_with_empty_axes", "select_last_index", "shape", "p", "size",
	"bias", "lambd", "value_float", "value_floats", "value_int",
	"value_ints", "dtype", "momentum", "broadcast", "cubic_coeff_a",
	"exclude_outside", "extrapolation_value", "min", "max", "reduction",
	"detect_positive", "detect_negative", "stash_type", "paddings",
	"sparse_value", "value_string", "equation", "equation",
};

static const char *const strings[] = {
	"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "bogus", "",
	"constant", "reflect", "edge", "nearest", "linear", "cubic",
	"half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize",
	"pytorch_half_pixel", "floor", "ceil", "round_prefer_ceil", "LEFT",
	"RIGHT", "DCR", "CRD", "add", "mul", "none", "ij,jk->ik", "i,i",
	"...ii->...i", "ij->ji", "ij", "a...,...a->...", "ab,ba", "->", ",",
	"...", "......->", "aA,Aa->aa", "ij->k", "i j , j k -> i k", "ij,",
};

static void fill_tensor(struct mi_tensor *t, int dtype, int ndim,
			const int64_t *dims)
{
	int64_t cnt;

	t->dtype = dtype;
	t->ndim = ndim;
	memcpy(t->dims, dims, ndim * sizeof(int64_t));
	cnt = mi_tensor_numel(t);
	if (mi_tensor_alloc(t))
		abort();
	t->flags |= MI_TF_CONST;
	for (int64_t i = 0; i < cnt; i++) {
		if (mi_ops_is_float(dtype))
			mi_ops_set_f64(t, i, rnd() % 8 ? (double)rint_(-4, 4) / 2 :
							  hostile_float());
		else
			mi_ops_set_i64(t, i, rnd() % 8 ? rint_(-3, 4) :
							  hostile_int());
	}
}

/* A plausible value for some attributes (so that cases reach run()). */
static int plausible_attr(struct mi_attr *a, const char *name, int rank)
{
	int nsp = rank > 2 ? rank - 2 : 1, cnt = -1;
	int64_t lo = 0, hi = 3;

	if (!strcmp(name, "kernel_shape") || !strcmp(name, "strides") ||
	    !strcmp(name, "dilations") || !strcmp(name, "output_padding") ||
	    !strcmp(name, "output_shape")) {
		cnt = nsp;
		lo = 1;
	} else if (!strcmp(name, "pads")) {
		cnt = 2 * nsp;
	} else if (!strcmp(name, "perm") || !strcmp(name, "axes")) {
		cnt = (int)rint_(0, rank);
		lo = -rank;
		hi = rank - 1;
	} else if (!strcmp(name, "blocksize") || !strcmp(name, "group") ||
		   !strcmp(name, "size")) {
		a->type = MI_ATTR_INT;
		a->i = rint_(1, 3);
		return 1;
	} else if (!strcmp(name, "to") || !strcmp(name, "dtype")) {
		a->type = MI_ATTR_INT;
		a->i = dtypes[rnd() % (sizeof(dtypes) / sizeof(dtypes[0]))];
		return 1;
	} else if (!strcmp(name, "axis")) {
		a->type = MI_ATTR_INT;
		a->i = rint_(-rank, rank);
		return 1;
	} else {
		return 0;
	}
	a->type = MI_ATTR_INTS;
	a->n = cnt;
	a->ints = calloc(cnt + 1, sizeof(int64_t));
	for (int i = 0; i < cnt; i++)
		a->ints[i] = rint_(lo, hi);
	if (!strcmp(name, "perm"))
		for (int i = 0; i < cnt; i++)
			a->ints[i] = (i + 1) % (cnt ? cnt : 1);
	return 1;
}

static void random_attr(struct mi_attr *a, const char *name, int rank)
{
	memset(a, 0, sizeof(*a));
	a->name = strdup(name);
	if (rnd() % 2 && plausible_attr(a, name, rank))
		return;
	switch (rnd() % 6) {
	case 0:
		a->type = MI_ATTR_INT;
		a->i = hostile_int();
		break;
	case 1:
		a->type = MI_ATTR_FLOAT;
		a->f = hostile_float();
		break;
	case 2:
		a->type = MI_ATTR_STRING;
		a->s = strdup(strings[rnd() % (sizeof(strings) / sizeof(strings[0]))]);
		break;
	case 3:
		a->type = MI_ATTR_FLOATS;
		a->n = (int)rint_(0, 6);
		a->floats = calloc(a->n + 1, sizeof(float));
		for (int i = 0; i < a->n; i++)
			a->floats[i] = rnd() % 2 ? hostile_float() : (float)rint_(0, 3);
		break;
	case 4: {
		int64_t dims[2] = { rint_(0, 3) };

		a->type = MI_ATTR_TENSOR;
		a->t = calloc(1, sizeof(*a->t));
		a->t->name = strdup(name);
		fill_tensor(a->t, dtypes[rnd() % (sizeof(dtypes) / sizeof(dtypes[0]))],
			    (int)rint_(0, 1), dims);
		a->t->nbytes = (size_t)mi_tensor_numel(a->t) *
			       mi_dtype_size(a->t->dtype);
		break;
	}
	default:
		a->type = MI_ATTR_INTS;
		a->n = (int)rint_(0, 8);
		a->ints = calloc(a->n + 1, sizeof(int64_t));
		for (int i = 0; i < a->n; i++)
			a->ints[i] = hostile_int();
		break;
	}
}

/*
 * Structured inputs for ops whose shape rules random shapes rarely meet
 * (recurrent layers, losses, NonMaxSuppression): valid shapes with
 * hostile values.  Returns the number of inputs set up, 0 if none.
 */
static int add_input(struct mi_graph *g, int dt, int rank, const int64_t *dims)
{
	int idx = mi_graph_add_tensor(g, "in");

	fill_tensor(&g->tensors[idx], dt, rank, dims);
	return idx;
}

static int special_inputs(const struct mi_op_def *d, struct mi_graph *g,
			  struct mi_node *n)
{
	const char *t = d->op_type;
	int64_t T = rint_(1, 3), B = rint_(1, 2), I = rint_(1, 3), H = rint_(1, 3);
	int64_t D = rnd() % 2 ? 1 : 2, G = 1, dims[4];
	int k = 0;

	if (!strcmp(t, "RNN") || !strcmp(t, "GRU") || !strcmp(t, "LSTM")) {
		G = !strcmp(t, "GRU") ? 3 : !strcmp(t, "LSTM") ? 4 : 1;
		dims[0] = T; dims[1] = B; dims[2] = I;
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 3, dims);
		dims[0] = D; dims[1] = G * H; dims[2] = I;
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 3, dims);
		dims[2] = H;
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 3, dims);
		dims[1] = 2 * G * H;
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 2, dims);
		dims[0] = B;
		n->inputs[k++] = add_input(g, MI_DT_INT32, 1, dims);
		dims[0] = D; dims[1] = B; dims[2] = H;
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 3, dims);
		if (G == 4) {
			n->inputs[k++] = add_input(g, MI_DT_FLOAT, 3, dims);
			dims[1] = 3 * H;
			n->inputs[k++] = add_input(g, MI_DT_FLOAT, 2, dims);
		}
		n->attrs[n->nattrs].name = strdup("hidden_size");
		n->attrs[n->nattrs].type = MI_ATTR_INT;
		n->attrs[n->nattrs++].i = rnd() % 4 ? H : hostile_int();
		n->attrs[n->nattrs].name = strdup("direction");
		n->attrs[n->nattrs].type = MI_ATTR_STRING;
		n->attrs[n->nattrs++].s = strdup(D == 2 ? "bidirectional" :
						rnd() % 2 ? "forward" : "reverse");
		return k;
	}
	if (!strcmp(t, "NegativeLogLikelihoodLoss") ||
	    !strcmp(t, "SoftmaxCrossEntropyLoss")) {
		dims[0] = B; dims[1] = rint_(1, 4); dims[2] = T;
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 3, dims);
		dims[1] = T;
		n->inputs[k++] = add_input(g, MI_DT_INT64, 2, dims);
		return k;
	}
	if (!strcmp(t, "NonMaxSuppression")) {
		dims[0] = B; dims[1] = rint_(0, 5); dims[2] = 4;
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 3, dims);
		dims[2] = dims[1]; dims[1] = rint_(1, 2);
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 3, dims);
		n->inputs[k++] = add_input(g, MI_DT_INT64, 0, dims);
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 0, dims);
		n->inputs[k++] = add_input(g, MI_DT_FLOAT, 0, dims);
		return k;
	}
	return 0;
}

/* Run one random case of op d; returns 1 if run() was reached. */
static int one_case(const struct mi_op_def *d, int *bad)
{
	struct mi_graph g;
	struct mi_node *n;
	int nin, nout, ret, reached = 0;
	int rank0 = (int)rint_(0, 5);
	int64_t dims0[MI_MAX_DIMS];
	int dt0 = rnd() % 2 ? MI_DT_FLOAT :
			     dtypes[rnd() % (sizeof(dtypes) / sizeof(dtypes[0]))];
	/* one shape strategy for every extra input, half of the time */
	int strat = rnd() % 2 ? (int)(rnd() % 6) : -1;
	int special = 0;

	for (int i = 0; i < rank0; i++)
		dims0[i] = rint_(0, 4);
	mi_graph_init(&g);
	g.opset = rnd() % 4 ? 13 + rint_(0, 4) : rint_(1, 12);
	g.nodes = calloc(1, sizeof(*n));
	g.nnodes = 1;
	n = &g.nodes[0];
	n->name = strdup("fuzz");
	n->op_type = strdup(d->op_type);
	n->domain = strdup(d->domain ? d->domain : "");
	n->def = d;
	nin = d->min_inputs + (int)rint_(0, 2);
	if (nin > d->max_inputs)
		nin = d->max_inputs;
	nout = d->min_outputs + (int)rint_(0, 1);
	if (nout > d->max_outputs)
		nout = d->max_outputs;
	n->inputs = calloc(nin + 8, sizeof(int));
	n->outputs = calloc(8, sizeof(int));
	n->ninputs = nin;
	n->noutputs = nout;
	n->attrs = calloc(16, sizeof(struct mi_attr));
	if (rnd() % 2) {
		int k = special_inputs(d, &g, n);

		if (k) {
			special = 1;
			n->ninputs = nin = k;
			nout = n->noutputs = d->max_outputs;
		}
	}
	for (int i = 0; i < nin && !special; i++) {
		int idx, rank, dt;
		int64_t dims[MI_MAX_DIMS];

		if (i >= d->min_inputs && rnd() % 4 == 0) {
			n->inputs[i] = -1;
			continue;
		}
		idx = mi_graph_add_tensor(&g, "in");
		/* mostly shapes related to input 0 so cases get past checks */
		switch (i == 0 ? 0 : strat >= 0 ? strat : (int)(rnd() % 6)) {
		case 0: /* same as input 0 */
			rank = rank0;
			memcpy(dims, dims0, sizeof(dims));
			dt = rnd() % 4 ? dt0 : MI_DT_INT64;
			break;
		case 1: /* per-channel vector */
			rank = 1;
			dims[0] = rank0 >= 2 ? dims0[1] : rint_(0, 4);
			dt = dt0;
			break;
		case 2: /* weights: [M, C, k...] of input 0's rank */
			rank = rank0;
			for (int k = 0; k < rank; k++)
				dims[k] = rint_(1, 3);
			if (rank >= 2)
				dims[1] = dims0[1];
			dt = dt0;
			break;
		case 3: /* matrix operand [last dim, r] */
			rank = 2;
			dims[0] = rank0 ? dims0[rank0 - 1] : 1;
			dims[1] = rint_(1, 4);
			dt = dt0;
			break;
		default:
			rank = (int)rint_(0, 2);
			for (int k = 0; k < rank; k++)
				dims[k] = rint_(0, 5);
			dt = rnd() % 2 ? MI_DT_INT64 : dt0;
			break;
		}
		if (i == 0)
			dt = dt0;
		for (int k = 0; k < rank; k++)
			if (rnd() % 5 == 0)
				dims[k] = 1;
		fill_tensor(&g.tensors[idx], dt, rank, dims);
		n->inputs[i] = idx;
	}
	for (int i = 0; i < nout; i++)
		n->outputs[i] = mi_graph_add_tensor(&g, "out");
	{
		static const struct {
			const char *op, *attr;
		} req[] = {
			{ "MaxPool", "kernel_shape" }, { "AveragePool", "kernel_shape" },
			{ "LpPool", "kernel_shape" },  { "DepthToSpace", "blocksize" },
			{ "SpaceToDepth", "blocksize" }, { "Einsum", "equation" },
			{ "Cast", "to" },	       { "Upsample", "scales" },
			{ "BitShift", "direction" },   { "LRN", "size" },
			{ "Concat", "axis" },	       { "EyeLike", "dtype" },
		};

		for (size_t r = 0; r < sizeof(req) / sizeof(req[0]); r++)
			if (!strcmp(req[r].op, d->op_type) && rnd() % 4) {
				struct mi_attr *a = &n->attrs[n->nattrs++];

				if (rnd() % 4) {
					memset(a, 0, sizeof(*a));
					a->name = strdup(req[r].attr);
					if (plausible_attr(a, req[r].attr, rank0))
						continue;
					free(a->name);
				}
				random_attr(a, req[r].attr, rank0);
			}
	}
	for (int k = (int)rint_(0, 3); k > 0; k--) {
		const char *nm =
			attr_names[rnd() % (sizeof(attr_names) / sizeof(attr_names[0]))];

		if (mi_attr_get(n, nm))
			continue;
		random_attr(&n->attrs[n->nattrs++], nm, rank0);
	}
	g.err[0] = 0;
	ret = d->infer(&g, n);
	if (ret && ret != -EAGAIN && !g.err[0]) {
		fprintf(stderr, "%s: infer returned %d without an error message\n",
			d->op_type, ret);
		(*bad)++;
	}
	if (ret && strchr(g.err, '\n')) {
		fprintf(stderr, "%s: multi-line error '%s'\n", d->op_type, g.err);
		(*bad)++;
	}
	if (ret == 0) {
		int ok = 1;

		for (int i = 0; i < nout && ok; i++) {
			struct mi_tensor *o = mi_ops_out(&g, n, i);
			int64_t cnt = mi_tensor_numel(o);

			if (cnt < 0) {
				fprintf(stderr, "%s: infer ok but output %d shape unknown\n",
					d->op_type, i);
				(*bad)++;
				ok = 0;
			} else if (cnt > 100000 || mi_tensor_alloc(o)) {
				ok = 0;
			}
		}
		if (ok) {
			g.err[0] = 0;
			ret = d->run(&g, n);
			if (ret && !g.err[0] && ret != -ENOMEM) {
				fprintf(stderr, "%s: run returned %d without an error message\n",
					d->op_type, ret);
				(*bad)++;
			}
			reached = 1;
		}
	}
	mi_graph_fini(&g);
	return reached;
}

/* test-ops-hostile [ITERS [SEED [-v]]]: -v prints per op how many cases
 * reached run(). */
int main(int argc, char **argv)
{
	const struct mi_op_def *const tables[] = {
		mi_ops_elementwise, mi_ops_matmul, mi_ops_conv,
		mi_ops_pool,	    mi_ops_norm,   mi_ops_reduce,
		mi_ops_shape,	    mi_ops_tensor, mi_ops_resize,
	mi_ops_misc,	    mi_ops_rnn,
	};
	int iters = argc > 1 ? atoi(argv[1]) : 300;
	int bad = 0, nops = 0;
	bool verbose = argc > 3 && !strcmp(argv[3], "-v");
	long cases = 0, runs = 0;

	if (argc > 2)
		rng_state = strtoull(argv[2], NULL, 0) | 1;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const struct mi_op_def *d = tables[t]; d->op_type; d++) {
			int reached = 0;

			if (mi_op_find(d->op_type, d->domain) != d) {
				fprintf(stderr, "%s: not found by mi_op_find\n",
					d->op_type);
				bad++;
			}
			for (int i = 0; i < iters; i++)
				reached += one_case(d, &bad);
			cases += iters;
			runs += reached;
			if (verbose)
				printf("%-28s %d/%d cases reached run()\n",
				       d->op_type, reached, iters);
			nops++;
		}
	printf("test-ops-hostile: %d ops, %ld cases, %ld reached run(), %d problems\n",
	       nops, cases, runs, bad);
	return bad ? 1 : 0;
}
