// SPDX-License-Identifier: GPL-2.0-only
/*
 * ops_test: every op's results equal the userspace reference (mi_ref.c,
 * written from the uapi's documented arithmetic) bit for bit, for random
 * shapes, dtypes, layouts, strides, zero points and requantization
 * parameters.  The whole of every buffer is compared, so a write outside
 * the output tensor is caught too.
 *
 * MI_SEED=<n> in the environment replays one seed; the seed of a failing
 * case is printed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_fixture.h"
#include "mi_ref.h"

#define NBOS 3
#define BO_SIZE (256 * 1024)
#define CASES 6

#define I8 DRM_METAINFER_DTYPE_INT8
#define U8 DRM_METAINFER_DTYPE_UINT8
#define I16 DRM_METAINFER_DTYPE_INT16
#define I32 DRM_METAINFER_DTYPE_INT32
#define PLAIN DRM_METAINFER_LAYOUT_PLAIN
#define NCHW DRM_METAINFER_LAYOUT_NCHW
#define NHWC DRM_METAINFER_LAYOUT_NHWC

struct gen {
	uint64_t rng;
	uint64_t off[NBOS];
	uint64_t dtypes; /* DTYPE_MASK of the device */
	int overflow;
};

static uint32_t rnd(struct gen *g, uint32_t lo, uint32_t hi)
{
	return (uint32_t)mi_rand_range(&g->rng, (int32_t)lo, (int32_t)hi);
}

static int32_t srnd(struct gen *g, int32_t lo, int32_t hi)
{
	return mi_rand_range(&g->rng, lo, hi);
}

static uint32_t pick_dtype(struct gen *g, const uint32_t *choices, int n)
{
	for (;;) {
		uint32_t d = choices[rnd(g, 0, n - 1)];

		if (g->dtypes & (1u << d))
			return d;
	}
}

/*
 * A tensor of @ndim dims with @shape as stored, placed at the next free
 * offset of @bo: dense (all strides 0) or, if @padded, with explicit
 * strides that leave random gaps.
 */
static struct drm_metainfer_tensor mk(struct gen *g, uint32_t bo, uint32_t dt,
				      uint32_t lay, uint32_t ndim,
				      const uint32_t *shape, int padded)
{
	struct drm_metainfer_tensor t = mi_tensor(bo, dt, lay, 0, ndim, shape);
	uint64_t es = mi_ref_dtype_size(dt), extent = 1, s = 1;
	int k;

	if (padded) {
		for (k = ndim - 1; k >= 0; k--) {
			t.stride[k] = s;
			s = s * shape[k] + rnd(g, 0, 3);
		}
	}
	for (k = 0; k < (int)ndim; k++) {
		if (padded)
			extent += (uint64_t)(shape[k] - 1) * t.stride[k];
		else
			extent *= shape[k];
	}
	g->off[bo] = (g->off[bo] + 63) & ~63ull;
	t.offset = g->off[bo] + es * rnd(g, 0, 3);
	g->off[bo] = t.offset + extent * es;
	if (g->off[bo] > BO_SIZE)
		g->overflow = 1;
	return t;
}

/* 4-D activation with logical (n, c, h, w) in layout @lay. */
static struct drm_metainfer_tensor act(struct gen *g, uint32_t bo, uint32_t dt,
				       uint32_t lay, uint32_t n, uint32_t c,
				       uint32_t h, uint32_t w, int padded)
{
	uint32_t nchw[4] = { n, c, h, w }, nhwc[4] = { n, h, w, c };

	return mk(g, bo, dt, lay, 4, lay == NHWC ? nhwc : nchw, padded);
}

static struct drm_metainfer_tensor vec(struct gen *g, uint32_t bo, uint32_t dt,
				       uint32_t n)
{
	uint32_t shape[1] = { n };

	return mk(g, bo, dt, PLAIN, 1, shape, 0);
}

/* Output zero point and clamp range for an output of dtype @out_dt. */
static void requant_params(struct gen *g, struct drm_metainfer_requant *rq,
			   uint32_t out_dt)
{
	int64_t lo = mi_ref_dtype_min(out_dt), hi = mi_ref_dtype_max(out_dt);

	rq->output_zp = out_dt == I32 ? srnd(g, -1000, 1000) :
			out_dt == U8  ? srnd(g, 0, 255) :
					srnd(g, -20, 20);
	if (rnd(g, 0, 2) == 0) {
		/* a fused activation narrower than the dtype */
		rq->act_min = (int32_t)(lo + (hi - lo) / 4);
		rq->act_max = (int32_t)(hi - (hi - lo) / 8);
	} else {
		rq->act_min = (int32_t)(lo > INT32_MIN ? lo - rnd(g, 0, 5) : lo);
		rq->act_max = (int32_t)(hi < INT32_MAX ? hi + rnd(g, 0, 5) : hi);
	}
}

