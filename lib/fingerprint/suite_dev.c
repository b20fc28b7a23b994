// SPDX-License-Identifier: MIT
/*
 * The suite on a command-stream device (a MetaInfer render node or an
 * emulated one): every point is one job of one uapi op over one buffer
 * (tensors at offsets), submitted and waited through the device's ops
 * table; a run's time is the device's own (job->busy_ns), the wall time
 * when the device reports none.  A point the device does not advertise
 * (op, dtype or layout mask) or rejects with -EOPNOTSUPP is stored with
 * fell_back set and no timing: the runtime would run it on the CPU.
 * Devices have no kernel variants: the variant is "device".
 *
 * Probes time one more op (jobs of 1 and 1 + k ops, differenced, so the
 * launch cancels): "bw" (COPY of x bytes: bytes moved per second; small
 * copies show the burst), "gemm" (64 x x x x GEMM, MAC/s: its drop is
 * the SRAM knee, weights x^2 bytes), "dw" (depthwise / dense 7x7 MAC
 * rate), "int8" (int8 / int16 GEMM rate, 0 without int16); "launch" is
 * the device ns of a one-element job, "submit" its wall ns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "device/device.h"
#include "fingerprint/fp-impl.h"

#define L_NCHW DRM_METAINFER_LAYOUT_NCHW
#define L_NHWC DRM_METAINFER_LAYOUT_NHWC
#define L_PLAIN DRM_METAINFER_LAYOUT_PLAIN

static uint32_t dtype_of(const char *s)
{
	return !strcmp(s, "int16") ? DRM_METAINFER_DTYPE_INT16 :
	       !strcmp(s, "int32") ? DRM_METAINFER_DTYPE_INT32 :
	       !strcmp(s, "uint8") ? DRM_METAINFER_DTYPE_UINT8 :
				     DRM_METAINFER_DTYPE_INT8;
}

static unsigned int esize(uint32_t dt)
{
	return dt == DRM_METAINFER_DTYPE_INT16 ? 2 :
	       dt == DRM_METAINFER_DTYPE_INT32 ? 4 : 1;
}

static int64_t dt_min(uint32_t dt)
{
	return dt == DRM_METAINFER_DTYPE_INT16 ? -32768 :
	       dt == DRM_METAINFER_DTYPE_UINT8 ? 0 :
	       dt == DRM_METAINFER_DTYPE_INT32 ? INT32_MIN : -128;
}

static int64_t dt_max(uint32_t dt)
{
	return dt == DRM_METAINFER_DTYPE_INT16 ? 32767 :
	       dt == DRM_METAINFER_DTYPE_UINT8 ? 255 :
	       dt == DRM_METAINFER_DTYPE_INT32 ? INT32_MAX : 127;
}

/* Lay tensors out one after another in buffer 0 (64-byte aligned). */
struct arena {
	uint64_t off;
};

static void tensor(struct arena *a, struct drm_metainfer_tensor *t,
		   uint32_t dt, uint32_t layout, int nd, const uint32_t *shape)
{
	uint64_t n = 1;

	memset(t, 0, sizeof(*t));
	t->dtype = dt;
	t->layout = layout;
	t->ndim = nd;
	for (int i = 0; i < nd; i++) {
		t->shape[i] = shape[i];
		n *= shape[i];
	}
	t->offset = a->off;
	a->off = (a->off + n * esize(dt) + 63) & ~63ull;
}

/* 4-D activation shape in the layout's order. */
static void act_shape(uint32_t layout, uint32_t n, uint32_t c, uint32_t h,
		      uint32_t w, uint32_t *s)
{
	s[0] = n;
	if (layout == L_NHWC) {
		s[1] = h;
		s[2] = w;
		s[3] = c;
	} else {
		s[1] = c;
		s[2] = h;
		s[3] = w;
	}
}

/* The stream of point s: one op.  *bytes: the buffer it needs. */
struct stream {
	struct drm_metainfer_stream_header sh;
	union {
		struct drm_metainfer_op_conv2d conv;
		struct drm_metainfer_op_gemm gemm;
		struct drm_metainfer_op_eltwise elt;
		struct drm_metainfer_op_clip clip;
		struct drm_metainfer_op_pool pool;
		struct drm_metainfer_op_requantize rq;
		struct drm_metainfer_op_copy copy;
	} u;
};

