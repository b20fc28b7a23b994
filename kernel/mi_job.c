// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: contexts, queues, job submission, scheduling, timeouts
 * and recovery, and waiting for jobs.
 *
 * Every hardware queue is one drm_gpu_scheduler with a credit limit of one
 * job: the backend always has at most one job per queue.  Each context is
 * one drm_sched_entity on its queue at its priority.  A job's hardware
 * fence is signalled by mi_job_done() (backend), by the timeout handler
 * (-ETIMEDOUT) or by the core when the device is lost or removed
 * (-ENODEV); its status becomes the error of its finished fence, which is
 * what out-syncobjs carry and WAIT reports.
 */

#include <linux/capability.h>
#include <linux/dma-fence-chain.h>
#include <linux/delay.h>
#include <linux/iosys-map.h>
#include <linux/ktime.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <drm/drm_auth.h>
#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>
#include <drm/drm_utils.h>

#include "mi_drv.h"
#include "mi_trace.h"

/* mi_job.flags bit: the hardware fence was initialised by run_job */
#define MI_JOB_FENCE_INIT 2
/* counted out of mi_ctx.queued and mi_queue.queued */
#define MI_JOB_DEQUEUED 3

static const char *mi_fence_driver_name(struct dma_fence *f)
{
	return MI_DRIVER_NAME;
}

static const char *mi_fence_timeline_name(struct dma_fence *f)
{
	return "metainfer-queue";
}

/* Hardware fences not yet released, module-wide (debugfs "status"). */
atomic_t mi_hw_fences_live = ATOMIC_INIT(0);

static void mi_fence_release(struct dma_fence *f)
{
	atomic_dec(&mi_hw_fences_live);
	dma_fence_free(f);
}

static const struct dma_fence_ops mi_fence_ops = {
	.get_driver_name = mi_fence_driver_name,
	.get_timeline_name = mi_fence_timeline_name,
	.release = mi_fence_release,
};

static void mi_fence_set_error(struct dma_fence *f, int status)
{
	if (!test_bit(DMA_FENCE_FLAG_SIGNALED_BIT, &f->flags))
		dma_fence_set_error(f, status);
}

/*
 * Finish @job with @status exactly once, whoever gets here first (the
 * backend, the timeout handler, run_job's error path, unregister).
 * Returns false if the job was already finished.  After the hardware
 * fence is signalled the job may be freed, so nothing touches it after.
 */
static bool mi_job_finish(struct mi_job *job, int status,
			  const struct mi_job_stats *stats)
{
	struct dma_fence *f;

	if (test_and_set_bit(MI_JOB_FINISHED, &job->flags))
		return false;
	/* a backend bug must not become a WARN in dma_fence_set_error() */
	if (status > 0 || status < -MAX_ERRNO)
		status = -EIO;
	if (stats) {
		job->stats = *stats;
	} else if (job->start_time) {
		job->stats.busy_ns =
			ktime_to_ns(ktime_sub(ktime_get(), job->start_time));
	}
	job->status = status;
	if (job->uring)
		mi_uring_job_stats(job->uring, job->stats.busy_ns);
	mi_counters_account(job, status);
	trace_done(job->mdev->minor, job->ctx->id, job->q->index, job->seqno,
		   job->hw_fence->context, job->hw_fence->seqno, status,
		   job->stats.busy_ns);
	if (status) {
		mi_fence_set_error(&job->base.s_fence->finished, status);
		mi_fence_set_error(job->hw_fence, status);
	}
	f = dma_fence_get(job->hw_fence);
	dma_fence_signal(f);
	dma_fence_put(f);
	return true;
}

/**
 * mi_job_done() - a backend finished a job
 * @job: the job passed to &mi_backend_ops.run_job
 * @status: 0, or a negative errno (-EIO for a device error)
 * @stats: what the job did, or NULL
 *
 * Callable from any context.  The backend must not touch @job or its
 * buffers afterwards.
 */
void mi_job_done(struct mi_job *job, int status,
		 const struct mi_job_stats *stats)
{
	struct mi_queue *q = job->q;
	unsigned long fl;

	spin_lock_irqsave(&q->lock, fl);
	if (q->active == job)
		q->active = NULL;
	spin_unlock_irqrestore(&q->lock, fl);
	mi_job_finish(job, status, stats);
}
EXPORT_SYMBOL_GPL(mi_job_done);

/**
 * mi_job_desc() - the validated description of a job
 * @job: the job passed to &mi_backend_ops.run_job
 *
 * Return: the job's ops and buffer mappings.
 */
const struct mi_job_desc *mi_job_desc(const struct mi_job *job)
{
	return &job->desc;
}
EXPORT_SYMBOL_GPL(mi_job_desc);

/* Jobs alive in any device; module unload waits for them to be freed. */
static atomic_t mi_live_jobs = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(mi_live_jobs_wq);

