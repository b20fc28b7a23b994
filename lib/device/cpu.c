// SPDX-License-Identifier: MIT
/*
 * The CPU as a device: buffers are plain page-aligned memory (so a
 * dma-buf mapped by an accelerator and a CPU buffer look alike to the
 * executor); the CPU does not take command streams: the graph's nodes run
 * on it directly through lib/cpu and lib/quant.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device-impl.h"
#include "internal.h"

static void cpu_destroy(struct mi_dev *d)
{
	free(d);
}

static int cpu_bo_alloc(struct mi_dev *d, size_t size, struct mi_dev_bo **bop)
{
	struct mi_dev_bo *bo = calloc(1, sizeof(*bo));
	size_t sz = (size + 4095) & ~(size_t)4095;

	if (!bo || posix_memalign(&bo->map, 4096, sz ? sz : 4096)) {
		free(bo);
		return mi_set_error(-ENOMEM, "cpu: no memory for a %zu-byte buffer",
				    size);
	}
	memset(bo->map, 0, sz ? sz : 4096);
	bo->dev = d;
	bo->size = size;
	bo->prime_fd = -1;
	*bop = bo;
	return 0;
}

static void cpu_bo_free(struct mi_dev_bo *bo)
{
	free(bo->map);
	free(bo);
}

static int cpu_submit(struct mi_dev *d, struct mi_dev_job *const *jobs, int n)
{
	return mi_set_error(-EOPNOTSUPP,
			    "cpu: runs graph nodes, not command streams");
}

static int cpu_wait(struct mi_dev *d, struct mi_dev_job *job, int64_t timeout_ns)
{
	return -EINVAL;
}

static void cpu_job_release(struct mi_dev *d, struct mi_dev_job *job)
{
}

static const struct mi_dev_ops cpu_ops = {
	.destroy = cpu_destroy,
	.bo_alloc = cpu_bo_alloc,
	.bo_free = cpu_bo_free,
	.submit = cpu_submit,
	.wait = cpu_wait,
	.job_release = cpu_job_release,
};

/* "model name" of the first processor in /proc/cpuinfo. */
static void cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');

		if (strncmp(line, "model name", 10) || !c)
			continue;
		c++;
		while (*c == ' ' || *c == '\t')
			c++;
		c[strcspn(c, "\n")] = 0;
		snprintf(buf, len, "%s", c);
		break;
	}
	fclose(f);
}

int mi_cpu_dev_create(struct mi_dev **devp)
{
	struct mi_dev *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->ops = &cpu_ops;
	d->kind = MI_DEV_CPU;
	snprintf(d->name, sizeof(d->name), "cpu");
	snprintf(d->driver, sizeof(d->driver), "cpu");
	cpu_model(d->personality, sizeof(d->personality));
	d->caps.num_queues = 1;
	*devp = d;
	return 0;
}