static uint32_t layout_of(const char *s)
{
	return !strcmp(s, "NHWC") ? L_NHWC : !strcmp(s, "NCHW") ? L_NCHW : L_PLAIN;
}

static void set_rq(struct drm_metainfer_requant *rq, uint32_t dt)
{
	rq->act_min = (int32_t)dt_min(dt);
	rq->act_max = (int32_t)dt_max(dt);
}

/* Build; returns the op (for the caps check) or -EINVAL. */
static int build(struct mi_fp_sample *s, struct stream *st, size_t *cmds,
		 uint64_t *bytes)
{
	const int64_t *p = s->p;
	uint32_t dt = dtype_of(s->dtype), lay = layout_of(s->layout);
	uint32_t sh[4], one[1] = { 1 };
	struct arena a = { 0 };
	int op;

	memset(st, 0, sizeof(*st));
	st->sh.magic = DRM_METAINFER_STREAM_MAGIC;
	st->sh.version = DRM_METAINFER_STREAM_VERSION;
	st->sh.op_count = 1;
	switch (s->family) {
	case MI_FP_CONV:
	case MI_FP_DWCONV: {
		struct drm_metainfer_op_conv2d *c = &st->u.conv;
		uint32_t k = p[5], oh = (p[2] + 2 * (k / 2) - k) / p[6] + 1;
		uint32_t cin_g = p[1] / p[7], bias[1] = { (uint32_t)p[4] };

		op = DRM_METAINFER_OP_CONV2D;
		c->hdr.size = sizeof(*c);
		c->hdr.flags = DRM_METAINFER_OP_F_BIAS | DRM_METAINFER_OP_F_REQUANT;
		c->stride_h = c->stride_w = p[6];
		c->dilation_h = c->dilation_w = 1;
		c->pad_top = c->pad_left = c->pad_bottom = c->pad_right = k / 2;
		c->groups = p[7];
		set_rq(&c->rq, dt);
		act_shape(lay, p[0], p[1], p[2], p[3], sh);
		tensor(&a, &c->input, dt, lay, 4, sh);
		if (lay == L_NHWC) {
			uint32_t w[4] = { (uint32_t)p[4], k, k, cin_g };

			tensor(&a, &c->weight, dt, lay, 4, w);
		} else {
			uint32_t w[4] = { (uint32_t)p[4], cin_g, k, k };

			tensor(&a, &c->weight, dt, lay, 4, w);
		}
		tensor(&a, &c->bias, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, bias);
		act_shape(lay, p[0], p[4], oh, oh, sh);
		tensor(&a, &c->output, dt, lay, 4, sh);
		tensor(&a, &c->multiplier, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, one);
		tensor(&a, &c->shift, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, one);
		s->work = (double)p[0] * p[4] * oh * oh * cin_g * k * k;
		break;
	}
	case MI_FP_GEMM: {
		struct drm_metainfer_op_gemm *g = &st->u.gemm;
		uint32_t am[2] = { (uint32_t)p[0], (uint32_t)p[1] };
		uint32_t bm[2] = { (uint32_t)p[1], (uint32_t)p[2] };
		uint32_t om[2] = { (uint32_t)p[0], (uint32_t)p[2] };
		uint32_t nb[1] = { (uint32_t)p[2] };

		op = DRM_METAINFER_OP_GEMM;
		g->hdr.size = sizeof(*g);
		g->hdr.flags = DRM_METAINFER_OP_F_BIAS | DRM_METAINFER_OP_F_REQUANT;
		set_rq(&g->rq, dt);
		tensor(&a, &g->a, dt, L_PLAIN, 2, am);
		tensor(&a, &g->b, dt, L_PLAIN, 2, bm);
		tensor(&a, &g->bias, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, nb);
		tensor(&a, &g->output, dt, L_PLAIN, 2, om);
		tensor(&a, &g->multiplier, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, one);
		tensor(&a, &g->shift, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, one);
		s->work = (double)p[0] * p[1] * p[2];
		break;
	}
	case MI_FP_POOL: {
		struct drm_metainfer_op_pool *q = &st->u.pool;
		uint32_t k = p[4], oh = (p[2] + 2 * (k / 2) - k) / p[5] + 1;

		op = !strcmp(s->op, "avgpool") ? DRM_METAINFER_OP_AVGPOOL :
						 DRM_METAINFER_OP_MAXPOOL;
		q->hdr.size = sizeof(*q);
		q->kernel_h = q->kernel_w = k;
		q->stride_h = q->stride_w = p[5];
		q->pad_top = q->pad_left = q->pad_bottom = q->pad_right = k / 2;
		act_shape(lay, p[0], p[1], p[2], p[3], sh);
		tensor(&a, &q->input, dt, lay, 4, sh);
		act_shape(lay, p[0], p[1], oh, oh, sh);
		tensor(&a, &q->output, dt, lay, 4, sh);
		s->work = (double)esize(dt) * p[0] * p[1] * (p[2] * p[3] + oh * oh);
		break;
	}
	case MI_FP_ELTWISE: {
		uint32_t n[1] = { (uint32_t)p[0] };

		if (!strcmp(s->op, "relu")) {
			struct drm_metainfer_op_clip *c = &st->u.clip;

			op = DRM_METAINFER_OP_RELU;
			c->hdr.size = sizeof(*c);
			tensor(&a, &c->input, dt, L_PLAIN, 1, n);
			tensor(&a, &c->output, dt, L_PLAIN, 1, n);
			s->work = 2.0 * esize(dt) * p[0];
		} else {
			struct drm_metainfer_op_eltwise *e = &st->u.elt;

			op = DRM_METAINFER_OP_ADD;
			e->hdr.size = sizeof(*e);
			e->a_mult = e->b_mult = 1;
			set_rq(&e->rq, dt);
			tensor(&a, &e->a, dt, L_PLAIN, 1, n);
			tensor(&a, &e->b, dt, L_PLAIN, 1, n);
			tensor(&a, &e->output, dt, L_PLAIN, 1, n);
			s->work = 3.0 * esize(dt) * p[0];
		}
		break;
	}
	case MI_FP_QUANT: {
		struct drm_metainfer_op_requantize *r = &st->u.rq;
		uint32_t n[1] = { (uint32_t)p[0] };

		op = DRM_METAINFER_OP_REQUANTIZE;
		r->hdr.size = sizeof(*r);
		set_rq(&r->rq, dt);
		tensor(&a, &r->input, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, n);
		tensor(&a, &r->output, dt, L_PLAIN, 1, n);
		tensor(&a, &r->multiplier, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, one);
		tensor(&a, &r->shift, DRM_METAINFER_DTYPE_INT32, L_PLAIN, 1, one);
		s->work = (4.0 + esize(dt)) * p[0];
		break;
	}
	case MI_FP_REORDER: {
		struct drm_metainfer_op_copy *c = &st->u.copy;

		op = DRM_METAINFER_OP_COPY;
		c->hdr.size = sizeof(*c);
		if (!strcmp(s->op, "copy")) { /* plain, p[0] elements */
			uint32_t n[1] = { (uint32_t)p[0] };

			tensor(&a, &c->input, dt, L_PLAIN, 1, n);
			tensor(&a, &c->output, dt, L_PLAIN, 1, n);
			s->work = 2.0 * esize(dt) * p[0];
			break;
		}
		act_shape(L_NCHW, p[0], p[1], p[2], p[3], sh);
		tensor(&a, &c->input, dt, L_NCHW, 4, sh);
		act_shape(L_NHWC, p[0], p[1], p[2], p[3], sh);
		tensor(&a, &c->output, dt, L_NHWC, 4, sh);
		s->work = 2.0 * esize(dt) * p[0] * p[1] * p[2] * p[3];
		break;
	}
	default:
		return -EINVAL;
	}
	st->u.conv.hdr.op = op;
	*cmds = sizeof(st->sh) + st->u.conv.hdr.size;
	*bytes = a.off;
	return op;
}