/**
 * mi_jobs_wait_all() - wait until every job has been freed (module exit)
 *
 * Jobs of a context torn down after its device was removed are freed
 * asynchronously by drm_sched; their free_job runs this module's code.
 */
void mi_jobs_wait_all(void)
{
	wait_event(mi_live_jobs_wq, !atomic_read(&mi_live_jobs));
}

/*
 * A job holds a reference to its DRM device: jobs killed when a context
 * of a removed device is torn down are freed after the last file closed,
 * and must still find the device (and its buffers' manager) alive.
 */
static void mi_job_release(struct mi_job *job)
{
	struct drm_device *drm = job->mdev->drm;
	u32 i;

	for (i = 0; i < job->bo_count; i++)
		if (job->objs[i])
			drm_gem_object_put(job->objs[i]);
	kvfree(job->objs);
	kvfree(job->bos);
	kvfree(job->ops);
	if (job->hw_fence) {
		if (test_bit(MI_JOB_FENCE_INIT, &job->flags))
			dma_fence_put(job->hw_fence);
		else
			kfree(job->hw_fence);
	}
	if (job->uring)
		mi_uring_job_put(job->uring);
	if (job->dep) {
		mi_ctx_untrack_dep(job->ctx, job->dep);
		mi_dep_put(job->dep);
	}
	atomic_dec(&job->mdev->job_count);
	mi_ctx_put(job->ctx);
	kfree(job);
	drm_dev_put(drm);
	if (atomic_dec_and_test(&mi_live_jobs))
		wake_up(&mi_live_jobs_wq);
}

/* Remember a failed job's status after its fence is gone. */
static void mi_ctx_record_error(struct mi_ctx *ctx, u64 seqno, int status)
{
	unsigned long idx = 0;
	void *old;

	mutex_lock(&ctx->errors_lock);
	if (ctx->nr_errors >= MI_MAX_ERRORS_PER_CTX) {
		old = xa_find(&ctx->errors, &idx, ULONG_MAX, XA_PRESENT);
		if (old) {
			xa_erase(&ctx->errors, idx);
			ctx->nr_errors--;
			WRITE_ONCE(ctx->errors_evicted,
				   max_t(u64, ctx->errors_evicted, idx));
		}
	}
	if (xa_err(xa_store(&ctx->errors, seqno, xa_mk_value(-status),
			    GFP_KERNEL)))
		WRITE_ONCE(ctx->errors_evicted,
			   max_t(u64, ctx->errors_evicted, seqno));
	else
		ctx->nr_errors++;
	mutex_unlock(&ctx->errors_lock);
}

/**
 * mi_status_to_user() - a finished fence's error as the uapi job status
 * @err: the fence's error (0 or a negative errno)
 *
 * Return: the status WAIT reports.
 */
int mi_status_to_user(int err)
{
	/* drm_sched reports jobs of a killed entity as -ESRCH */
	return err == -ESRCH ? -ECANCELED : err;
}

/*
 * The job has left its entity's queue: reached run_job, or was dropped
 * by the kill path (see mi_ctx_teardown() and mi_queues_fini()).
 */
static void mi_job_dequeued(struct mi_job *job)
{
	if (test_and_set_bit(MI_JOB_DEQUEUED, &job->flags))
		return;
	atomic_dec(&job->q->queued);
	if (atomic_dec_and_test(&job->ctx->queued))
		wake_up_all(&job->ctx->drain_wq);
}

static struct dma_fence *mi_sched_run_job(struct drm_sched_job *sj)
{
	struct mi_job *job = to_mi_job(sj);
	struct mi_queue *q = job->q;
	struct mi_device *mdev = job->mdev;
	struct dma_fence *fence = job->hw_fence;
	int ret;

	dma_fence_init(fence, &mi_fence_ops, &q->fence_lock, q->fence_context,
		       ++q->fence_seqno);
	set_bit(MI_JOB_FENCE_INIT, &job->flags);
	atomic_inc(&mi_hw_fences_live);
	/* one reference for the scheduler (returned), one for the job */
	dma_fence_get(fence);
	mi_job_dequeued(job);
	job->start_time = ktime_get();
	atomic64_inc(&q->jobs_run);

	mutex_lock(&q->run_lock);
	if (sj->s_fence->finished.error) {
		ret = sj->s_fence->finished.error;
	} else if (job->dep && mi_dep_fence(job->dep)->error) {
		/* an in-fence failed, or the context went first: ops not run */
		ret = mi_dep_fence(job->dep)->error;
	} else if (q->dead || mi_device_is_lost(mdev)) {
		ret = -ENODEV;
	} else {
		spin_lock_irq(&q->lock);
		q->active = job;
		spin_unlock_irq(&q->lock);
		trace_run(mdev->minor, job->ctx->id, q->index, job->seqno,
			  fence->context, fence->seqno);
		ret = mdev->ops->run_job(mdev, job);
		if (ret) {
			spin_lock_irq(&q->lock);
			if (q->active == job)
				q->active = NULL;
			spin_unlock_irq(&q->lock);
		}
	}
	mutex_unlock(&q->run_lock);
	if (ret)
		mi_job_finish(job, ret, NULL);
	return fence;
}