/* Fill a per-channel int32 multiplier/shift pair in buffer image @p. */
static void write_i32(uint8_t *img, const struct drm_metainfer_tensor *t,
		      uint32_t i, int32_t v)
{
	memcpy(img + t->offset + 4ull * i, &v, 4);
}

struct bufs {
	uint32_t h[NBOS];
	uint8_t *map[NBOS];
	uint8_t *ref[NBOS];
	uint8_t *pre2; /* the output buffer before the job */
};

static int bufs_init(int fd, struct bufs *b, uint64_t *rng)
{
	int i, ret;
	size_t k;

	b->pre2 = malloc(BO_SIZE);
	if (!b->pre2)
		return -ENOMEM;
	for (i = 0; i < NBOS; i++) {
		ret = mi_bo_create(fd, BO_SIZE, &b->h[i]);
		if (ret)
			return ret;
		b->map[i] = mi_bo_map(fd, b->h[i], NULL);
		b->ref[i] = malloc(BO_SIZE);
		if (!b->map[i] || !b->ref[i])
			return -ENOMEM;
		for (k = 0; k < BO_SIZE; k += 8) {
			uint64_t r = mi_rand(rng);

			memcpy(b->map[i] + k, &r, 8);
		}
	}
	return 0;
}

static void bufs_fini(struct bufs *b)
{
	int i;

	for (i = 0; i < NBOS; i++) {
		if (b->map[i])
			munmap(b->map[i], BO_SIZE);
		free(b->ref[i]);
	}
	free(b->pre2);
}

/*
 * Param tensors are written into the device buffers by the generator
 * (through @img = the mapping); run the stream on the device and on the
 * reference, compare every byte.
 */
static void run_and_compare(struct __test_metadata *_metadata, int fd,
			    uint32_t ctx, struct bufs *b, struct mi_stream *s,
			    uint64_t seed, const char *what)
{
	struct mi_ref_buf rb[NBOS];
	uint64_t seq;
	int64_t st = 1;
	int i;

	for (i = 0; i < NBOS; i++) {
		memcpy(b->ref[i], b->map[i], BO_SIZE);
		if (i == 2)
			memcpy(b->pre2, b->map[i], BO_SIZE);
		rb[i].data = b->ref[i];
		rb[i].size = BO_SIZE;
	}
	mi_stream_finish(s);
	ASSERT_EQ(0, mi_submit(fd, ctx, b->h, NBOS, s->buf, s->len, &seq)) {
		TH_LOG("%s: seed %llu rejected", what, (unsigned long long)seed);
	}
	ASSERT_EQ(0, mi_wait(fd, ctx, seq, 60000, &st));
	ASSERT_EQ(0, st);
	ASSERT_EQ(0, mi_ref_run(s->buf, s->len, rb, NBOS));
	/* the job must have written something (guards the comparison) */
	ASSERT_NE(0, memcmp(b->ref[2], b->pre2, BO_SIZE)) {
		TH_LOG("%s: seed %llu: the reference wrote nothing", what,
		       (unsigned long long)seed);
	}
	for (i = 0; i < NBOS; i++) {
		size_t k;

		for (k = 0; k < BO_SIZE; k++)
			if (b->map[i][k] != b->ref[i][k])
				break;
		ASSERT_EQ(BO_SIZE, k) {
			TH_LOG("%s: seed %llu: bo %d byte %zu: device 0x%02x, reference 0x%02x",
			       what, (unsigned long long)seed, i, k, b->map[i][k],
			       b->ref[i][k]);
		}
	}
}

