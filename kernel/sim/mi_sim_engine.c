// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer_sim: the job engine and the backend ops table.
 *
 * Each hardware queue runs at most one job (the core guarantees it).
 * run_job() queues the queue's work item, which computes every op for real,
 * then models the job's time on the chip: the MAC array is shared by all
 * queues, so a job starts when it was handed over or when the array frees
 * up, whichever is later, and runs for the modelled time at the current
 * (possibly throttled) clock.  An hrtimer completes the job at its modelled
 * end, or at once if the computation itself took longer.
 *
 * Locking: &mi_sim_dev.lock (taken with _bh: the hrtimer runs in softirq
 * context) protects the queues' state, the personality, the thermal state
 * and the counters.  mi_job_done() is called without it.
 */

#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/gfp.h>
#include <linux/ktime.h>
#include <linux/crc32.h>
#include <linux/platform_device.h>

#include "mi_sim.h"

/*
 * Temperature at time @t.  Folds the idle gaps and the scheduled busy
 * segments up to @t into the committed state when @commit (only the
 * worker does, at a job's start); returns the power drawn at @t in
 * @power.  Called with the lock held.
 */
static s64 mi_sim_temp_at(struct mi_sim_dev *sdev, s64 t, bool commit,
			  u32 *power)
{
	const struct mi_sim_personality *p = &sdev->pers;
	s64 temp = sdev->temp_mc, tt = sdev->temp_t, e;
	u32 i, done = 0, pw = p->idle_mw;
	struct mi_sim_seg *seg;

	for (i = 0; i < sdev->nsegs && tt < t; i++) {
		seg = &sdev->segs[i];
		if (seg->start > tt) {
			e = min(seg->start, t);
			temp = mi_sim_thermal_at(p, temp, p->idle_mw, e - tt);
			tt = e;
			if (tt >= t)
				break;
		}
		e = min(seg->end, t);
		if (e > tt) {
			temp = mi_sim_thermal_at(p, temp, seg->power_mw,
						 e - tt);
			tt = e;
		}
		if (seg->end <= t)
			done = i + 1;
		else
			pw = seg->power_mw;
	}
	if (tt < t) {
		temp = mi_sim_thermal_at(p, temp, p->idle_mw, t - tt);
		tt = t;
	}
	if (power)
		*power = pw;
	if (commit && tt > sdev->temp_t) {
		sdev->temp_mc = temp;
		sdev->temp_t = tt;
		if (done) {
			sdev->nsegs -= done;
			memmove(sdev->segs, sdev->segs + done,
				sdev->nsegs * sizeof(sdev->segs[0]));
		}
		if (sdev->nsegs && sdev->segs[0].start < tt)
			sdev->segs[0].start = tt;
	}
	return temp;
}

/* Step the clock down when hot (@may_raise); full clock once cooled. */
static void mi_sim_throttle_update(struct mi_sim_dev *sdev, s64 temp,
				   bool may_raise)
{
	const struct mi_sim_personality *p = &sdev->pers;

	if (may_raise && temp >= p->throttle_mc &&
	    sdev->level < MI_SIM_MAX_THROTTLE) {
		sdev->level++;
		sdev->st.throttle_events++;
	} else if (temp < (s64)p->throttle_mc - MI_SIM_HYSTERESIS_MC) {
		sdev->level = 0;
	}
}

static void mi_sim_add_seg(struct mi_sim_dev *sdev, s64 start, s64 end,
			   u32 power_mw)
{
	/* never full in practice: one segment per queue is in the future */
	if (sdev->nsegs == MI_SIM_MAX_SEGS)
		mi_sim_temp_at(sdev, sdev->segs[0].end, true, NULL);
	if (sdev->nsegs == MI_SIM_MAX_SEGS)
		return;
	sdev->segs[sdev->nsegs].start = start;
	sdev->segs[sdev->nsegs].end = end;
	sdev->segs[sdev->nsegs].power_mw = power_mw;
	sdev->nsegs++;
}