static enum drm_gpu_sched_stat mi_sched_timedout_job(struct drm_sched_job *sj)
{
	struct mi_job *job = to_mi_job(sj);
	struct mi_queue *q = job->q;
	struct mi_device *mdev = job->mdev;
	bool hung = false;
	int ret = 0;

	drm_sched_stop(&q->sched, sj);

	mutex_lock(&mdev->reset_lock);
	mutex_lock(&q->run_lock);
	if (!test_bit(MI_JOB_FINISHED, &job->flags)) {
		hung = true;
		trace_timeout(mdev->minor, job->ctx->id, q->index, job->seqno,
			      job->hw_fence->context, job->hw_fence->seqno);
		ret = q->dead ? 0 : mdev->ops->reset(mdev, q->index);
		spin_lock_irq(&q->lock);
		if (q->active == job)
			q->active = NULL;
		spin_unlock_irq(&q->lock);
		atomic64_inc(&q->resets);
		atomic64_inc(&mdev->resets);
		trace_reset(mdev->minor, q->index, ret);
	}
	mutex_unlock(&q->run_lock);
	mutex_unlock(&mdev->reset_lock);

	if (hung) {
		dev_info_ratelimited(
			mdev->drm->dev,
			"queue %u: job %u:%llu timed out, reset %s\n", q->index,
			job->ctx->id, job->seqno, ret ? "failed" : "done");
		if (ret) {
			atomic64_inc(&mdev->resets_failed);
			mi_device_mark_lost(mdev);
		}
		mi_job_finish(job, -ETIMEDOUT, NULL);
	}
	/* whoever finished it, its hardware fence is signalled before restart */
	dma_fence_wait(job->hw_fence, false);
	drm_sched_start(&q->sched, true);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

static void mi_sched_free_job(struct drm_sched_job *sj)
{
	struct mi_job *job = to_mi_job(sj);
	struct mi_ctx *ctx = job->ctx;
	struct dma_fence *f;
	int status;

	mi_job_dequeued(job);
	/* jobs of a killed entity never ran */
	mi_counters_account(job, -ECANCELED);
	status = mi_status_to_user(sj->s_fence->finished.error);
	if (status)
		mi_ctx_record_error(ctx, job->seqno, status);
	f = xa_erase(&ctx->jobs, job->seqno);
	dma_fence_put(f);
	drm_sched_job_cleanup(sj);
	mi_job_release(job);
}

/*
 * drm_sched asks for more dependencies of a job once its own (the mi_dep)
 * are done: in the scheduler thread before running it, where there are
 * none, and in drm_sched_entity_fini() when a context is destroyed with
 * jobs still queued (a killed process, a removed device).  That kill path
 * of Debian's 6.1 takes a reference to the entity's last scheduled fence
 * for every killed job and never drops it when that fence has already
 * signalled (its callback is called with NULL instead), leaking the fence,
 * its job's scheduler fence pair and our hardware fence (kmemleak).  When
 * called from our teardown, fini has taken the entity off its run queue
 * and waited for the scheduler thread to leave it, so last_scheduled is
 * ours to settle: wait for it (it ran, so it ends by the job timeout),
 * then drop it, and the kill path takes its NULL branch, which is
 * balanced.
 */
static struct dma_fence *mi_sched_dependency(struct drm_sched_job *sj,
					     struct drm_sched_entity *entity)
{
	struct dma_fence *last;

