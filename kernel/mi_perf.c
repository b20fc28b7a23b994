// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: performance counters per device and per context.
 *
 * Job counters are accounted by the core when a job finishes, from the
 * statistics the backend reports with mi_job_done(); sensor readings
 * (temperature, power, clock, throttling) come from the backend's
 * read_counters op at the time of the query.
 */

#include <linux/ktime.h>
#include <drm/drm_drv.h>

#include "mi_drv.h"

static void mi_counters_add(struct mi_counters *c, const struct mi_job *job,
			    int status)
{
	const struct mi_job_stats *s = &job->stats;

	if (!status)
		atomic64_inc(&c->jobs_completed);
	else if (status == -ETIMEDOUT)
		atomic64_inc(&c->jobs_timed_out);
	else
		atomic64_inc(&c->jobs_failed);
	atomic64_add(s->busy_ns, &c->busy_ns);
	atomic64_add(s->macs, &c->macs);
	atomic64_add(s->dma_bytes_in, &c->dma_bytes_in);
	atomic64_add(s->dma_bytes_out, &c->dma_bytes_out);
	atomic64_add(s->stall_ns, &c->stall_ns);
	if (job->start_time)
		atomic64_add(ktime_to_ns(ktime_sub(job->start_time,
						   job->submit_time)),
			     &c->queue_wait_ns);
	atomic64_dec(&c->inflight);
}

/**
 * mi_counters_account() - account a finished job, once
 * @job: the job
 * @status: its status
 *
 * Callable from any context; later calls for the same job do nothing.
 */
void mi_counters_account(struct mi_job *job, int status)
{
	struct mi_ctx *ctx = job->ctx;

	if (test_and_set_bit(MI_JOB_ACCOUNTED, &job->flags))
		return;
	mi_counters_add(&job->mdev->counters, job, status);
	mi_counters_add(&ctx->counters, job, status);
	atomic64_add(job->stats.busy_ns, &ctx->mfile->engine_ns[job->q->index]);
	atomic64_inc(&ctx->mfile->jobs[job->q->index]);
}

/**
 * mi_read_hw_counters() - read the backend's sensors
 * @mdev: device
 * @c: filled with the readings (valid = 0 if there are none)
 *
 * The caller must be inside drm_dev_enter() or otherwise know the backend
 * is still registered.
 *
 * Return: 0 or the backend's negative errno.
 */
int mi_read_hw_counters(struct mi_device *mdev, struct mi_hw_counters *c)
{
	int ret;

	memset(c, 0, sizeof(*c));
	if (!mdev->ops->read_counters)
		return 0;
	ret = mdev->ops->read_counters(mdev, c);
	c->valid &= DRM_METAINFER_VALID_TEMP | DRM_METAINFER_VALID_POWER |
		    DRM_METAINFER_VALID_CLOCK | DRM_METAINFER_VALID_THROTTLE;
	if (ret)
		c->valid = 0;
	return ret;
}

static void mi_counters_fill(struct drm_metainfer_get_counters *a,
			     struct mi_counters *c)
{
	a->jobs_submitted = atomic64_read(&c->jobs_submitted);
	a->jobs_completed = atomic64_read(&c->jobs_completed);
	a->jobs_failed = atomic64_read(&c->jobs_failed);
	a->jobs_timed_out = atomic64_read(&c->jobs_timed_out);
	a->busy_ns = atomic64_read(&c->busy_ns);
	a->macs = atomic64_read(&c->macs);
	a->dma_bytes_in = atomic64_read(&c->dma_bytes_in);
	a->dma_bytes_out = atomic64_read(&c->dma_bytes_out);
	a->queue_depth = max_t(s64, atomic64_read(&c->inflight), 0);
	a->stall_ns = atomic64_read(&c->stall_ns);
	a->queue_wait_ns = atomic64_read(&c->queue_wait_ns);
}

/**
 * mi_get_counters_ioctl() - DRM_IOCTL_METAINFER_GET_COUNTERS
 * @drm: device
 * @data: struct drm_metainfer_get_counters
 * @file: caller
 *
 * Return: 0 or a negative errno.
 */
int mi_get_counters_ioctl(struct drm_device *drm, void *data,
			  struct drm_file *file)
{
	struct drm_metainfer_get_counters *args = data;
	struct mi_device *mdev = to_mi_device(drm);
	struct mi_file *mfile = file->driver_priv;
	struct mi_hw_counters hw;
	struct mi_ctx *ctx = NULL;
	int idx;

	if ((args->flags & ~DRM_METAINFER_COUNTERS_FLAGS_MASK) || args->pad)
		return -EINVAL;
	if (args->flags & DRM_METAINFER_COUNTERS_CTX) {
		ctx = mi_ctx_lookup(mfile, args->ctx_id);
		if (!ctx)
			return -ENOENT;
	} else if (args->ctx_id) {
		return -EINVAL;
	}

	args->timestamp_ns = ktime_get_ns();
	mi_counters_fill(args, ctx ? &ctx->counters : &mdev->counters);
	if (ctx)
		mi_ctx_put(ctx);

	memset(&hw, 0, sizeof(hw));
	if (drm_dev_enter(drm, &idx)) {
		mi_read_hw_counters(mdev, &hw);
		drm_dev_exit(idx);
	}
	args->valid = hw.valid;
	args->temp_mc = hw.valid & DRM_METAINFER_VALID_TEMP ? hw.temp_mc : 0;
	args->power_mw = hw.valid & DRM_METAINFER_VALID_POWER ? hw.power_mw : 0;
	args->clock_khz = hw.valid & DRM_METAINFER_VALID_CLOCK ? hw.clock_khz :
								 0;
	args->throttle = hw.valid & DRM_METAINFER_VALID_THROTTLE ? hw.throttle :
								   0;
	return 0;
}
