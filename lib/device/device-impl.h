/* SPDX-License-Identifier: MIT */
/* Private to the files of lib/device: how the device kinds join the registry. */
#ifndef MI_DEVICE_IMPL_H
#define MI_DEVICE_IMPL_H

#include "device/device.h"

/* Append d to the registry (sets d->index). */
int mi_dev_register(struct mi_dev *d);

/* cpu.c: the CPU device (always device 0). */
int mi_cpu_dev_create(struct mi_dev **devp);

/*
 * kdev.c: open every render node whose DRM driver is "metainfer" and not
 * registered yet, and add each as a device through add (called with the
 * registry locked).  Returns the number added; a node that cannot be
 * opened is skipped (with MI_DEBUG=device, a line saying why).
 */
int mi_kdev_scan(int (*add)(struct mi_dev *d));

#endif /* MI_DEVICE_IMPL_H */
