// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: hwmon temperature and power of each device, read from
 * the backend's read_counters op.  A device without that op, or whose
 * reading lacks a sensor, reports -ENODATA for it.
 */

#include <linux/hwmon.h>

#include "mi_drv.h"

static umode_t mi_hwmon_is_visible(const void *data,
				   enum hwmon_sensor_types type, u32 attr,
				   int channel)
{
	if ((type == hwmon_temp && attr == hwmon_temp_input) ||
	    (type == hwmon_power && attr == hwmon_power_input))
		return 0444;
	return 0;
}

static int mi_hwmon_read(struct device *dev, enum hwmon_sensor_types type,
			 u32 attr, int channel, long *val)
{
	struct mi_device *mdev = dev_get_drvdata(dev);
	struct mi_hw_counters c;
	int ret;

	ret = mi_read_hw_counters(mdev, &c);
	if (ret)
		return ret;
	if (type == hwmon_temp && attr == hwmon_temp_input) {
		if (!(c.valid & DRM_METAINFER_VALID_TEMP))
			return -ENODATA;
		*val = c.temp_mc;
		return 0;
	}
	if (type == hwmon_power && attr == hwmon_power_input) {
		if (!(c.valid & DRM_METAINFER_VALID_POWER))
			return -ENODATA;
		*val = c.power_mw * 1000; /* microwatts */
		return 0;
	}
	return -EOPNOTSUPP;
}

static const struct hwmon_ops mi_hwmon_ops = {
	.is_visible = mi_hwmon_is_visible,
	.read = mi_hwmon_read,
};

static const struct hwmon_channel_info *mi_hwmon_info[] = {
	HWMON_CHANNEL_INFO(temp, HWMON_T_INPUT),
	HWMON_CHANNEL_INFO(power, HWMON_P_INPUT), NULL
};

static const struct hwmon_chip_info mi_hwmon_chip = {
	.ops = &mi_hwmon_ops,
	.info = mi_hwmon_info,
};

/**
 * mi_hwmon_init() - register the device's hwmon (if it has sensors)
 * @mdev: device
 *
 * Return: 0 or a negative errno.
 */
int mi_hwmon_init(struct mi_device *mdev)
{
	struct device *hwmon;

	if (!mdev->ops->read_counters)
		return 0;
	hwmon = hwmon_device_register_with_info(mdev->drm->dev, MI_DRIVER_NAME,
						mdev, &mi_hwmon_chip, NULL);
	if (IS_ERR(hwmon))
		return PTR_ERR(hwmon);
	mdev->hwmon = hwmon;
	return 0;
}

/**
 * mi_hwmon_fini() - unregister the device's hwmon
 * @mdev: device
 */
void mi_hwmon_fini(struct mi_device *mdev)
{
	if (mdev->hwmon)
		hwmon_device_unregister(mdev->hwmon);
	mdev->hwmon = NULL;
}
