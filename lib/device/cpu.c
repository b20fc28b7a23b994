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
#include <sys/mman.h>
#include <unistd.h>

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

/* bo->flags: the buffer maps a dma-buf (bo_import) */
#define CPU_BO_DMABUF 1u

static void cpu_bo_free(struct mi_dev_bo *bo)
{
	if (bo->flags & CPU_BO_DMABUF)
		munmap(bo->map, bo->size);
	else
		free(bo->map);
	free(bo);
}

/* A dma-buf of an accelerator read and written by the CPU in place: the
 * dma-buf's own mmap, no copy. */
static int cpu_bo_import(struct mi_dev *d, int fd, size_t size,
			 struct mi_dev_bo **bop)
{
	off_t end = lseek(fd, 0, SEEK_END);
	struct mi_dev_bo *bo;

	if (end < 0 || (size_t)end < size || !size)
		return mi_set_error(-EINVAL,
				    "cpu: dma-buf fd %d: %zu bytes wanted, %lld there",
				    fd, size, (long long)end);
	bo = calloc(1, sizeof(*bo));
	if (!bo)
		return -ENOMEM;
	bo->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (bo->map == MAP_FAILED) {
		int err = -errno;

		free(bo);
		return mi_set_error(err, "cpu: mmap of dma-buf fd %d: %s", fd,
				    strerror(-err));
	}
	bo->dev = d;
	bo->size = size;
	bo->flags = CPU_BO_DMABUF;
	bo->prime_fd = -1;
	*bop = bo;
	return 0;
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
	.bo_import = cpu_bo_import,
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