/* Does the device advertise what s needs? */
static bool caps_allow(const struct mi_dev_caps *c, int op,
		       const struct mi_fp_sample *s)
{
	uint32_t lay = layout_of(s->layout);

	return (c->op_mask & (1ull << op)) &&
	       (c->dtype_mask & (1ull << dtype_of(s->dtype))) &&
	       (lay == L_PLAIN || (c->layout_mask & (1ull << lay)));
}

/* One job: device ns (busy, or wall if none) and wall ns. */
static int run_job2(struct mi_dev *d, const void *st, size_t cmds,
		    struct mi_dev_bo *const *bos, int nbos, double *dev_ns,
		    double *wall_ns)
{
	struct mi_dev_job job = { .cmds = st, .cmds_size = cmds, .bos = bos,
				  .nbos = nbos };
	struct mi_dev_job *jp = &job;
	uint64_t t0 = mi_fp_now_ns();
	int err = d->ops->submit(d, &jp, 1);

	if (err)
		return err;
	err = d->ops->wait(d, &job, -1);
	*wall_ns = (double)(mi_fp_now_ns() - t0);
	d->ops->job_release(d, &job);
	if (err)
		return err;
	if (job.status)
		return job.status;
	*dev_ns = job.busy_ns ? (double)job.busy_ns : *wall_ns;
	return 0;
}

