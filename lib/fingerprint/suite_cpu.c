// SPDX-License-Identifier: MIT
/*
 * The suite on the CPU: every point is a one-node ONNX model (written
 * here as protobuf bytes, weights as initializers) loaded through the
 * normal path, so what is timed is what a model runs: the node's kernel,
 * chosen by a plan that names the variant (every candidate of
 * mi_plan_candidates() without fusion, the default first).  Time per run
 * is the node profile (MI_MODEL_PROFILE), summed over the entries (a
 * layout reorder a variant needs counts).  fell_back: the profile says a
 * reference op ran where a fast variant was asked.
 *
 * Probes: "bw" (memcpy of x bytes: bytes/s; its knees are the caches),
 * "gemm" (x^3 MatMul, MAC/s), "launch" (a one-element model run, wall
 * ns), "dw" (depthwise / dense 3x3 MAC rate), "int8" (QLinearConv /
 * fp32 conv MAC rate).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "metainfer/metainfer.h"
#include "cpu/cpu.h"
#include "device/device.h"
#include "fingerprint/fp-impl.h"

/* ---- a minimal protobuf writer for ONNX models ------------------------ */
struct pb {
	uint8_t *b;
	size_t n, cap;
	int err;
};

static void pb_put(struct pb *p, const void *d, size_t n)
{
	if (p->err)
		return;
	if (p->n + n > p->cap) {
		size_t cap = (p->n + n) * 2 + 64;
		uint8_t *nb = realloc(p->b, cap);

		if (!nb) {
			p->err = -ENOMEM;
			return;
		}
		p->b = nb;
		p->cap = cap;
	}
	memcpy(p->b + p->n, d, n);
	p->n += n;
}

static void pb_varint(struct pb *p, uint64_t v)
{
	uint8_t c[10];
	int k = 0;

	do {
		c[k++] = (v & 0x7f) | (v > 0x7f ? 0x80 : 0);
		v >>= 7;
	} while (v);
	pb_put(p, c, k);
}

static void pb_int(struct pb *p, int field, int64_t v)
{
	pb_varint(p, (uint64_t)field << 3);
	pb_varint(p, (uint64_t)v);
}

static void pb_bytes(struct pb *p, int field, const void *d, size_t n)
{
	pb_varint(p, (uint64_t)field << 3 | 2);
	pb_varint(p, n);
	pb_put(p, d, n);
}

static void pb_str(struct pb *p, int field, const char *s)
{
	pb_bytes(p, field, s, strlen(s));
}

/* Append sub as a length-delimited field and free it. */
static void pb_msg(struct pb *p, int field, struct pb *sub)
{
	if (sub->err)
		p->err = sub->err;
	pb_bytes(p, field, sub->b, sub->n);
	free(sub->b);
	memset(sub, 0, sizeof(*sub));
}

enum { T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_INT32 = 6, T_INT64 = 7 };

static size_t tsize(int t)
{
	return t == T_FLOAT || t == T_INT32 ? 4 : t == T_INT64 ? 8 : 1;
}