	if (READ_ONCE(to_mi_job(sj)->ctx->teardown) != current)
		return NULL;
	last = entity->last_scheduled;
	if (!last)
		return NULL;
	/* the kill path waits for it, drops it and asks again */
	if (!dma_fence_is_signaled(last))
		return dma_fence_get(last);
	entity->last_scheduled = NULL;
	dma_fence_put(last);
	return NULL;
}

static const struct drm_sched_backend_ops mi_sched_ops = {
	.dependency = mi_sched_dependency,
	.run_job = mi_sched_run_job,
	.timedout_job = mi_sched_timedout_job,
	.free_job = mi_sched_free_job,
};

/**
 * mi_queues_init() - create one scheduler per hardware queue
 * @mdev: device
 *
 * Return: 0 or a negative errno.
 */
int mi_queues_init(struct mi_device *mdev)
{
	static atomic_t mi_dev_seq = ATOMIC_INIT(0);
	int seq = atomic_inc_return(&mi_dev_seq);
	u32 i;
	int ret;

	spin_lock_init(&mdev->uring_lock);
	INIT_LIST_HEAD(&mdev->uring_jobs);
	for (i = 0; i < mdev->num_queues; i++) {
		struct mi_queue *q = &mdev->queues[i];
		struct drm_sched_init_args args = {
			.ops = &mi_sched_ops,
			.credit_limit = 1,
			.hang_limit = 0,
			.timeout = msecs_to_jiffies(mdev->timeout_ms),
			.name = q->name,
			.dev = mdev->drm->dev,
		};

		q->mdev = mdev;
		q->index = i;
		mutex_init(&q->run_lock);
		spin_lock_init(&q->lock);
		spin_lock_init(&q->fence_lock);
		q->fence_context = dma_fence_context_alloc(1);
		snprintf(q->name, sizeof(q->name), "mi%d.q%u", seq, i);
		ret = drm_sched_init(&q->sched, &args);
		if (ret)
			goto err_fini;
		q->sched_ready = true;
	}
	return 0;

err_fini:
	mi_queues_fini(mdev);
	return ret;
}

/**
 * mi_queues_kill() - stop the backend for good (device unregister)
 * @mdev: device
 *
 * Marks every queue dead, aborts jobs the backend holds (reset) and
 * finishes them with -ENODEV.  Afterwards no backend op is called from a
 * queue.  Asynchronous io_uring submits still waiting (for jobs queued in
 * contexts, which only end when their file closes) complete with -ENODEV.
 */
void mi_queues_kill(struct mi_device *mdev)
{
	u32 i;

	mutex_lock(&mdev->reset_lock);
	for (i = 0; i < mdev->num_queues; i++) {
		struct mi_queue *q = &mdev->queues[i];
		struct mi_job *job;
		bool abort = false;

		mutex_lock(&q->run_lock);
		q->dead = true;
		spin_lock_irq(&q->lock);
		job = q->active;
		spin_unlock_irq(&q->lock);
		if (job) {
			/* after reset() the backend never completes it */
			mdev->ops->reset(mdev, q->index);
			spin_lock_irq(&q->lock);
			if (q->active == job) {
				q->active = NULL;
				abort = true;
			}
			spin_unlock_irq(&q->lock);
		}
		mutex_unlock(&q->run_lock);
		if (abort)
			mi_job_finish(job, -ENODEV, NULL);
	}
	mutex_unlock(&mdev->reset_lock);
	mi_uring_kill(mdev);
}

/*
 * Nothing left for the scheduler thread: no job handed to the queue
 * awaits its cleanup, and no job waits in a context's entity.  The latter
 * matters at unregister: a job still queued behind the one reset() aborted
 * must reach run_job (which fails it with -ENODEV, @q->dead being set)
 * before the thread stops, else its fence stays unsignalled and a WAIT on
 * it sleeps until its timeout.
 */
static bool mi_queue_idle(struct mi_queue *q)
{
	bool idle;

	if (atomic_read(&q->queued))
		return false;
	spin_lock(&q->sched.job_list_lock);
	idle = list_empty(&q->sched.pending_list);
	spin_unlock(&q->sched.job_list_lock);
	return idle;
}

/**
 * mi_queues_fini() - tear down the schedulers
 * @mdev: device
 *
 * Waits (bounded) for jobs already handed to the queues to be cleaned up,
 * stops the scheduler threads and frees the jobs they left behind.  Jobs
 * queued in contexts are let through run_job first, which fails them with
 * -ENODEV; only those still waiting for an in-fence when the wait ends are
 * dropped later, when their context is destroyed.
 */
void mi_queues_fini(struct mi_device *mdev)
{
	struct drm_sched_job *sj, *tmp;
	u32 i;
	int tries;

	for (i = 0; i < mdev->num_queues; i++) {
		struct mi_queue *q = &mdev->queues[i];

		if (!q->sched_ready)
			continue;
		for (tries = 0; tries < 2000 && !mi_queue_idle(q); tries++)
			usleep_range(1000, 2000);
		drm_sched_fini(&q->sched);
		/*
		 * The scheduler thread is gone.  Jobs it had not cleaned up
		 * yet (finished, free_job still pending: on a starved machine
		 * the thread can lag by seconds) are freed here, else each
		 * would keep mi_jobs_wait_all() and so module unload waiting
		 * forever.  Their fences are signalled: mi_queues_kill()
		 * failed whatever the backend still held.
		 */
		list_for_each_entry_safe(sj, tmp, &q->sched.pending_list,
					 list) {
			list_del_init(&sj->list);
			mi_sched_free_job(sj);
		}
		q->sched_ready = false;
	}
}

/* ---- contexts ---- */

static void mi_ctx_release(struct kref *ref)
{
	struct mi_ctx *ctx = container_of(ref, struct mi_ctx, ref);

	xa_destroy(&ctx->jobs);
	xa_destroy(&ctx->errors);
	mutex_destroy(&ctx->errors_lock);
	mutex_destroy(&ctx->submit_lock);
	atomic_dec(&ctx->mdev->ctx_count);
	mi_file_put(ctx->mfile);
	kfree(ctx);
}

/**
 * mi_ctx_put() - drop a context reference
 * @ctx: context
 */
void mi_ctx_put(struct mi_ctx *ctx)
{
	kref_put(&ctx->ref, mi_ctx_release);
}

/**
 * mi_ctx_lookup() - find a context of a file and take a reference
 * @mfile: file
 * @id: context id
 *
 * Return: the context or NULL.
 */
struct mi_ctx *mi_ctx_lookup(struct mi_file *mfile, u32 id)
{
	struct mi_ctx *ctx;