static uint64_t case_seed(const char *variant, const char *test, int c)
{
	const char *env = getenv("MI_SEED");
	uint64_t h = 1469598103934665603ull;
	const char *p;

	if (env)
		return strtoull(env, NULL, 0) + c;
	for (p = variant; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	for (p = test; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	return h + (uint64_t)c * 0x9e3779b97f4a7c15ull;
}

/* Op generators ------------------------------------------------------------ */

static const uint32_t act_dtypes[] = { I8, U8, I16 };
static const uint32_t all_dtypes[] = { I8, U8, I16, I32 };

static int32_t zp_for(struct gen *g, uint32_t dt)
{
	switch (dt) {
	case U8:
		return srnd(g, 0, 255);
	case I8:
		return srnd(g, -128, 127);
	case I16:
		return srnd(g, -300, 300);
	default:
		return srnd(g, -1000, 1000);
	}
}

static void gen_conv(struct gen *g, struct mi_stream *s, uint8_t **img)
{
	struct drm_metainfer_op_conv2d op;
	uint32_t lay = rnd(g, 0, 1) ? NCHW : NHWC, kind = rnd(g, 0, 2);
	uint32_t N = rnd(g, 1, 2), H = rnd(g, 3, 9), W = rnd(g, 3, 9);
	uint32_t groups, cpg, opg, Cin, Cout, KH, KW, OH, OW, oc, out_dt;
	static const uint32_t wdt[] = { I8, I16 };
	static const uint32_t odt[] = { I8, U8, I16, I32 };

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_CONV2D;
	if (kind == 0) { /* plain */
		groups = 1;
		cpg = rnd(g, 1, 6);
		opg = rnd(g, 1, 6);
	} else if (kind == 1) { /* depthwise (multiplier 1 or 2) */
		groups = rnd(g, 1, 8);
		cpg = 1;
		opg = rnd(g, 1, 2);
	} else { /* grouped */
		groups = rnd(g, 2, 3);
		cpg = rnd(g, 1, 3);
		opg = rnd(g, 1, 3);
	}
	Cin = groups * cpg;
	Cout = groups * opg;
	op.groups = groups;
	op.stride_h = rnd(g, 1, 2);
	op.stride_w = rnd(g, 1, 2);
	op.dilation_h = rnd(g, 1, 2);
	op.dilation_w = rnd(g, 1, 2);
	KH = rnd(g, 1, 3);
	KW = rnd(g, 1, 3);
	op.pad_top = rnd(g, 0, 2);
	op.pad_bottom = rnd(g, 0, 2);
	op.pad_left = rnd(g, 0, 2);
	op.pad_right = rnd(g, 0, 2);
	/* make sure the output has at least one row and column */
	while ((int64_t)H + op.pad_top + op.pad_bottom - op.dilation_h * (KH - 1) - 1 < 0)
		H++;
	while ((int64_t)W + op.pad_left + op.pad_right - op.dilation_w * (KW - 1) - 1 < 0)
		W++;
	OH = (H + op.pad_top + op.pad_bottom - op.dilation_h * (KH - 1) - 1) / op.stride_h + 1;
	OW = (W + op.pad_left + op.pad_right - op.dilation_w * (KW - 1) - 1) / op.stride_w + 1;

	op.input = act(g, 0, pick_dtype(g, act_dtypes, 3), lay, N, Cin, H, W, rnd(g, 0, 1));
	op.weight = act(g, 1, pick_dtype(g, wdt, 2), lay, Cout, cpg, KH, KW, 0);
	op.input_zp = zp_for(g, op.input.dtype);
	op.weight_zp = zp_for(g, op.weight.dtype) / 4;
	if (rnd(g, 0, 1)) {
		op.hdr.flags |= DRM_METAINFER_OP_F_BIAS;
		op.bias = vec(g, 1, I32, Cout);
		for (oc = 0; oc < Cout; oc++)
			write_i32(img[1], &op.bias, oc, srnd(g, -100000, 100000));
	}
	if (rnd(g, 0, 3)) {
		uint32_t n = rnd(g, 0, 1) ? Cout : 1;

		op.hdr.flags |= DRM_METAINFER_OP_F_REQUANT;
		out_dt = pick_dtype(g, odt, 4);
		op.multiplier = vec(g, 1, I32, n);
		op.shift = vec(g, 1, I32, n);
		for (oc = 0; oc < n; oc++) {
			write_i32(img[1], &op.multiplier, oc, srnd(g, 1 << 29, INT32_MAX));
			write_i32(img[1], &op.shift, oc, srnd(g, -14, 1));
		}
		requant_params(g, &op.rq, out_dt);
	} else {
		out_dt = I32;
	}
	op.output = act(g, 2, out_dt, lay, N, Cout, OH, OW, rnd(g, 0, 1));
	mi_stream_add(s, &op, sizeof(op));
}

static void gen_gemm(struct gen *g, struct mi_stream *s, uint8_t **img)
{
	struct drm_metainfer_op_gemm op;
	uint32_t M = rnd(g, 1, 24), K = rnd(g, 1, 32), N = rnd(g, 1, 24), n;
	static const uint32_t odt[] = { I8, U8, I16, I32 };
	uint32_t sa[2] = { M, K }, sb[2] = { K, N }, so[2] = { M, N };

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_GEMM;
	op.a = mk(g, 0, pick_dtype(g, act_dtypes, 3), PLAIN, 2, sa, rnd(g, 0, 1));
	if (rnd(g, 0, 2) == 0) {
		/* b passed transposed: stored [N,K], viewed [K,N] by strides */
		uint32_t st[2] = { N, K };

		op.b = mk(g, 1, pick_dtype(g, act_dtypes, 3), PLAIN, 2, st, 0);
		op.b.shape[0] = K;
		op.b.shape[1] = N;
		op.b.stride[0] = 1;
		op.b.stride[1] = K;
	} else {
		op.b = mk(g, 1, pick_dtype(g, act_dtypes, 3), PLAIN, 2, sb, rnd(g, 0, 1));
	}
	op.a_zp = zp_for(g, op.a.dtype);
	op.b_zp = zp_for(g, op.b.dtype);
	if (rnd(g, 0, 1)) {
		op.hdr.flags |= DRM_METAINFER_OP_F_BIAS;
		op.bias = vec(g, 1, I32, N);
		for (n = 0; n < N; n++)
			write_i32(img[1], &op.bias, n, srnd(g, -INT32_MAX, INT32_MAX));
	}
	if (rnd(g, 0, 3)) {
		uint32_t cnt = rnd(g, 0, 1) ? N : 1;
		uint32_t out_dt = pick_dtype(g, odt, 4);

		op.hdr.flags |= DRM_METAINFER_OP_F_REQUANT;
		op.multiplier = vec(g, 1, I32, cnt);
		op.shift = vec(g, 1, I32, cnt);
		for (n = 0; n < cnt; n++) {
			write_i32(img[1], &op.multiplier, n, srnd(g, INT32_MIN, INT32_MAX));
			write_i32(img[1], &op.shift, n, srnd(g, -40, 40));
		}
		requant_params(g, &op.rq, out_dt);
		op.output = mk(g, 2, out_dt, PLAIN, 2, so, rnd(g, 0, 1));
	} else {
		op.output = mk(g, 2, I32, PLAIN, 2, so, rnd(g, 0, 1));
	}
	mi_stream_add(s, &op, sizeof(op));
}

/* A random shape of 1..4 dims, at most ~600 elements. */
static uint32_t rand_shape(struct gen *g, uint32_t *shape)
{
	uint32_t nd = rnd(g, 1, 4), k;

	for (k = 0; k < nd; k++)
		shape[k] = rnd(g, 1, nd == 1 ? 300 : nd == 2 ? 24 : 6);
	return nd;
}

static void gen_eltwise(struct gen *g, struct mi_stream *s, uint32_t opcode)
{
	struct drm_metainfer_op_eltwise op;
	uint32_t shape[4], nd = rand_shape(g, shape), k;
	uint32_t lay = PLAIN;

	memset(&op, 0, sizeof(op));
	op.hdr.op = opcode;
	if (nd == 4 && rnd(g, 0, 1))
		lay = rnd(g, 0, 1) ? NCHW : NHWC;
	op.a = mk(g, 0, pick_dtype(g, all_dtypes, 4), lay, nd, shape, rnd(g, 0, 1));
	op.b = mk(g, 1, pick_dtype(g, all_dtypes, 4), lay, nd, shape, rnd(g, 0, 1));
	if (rnd(g, 0, 1)) {
		/* broadcast b along random dims (stride 0) */
		uint64_t st = 1;

		for (k = nd; k-- > 0;) {
			op.b.stride[k] = rnd(g, 0, 1) ? 0 : st;
			st *= shape[k];
		}
		/* (all strides 0 would mean dense: also fine) */
	}
	op.output = mk(g, 2, pick_dtype(g, all_dtypes, 4), lay, nd, shape, rnd(g, 0, 1));
	op.a_zp = zp_for(g, op.a.dtype);
	op.b_zp = zp_for(g, op.b.dtype);
	if (opcode == DRM_METAINFER_OP_ADD) {
		op.a_mult = srnd(g, -40000, 40000);
		op.b_mult = srnd(g, -40000, 40000);
		op.shift = rnd(g, 0, 20);
	} else {
		op.a_mult = srnd(g, -3000, 3000);
		op.shift = rnd(g, 0, 30);
	}
	if (rnd(g, 0, 4) == 0) {
		/* plain integer arithmetic */
		op.a_mult = 1;
		op.b_mult = opcode == DRM_METAINFER_OP_ADD;
		op.shift = 0;
		op.a_zp = op.b_zp = 0;
	}
	requant_params(g, &op.rq, op.output.dtype);
	mi_stream_add(s, &op, sizeof(op));
}

static void gen_clip(struct gen *g, struct mi_stream *s, uint32_t opcode)
{
	struct drm_metainfer_op_clip op;
	uint32_t shape[4], nd = rand_shape(g, shape);
	uint32_t dt = pick_dtype(g, all_dtypes, 4);
	int64_t lo = mi_ref_dtype_min(dt), hi = mi_ref_dtype_max(dt);

	memset(&op, 0, sizeof(op));
	op.hdr.op = opcode;
	op.input = mk(g, 0, dt, PLAIN, nd, shape, rnd(g, 0, 1));
	op.output = mk(g, 2, dt, PLAIN, nd, shape, rnd(g, 0, 1));
	op.min = (int32_t)(lo + (int64_t)(mi_rand(&g->rng) % (uint64_t)((hi - lo) / 2 + 1)));
	if (opcode == DRM_METAINFER_OP_CLIP)
		op.max = (int32_t)(op.min + (int64_t)(mi_rand(&g->rng) % (uint64_t)(hi - op.min + 1)));
	mi_stream_add(s, &op, sizeof(op));
}

static void gen_pool(struct gen *g, struct mi_stream *s, uint32_t opcode)
{
	struct drm_metainfer_op_pool op;
	uint32_t lay = rnd(g, 0, 1) ? NCHW : NHWC;
	uint32_t N = rnd(g, 1, 2), C = rnd(g, 1, 6), H = rnd(g, 1, 10), W = rnd(g, 1, 10);
	uint32_t OH, OW, dt = pick_dtype(g, all_dtypes, 4);

	memset(&op, 0, sizeof(op));
	op.hdr.op = opcode;
	op.kernel_h = rnd(g, 1, 3);
	op.kernel_w = rnd(g, 1, 3);
	op.stride_h = rnd(g, 1, 3);
	op.stride_w = rnd(g, 1, 3);
	op.pad_top = rnd(g, 0, op.kernel_h - 1);
	op.pad_bottom = rnd(g, 0, op.kernel_h - 1);
	op.pad_left = rnd(g, 0, op.kernel_w - 1);
	op.pad_right = rnd(g, 0, op.kernel_w - 1);
	while (H + op.pad_top + op.pad_bottom < op.kernel_h)
		H++;
	while (W + op.pad_left + op.pad_right < op.kernel_w)
		W++;
	if (opcode == DRM_METAINFER_OP_AVGPOOL && rnd(g, 0, 1))
		op.hdr.flags = DRM_METAINFER_OP_F_COUNT_PAD;
	OH = (H + op.pad_top + op.pad_bottom - op.kernel_h) / op.stride_h + 1;
	OW = (W + op.pad_left + op.pad_right - op.kernel_w) / op.stride_w + 1;
	op.input = act(g, 0, dt, lay, N, C, H, W, rnd(g, 0, 1));
	op.output = act(g, 2, dt, lay, N, C, OH, OW, rnd(g, 0, 1));
	mi_stream_add(s, &op, sizeof(op));
}

static void gen_requantize(struct gen *g, struct mi_stream *s, uint8_t **img)
{
	struct drm_metainfer_op_requantize op;
	uint32_t shape[4], nd = rand_shape(g, shape), n, i;

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_REQUANTIZE;
	op.axis = rnd(g, 0, nd - 1);
	op.input = mk(g, 0, pick_dtype(g, all_dtypes, 4), PLAIN, nd, shape, rnd(g, 0, 1));
	op.output = mk(g, 2, pick_dtype(g, all_dtypes, 4), PLAIN, nd, shape, rnd(g, 0, 1));
	op.input_zp = zp_for(g, op.input.dtype);
	n = rnd(g, 0, 1) ? shape[op.axis] : 1;
	op.multiplier = vec(g, 1, I32, n);
	op.shift = vec(g, 1, I32, n);
	for (i = 0; i < n; i++) {
		write_i32(img[1], &op.multiplier, i, srnd(g, INT32_MIN, INT32_MAX));
		write_i32(img[1], &op.shift, i, srnd(g, -35, 35));
	}
	requant_params(g, &op.rq, op.output.dtype);
	mi_stream_add(s, &op, sizeof(op));
}

static void gen_copy(struct gen *g, struct mi_stream *s)
{
	struct drm_metainfer_op_copy op;
	uint32_t dt = pick_dtype(g, all_dtypes, 4);

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_COPY;
	if (rnd(g, 0, 1)) {
		/* layout conversion */
		uint32_t n = rnd(g, 1, 2), c = rnd(g, 1, 9), h = rnd(g, 1, 9), w = rnd(g, 1, 9);
		uint32_t li = rnd(g, 0, 1) ? NCHW : NHWC;

		op.input = act(g, 0, dt, li, n, c, h, w, rnd(g, 0, 1));
		op.output = act(g, 2, dt, li == NCHW ? NHWC : NCHW, n, c, h, w, rnd(g, 0, 1));
	} else {
		uint32_t shape[4], nd = rand_shape(g, shape);

		op.input = mk(g, 0, dt, PLAIN, nd, shape, rnd(g, 0, 1));
		op.output = mk(g, 2, dt, PLAIN, nd, shape, rnd(g, 0, 1));
	}
	mi_stream_add(s, &op, sizeof(op));
}

/*
 * LUT: int8/uint8 in any layout (dense or strided) through a random
 * table (dense or strided, in buffer 1) to int8/uint8.
 */
static void gen_lut(struct gen *g, struct mi_stream *s, uint8_t **img)
{
	static const uint32_t u8s[] = { I8, U8 };
	struct drm_metainfer_op_lut op;
	uint32_t in_dt = u8s[rnd(g, 0, 1)], out_dt = u8s[rnd(g, 0, 1)], i;
	uint32_t tshape[1] = { 256 };

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_LUT;
	if (rnd(g, 0, 1)) {
		uint32_t lay = rnd(g, 0, 1) ? NCHW : NHWC;
		uint32_t n = rnd(g, 1, 2), c = rnd(g, 1, 9), h = rnd(g, 1, 9), w = rnd(g, 1, 9);

		op.input = act(g, 0, in_dt, lay, n, c, h, w, rnd(g, 0, 1));
		op.output = act(g, 2, out_dt, lay, n, c, h, w, rnd(g, 0, 1));
	} else {
		uint32_t shape[4], nd = rand_shape(g, shape);

		op.input = mk(g, 0, in_dt, PLAIN, nd, shape, rnd(g, 0, 1));
		op.output = mk(g, 2, out_dt, PLAIN, nd, shape, rnd(g, 0, 1));
	}
	op.table = mk(g, 1, out_dt, PLAIN, 1, tshape, rnd(g, 0, 1));
	/* every entry distinct from its neighbours: an off-by-one shows */
	for (i = 0; i < 256; i++) {
		uint64_t st = op.table.stride[0] ? op.table.stride[0] : 1;

		img[1][op.table.offset + i * st] = (uint8_t)(i * 37 + rnd(g, 1, 36));
	}
	mi_stream_add(s, &op, sizeof(op));
}

enum gen_kind { G_CONV, G_GEMM, G_ADD, G_MUL, G_RELU, G_CLIP, G_MAXPOOL,
		G_AVGPOOL, G_REQUANTIZE, G_COPY, G_LUT };

static void run_cases(struct __test_metadata *_metadata, int fd, uint32_t ctx,
		      const char *variant, const char *test, enum gen_kind kind)
{
	int c;

	for (c = 0; c < CASES; c++) {
		uint64_t seed = case_seed(variant, test, c);
		struct gen g = { .rng = seed };
		struct bufs b;
		struct mi_stream s;

		memset(&b, 0, sizeof(b));
		ASSERT_EQ(0, mi_get_param(fd, DRM_METAINFER_PARAM_DTYPE_MASK, 0, &g.dtypes));
		ASSERT_EQ(0, bufs_init(fd, &b, &g.rng));
		mi_stream_init(&s);
		switch (kind) {
		case G_CONV:
			gen_conv(&g, &s, b.map);
			break;
		case G_GEMM:
			gen_gemm(&g, &s, b.map);
			break;
		case G_ADD:
			gen_eltwise(&g, &s, DRM_METAINFER_OP_ADD);
			break;
		case G_MUL:
			gen_eltwise(&g, &s, DRM_METAINFER_OP_MUL);
			break;
		case G_RELU:
			gen_clip(&g, &s, DRM_METAINFER_OP_RELU);
			break;
		case G_CLIP:
			gen_clip(&g, &s, DRM_METAINFER_OP_CLIP);
			break;
		case G_MAXPOOL:
			gen_pool(&g, &s, DRM_METAINFER_OP_MAXPOOL);
			break;
		case G_AVGPOOL:
			gen_pool(&g, &s, DRM_METAINFER_OP_AVGPOOL);
			break;
		case G_REQUANTIZE:
			gen_requantize(&g, &s, b.map);
			break;
		case G_COPY:
			gen_copy(&g, &s);
			break;
		case G_LUT:
			gen_lut(&g, &s, b.map);
			break;
		}
		ASSERT_EQ(0, g.overflow);
		run_and_compare(_metadata, fd, ctx, &b, &s, seed, test);
		mi_stream_free(&s);
		bufs_fini(&b);
		for (int i = 0; i < NBOS; i++)
			mi_bo_close(fd, b.h[i]);
	}
}

#define OPS_TEST(name, kind)                                                 \
	TEST_F_TIMEOUT(dev, name, 120)                                       \
	{                                                                    \
		run_cases(_metadata, self->fd, self->ctx, variant->pers, #name, \
			  kind);                                             \
	}

OPS_TEST(conv2d_matches_reference, G_CONV)
OPS_TEST(gemm_matches_reference, G_GEMM)
OPS_TEST(add_matches_reference, G_ADD)
OPS_TEST(mul_matches_reference, G_MUL)
OPS_TEST(relu_matches_reference, G_RELU)
OPS_TEST(clip_matches_reference, G_CLIP)
OPS_TEST(maxpool_matches_reference, G_MAXPOOL)
OPS_TEST(avgpool_matches_reference, G_AVGPOOL)
OPS_TEST(requantize_matches_reference, G_REQUANTIZE)
OPS_TEST(copy_matches_reference, G_COPY)

/* Devices that advertise LUT match the reference; the others refuse it. */
TEST_F_TIMEOUT(dev, lut_matches_reference, 120)
{
	uint64_t ops = 0;

	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_OP_MASK, 0, &ops));
	if (!(ops & (1ull << DRM_METAINFER_OP_LUT))) {
		uint64_t seed = case_seed(variant->pers, "lut", 0);
		struct gen g = { .rng = seed };
		struct mi_stream s;
		struct bufs b;
		uint64_t seq;

		memset(&b, 0, sizeof(b));
		ASSERT_EQ(0, bufs_init(self->fd, &b, &g.rng));
		mi_stream_init(&s);
		gen_lut(&g, &s, b.map);
		mi_stream_finish(&s);
		EXPECT_EQ(-EOPNOTSUPP, mi_submit(self->fd, self->ctx, b.h, NBOS,
						 s.buf, s.len, &seq));
		mi_stream_free(&s);
		bufs_fini(&b);
		for (int i = 0; i < NBOS; i++)
			mi_bo_close(self->fd, b.h[i]);
		return;
	}
	run_cases(_metadata, self->fd, self->ctx, variant->pers,
		  "lut_matches_reference", G_LUT);
}