static int run_job(struct mi_dev *d, const void *st, size_t cmds,
		   struct mi_dev_bo *bo, double *dev_ns, double *wall_ns)
{
	struct mi_dev_bo *bos[1] = { bo };

	return run_job2(d, st, cmds, bos, 1, dev_ns, wall_ns);
}

/*
 * Device to device ("from:SRC"): a buffer of SRC exported as a dma-buf,
 * imported on this device, read by a COPY job into a buffer of its own
 * (PRIME, no CPU in between).  Without PRIME on either side the point
 * falls back: the runtime then goes through host memory (d2h + h2d).
 */
static int time_d2d(struct fp_run *r, struct mi_fp_sample *s)
{
	struct mi_dev *src = mi_dev_find(s->op + 5);
	struct mi_dev_bo *sb = NULL, *ib = NULL, *lb = NULL, *bos[2];
	struct {
		struct drm_metainfer_stream_header sh;
		struct drm_metainfer_op_copy c;
	} st = { 0 };
	uint32_t n[1] = { (uint32_t)s->p[0] };
	double ns[32];
	int warm, runs, k = 0, err;

	s->fell_back = false;
	s->work = 2.0 * s->p[0];
	if (!src || !src->ops->bo_export || !r->d->ops->bo_import ||
	    !(r->d->caps.op_mask & (1ull << DRM_METAINFER_OP_COPY))) {
		s->fell_back = true;
		return 0;
	}
	err = mi_dev_bo_alloc(src, s->p[0], &sb);
	if (!err)
		err = src->ops->bo_export(sb);
	if (!err)
		err = r->d->ops->bo_import(r->d, sb->prime_fd, s->p[0], &ib);
	if (!err)
		err = mi_dev_bo_alloc(r->d, s->p[0], &lb);
	if (err)
		goto out;
	st.sh.magic = DRM_METAINFER_STREAM_MAGIC;
	st.sh.version = DRM_METAINFER_STREAM_VERSION;
	st.sh.op_count = 1;
	st.c.hdr.op = DRM_METAINFER_OP_COPY;
	st.c.hdr.size = sizeof(st.c);
	st.c.input = (struct drm_metainfer_tensor){ .bo_index = 0,
		.dtype = DRM_METAINFER_DTYPE_UINT8, .ndim = 1, .shape = { n[0] } };
	st.c.output = st.c.input;
	st.c.output.bo_index = 1;
	bos[0] = ib;
	bos[1] = lb;
	mi_fp_runs(r->grid, &warm, &runs);
	for (int i = 0; i < warm + runs && !err; i++) {
		double t, w;

		err = run_job2(r->d, &st, sizeof(st), bos, 2, &t, &w);
		if (!err && i >= warm)
			ns[k++] = t;
	}
	if (!err)
		mi_fp_stats(ns, k, s);
out:
	mi_dev_bo_free(lb);
	mi_dev_bo_free(ib);
	mi_dev_bo_free(sb);
	if (err == -EOPNOTSUPP) {
		s->fell_back = true;
		err = 0;
	}
	return err;
}

/* Host -> device (h2d) or back (d2h): memcpy through the device
 * buffer's CPU mapping, the way the executor moves tensors. */
