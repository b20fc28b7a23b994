// SPDX-License-Identifier: MIT
/*
 * The public view of the device registry: mi_device_count() and
 * mi_device_info() (<metainfer/metainfer.h>).  Strings point into the
 * registry's struct mi_dev, which lives until the process exits; the
 * sensor fields are read live (GET_COUNTERS) on every call.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "metainfer/metainfer.h"
#include "device/device.h"
#include "internal.h"

int mi_device_count(void)
{
	return mi_dev_count();
}

int mi_device_info(int index, struct mi_device_info *info)
{
	struct mi_dev_counters c;
	struct mi_dev *d;

	if (!info)
		return mi_set_error(-EINVAL, "mi_device_info: info is NULL");
	d = mi_dev_get(index);
	if (!d)
		return mi_set_error(-ENOENT, "mi_device_info: no device %d (%d devices)",
				    index, mi_dev_count());
	memset(info, 0, sizeof(*info));
	info->name = d->name;
	info->driver = d->driver;
	info->backend = d->backend;
	info->node = d->node;
	info->kind = d->kind == MI_DEV_CPU ? "cpu" :
		     d->kind == MI_DEV_KERNEL ? "npu" : "emulation";
	info->personality = d->personality;
	info->fw_version = d->caps.fw_version;
	info->op_mask = d->caps.op_mask;
	info->dtype_mask = d->caps.dtype_mask;
	info->layout_mask = d->caps.layout_mask;
	info->preferred_layout = d->caps.preferred_layout;
	info->num_queues = d->caps.num_queues;
	info->macs_per_cycle = d->caps.macs_per_cycle;
	info->clock_khz = d->caps.clock_khz;
	info->sram_bytes = d->caps.sram_bytes;
	info->dma_bw = d->caps.dma_bw;
	info->dma_burst = d->caps.dma_burst;
	info->temperature_mc = INT64_MIN;
	info->power_mw = INT64_MIN;
	memset(&c, 0, sizeof(c));
	if (d->ops->counters && !d->ops->counters(d, &c)) {
		if (c.valid & DRM_METAINFER_VALID_TEMP)
			info->temperature_mc = c.temperature_mc;
		if (c.valid & DRM_METAINFER_VALID_POWER)
			info->power_mw = c.power_mw;
	}
	mi_clear_error();
	info->up = mi_dev_up(d);
	return 0;
}
