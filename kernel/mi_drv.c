// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: module, DRM driver, ioctl dispatch, files, and the
 * backend registration API.
 *
 * Each accelerator a backend registers becomes one drm_device with a
 * render node.  Driver ioctls go through mi_ioctl(), which implements the
 * uapi's extensible-struct rule (the struct's leading @size member decides
 * how many bytes are copied; unknown trailing bytes must be zero) and then
 * calls the handler through drm_ioctl_kernel().
 */

#include <linux/compat.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>
#include <drm/drm_prime.h>
#include <drm/drm_print.h>

#include "mi_drv.h"

unsigned int mi_job_timeout_ms = 2000;
module_param_named(job_timeout_ms, mi_job_timeout_ms, uint, 0644);
MODULE_PARM_DESC(
	job_timeout_ms,
	"Job timeout in milliseconds, for devices registered afterwards (default 2000, 10..600000)");
module_param_named(max_bo_size, mi_max_bo_size, ulong, 0644);
MODULE_PARM_DESC(max_bo_size, "Largest buffer object in bytes (default 1 GiB)");

static atomic64_t mi_client_seq = ATOMIC64_INIT(0);

/**
 * mi_device_is_lost() - did a reset fail?
 * @mdev: device
 *
 * Return: true once the device is lost for good.
 */
bool mi_device_is_lost(struct mi_device *mdev)
{
	return atomic_read(&mdev->lost);
}

/**
 * mi_device_mark_lost() - a reset failed: refuse all new work
 * @mdev: device
 */
void mi_device_mark_lost(struct mi_device *mdev)
{
	if (!atomic_xchg(&mdev->lost, 1))
		drm_err(mdev->drm,
			"device lost: reset failed, new jobs are refused\n");
}

/**
 * mi_get_param_ioctl() - DRM_IOCTL_METAINFER_GET_PARAM
 * @drm: device
 * @data: struct drm_metainfer_get_param
 * @file: caller
 *
 * Return: 0 or a negative errno.
 */
int mi_get_param_ioctl(struct drm_device *drm, void *data,
		       struct drm_file *file)
{
	struct drm_metainfer_get_param *args = data;
	struct mi_device *mdev = to_mi_device(drm);
	const struct mi_backend_caps *caps = &mdev->caps;
	const char *blob = NULL;
	bool indexed = false;
	u64 len;

	if (args->flags || args->pad)
		return -EINVAL;

	switch (args->param) {
	case DRM_METAINFER_PARAM_API_VERSION:
		args->value = DRM_METAINFER_API_VERSION;
		break;
	case DRM_METAINFER_PARAM_OP_MASK:
		args->value = caps->op_mask;
		break;
	case DRM_METAINFER_PARAM_DTYPE_MASK:
		args->value = caps->dtype_mask;
		break;
	case DRM_METAINFER_PARAM_LAYOUT_MASK:
		args->value = caps->layout_mask |
			      BIT(DRM_METAINFER_LAYOUT_PLAIN);
		break;
	case DRM_METAINFER_PARAM_NUM_QUEUES:
		args->value = mdev->num_queues;
		break;
	case DRM_METAINFER_PARAM_SRAM_BYTES:
		args->value = caps->sram_bytes;
		break;
	case DRM_METAINFER_PARAM_CLOCK_KHZ:
		args->value = caps->clock_khz;
		break;
	case DRM_METAINFER_PARAM_MACS_PER_CYCLE:
		if (args->index >= DRM_METAINFER_DTYPE_COUNT)
			return -EINVAL;
		indexed = true;
		args->value = caps->macs_per_cycle[args->index];
		break;
	case DRM_METAINFER_PARAM_DMA_BW:
		args->value = caps->dma_bw;
		break;
	case DRM_METAINFER_PARAM_DMA_BURST:
		args->value = caps->dma_burst;
		break;
	case DRM_METAINFER_PARAM_PREFERRED_LAYOUT:
		args->value = caps->preferred_layout;
		break;
	case DRM_METAINFER_PARAM_DEVICE_LOST:
		args->value = mi_device_is_lost(mdev);
		break;
	case DRM_METAINFER_PARAM_FW_VERSION:
		args->value = caps->fw_version;
		break;
	case DRM_METAINFER_PARAM_DEVICE_ID:
		args->value = mdev->minor;
		break;
	case DRM_METAINFER_PARAM_JOB_TIMEOUT_MS:
		args->value = mdev->timeout_ms;
		break;
	case DRM_METAINFER_PARAM_NAME:
		blob = mdev->name;
		break;
	case DRM_METAINFER_PARAM_BACKEND:
		blob = mdev->backend;
		break;
	case DRM_METAINFER_PARAM_URING_CMD_FLAGS:
		args->value = DRM_METAINFER_URING_CMD_FLAGS_MASK;
		break;
	default:
		return -EINVAL;
	}
	if (!indexed && args->index)
		return -EINVAL;
	if (!blob) {
		if (args->data_ptr || args->data_size)
			return -EINVAL;
		return 0;
	}
	len = strlen(blob) + 1;
	args->value = len;
	if (args->data_ptr &&
	    copy_to_user(u64_to_user_ptr(args->data_ptr), blob,
			 min_t(u64, len, args->data_size)))
		return -EFAULT;
	return 0;
}

