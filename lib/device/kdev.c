// SPDX-License-Identifier: MIT
/*
 * MetaInfer accelerators: one device per render node whose DRM driver is
 * "metainfer" (libdrm), submission through io_uring (liburing) with the
 * ioctls as fallback.
 */
#include "device/device-impl.h"

int mi_kdev_scan(int (*add)(struct mi_dev *d))
{
	return 0; /* render-node discovery: not written yet */
}