	xa_lock(&mfile->ctxs);
	ctx = xa_load(&mfile->ctxs, id);
	if (ctx)
		kref_get(&ctx->ref);
	xa_unlock(&mfile->ctxs);
	return ctx;
}

static void mi_ctx_teardown(struct mi_ctx *ctx)
{
	long bound = msecs_to_jiffies(2 * ctx->mdev->timeout_ms + 1000);

	mutex_lock(&ctx->submit_lock);
	ctx->closed = true;
	mutex_unlock(&ctx->submit_lock);
	/*
	 * Jobs still waiting for in-fences end with -ECANCELED without
	 * running: nothing waits for a fence that may never signal (6.1's
	 * kill path would, uninterruptibly).
	 */
	mi_ctx_cancel_deps(ctx);
	/*
	 * Let the jobs pushed reach run_job (bounded: the jobs ahead of ours
	 * in the hardware queue end by the job timeout) rather than have a
	 * killed process's jobs killed after drm_sched's one second, so that
	 * what was submitted runs.  Not for a removed device, whose
	 * scheduler threads may be gone.  Whatever is left goes through the
	 * kill path, made leak-free by mi_sched_dependency().
	 */
	if (!READ_ONCE(ctx->q->dead))
		wait_event_timeout(ctx->drain_wq, !atomic_read(&ctx->queued),
				   bound);
	WRITE_ONCE(ctx->teardown, current);
	/* waits for queued jobs to reach the queue (or kills them on exit) */
	drm_sched_entity_destroy(&ctx->entity);
	WRITE_ONCE(ctx->teardown, NULL);
	mi_ctx_put(ctx);
}

/**
 * mi_ctx_create_ioctl() - DRM_IOCTL_METAINFER_CTX_CREATE
 * @drm: device
 * @data: struct drm_metainfer_ctx_create
 * @file: caller
 *
 * Return: 0 or a negative errno.
 */
int mi_ctx_create_ioctl(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	static const enum drm_sched_priority prio[] = {
		[DRM_METAINFER_PRIORITY_LOW] = DRM_SCHED_PRIORITY_MIN,
		[DRM_METAINFER_PRIORITY_NORMAL] = DRM_SCHED_PRIORITY_NORMAL,
		[DRM_METAINFER_PRIORITY_HIGH] = DRM_SCHED_PRIORITY_HIGH,
	};
	struct drm_metainfer_ctx_create *args = data;
	struct mi_device *mdev = to_mi_device(drm);
	struct mi_file *mfile = file->driver_priv;
	struct drm_gpu_scheduler *sched;
	struct mi_ctx *ctx;
	u32 id;
	int ret;

	if (args->flags || args->pad || args->queue >= mdev->num_queues ||
	    args->priority > DRM_METAINFER_PRIORITY_HIGH)
		return -EINVAL;
	/* like other DRM drivers: high priority is a privilege */
	if (args->priority == DRM_METAINFER_PRIORITY_HIGH &&
	    !capable(CAP_SYS_NICE) && !drm_is_current_master(file))
		return -EACCES;
	if (mi_device_is_lost(mdev))
		return -ENODEV;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return -ENOMEM;
	kref_init(&ctx->ref);
	ctx->mdev = mdev;
	ctx->q = &mdev->queues[args->queue];
	ctx->priority = args->priority;
	mutex_init(&ctx->submit_lock);
	mutex_init(&ctx->errors_lock);
	xa_init(&ctx->jobs);
	xa_init(&ctx->errors);
	atomic_set(&ctx->queued, 0);
	init_waitqueue_head(&ctx->drain_wq);
	spin_lock_init(&ctx->deps_lock);
	INIT_LIST_HEAD(&ctx->deps);
	sched = &ctx->q->sched;
	ret = drm_sched_entity_init(&ctx->entity, prio[args->priority], &sched,
				    1, NULL);
	if (ret)
		goto err_free;

	kref_get(&mfile->ref);
	ctx->mfile = mfile;
	atomic_inc(&mdev->ctx_count);
	ret = xa_alloc(&mfile->ctxs, &id, ctx, XA_LIMIT(1, MI_MAX_CTX_PER_FILE),
		       GFP_KERNEL);
	if (ret) {
		drm_sched_entity_destroy(&ctx->entity);
		mi_ctx_put(ctx);
		return ret == -EBUSY ? -ENOSPC : ret;
	}
	ctx->id = id;
	args->ctx_id = id;
	return 0;

err_free:
	mutex_destroy(&ctx->errors_lock);
	mutex_destroy(&ctx->submit_lock);
	kfree(ctx);
	return ret;
}

/**
 * mi_ctx_destroy_ioctl() - DRM_IOCTL_METAINFER_CTX_DESTROY
 * @drm: device
 * @data: struct drm_metainfer_ctx_destroy
 * @file: caller
 *
 * Return: 0 or a negative errno.
 */
int mi_ctx_destroy_ioctl(struct drm_device *drm, void *data,
			 struct drm_file *file)
{
	struct drm_metainfer_ctx_destroy *args = data;
	struct mi_file *mfile = file->driver_priv;
	struct mi_ctx *ctx;

