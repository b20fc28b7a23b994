// SPDX-License-Identifier: MIT
/*
 * The suite's driver: versions, the lock, CPU pinning, the clock state,
 * the incremental walk over the grid and the probes, the staleness check.
 *
 * Noise handling: one suite at a time on the machine (an flock'ed lock
 * file, waited for); the measuring thread pinned to the CPU it runs on
 * (one-thread points); per point a warm-up, then repeated runs whose
 * median, p90 and minimum are kept (a point whose runs agree to 1% stops
 * early: modelled device times are exact).  The governor, frequency and
 * load average at the start are recorded with the run.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "device/device.h"
#include "fingerprint/fp-impl.h"

#define FP_MAX_POINTS 512
#define FP_MAX_VARIANTS 16

uint64_t mi_fp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void mi_fp_stats(double *ns, int n, struct mi_fp_sample *s)
{
	if (n <= 0)
		return;
	qsort(ns, n, sizeof(*ns), cmp_double);
	s->runs = n;
	s->min_ns = ns[0];
	s->median_ns = n & 1 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2;
	s->p90_ns = ns[(int)((n - 1) * 0.9 + 0.5)];
	s->rate = s->median_ns > 0 ? s->work * 1e9 / s->median_ns : 0;
}

void mi_fp_runs(int grid, int *warmup, int *runs)
{
	*warmup = grid == MI_FP_GRID_FULL ? 3 : 1;
	*runs = grid == MI_FP_GRID_FULL ? 15 : grid == MI_FP_GRID_QUICK ? 7 : 5;
}

/* ---- library version: mi_version() + the ELF build id ----------------- */
struct build_id_find {
	const void *addr;
	char hex[41];
};

static int find_build_id(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct build_id_find *f = arg;
	uintptr_t a = (uintptr_t)f->addr;
	bool mine = false;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz)
			mine = true;
	}
	if (!mine)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *p, *end;

		if (ph->p_type != PT_NOTE)
			continue;
		p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const unsigned char *desc = (const unsigned char *)
				(p + sizeof(*nh) + ((nh->n_namesz + 3) & ~3u));

			if (nh->n_type == NT_GNU_BUILD_ID) {
				for (unsigned int k = 0; k < nh->n_descsz && k < 20; k++)
					sprintf(f->hex + 2 * k, "%02x", desc[k]);
				return 1;
			}
			p += sizeof(*nh) + ((nh->n_namesz + 3) & ~3u) +
			     ((nh->n_descsz + 3) & ~3u);
		}
	}
	return 1;
}

const char *mi_fp_lib_version(void)
{
	static char v[96];

	if (!v[0]) {
		struct build_id_find f = { .addr = (const void *)mi_fp_run };

		dl_iterate_phdr(find_build_id, &f);
		snprintf(v, sizeof(v), "%s+%s", mi_version(),
			 f.hex[0] ? f.hex : "nobuildid");
	}
	return v;
}

/* ---- noise control ------------------------------------------------------ */
static int lock_take(const struct mi_fp_opts *o, int *fdp)
{
	const char *path = o && o->lock_path ? o->lock_path :
					       "/tmp/metainfer-fingerprint.lock";
	int wait_ms = o && o->lock_wait_ms > 0 ? o->lock_wait_ms : 60000;
	/* read-only suffices for flock, so another user can share the file */
	int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0666);

	if (fd < 0)
		return mi_set_error(-errno, "fingerprint lock %s: %s", path,
				    strerror(errno));
	for (int t = 0; flock(fd, LOCK_EX | LOCK_NB); t += 50) {
		if (errno != EWOULDBLOCK || t >= wait_ms) {
			close(fd);
			return mi_set_error(-EBUSY,
					    "another fingerprint suite holds %s",
					    path);
		}
		usleep(50000);
	}
	*fdp = fd;
	return 0;
}

static void read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = 0;
	if (!f)
		return;
	if (fgets(buf, len, f))
		buf[strcspn(buf, "\n")] = 0;
	fclose(f);
}

static void clock_state(char *buf, size_t len)
{
	char gov[24], freq[24], load[16];

	read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", gov,
		  sizeof(gov));
	read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", freq,
		  sizeof(freq));
	read_line("/proc/loadavg", load, sizeof(load));
	load[strcspn(load, " ")] = 0;
	snprintf(buf, len, "governor=%s freq_khz=%s load1=%s",
		 gov[0] ? gov : "absent", freq[0] ? freq : "absent",
		 load[0] ? load : "?");
}

/* Pin the calling thread to the CPU it runs on; old gets the old mask. */
static bool pin_self(cpu_set_t *old)
{
	cpu_set_t one;
	int cpu = sched_getcpu();

	if (cpu < 0 || sched_getaffinity(0, sizeof(*old), old))
		return false;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return !sched_setaffinity(0, sizeof(one), &one);
}