/* TensorProto: dims 1, data_type 2, name 8, raw_data 9; random data. */
static void pb_tensor(struct pb *p, int field, const char *name, int type,
		      const int64_t *dims, int nd, unsigned int *seed)
{
	struct pb t = { 0 };
	size_t n = 1;
	uint8_t *raw;

	for (int i = 0; i < nd; i++) {
		pb_int(&t, 1, dims[i]);
		n *= dims[i];
	}
	pb_int(&t, 2, type);
	pb_str(&t, 8, name);
	raw = malloc(n * tsize(type) + 1);
	if (!raw) {
		p->err = -ENOMEM;
		free(t.b);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 1103515245u + 12345u;
		if (type == T_FLOAT) {
			float f = ((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;

			memcpy(raw + 4 * i, &f, 4);
		} else if (type == T_INT32) {
			int32_t v = (int32_t)((*seed >> 8) & 0xff) - 128;

			memcpy(raw + 4 * i, &v, 4);
		} else {
			raw[i] = (uint8_t)(*seed >> 16);
		}
	}
	pb_bytes(&t, 9, raw, n * tsize(type));
	free(raw);
	pb_msg(p, field, &t);
}

/* A scalar initializer with a given value (scales, zero points). */
static void pb_scalar(struct pb *p, const char *name, int type, double v)
{
	struct pb t = { 0 };
	uint8_t raw[4] = { 0 };

	pb_int(&t, 2, type);
	pb_str(&t, 8, name);
	if (type == T_FLOAT) {
		float f = v;

		memcpy(raw, &f, 4);
	} else {
		raw[0] = (uint8_t)(int)v;
	}
	pb_bytes(&t, 9, raw, tsize(type));
	pb_msg(p, 5, &t); /* GraphProto.initializer */
}

/* ValueInfoProto with a tensor type of fixed shape. */
static void pb_vinfo(struct pb *p, int field, const char *name, int type,
		     const int64_t *dims, int nd)
{
	struct pb v = { 0 }, tp = { 0 }, tt = { 0 }, sh = { 0 };

	for (int i = 0; i < nd; i++) {
		struct pb dim = { 0 };

		pb_int(&dim, 1, dims[i]);
		pb_msg(&sh, 1, &dim);
	}
	pb_int(&tt, 1, type);
	pb_msg(&tt, 2, &sh);
	pb_msg(&tp, 1, &tt);
	pb_str(&v, 1, name);
	pb_msg(&v, 2, &tp);
	pb_msg(p, field, &v);
}

/* AttributeProto: INT (2) or INTS (7). */
static void pb_attr_int(struct pb *node, const char *name, int64_t v)
{
	struct pb a = { 0 };

	pb_str(&a, 1, name);
	pb_int(&a, 3, v);
	pb_int(&a, 20, 2);
	pb_msg(node, 5, &a);
}

static void pb_attr_ints(struct pb *node, const char *name, const int64_t *v,
			 int n)
{
	struct pb a = { 0 };

	pb_str(&a, 1, name);
	for (int i = 0; i < n; i++)
		pb_int(&a, 8, v[i]);
	pb_int(&a, 20, 7);
	pb_msg(node, 5, &a);
}

/* ---- the one-node models ------------------------------------------------ */
struct onenode {
	struct pb g, node;
	int in_type;
	int64_t in_dims[4];
	int in_nd;
	unsigned int seed;
};

static void nn_begin(struct onenode *nn, const char *op, int in_type,
		     const int64_t *dims, int nd)
{
	memset(nn, 0, sizeof(*nn));
	nn->seed = 12345;
	nn->in_type = in_type;
	nn->in_nd = nd;
	memcpy(nn->in_dims, dims, nd * sizeof(*dims));
	pb_str(&nn->node, 1, "x");
	pb_str(&nn->node, 2, "y");
	pb_str(&nn->node, 3, "n0");
	pb_str(&nn->node, 4, op);
}

static void nn_input(struct onenode *nn, const char *name)
{
	pb_str(&nn->node, 1, name);
}

/* Finish: the graph with output y (shape left to inference) -> model. */
static int nn_end(struct onenode *nn, int out_type, struct pb *model)
{
	struct pb op = { 0 }, out = { 0 }, tp = { 0 }, tt = { 0 };

	pb_msg(&nn->g, 1, &nn->node);
	pb_str(&nn->g, 2, "fingerprint");
	pb_vinfo(&nn->g, 11, "x", nn->in_type, nn->in_dims, nn->in_nd);
	pb_int(&tt, 1, out_type);
	pb_msg(&tp, 1, &tt);
	pb_str(&out, 1, "y");
	pb_msg(&out, 2, &tp);
	pb_msg(&nn->g, 12, &out);
	memset(model, 0, sizeof(*model));
	pb_int(model, 1, 8);		/* ir_version */
	pb_str(model, 2, "metainfer-fingerprint");
	pb_int(&op, 2, 13);		/* opset 13 */
	pb_msg(model, 8, &op);
	pb_msg(model, 7, &nn->g);
	return model->err;
}

static void set_point(struct mi_fp_sample *s, int family, const char *op,
		      const char *dtype, const char *layout)
{
	memset(s, 0, sizeof(*s));
	s->family = family;
	snprintf(s->op, sizeof(s->op), "%s", op);
	snprintf(s->dtype, sizeof(s->dtype), "%s", dtype);
	snprintf(s->layout, sizeof(s->layout), "%s", layout);
}

/* Build the model of point s; sets the work (MACs or bytes). */
static int build(struct mi_fp_sample *s, struct pb *model, int *in_type)
{
	struct onenode nn;
	const int64_t *p = s->p;
	int out_type = T_FLOAT;

	switch (s->family) {
	case MI_FP_CONV:
	case MI_FP_DWCONV: {
		int64_t x[4] = { p[0], p[1], p[2], p[3] };
		int64_t w[4] = { p[4], p[1] / p[7], p[5], p[5] };
		int64_t b[1] = { p[4] };
		int64_t k2[2] = { p[5], p[5] }, st[2] = { p[6], p[6] };
		int64_t pad[4] = { p[5] / 2, p[5] / 2, p[5] / 2, p[5] / 2 };
		int64_t oh = (p[2] + 2 * (p[5] / 2) - p[5]) / p[6] + 1;
		bool q = !strcmp(s->op, "QLinearConv");

		nn_begin(&nn, s->op, q ? T_UINT8 : T_FLOAT, x, 4);
		if (q) {
			nn_input(&nn, "xs");
			nn_input(&nn, "xz");
			nn_input(&nn, "w");
			nn_input(&nn, "ws");
			nn_input(&nn, "wz");
			nn_input(&nn, "ys");
			nn_input(&nn, "yz");
			nn_input(&nn, "b");
			pb_scalar(&nn.g, "xs", T_FLOAT, 0.02);
			pb_scalar(&nn.g, "xz", T_UINT8, 128);
			pb_scalar(&nn.g, "ws", T_FLOAT, 0.01);
			pb_scalar(&nn.g, "wz", T_INT8, 0);
			pb_scalar(&nn.g, "ys", T_FLOAT, 0.05);
			pb_scalar(&nn.g, "yz", T_UINT8, 128);
			pb_tensor(&nn.g, 5, "w", T_INT8, w, 4, &nn.seed);
			pb_tensor(&nn.g, 5, "b", T_INT32, b, 1, &nn.seed);
			out_type = T_UINT8;
		} else {
			nn_input(&nn, "w");
			nn_input(&nn, "b");
			pb_tensor(&nn.g, 5, "w", T_FLOAT, w, 4, &nn.seed);
			pb_tensor(&nn.g, 5, "b", T_FLOAT, b, 1, &nn.seed);
		}
		pb_attr_ints(&nn.node, "kernel_shape", k2, 2);
		pb_attr_ints(&nn.node, "strides", st, 2);
		pb_attr_ints(&nn.node, "pads", pad, 4);
		pb_attr_int(&nn.node, "group", p[7]);
		s->work = (double)p[0] * p[4] * oh * oh * (p[1] / p[7]) * p[5] *
			  p[5];
		break;
	}
	case MI_FP_GEMM: {
		int64_t a[2] = { p[0], p[1] }, w[2] = { p[1], p[2] };

		nn_begin(&nn, s->op, T_FLOAT, a, 2);
		nn_input(&nn, "w");
		pb_tensor(&nn.g, 5, "w", T_FLOAT, w, 2, &nn.seed);
		if (!strcmp(s->op, "Gemm")) {
			int64_t c[1] = { p[2] };

			nn_input(&nn, "c");
			pb_tensor(&nn.g, 5, "c", T_FLOAT, c, 1, &nn.seed);
		}
		s->work = (double)p[0] * p[1] * p[2];
		break;
	}
	case MI_FP_POOL: {
		int64_t x[4] = { p[0], p[1], p[2], p[3] };
		int64_t k2[2] = { p[4], p[4] }, st[2] = { p[5], p[5] };
		int64_t pad[4] = { p[4] / 2, p[4] / 2, p[4] / 2, p[4] / 2 };

		nn_begin(&nn, s->op, T_FLOAT, x, 4);
		if (p[4]) {
			pb_attr_ints(&nn.node, "kernel_shape", k2, 2);
			pb_attr_ints(&nn.node, "strides", st, 2);
			pb_attr_ints(&nn.node, "pads", pad, 4);
		}
		s->work = 4.0 * p[0] * p[1] * p[2] * p[3];
		break;
	}
	case MI_FP_ELTWISE: {
		int64_t x[1] = { p[0] };
		bool bin = !strcmp(s->op, "Add") || !strcmp(s->op, "Mul");

		nn_begin(&nn, s->op, T_FLOAT, x, 1);
		if (bin) {
			nn_input(&nn, "c");
			pb_tensor(&nn.g, 5, "c", T_FLOAT, x, 1, &nn.seed);
		}
		s->work = 4.0 * p[0] * (bin ? 3 : 2);
		break;
	}
	case MI_FP_REORDER: {
		int64_t x[4] = { p[0], p[1], p[2], p[3] };
		int64_t perm[4] = { 0, 2, 3, 1 };

		nn_begin(&nn, "Transpose", T_FLOAT, x, 4);
		pb_attr_ints(&nn.node, "perm", perm, 4);
		s->work = 8.0 * p[0] * p[1] * p[2] * p[3];
		break;
	}
	case MI_FP_QUANT: {
		int64_t x[1] = { p[0] };
		bool dq = !strcmp(s->op, "DequantizeLinear");
		int qt = !strcmp(s->dtype, "int8") ? T_INT8 : T_UINT8;

		nn_begin(&nn, s->op, dq ? qt : T_FLOAT, x, 1);
		nn_input(&nn, "s");
		nn_input(&nn, "z");
		pb_scalar(&nn.g, "s", T_FLOAT, 0.02);
		pb_scalar(&nn.g, "z", qt, qt == T_UINT8 ? 128 : 0);
		out_type = dq ? T_FLOAT : qt;
		s->work = 5.0 * p[0];
		break;
	}
	default:
		return -EINVAL;
	}
	*in_type = nn.in_type;
	return nn_end(&nn, out_type, model);
}

/* ---- the grid ----------------------------------------------------------- */
struct cpu_pt {
	int family;
	const char *op, *dtype;
	int64_t p[MI_FP_NPARAM];
	int grid;		/* smallest grid that has it (TINY in all) */
};

/* Shapes from the zoo: ResNet / MobileNet / EfficientNet stages. */
static const struct cpu_pt cpu_grid[] = {
	{ MI_FP_CONV, "Conv", "fp32", { 1, 32, 28, 28, 32, 3, 1, 1 }, MI_FP_GRID_TINY },
	{ MI_FP_CONV, "Conv", "fp32", { 1, 64, 28, 28, 64, 1, 1, 1 }, MI_FP_GRID_TINY },
	{ MI_FP_CONV, "Conv", "fp32", { 1, 32, 28, 28, 64, 3, 2, 1 }, MI_FP_GRID_QUICK },
	{ MI_FP_CONV, "Conv", "fp32", { 1, 3, 64, 64, 32, 7, 2, 1 }, MI_FP_GRID_QUICK },
	{ MI_FP_CONV, "Conv", "fp32", { 1, 64, 14, 14, 64, 3, 1, 8 }, MI_FP_GRID_QUICK },
	{ MI_FP_CONV, "Conv", "fp32", { 1, 64, 56, 56, 64, 3, 1, 1 }, MI_FP_GRID_FULL },
	{ MI_FP_CONV, "Conv", "fp32", { 1, 128, 14, 14, 128, 3, 1, 1 }, MI_FP_GRID_FULL },
	{ MI_FP_CONV, "Conv", "fp32", { 1, 256, 14, 14, 256, 1, 1, 1 }, MI_FP_GRID_FULL },
	{ MI_FP_CONV, "Conv", "fp32", { 1, 32, 28, 28, 32, 5, 1, 1 }, MI_FP_GRID_FULL },
	{ MI_FP_CONV, "QLinearConv", "int8", { 1, 32, 28, 28, 32, 3, 1, 1 }, MI_FP_GRID_QUICK },
	{ MI_FP_CONV, "QLinearConv", "int8", { 1, 64, 28, 28, 64, 1, 1, 1 }, MI_FP_GRID_QUICK },
	{ MI_FP_DWCONV, "Conv", "fp32", { 1, 64, 28, 28, 64, 3, 1, 64 }, MI_FP_GRID_TINY },
	{ MI_FP_DWCONV, "Conv", "fp32", { 1, 64, 28, 28, 64, 3, 2, 64 }, MI_FP_GRID_QUICK },
	{ MI_FP_DWCONV, "Conv", "fp32", { 1, 96, 14, 14, 96, 5, 1, 96 }, MI_FP_GRID_FULL },
	{ MI_FP_DWCONV, "QLinearConv", "int8", { 1, 64, 28, 28, 64, 3, 1, 64 }, MI_FP_GRID_FULL },
	{ MI_FP_GEMM, "MatMul", "fp32", { 64, 256, 256 }, MI_FP_GRID_TINY },
	{ MI_FP_GEMM, "Gemm", "fp32", { 1, 512, 1000 }, MI_FP_GRID_QUICK },
	{ MI_FP_GEMM, "MatMul", "fp32", { 196, 384, 384 }, MI_FP_GRID_FULL },
	{ MI_FP_GEMM, "Gemm", "fp32", { 1, 2048, 1000 }, MI_FP_GRID_FULL },
	{ MI_FP_POOL, "MaxPool", "fp32", { 1, 64, 56, 56, 3, 2 }, MI_FP_GRID_QUICK },
	{ MI_FP_POOL, "AveragePool", "fp32", { 1, 64, 28, 28, 3, 1 }, MI_FP_GRID_FULL },
	{ MI_FP_POOL, "GlobalAveragePool", "fp32", { 1, 256, 7, 7 }, MI_FP_GRID_TINY },
	{ MI_FP_ELTWISE, "Add", "fp32", { 50176 }, MI_FP_GRID_TINY },
	{ MI_FP_ELTWISE, "Relu", "fp32", { 50176 }, MI_FP_GRID_QUICK },
	{ MI_FP_ELTWISE, "Sigmoid", "fp32", { 50176 }, MI_FP_GRID_QUICK },
	{ MI_FP_ELTWISE, "Mul", "fp32", { 200704 }, MI_FP_GRID_FULL },
	{ MI_FP_ELTWISE, "Add", "fp32", { 802816 }, MI_FP_GRID_FULL },
	{ MI_FP_REORDER, "Transpose", "fp32", { 1, 64, 28, 28 }, MI_FP_GRID_QUICK },
	{ MI_FP_REORDER, "Transpose", "fp32", { 1, 256, 14, 14 }, MI_FP_GRID_FULL },
	{ MI_FP_QUANT, "QuantizeLinear", "uint8", { 50176 }, MI_FP_GRID_QUICK },
	{ MI_FP_QUANT, "DequantizeLinear", "uint8", { 50176 }, MI_FP_GRID_QUICK },
	{ MI_FP_QUANT, "QuantizeLinear", "int8", { 200704 }, MI_FP_GRID_FULL },
	{ MI_FP_TRANSFER, "memcpy", "uint8", { 262144 }, MI_FP_GRID_QUICK },
	{ MI_FP_TRANSFER, "memcpy", "uint8", { 4194304 }, MI_FP_GRID_FULL },
};

#define NCPU_PT (int)(sizeof(cpu_grid) / sizeof(cpu_grid[0]))

static int cpu_grid_fn(struct fp_run *r, struct mi_fp_sample *pts, int max)
{
	int n = 0;

	for (int i = 0; i < NCPU_PT; i++) {
		const struct cpu_pt *c = &cpu_grid[i];

		/* a point is in a grid when its grid is at least as small */
		if (c->grid < r->grid)
			continue;
		if (n < max) {
			set_point(&pts[n], c->family, c->op, c->dtype,
				  c->family == MI_FP_GEMM ||
						  c->family == MI_FP_ELTWISE ||
						  c->family == MI_FP_QUANT ||
						  c->family == MI_FP_TRANSFER ?
					  "plain" :
					  "NCHW");
			memcpy(pts[n].p, c->p, sizeof(c->p));
			pts[n].threads = r->threads;
		}
		n++;
	}
	/* the full grid without a thread count: every point on all cores too */
	if (r->sweep && mi_cpu_ncores() > 1)
		for (int i = 0, m = n; i < m; i++) {
			if (n < max && i < max) {
				pts[n] = pts[i];
				pts[n].threads = mi_cpu_ncores();
			}
			n++;
		}
	return n;
}

static int cpu_check_points(struct fp_run *r, int *idx)
{
	struct mi_fp_sample pts[64];
	int n = cpu_grid_fn(r, pts, 64), k = 0;

	/* the first 3x3 fp32 conv, the first GEMM, the first Add */
	for (int i = 0; i < n && k < 3; i++)
		if ((k == 0 && pts[i].family == MI_FP_CONV && pts[i].p[5] == 3 &&
		     !strcmp(pts[i].dtype, "fp32")) ||
		    (k == 1 && pts[i].family == MI_FP_GEMM) ||
		    (k == 2 && !strcmp(pts[i].op, "Add"))) {
			idx[k++] = i;
			i = -1;
		}
	return k == 3 ? 0 : mi_set_error(-EINVAL, "no check points");
}

/* ---- measuring ---------------------------------------------------------- */
struct cpu_priv {
	struct mi_model *m;
	char key[160];
	double work;
	void *in;
	struct mi_value v;
};

static void cpu_fini(struct fp_run *r)
{
	struct cpu_priv *c = r->priv;

	if (!c)
		return;
	mi_model_free(c->m);
	free(c->in);
	free(c);
	r->priv = NULL;
}

static void key_of(const struct mi_fp_sample *s, char *buf, size_t len)
{
	snprintf(buf, len, "%d/%s/%s/%lld/%lld/%lld/%lld/%lld/%lld/%lld/%lld/%d",
		 s->family, s->op, s->dtype, (long long)s->p[0],
		 (long long)s->p[1], (long long)s->p[2], (long long)s->p[3],
		 (long long)s->p[4], (long long)s->p[5], (long long)s->p[6],
		 (long long)s->p[7], s->threads);
}

/* The loaded model of point s (cached for its variants). */
static int model_of(struct fp_run *r, struct mi_fp_sample *s,
		    struct cpu_priv **cp)
{
	struct mi_model_opts mo = { .flags = MI_MODEL_PROFILE | MI_MODEL_NO_MERGE,
				    .nthreads = s->threads };
	struct cpu_priv *c = r->priv;
	struct pb model;
	char key[160];
	size_t n = 1, es;
	int in_type, err;

	key_of(s, key, sizeof(key));
	if (!c) {
		c = r->priv = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
	}
	if (c->m && !strcmp(c->key, key)) {
		s->work = c->work;
		*cp = c;
		return 0;
	}
	mi_model_free(c->m);
	c->m = NULL;
	free(c->in);
	c->in = NULL;
	err = build(s, &model, &in_type);
	if (!err)
		err = mi_model_load_buffer(model.b, model.n, NULL, key, &mo,
					   &c->m);
	free(model.b);
	if (err)
		return err;
	snprintf(c->key, sizeof(c->key), "%s", key);
	c->work = s->work;
	memset(&c->v, 0, sizeof(c->v));
	c->v.dtype = in_type == T_FLOAT ? MI_DT_FLOAT :
		     in_type == T_UINT8 ? MI_DT_UINT8 : MI_DT_INT8;
	c->v.ndim = s->family == MI_FP_GEMM ? 2 :
		    s->family == MI_FP_ELTWISE || s->family == MI_FP_QUANT ? 1 :
									      4;
	for (int i = 0; i < c->v.ndim; i++) {
		c->v.dims[i] = s->p[i];
		n *= s->p[i];
	}
	es = in_type == T_FLOAT ? 4 : 1;
	c->in = malloc(n * es);
	if (!c->in)
		return -ENOMEM;
	/* plain values (random bytes as floats would be denormals, which
	 * slow some kernels down by orders of magnitude) */
	for (size_t i = 0; i < n; i++) {
		uint32_t h = (uint32_t)(i * 2654435761u) >> 16;

		if (es == 4)
			((float *)c->in)[i] = (h & 0xff) / 128.0f - 1.0f;
		else
			((uint8_t *)c->in)[i] = (uint8_t)h;
	}
	c->v.data = c->in;
	c->v.nbytes = n * es;
	*cp = c;
	return 0;
}

static int cpu_variants(struct fp_run *r, const struct mi_fp_sample *pt,
			char (*names)[32], int max)
{
	const struct mi_plan_candidate *cands;
	struct mi_fp_sample s = *pt;
	struct cpu_priv *c;
	int n, k = 0, err;

	if (pt->family == MI_FP_TRANSFER) {
		snprintf(names[0], 32, "host");
		return 1;
	}
	err = model_of(r, &s, &c);
	if (err)
		return err;
	n = mi_plan_candidates(c->m, "n0", &cands);
	if (n < 0)
		return n;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n && k < max; i++) {
			bool dup = false;

			if (cands[i].nfused || (pass == 0) != !!cands[i].is_current)
				continue;
			for (int j = 0; j < k; j++)
				dup |= !strcmp(names[j], cands[i].variant);
			if (!dup)
				snprintf(names[k++], 32, "%s", cands[i].variant);
		}
	return k;
}

/* One run: the sum of the node profile; fast: a fast kernel ran. */
static int run_once(struct cpu_priv *c, double *ns, bool *fast)
{
	struct mi_value out;
	int err, np;

	mi_model_profile_reset(c->m);
	err = mi_model_run(c->m, &c->v, 1, &out, 1);
	if (err)
		return err;
	np = mi_model_profile_count(c->m);
	*ns = 0;
	*fast = np > 0;
	for (int i = 0; i < np; i++) {
		struct mi_node_profile pr;

		if (!mi_model_profile(c->m, i, &pr)) {
			*ns += pr.ns;
			*fast &= pr.fast != 0;
		}
	}
	return 0;
}

static int time_memcpy(struct fp_run *r, size_t bytes, struct mi_fp_sample *s)
{
	int warm, runs;
	uint8_t *a = malloc(bytes), *b = malloc(bytes);
	double ns[32];

	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	memset(a, 1, bytes);
	memset(b, 2, bytes);
	mi_fp_runs(r->grid, &warm, &runs);
	/* small copies repeat inside one timing so the clock resolves them */
	int reps = bytes < (1 << 20) ? (int)((1 << 20) / bytes) : 1;

	for (int i = 0; i < warm + runs; i++) {
		uint64_t t0 = mi_fp_now_ns();

		for (int k = 0; k < reps; k++) {
			memcpy(b, a, bytes);
			__asm__ volatile("" ::"r"(b) : "memory");
		}
		if (i >= warm)
			ns[i - warm] = (double)(mi_fp_now_ns() - t0) / reps;
	}
	s->work = 2.0 * bytes;
	mi_fp_stats(ns, runs, s);
	free(a);
	free(b);
	return 0;
}

static int cpu_measure(struct fp_run *r, struct mi_fp_sample *s)
{
	struct mi_plan *plan = NULL;
	struct cpu_priv *c;
	double ns[32];
	bool fast = true, f;
	int warm, runs, err;

	if (s->family == MI_FP_TRANSFER)
		return time_memcpy(r, s->p[0], s);
	err = model_of(r, s, &c);
	if (err)
		return err;
	err = mi_model_plan_get(c->m, &plan);
	if (!err)
		err = mi_plan_set(plan, "n0", s->variant, NULL, 0);
	if (!err && mi_model_plan_apply(c->m, plan)) {
		/* a candidate the plan layer then refused: it fell back */
		mi_plan_free(plan);
		s->fell_back = true;
		return 0;
	}
	mi_plan_free(plan);
	if (err)
		return err;
	mi_fp_runs(r->grid, &warm, &runs);
	for (int i = 0; i < warm + runs; i++) {
		double t;

		err = run_once(c, &t, &f);
		if (err)
			return err;
		if (i >= warm) {
			ns[i - warm] = t;
			fast &= f;
		}
	}
	s->fell_back = strcmp(s->variant, "ref") && !fast;
	mi_fp_stats(ns, runs, s);
	return 0;
}

/* ---- probes ------------------------------------------------------------- */
static const double cpu_bw_sizes[] = { 16384, 65536, 262144, 1048576,
				       4194304, 16777216, 67108864 };
static const double cpu_gemm_sizes[] = { 16, 32, 64, 128, 256, 512 };

static int cpu_probe_point(struct fp_run *r, int i, char *name, double *x)
{
	int nbw = r->grid == MI_FP_GRID_TINY ? 4 : 7;
	int ng = r->grid == MI_FP_GRID_TINY ? 3 : r->grid == MI_FP_GRID_QUICK ? 5 : 6;

	if (i < nbw) {
		snprintf(name, 24, "bw");
		*x = cpu_bw_sizes[r->grid == MI_FP_GRID_TINY ? i + 1 : i];
		return 1;
	}
	i -= nbw;
	if (i < ng) {
		snprintf(name, 24, "gemm");
		*x = cpu_gemm_sizes[i];
		return 1;
	}
	i -= ng;
	if (i < 3) {
		snprintf(name, 24, "%s", i == 0 ? "launch" : i == 1 ? "dw" : "int8");
		*x = i == 0 ? 0 : 1;
		return 1;
	}
	return 0;
}

/* Median ns of point s with its default variant. */
static int time_default(struct fp_run *r, struct mi_fp_sample *s)
{
	char names[4][32];
	int n = cpu_variants(r, s, names, 4);

	if (n < 0)
		return n;
	if (n == 0)
		return -ENOENT;
	snprintf(s->variant, sizeof(s->variant), "%s", names[0]);
	return cpu_measure(r, s);
}

static int cpu_probe(struct fp_run *r, const char *name, double x, double *y)
{
	struct mi_fp_sample s, t;
	int err;

	*y = 0;
	if (!strcmp(name, "bw")) {
		set_point(&s, MI_FP_TRANSFER, "memcpy", "uint8", "plain");
		err = time_memcpy(r, (size_t)x, &s);
		*y = s.rate;
		return err;
	}
	if (!strcmp(name, "gemm")) {
		set_point(&s, MI_FP_GEMM, "MatMul", "fp32", "plain");
		s.p[0] = s.p[1] = s.p[2] = (int64_t)x;
		s.threads = r->threads;
		err = time_default(r, &s);
		*y = s.rate;
		return err;
	}
	if (!strcmp(name, "launch")) {
		set_point(&s, MI_FP_ELTWISE, "Relu", "fp32", "plain");
		s.p[0] = 1;
		s.threads = r->threads;
		err = time_default(r, &s);
		*y = s.median_ns;
		return err;
	}
	/* dw / int8: ratio of MAC rates against the dense fp32 3x3 conv */
	set_point(&s, MI_FP_CONV, "Conv", "fp32", "NCHW");
	int64_t p[MI_FP_NPARAM] = { 1, 32, 28, 28, 32, 3, 1, 1 };

	memcpy(s.p, p, sizeof(p));
	s.threads = r->threads;
	t = s;
	if (!strcmp(name, "dw")) {
		t.family = MI_FP_DWCONV;
		t.p[7] = 32;
	} else {
		snprintf(t.op, sizeof(t.op), "QLinearConv");
		snprintf(t.dtype, sizeof(t.dtype), "int8");
	}
	err = time_default(r, &s);
	if (!err)
		err = time_default(r, &t);
	if (!err && s.rate > 0)
		*y = t.rate / s.rate;
	return err;
}

const struct fp_backend mi_fp_cpu_backend = {
	.grid = cpu_grid_fn,
	.variants = cpu_variants,
	.measure = cpu_measure,
	.probe_point = cpu_probe_point,
	.probe = cpu_probe,
	.check_points = cpu_check_points,
	.fini = cpu_fini,
};