/*
 * A chain in one job: each op reads the previous op's output (conv ->
 * requantize -> relu -> maxpool -> copy to the other layout).
 */
TEST_F_TIMEOUT(dev, chain_matches_reference, 120)
{
	uint64_t seed = case_seed(variant->pers, "chain", 0);
	struct gen g = { .rng = seed };
	struct drm_metainfer_op_conv2d conv;
	struct drm_metainfer_op_requantize rq;
	struct drm_metainfer_op_clip relu;
	struct drm_metainfer_op_pool pool;
	struct drm_metainfer_op_copy copy;
	struct mi_stream s;
	struct bufs b;
	uint32_t oc, lay = rnd(&g, 0, 1) ? NCHW : NHWC;

	memset(&b, 0, sizeof(b));
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_DTYPE_MASK, 0, &g.dtypes));
	ASSERT_EQ(0, bufs_init(self->fd, &b, &g.rng));

	memset(&conv, 0, sizeof(conv));
	conv.hdr.op = DRM_METAINFER_OP_CONV2D;
	conv.hdr.flags = DRM_METAINFER_OP_F_BIAS;
	conv.stride_h = conv.stride_w = conv.dilation_h = conv.dilation_w = 1;
	conv.pad_top = conv.pad_left = conv.pad_bottom = conv.pad_right = 1;
	conv.groups = 1;
	conv.input = act(&g, 0, I8, lay, 1, 3, 8, 8, 0);
	conv.weight = act(&g, 1, I8, lay, 4, 3, 3, 3, 0);
	conv.bias = vec(&g, 1, I32, 4);
	for (oc = 0; oc < 4; oc++)
		write_i32(b.map[1], &conv.bias, oc, srnd(&g, -5000, 5000));
	conv.input_zp = 3;
	conv.output = act(&g, 2, I32, lay, 1, 4, 8, 8, 0);

	memset(&rq, 0, sizeof(rq));
	rq.hdr.op = DRM_METAINFER_OP_REQUANTIZE;
	rq.axis = lay == NCHW ? 1 : 3;
	rq.input = conv.output;
	rq.output = act(&g, 2, I8, lay, 1, 4, 8, 8, 0);
	rq.multiplier = vec(&g, 1, I32, 4);
	rq.shift = vec(&g, 1, I32, 4);
	for (oc = 0; oc < 4; oc++) {
		write_i32(b.map[1], &rq.multiplier, oc, srnd(&g, 1 << 30, INT32_MAX));
		write_i32(b.map[1], &rq.shift, oc, -8);
	}
	rq.rq.output_zp = -5;
	rq.rq.act_min = -128;
	rq.rq.act_max = 127;

	memset(&relu, 0, sizeof(relu));
	relu.hdr.op = DRM_METAINFER_OP_RELU;
	relu.min = -5;
	relu.input = rq.output;
	relu.output = act(&g, 2, I8, lay, 1, 4, 8, 8, 0);

	memset(&pool, 0, sizeof(pool));
	pool.hdr.op = DRM_METAINFER_OP_MAXPOOL;
	pool.kernel_h = pool.kernel_w = 2;
	pool.stride_h = pool.stride_w = 2;
	pool.input = relu.output;
	pool.output = act(&g, 2, I8, lay, 1, 4, 4, 4, 0);

	memset(&copy, 0, sizeof(copy));
	copy.hdr.op = DRM_METAINFER_OP_COPY;
	copy.input = pool.output;
	copy.output = act(&g, 2, I8, lay == NCHW ? NHWC : NCHW, 1, 4, 4, 4, 0);

	mi_stream_init(&s);
	mi_stream_add(&s, &conv, sizeof(conv));
	mi_stream_add(&s, &rq, sizeof(rq));
	mi_stream_add(&s, &relu, sizeof(relu));
	mi_stream_add(&s, &pool, sizeof(pool));
	mi_stream_add(&s, &copy, sizeof(copy));
	ASSERT_EQ(0, g.overflow);
	run_and_compare(_metadata, self->fd, self->ctx, &b, &s, seed, "chain");
	mi_stream_free(&s);
	bufs_fini(&b);
}