static void mi_sim_work(struct work_struct *work)
{
	struct mi_sim_queue *q = container_of(work, struct mi_sim_queue, work);
	struct mi_sim_dev *sdev = q->sdev;
	const struct mi_job_desc *d = mi_job_desc(q->job);
	bool fail_dma = atomic_dec_if_positive(&sdev->fail_dma) >= 0;
	struct mi_job_stats js;
	s64 now, start, end;
	u64 total, work_ops, clock, kept;
	int status = 0, ret;
	u32 i, power;
	s64 temp;

	/* 1. The real computation (skipped when a DMA fault is injected). */
	for (i = 0; i < d->op_count && !fail_dma; i++) {
		ret = mi_sim_exec_op(&d->ops[i], &q->abort);
		if (ret == -ECANCELED)
			return; /* reset() in progress: it cleans up */
		if (ret) {
			status = -EIO;
			break;
		}
	}
	if (fail_dma)
		status = -EIO;
	/* which intermediates may stay on chip (structure only, no lock) */
	mi_sim_cascade_scan(d->ops, d->op_count, q->casc);

	/* 2. The modelled time on this chip. */
	spin_lock_bh(&sdev->lock);
	if (q->abort || q->state != MI_SIM_Q_COMPUTE) {
		spin_unlock_bh(&sdev->lock);
		return;
	}
	now = ktime_get_ns();
	start = max(q->t_run, sdev->array_free);
	/*
	 * Starts are monotonic (the array is serialised), so the state can
	 * be folded up to this one even when the computation ran late and
	 * the start lies in the past: no busy segment can come before it.
	 */
	temp = mi_sim_temp_at(sdev, start, true, NULL);
	mi_sim_throttle_update(sdev, temp, true);
	clock = max_t(u64, sdev->pers.clock_hz >> sdev->level, 1);
	total = mi_sim_job_time(&sdev->pers, clock, d->ops, d->op_count,
				q->casc, &js, &work_ops, &kept);
	power = mi_sim_power_mw(&sdev->pers, work_ops, total);
	end = start + total;
	mi_sim_add_seg(sdev, start, end, power);
	sdev->array_free = end;

	q->status = status;
	q->stats = js;
	q->kept = kept;
	q->state = MI_SIM_Q_TIMER;
	sdev->st.model_ns += total;
	sdev->st.last_job_ns = total;
	if (now > end)
		sdev->st.late_ns += now - end;
	sdev->st.energy_uj += mi_sim_muldiv(power, total, 1000000);
	hrtimer_start(&q->timer, ns_to_ktime(max(end, now)),
		      HRTIMER_MODE_ABS_SOFT);
	spin_unlock_bh(&sdev->lock);
}

static enum hrtimer_restart mi_sim_timer_fn(struct hrtimer *timer)
{
	struct mi_sim_queue *q =
		container_of(timer, struct mi_sim_queue, timer);
	struct mi_sim_dev *sdev = q->sdev;
	struct mi_job_stats js;
	struct mi_job *job;
	int status;

	spin_lock(&sdev->lock);
	if (q->state != MI_SIM_Q_TIMER || q->abort) {
		spin_unlock(&sdev->lock);
		return HRTIMER_NORESTART;
	}
	sdev->st.max_wall_ns =
		max_t(u64, sdev->st.max_wall_ns, ktime_get_ns() - q->t_run);
	job = q->job;
	status = q->status;
	js = q->stats;
	q->job = NULL;
	q->state = MI_SIM_Q_IDLE;
	if (status)
		sdev->st.jobs_failed++;
	else
		sdev->st.jobs_done++;
	sdev->st.busy_ns += js.busy_ns;
	sdev->st.macs += js.macs;
	sdev->st.dma_in += js.dma_bytes_in;
	sdev->st.dma_out += js.dma_bytes_out;
	sdev->st.sram_kept += q->kept;
	spin_unlock(&sdev->lock);

