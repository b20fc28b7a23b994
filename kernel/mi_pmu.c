// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: one perf PMU per device, "metainfer_<render minor>".
 *
 * Modelled on drivers/gpu/drm/i915/i915_pmu.c of 6.1: system-wide
 * counting events only (no sampling, no per-task events), all bound to the
 * one CPU in the "cpumask" file, which a multi-instance CPU hotplug state
 * moves when that CPU goes offline (6.1 has no pmu->scope).
 *
 * Counters (busy-ns, jobs, ...) read the device's job counters
 * (mi_perf.c).  Gauges (temperature-mC, power-mW, clock-kHz, queue-depth)
 * are sampled every MI_PMU_SAMPLE_MS by a work item while an event needs
 * them, because the backend's read_counters may sleep and perf reads run
 * with interrupts off; like i915's frequency events they count the
 * gauge's time integral, in value x microseconds, and their .scale of
 * 1e-6 makes perf print value x seconds: an interval of `perf stat -I 1000`
 * shows the interval's mean.
 *
 * Hot-unplug: mi_pmu_fini() sets @closed, which every callback that
 * could start something checks (event_init, add, start, the sampler, CPU
 * hotplug): no new events, no more sampling, nothing reaches the backend.  Each
 * event holds a reference to the drm_device and to the PMU, so reads
 * still see the device's job counters (memory only; they no longer move)
 * and the gauges' integrals up to the last sample, and no count made
 * before the removal is lost.  In 6.1, perf_pmu_unregister() frees per-CPU data that live
 * events still use (pmu_disable_count, the CPU context), so a PMU with
 * events open is unregistered only after the last one is destroyed, from
 * an RCU work item (the perf core touches the PMU for a moment after
 * ->destroy()).  Until then its name stays taken and a new device with the
 * same minor goes without a PMU.
 */

#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/perf_event.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "mi_drv.h"

#define MI_PMU_SAMPLE_MS 10

/* attr.config of the events; also in Documentation/uapi.rst */
enum mi_pmu_config {
	MI_PMU_BUSY_NS = 0x00,
	MI_PMU_JOBS = 0x01,
	MI_PMU_JOBS_FAILED = 0x02,
	MI_PMU_MACS = 0x03,
	MI_PMU_DMA_BYTES_IN = 0x04,
	MI_PMU_DMA_BYTES_OUT = 0x05,
	MI_PMU_STALL_NS = 0x06,
	MI_PMU_JOBS_SUBMITTED = 0x07,
	MI_PMU_JOBS_TIMED_OUT = 0x08,
	MI_PMU_QUEUE_WAIT_NS = 0x09,
	MI_PMU_GAUGE_BASE = 0x10,
	MI_PMU_TEMP = MI_PMU_GAUGE_BASE,
	MI_PMU_POWER,
	MI_PMU_CLOCK,
	MI_PMU_QUEUE_DEPTH,
	MI_PMU_CONFIG_END,
};

#define MI_PMU_GAUGES (MI_PMU_CONFIG_END - MI_PMU_GAUGE_BASE)

/**
 * struct mi_pmu - the perf PMU of one device
 * @base: the perf PMU
 * @node: entry in mi_pmu_list
 * @cpuhp: CPU hotplug instance
 * @refs: the device's reference (until mi_pmu_fini()) and one per event
 * @mdev: device; valid while @refs holds events (each holds a drm ref)
 * @cpu: CPU the events are bound to
 * @lock: protects everything below
 * @closed: the device is going away: callbacks leave it alone
 * @gauge_users: started gauge events
 * @sampled: @gauge_val and @sample_ns hold a sample of this sampling run
 * @sample_ns: time up to which @gauge_sum is integrated
 * @gauge_val: last sampled value per gauge
 * @gauge_sum: integral per gauge up to @sample_ns, value x us
 * @sample: the gauge sampling work
 * @reap: unregisters and frees the PMU after the last event
 * @name: "metainfer_<minor>"
 */