	if (args->flags || args->pad)
		return -EINVAL;
	ctx = xa_erase(&mfile->ctxs, args->ctx_id);
	if (!ctx)
		return -ENOENT;
	mi_ctx_teardown(ctx);
	return 0;
}

/**
 * mi_file_ctxs_fini() - destroy every context of a closing file
 * @mfile: file
 */
void mi_file_ctxs_fini(struct mi_file *mfile)
{
	unsigned long id = 0;
	struct mi_ctx *ctx;

	while ((ctx = xa_find(&mfile->ctxs, &id, ULONG_MAX, XA_PRESENT))) {
		xa_erase(&mfile->ctxs, id);
		mi_ctx_teardown(ctx);
	}
}

/* ---- submission ---- */

/*
 * Look up the in-fences and the out-syncobj of a submit, for the real
 * submit and for VALIDATE_ONLY alike, so both reject the same things.
 * Only references are taken: no syncobj changes.  @fences gets one fence
 * (or NULL) per in-sync; the caller drops everything with
 * mi_submit_syncs_put(), also on error.
 */
static int mi_submit_syncs_get(struct drm_file *file,
			       const struct drm_metainfer_submit *args,
			       struct dma_fence ***fences,
			       struct drm_syncobj **out)
{
	struct drm_metainfer_sync __user *usyncs =
		u64_to_user_ptr(args->in_syncs);
	struct drm_metainfer_sync s;
	struct dma_fence *f;
	u32 i;
	int ret;

	if (args->in_sync_count) {
		*fences = kcalloc(args->in_sync_count, sizeof(**fences),
				  GFP_KERNEL);
		if (!*fences)
			return -ENOMEM;
	}
	for (i = 0; i < args->in_sync_count; i++) {
		if (copy_from_user(&s, &usyncs[i], sizeof(s)))
			return -EFAULT;
		if (s.flags)
			return -EINVAL;
		/* -ENOENT unknown handle, -EINVAL no fence (at @point) */
		f = NULL;
		ret = drm_syncobj_find_fence(file, s.handle, s.point, 0, &f);
		if (ret)
			return ret;
		(*fences)[i] = f;
	}
	if (args->out_sync) {
		*out = drm_syncobj_find(file, args->out_sync);
		if (!*out)
			return -ENOENT;
	}
	return 0;
}

static void mi_submit_syncs_put(struct dma_fence **fences, u32 count,
				struct drm_syncobj *out)
{
	u32 i;

	if (fences)
		for (i = 0; i < count; i++)
			dma_fence_put(fences[i]);
	kfree(fences);
	if (out)
		drm_syncobj_put(out);
}

static int mi_job_map(struct mi_job *job)
{
	u32 i;
	int ret;

	job->bos = kvcalloc(job->bo_count, sizeof(*job->bos), GFP_KERNEL);
	if (!job->bos)
		return -ENOMEM;
	for (i = 0; i < job->bo_count; i++) {
		ret = mi_bo_vmap(job->objs[i], &job->bos[i].vaddr);
		if (ret)
			return ret;
		job->bos[i].size = job->objs[i]->size;
	}
	return 0;
}

/**
 * mi_job_submit() - validate and queue a job (SUBMIT, from an ioctl or
 *	io_uring)
 * @drm: device
 * @args: the submit arguments (kernel copy; @args->seqno is written)
 * @file: caller
 * @uj: asynchronous io_uring submit to tell when the job finishes, or NULL
 *
 * Every check runs before %DRM_METAINFER_SUBMIT_VALIDATE_ONLY returns, so
 * the probe and the real submit fail alike; the probe changes no syncobj.
 * On success with @uj, @uj is armed on the job's finished fence before
 * this returns.
 *
 * Return: 0 or a negative errno (then nothing was queued).
 */
int mi_job_submit(struct drm_device *drm, struct drm_metainfer_submit *args,
		  struct drm_file *file, struct mi_uring_job *uj)
{
	struct mi_device *mdev = to_mi_device(drm);
	struct mi_file *mfile = file->driver_priv;
	struct dma_fence_chain *chain = NULL;
	struct dma_fence **in_fences = NULL;
	struct drm_syncobj *out = NULL;
	struct dma_fence *finished;
	bool sched_init = false;
	struct mi_ctx *ctx;
	struct mi_job *job;
	void *cmds = NULL;
	u32 i, op_count;
	u64 seqno;
	int ret, idx;

