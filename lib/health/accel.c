// SPDX-License-Identifier: MIT
/*
 * An accelerator's health: its counters through the ops table
 * (ops->counters: GET_COUNTERS for a MetaInfer render node), its hwmon
 * (temp1_input, power1_input and, where the driver has them, temp1_max,
 * temp1_crit, power1_cap), the backend's personality attribute (the sim's
 * ambient_mc, throttle_mc and rth_mc_per_w, re-read every sample since
 * they change live) and the open files' fdinfo (drm-client-id,
 * drm-memory-system).  All sysfs paths hang off
 * SYS/class/drm/renderDN/device, the render node's parent device.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "health/health-impl.h"

/* "renderD128" of "/dev/dri/renderD128"; NULL if the device has no node */
static const char *node_name(const struct mi_dev *d)
{
	const char *p = strrchr(d->node, '/');

	if (!d->node[0])
		return NULL;
	return p ? p + 1 : d->node;
}

/* The first hwmonN directory of the device: "/class/drm/X/device/hwmon/hwmonN" */
static int hwmon_dir(const struct mi_health_ctx *c, const char *node,
		     char *out, size_t len)
{
	char path[400];
	struct dirent *e;
	DIR *d;
	int ret = -ENOENT;

	snprintf(path, sizeof(path), "%s/class/drm/%s/device/hwmon", c->sys_root,
		 node);
	d = opendir(path);
	if (!d)
		return -ENOENT;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "hwmon", 5) && isdigit(e->d_name[5])) {
			snprintf(out, len, "/class/drm/%s/device/hwmon/%s", node,
				 e->d_name);
			ret = 0;
			break;
		}
	closedir(d);
	return ret;
}

static int hwmon_num(const struct mi_health_ctx *c, const char *dir,
		     const char *file, double *x)
{
	char path[700];

	if (!dir[0])
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return mi_hread_num(c->sys_root, path, x);
}

struct pers {
	bool have_ambient, have_throttle, have_rth;
	double ambient_mc, throttle_mc, rth_mc_per_w;
};

/* key=value lines of the backend's personality attribute (if any). */
static void read_personality(const struct mi_health_ctx *c, const char *node,
			     struct pers *p)
{
	char path[600], buf[4096], *line, *save = NULL;

	memset(p, 0, sizeof(*p));
	snprintf(path, sizeof(path), "/class/drm/%s/device/personality", node);
	if (mi_hread_str(c->sys_root, path, buf, sizeof(buf)))
		return;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '='), *end;
		double x;

		if (!eq)
			continue;
		*eq = 0;
		x = strtod(eq + 1, &end);
		if (end == eq + 1)
			continue;
		if (!strcmp(line, "ambient_mc")) {
			p->ambient_mc = x;
			p->have_ambient = true;
		} else if (!strcmp(line, "throttle_mc")) {
			p->throttle_mc = x;
			p->have_throttle = true;
		} else if (!strcmp(line, "rth_mc_per_w") && x > 0) {
			p->rth_mc_per_w = x;
			p->have_rth = true;
		}
	}
}

/* The per-device client tally of one fdinfo scan. */
#define FDINFO_MAX_IDS 256
struct fd_tally {
	uint64_t ids[FDINFO_MAX_IDS];
	int nids;
	double mem_kb;
};

static void tally_add(struct fd_tally *t, uint64_t id, double kib)
{
	for (int i = 0; i < t->nids; i++)
		if (t->ids[i] == id)
			return; /* a dup()ed descriptor of a known file */
	if (t->nids == FDINFO_MAX_IDS)
		return;
	t->ids[t->nids++] = id;
	t->mem_kb += kib;
}

/*
 * Clients of every accelerator's node in one walk of /proc/PID/fd: the
 * files of any process whose descriptor links to the node, one per
 * drm-client-id, and the drm-memory-system they hold.
 */
void mi_health_fdinfo_scan(const struct mi_health_ctx *c,
			   struct mi_health_state *st, int n)
{
	struct fd_tally *t = calloc(n, sizeof(*t));
	struct dirent *pe, *fe;
	char path[600], link[128];
	DIR *proc, *fds;

