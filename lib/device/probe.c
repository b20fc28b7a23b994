// SPDX-License-Identifier: MIT
/*
 * How fast an accelerator really runs, in MACs per second of wall time.
 *
 * A device's job timeout counts wall time.  Its capabilities (MACs per
 * cycle x clock) say how fast the silicon would be; a simulated chip also
 * computes every result on the host's CPU and completes at the later of
 * its modelled end and the computation's (Documentation/sim.rst), so
 * under an emulator (QEMU TCG) it is far slower than its caps.  One
 * small int8 GEMM job (M x K x N = 128 x 256 x 128, 4.2 M MACs), run
 * twice, measures it once per device and process; placement then sizes
 * jobs by the slower of the two rates (lib/plan/place.c).
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

uint64_t mi_dev_wall_rate(struct mi_dev *d)
{
	struct {
		struct drm_metainfer_stream_header h;
		struct drm_metainfer_op_gemm g;
	} s;
	const size_t a = 0, b = PROBE_M * PROBE_K,
		     o = b + PROBE_K * PROBE_N;
	uint64_t best = UINT64_MAX, rate = atomic_load(&d->wall_rate);
	struct mi_dev_bo *bo = NULL;

	if (rate || d->kind == MI_DEV_CPU ||
	    !(d->caps.op_mask & (1ull << DRM_METAINFER_OP_GEMM)) ||
	    !(d->caps.dtype_mask & (1ull << DRM_METAINFER_DTYPE_INT8)))
		return rate;
	memset(&s, 0, sizeof(s));
	s.h.magic = DRM_METAINFER_STREAM_MAGIC;
	s.h.version = DRM_METAINFER_STREAM_VERSION;
	s.h.op_count = 1;
	s.g.hdr.op = DRM_METAINFER_OP_GEMM;
	s.g.hdr.size = sizeof(s.g);
	plain2(&s.g.a, DRM_METAINFER_DTYPE_INT8, a, PROBE_M, PROBE_K);
	plain2(&s.g.b, DRM_METAINFER_DTYPE_INT8, b, PROBE_K, PROBE_N);
	plain2(&s.g.output, DRM_METAINFER_DTYPE_INT32, o, PROBE_M, PROBE_N);
	if (mi_dev_bo_alloc(d, o + 4 * PROBE_M * PROBE_N, &bo)) {
		mi_clear_error();
		return 0;
	}
	for (size_t i = 0; i < o; i++)
		((signed char *)bo->map)[i] = (signed char)(i * 37 % 255 - 127);
	for (int r = 0; r < PROBE_RUNS; r++) {
		uint64_t ns;

		if (probe_once(d, bo, &s, sizeof(s), &ns)) {
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
	rate = (uint64_t)((double)PROBE_M * PROBE_K * PROBE_N * 1e9 /
			  (double)(best ? best : 1));
	atomic_store(&d->wall_rate, rate ? rate : 1);
	return rate ? rate : 1;
}