static int time_h2d(struct fp_run *r, struct mi_fp_sample *s)
{
	size_t n = s->p[0];
	struct mi_dev_bo *bo;
	double ns[32];
	uint8_t *src = malloc(n);
	int warm, runs, err = src ? mi_dev_bo_alloc(r->d, n, &bo) : -ENOMEM;

	if (err) {
		free(src);
		return err;
	}
	memset(src, 3, n);
	mi_fp_runs(r->grid, &warm, &runs);
	for (int i = 0; i < warm + runs; i++) {
		uint64_t t0 = mi_fp_now_ns();

		if (!strcmp(s->op, "d2h"))
			memcpy(src, bo->map, n);
		else
			memcpy(bo->map, src, n);
		__asm__ volatile("" ::"r"(bo->map), "r"(src) : "memory");
		if (i >= warm)
			ns[i - warm] = (double)(mi_fp_now_ns() - t0);
	}
	s->work = n;
	mi_fp_stats(ns, runs, s);
	mi_dev_bo_free(bo);
	free(src);
	return 0;
}

static int dev_measure_wall(struct fp_run *r, struct mi_fp_sample *s,
			    double *wall_med)
{
	struct stream st;
	struct mi_dev_bo *bo;
	double ns[32], wall[32];
	uint64_t bytes;
	size_t cmds;
	int warm, runs, n = 0, op, err = 0;

	s->fell_back = false;
	if (s->family == MI_FP_TRANSFER && !strncmp(s->op, "from:", 5))
		return time_d2d(r, s);
	if (s->family == MI_FP_TRANSFER)
		return time_h2d(r, s);
	op = build(s, &st, &cmds, &bytes);
	if (op < 0)
		return mi_set_error(op, "fingerprint: no stream for %s", s->op);
	if (!caps_allow(&r->d->caps, op, s)) {
		s->fell_back = true;
		return 0;
	}
	err = mi_dev_bo_alloc(r->d, bytes, &bo);
	if (err)
		return err;
	mi_fp_runs(r->grid, &warm, &runs);
	for (int i = 0; i < warm + runs && !err; i++) {
		double t, w;

		err = run_job(r->d, &st, cmds, bo, &t, &w);
		if (err || i < warm)
			continue;
		ns[n] = t;
		wall[n++] = w;
		/* modelled times repeat exactly: three equal runs suffice */
		if (n == 3 && ns[0] == ns[1] && ns[1] == ns[2])
			break;
	}
	mi_dev_bo_free(bo);
	if (err == -EOPNOTSUPP) {
		s->fell_back = true;
		return 0;
	}
	if (err)
		return err;
	mi_fp_stats(ns, n, s);
	if (wall_med) {
		struct mi_fp_sample ws = { 0 };

		mi_fp_stats(wall, n, &ws);
		*wall_med = ws.median_ns;
	}
	return 0;
}

static int dev_measure(struct fp_run *r, struct mi_fp_sample *s)
{
	return dev_measure_wall(r, s, NULL);
}

/* ---- the grid ----------------------------------------------------------- */
struct dev_pt {
	int family;
	const char *op, *dtype, *layout;
	int64_t p[MI_FP_NPARAM];
	int grid;
};

