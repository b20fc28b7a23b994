/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The device fixture shared by the selftests: one variant per simulated
 * personality and hardware queue.  Include after kselftest_harness.h.
 *
 * selftests/run-tests creates sim devices 0 (ethos-u55-high) and 1
 * (dsp-nchw) first; a test binary run on its own creates the device it
 * needs (ids 100 + n) when metainfer_sim is loaded.
 */
#ifndef MI_FIXTURE_H
#define MI_FIXTURE_H

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "mi_test.h"

static const char *const mi_fixture_pers[] = { "ethos-u55-high", "dsp-nchw",
					      "ethos-u55-deep" };

/* Open the device of personality @pers, creating it if the sim allows. */
static inline int mi_fixture_open(const char *pers, int *minor)
{
	unsigned int i;
	int fd = mi_open_named(pers, minor);

	if (fd >= 0 || !mi_sim_present())
		return fd;
	for (i = 0; i < sizeof(mi_fixture_pers) / sizeof(mi_fixture_pers[0]); i++)
		if (!strcmp(pers, mi_fixture_pers[i]))
			break;
	if (mi_sim_new(100 + i, pers, NULL) && errno != EEXIST)
		return -ENODEV;
	return mi_open_named(pers, minor);
}

FIXTURE(dev) {
	int fd;
	int minor;
	uint32_t queue;
	uint32_t ctx;
};

FIXTURE_VARIANT(dev) {
	const char *pers;
	uint32_t queue;
};

FIXTURE_VARIANT_ADD(dev, u55_q0) {
	.pers = "ethos-u55-high",
	.queue = 0,
};

FIXTURE_VARIANT_ADD(dev, dsp_q1) {
	.pers = "dsp-nchw",
	.queue = 1,
};

FIXTURE_SETUP(dev)
{
	uint64_t nq = 0;

	self->fd = mi_fixture_open(variant->pers, &self->minor);
	ASSERT_LE(0, self->fd) {
		TH_LOG("no metainfer device '%s' (load metainfer_sim and run: echo '0 %s' > %s/new_device)",
		       variant->pers, variant->pers, MI_SIM_BUS);
	}
	ASSERT_EQ(0, mi_get_param(self->fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &nq));
	/* (the 6.1 harness runs the test even if setup SKIPs: assert) */
	ASSERT_GT(nq, variant->queue);
	self->queue = variant->queue;
	ASSERT_EQ(0, mi_ctx_create(self->fd, self->queue,
				   DRM_METAINFER_PRIORITY_NORMAL, &self->ctx));
}

FIXTURE_TEARDOWN(dev)
{
	if (self->fd >= 0)
		close(self->fd);
}

#endif