	if ((args->flags & ~DRM_METAINFER_SUBMIT_FLAGS_MASK) || args->pad ||
	    args->bo_count > DRM_METAINFER_MAX_BOS ||
	    args->in_sync_count > DRM_METAINFER_MAX_SYNCS || !args->cmds_size ||
	    args->cmds_size > DRM_METAINFER_MAX_CMDS_SIZE ||
	    (!args->out_sync && args->out_point))
		return -EINVAL;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	if (mi_device_is_lost(mdev)) {
		ret = -ENODEV;
		goto err_exit;
	}
	ctx = mi_ctx_lookup(mfile, args->ctx_id);
	if (!ctx) {
		ret = -ENOENT;
		goto err_exit;
	}
	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job) {
		mi_ctx_put(ctx);
		ret = -ENOMEM;
		goto err_exit;
	}
	atomic_inc(&mi_live_jobs);
	drm_dev_get(drm);
	atomic_inc(&mdev->job_count);
	job->mdev = mdev;
	job->ctx = ctx;
	job->q = ctx->q;

	cmds = kvmalloc(args->cmds_size, GFP_KERNEL);
	if (!cmds) {
		ret = -ENOMEM;
		goto err_job;
	}
	if (copy_from_user(cmds, u64_to_user_ptr(args->cmds),
			   args->cmds_size)) {
		ret = -EFAULT;
		goto err_job;
	}
	if (args->bo_count) {
		/* on failure the array holds references up to the bad handle */
		ret = drm_gem_objects_lookup(file,
					     u64_to_user_ptr(args->bo_handles),
					     args->bo_count, &job->objs);
		if (job->objs)
			job->bo_count = args->bo_count;
		if (ret)
			goto err_job;
	}
	ret = mi_cmd_parse(mdev, cmds, args->cmds_size,
			   (const struct drm_gem_object *const *)job->objs,
			   job->bo_count, &job->ops, &op_count);
	if (ret)
		goto err_job;
	if (mdev->ops->check_op) {
		for (i = 0; i < op_count; i++) {
			ret = mdev->ops->check_op(mdev, &job->ops[i]);
			if (ret) {
				drm_dbg_driver(
					drm,
					"submit: op %u vetoed by backend: %d\n",
					i, ret);
				goto err_job;
			}
		}
	}
	ret = mi_submit_syncs_get(file, args, &in_fences, &out);
	if (ret)
		goto err_job;
	/* a buffer that cannot be mapped (an imported one) fails here too */
	ret = mi_job_map(job);
	if (ret)
		goto err_job;
	if (args->flags & DRM_METAINFER_SUBMIT_VALIDATE_ONLY) {
		args->seqno = 0;
		ret = 0;
		goto err_job;
	}

	mi_cmd_resolve(job->ops, op_count, job->bos);
	job->desc.queue = job->q->index;
	job->desc.ctx_id = ctx->id;
	job->desc.priority = ctx->priority;
	job->desc.op_count = op_count;
	job->desc.ops = job->ops;
	job->desc.bo_count = job->bo_count;
	job->desc.bos = job->bos;
	for (i = 0; i < op_count; i++) {
		job->desc.macs += job->ops[i].macs;
		job->desc.bytes_in += job->ops[i].bytes_in;
		job->desc.bytes_out += job->ops[i].bytes_out;
	}

	job->hw_fence = kzalloc(sizeof(*job->hw_fence), GFP_KERNEL);
	if (!job->hw_fence) {
		ret = -ENOMEM;
		goto err_job;
	}
	ret = drm_sched_job_init(&job->base, &ctx->entity, mfile);
	if (ret)
		goto err_job;
	sched_init = true;
	if (args->in_sync_count) {
		job->dep = mi_dep_create(in_fences, args->in_sync_count);
		if (IS_ERR(job->dep)) {
			ret = PTR_ERR(job->dep);
			job->dep = NULL;
			goto err_job;
		}
		/* consumes the reference, also on error */
		ret = drm_sched_job_add_dependency(
			&job->base, dma_fence_get(mi_dep_fence(job->dep)));
		if (ret)
			goto err_job;
	}
	if (out && args->out_point) {
		chain = dma_fence_chain_alloc();
		if (!chain) {
			ret = -ENOMEM;
			goto err_job;
		}
	}