/* Small shapes: an emulated device computes them on the CPU's reference. */
static const struct dev_pt dev_grid[] = {
	{ MI_FP_CONV, "conv2d", "int8", "NCHW", { 1, 16, 14, 14, 16, 3, 1, 1 }, MI_FP_GRID_TINY },
	{ MI_FP_CONV, "conv2d", "int8", "NCHW", { 1, 32, 14, 14, 32, 1, 1, 1 }, MI_FP_GRID_TINY },
	{ MI_FP_CONV, "conv2d", "int8", "NHWC", { 1, 16, 14, 14, 16, 3, 1, 1 }, MI_FP_GRID_QUICK },
	{ MI_FP_CONV, "conv2d", "int16", "NCHW", { 1, 16, 14, 14, 16, 3, 1, 1 }, MI_FP_GRID_QUICK },
	{ MI_FP_CONV, "conv2d", "int8", "NCHW", { 1, 16, 28, 28, 32, 3, 2, 1 }, MI_FP_GRID_QUICK },
	{ MI_FP_CONV, "conv2d", "int8", "NCHW", { 1, 32, 14, 14, 32, 3, 1, 4 }, MI_FP_GRID_QUICK },
	{ MI_FP_CONV, "conv2d", "int8", "NCHW", { 1, 32, 28, 28, 32, 3, 1, 1 }, MI_FP_GRID_FULL },
	{ MI_FP_CONV, "conv2d", "int8", "NCHW", { 1, 64, 14, 14, 64, 1, 1, 1 }, MI_FP_GRID_FULL },
	{ MI_FP_DWCONV, "conv2d", "int8", "NCHW", { 1, 32, 14, 14, 32, 3, 1, 32 }, MI_FP_GRID_TINY },
	{ MI_FP_DWCONV, "conv2d", "int8", "NCHW", { 1, 32, 28, 28, 32, 3, 2, 32 }, MI_FP_GRID_QUICK },
	{ MI_FP_DWCONV, "conv2d", "int8", "NHWC", { 1, 32, 14, 14, 32, 3, 1, 32 }, MI_FP_GRID_FULL },
	{ MI_FP_GEMM, "gemm", "int8", "plain", { 32, 64, 64 }, MI_FP_GRID_TINY },
	{ MI_FP_GEMM, "gemm", "int8", "plain", { 1, 256, 256 }, MI_FP_GRID_QUICK },
	{ MI_FP_GEMM, "gemm", "int16", "plain", { 32, 64, 64 }, MI_FP_GRID_QUICK },
	{ MI_FP_GEMM, "gemm", "int8", "plain", { 64, 128, 128 }, MI_FP_GRID_FULL },
	{ MI_FP_POOL, "maxpool", "int8", "NCHW", { 1, 16, 28, 28, 3, 2 }, MI_FP_GRID_TINY },
	{ MI_FP_POOL, "avgpool", "int8", "NCHW", { 1, 16, 28, 28, 3, 1 }, MI_FP_GRID_QUICK },
	{ MI_FP_ELTWISE, "add", "int8", "plain", { 16384 }, MI_FP_GRID_TINY },
	{ MI_FP_ELTWISE, "relu", "int8", "plain", { 16384 }, MI_FP_GRID_QUICK },
	{ MI_FP_ELTWISE, "add", "int8", "plain", { 262144 }, MI_FP_GRID_FULL },
	{ MI_FP_REORDER, "nchw2nhwc", "int8", "NCHW", { 1, 16, 14, 14 }, MI_FP_GRID_TINY },
	{ MI_FP_REORDER, "nchw2nhwc", "int8", "NCHW", { 1, 32, 28, 28 }, MI_FP_GRID_FULL },
	{ MI_FP_QUANT, "requantize", "int8", "plain", { 16384 }, MI_FP_GRID_TINY },
	{ MI_FP_QUANT, "requantize", "int16", "plain", { 16384 }, MI_FP_GRID_FULL },
	{ MI_FP_TRANSFER, "h2d", "uint8", "plain", { 65536 }, MI_FP_GRID_TINY },
	{ MI_FP_TRANSFER, "d2h", "uint8", "plain", { 65536 }, MI_FP_GRID_TINY },
	{ MI_FP_TRANSFER, "h2d", "uint8", "plain", { 1048576 }, MI_FP_GRID_QUICK },
	{ MI_FP_TRANSFER, "d2h", "uint8", "plain", { 1048576 }, MI_FP_GRID_QUICK },
};

#define NDEV_PT (int)(sizeof(dev_grid) / sizeof(dev_grid[0]))

