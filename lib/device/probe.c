// SPDX-License-Identifier: MIT
/*
 * How fast an accelerator really runs, in MACs per second of wall time.
 *
 * A device's job timeout counts wall time.  Its capabilities (MACs per
 * cycle x clock) say how fast the silicon would be; a simulated chip also
 * computes every result on the host's CPU and completes at the later of
 * its modelled end and the computation's (Documentation/sim.rst), so
 * under an emulator (QEMU TCG) it is far slower than its caps.  Small
 * int8 jobs, each run twice (the faster counts), measure it once per
 * device and process: a GEMM (M x K x N = 128 x 256 x 128, 4.2 M MACs)
 * and a 3x3 conv (32 -> 32 channels on 16x16, 2.4 M MACs) give the dense
 * rate (the slower of the two: the sim's conv loops are not its GEMM's),
 * a depthwise 3x3 conv (64 channels on 32x32, 0.6 M MACs) the grouped
 * one (at most the dense).  Placement sizes jobs by the slower of caps
 * and wall (lib/plan/place.c).  A job that timed out lowers both
 * (mi_dev_wall_rate_cap).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/device.h"
#include "internal.h"

#define PROBE_M 128
#define PROBE_K 256
#define PROBE_N 128
#define PROBE_RUNS 2

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void plain2(struct drm_metainfer_tensor *t, uint32_t dt, uint64_t off,
		   uint32_t r, uint32_t c)
{
	memset(t, 0, sizeof(*t));
	t->bo_index = 0;
	t->dtype = dt;
	t->layout = DRM_METAINFER_LAYOUT_PLAIN;
	t->ndim = 2;
	t->offset = off;
	t->shape[0] = r;
	t->shape[1] = c;
}

/* One timed run of the probe job; 0 or -errno. */
static int probe_once(struct mi_dev *d, struct mi_dev_bo *bo, const void *cmds,
		      size_t size, uint64_t *ns)
{
	struct mi_dev_bo *bos[1] = { bo };
	struct mi_dev_job job = { .cmds = cmds, .cmds_size = size, .bos = bos,
				  .nbos = 1,
				  .priority = DRM_METAINFER_PRIORITY_NORMAL };
	struct mi_dev_job *jp = &job;
	uint64_t t0 = now_ns();
	int err;

	err = d->ops->submit(d, &jp, 1);
	if (err)
		return err;
	err = d->ops->wait(d, &job, -1);
	d->ops->job_release(d, &job);
	if (!err)
		err = job.status;
	*ns = now_ns() - t0;
	return err;
}

static void nchw(struct drm_metainfer_tensor *t, uint32_t dt, uint64_t off,
		 uint32_t n, uint32_t c, uint32_t h, uint32_t w)
{
	memset(t, 0, sizeof(*t));
	t->dtype = dt;
	t->layout = DRM_METAINFER_LAYOUT_NCHW;
	t->ndim = 4;
	t->offset = off;
	t->shape[0] = n;
	t->shape[1] = c;
	t->shape[2] = h;
	t->shape[3] = w;
}

/* MACs per wall second of one probe job (the faster of PROBE_RUNS), 0
 * when it cannot run. */
static uint64_t probe_rate(struct mi_dev *d, const void *cmds, size_t size,
			   size_t bytes, uint64_t macs)
{
	struct mi_dev_bo *bo = NULL;
	uint64_t best = UINT64_MAX;

	if (mi_dev_bo_alloc(d, bytes, &bo)) {
		mi_clear_error();
		return 0;
	}
	for (size_t i = 0; i < bytes; i++)
		((signed char *)bo->map)[i] = (signed char)(i * 37 % 255 - 127);
	for (int r = 0; r < PROBE_RUNS; r++) {
		uint64_t ns;

		if (probe_once(d, bo, cmds, size, &ns)) {
			mi_clear_error();
			best = UINT64_MAX;
			break;
		}
		if (ns < best)
			best = ns;
	}
	mi_dev_bo_free(bo);
	if (best == UINT64_MAX)
		return 0;
	return (uint64_t)((double)macs * 1e9 / (double)(best ? best : 1));
}

/* 32 -> 32 channels, 3x3, pad 1, on 16x16: 2.4 M MACs; depthwise: 64
 * channels, 3x3, pad 1, on 32x32: 0.6 M MACs */
#define PC 32
#define PH 16
#define DC 64
#define DH 32