	mi_job_done(job, status, &js);
	return HRTIMER_NORESTART;
}

/* Inner-loop operations of a job's computation (an upper bound). */
static u64 mi_sim_job_work(const struct mi_job_desc *d)
{
	struct mi_sim_opcost c;
	u64 work = 0;
	u32 i;

	for (i = 0; i < d->op_count; i++) {
		mi_sim_op_cost(&d->ops[i], &c);
		work = mi_sim_sat_add(work, c.work);
		work = mi_sim_sat_add(work, d->ops[i].t[MI_T_OUT].elems);
	}
	return work;
}

static int mi_sim_run_job(struct mi_device *mdev, struct mi_job *job)
{
	struct mi_sim_dev *sdev = mi_device_priv(mdev);
	const struct mi_job_desc *d = mi_job_desc(job);
	struct mi_sim_queue *q;

	if (d->queue >= sdev->pers.queues)
		return -EINVAL;
	q = &sdev->q[d->queue];

	spin_lock_bh(&sdev->lock);
	if (q->state != MI_SIM_Q_IDLE) {
		spin_unlock_bh(&sdev->lock);
		return -EBUSY;
	}
	q->job = job;
	q->t_run = ktime_get_ns();
	q->abort = false;
	if (atomic_dec_if_positive(&sdev->fail_hang) >= 0) {
		/* a hung engine: never completes, reset() recovers it */
		q->state = MI_SIM_Q_HUNG;
		sdev->st.jobs_hung++;
		spin_unlock_bh(&sdev->lock);
		return 0;
	}
	q->state = MI_SIM_Q_COMPUTE;
	spin_unlock_bh(&sdev->lock);
	/*
	 * A tiny job is computed right here (the scheduler thread may sleep
	 * and the core holds off reset() meanwhile): a worker wake-up would
	 * cost more than the work.  Everything else goes to the worker.
	 */
	if (mi_sim_job_work(d) <= MI_SIM_INLINE_WORK)
		mi_sim_work(&q->work);
	else
		queue_work(sdev->wq, &q->work);
	return 0;
}

/* Stop whatever @q is doing; afterwards its job is never completed. */
static void mi_sim_queue_stop(struct mi_sim_queue *q)
{
	struct mi_sim_dev *sdev = q->sdev;

	spin_lock_bh(&sdev->lock);
	q->abort = true;
	spin_unlock_bh(&sdev->lock);
	cancel_work_sync(&q->work);
	hrtimer_cancel(&q->timer);
	spin_lock_bh(&sdev->lock);
	q->job = NULL;
	q->state = MI_SIM_Q_IDLE;
	q->abort = false;
	spin_unlock_bh(&sdev->lock);
}

static int mi_sim_reset(struct mi_device *mdev, u32 queue)
{
	struct mi_sim_dev *sdev = mi_device_priv(mdev);

	if (queue >= MI_SIM_MAX_QUEUES)
		return -EINVAL;
	mi_sim_queue_stop(&sdev->q[queue]);
	spin_lock_bh(&sdev->lock);
	sdev->st.resets++;
	spin_unlock_bh(&sdev->lock);
	if (atomic_dec_if_positive(&sdev->fail_reset) >= 0) {
		dev_dbg(&sdev->pdev->dev, "injected reset failure\n");
		return -EIO;
	}
	return 0;
}

static int mi_sim_read_counters(struct mi_device *mdev,
				struct mi_hw_counters *c)
{
	struct mi_sim_dev *sdev = mi_device_priv(mdev);
	u32 power;

