// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer_sim: simulated NPUs for the metainfer accelerator framework.
 *
 * Devices are created and removed at run time, netdevsim style:
 *
 *   echo "ID PERSONALITY [key=value ...]" > /sys/bus/metainfer_sim/new_device
 *   echo "ID" > /sys/bus/metainfer_sim/del_device
 *
 * Each device is a platform device (metainfer_sim.ID) with the attributes
 * "personality" (read, or write key=value) and "sim_id".  The platform
 * driver "metainfer_sim" binds to it: probe starts the simulated chip and
 * registers it with mi_device_register(), with the platform device as the
 * parent of its DRM device (.../metainfer_sim.ID/drm/renderD*); remove
 * unregisters it.  So the standard hot-unplug path works:
 *
 *   echo metainfer_sim.ID > /sys/bus/platform/drivers/metainfer_sim/unbind
 *   echo metainfer_sim.ID > /sys/bus/platform/drivers/metainfer_sim/bind
 *
 * Unbind is what del_device does first; the device, its id and its
 * personality stay, and bind brings up a fresh chip (new DRM device, cold
 * thermal state).  The struct mi_sim_dev lives from new_device to
 * del_device, across any number of unbind/bind cycles.
 */

#include <linux/module.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/slab.h>
#include <linux/mutex.h>
#include <linux/xarray.h>
#include <linux/platform_device.h>

#include "mi_sim.h"

static DEFINE_XARRAY(mi_sim_devs); /* id -> struct mi_sim_dev */
static DEFINE_MUTEX(mi_sim_devs_lock);
static bool mi_sim_enabled;

/*
 * The sim device of a platform device, bound or not (drvdata is cleared
 * at unbind).  It is valid while the platform device is registered: sysfs
 * callbacks and probe/remove run before del_device frees it.
 */
static struct mi_sim_dev *mi_sim_dev_of(struct device *dev)
{
	return xa_load(&mi_sim_devs, to_platform_device(dev)->id);
}

static ssize_t personality_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	struct mi_sim_dev *sdev = mi_sim_dev_of(dev);
	struct mi_sim_personality p;

	mi_sim_pers_get(sdev, &p);
	return mi_sim_pers_show(&p, buf);
}

static ssize_t personality_store(struct device *dev,
				 struct device_attribute *attr, const char *buf,
				 size_t count)
{
	struct mi_sim_dev *sdev = mi_sim_dev_of(dev);
	char *s = kstrndup(buf, count, GFP_KERNEL);
	int ret;

	if (!s)
		return -ENOMEM;
	ret = mi_sim_pers_update(sdev, s);
	kfree(s);
	return ret ? ret : count;
}
static DEVICE_ATTR_RW(personality);

static ssize_t sim_id_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	struct mi_sim_dev *sdev = mi_sim_dev_of(dev);

	return sysfs_emit(buf, "%u\n", sdev->id);
}
static DEVICE_ATTR_RO(sim_id);

static struct attribute *mi_sim_dev_attrs[] = {
	&dev_attr_personality.attr,
	&dev_attr_sim_id.attr,
	NULL,
};
ATTRIBUTE_GROUPS(mi_sim_dev);

/*
 * Probe: bring up the simulated chip and register it with the core.  Runs
 * from new_device (platform_device_add() probes synchronously) and from a
 * write to the driver's "bind" file.
 */
