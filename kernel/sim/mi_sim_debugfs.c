// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer_sim: debugfs fault knobs and state.
 *
 *   /sys/kernel/debug/metainfer_sim/ID/ and the core's device directory
 *   /sys/kernel/debug/metainfer/renderDN/ both hold:
 *     fail_hang    the next N jobs never complete (the core's timeout
 *                  and the reset op recover them)
 *     fail_dma     the next N jobs complete with -EIO
 *     fail_reset   the next N resets fail (the core marks the device lost)
 *     personality  same as the sysfs attribute (read, or write key=value)
 *     sim_state    temperature, power, clock, throttle level, counters
 */

#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/gfp.h>
#include <linux/uaccess.h>

#include "mi_sim.h"

static struct dentry *mi_sim_debugfs_root;

static int mi_sim_state_show(struct seq_file *m, void *unused)
{
	struct mi_sim_dev *sdev = m->private;
	struct mi_sim_status st;

	mi_sim_engine_status(sdev, &st);
	seq_printf(m, "temp_mc=%lld\n", st.temp_mc);
	seq_printf(m, "power_mw=%u\n", st.power_mw);
	seq_printf(m, "clock_hz=%llu\n", st.clock_hz);
	seq_printf(m, "throttle_level=%u\n", st.throttle_level);
	seq_printf(m, "throttle_events=%llu\n", st.throttle_events);
	seq_printf(m, "jobs_done=%llu\n", st.jobs_done);
	seq_printf(m, "jobs_failed=%llu\n", st.jobs_failed);
	seq_printf(m, "jobs_hung=%llu\n", st.jobs_hung);
	seq_printf(m, "jobs_queued=%u\n", st.jobs_queued);
	seq_printf(m, "resets=%llu\n", st.resets);
	seq_printf(m, "busy_ns=%llu\n", st.busy_ns);
	seq_printf(m, "model_ns=%llu\n", st.model_ns);
	seq_printf(m, "compute_late_ns=%llu\n", st.late_ns);
	seq_printf(m, "macs=%llu\n", st.macs);
	seq_printf(m, "dma_in_bytes=%llu\n", st.dma_in);
	seq_printf(m, "dma_out_bytes=%llu\n", st.dma_out);
	seq_printf(m, "sram_kept_bytes=%llu\n", st.sram_kept);
	seq_printf(m, "energy_uj=%llu\n", st.energy_uj);
	seq_printf(m, "last_job_ns=%llu\n", st.last_job_ns);
	seq_printf(m, "max_wall_ns=%llu\n", st.max_wall_ns);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(mi_sim_state);

static ssize_t mi_sim_pers_read(struct file *f, char __user *ubuf, size_t len,
				loff_t *pos)
{
	struct mi_sim_dev *sdev = file_inode(f)->i_private;
	struct mi_sim_personality p;
	char *buf;
	ssize_t n;

	buf = (char *)get_zeroed_page(GFP_KERNEL); /* sysfs_emit wants a page */
	if (!buf)
		return -ENOMEM;
	mi_sim_pers_get(sdev, &p);
	n = mi_sim_pers_show(&p, buf);
	n = simple_read_from_buffer(ubuf, len, pos, buf, n);
	free_page((unsigned long)buf);
	return n;
}

static ssize_t mi_sim_pers_write(struct file *f, const char __user *ubuf,
				 size_t len, loff_t *pos)
{
	struct mi_sim_dev *sdev = file_inode(f)->i_private;
	char *buf;
	int ret;

	if (*pos || len >= PAGE_SIZE)
		return -EINVAL;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = mi_sim_pers_update(sdev, buf);
	kfree(buf);
	return ret ? ret : len;
}

static const struct file_operations mi_sim_pers_fops = {
	.owner = THIS_MODULE,
	.read = mi_sim_pers_read,
	.write = mi_sim_pers_write,
	.llseek = default_llseek,
};

/**
 * mi_sim_debugfs_files() - create the knobs and state files in a directory
 * @sdev: the simulated device
 * @dir: directory (this module's own, or the core's DRM device directory)
 */
void mi_sim_debugfs_files(struct mi_sim_dev *sdev, struct dentry *dir)
{
	if (IS_ERR_OR_NULL(dir))
		return;
	debugfs_create_atomic_t("fail_hang", 0600, dir, &sdev->fail_hang);
	debugfs_create_atomic_t("fail_dma", 0600, dir, &sdev->fail_dma);
	debugfs_create_atomic_t("fail_reset", 0600, dir, &sdev->fail_reset);
	debugfs_create_file("personality", 0600, dir, sdev, &mi_sim_pers_fops);
	debugfs_create_file("sim_state", 0400, dir, sdev, &mi_sim_state_fops);
}

/**
 * mi_sim_debugfs_init() - create /sys/kernel/debug/metainfer_sim/ID
 * @sdev: the simulated device
 *
 * debugfs is optional: failures leave the knobs absent, nothing else.
 */
void mi_sim_debugfs_init(struct mi_sim_dev *sdev)
{
	char name[16];

	if (IS_ERR_OR_NULL(mi_sim_debugfs_root))
		return;
	snprintf(name, sizeof(name), "%u", sdev->id);
	sdev->debugfs = debugfs_create_dir(name, mi_sim_debugfs_root);
	mi_sim_debugfs_files(sdev, sdev->debugfs);
}

/**
 * mi_sim_debugfs_fini() - remove a device's debugfs directory
 * @sdev: the simulated device
 *
 * Waits for open files' operations in progress to finish.
 */
void mi_sim_debugfs_fini(struct mi_sim_dev *sdev)
{
	debugfs_remove_recursive(sdev->debugfs);
	sdev->debugfs = NULL;
}

/**
 * mi_sim_debugfs_root_init() - create /sys/kernel/debug/metainfer_sim
 */
void mi_sim_debugfs_root_init(void)
{
	mi_sim_debugfs_root = debugfs_create_dir("metainfer_sim", NULL);
}

/**
 * mi_sim_debugfs_root_fini() - remove /sys/kernel/debug/metainfer_sim
 */
void mi_sim_debugfs_root_fini(void)
{
	debugfs_remove_recursive(mi_sim_debugfs_root);
}