struct mi_pmu {
	struct pmu base;
	struct list_head node;
	struct hlist_node cpuhp;
	refcount_t refs;
	struct mi_device *mdev;
	int cpu;
	raw_spinlock_t lock;
	bool closed;
	unsigned int gauge_users;
	bool sampled;
	u64 sample_ns;
	u64 gauge_val[MI_PMU_GAUGES];
	u64 gauge_sum[MI_PMU_GAUGES];
	struct delayed_work sample;
	struct rcu_work reap;
	char name[32];
};

/* One CPU reads every metainfer PMU (as i915_pmu_cpumask). */
static cpumask_t mi_pmu_cpumask;
static enum cpuhp_state mi_pmu_cpuhp_state = CPUHP_INVALID;
static struct workqueue_struct *mi_pmu_wq;
/* Every PMU from registration until it is unregistered, under the mutex. */
static LIST_HEAD(mi_pmu_list);
static DEFINE_MUTEX(mi_pmu_list_lock);

static inline struct mi_pmu *to_mi_pmu(struct pmu *pmu)
{
	return container_of(pmu, struct mi_pmu, base);
}

static bool mi_pmu_is_gauge(u64 config)
{
	return config >= MI_PMU_GAUGE_BASE && config < MI_PMU_CONFIG_END;
}

static bool mi_pmu_config_valid(u64 config)
{
	return config <= MI_PMU_QUEUE_WAIT_NS || mi_pmu_is_gauge(config);
}

/* ---- sysfs: format, events (with .unit and .scale), cpumask ---- */

PMU_FORMAT_ATTR(event, "config:0-7");

static struct attribute *mi_pmu_format_attrs[] = {
	&format_attr_event.attr,
	NULL,
};

static const struct attribute_group mi_pmu_format_group = {
	.name = "format",
	.attrs = mi_pmu_format_attrs,
};

/* PMU_EVENT_ATTR_STRING() names the file after a C identifier: no '-'. */
#define MI_PMU_STR(_var, _name, _str)                              \
	static struct perf_pmu_events_attr _var = {                \
		.attr = { .attr = { .name = _name, .mode = 0444 }, \
			  .show = perf_event_sysfs_show },         \
		.event_str = _str,                                 \
	}

