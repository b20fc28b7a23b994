// SPDX-License-Identifier: GPL-2.0-only
/*
 * unload_test: module unload with files open is either refused or clean.
 * Unloading metainfer_sim under an open file removes its devices (the file
 * then gets -ENODEV and closes cleanly); unloading metainfer.ko while the
 * sim or an open file uses it is refused; after the last close both unload
 * and load again.  Runs last (selftests/run-tests); it leaves both modules
 * loaded with sim devices 0 and 1 recreated.
 *
 * MI_KO_DIR (default: ./kernel) holds metainfer.ko and sim/metainfer_sim.ko.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_test.h"

static int delete_module(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) ? -errno : 0;
}

static int load_module(const char *rel, const char *params)
{
	const char *dir = getenv("MI_KO_DIR") ? getenv("MI_KO_DIR") : "kernel";
	char path[512];
	int fd, ret;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return ret;
}

static int loaded(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	return access(path, F_OK) == 0;
}

static int recreate_devices(void)
{
	int ret = mi_sim_new(0, "ethos-u55-high", NULL);

	return ret ? ret : mi_sim_new(1, "dsp-nchw", NULL);
}

/* The job timeout the core was loaded with, to load it the same way. */
static void core_params(char *buf, size_t len)
{
	char v[32] = "";

	if (mi_read_file("/sys/module/metainfer/parameters/job_timeout_ms", v, sizeof(v)) > 0)
		snprintf(buf, len, "job_timeout_ms=%ld", strtol(v, NULL, 10));
	else
		buf[0] = 0;
}

TEST(core_unload_refused_while_sim_loaded)
{
	ASSERT_TRUE(loaded("metainfer_sim"));
	ASSERT_NE(0, delete_module("metainfer"));
	EXPECT_TRUE(loaded("metainfer"));
}

TEST(sim_unload_with_open_file)
{
	struct drm_metainfer_get_param p = { .size = sizeof(p) };
	uint32_t h, ctx;
	uint64_t seq;
	int fd, minor, ret;

	fd = mi_open_named("ethos-u55-high", &minor);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, mi_bo_create(fd, 4096, &h));
	ASSERT_EQ(0, mi_ctx_create(fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx));
	ret = delete_module("metainfer_sim");
	if (ret) {
		/* refused: fine, as long as everything still works */
		ASSERT_TRUE(ret == -EBUSY || ret == -EWOULDBLOCK) {
			TH_LOG("delete_module: %s", strerror(-ret));
		}
		ASSERT_EQ(0, mi_ioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &p));
		close(fd);
		return;
	}
	/* clean: the device is gone under the open file */
	EXPECT_FALSE(loaded("metainfer_sim"));
	p.param = DRM_METAINFER_PARAM_API_VERSION;
	EXPECT_EQ(-ENODEV, mi_ioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &p));
	EXPECT_EQ(-ENODEV, mi_submit(fd, ctx, &h, 1, &p, 8, &seq));
	EXPECT_EQ(0, close(fd));
	ASSERT_EQ(0, load_module("sim/metainfer_sim.ko", ""));
	ASSERT_EQ(0, recreate_devices());
}

TEST(core_unload_with_open_file_then_clean)
{
	char params[64];
	int fd, minor, ret;

	core_params(params, sizeof(params));
	fd = mi_open_named("dsp-nchw", &minor);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, delete_module("metainfer_sim")) {
		TH_LOG("the sim must unload under an open file");
	}
	/* the open file still pins the core */
	ret = delete_module("metainfer");
	if (ret == 0) {
		/* (an implementation may allow it; then the file must be dead) */
		EXPECT_EQ(-ENODEV, mi_get_param(fd, DRM_METAINFER_PARAM_API_VERSION, 0, NULL));
	} else {
		EXPECT_TRUE(ret == -EBUSY || ret == -EWOULDBLOCK);
		EXPECT_TRUE(loaded("metainfer"));
	}
	EXPECT_EQ(0, close(fd));
	if (loaded("metainfer")) {
		int i;

		/* the last fput is deferred: retry for a moment */
		for (i = 0; i < 50 && (ret = delete_module("metainfer")); i++)
			usleep(20000);
		ASSERT_EQ(0, ret) {
			TH_LOG("metainfer.ko did not unload after the last close: %s",
			       strerror(-ret));
		}
	}
	ASSERT_EQ(0, load_module("metainfer.ko", params));
	ASSERT_EQ(0, load_module("sim/metainfer_sim.ko", ""));
	ASSERT_EQ(0, recreate_devices());
	fd = mi_open_named("dsp-nchw", &minor);
	ASSERT_LE(0, fd);
	close(fd);
}

TEST_HARNESS_MAIN