static int mi_sim_probe(struct platform_device *pdev)
{
	struct mi_sim_dev *sdev = mi_sim_dev_of(&pdev->dev);
	int ret;

	if (!sdev)
		return -ENODEV;
	/* a fresh chip: faults armed for the last binding do not carry over */
	atomic_set(&sdev->fail_hang, 0);
	atomic_set(&sdev->fail_dma, 0);
	atomic_set(&sdev->fail_reset, 0);
	/* PRIME import maps other devices' buffers for this one */
	ret = dma_coerce_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		goto out;
	ret = mi_sim_engine_init(sdev);
	if (ret)
		goto out;
	mi_sim_debugfs_init(sdev);
	ret = mi_sim_backend_register(sdev);
	if (ret)
		goto err_fini_debugfs;
	platform_set_drvdata(pdev, sdev);
	dev_dbg(&pdev->dev, "simulated NPU %u (%s) bound\n", sdev->id,
		sdev->pers.name);
	sdev->probe_err = 0;
	return 0;

err_fini_debugfs:
	mi_sim_debugfs_fini(sdev);
	mi_sim_engine_fini(sdev);
out:
	sdev->probe_err = ret;
	return ret;
}

/*
 * Remove (unbind, del_device, module unload): the core unplugs the DRM
 * device, resets queues with a job in flight and fails queued jobs before
 * mi_sim_backend_unregister() returns; open files, mappings and buffers
 * live on until userspace lets go of them.
 */
static int mi_sim_remove(struct platform_device *pdev)
{
	struct mi_sim_dev *sdev = platform_get_drvdata(pdev);

	mi_sim_backend_unregister(sdev);
	mi_sim_engine_fini(sdev);
	mi_sim_debugfs_fini(sdev);
	dev_dbg(&pdev->dev, "simulated NPU %u unbound\n", sdev->id);
	return 0;
}

static struct platform_driver mi_sim_driver = {
	.probe = mi_sim_probe,
	.remove = mi_sim_remove,
	.driver = {
		.name = "metainfer_sim",
		/* new_device reports the probe's error: probe synchronously */
		.probe_type = PROBE_FORCE_SYNCHRONOUS,
	},
};

/*
 * The platform device's release function lives in the kernel, not in
 * this module: the core keeps a reference on it (as the DRM device's
 * parent) for as long as files of the DRM device are open, which may be
 * after this module is gone.
 */
static int mi_sim_dev_new(u32 id, const struct mi_sim_personality *p)
{
	struct mi_sim_dev *sdev;
	int ret;

	sdev = kzalloc(sizeof(*sdev), GFP_KERNEL);
	if (!sdev)
		return -ENOMEM;
	sdev->id = id;
	sdev->pers = *p;
	sdev->probe_err = -ENODEV;
	spin_lock_init(&sdev->lock);
	ret = xa_insert(&mi_sim_devs, id, sdev, GFP_KERNEL);
	if (ret) {
		kfree(sdev);
		return ret == -EBUSY ? -EEXIST : ret;
	}

	ret = -ENOMEM;
	sdev->pdev = platform_device_alloc("metainfer_sim", id);
	if (!sdev->pdev)
		goto err_free;
	sdev->pdev->dev.groups = mi_sim_dev_groups;
	ret = platform_device_add(sdev->pdev);
	if (ret)
		goto err_put_pdev;
	/* the driver probed it (synchronously), or failed to */
	if (sdev->probe_err) {
		ret = sdev->probe_err;
		goto err_unregister;
	}
	dev_info(&sdev->pdev->dev, "simulated NPU %u (%s) created\n", id,
		 p->name);
	return 0;

err_unregister:
	platform_device_unregister(sdev->pdev);
	goto err_free;
err_put_pdev:
	platform_device_put(sdev->pdev);
err_free:
	xa_erase(&mi_sim_devs, id);
	kfree(sdev);
	return ret;
}

/* Called with mi_sim_devs_lock held. */
static void mi_sim_dev_del(struct mi_sim_dev *sdev)
{
	dev_info(&sdev->pdev->dev, "simulated NPU %u removed\n", sdev->id);
	/*
	 * Unbinds the driver (mi_sim_remove()) if it is bound, and waits for
	 * sysfs callbacks (personality) and a bind or unbind in progress.
	 */
	platform_device_unregister(sdev->pdev);
	xa_erase(&mi_sim_devs, sdev->id);
	kfree(sdev);
}

