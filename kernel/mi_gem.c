// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: buffer objects (GEM shmem), mmap and PRIME.
 *
 * Buffers are plain shmem GEM objects, CPU-cached; PRIME export/import and
 * mmap come from the DRM helpers.  The core counts live buffers per device
 * (debugfs "bo_count") so leaks are visible.
 */

#include <linux/dma-buf.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <drm/drm_gem.h>
#include <drm/drm_prime.h>
#include <drm/drm_print.h>
#include <drm/drm_vma_manager.h>

#include "mi_drv.h"
#include "mi_trace.h"

unsigned long mi_max_bo_size = 1UL << 30;

/* dma_buf_vmap() of imported buffers */
MODULE_IMPORT_NS(DMA_BUF);

static void mi_bo_count(struct mi_bo *bo)
{
	struct mi_device *mdev = bo->mdev;

	bo->counted = true;
	bo->id = atomic64_inc_return(&mdev->bo_seq);
	atomic_inc(&mdev->bo_count);
	atomic64_add(bo->base.base.size, &mdev->bo_bytes);
	trace_bo_create(mdev->minor, bo->id, bo->base.base.size);
}

/*
 * An imported buffer is mapped through its dma-buf directly, not through
 * drm_gem_shmem_vmap(): that takes the importer's shmem vmap_lock and then,
 * when the exporter is another shmem device (another metainfer device),
 * the exporter's vmap_lock of the same lock class under it, which lockdep
 * reports as recursive locking.  bo->map_lock serializes the mapping.
 */
static int mi_bo_map_pages(struct mi_bo *bo)
{
	struct drm_gem_object *obj = &bo->base.base;

	if (obj->import_attach)
		return dma_buf_vmap(obj->import_attach->dmabuf, &bo->map);
	return drm_gem_shmem_vmap(&bo->base, &bo->map);
}

static void mi_bo_unmap_pages(struct mi_bo *bo)
{
	struct drm_gem_object *obj = &bo->base.base;

	if (obj->import_attach)
		dma_buf_vunmap(obj->import_attach->dmabuf, &bo->map);
	else
		drm_gem_shmem_vunmap(&bo->base, &bo->map);
}

static void mi_gem_free(struct drm_gem_object *obj)
{
	struct mi_bo *bo = container_of(obj, struct mi_bo, base.base);
	struct mi_device *mdev = bo->mdev;

	if (bo->mapped)
		mi_bo_unmap_pages(bo);
	mutex_destroy(&bo->map_lock);
	if (bo->counted) {
		trace_bo_destroy(mdev->minor, bo->id, obj->size);
		atomic64_sub(obj->size, &mdev->bo_bytes);
		atomic_dec(&mdev->bo_count);
	}
	drm_gem_shmem_free(&bo->base);
}

static const struct drm_gem_object_funcs mi_gem_funcs = {
	.free = mi_gem_free,
	.print_info = drm_gem_shmem_object_print_info,
	.pin = drm_gem_shmem_object_pin,
	.unpin = drm_gem_shmem_object_unpin,
	.get_sg_table = drm_gem_shmem_object_get_sg_table,
	.vmap = drm_gem_shmem_object_vmap,
	.vunmap = drm_gem_shmem_object_vunmap,
	.mmap = drm_gem_shmem_object_mmap,
	.vm_ops = &drm_gem_shmem_vm_ops,
};

/**
 * mi_gem_create_object() - &drm_driver.gem_create_object hook
 * @drm: device
 * @size: buffer size
 *
 * Return: the new object's GEM base, or an ERR_PTR.
 */
struct drm_gem_object *mi_gem_create_object(struct drm_device *drm, size_t size)
{
	struct mi_bo *bo;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	bo->mdev = to_mi_device(drm);
	mutex_init(&bo->map_lock);
	bo->base.map_wc = false;
	bo->base.base.funcs = &mi_gem_funcs;
	return &bo->base.base;
}

/**
 * mi_gem_prime_import_sg_table() - import a foreign dma-buf
 * @drm: device
 * @attach: the attachment
 * @sgt: its pages
 *
 * Return: the new object or an ERR_PTR.
 */
struct drm_gem_object *
mi_gem_prime_import_sg_table(struct drm_device *drm,
			     struct dma_buf_attachment *attach,
			     struct sg_table *sgt)
{
	struct drm_gem_object *obj;

	obj = drm_gem_shmem_prime_import_sg_table(drm, attach, sgt);
	if (!IS_ERR(obj))
		mi_bo_count(container_of(obj, struct mi_bo, base.base));
	return obj;
}

/**
 * mi_bo_vmap() - kernel address of a buffer, for a job
 * @obj: a buffer of this driver
 * @vaddr: its kernel mapping
 *
 * The first call maps the buffer (pinning its pages); the mapping stays
 * until the buffer is freed, so jobs do not pay for vmap/vunmap.
 *
 * Return: 0, -EINVAL for an I/O-memory mapping, or the vmap error.
 */
int mi_bo_vmap(struct drm_gem_object *obj, void **vaddr)
{
	struct mi_bo *bo = container_of(obj, struct mi_bo, base.base);
	int ret = 0;

	mutex_lock(&bo->map_lock);
	if (!bo->mapped) {
		ret = mi_bo_map_pages(bo);
		if (!ret && bo->map.is_iomem) {
			mi_bo_unmap_pages(bo);
			ret = -EINVAL;
		}
		bo->mapped = !ret;
	}
	if (!ret)
		*vaddr = bo->map.vaddr;
	mutex_unlock(&bo->map_lock);
	return ret;
}

/**
 * mi_bo_create_ioctl() - DRM_IOCTL_METAINFER_BO_CREATE
 * @drm: device
 * @data: struct drm_metainfer_bo_create
 * @file: caller
 *
 * Return: 0 or a negative errno.
 */
int mi_bo_create_ioctl(struct drm_device *drm, void *data,
		       struct drm_file *file)
{
	struct drm_metainfer_bo_create *args = data;
	struct drm_gem_shmem_object *shmem;
	u64 size;
	u32 handle;
	int ret;

	if ((args->flags & ~DRM_METAINFER_BO_CREATE_FLAGS_MASK) || args->pad ||
	    !args->bo_size || args->bo_size > mi_max_bo_size)
		return -EINVAL;

	shmem = drm_gem_shmem_create(drm, args->bo_size);
	if (IS_ERR(shmem))
		return PTR_ERR(shmem);
	mi_bo_count(container_of(shmem, struct mi_bo, base));
	size = shmem->base.size;
	ret = drm_gem_handle_create(file, &shmem->base, &handle);
	/* the handle holds the reference now (or the object goes away) */
	drm_gem_object_put(&shmem->base);
	if (ret)
		return ret;
	args->handle = handle;
	args->bo_size = size;
	return 0;
}

/**
 * mi_bo_info_ioctl() - DRM_IOCTL_METAINFER_BO_INFO
 * @drm: device
 * @data: struct drm_metainfer_bo_info
 * @file: caller
 *
 * Return: 0 or a negative errno.
 */
int mi_bo_info_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct drm_metainfer_bo_info *args = data;
	struct drm_gem_object *obj;
	int ret;

	if (args->flags || args->pad)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	ret = drm_gem_create_mmap_offset(obj);
	if (!ret) {
		args->bo_size = obj->size;
		args->mmap_offset = drm_vma_node_offset_addr(&obj->vma_node);
	}
	drm_gem_object_put(obj);
	return ret;
}