static int dev_grid_fn(struct fp_run *r, struct mi_fp_sample *pts, int max)
{
	int n = 0;

	for (int i = 0; i < NDEV_PT; i++) {
		const struct dev_pt *c = &dev_grid[i];

		if (c->grid < r->grid)
			continue;
		if (n < max) {
			memset(&pts[n], 0, sizeof(pts[n]));
			pts[n].family = c->family;
			snprintf(pts[n].op, sizeof(pts[n].op), "%s", c->op);
			snprintf(pts[n].dtype, sizeof(pts[n].dtype), "%s", c->dtype);
			snprintf(pts[n].layout, sizeof(pts[n].layout), "%s", c->layout);
			memcpy(pts[n].p, c->p, sizeof(c->p));
			pts[n].threads = 1;
		}
		n++;
	}
	/* transfers from every other accelerator (PRIME) */
	for (int i = 0; i < mi_dev_count(); i++) {
		struct mi_dev *e = mi_dev_get(i);

		if (!e || e == r->d || e->kind == MI_DEV_CPU)
			continue;
		if (n < max) {
			memset(&pts[n], 0, sizeof(pts[n]));
			pts[n].family = MI_FP_TRANSFER;
			snprintf(pts[n].op, sizeof(pts[n].op), "from:%.18s", e->name);
			snprintf(pts[n].dtype, sizeof(pts[n].dtype), "uint8");
			snprintf(pts[n].layout, sizeof(pts[n].layout), "plain");
			pts[n].p[0] = r->grid == MI_FP_GRID_TINY ? 65536 : 1048576;
			pts[n].threads = 1;
		}
		n++;
	}
	return n;
}

static int dev_check_points(struct fp_run *r, int *idx)
{
	/* conv 3x3, gemm, add: the first rows of the table (every grid) */
	idx[0] = 0;
	idx[2] = -1;
	idx[1] = -1;
	for (int i = 0, n = 0; i < NDEV_PT; i++) {
		if (dev_grid[i].grid < r->grid)
			continue;
		if (idx[1] < 0 && dev_grid[i].family == MI_FP_GEMM)
			idx[1] = n;
		if (idx[2] < 0 && dev_grid[i].family == MI_FP_ELTWISE)
			idx[2] = n;
		n++;
	}
	return idx[1] >= 0 && idx[2] >= 0 ? 0 : -EINVAL;
}

static int dev_variants(struct fp_run *r, const struct mi_fp_sample *pt,
			char (*names)[32], int max)
{
	snprintf(names[0], 32, "%s",
		 pt->family != MI_FP_TRANSFER ? "device" :
		 !strncmp(pt->op, "from:", 5) ? "prime" : "host");
	return 1;
}

/*
 * Device time of one more op: jobs of 1 and 1 + k copies of s's op, the
 * difference of their medians over k (the launch cancels out, so small
 * ops show their own cost: bursts, compute).  0 with *fell_back when
 * the device does not run the op.
 */
static int marginal(struct fp_run *r, struct mi_fp_sample *s, int k,
		    double *t_op, bool *fell_back)
{
	struct stream st;
	struct mi_dev_bo *bo;
	uint64_t bytes;
	size_t cmds, opsz;
	uint8_t *buf;
	double med[2];
	int op, err = 0;

	*t_op = 0;
	*fell_back = false;
	op = build(s, &st, &cmds, &bytes);
	if (op < 0)
		return mi_set_error(op, "fingerprint: no stream for %s", s->op);
	if (!caps_allow(&r->d->caps, op, s)) {
		*fell_back = true;
		return 0;
	}
	opsz = cmds - sizeof(st.sh);
	buf = malloc(sizeof(st.sh) + (size_t)(1 + k) * opsz);
	if (!buf)
		return -ENOMEM;
	for (int i = 0; i <= k; i++)
		memcpy(buf + sizeof(st.sh) + i * opsz, &st.u, opsz);
	err = mi_dev_bo_alloc(r->d, bytes, &bo);
	for (int j = 0; j < 2 && !err; j++) {
		struct drm_metainfer_stream_header sh = st.sh;
		double ns[5];
		int n = 0;

		sh.op_count = j ? 1 + k : 1;
		memcpy(buf, &sh, sizeof(sh));
		for (int i = 0; i < 4 && !err; i++) {
			double t, w;

			err = run_job(r->d, buf, sizeof(sh) + sh.op_count * opsz,
				      bo, &t, &w);
			if (!err && i)
				ns[n++] = t;
		}
		if (!err) {
			struct mi_fp_sample x = { 0 };

			mi_fp_stats(ns, n, &x);
			med[j] = x.median_ns;
		}
	}
	if (!err)
		mi_dev_bo_free(bo);
	free(buf);
	if (err == -EOPNOTSUPP) {
		*fell_back = true;
		return 0;
	}
	if (err)
		return err;
	*t_op = med[1] > med[0] ? (med[1] - med[0]) / k : 0;
	return 0;
}

