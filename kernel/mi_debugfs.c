// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: debugfs.
 *
 * /sys/kernel/debug/metainfer/renderD<minor>/
 *   bo_count   live buffer objects of the device (leak checks)
 *   status     device, queue and job state, one "key value" per line
 *   ...        files the backend adds (&mi_backend_ops.debugfs_init)
 */

#include <linux/debugfs.h>
#include <linux/seq_file.h>

#include "mi_drv.h"

static struct dentry *mi_debugfs_root;

static int mi_bo_count_show(struct seq_file *m, void *unused)
{
	struct mi_device *mdev = m->private;

	seq_printf(m, "%d\n", atomic_read(&mdev->bo_count));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(mi_bo_count);

#define MI_SHOW64(m, key, v) \
	seq_printf(m, "%s %llu\n", key, (u64)atomic64_read(v))

static int mi_status_show(struct seq_file *m, void *unused)
{
	struct mi_device *mdev = m->private;
	struct mi_counters *c = &mdev->counters;
	u32 i;

	seq_printf(m, "name %s\n", mdev->name);
	seq_printf(m, "backend %s\n", mdev->backend);
	seq_printf(m, "minor %d\n", mdev->minor);
	seq_printf(m, "lost %d\n", mi_device_is_lost(mdev));
	seq_printf(m, "queues %u\n", mdev->num_queues);
	seq_printf(m, "bo_count %d\n", atomic_read(&mdev->bo_count));
	MI_SHOW64(m, "bo_bytes", &mdev->bo_bytes);
	seq_printf(m, "files %d\n", atomic_read(&mdev->file_count));
	seq_printf(m, "contexts %d\n", atomic_read(&mdev->ctx_count));
	seq_printf(m, "jobs_live %d\n", atomic_read(&mdev->job_count));
	/* module-wide: a leaked scheduler fence keeps its hardware fence */
	seq_printf(m, "hw_fences_live %d\n", atomic_read(&mi_hw_fences_live));
	MI_SHOW64(m, "jobs_submitted", &c->jobs_submitted);
	MI_SHOW64(m, "jobs_completed", &c->jobs_completed);
	MI_SHOW64(m, "jobs_failed", &c->jobs_failed);
	MI_SHOW64(m, "jobs_timed_out", &c->jobs_timed_out);
	MI_SHOW64(m, "jobs_inflight", &c->inflight);
	MI_SHOW64(m, "resets", &mdev->resets);
	MI_SHOW64(m, "resets_failed", &mdev->resets_failed);
	for (i = 0; i < mdev->num_queues; i++) {
		struct mi_queue *q = &mdev->queues[i];

		seq_printf(m, "q%u_jobs_run %llu\n", i,
			   (u64)atomic64_read(&q->jobs_run));
		seq_printf(m, "q%u_resets %llu\n", i,
			   (u64)atomic64_read(&q->resets));
		seq_printf(m, "q%u_busy %d\n", i, READ_ONCE(q->active) != NULL);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(mi_status);

/**
 * mi_debugfs_init() - create the device's debugfs directory
 * @mdev: device (registered, minor known)
 */
void mi_debugfs_init(struct mi_device *mdev)
{
	char name[32];

	if (IS_ERR_OR_NULL(mi_debugfs_root))
		return;
	snprintf(name, sizeof(name), "renderD%d", mdev->minor);
	mdev->debugfs = debugfs_create_dir(name, mi_debugfs_root);
	debugfs_create_file("bo_count", 0444, mdev->debugfs, mdev,
			    &mi_bo_count_fops);
	debugfs_create_file("status", 0444, mdev->debugfs, mdev,
			    &mi_status_fops);
	if (mdev->ops->debugfs_init)
		mdev->ops->debugfs_init(mdev, mdev->debugfs);
}

/**
 * mi_debugfs_fini() - remove the device's debugfs directory
 * @mdev: device
 */
void mi_debugfs_fini(struct mi_device *mdev)
{
	debugfs_remove_recursive(mdev->debugfs);
	mdev->debugfs = NULL;
}

/**
 * mi_debugfs_module_init() - create /sys/kernel/debug/metainfer
 */
void mi_debugfs_module_init(void)
{
	mi_debugfs_root = debugfs_create_dir(MI_DRIVER_NAME, NULL);
}

/**
 * mi_debugfs_module_fini() - remove /sys/kernel/debug/metainfer
 */
void mi_debugfs_module_fini(void)
{
	debugfs_remove_recursive(mi_debugfs_root);
}