/* Documented helper arithmetic, checked on hand-worked values. */
TEST(reference_arithmetic)
{
	/* rshift_round rounds halves towards +infinity */
	EXPECT_EQ(2, mi_ref_rshift_round(3, 1));
	EXPECT_EQ(-1, mi_ref_rshift_round(-3, 1));
	EXPECT_EQ(-2, mi_ref_rshift_round(-5, 1));
	EXPECT_EQ(7, mi_ref_rshift_round(7, 0));
	/* requant: t = 31 - S; M = 2^30, S = 0 -> scale 0.5 */
	EXPECT_EQ(50, mi_ref_requant(100, 1 << 30, 0, 0, -128, 127));
	EXPECT_EQ(51, mi_ref_requant(101, 1 << 30, 0, 0, -128, 127));
	EXPECT_EQ(127, mi_ref_requant(1000, 1 << 30, 0, 0, -128, 127));
	EXPECT_EQ(-128, mi_ref_requant(-1000, 1 << 30, 0, 0, -128, 127));
	EXPECT_EQ(60, mi_ref_requant(100, 1 << 30, 0, 10, -128, 127));
	/* S >= 31: t clamps to 0, no shift */
	EXPECT_EQ(200, mi_ref_requant(100, 2, 40, 0, INT32_MIN, INT32_MAX));
}

TEST_HARNESS_MAIN
