// SPDX-License-Identifier: MIT
/*
 * The CPU's health: /proc/stat (utilization, procs_running as the queue),
 * PSI (/proc/pressure/{cpu,memory,io}), cpufreq (scaling_cur_freq against
 * cpuinfo_max_freq), thermal zones (the hottest zone against its lowest
 * passive trip, else critical) and RAPL (package energy against the
 * long-term power limit).  A machine without one of these has the
 * dimension absent; the CPU has no memory-bandwidth counter here, so its
 * bandwidth saturation is always absent.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/health-impl.h"

static DIR *open_dir(const char *root, const char *path)
{
	char full[512];

	snprintf(full, sizeof(full), "%s%s", root, path);
	return opendir(full);
}

/* Aggregate jiffies and procs_running from /proc/stat (line by line: the
 * intr line can be long). */
static int read_stat(const char *proc, uint64_t *total, uint64_t *idle,
		     double *running)
{
	unsigned long long f[8] = { 0 };
	char path[512], *line = NULL;
	size_t cap = 0;
	int ret = -1;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/stat", proc);
	fp = fopen(path, "re");
	if (!fp)
		return -1;
	*running = -1;
	while (getline(&line, &cap, fp) > 0) {
		if (!strncmp(line, "cpu ", 4) &&
		    sscanf(line, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
			   &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6],
			   &f[7]) >= 4) {
			*total = 0;
			for (int i = 0; i < 8; i++)
				*total += f[i];
			*idle = f[3] + f[4]; /* idle + iowait */
			ret = 0;
		} else if (!strncmp(line, "procs_running ", 14)) {
			*running = strtod(line + 14, NULL);
		}
	}
	free(line);
	fclose(fp);
	return ret;
}

/* Mean cur/max over the CPUs that have cpufreq; 0 found: -1. */
static int read_cpufreq(const char *sys, double *cur_khz, double *max_khz)
{
	DIR *d = open_dir(sys, "/devices/system/cpu");
	struct dirent *e;
	double sc = 0, sm = 0;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[600];
		double c, m;

		if (strncmp(e->d_name, "cpu", 3) || !isdigit(e->d_name[3]))
			continue;
		snprintf(path, sizeof(path),
			 "/devices/system/cpu/%s/cpufreq/scaling_cur_freq",
			 e->d_name);
		if (mi_hread_num(sys, path, &c))
			continue;
		snprintf(path, sizeof(path),
			 "/devices/system/cpu/%s/cpufreq/cpuinfo_max_freq",
			 e->d_name);
		if (mi_hread_num(sys, path, &m) || m <= 0)
			continue;
		sc += c;
		sm += m;
		n++;
	}
	closedir(d);
	if (!n)
		return -1;
	*cur_khz = sc / n;
	*max_khz = sm / n;
	return 0;
}

/*
 * The thermal zone with the least headroom.  Its trip is the lowest
 * "passive" trip point (where the kernel starts throttling), else the
 * lowest "critical" one; zones without either are skipped.
 */
static int read_thermal(const char *sys, double ambient, double *t_out,
			double *trip_out, double *headroom)
{
	DIR *d = open_dir(sys, "/class/thermal");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		double t, passive = 0, crit = 0, trip, h;
		bool hp = false, hc = false;
		char path[600], type[32];

		if (strncmp(e->d_name, "thermal_zone", 12))
			continue;
		snprintf(path, sizeof(path), "/class/thermal/%s/temp", e->d_name);
		if (mi_hread_num(sys, path, &t))
			continue;
		for (int k = 0; k < 32; k++) {
			double tt;

			snprintf(path, sizeof(path),
				 "/class/thermal/%s/trip_point_%d_type",
				 e->d_name, k);
			if (mi_hread_str(sys, path, type, sizeof(type)))
				break;
			snprintf(path, sizeof(path),
				 "/class/thermal/%s/trip_point_%d_temp",
				 e->d_name, k);
			if (mi_hread_num(sys, path, &tt) || tt <= 0)
				continue;
			if (!strncmp(type, "passive", 7) && (!hp || tt < passive)) {
				passive = tt;
				hp = true;
			} else if (!strncmp(type, "critical", 8) &&
				   (!hc || tt < crit)) {
				crit = tt;
				hc = true;
			}
		}
		if (!hp && !hc)
			continue;
		trip = hp ? passive : crit;
		h = mi_health_f_thermal(t, trip, ambient);
		if (!n || h < *headroom) {
			*headroom = h;
			*t_out = t;
			*trip_out = trip;
		}
		n++;
	}
	closedir(d);
	return n ? 0 : -1;
}