	spin_lock_bh(&sdev->lock);
	c->temp_mc = mi_sim_temp_at(sdev, ktime_get_ns(), false, &power);
	mi_sim_throttle_update(sdev, c->temp_mc, false);
	c->power_mw = power;
	c->clock_khz = div_u64(sdev->pers.clock_hz >> sdev->level, 1000);
	c->throttle = sdev->level ? DRM_METAINFER_THROTTLE_THERMAL : 0;
	spin_unlock_bh(&sdev->lock);
	c->valid = DRM_METAINFER_VALID_TEMP | DRM_METAINFER_VALID_POWER |
		   DRM_METAINFER_VALID_CLOCK | DRM_METAINFER_VALID_THROTTLE;
	return 0;
}

static void mi_sim_debugfs_cb(struct mi_device *mdev, struct dentry *dir)
{
	mi_sim_debugfs_files(mi_device_priv(mdev), dir);
}

static const struct mi_backend_ops mi_sim_ops = {
	.run_job = mi_sim_run_job,
	.reset = mi_sim_reset,
	.read_counters = mi_sim_read_counters,
	.debugfs_init = mi_sim_debugfs_cb,
};

/**
 * mi_sim_engine_status() - snapshot of a device's state and counters
 * @sdev: the simulated device
 * @st: filled in
 */
void mi_sim_engine_status(struct mi_sim_dev *sdev, struct mi_sim_status *st)
{
	u32 i;

	spin_lock_bh(&sdev->lock);
	*st = sdev->st;
	st->temp_mc =
		mi_sim_temp_at(sdev, ktime_get_ns(), false, &st->power_mw);
	mi_sim_throttle_update(sdev, st->temp_mc, false);
	st->throttle_level = sdev->level;
	st->clock_hz = sdev->pers.clock_hz >> sdev->level;
	st->jobs_queued = 0;
	for (i = 0; i < MI_SIM_MAX_QUEUES; i++)
		st->jobs_queued += sdev->q[i].state != MI_SIM_Q_IDLE;
	spin_unlock_bh(&sdev->lock);
}

/**
 * mi_sim_pers_get() - copy a device's current personality
 * @sdev: the simulated device
 * @p: filled in
 */
void mi_sim_pers_get(struct mi_sim_dev *sdev, struct mi_sim_personality *p)
{
	spin_lock_bh(&sdev->lock);
	*p = sdev->pers;
	spin_unlock_bh(&sdev->lock);
}

/**
 * mi_sim_pers_update() - change live-tunable fields of a device
 * @sdev: the simulated device
 * @str: key=value pairs; modified in place
 *
 * Fields the core was told at registration (MACs/cycle, op mask, queues)
 * cannot change; the others take effect from the next job on (thermal
 * ones also for the time since the last job started, which is integrated
 * lazily).
 *
 * Return: 0 or the error of mi_sim_pers_apply().
 */
int mi_sim_pers_update(struct mi_sim_dev *sdev, char *str)
{
	struct mi_sim_personality p;
	int ret;

	mi_sim_pers_get(sdev, &p);
	ret = mi_sim_pers_apply(&p, str, true);
	if (ret)
		return ret;
	spin_lock_bh(&sdev->lock);
	sdev->pers = p;
	spin_unlock_bh(&sdev->lock);
	return 0;
}

/**
 * mi_sim_engine_init() - set up a device's queues and thermal state
 * @sdev: the simulated device (personality already set)
 *
 * Called at every probe: a chip bound again starts idle and cold, at full
 * clock, with nothing of its last binding's schedule.
 *
 * Return: 0 or -ENOMEM.
 */