/* ---- probes ------------------------------------------------------------- */
static const double dev_bw_sizes[] = { 16, 64, 256, 1024, 4096, 16384,
				       65536, 262144 };
static const double dev_gemm_sizes[] = { 64, 128, 256, 512, 768 };

static int dev_probe_point(struct fp_run *r, int i, char *name, double *x)
{
	int ng = r->grid == MI_FP_GRID_TINY ? 4 : 5;

	if (i < 8) {
		snprintf(name, 24, "bw");
		*x = dev_bw_sizes[i];
		return 1;
	}
	i -= 8;
	if (i < ng) {
		snprintf(name, 24, "gemm");
		*x = dev_gemm_sizes[i];
		return 1;
	}
	i -= ng;
	if (i < 4) {
		static const char *const nm[] = { "launch", "submit", "dw", "int8" };

		snprintf(name, 24, "%s", nm[i]);
		*x = i < 2 ? 0 : 1;
		return 1;
	}
	return 0;
}

static void pt(struct mi_fp_sample *s, int family, const char *op,
	       const char *dtype, const char *layout)
{
	memset(s, 0, sizeof(*s));
	s->family = family;
	s->threads = 1;
	snprintf(s->op, sizeof(s->op), "%s", op);
	snprintf(s->dtype, sizeof(s->dtype), "%s", dtype);
	snprintf(s->layout, sizeof(s->layout), "%s", layout);
	snprintf(s->variant, sizeof(s->variant), "device");
}

static int dev_probe(struct fp_run *r, const char *name, double x, double *y)
{
	struct mi_fp_sample s, t;
	double wall = 0, ts, tt;
	bool fb, fb2;
	int err;

	*y = 0;
	if (!strcmp(name, "launch") || !strcmp(name, "submit")) {
		pt(&s, MI_FP_REORDER, "copy", "int8", "plain");
		s.p[0] = 1;
		err = dev_measure_wall(r, &s, &wall);
		*y = !strcmp(name, "launch") ? s.median_ns : wall;
		return err;
	}
	if (!strcmp(name, "bw")) {
		pt(&s, MI_FP_REORDER, "copy", "int8", "plain");
		s.p[0] = (int64_t)x;
		err = marginal(r, &s, 8, &ts, &fb);
		*y = !err && ts > 0 ? 2 * x * 1e9 / ts : 0;
		return err;
	}
	if (!strcmp(name, "gemm")) {
		/* 64 x K=x x N=x: weights x^2 bytes cross the SRAM size */
		pt(&s, MI_FP_GEMM, "gemm", "int8", "plain");
		s.p[0] = 64;
		s.p[1] = s.p[2] = (int64_t)x;
		err = marginal(r, &s, 1, &ts, &fb);
		*y = !err && ts > 0 ? s.work * 1e9 / ts : 0;
		return err;
	}
	if (!strcmp(name, "dw")) {
		/* 7x7: enough MACs per byte that the depthwise unit, not the
		 * DMA, sets the time */
		int64_t p[MI_FP_NPARAM] = { 1, 16, 14, 14, 16, 7, 1, 1 };

		pt(&s, MI_FP_CONV, "conv2d", "int8", "NCHW");
		memcpy(s.p, p, sizeof(p));
		t = s;
		t.family = MI_FP_DWCONV;
		t.p[7] = 16;
	} else {
		pt(&s, MI_FP_GEMM, "gemm", "int16", "plain");
		s.p[0] = s.p[1] = s.p[2] = 32;
		t = s;
		snprintf(t.dtype, sizeof(t.dtype), "int8");
	}
	err = marginal(r, &s, 2, &ts, &fb);
	if (!err)
		err = marginal(r, &t, 2, &tt, &fb2);
	if (!err && !fb && !fb2 && ts > 0 && tt > 0)
		*y = (t.work / tt) / (s.work / ts);
	return err;
}

const struct fp_backend mi_fp_dev_backend = {
	.grid = dev_grid_fn,
	.variants = dev_variants,
	.measure = dev_measure,
	.probe_point = dev_probe_point,
	.probe = dev_probe,
	.check_points = dev_check_points,
};