/* ---- the run ------------------------------------------------------------ */
static const struct fp_backend *backend_of(struct mi_dev *d)
{
	return d->kind == MI_DEV_CPU ? &mi_fp_cpu_backend : &mi_fp_dev_backend;
}

static const char *grid_name(int g)
{
	return g == MI_FP_GRID_FULL ? "full" : g == MI_FP_GRID_QUICK ? "quick" :
								    "tiny";
}

static void point_label(const struct mi_fp_sample *s, char *buf, size_t len)
{
	int k = snprintf(buf, len, "%s %s %s", mi_fp_family_name(s->family),
			 s->op, s->dtype);

	for (int i = 0; i < MI_FP_NPARAM && s->p[i] && k < (int)len; i++)
		k += snprintf(buf + k, len - k, "%c%lld", i ? 'x' : ' ',
			      (long long)s->p[i]);
}

static int run_start(struct mi_fp_db *db, struct mi_dev *d,
		     const struct mi_fp_opts *o, struct fp_run *r,
		     bool *changed)
{
	struct fp_versions v;

	memset(r, 0, sizeof(*r));
	r->db = db;
	r->d = d;
	r->grid = o ? o->grid : MI_FP_GRID_FULL;
	r->threads = o && o->threads > 0 ? o->threads : 1;
	r->sweep = r->grid == MI_FP_GRID_FULL && !(o && o->threads > 0);
	if (r->grid < MI_FP_GRID_FULL || r->grid > MI_FP_GRID_TINY)
		return mi_set_error(-EINVAL, "fingerprint: bad grid %d", r->grid);
	mi_fp_versions_of(d, o ? o->lib_version : NULL, &v);
	return mi_fp_dev_row(db, d, &v, true, &r->dev, changed);
}

int mi_fp_run(struct mi_fp_db *db, struct mi_dev *d,
	      const struct mi_fp_opts *o, struct mi_fp_report *report)
{
	const struct fp_backend *b;
	struct mi_fp_report rep = { 0 };
	struct mi_fp_sample *pts = NULL;
	char (*names)[32] = NULL;
	uint64_t t0 = mi_fp_now_ns();
	struct fp_run r;
	cpu_set_t old;
	bool changed, pinned = false;
	int lock_fd = -1, npts, nprobe = 0, total, done = 0, err;

	if (!db || !d)
		return mi_set_error(-EINVAL, "mi_fp_run: bad arguments");
	b = backend_of(d);
	err = lock_take(o, &lock_fd);
	if (err)
		return err;
	clock_state(rep.clock_state, sizeof(rep.clock_state));
	err = run_start(db, d, o, &r, &changed);
	if (err)
		goto out;
	if (changed)
		rep.stale_marked = 1;
	pts = calloc(FP_MAX_POINTS, sizeof(*pts));
	names = calloc(FP_MAX_VARIANTS, sizeof(*names));
	if (!pts || !names) {
		err = -ENOMEM;
		goto out;
	}
	npts = b->grid(&r, pts, FP_MAX_POINTS);
	if (npts < 0) {
		err = npts;
		goto out;
	}
	npts = npts < FP_MAX_POINTS ? npts : FP_MAX_POINTS;
	{
		char pn[24];
		double x;

		while (b->probe_point(&r, nprobe, pn, &x))
			nprobe++;
	}
	total = npts + nprobe;
	/* pinned only when every point runs on one thread: the thread pool
	 * would inherit the mask */
	if (r.threads == 1 && !r.sweep)
		pinned = pin_self(&old);
	if (o && o->progress)
		o->progress(o->progress_arg, 0, total, 0, -1, "start");
	mi_fp_exec(db, "BEGIN");
	for (int i = 0; i < npts && !err; i++, done++) {
		char label[128];
		int nv = b->variants(&r, &pts[i], names, FP_MAX_VARIANTS);
		bool any = false;

		if (nv < 0) {
			err = nv;
			break;
		}
		for (int k = 0; k < nv && k < FP_MAX_VARIANTS && !err; k++) {
			struct mi_fp_sample s = pts[i];
			int fresh;

			snprintf(s.variant, sizeof(s.variant), "%s", names[k]);
			fresh = mi_fp_sample_get(db, r.dev, &s, NULL);
			if (fresh < 0) {
				err = fresh;
				break;
			}
			if (fresh) {
				rep.skipped++;
				continue;
			}
			err = b->measure(&r, &s);
			if (!err)
				err = mi_fp_sample_put(db, r.dev, &s);
			rep.measured++;
			rep.fell_back += s.fell_back;
			any = true;
		}
		if (o && o->progress && (any || i + 1 == npts)) {
			double el = (mi_fp_now_ns() - t0) / 1e9;

			point_label(&pts[i], label, sizeof(label));
			o->progress(o->progress_arg, done + 1, total, el,
				    el / (done + 1) * (total - done - 1),
				    label);
		}
	}
	for (int i = 0; i < nprobe && !err; i++, done++) {
		char pn[24];
		double x, y;
		int fresh;

		b->probe_point(&r, i, pn, &x);
		fresh = mi_fp_probe_fresh(db, r.dev, pn, x);
		if (fresh) {
			rep.skipped++;
			continue;
		}
		err = b->probe(&r, pn, x, &y);
		if (!err)
			err = mi_fp_probe_put(db, r.dev, pn, x, y);
		rep.measured++;
		if (o && o->progress) {
			double el = (mi_fp_now_ns() - t0) / 1e9;
			char label[64];

			snprintf(label, sizeof(label), "probe %s %g", pn, x);
			o->progress(o->progress_arg, done + 1, total, el,
				    el / (done + 1) * (total - done - 1),
				    label);
		}
	}
	rep.seconds = (mi_fp_now_ns() - t0) / 1e9;
	if (!err)
		err = mi_fp_run_log(db, r.dev, grid_name(r.grid), &rep);
	mi_fp_exec(db, err ? "ROLLBACK" : "COMMIT");
	if (pinned)
		sched_setaffinity(0, sizeof(old), &old);
out:
	if (b->fini)
		b->fini(&r);
	free(pts);
	free(names);
	close(lock_fd);
	if (report)
		*report = rep;
	return err;
}