static void conv_stream(struct drm_metainfer_stream_header *h,
			struct drm_metainfer_op_conv2d *c, uint32_t cin,
			uint32_t cout, uint32_t groups, uint32_t hw,
			size_t *bytes)
{
	const size_t cw = (size_t)cin * hw * hw;
	const size_t co = cw + (size_t)cout * (cin / groups) * 9;

	memset(h, 0, sizeof(*h));
	memset(c, 0, sizeof(*c));
	h->magic = DRM_METAINFER_STREAM_MAGIC;
	h->version = DRM_METAINFER_STREAM_VERSION;
	h->op_count = 1;
	c->hdr.op = DRM_METAINFER_OP_CONV2D;
	c->hdr.size = sizeof(*c);
	c->stride_h = c->stride_w = 1;
	c->dilation_h = c->dilation_w = 1;
	c->pad_top = c->pad_left = c->pad_bottom = c->pad_right = 1;
	c->groups = groups;
	nchw(&c->input, DRM_METAINFER_DTYPE_INT8, 0, 1, cin, hw, hw);
	nchw(&c->weight, DRM_METAINFER_DTYPE_INT8, cw, cout, cin / groups, 3, 3);
	nchw(&c->output, DRM_METAINFER_DTYPE_INT32, co, 1, cout, hw, hw);
	*bytes = co + 4 * (size_t)cout * hw * hw;
}

static void probe_all(struct mi_dev *d)
{
	struct {
		struct drm_metainfer_stream_header h;
		struct drm_metainfer_op_gemm g;
	} s;
	struct {
		struct drm_metainfer_stream_header h;
		struct drm_metainfer_op_conv2d c;
	} cs;
	const size_t b = PROBE_M * PROBE_K, o = b + PROBE_K * PROBE_N;
	uint64_t dense = UINT64_MAX, grouped = 0, r;
	size_t bytes;

	if (d->caps.op_mask & (1ull << DRM_METAINFER_OP_GEMM)) {
		memset(&s, 0, sizeof(s));
		s.h.magic = DRM_METAINFER_STREAM_MAGIC;
		s.h.version = DRM_METAINFER_STREAM_VERSION;
		s.h.op_count = 1;
		s.g.hdr.op = DRM_METAINFER_OP_GEMM;
		s.g.hdr.size = sizeof(s.g);
		plain2(&s.g.a, DRM_METAINFER_DTYPE_INT8, 0, PROBE_M, PROBE_K);
		plain2(&s.g.b, DRM_METAINFER_DTYPE_INT8, b, PROBE_K, PROBE_N);
		plain2(&s.g.output, DRM_METAINFER_DTYPE_INT32, o, PROBE_M,
		       PROBE_N);
		r = probe_rate(d, &s, sizeof(s), o + 4 * PROBE_M * PROBE_N,
			       (uint64_t)PROBE_M * PROBE_K * PROBE_N);
		if (r && r < dense)
			dense = r;
	}
	if ((d->caps.op_mask & (1ull << DRM_METAINFER_OP_CONV2D)) &&
	    (d->caps.layout_mask & (1ull << DRM_METAINFER_LAYOUT_NCHW))) {
		conv_stream(&cs.h, &cs.c, PC, PC, 1, PH, &bytes);
		r = probe_rate(d, &cs, sizeof(cs), bytes,
			       (uint64_t)PC * PC * 9 * PH * PH);
		if (r && r < dense)
			dense = r;
		conv_stream(&cs.h, &cs.c, DC, DC, DC, DH, &bytes);
		grouped = probe_rate(d, &cs, sizeof(cs), bytes,
				     (uint64_t)DC * 9 * DH * DH);
	}
	if (dense == UINT64_MAX)
		dense = 0;
	if (!grouped || (dense && dense < grouped))
		grouped = dense;
	atomic_store(&d->wall_rate_grouped, grouped ? grouped : 1);
	atomic_store(&d->wall_rate, dense ? dense : 1);
}

uint64_t mi_dev_wall_rate(struct mi_dev *d, bool grouped)
{
	uint64_t rate;

	if (d->kind == MI_DEV_CPU ||
	    !(d->caps.dtype_mask & (1ull << DRM_METAINFER_DTYPE_INT8)))
		return 0;
	if (!atomic_load(&d->wall_rate))
		probe_all(d);
	rate = atomic_load(grouped ? &d->wall_rate_grouped : &d->wall_rate);
	return rate > 1 ? rate : 0;
}

void mi_dev_wall_rate_cap(struct mi_dev *d, uint64_t macs, uint64_t ns)
{
	uint64_t r = (uint64_t)((double)macs * 1e9 / (double)(ns ? ns : 1));

	if (!r)
		return;
	if (atomic_load(&d->wall_rate) <= 1 || r < atomic_load(&d->wall_rate))
		atomic_store(&d->wall_rate, r);
	if (atomic_load(&d->wall_rate_grouped) <= 1 ||
	    r < atomic_load(&d->wall_rate_grouped))
		atomic_store(&d->wall_rate_grouped, r);
}