	if (!t)
		return;
	proc = opendir(c->proc_root);
	while (proc && (pe = readdir(proc))) {
		if (!isdigit(pe->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "%s/%s/fd", c->proc_root, pe->d_name);
		fds = opendir(path);
		if (!fds)
			continue;
		while ((fe = readdir(fds))) {
			unsigned long long id = 0, kib = 0, x;
			bool have_id = false;
			char line[256];
			ssize_t len;
			int i;
			FILE *f;

			if (fe->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s/fd/%s", c->proc_root,
				 pe->d_name, fe->d_name);
			len = readlink(path, link, sizeof(link) - 1);
			if (len <= 0)
				continue;
			link[len] = 0;
			for (i = 0; i < n; i++)
				if (st[i].dev->kind != MI_DEV_CPU &&
				    st[i].dev->node[0] && !strcmp(link, st[i].dev->node))
					break;
			if (i == n)
				continue;
			snprintf(path, sizeof(path), "%s/%s/fdinfo/%s",
				 c->proc_root, pe->d_name, fe->d_name);
			f = fopen(path, "re");
			if (!f)
				continue;
			while (fgets(line, sizeof(line), f)) {
				if (sscanf(line, "drm-client-id: %llu", &x) == 1) {
					id = x;
					have_id = true;
				} else if (sscanf(line, "drm-memory-system: %llu",
						  &x) == 1) {
					kib = x;
				}
			}
			fclose(f);
			if (have_id)
				tally_add(&t[i], id, kib);
		}
		closedir(fds);
	}
	if (proc)
		closedir(proc);
	for (int i = 0; i < n; i++) {
		st[i].fd_clients = t[i].nids;
		st[i].fd_mem_kb = t[i].mem_kb;
		st[i].fd_valid = proc != NULL;
	}
	free(t);
}

static void sensors(const struct mi_health_ctx *c, const struct mi_dev *d,
		    const struct mi_dev_counters *k, bool have_k,
		    struct mi_health_vec *v)
{
	const char *node = node_name(d);
	double t = 0, thr = 0, amb = c->ambient_mc, p = 0, budget = 0, x = 0;
	bool have_t = false, have_thr = false, have_p = false, have_b = false;
	char hw[600] = "";
	struct pers pe = { 0 };

	if (node) {
		hwmon_dir(c, node, hw, sizeof(hw));
		read_personality(c, node, &pe);
	}
	if (have_k && (k->valid & DRM_METAINFER_VALID_TEMP)) {
		t = k->temperature_mc;
		have_t = true;
	} else if (!hwmon_num(c, hw, "temp1_input", &x)) {
		t = x;
		have_t = true;
	}
	if (pe.have_throttle) {
		thr = pe.throttle_mc;
		have_thr = true;
	} else if (!hwmon_num(c, hw, "temp1_max", &x) ||
		   !hwmon_num(c, hw, "temp1_crit", &x)) {
		thr = x;
		have_thr = true;
	}
	if (pe.have_ambient)
		amb = pe.ambient_mc;
	if (have_t)
		mi_hraw_set(v, MI_HRAW_TEMP_MC, t);
	if (have_thr) {
		mi_hraw_set(v, MI_HRAW_THROTTLE_MC, thr);
		mi_hraw_set(v, MI_HRAW_AMBIENT_MC, amb);
	}
	if (have_t && have_thr)
		mi_hdim_set(v, MI_HEALTH_THERMAL,
			    mi_health_f_thermal(t, thr, amb));

	if (have_k && (k->valid & DRM_METAINFER_VALID_POWER)) {
		p = k->power_mw;
		have_p = true;
	} else if (!hwmon_num(c, hw, "power1_input", &x)) {
		p = x / 1000; /* hwmon: microwatts */
		have_p = true;
	}
	if (!hwmon_num(c, hw, "power1_cap", &x) && x > 0) {
		budget = x / 1000;
		have_b = true;
	} else if (pe.have_rth && have_thr && thr > amb) {
		/* the power whose steady state is the throttle point:
		 * T_ss = ambient + P * rth / 1000 (mW, m°C/W) */
		budget = (thr - amb) * 1000 / pe.rth_mc_per_w;
		have_b = true;
	}
	if (have_p)
		mi_hraw_set(v, MI_HRAW_POWER_MW, p);
	if (have_b)
		mi_hraw_set(v, MI_HRAW_POWER_BUDGET_MW, budget);
	if (have_p && have_b)
		mi_hdim_set(v, MI_HEALTH_POWER, mi_health_f_power(p, budget));
}

void mi_health_accel_sample(const struct mi_health_ctx *c,
			    struct mi_health_state *s, struct mi_health_vec *v)
{
	struct mi_dev *d = s->dev;
	struct mi_dev_counters k;
	uint64_t t0, t1;
	bool lost, have_k;
	int ret = -EOPNOTSUPP;

