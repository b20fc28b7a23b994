// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: per-client usage statistics in /proc/<pid>/fdinfo,
 * following Documentation/gpu/drm-usage-stats.rst (engines are the
 * hardware queues, named "q<index>"; memory is system memory).
 */

#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/seq_file.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>

#include "mi_drv.h"

static int mi_fdinfo_add_size(int id, void *p, void *data)
{
	struct drm_gem_object *obj = p;
	u64 *resident = data;

	*resident += obj->size;
	return 0;
}

/**
 * mi_show_fdinfo() - &file_operations.show_fdinfo of the DRM nodes
 * @m: output
 * @f: the open DRM file
 */
void mi_show_fdinfo(struct seq_file *m, struct file *f)
{
	struct drm_file *file = f->private_data;
	struct mi_file *mfile = file->driver_priv;
	struct mi_device *mdev = to_mi_device(file->minor->dev);
	u64 resident = 0;
	u32 i;

	if (!mfile)
		return;
	spin_lock(&file->table_lock);
	idr_for_each(&file->object_idr, mi_fdinfo_add_size, &resident);
	spin_unlock(&file->table_lock);

	seq_printf(m, "drm-driver:\t%s\n", MI_DRIVER_NAME);
	seq_printf(m, "drm-client-id:\t%llu\n", mfile->client_id);
	for (i = 0; i < mdev->num_queues; i++)
		seq_printf(m, "drm-engine-q%u:\t%llu ns\n", i,
			   (u64)atomic64_read(&mfile->engine_ns[i]));
	seq_printf(m, "drm-memory-system:\t%llu KiB\n", resident >> 10);
	for (i = 0; i < mdev->num_queues; i++)
		seq_printf(m, "metainfer-jobs-q%u:\t%llu\n", i,
			   (u64)atomic64_read(&mfile->jobs[i]));
}