int mi_sim_engine_init(struct mi_sim_dev *sdev)
{
	struct mi_sim_queue *q;
	u32 i;

	/* jobs complete through it: it must progress under memory pressure */
	sdev->wq = alloc_workqueue("metainfer_sim%u",
				   WQ_UNBOUND | WQ_MEM_RECLAIM, 0, sdev->id);
	if (!sdev->wq)
		return -ENOMEM;
	for (i = 0; i < MI_SIM_MAX_QUEUES; i++) {
		q = &sdev->q[i];
		q->sdev = sdev;
		q->idx = i;
		q->state = MI_SIM_Q_IDLE;
		q->abort = false;
		q->job = NULL;
		INIT_WORK(&q->work, mi_sim_work);
		hrtimer_init(&q->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
		q->timer.function = mi_sim_timer_fn;
	}
	sdev->temp_t = ktime_get_ns();
	sdev->temp_mc = sdev->pers.ambient_mc;
	sdev->array_free = sdev->temp_t;
	sdev->nsegs = 0;
	sdev->level = 0;
	return 0;
}

/**
 * mi_sim_engine_fini() - stop every queue and free the workqueue
 * @sdev: the simulated device, already unregistered from the core
 */
void mi_sim_engine_fini(struct mi_sim_dev *sdev)
{
	u32 i;

	if (!sdev->wq)
		return;
	for (i = 0; i < MI_SIM_MAX_QUEUES; i++)
		mi_sim_queue_stop(&sdev->q[i]);
	destroy_workqueue(sdev->wq);
	sdev->wq = NULL;
}

/**
 * mi_sim_backend_register() - register a device with metainfer.ko
 * @sdev: the simulated device, its platform device added
 *
 * Return: 0 or the error of mi_device_register().
 */
int mi_sim_backend_register(struct mi_sim_dev *sdev)
{
	const struct mi_sim_personality *p = &sdev->pers;
	struct mi_backend_caps caps = {
		.name = p->name,
		.backend = KBUILD_MODNAME,
		.op_mask = p->op_mask,
		.dtype_mask = BIT(DRM_METAINFER_DTYPE_INT8) |
			      BIT(DRM_METAINFER_DTYPE_UINT8) |
			      BIT(DRM_METAINFER_DTYPE_INT32),
		.layout_mask = BIT(DRM_METAINFER_LAYOUT_PLAIN) |
			       BIT(DRM_METAINFER_LAYOUT_NCHW) |
			       BIT(DRM_METAINFER_LAYOUT_NHWC),
		.num_queues = p->queues,
		.clock_khz = div_u64(p->clock_hz, 1000),
		.sram_bytes = p->sram_bytes,
		.dma_bw = p->dma_bw,
		.dma_burst = p->dma_burst,
		.preferred_layout = p->layout,
	};
	char *buf;
	ssize_t n;

	if (p->macs_int16)
		caps.dtype_mask |= BIT(DRM_METAINFER_DTYPE_INT16);
	caps.macs_per_cycle[DRM_METAINFER_DTYPE_INT8] = p->macs_int8;
	caps.macs_per_cycle[DRM_METAINFER_DTYPE_UINT8] = p->macs_int8;
	caps.macs_per_cycle[DRM_METAINFER_DTYPE_INT16] = p->macs_int16;
	caps.macs_per_cycle[DRM_METAINFER_DTYPE_INT32] = p->macs_int32;

	/* "firmware" version: model version and a hash of the personality */
	buf = (char *)get_zeroed_page(GFP_KERNEL); /* sysfs_emit wants a page */
	if (!buf)
		return -ENOMEM;
	n = mi_sim_pers_show(p, buf);
	caps.fw_version = ((u64)MI_SIM_MODEL_VERSION << 32) |
			  crc32_le(0, buf, n);
	free_page((unsigned long)buf);

	return mi_device_register(&sdev->pdev->dev, &mi_sim_ops, &caps, sdev,
				  &sdev->mdev);
}

/**
 * mi_sim_backend_unregister() - unregister a device from metainfer.ko
 * @sdev: the simulated device
 *
 * The core resets queues with a job in flight and fails queued jobs; no
 * backend op runs after this returns.
 */
void mi_sim_backend_unregister(struct mi_sim_dev *sdev)
{
	if (sdev->mdev)
		mi_device_unregister(sdev->mdev);
	sdev->mdev = NULL;
}
