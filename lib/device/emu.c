// SPDX-License-Identifier: MIT
/*
 * An emulated accelerator: the uapi's command stream run on the CPU by
 * the userspace reference (mi_ref.c), bit for bit what a MetaInfer device
 * computes.  It lets placement, lowering and the fallback paths be tested
 * on a host without the kernel modules; it is added only on request
 * (mi_dev_emu_add), never by the scan.  Jobs run synchronously in
 * submit(), after their in-fences signalled; busy_ns is the wall time of
 * the reference.  Buffers are memfds, so PRIME works as on a kernel
 * device: export hands out a dma-buf-like fd, import maps one (of an
 * emulated device or a real dma-buf).  A job's fence is an eventfd that
 * is already readable (the job ended in submit): sync_file semantics for
 * poll(), enough for the in-fences of other emulated jobs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "device/device-impl.h"
#include "device/mi_ref.h"
#include "internal.h"

struct emu {
	int fail_err;
	int fail_count;
	bool lost;
	bool timed;			/* busy_ns from the model below */
	struct mi_dev_emu_timing timing;
	uint32_t noise_pct;		/* busy_ns * (1 +- noise_pct / 100) */
	uint64_t noise_state;		/* splitmix64 */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Uniform in [-1, 1) from a splitmix64 state. */
static double noise_draw(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / (double)(1ull << 52) - 1.0;
}

static void emu_destroy(struct mi_dev *d)
{
	free(d->priv);
	free(d);
}

/* bo->priv: the memfd behind an own buffer, -1 for an imported one */
static int emu_bo_alloc(struct mi_dev *d, size_t size, struct mi_dev_bo **bop)
{
	struct mi_dev_bo *bo = calloc(1, sizeof(*bo));
	int fd = memfd_create("mi-emu-bo", MFD_CLOEXEC);

	if (!size)
		size = 1;
	if (!bo || fd < 0 || ftruncate(fd, size)) {
		free(bo);
		if (fd >= 0)
			close(fd);
		return mi_set_error(-ENOMEM, "%s: no memory for a %zu-byte buffer",
				    d->name, size);
	}
	bo->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (bo->map == MAP_FAILED) {
		close(fd);
		free(bo);
		return mi_set_error(-ENOMEM, "%s: cannot map a %zu-byte buffer",
				    d->name, size);
	}
	bo->dev = d;
	bo->size = size;
	bo->prime_fd = -1;
	bo->priv = (void *)(intptr_t)fd;
	*bop = bo;
	return 0;
}

static void emu_bo_free(struct mi_dev_bo *bo)
{
	int fd = (int)(intptr_t)bo->priv;

	munmap(bo->map, bo->size);
	if (fd >= 0)
		close(fd);
	if (bo->prime_fd >= 0)
		close(bo->prime_fd);
	free(bo);
}

static int emu_bo_export(struct mi_dev_bo *bo)
{
	int fd = (int)(intptr_t)bo->priv;

	if (bo->prime_fd >= 0)
		return 0;
	if (fd < 0)
		return mi_set_error(-EINVAL, "%s: export of an imported buffer",
				    bo->dev->name);
	bo->prime_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (bo->prime_fd < 0)
		return mi_set_error(-errno, "%s: PRIME export: %s",
				    bo->dev->name, strerror(errno));
	return 0;
}

static int emu_bo_import(struct mi_dev *d, int fd, size_t size,
			 struct mi_dev_bo **bop)
{
	struct mi_dev_bo *bo = calloc(1, sizeof(*bo));

	if (!bo)
		return -ENOMEM;
	bo->map = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, 0);
	if (bo->map == MAP_FAILED) {
		int err = -errno;

		free(bo);
		return mi_set_error(err, "%s: PRIME import of fd %d: %s",
				    d->name, fd, strerror(-err));
	}
	bo->dev = d;
	bo->size = size ? size : 1;
	bo->prime_fd = -1;
	bo->priv = (void *)(intptr_t)-1;
	*bop = bo;
	return 0;
}

static int emu_job_fence(struct mi_dev *d, struct mi_dev_job *job, int *fdp)
{
	int fd = eventfd(1, EFD_CLOEXEC);

	if (fd < 0)
		return mi_set_error(-errno, "%s: job fence: %s", d->name,
				    strerror(errno));
	*fdp = fd;
	return 0;
}

/* Wait until every sync_file fd signalled (POLLIN), at most 10 s. */
static int wait_fences(const int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		struct pollfd p = { .fd = fds[i], .events = POLLIN };
		int r = poll(&p, 1, 10000);

		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0 || (p.revents & (POLLERR | POLLNVAL)))
			return -EIO;
	}
	return 0;
}

