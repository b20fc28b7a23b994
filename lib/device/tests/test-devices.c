// SPDX-License-Identifier: GPL-2.0-only
/*
 * Host part of the device checks (no kernel modules needed): the public
 * mi_device_count()/mi_device_info() and their argument errors; on a host
 * without MetaInfer render nodes only the CPU is listed; emulated devices
 * (tests only) run the command stream bit for bit as mi_ref_run does.
 */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metainfer/metainfer.h"
#include "device/device.h"
#include "tests/check.h"

/* Render nodes whose driver is metainfer, counted from sysfs. */
static int metainfer_nodes(void)
{
	glob_t g;
	int n = 0;

	if (glob("/sys/class/drm/renderD*/device/driver", 0, NULL, &g))
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char buf[512];
		ssize_t len = readlink(g.gl_pathv[i], buf, sizeof(buf) - 1);

		if (len > 0) {
			buf[len] = 0;
			n += strstr(buf, "metainfer") != NULL;
		}
	}
	globfree(&g);
	return n;
}

int main(void)
{
	struct mi_device_info v;
	struct mi_dev *devs[8];
	int n = mi_device_count();

	CHECK(n >= 1);
	CHECK(mi_device_info(0, &v) == 0);
	CHECK(!strcmp(v.name, "cpu") && !strcmp(v.kind, "cpu"));
	CHECK(!strcmp(v.driver, "cpu") && !*v.node && v.up == 1);
	CHECK(v.temperature_mc == INT64_MIN && v.power_mw == INT64_MIN);
	CHECK(mi_device_info(-1, &v) == -ENOENT);
	CHECK(mi_device_info(n, &v) == -ENOENT);
	CHECK(strstr(mi_last_error(), "no device"));
	CHECK(mi_device_info(0, NULL) == -EINVAL);
	if (!metainfer_nodes())
		CHECK(n == 1);
	for (int i = 1; i < n; i++) {
		CHECK(mi_device_info(i, &v) == 0);
		CHECK(!strncmp(v.name, "npu", 3) && !strcmp(v.kind, "npu"));
	}
	/* the selection parser sees the same registry */
	CHECK(mi_dev_select("cpu", devs, 8) == 1 && devs[0]->index == 0);
	CHECK(mi_dev_select("npu99", devs, 8) == -ENODEV);
	CHECK(mi_dev_select("cpu,,cpu", devs, 8) == -EINVAL);
	printf("test-devices: %d devices, %s\n", n, fails ? "FAIL" : "ok");
	return fails ? 1 : 0;
}