#define MI_PMU_EVENT(_id, _name, _config, _unit)                           \
	MI_PMU_STR(mi_pmu_ev_##_id, _name, "event=" __stringify(_config)); \
	MI_PMU_STR(mi_pmu_unit_##_id, _name ".unit", _unit)

#define MI_PMU_GAUGE(_id, _name, _config, _unit)  \
	MI_PMU_EVENT(_id, _name, _config, _unit); \
	MI_PMU_STR(mi_pmu_scale_##_id, _name ".scale", "1e-6")

MI_PMU_EVENT(busy, "busy-ns", 0x00, "ns");
MI_PMU_EVENT(jobs, "jobs", 0x01, "jobs");
MI_PMU_EVENT(failed, "jobs-failed", 0x02, "jobs");
MI_PMU_EVENT(macs, "macs", 0x03, "MACs");
MI_PMU_EVENT(dma_in, "dma-bytes-in", 0x04, "bytes");
MI_PMU_EVENT(dma_out, "dma-bytes-out", 0x05, "bytes");
MI_PMU_EVENT(stall, "stall-ns", 0x06, "ns");
MI_PMU_EVENT(submitted, "jobs-submitted", 0x07, "jobs");
MI_PMU_EVENT(timed_out, "jobs-timed-out", 0x08, "jobs");
MI_PMU_EVENT(wait, "queue-wait-ns", 0x09, "ns");
MI_PMU_GAUGE(temp, "temperature-mC", 0x10, "mC");
MI_PMU_GAUGE(power, "power-mW", 0x11, "mW");
MI_PMU_GAUGE(clock, "clock-kHz", 0x12, "kHz");
MI_PMU_GAUGE(depth, "queue-depth", 0x13, "jobs");

static_assert(MI_PMU_QUEUE_WAIT_NS == 0x09 && MI_PMU_TEMP == 0x10 &&
	      MI_PMU_QUEUE_DEPTH == 0x13);

#define MI_PMU_EV_ATTRS(_id) \
	&mi_pmu_ev_##_id.attr.attr, &mi_pmu_unit_##_id.attr.attr
#define MI_PMU_GAUGE_ATTRS(_id) \
	MI_PMU_EV_ATTRS(_id), &mi_pmu_scale_##_id.attr.attr

static struct attribute *mi_pmu_event_attrs[] = {
	MI_PMU_EV_ATTRS(busy),
	MI_PMU_EV_ATTRS(jobs),
	MI_PMU_EV_ATTRS(failed),
	MI_PMU_EV_ATTRS(macs),
	MI_PMU_EV_ATTRS(dma_in),
	MI_PMU_EV_ATTRS(dma_out),
	MI_PMU_EV_ATTRS(stall),
	MI_PMU_EV_ATTRS(submitted),
	MI_PMU_EV_ATTRS(timed_out),
	MI_PMU_EV_ATTRS(wait),
	MI_PMU_GAUGE_ATTRS(temp),
	MI_PMU_GAUGE_ATTRS(power),
	MI_PMU_GAUGE_ATTRS(clock),
	MI_PMU_GAUGE_ATTRS(depth),
	NULL,
};

static const struct attribute_group mi_pmu_events_group = {
	.name = "events",
	.attrs = mi_pmu_event_attrs,
};

static ssize_t cpumask_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return cpumap_print_to_pagebuf(true, buf, &mi_pmu_cpumask);
}
static DEVICE_ATTR_RO(cpumask);

static struct attribute *mi_pmu_cpumask_attrs[] = {
	&dev_attr_cpumask.attr,
	NULL,
};

static const struct attribute_group mi_pmu_cpumask_group = {
	.attrs = mi_pmu_cpumask_attrs,
};

static const struct attribute_group *mi_pmu_attr_groups[] = {
	&mi_pmu_format_group,
	&mi_pmu_events_group,
	&mi_pmu_cpumask_group,
	NULL,
};

/* ---- gauges ---- */

/*
 * Add the last sample's values from then until now to the integrals.
 * Under @lock, with the time read under it too, so that every read and
 * every fold happen in time order and the integrals never go back.
 */
static void mi_pmu_gauge_fold(struct mi_pmu *pmu)
{
	u64 now = ktime_get_ns();
	int i;

	if (pmu->sampled && now > pmu->sample_ns)
		for (i = 0; i < MI_PMU_GAUGES; i++)
			pmu->gauge_sum[i] += div_u64(
				pmu->gauge_val[i] * (now - pmu->sample_ns),
				1000);
	pmu->sample_ns = now;
}

static void mi_pmu_sample_work(struct work_struct *work)
{
	struct mi_pmu *pmu =
		container_of(to_delayed_work(work), struct mi_pmu, sample);
	struct mi_device *mdev = pmu->mdev;
	u64 val[MI_PMU_GAUGES] = {};
	struct mi_hw_counters hw;
	unsigned long flags;
	bool rearm;
	int idx;

	if (drm_dev_enter(mdev->drm, &idx)) {
		if (!mi_read_hw_counters(mdev, &hw)) {
			if (hw.valid & DRM_METAINFER_VALID_TEMP)
				val[MI_PMU_TEMP - MI_PMU_GAUGE_BASE] =
					max_t(s64, hw.temp_mc, 0);
			if (hw.valid & DRM_METAINFER_VALID_POWER)
				val[MI_PMU_POWER - MI_PMU_GAUGE_BASE] =
					hw.power_mw;
			if (hw.valid & DRM_METAINFER_VALID_CLOCK)
				val[MI_PMU_CLOCK - MI_PMU_GAUGE_BASE] =
					hw.clock_khz;
		}
		drm_dev_exit(idx);
	}
	val[MI_PMU_QUEUE_DEPTH - MI_PMU_GAUGE_BASE] =
		max_t(s64, atomic64_read(&mdev->counters.inflight), 0);

	raw_spin_lock_irqsave(&pmu->lock, flags);
	/* the last sample's values held from then until now */
	mi_pmu_gauge_fold(pmu);
	memcpy(pmu->gauge_val, val, sizeof(val));
	rearm = pmu->gauge_users && !pmu->closed;
	pmu->sampled = rearm;
	if (rearm)
		queue_delayed_work(system_wq, &pmu->sample,
				   msecs_to_jiffies(MI_PMU_SAMPLE_MS));
	raw_spin_unlock_irqrestore(&pmu->lock, flags);
}

static u64 mi_pmu_gauge_read(struct mi_pmu *pmu, unsigned int i)
{
	unsigned long flags;
	u64 v, now;

	raw_spin_lock_irqsave(&pmu->lock, flags);
	now = ktime_get_ns();
	v = pmu->gauge_sum[i];
	if (pmu->sampled && now > pmu->sample_ns)
		v += div_u64(pmu->gauge_val[i] * (now - pmu->sample_ns), 1000);
	raw_spin_unlock_irqrestore(&pmu->lock, flags);
	return v;
}

/* ---- perf callbacks ---- */

static u64 mi_pmu_value(struct mi_pmu *pmu, u64 config)
{
	struct mi_counters *c = &pmu->mdev->counters;

	switch (config) {
	case MI_PMU_BUSY_NS:
		return atomic64_read(&c->busy_ns);
	case MI_PMU_JOBS:
		return atomic64_read(&c->jobs_completed);
	case MI_PMU_JOBS_FAILED:
		return atomic64_read(&c->jobs_failed);
	case MI_PMU_MACS:
		return atomic64_read(&c->macs);
	case MI_PMU_DMA_BYTES_IN:
		return atomic64_read(&c->dma_bytes_in);
	case MI_PMU_DMA_BYTES_OUT:
		return atomic64_read(&c->dma_bytes_out);
	case MI_PMU_STALL_NS:
		return atomic64_read(&c->stall_ns);
	case MI_PMU_JOBS_SUBMITTED:
		return atomic64_read(&c->jobs_submitted);
	case MI_PMU_JOBS_TIMED_OUT:
		return atomic64_read(&c->jobs_timed_out);
	case MI_PMU_QUEUE_WAIT_NS:
		return atomic64_read(&c->queue_wait_ns);
	}
	if (mi_pmu_is_gauge(config))
		return mi_pmu_gauge_read(pmu, config - MI_PMU_GAUGE_BASE);
	return 0;
}

/* Drop what mi_pmu_event_init() took for an event. */
static void mi_pmu_event_put(struct mi_pmu *pmu)
{
	drm_dev_put(pmu->mdev->drm);
	/* the last event of a removed device: see the head of this file */
	if (refcount_dec_and_test(&pmu->refs))
		queue_rcu_work(mi_pmu_wq, &pmu->reap);
}

static void mi_pmu_event_destroy(struct perf_event *event)
{
	mi_pmu_event_put(to_mi_pmu(event->pmu));
}

/* Is the sensor behind gauge @config present?  Process context. */
static bool mi_pmu_gauge_present(struct mi_device *mdev, u64 config)
{
	struct mi_hw_counters hw;
	bool present = false;
	u32 bit;
	int idx;

	switch (config) {
	case MI_PMU_TEMP:
		bit = DRM_METAINFER_VALID_TEMP;
		break;
	case MI_PMU_POWER:
		bit = DRM_METAINFER_VALID_POWER;
		break;
	case MI_PMU_CLOCK:
		bit = DRM_METAINFER_VALID_CLOCK;
		break;
	default:
		return true;
	}
	if (drm_dev_enter(mdev->drm, &idx)) {
		present = !mi_read_hw_counters(mdev, &hw) && (hw.valid & bit);
		drm_dev_exit(idx);
	}
	return present;
}

static int mi_pmu_event_init(struct perf_event *event)
{
	struct mi_pmu *pmu = to_mi_pmu(event->pmu);
	u64 config = event->attr.config;
	unsigned long flags;
	int ret = 0;

	if (event->attr.type != event->pmu->type)
		return -ENOENT;
	if (READ_ONCE(pmu->closed))
		return -ENODEV;
	/* counting only, system-wide, on the CPU in cpumask */
	if (is_sampling_event(event) || has_branch_stack(event))
		return -EINVAL;
	if (event->cpu < 0 || !cpumask_test_cpu(event->cpu, &mi_pmu_cpumask))
		return -EINVAL;
	if (!mi_pmu_config_valid(config))
		return -ENOENT;

	/* the references keep the device's memory while we look at it */
	raw_spin_lock_irqsave(&pmu->lock, flags);
	if (!pmu->closed) {
		refcount_inc(&pmu->refs);
		drm_dev_get(pmu->mdev->drm);
	} else {
		ret = -ENODEV;
	}
	raw_spin_unlock_irqrestore(&pmu->lock, flags);
	if (ret)
		return ret;
	if (mi_pmu_is_gauge(config) &&
	    !mi_pmu_gauge_present(pmu->mdev, config)) {
		/* the perf core calls no ->destroy() when ->event_init() fails */
		mi_pmu_event_put(pmu);
		return -EOPNOTSUPP;
	}
	event->destroy = mi_pmu_event_destroy;
	return 0;
}

static void mi_pmu_event_read(struct perf_event *event)
{
	struct mi_pmu *pmu = to_mi_pmu(event->pmu);
	struct hw_perf_event *hwc = &event->hw;
	u64 prev, now;

	/* also once @closed: the counts made up to the removal still arrive */
	do {
		prev = local64_read(&hwc->prev_count);
		now = mi_pmu_value(pmu, event->attr.config);
	} while (local64_cmpxchg(&hwc->prev_count, prev, now) != prev);
	local64_add(now - prev, &event->count);
}

static void mi_pmu_event_start(struct perf_event *event, int flags)
{
	struct mi_pmu *pmu = to_mi_pmu(event->pmu);
	unsigned long irqflags;

	if (READ_ONCE(pmu->closed))
		return;
	if (mi_pmu_is_gauge(event->attr.config)) {
		raw_spin_lock_irqsave(&pmu->lock, irqflags);
		if (!pmu->closed && !pmu->gauge_users++)
			mod_delayed_work(system_wq, &pmu->sample, 0);
		raw_spin_unlock_irqrestore(&pmu->lock, irqflags);
	}
	local64_set(&event->hw.prev_count,
		    mi_pmu_value(pmu, event->attr.config));
	event->hw.state = 0;
}

static void mi_pmu_event_stop(struct perf_event *event, int flags)
{
	struct mi_pmu *pmu = to_mi_pmu(event->pmu);
	unsigned long irqflags;

	if (event->hw.state & PERF_HES_STOPPED)
		return;
	if (flags & PERF_EF_UPDATE)
		mi_pmu_event_read(event);
	if (mi_pmu_is_gauge(event->attr.config)) {
		/* once @closed, the sampling is off whatever this says */
		raw_spin_lock_irqsave(&pmu->lock, irqflags);
		pmu->gauge_users--;
		raw_spin_unlock_irqrestore(&pmu->lock, irqflags);
	}
	event->hw.state = PERF_HES_STOPPED | PERF_HES_UPTODATE;
}

static int mi_pmu_event_add(struct perf_event *event, int flags)
{
	struct mi_pmu *pmu = to_mi_pmu(event->pmu);

	if (READ_ONCE(pmu->closed))
		return -ENODEV;
	event->hw.state = PERF_HES_STOPPED | PERF_HES_UPTODATE;
	if (flags & PERF_EF_START)
		mi_pmu_event_start(event, flags);
	return 0;
}

static void mi_pmu_event_del(struct perf_event *event, int flags)
{
	mi_pmu_event_stop(event, PERF_EF_UPDATE);
}

/* ---- CPU hotplug: keep one online CPU in mi_pmu_cpumask ---- */

static int mi_pmu_cpu_online(unsigned int cpu, struct hlist_node *node)
{
	if (cpumask_empty(&mi_pmu_cpumask))
		cpumask_set_cpu(cpu, &mi_pmu_cpumask);
	return 0;
}

static int mi_pmu_cpu_offline(unsigned int cpu, struct hlist_node *node)
{
	struct mi_pmu *pmu = hlist_entry_safe(node, struct mi_pmu, cpuhp);
	unsigned int target;

	/* removing a closed PMU's instance runs this on every CPU */
	if (READ_ONCE(pmu->closed))
		return 0;
	if (cpumask_test_and_clear_cpu(cpu, &mi_pmu_cpumask)) {
		target = cpumask_any_but(cpu_online_mask, cpu);
		if (target < nr_cpu_ids)
			cpumask_set_cpu(target, &mi_pmu_cpumask);
	}
	target = cpumask_first(&mi_pmu_cpumask);
	if (pmu->cpu == cpu && target < nr_cpu_ids) {
		perf_pmu_migrate_context(&pmu->base, cpu, target);
		pmu->cpu = target;
	}
	return 0;
}

/* ---- registration ---- */

static void mi_pmu_free(struct mi_pmu *pmu)
{
	mutex_lock(&mi_pmu_list_lock);
	list_del(&pmu->node);
	mutex_unlock(&mi_pmu_list_lock);
	perf_pmu_unregister(&pmu->base);
	kfree(pmu);
}

static void mi_pmu_reap_work(struct work_struct *work)
{
	mi_pmu_free(container_of(to_rcu_work(work), struct mi_pmu, reap));
}

/* Is @name taken by the PMU of a removed device?  Under the list lock. */
static struct mi_pmu *mi_pmu_find(const char *name)
{
	struct mi_pmu *pmu;

	list_for_each_entry(pmu, &mi_pmu_list, node)
		if (!strcmp(pmu->name, name))
			return pmu;
	return NULL;
}

/**
 * mi_pmu_init() - register the device's perf PMU
 * @mdev: a registered device (its render minor is known)
 *
 * A device without a PMU works otherwise normally, so failures are
 * logged, not returned.
 */
void mi_pmu_init(struct mi_device *mdev)
{
	struct mi_pmu *pmu;
	int ret;

	if (mi_pmu_cpuhp_state == CPUHP_INVALID)
		return;
	pmu = kzalloc(sizeof(*pmu), GFP_KERNEL);
	if (!pmu)
		return;
	snprintf(pmu->name, sizeof(pmu->name), "metainfer_%d", mdev->minor);
	pmu->mdev = mdev;
	refcount_set(&pmu->refs, 1);
	raw_spin_lock_init(&pmu->lock);
	INIT_DELAYED_WORK(&pmu->sample, mi_pmu_sample_work);
	INIT_RCU_WORK(&pmu->reap, mi_pmu_reap_work);
	pmu->base = (struct pmu){
		.module = THIS_MODULE,
		.task_ctx_nr = perf_invalid_context,
		.attr_groups = mi_pmu_attr_groups,
		.event_init = mi_pmu_event_init,
		.add = mi_pmu_event_add,
		.del = mi_pmu_event_del,
		.start = mi_pmu_event_start,
		.stop = mi_pmu_event_stop,
		.read = mi_pmu_event_read,
	};

	mutex_lock(&mi_pmu_list_lock);
	if (mi_pmu_find(pmu->name)) {
		/* a reap may be on its way: let it finish, then look again */
		mutex_unlock(&mi_pmu_list_lock);
		rcu_barrier();
		flush_workqueue(mi_pmu_wq);
		mutex_lock(&mi_pmu_list_lock);
	}
	if (mi_pmu_find(pmu->name)) {
		mutex_unlock(&mi_pmu_list_lock);
		drm_info(
			mdev->drm,
			"no perf PMU: %s is held by open events of a removed device\n",
			pmu->name);
		kfree(pmu);
		return;
	}
	list_add(&pmu->node, &mi_pmu_list);
	mutex_unlock(&mi_pmu_list_lock);

	/* as i915: register, then follow CPU hotplug */
	pmu->cpu = cpumask_first(&mi_pmu_cpumask);
	ret = perf_pmu_register(&pmu->base, pmu->name, -1);
	if (ret)
		goto err_unlist;
	ret = cpuhp_state_add_instance(mi_pmu_cpuhp_state, &pmu->cpuhp);
	if (ret)
		goto err_unregister;
	mdev->pmu = pmu;
	return;

err_unregister:
	perf_pmu_unregister(&pmu->base);
err_unlist:
	mutex_lock(&mi_pmu_list_lock);
	list_del(&pmu->node);
	mutex_unlock(&mi_pmu_list_lock);
	kfree(pmu);
	drm_notice(mdev->drm, "no perf PMU: registration failed (%d)\n", ret);
}

/**
 * mi_pmu_fini() - close the device's PMU
 * @mdev: device being unregistered (backend still there)
 *
 * After this no PMU callback calls the backend.  The PMU is unregistered
 * now if no event is open, else after the last one is closed.
 */
void mi_pmu_fini(struct mi_device *mdev)
{
	struct mi_pmu *pmu = mdev->pmu;
	unsigned long flags;

	if (!pmu)
		return;
	raw_spin_lock_irqsave(&pmu->lock, flags);
	WRITE_ONCE(pmu->closed, true);
	raw_spin_unlock_irqrestore(&pmu->lock, flags);
	cancel_delayed_work_sync(&pmu->sample);
	/* gauges end here, holding their last sample until now */
	raw_spin_lock_irqsave(&pmu->lock, flags);
	mi_pmu_gauge_fold(pmu);
	pmu->sampled = false;
	raw_spin_unlock_irqrestore(&pmu->lock, flags);
	cpuhp_state_remove_instance(mi_pmu_cpuhp_state, &pmu->cpuhp);
	mdev->pmu = NULL;
	if (refcount_dec_and_test(&pmu->refs))
		mi_pmu_free(pmu);
}

/**
 * mi_pmu_module_init() - CPU hotplug state and work queue of the PMUs
 *
 * Without them devices get no PMU; the module loads anyway.
 */
void mi_pmu_module_init(void)
{
	int ret;

	mi_pmu_wq = alloc_workqueue("metainfer_pmu", 0, 0);
	if (!mi_pmu_wq)
		return;
	ret = cpuhp_setup_state_multi(CPUHP_AP_ONLINE_DYN,
				      "perf/metainfer:online",
				      mi_pmu_cpu_online, mi_pmu_cpu_offline);
	if (ret < 0) {
		pr_notice("metainfer: no perf PMUs: cpuhp state (%d)\n", ret);
		destroy_workqueue(mi_pmu_wq);
		mi_pmu_wq = NULL;
		return;
	}
	mi_pmu_cpuhp_state = ret;
	/* the online callbacks only run for instances: start with one CPU */
	cpus_read_lock();
	cpumask_set_cpu(cpumask_first(cpu_online_mask), &mi_pmu_cpumask);
	cpus_read_unlock();
}

/**
 * mi_pmu_module_fini() - undo mi_pmu_module_init()
 *
 * Runs when no event holds the module, so every PMU has been queued for
 * its reap: wait for those.
 */
void mi_pmu_module_fini(void)
{
	if (mi_pmu_cpuhp_state == CPUHP_INVALID)
		return;
	rcu_barrier();
	destroy_workqueue(mi_pmu_wq);
	cpuhp_remove_multi_state(mi_pmu_cpuhp_state);
	mi_pmu_cpuhp_state = CPUHP_INVALID;
}