static ssize_t new_device_store(struct bus_type *bus, const char *buf,
				size_t count)
{
	const struct mi_sim_personality *preset;
	struct mi_sim_personality p;
	char *s, *cur, *id_s, *name;
	unsigned int id;
	int ret;

	s = kstrndup(buf, count, GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	cur = strim(s);
	id_s = strsep(&cur, " \t");
	name = cur ? strsep(&cur, " \t") : NULL;
	ret = -EINVAL;
	if (!id_s || kstrtouint(id_s, 0, &id) || id > MI_SIM_MAX_ID)
		goto out;
	preset = mi_sim_pers_find(name ? name : "ethos-u55-high");
	if (!preset) {
		pr_debug("metainfer_sim: unknown personality '%s'\n", name);
		goto out;
	}
	p = *preset;
	if (cur) {
		ret = mi_sim_pers_apply(&p, cur, false);
		if (ret)
			goto out;
	}

	mutex_lock(&mi_sim_devs_lock);
	ret = mi_sim_enabled ? mi_sim_dev_new(id, &p) : -EBUSY;
	mutex_unlock(&mi_sim_devs_lock);
out:
	kfree(s);
	return ret ? ret : count;
}
static BUS_ATTR_WO(new_device);

static ssize_t del_device_store(struct bus_type *bus, const char *buf,
				size_t count)
{
	struct mi_sim_dev *sdev;
	unsigned int id;
	int ret;

	ret = kstrtouint(skip_spaces(buf), 0, &id);
	if (ret)
		return ret;
	mutex_lock(&mi_sim_devs_lock);
	sdev = mi_sim_enabled ? xa_load(&mi_sim_devs, id) : NULL;
	if (sdev)
		mi_sim_dev_del(sdev);
	mutex_unlock(&mi_sim_devs_lock);
	return sdev ? count : -ENOENT;
}
static BUS_ATTR_WO(del_device);

static ssize_t personalities_show(struct bus_type *bus, char *buf)
{
	return mi_sim_pers_list(buf);
}
static BUS_ATTR_RO(personalities);

static struct attribute *mi_sim_bus_attrs[] = {
	&bus_attr_new_device.attr,
	&bus_attr_del_device.attr,
	&bus_attr_personalities.attr,
	NULL,
};
ATTRIBUTE_GROUPS(mi_sim_bus);

/* A bus without devices: it only carries the control files. */
static struct bus_type mi_sim_bus = {
	.name = "metainfer_sim",
	.bus_groups = mi_sim_bus_groups,
};

static int __init mi_sim_init(void)
{
	int ret;

	mi_sim_debugfs_root_init();
	ret = platform_driver_register(&mi_sim_driver);
	if (ret)
		goto err_fini_debugfs;
	ret = bus_register(&mi_sim_bus);
	if (ret)
		goto err_unregister_driver;
	mutex_lock(&mi_sim_devs_lock);
	mi_sim_enabled = true;
	mutex_unlock(&mi_sim_devs_lock);
	return 0;

err_unregister_driver:
	platform_driver_unregister(&mi_sim_driver);
err_fini_debugfs:
	mi_sim_debugfs_root_fini();
	return ret;
}

static void __exit mi_sim_exit(void)
{
	struct mi_sim_dev *sdev;
	unsigned long id = 0;

	mutex_lock(&mi_sim_devs_lock);
	mi_sim_enabled = false;
	while ((sdev = xa_find(&mi_sim_devs, &id, ULONG_MAX, XA_PRESENT)))
		mi_sim_dev_del(sdev);
	mutex_unlock(&mi_sim_devs_lock);
	bus_unregister(&mi_sim_bus);
	platform_driver_unregister(&mi_sim_driver);
	mi_sim_debugfs_root_fini();
}

module_init(mi_sim_init);
module_exit(mi_sim_exit);

MODULE_DESCRIPTION("MetaInfer simulated NPU backend");
MODULE_LICENSE("GPL");