	memset(&k, 0, sizeof(k));
	t0 = mi_health_now_ns();
	if (d->ops->counters)
		ret = d->ops->counters(d, &k);
	t1 = mi_health_now_ns();
	v->mono_ns = t0 + (t1 - t0) / 2;
	if (ret == -ENODEV) {
		/* removed: nothing of it is measurable any more */
		v->flags |= MI_HEALTH_F_GONE;
		s->have_prev = false;
		s->qn = s->qhead = 0;
		return;
	}
	have_k = !ret;
	lost = atomic_load(&d->down) || (d->ops->alive && d->ops->alive(d) == 0);
	mi_hraw_set(v, MI_HRAW_LOST, lost);
	if (lost)
		v->flags |= MI_HEALTH_F_LOST;

	if (have_k && s->have_prev && v->mono_ns > s->prev_mono_ns) {
		const struct mi_dev_counters *o = &s->prev;
		double dt_ns = v->mono_ns - s->prev_mono_ns;
		double busy = (k.busy_ns - o->busy_ns) / dt_ns;
		double done = k.jobs_completed - o->jobs_completed;
		double failed = k.jobs_failed - o->jobs_failed;
		double tout = k.jobs_timed_out - o->jobs_timed_out;
		double clock = 1, ok = 1;
		double bytes = (k.dma_bytes_in - o->dma_bytes_in) +
			       (k.dma_bytes_out - o->dma_bytes_out);

		mi_hraw_set(v, MI_HRAW_BUSY, mi_health_clamp01(busy));
		mi_hraw_set(v, MI_HRAW_JOBS_DONE, done);
		mi_hraw_set(v, MI_HRAW_JOBS_FAILED, failed);
		mi_hraw_set(v, MI_HRAW_JOBS_TIMED_OUT, tout);
		if ((k.valid & DRM_METAINFER_VALID_CLOCK) && d->caps.clock_khz)
			clock = (double)k.clock_khz / d->caps.clock_khz;
		else if ((k.valid & DRM_METAINFER_VALID_THROTTLE) && k.throttle)
			clock = 0.5; /* at least one clock step down */
		if (tout > 0)
			ok = 0; /* a hang: the device dropped a job */
		else if (done + failed > 0)
			ok = done / (done + failed);
		mi_hdim_set(v, MI_HEALTH_COMPUTE,
			    lost ? 0 : mi_health_f_compute(busy, clock, ok));
		mi_hraw_set(v, MI_HRAW_DMA_BPS, bytes / (dt_ns / 1e9));
		if (k.busy_ns > o->busy_ns)
			mi_hraw_set(v, MI_HRAW_STALL,
				    (double)(k.stall_ns - o->stall_ns) /
					    (k.busy_ns - o->busy_ns));
		if (d->caps.dma_bw) {
			mi_hraw_set(v, MI_HRAW_DMA_BW, d->caps.dma_bw);
			mi_hdim_set(v, MI_HEALTH_BANDWIDTH,
				    mi_health_f_bandwidth(bytes / (dt_ns / 1e9),
							  d->caps.dma_bw));
		}
	} else if (lost) {
		mi_hdim_set(v, MI_HEALTH_COMPUTE, 0);
	}
	if (have_k) {
		if (k.valid & DRM_METAINFER_VALID_CLOCK)
			mi_hraw_set(v, MI_HRAW_CLOCK_KHZ, k.clock_khz);
		if (d->caps.clock_khz)
			mi_hraw_set(v, MI_HRAW_CLOCK_MAX_KHZ, d->caps.clock_khz);
		if (k.valid & DRM_METAINFER_VALID_THROTTLE)
			mi_hraw_set(v, MI_HRAW_THROTTLE, k.throttle);
		mi_health_queue(s, k.queue_depth, v);
		s->prev = k;
		s->prev_mono_ns = v->mono_ns;
		s->have_prev = true;
	}
	mi_health_memory(c, v);
	sensors(c, d, &k, have_k, v);
	if (s->fd_valid && node_name(d)) {
		mi_hraw_set(v, MI_HRAW_CLIENTS, s->fd_clients);
		mi_hraw_set(v, MI_HRAW_CLIENT_MEM_KB, s->fd_mem_kb);
	}
}
