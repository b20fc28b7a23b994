// SPDX-License-Identifier: MIT
/*
 * Reading /proc and /sys under a configurable root, and the two
 * dimensions every device computes the same way: memory availability
 * (system memory: the CPU's, and the GEM shmem buffers of accelerators)
 * and queue stability (a window of the last MI_HEALTH_QUEUE_WINDOW
 * depths).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "health/health-impl.h"

uint64_t mi_health_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int mi_hread_str(const char *root, const char *path, char *buf, size_t len)
{
	char full[512];
	ssize_t n;
	int fd;

	if (snprintf(full, sizeof(full), "%s%s", root, path) >= (int)sizeof(full))
		return -ENAMETOOLONG;
	fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

int mi_hread_num(const char *root, const char *path, double *x)
{
	char buf[64], *end;
	int ret = mi_hread_str(root, path, buf, sizeof(buf));

	if (ret)
		return ret;
	*x = strtod(buf, &end);
	if (end == buf)
		return -EINVAL;
	return 0;
}

int mi_hread_psi(const char *root, const char *what, double *avg10)
{
	char path[64], buf[256], *p;
	int ret;

	snprintf(path, sizeof(path), "/pressure/%s", what);
	ret = mi_hread_str(root, path, buf, sizeof(buf));
	if (ret)
		return ret;
	p = strstr(buf, "some avg10=");
	if (!p)
		return -EINVAL;
	*avg10 = strtod(p + 11, NULL);
	return 0;
}

int mi_hread_meminfo(const char *root, double *avail_kb, double *total_kb)
{
	char buf[4096], *p, *q;
	int ret = mi_hread_str(root, "/meminfo", buf, sizeof(buf));

	if (ret)
		return ret;
	p = strstr(buf, "MemTotal:");
	q = strstr(buf, "MemAvailable:");
	if (!p || !q)
		return -EINVAL;
	*total_kb = strtod(p + 9, NULL);
	*avail_kb = strtod(q + 13, NULL);
	return *total_kb > 0 ? 0 : -EINVAL;
}

void mi_health_memory(const struct mi_health_ctx *c, struct mi_health_vec *v)
{
	double avail, total, psi = 0;
	bool have_psi = !mi_hread_psi(c->proc_root, "memory", &psi);

	if (have_psi)
		mi_hraw_set(v, MI_HRAW_PSI_MEM, psi);
	if (mi_hread_meminfo(c->proc_root, &avail, &total))
		return;
	mi_hraw_set(v, MI_HRAW_MEM_AVAIL_KB, avail);
	mi_hraw_set(v, MI_HRAW_MEM_TOTAL_KB, total);
	mi_hdim_set(v, MI_HEALTH_MEMORY,
		    mi_health_f_memory(avail, total, psi, have_psi));
}

void mi_health_queue(struct mi_health_state *s, double depth,
		     struct mi_health_vec *v)
{
	double mean, var;

	s->qwin[s->qhead] = depth;
	s->qhead = (s->qhead + 1) % MI_HEALTH_QUEUE_WINDOW;
	if (s->qn < MI_HEALTH_QUEUE_WINDOW)
		s->qn++;
	mi_hraw_set(v, MI_HRAW_QUEUE_DEPTH, depth);
	mi_hraw_set(v, MI_HRAW_QUEUE_N, s->qn);
	if (s->qn < 2)
		return;
	/* the window's order does not matter for mean and variance; the
	 * first qn slots are the filled ones until it wraps */
	mi_hdim_set(v, MI_HEALTH_QUEUE, mi_health_f_queue(s->qwin, s->qn, &mean,
							  &var));
	mi_hraw_set(v, MI_HRAW_QUEUE_MEAN, mean);
	mi_hraw_set(v, MI_HRAW_QUEUE_VAR, var);
}