int mi_fp_check(struct mi_fp_db *db, struct mi_dev *d,
		const struct mi_fp_opts *o, uint32_t *stale_mask)
{
	const struct fp_backend *b;
	struct mi_fp_sample *pts = NULL;
	char (*names)[32] = NULL;
	double thr = o && o->threshold > 0 ? o->threshold : 0.5;
	struct fp_versions v;
	struct fp_run r;
	uint32_t mask = 0;
	bool changed;
	int idx[3], npts, nfam = 0, err;

	if (stale_mask)
		*stale_mask = 0;
	if (!db || !d)
		return mi_set_error(-EINVAL, "mi_fp_check: bad arguments");
	b = backend_of(d);
	memset(&r, 0, sizeof(r));
	r.db = db;
	r.d = d;
	r.grid = MI_FP_GRID_TINY; /* fewest runs: the check must be quick */
	r.threads = o && o->threads > 0 ? o->threads : 1;
	mi_fp_versions_of(d, o ? o->lib_version : NULL, &v);
	err = mi_fp_dev_row(db, d, &v, false, &r.dev, &changed);
	if (err)
		return err;
	if (changed) {
		/* a new personality, firmware or library: all of it */
		err = mi_fp_mark_stale(db, r.dev, -1);
		if (err < 0)
			return err;
		if (stale_mask)
			*stale_mask = 0x80000000u | ((1u << MI_FP_FAMILY_COUNT) - 1);
		return MI_FP_FAMILY_COUNT;
	}
	pts = calloc(FP_MAX_POINTS, sizeof(*pts));
	names = calloc(FP_MAX_VARIANTS, sizeof(*names));
	if (!pts || !names) {
		err = -ENOMEM;
		goto out;
	}
	npts = b->grid(&r, pts, FP_MAX_POINTS);
	err = npts < 0 ? npts : b->check_points(&r, idx);
	for (int i = 0; i < 3 && !err; i++) {
		struct mi_fp_sample s = pts[idx[i]], old;
		int nv = b->variants(&r, &s, names, FP_MAX_VARIANTS), got;
		double ratio;

		if (nv <= 0) {
			err = nv < 0 ? nv : -ENOENT;
			break;
		}
		snprintf(s.variant, sizeof(s.variant), "%s", names[0]);
		got = mi_fp_sample_get(db, r.dev, &s, &old);
		if (got < 0) {
			err = got;
			break;
		}
		if (!got || old.fell_back || old.median_ns <= 0) {
			/* missing or already stale: re-measured anyway */
			if (!(mask & (1u << s.family)))
				nfam++;
			mask |= 1u << s.family;
			continue;
		}
		err = b->measure(&r, &s);
		if (err)
			break;
		ratio = s.median_ns / old.median_ns;
		if (ratio > 1 + thr || ratio < 1 / (1 + thr)) {
			int m = mi_fp_mark_stale(db, r.dev, s.family);

			if (m < 0) {
				err = m;
				break;
			}
			if (!(mask & (1u << s.family)))
				nfam++;
			mask |= 1u << s.family;
		}
	}
out:
	if (b->fini)
		b->fini(&r);
	free(pts);
	free(names);
	if (stale_mask)
		*stale_mask = mask;
	return err ? err : nfam;
}