/* Sum of the package domains (intel-rapl:N, not the :N:M subzones). */
static int read_rapl(const char *sys, double *energy_uj, double *range_uj,
		     double *limit_uw)
{
	DIR *d = open_dir(sys, "/class/powercap");
	struct dirent *e;
	int n = 0;

	*energy_uj = *range_uj = *limit_uw = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		double en, lim, range = 0;
		char path[600];

		if (strncmp(e->d_name, "intel-rapl:", 11) ||
		    strchr(e->d_name + 11, ':'))
			continue;
		snprintf(path, sizeof(path), "/class/powercap/%s/energy_uj",
			 e->d_name);
		if (mi_hread_num(sys, path, &en))
			continue;
		snprintf(path, sizeof(path),
			 "/class/powercap/%s/constraint_0_power_limit_uw",
			 e->d_name);
		if (mi_hread_num(sys, path, &lim) || lim <= 0)
			continue;
		snprintf(path, sizeof(path),
			 "/class/powercap/%s/max_energy_range_uj", e->d_name);
		mi_hread_num(sys, path, &range);
		*energy_uj += en;
		*range_uj += range;
		*limit_uw += lim;
		n++;
	}
	closedir(d);
	return n ? 0 : -1;
}

void mi_health_cpu_sample(const struct mi_health_ctx *c,
			  struct mi_health_state *s, struct mi_health_vec *v)
{
	double running = -1, cur = 0, max = 1, t = 0, trip = 0, h = 0, psi = 0;
	double en = 0, range = 0, lim = 0;
	uint64_t total, idle, now = v->mono_ns;
	bool have_stat, have_freq;
	double dt = s->have_prev ? (now - s->prev_mono_ns) / 1e9 : 0;

	v->dev_ns = now; /* the CPU's clock is CLOCK_MONOTONIC */
	if (!mi_hread_psi(c->proc_root, "cpu", &psi))
		mi_hraw_set(v, MI_HRAW_PSI_CPU, psi);
	if (!mi_hread_psi(c->proc_root, "io", &psi))
		mi_hraw_set(v, MI_HRAW_PSI_IO, psi);

	have_freq = !read_cpufreq(c->sys_root, &cur, &max);
	if (have_freq) {
		mi_hraw_set(v, MI_HRAW_CLOCK_KHZ, cur);
		mi_hraw_set(v, MI_HRAW_CLOCK_MAX_KHZ, max);
	}
	have_stat = !read_stat(c->proc_root, &total, &idle, &running);
	if (have_stat && s->have_prev && total > s->cpu_total) {
		double busy = 1 - (double)(idle - s->cpu_idle) /
					  (total - s->cpu_total);

		mi_hraw_set(v, MI_HRAW_BUSY, mi_health_clamp01(busy));
		mi_hdim_set(v, MI_HEALTH_COMPUTE,
			    mi_health_f_compute(busy, have_freq ? cur / max : 1,
						1));
	}
	if (have_stat) {
		s->cpu_total = total;
		s->cpu_idle = idle;
		if (running >= 0)
			mi_health_queue(s, running, v);
	}

	mi_health_memory(c, v);

	if (!read_thermal(c->sys_root, c->ambient_mc, &t, &trip, &h)) {
		mi_hraw_set(v, MI_HRAW_TEMP_MC, t);
		mi_hraw_set(v, MI_HRAW_THROTTLE_MC, trip);
		mi_hraw_set(v, MI_HRAW_AMBIENT_MC, c->ambient_mc);
		mi_hdim_set(v, MI_HEALTH_THERMAL, h);
	}

	if (!read_rapl(c->sys_root, &en, &range, &lim)) {
		mi_hraw_set(v, MI_HRAW_POWER_BUDGET_MW, lim / 1000);
		if (s->have_rapl && dt > 0) {
			double de = en - s->rapl_uj;

			if (de < 0 && range > 0) /* the counter wrapped */
				de += range;
			if (de >= 0) {
				double p_mw = de / dt / 1000;

				mi_hraw_set(v, MI_HRAW_POWER_MW, p_mw);
				mi_hdim_set(v, MI_HEALTH_POWER,
					    mi_health_f_power(p_mw, lim / 1000));
			}
		}
		s->rapl_uj = en;
		s->rapl_range_uj = range;
		s->have_rapl = true;
	} else {
		s->have_rapl = false;
	}
}