	mutex_lock(&ctx->submit_lock);
	/* destroyed under us (CTX_DESTROY from another thread) */
	if (ctx->closed) {
		mutex_unlock(&ctx->submit_lock);
		ret = -ENOENT;
		goto err_job;
	}
	seqno = ctx->seqno + 1;
	ret = xa_reserve(&ctx->jobs, seqno, GFP_KERNEL);
	if (ret) {
		mutex_unlock(&ctx->submit_lock);
		goto err_job;
	}
	drm_sched_job_arm(&job->base);
	ctx->seqno = seqno;
	job->seqno = seqno;
	job->desc.seqno = seqno;
	finished = &job->base.s_fence->finished;
	xa_store(&ctx->jobs, seqno, dma_fence_get(finished), GFP_KERNEL);
	job->submit_time = ktime_get();
	atomic64_inc(&mdev->counters.jobs_submitted);
	atomic64_inc(&mdev->counters.inflight);
	atomic64_inc(&ctx->counters.jobs_submitted);
	atomic64_inc(&ctx->counters.inflight);
	trace_submit(mdev->minor, ctx->id, job->q->index, seqno,
		     finished->context, finished->seqno, op_count,
		     job->bo_count);
	if (out) {
		if (chain) {
			drm_syncobj_add_point(out, chain, finished,
					      args->out_point);
			chain = NULL;
		} else {
			drm_syncobj_replace_fence(out, finished);
		}
	}
	if (uj)
		mi_uring_job_arm(uj, job, finished);
	if (job->dep) {
		mi_ctx_track_dep(ctx, job->dep);
		mi_dep_arm(job->dep);
	}
	atomic_inc(&ctx->queued);
	atomic_inc(&ctx->q->queued);
	drm_sched_entity_push_job(&job->base);
	WRITE_ONCE(ctx->last_seqno, seqno);
	mutex_unlock(&ctx->submit_lock);

	args->seqno = seqno;
	mi_submit_syncs_put(in_fences, args->in_sync_count, out);
	kvfree(cmds);
	drm_dev_exit(idx);
	return 0;

err_job:
	dma_fence_chain_free(chain);
	mi_submit_syncs_put(in_fences, args->in_sync_count, out);
	if (sched_init)
		drm_sched_job_cleanup(&job->base);
	kvfree(cmds);
	mi_job_release(job);
err_exit:
	drm_dev_exit(idx);
	return ret;
}

/**
 * mi_submit_ioctl() - DRM_IOCTL_METAINFER_SUBMIT
 * @drm: device
 * @data: struct drm_metainfer_submit
 * @file: caller
 *
 * Return: 0 or a negative errno.
 */
int mi_submit_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	return mi_job_submit(drm, data, file, NULL);
}

/**
 * mi_wait_ioctl() - DRM_IOCTL_METAINFER_WAIT
 * @drm: device
 * @data: struct drm_metainfer_wait
 * @file: caller
 *
 * Return: 0 (job finished, status in @data), -ETIMEDOUT or another
 * negative errno.
 */
int mi_wait_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_metainfer_wait *args = data;
	struct mi_file *mfile = file->driver_priv;
	struct dma_fence *f;
	struct mi_ctx *ctx;
	long timeout;
	void *err;
	int ret = 0;

	if (args->flags || args->pad || !args->seqno)
		return -EINVAL;
	ctx = mi_ctx_lookup(mfile, args->ctx_id);
	if (!ctx)
		return -ENOENT;
	if (args->seqno > READ_ONCE(ctx->last_seqno)) {
		ret = -EINVAL;
		goto out;
	}

	xa_lock(&ctx->jobs);
	f = xa_load(&ctx->jobs, args->seqno);
	if (f)
		dma_fence_get(f);
	xa_unlock(&ctx->jobs);
	if (f) {
		timeout = drm_timeout_abs_to_jiffies(args->timeout_ns);
		timeout = dma_fence_wait_timeout(f, true, timeout);
		if (timeout == 0)
			ret = -ETIMEDOUT;
		else if (timeout < 0)
			ret = timeout;
		else
			args->status = mi_status_to_user(f->error);
		dma_fence_put(f);
		goto out;
	}

	/* retired: failures are remembered, success is the default */
	err = xa_load(&ctx->errors, args->seqno);
	if (err)
		args->status = -(s64)xa_to_value(err);
	else if (args->seqno <= READ_ONCE(ctx->errors_evicted))
		ret = -ENODATA;
	else
		args->status = 0;
out:
	mi_ctx_put(ctx);
	return ret;
}
