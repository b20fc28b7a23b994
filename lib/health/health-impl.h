/* SPDX-License-Identifier: MIT */
/* Private to lib/health: per-device sampling state and the sources. */
#ifndef MI_HEALTH_IMPL_H
#define MI_HEALTH_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "health/health.h"

/* Previous readings of one device (rates are differences). */
struct mi_health_state {
	struct mi_dev *dev;
	bool have_prev;
	uint64_t prev_mono_ns;
	struct mi_dev_counters prev;	/* accelerators */
	uint64_t cpu_total, cpu_idle;	/* /proc/stat jiffies */
	double rapl_uj;			/* sum of package energy_uj */
	double rapl_range_uj;
	bool have_rapl;
	double qwin[MI_HEALTH_QUEUE_WINDOW];
	int qn, qhead;
	/* this round's fdinfo scan (mi_health_fdinfo_scan) */
	bool fd_valid;
	int fd_clients;
	double fd_mem_kb;
};

struct mi_health_ctx {
	const char *proc_root, *sys_root;
	int64_t ambient_mc;
	bool fdinfo;
};

static inline void mi_hraw_set(struct mi_health_vec *v, enum mi_health_raw r,
			       double x)
{
	v->raw[r] = x;
	v->raw_present |= 1ull << r;
}

static inline bool mi_hraw_has(const struct mi_health_vec *v,
			       enum mi_health_raw r)
{
	return v->raw_present & (1ull << r);
}

static inline void mi_hdim_set(struct mi_health_vec *v, enum mi_health_dim d,
			       double x)
{
	v->v[d] = mi_health_clamp01(x);
	v->present |= 1u << d;
}

/* read.c: small file readers relative to a root; 0 or -errno */
int mi_hread_str(const char *root, const char *path, char *buf, size_t len);
int mi_hread_num(const char *root, const char *path, double *x);
/* "some avg10=" of /proc/pressure/<what> */
int mi_hread_psi(const char *root, const char *what, double *avg10);
/* MemAvailable and MemTotal of /proc/meminfo */
int mi_hread_meminfo(const char *root, double *avail_kb, double *total_kb);
/* Common to every device: memory availability from meminfo + PSI. */
void mi_health_memory(const struct mi_health_ctx *c, struct mi_health_vec *v);
/* Push depth into the window and set queue stability (>= 2 samples). */
void mi_health_queue(struct mi_health_state *s, double depth,
		     struct mi_health_vec *v);

/* cpu.c */
void mi_health_cpu_sample(const struct mi_health_ctx *c,
			  struct mi_health_state *s, struct mi_health_vec *v);
/* accel.c: the fdinfo of every accelerator in st[0..n-1], one walk */
void mi_health_fdinfo_scan(const struct mi_health_ctx *c,
			   struct mi_health_state *st, int n);
/* accel.c */
void mi_health_accel_sample(const struct mi_health_ctx *c,
			    struct mi_health_state *s, struct mi_health_vec *v);

uint64_t mi_health_now_ns(void);

#endif /* MI_HEALTH_IMPL_H */