/*
 * Ioctl table.  mi_ioctl() dispatches these itself (size rule); the DRM
 * core never sees a MetaInfer ioctl number with an unexpected size.
 */
static const struct drm_ioctl_desc mi_ioctls[] = {
	DRM_IOCTL_DEF_DRV(METAINFER_GET_PARAM, mi_get_param_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(METAINFER_BO_CREATE, mi_bo_create_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(METAINFER_BO_INFO, mi_bo_info_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(METAINFER_CTX_CREATE, mi_ctx_create_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(METAINFER_CTX_DESTROY, mi_ctx_destroy_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(METAINFER_SUBMIT, mi_submit_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(METAINFER_WAIT, mi_wait_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(METAINFER_GET_COUNTERS, mi_get_counters_ioctl,
			  DRM_RENDER_ALLOW),
};

/* First published size of each argument struct (smaller is -EINVAL). */
static const u32 mi_ioctl_min_size[] = {
	[DRM_METAINFER_GET_PARAM] = DRM_METAINFER_GET_PARAM_SIZE_VER0,
	[DRM_METAINFER_BO_CREATE] = DRM_METAINFER_BO_CREATE_SIZE_VER0,
	[DRM_METAINFER_BO_INFO] = DRM_METAINFER_BO_INFO_SIZE_VER0,
	[DRM_METAINFER_CTX_CREATE] = DRM_METAINFER_CTX_CREATE_SIZE_VER0,
	[DRM_METAINFER_CTX_DESTROY] = DRM_METAINFER_CTX_DESTROY_SIZE_VER0,
	[DRM_METAINFER_SUBMIT] = DRM_METAINFER_SUBMIT_SIZE_VER0,
	[DRM_METAINFER_WAIT] = DRM_METAINFER_WAIT_SIZE_VER0,
	[DRM_METAINFER_GET_COUNTERS] = DRM_METAINFER_GET_COUNTERS_SIZE_VER0,
};
static_assert(ARRAY_SIZE(mi_ioctls) == ARRAY_SIZE(mi_ioctl_min_size));

#define MI_IOCTL_MAX_SIZE 256

/*
 * Hot-unplug (mi_device_unregister()) against ioctls, from the ioctl path
 * and from io_uring alike: every ioctl but WAIT runs inside
 * drm_dev_enter(), so drm_dev_unplug() waits for those in progress and no
 * new one reaches the queues or the backend afterwards.  WAIT only sleeps
 * on fences and touches neither; it is not held inside, because the jobs
 * it may wait for are failed by mi_queues_kill() only after
 * drm_dev_unplug() returns.
 */
static long mi_ioctl_unplug_guarded(struct file *filp, unsigned int index,
				    const struct drm_ioctl_desc *desc,
				    void *kdata)
{
	struct drm_file *file = filp->private_data;
	struct drm_device *drm = file->minor->dev;
	long ret;
	int idx;

	if (index == DRM_METAINFER_WAIT) {
		if (drm_dev_is_unplugged(drm))
			return -ENODEV;
		return drm_ioctl_kernel(filp, desc->func, kdata, desc->flags);
	}
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	ret = drm_ioctl_kernel(filp, desc->func, kdata, desc->flags);
	drm_dev_exit(idx);
	return ret;
}

/**
 * mi_ioctl_call() - run a MetaInfer ioctl on a user argument struct
 * @filp: the DRM file
 * @index: ioctl number relative to DRM_COMMAND_BASE
 * @uarg: user pointer to the argument struct (its first __u32 is its size)
 *
 * Return: 0 or a negative errno.
 */
long mi_ioctl_call(struct file *filp, unsigned int index, void __user *uarg)
{
	const struct drm_ioctl_desc *desc;
	u8 kdata[MI_IOCTL_MAX_SIZE] __aligned(8);
	u32 usize, ksize, copy;
	long ret;

	if (index >= ARRAY_SIZE(mi_ioctls) || !mi_ioctls[index].func)
		return -ENOTTY;
	index = array_index_nospec(index, ARRAY_SIZE(mi_ioctls));
	desc = &mi_ioctls[index];
	ksize = _IOC_SIZE(desc->cmd);
	BUILD_BUG_ON(sizeof(struct drm_metainfer_get_counters) >
		     MI_IOCTL_MAX_SIZE);

	if (get_user(usize, (u32 __user *)uarg))
		return -EFAULT;
	if (usize < mi_ioctl_min_size[index])
		return -EINVAL;
	if (usize > ksize) {
		/* no argument struct will ever be that large: don't scan GiBs */
		if (usize > PAGE_SIZE)
			return -E2BIG;
		ret = check_zeroed_user(uarg + ksize, usize - ksize);
		if (ret < 0)
			return ret;
		if (!ret)
			return -E2BIG;
	}
	copy = min(usize, ksize);
	memset(kdata, 0, ksize);
	if (copy_from_user(kdata, uarg, copy))
		return -EFAULT;
	ret = mi_ioctl_unplug_guarded(filp, index, desc, kdata);
	if (!ret && copy_to_user(uarg, kdata, copy))
		ret = -EFAULT;
	return ret;
}

/**
 * mi_is_driver_ioctl() - is @cmd one of the MetaInfer ioctl numbers?
 * @cmd: ioctl request code
 *
 * Return: true for DRM driver-private numbers.
 */
bool mi_is_driver_ioctl(unsigned int cmd)
{
	unsigned int nr = _IOC_NR(cmd);

	return _IOC_TYPE(cmd) == DRM_IOCTL_BASE && nr >= DRM_COMMAND_BASE &&
	       nr < DRM_COMMAND_END;
}

static long mi_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct drm_file *file = filp->private_data;

	if (!mi_is_driver_ioctl(cmd))
		return drm_ioctl(filp, cmd, arg);
	if (drm_dev_is_unplugged(file->minor->dev))
		return -ENODEV;
	return mi_ioctl_call(filp, _IOC_NR(cmd) - DRM_COMMAND_BASE,
			     u64_to_user_ptr((u64)arg));
}

#ifdef CONFIG_COMPAT
static long mi_compat_ioctl(struct file *filp, unsigned int cmd,
			    unsigned long arg)
{
	/* the argument structs have one layout on 32 and 64 bit */
	if (!mi_is_driver_ioctl(cmd))
		return drm_compat_ioctl(filp, cmd, arg);
	return mi_ioctl(filp, cmd, (unsigned long)compat_ptr(arg));
}
#else
#define mi_compat_ioctl NULL
#endif

static int mi_open(struct drm_device *drm, struct drm_file *file)
{
	struct mi_device *mdev = to_mi_device(drm);
	struct mi_file *mfile;

	mfile = kzalloc(sizeof(*mfile), GFP_KERNEL);
	if (!mfile)
		return -ENOMEM;
	kref_init(&mfile->ref);
	mfile->mdev = mdev;
	mfile->client_id = atomic64_inc_return(&mi_client_seq);
	xa_init_flags(&mfile->ctxs, XA_FLAGS_ALLOC1);
	file->driver_priv = mfile;
	atomic_inc(&mdev->file_count);
	return 0;
}

static void mi_file_release(struct kref *ref)
{
	struct mi_file *mfile = container_of(ref, struct mi_file, ref);

	xa_destroy(&mfile->ctxs);
	atomic_dec(&mfile->mdev->file_count);
	kfree(mfile);
}

/**
 * mi_file_put() - drop a reference to per-file state
 * @mfile: file state
 */
void mi_file_put(struct mi_file *mfile)
{
	kref_put(&mfile->ref, mi_file_release);
}

static void mi_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct mi_file *mfile = file->driver_priv;

	mi_file_ctxs_fini(mfile);
	file->driver_priv = NULL;
	mi_file_put(mfile);
}

static const struct file_operations mi_fops = {
	.owner = THIS_MODULE,
	.open = drm_open,
	.release = drm_release,
	.unlocked_ioctl = mi_ioctl,
	.compat_ioctl = mi_compat_ioctl,
	.poll = drm_poll,
	.read = drm_read,
	.llseek = noop_llseek,
	.mmap = drm_gem_mmap,
	.show_fdinfo = mi_show_fdinfo,
	.uring_cmd = mi_uring_cmd,
};

static const struct drm_driver mi_drm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER | DRIVER_SYNCOBJ |
			   DRIVER_SYNCOBJ_TIMELINE,
	.open = mi_open,
	.postclose = mi_postclose,
	.gem_create_object = mi_gem_create_object,
	.prime_handle_to_fd = drm_gem_prime_handle_to_fd,
	.prime_fd_to_handle = drm_gem_prime_fd_to_handle,
	.gem_prime_import_sg_table = mi_gem_prime_import_sg_table,
	.gem_prime_mmap = drm_gem_prime_mmap,
	.ioctls = mi_ioctls,
	.num_ioctls = ARRAY_SIZE(mi_ioctls),
	.fops = &mi_fops,
	.name = MI_DRIVER_NAME,
	.desc = MI_DRIVER_DESC,
	.date = "20261129",
	.major = 1,
	.minor = 0,
};

static int mi_caps_check(const struct mi_backend_ops *ops,
			 const struct mi_backend_caps *caps)
{
	u64 ops_known = GENMASK_ULL(DRM_METAINFER_OP_COUNT - 1, 1);
	u32 dtypes_known = GENMASK(DRM_METAINFER_DTYPE_COUNT - 1, 1);
	u32 layouts_known = GENMASK(DRM_METAINFER_LAYOUT_COUNT - 1, 0);

	if (!ops || !ops->run_job || !ops->reset || !caps || !caps->name)
		return -EINVAL;
	if (!caps->num_queues || caps->num_queues > DRM_METAINFER_MAX_QUEUES)
		return -EINVAL;
	if ((caps->op_mask & ~ops_known) ||
	    (caps->dtype_mask & ~dtypes_known) ||
	    (caps->layout_mask & ~layouts_known) ||
	    caps->preferred_layout >= DRM_METAINFER_LAYOUT_COUNT)
		return -EINVAL;
	return 0;
}

/**
 * mi_device_register() - register an accelerator with the framework
 * @parent: the backend's device for this accelerator (e.g. a platform
 *	device); must stay registered until mi_device_unregister() returns
 * @ops: backend entry points (run_job and reset are required)
 * @caps: capabilities (copied)
 * @priv: backend data, see mi_device_priv()
 * @out: on success, the new device
 *
 * Creates a DRM render node for the accelerator.
 *
 * Return: 0, -EINVAL for a bad ops table or capabilities, or another
 * negative errno.
 */
int mi_device_register(struct device *parent, const struct mi_backend_ops *ops,
		       const struct mi_backend_caps *caps, void *priv,
		       struct mi_device **out)
{
	struct drm_device *drm;
	struct mi_device *mdev;
	int ret;

	if (!parent || !out)
		return -EINVAL;
	ret = mi_caps_check(ops, caps);
	if (ret)
		return ret;

	drm = drm_dev_alloc(&mi_drm_driver, parent);
	if (IS_ERR(drm))
		return PTR_ERR(drm);
	mdev = drmm_kzalloc(drm, sizeof(*mdev), GFP_KERNEL);
	if (!mdev) {
		ret = -ENOMEM;
		goto err_put;
	}
	drm->dev_private = mdev;
	mdev->drm = drm;
	mdev->parent = parent;
	mdev->ops = ops;
	mdev->caps = *caps;
	strscpy(mdev->name, caps->name, sizeof(mdev->name));
	strscpy(mdev->backend, caps->backend ? caps->backend : "unknown",
		sizeof(mdev->backend));
	mdev->caps.name = mdev->name;
	mdev->caps.backend = mdev->backend;
	mdev->priv = priv;
	mdev->num_queues = caps->num_queues;
	mdev->minor = -1;
	mdev->timeout_ms = clamp(READ_ONCE(mi_job_timeout_ms), 10U, 600000U);
	mutex_init(&mdev->reset_lock);

	ret = mi_queues_init(mdev);
	if (ret)
		goto err_put;
	ret = drm_dev_register(drm, 0);
	if (ret)
		goto err_fini_queues;
	mdev->minor = drm->render->index;
	mdev->registered = true;
	mi_debugfs_init(mdev);
	ret = mi_hwmon_init(mdev);
	if (ret)
		goto err_unregister;
	mi_pmu_init(mdev);
	drm_info(drm, "%s (%s): %u queue(s), render node %d\n", mdev->name,
		 mdev->backend, mdev->num_queues, mdev->minor);
	*out = mdev;
	return 0;

err_unregister:
	mi_debugfs_fini(mdev);
	drm_dev_unregister(drm);
err_fini_queues:
	mi_queues_fini(mdev);
err_put:
	drm_dev_put(drm);
	return ret;
}
EXPORT_SYMBOL_GPL(mi_device_register);

/**
 * mi_device_unregister() - remove an accelerator
 * @mdev: device from mi_device_register()
 *
 * Unplugs the DRM device (open files get -ENODEV from then on), aborts the
 * jobs the backend holds through reset() and fails them with -ENODEV, and
 * stops the queues.  When this returns, no backend op will be called again;
 * buffers and files live on until userspace closes them.
 */
void mi_device_unregister(struct mi_device *mdev)
{
	struct drm_device *drm = mdev->drm;

	mi_pmu_fini(mdev);
	mi_hwmon_fini(mdev);
	mi_debugfs_fini(mdev);
	drm_dev_unplug(drm);
	mi_queues_kill(mdev);
	mi_queues_fini(mdev);
	mdev->registered = false;
	drm_dev_put(drm);
}
EXPORT_SYMBOL_GPL(mi_device_unregister);

/**
 * mi_device_priv() - the backend's private data
 * @mdev: device
 *
 * Return: @priv given to mi_device_register().
 */
void *mi_device_priv(const struct mi_device *mdev)
{
	return mdev->priv;
}
EXPORT_SYMBOL_GPL(mi_device_priv);

/**
 * mi_device_minor() - the device's render minor (its id in tracepoints,
 * debugfs and %DRM_METAINFER_PARAM_DEVICE_ID)
 * @mdev: device
 *
 * Return: the render minor number, e.g. 128.
 */
int mi_device_minor(const struct mi_device *mdev)
{
	return mdev->minor;
}
EXPORT_SYMBOL_GPL(mi_device_minor);

static int __init mi_init(void)
{
	mi_debugfs_module_init();
	mi_pmu_module_init();
	return 0;
}

static void __exit mi_exit(void)
{
	mi_jobs_wait_all();
	mi_pmu_module_fini();
	mi_debugfs_module_fini();
}

module_init(mi_init);
module_exit(mi_exit);

MODULE_DESCRIPTION(MI_DRIVER_DESC);
MODULE_LICENSE("GPL");