static int emu_submit(struct mi_dev *d, struct mi_dev_job *const *jobs, int n)
{
	struct emu *e = d->priv;

	for (int j = 0; j < n; j++) {
		struct mi_dev_job *job = jobs[j];
		struct mi_ref_buf bufs[DRM_METAINFER_MAX_BOS];
		uint64_t t0;

		if (job->nbos > DRM_METAINFER_MAX_BOS)
			return mi_set_error(-EINVAL, "%s: %d buffers in a job",
					    d->name, job->nbos);
		if (e->lost)
			return mi_set_error(-ENODEV, "%s: device lost", d->name);
		job->busy_ns = 0;
		job->status = wait_fences(job->in_fences, job->nin_fences);
		if (job->status)
			continue;
		if (e->fail_count > 0) {
			e->fail_count--;
			job->status = e->fail_err;
			if (e->fail_err == -ENODEV)
				e->lost = true;
			continue;
		}
		for (int i = 0; i < job->nbos; i++) {
			bufs[i].data = job->bos[i]->map;
			bufs[i].size = job->bos[i]->size;
		}
		t0 = now_ns();
		job->status = mi_ref_run(job->cmds, job->cmds_size, bufs,
					 job->nbos);
		job->busy_ns = now_ns() - t0;
		if (e->timed && !job->status)
			job->busy_ns = mi_dev_emu_time(&e->timing, job->cmds,
						       job->cmds_size);
		if (e->noise_pct && !job->status)
			job->busy_ns = (uint64_t)((double)job->busy_ns *
				(1 + e->noise_pct / 100.0 *
					     noise_draw(&e->noise_state)));
	}
	return 0;
}

static int emu_wait(struct mi_dev *d, struct mi_dev_job *job, int64_t timeout_ns)
{
	return 0; /* finished in submit */
}

static void emu_job_release(struct mi_dev *d, struct mi_dev_job *job)
{
}

static int emu_alive(struct mi_dev *d)
{
	struct emu *e = d->priv;

	return !e->lost;
}

static const struct mi_dev_ops emu_ops = {
	.destroy = emu_destroy,
	.bo_alloc = emu_bo_alloc,
	.bo_free = emu_bo_free,
	.bo_export = emu_bo_export,
	.bo_import = emu_bo_import,
	.submit = emu_submit,
	.wait = emu_wait,
	.job_fence = emu_job_fence,
	.job_release = emu_job_release,
	.alive = emu_alive,
};

int mi_dev_emu_add(const char *name, const struct mi_dev_caps *caps,
		   struct mi_dev **devp)
{
	struct mi_dev *d;
	int ret;

	if (!name || !*name || strlen(name) >= sizeof(d->name))
		return mi_set_error(-EINVAL, "emulated device: bad name");
	if (mi_dev_find(name))
		return mi_set_error(-EEXIST, "emulated device: '%s' exists", name);
	d = calloc(1, sizeof(*d));
	if (!d || !(d->priv = calloc(1, sizeof(struct emu)))) {
		free(d);
		return -ENOMEM;
	}
	d->ops = &emu_ops;
	d->kind = MI_DEV_EMU;
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->driver, sizeof(d->driver), "emulation");
	snprintf(d->personality, sizeof(d->personality), "uapi reference");
	d->caps = *caps;
	if (!d->caps.num_queues)
		d->caps.num_queues = 1;
	ret = mi_dev_register(d);
	if (ret) {
		emu_destroy(d);
		return ret;
	}
	if (devp)
		*devp = d;
	return 0;
}

int mi_dev_emu_inject(struct mi_dev *d, int err, int count)
{
	struct emu *e;

	if (d->kind != MI_DEV_EMU)
		return mi_set_error(-EINVAL, "%s: not an emulated device", d->name);
	e = d->priv;
	e->fail_err = err;
	e->fail_count = count;
	if (!count)
		e->lost = false;
	return 0;
}

int mi_dev_emu_set_timing(struct mi_dev *d, const struct mi_dev_emu_timing *t)
{
	struct emu *e;

	if (d->kind != MI_DEV_EMU)
		return mi_set_error(-EINVAL, "%s: not an emulated device", d->name);
	e = d->priv;
	e->timed = t != NULL;
	if (t)
		e->timing = *t;
	return 0;
}

int mi_dev_emu_get_timing(struct mi_dev *d, struct mi_dev_emu_timing *t)
{
	struct emu *e;

	if (d->kind != MI_DEV_EMU)
		return mi_set_error(-EINVAL, "%s: not an emulated device", d->name);
	e = d->priv;
	if (!e->timed)
		return mi_set_error(-ENODATA, "%s: no timing model set", d->name);
	*t = e->timing;
	return 0;
}

/*
 * A firmware update while models run: the hidden timing changes (a
 * slower DMA engine, another clock) and the firmware version moves on,
 * as GET_PARAM_FW_VERSION would show; the advertised caps stay, so only
 * measurements can tell what changed.  Jobs submitted after the call
 * are timed with t.
 */
int mi_dev_emu_update(struct mi_dev *d, const struct mi_dev_emu_timing *t)
{
	int err;

	if (!t)
		return mi_set_error(-EINVAL, "%s: no timing given", d->name);
	err = mi_dev_emu_set_timing(d, t);
	if (!err)
		d->caps.fw_version++;
	return err;
}

int mi_dev_emu_set_noise(struct mi_dev *d, uint32_t pct, uint64_t seed)
{
	struct emu *e;

	if (d->kind != MI_DEV_EMU)
		return mi_set_error(-EINVAL, "%s: not an emulated device", d->name);
	if (pct >= 100)
		return mi_set_error(-EINVAL, "%s: noise %u%% out of range",
				    d->name, pct);
	e = d->priv;
	e->noise_pct = pct;
	e->noise_state = seed;
	return 0;
}
