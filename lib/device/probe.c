// SPDX-License-Identifier: MIT
/*
 * How fast an accelerator really runs, in MACs per second of wall time.
 *
 * A device's job timeout counts wall time.  Its capabilities (MACs per
 * cycle x clock) say how fast the silicon would be; a simulated chip also
 * computes every result on the host's CPU and completes at the later of
 * its modelled end and the computation's (Documentation/sim.rst), so
 * under an emulator (QEMU TCG) it is far slower than its caps.  Two
 * small int8 jobs, a GEMM (M x K x N = 128 x 256 x 128, 4.2 M MACs) and
 * a 3x3 conv (32 -> 32 channels on 16x16, 2.4 M MACs), each run twice,
 * measure it once per device and process (the slower op counts: the
 * sim's conv loops are not its GEMM's); placement then sizes jobs by the
 * slower of caps and wall (lib/plan/place.c).  A job that timed out
 * lowers it further (mi_dev_wall_rate_cap).
 */
#include <errno.h>
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

/* 32 -> 32 channels, 3x3, pad 1, on 16x16: 2.4 M MACs */
#define PC 32
#define PH 16

uint64_t mi_dev_wall_rate(struct mi_dev *d)
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
	const size_t cw = PC * PH * PH, co = cw + PC * PC * 9;
	uint64_t rate = atomic_load(&d->wall_rate), r;

	if (rate || d->kind == MI_DEV_CPU ||
	    !(d->caps.dtype_mask & (1ull << DRM_METAINFER_DTYPE_INT8)))
		return rate;
	rate = UINT64_MAX;
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
		if (r && r < rate)
			rate = r;
	}
	if ((d->caps.op_mask & (1ull << DRM_METAINFER_OP_CONV2D)) &&
	    (d->caps.layout_mask & (1ull << DRM_METAINFER_LAYOUT_NCHW))) {
		memset(&cs, 0, sizeof(cs));
		cs.h.magic = DRM_METAINFER_STREAM_MAGIC;
		cs.h.version = DRM_METAINFER_STREAM_VERSION;
		cs.h.op_count = 1;
		cs.c.hdr.op = DRM_METAINFER_OP_CONV2D;
		cs.c.hdr.size = sizeof(cs.c);
		cs.c.stride_h = cs.c.stride_w = 1;
		cs.c.dilation_h = cs.c.dilation_w = 1;
		cs.c.pad_top = cs.c.pad_left = cs.c.pad_bottom = cs.c.pad_right = 1;
		cs.c.groups = 1;
		nchw(&cs.c.input, DRM_METAINFER_DTYPE_INT8, 0, 1, PC, PH, PH);
		nchw(&cs.c.weight, DRM_METAINFER_DTYPE_INT8, cw, PC, PC, 3, 3);
		nchw(&cs.c.output, DRM_METAINFER_DTYPE_INT32, co, 1, PC, PH, PH);
		r = probe_rate(d, &cs, sizeof(cs), co + 4 * PC * PH * PH,
			       (uint64_t)PC * PC * 9 * PH * PH);
		if (r && r < rate)
			rate = r;
	}
	if (rate == UINT64_MAX)
		return 0;
	atomic_store(&d->wall_rate, rate ? rate : 1);
	return rate ? rate : 1;
}

void mi_dev_wall_rate_cap(struct mi_dev *d, uint64_t macs, uint64_t ns)
{
	uint64_t r = (uint64_t)((double)macs * 1e9 / (double)(ns ? ns : 1));
	uint64_t cur = atomic_load(&d->wall_rate);

	if (r && (!cur || r < cur))
		atomic_store(&d->wall_rate, r);
}
