// SPDX-License-Identifier: MIT
/*
 * lib/fingerprint on the host: the CPU (tiny grid) and emulated devices
 * with modelled time.  DB round trip, incremental re-run, staleness by
 * versions (personality, library) and by drift, embeddings that tell
 * apart two chips with the same advertised peaks, error paths.
 *
 *   test-fingerprint DIR     (DIR: where the DBs go)
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "metainfer/metainfer.h"
#include "device/device.h"
#include "fingerprint/fingerprint.h"
#include "tests/check.h"

static char dir[512], lockp[600];

static struct mi_fp_opts opts(const char *libv)
{
	struct mi_fp_opts o = { .grid = MI_FP_GRID_TINY, .lib_version = libv,
				.lock_path = lockp };

	return o;
}

static struct mi_fp_db *open_db(const char *name, bool fresh)
{
	char path[700];
	struct mi_fp_db *db = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (fresh) {
		unlink(path);
		strcat(path, "-wal");
		unlink(path);
		path[strlen(path) - 4] = 0;
	}
	if (mi_fp_db_open(path, &db))
		fprintf(stderr, "open %s: %s\n", path, mi_last_error());
	return db;
}

/* CPU: round trip, incremental, version staleness, check time. */
static void test_cpu(void)
{
	struct mi_fp_opts o = opts("test-1");
	struct mi_fp_report rep;
	struct mi_fp_sample s[256];
	struct mi_dev *cpu = mi_dev_get(0);
	struct mi_fp_db *db = open_db("cpu.db", true);
	uint32_t mask;
	double t0;
	int n, n2, err, k;

	if (!db) {
		fails++;
		return;
	}
	t0 = now_s();
	err = mi_fp_run(db, cpu, &o, &rep);
	CHECK(!err && rep.measured > 10, "first run measured %d", rep.measured);
	printf("cpu tiny grid: %d measured in %.2f s (%s)\n", rep.measured,
	       now_s() - t0, rep.clock_state);
	n = mi_fp_lookup(db, cpu, -1, NULL, NULL, s, 256);
	CHECK(n == rep.measured - (int)0 || n > 0, "lookup %d", n);
	for (int i = 0; i < n && i < 256; i++) {
		CHECK(!s[i].stale, "row %d stale", i);
		CHECK(s[i].fell_back || (s[i].median_ns > 0 && s[i].runs >= 3 &&
					 s[i].p90_ns >= s[i].median_ns &&
					 s[i].min_ns <= s[i].median_ns && s[i].rate > 0),
		      "row %d (%s %s) has no timing", i, s[i].op, s[i].variant);
	}
	k = mi_fp_lookup(db, cpu, MI_FP_CONV, "Conv", "ref", NULL, 0);
	CHECK(k >= 1, "conv ref rows %d", k);
	/* every registry variant of a 3x3 conv was tried, default first */
	k = mi_fp_lookup(db, cpu, MI_FP_CONV, "Conv", "conv.im2col", NULL, 0);
	CHECK(k >= 1, "conv.im2col rows %d", k);

	err = mi_fp_run(db, cpu, &o, &rep);
	CHECK(!err && rep.measured == 0 && rep.skipped > 0,
	      "re-run measured %d (skipped %d)", rep.measured, rep.skipped);

	/* round trip through the file */
	mi_fp_db_close(db);
	db = open_db("cpu.db", false);
	n2 = mi_fp_lookup(db, cpu, -1, NULL, NULL, NULL, 0);
	CHECK(n2 == n, "after reopen %d rows, before %d", n2, n);
	CHECK(mi_fp_probes(db, cpu, "bw", NULL, 0) >= 4, "bw probes");

	t0 = now_s();
	k = mi_fp_check(db, cpu, &o, &mask);
	printf("cpu staleness check: %.3f s, %d families stale (mask %#x)\n",
	       now_s() - t0, k, mask);
	CHECK(k >= 0 && !(mask & 0x80000000u), "check: %d %#x", k, mask);
	CHECK(now_s() - t0 < 2.0, "check took %.2f s", now_s() - t0);

	/* a new library build: every row stale, re-measured by the next run */
	o = opts("test-2");
	k = mi_fp_check(db, cpu, &o, &mask);
	CHECK(k == MI_FP_FAMILY_COUNT && (mask & 0x80000000u),
	      "new library: %d %#x", k, mask);
	n2 = mi_fp_lookup(db, cpu, -1, NULL, NULL, s, 256);
	for (int i = 0; i < n2 && i < 256; i++)
		CHECK(s[i].stale, "row %d not stale after a library change", i);
	err = mi_fp_run(db, cpu, &o, &rep);
	CHECK(!err && rep.measured == n + mi_fp_probes(db, cpu, NULL, NULL, 0),
	      "after the library change measured %d", rep.measured);
	CHECK(rep.stale_marked, "run saw no version change");
	k = mi_fp_check(db, cpu, &o, &mask);
	CHECK(k >= 0 && !(mask & 0x80000000u), "check after re-run %d %#x", k,
	      mask);
	mi_fp_db_close(db);
}

static const struct mi_dev_caps emu_caps = {
	.op_mask = (1ull << DRM_METAINFER_OP_COUNT) - 2,
	.dtype_mask = (1ull << DRM_METAINFER_DTYPE_INT8) |
		      (1ull << DRM_METAINFER_DTYPE_UINT8) |
		      (1ull << DRM_METAINFER_DTYPE_INT16) |
		      (1ull << DRM_METAINFER_DTYPE_INT32),
	.layout_mask = (1ull << DRM_METAINFER_LAYOUT_PLAIN) |
		       (1ull << DRM_METAINFER_LAYOUT_NCHW),
	.preferred_layout = DRM_METAINFER_LAYOUT_NCHW,
	.num_queues = 1,
	.sram_bytes = 393216,
	.clock_khz = 500000,
	.macs_per_cycle = 256,
	.dma_bw = 4000000000ull,
	.dma_burst = 64,
	.api_version = 1,
};

static struct mi_dev_emu_timing timing(uint64_t burst, uint64_t sram,
				       uint32_t dw)
{
	struct mi_dev_emu_timing t = {
		.clock_khz = 500000, .macs_per_cycle = 256,
		.dma_bw = 4000000000ull, .dma_burst = burst, .sram_bytes = sram,
		.launch_ns = 2000, .dw_eff_pct = dw,
		.preferred_layout = DRM_METAINFER_LAYOUT_NCHW,
	};

	return t;
}

static struct mi_dev *emu(const char *name, struct mi_dev_emu_timing t)
{
	struct mi_dev *d = NULL;

	if (mi_dev_emu_add(name, &emu_caps, &d) ||
	    mi_dev_emu_set_timing(d, &t)) {
		fprintf(stderr, "emu %s: %s\n", name, mi_last_error());
		return NULL;
	}
	return d;
}

/* Emulated devices: incremental, personality change, drift, fell back. */
static void test_emu(void)
{
	struct mi_fp_opts o = opts("test-1");
	struct mi_fp_report rep;
	struct mi_fp_sample s[128];
	struct mi_dev_emu_timing t = timing(128, 393216, 25);
	struct mi_dev *d = emu("emu-a", t);
	struct mi_fp_db *db = open_db("emu.db", true);
	uint32_t mask;
	double t0;
	int n, k, err;

	if (!d || !db) {
		fails++;
		return;
	}
	t0 = now_s();
	err = mi_fp_run(db, d, &o, &rep);
	CHECK(!err && rep.measured > 10, "emu run measured %d", rep.measured);
	printf("emu tiny grid: %d measured in %.2f s\n", rep.measured,
	       now_s() - t0);
	n = mi_fp_lookup(db, d, MI_FP_REORDER, NULL, NULL, s, 128);
	CHECK(n >= 1, "reorder rows %d", n);
	/* NHWC is not advertised: the reorder to NHWC ... runs (COPY takes
	 * any layout); a conv in NHWC would have fallen back */
	err = mi_fp_run(db, d, &o, &rep);
	CHECK(!err && rep.measured == 0, "emu re-run measured %d", rep.measured);

	t0 = now_s();
	k = mi_fp_check(db, d, &o, &mask);
	CHECK(k == 0 && mask == 0, "emu fresh check %d %#x", k, mask);
	CHECK(now_s() - t0 < 2.0, "emu check %.2f s", now_s() - t0);

	/* hidden drift (a throttled clock): conv and gemm slow down, the
	 * check re-times them and marks those families only */
	t.clock_khz /= 4;
	mi_dev_emu_set_timing(d, &t);
	k = mi_fp_check(db, d, &o, &mask);
	CHECK(k >= 1 && (mask & (1u << MI_FP_CONV)) && !(mask & 0x80000000u),
	      "drift check %d %#x", k, mask);
	CHECK(!(mask & (1u << MI_FP_POOL)), "drift marked pool %#x", mask);
	err = mi_fp_run(db, d, &o, &rep);
	CHECK(!err && rep.measured > 0 &&
		      rep.skipped > 0, /* only the stale families */
	      "after drift measured %d skipped %d", rep.measured, rep.skipped);
	k = mi_fp_check(db, d, &o, &mask);
	CHECK(k == 0, "after re-measure still stale %#x", mask);

	/* a new personality (the chip's advertised parameters changed) */
	d->caps.clock_khz = 1000000;
	snprintf(d->personality, sizeof(d->personality), "faster");
	k = mi_fp_check(db, d, &o, &mask);
	CHECK(k == MI_FP_FAMILY_COUNT && (mask & 0x80000000u),
	      "personality change: %d %#x", k, mask);
	n = mi_fp_lookup(db, d, -1, NULL, NULL, s, 128);
	for (int i = 0; i < n && i < 128; i++)
		CHECK(s[i].stale, "row %d not stale after a personality change", i);
	err = mi_fp_run(db, d, &o, &rep);
	CHECK(!err && rep.stale_marked && rep.skipped == 0,
	      "personality re-run skipped %d", rep.skipped);

	/* a device without int16: those points are stored as fell back */
	n = mi_fp_lookup(db, d, MI_FP_CONV, NULL, NULL, s, 128);
	CHECK(n >= 2, "conv rows %d", n);
	mi_fp_db_close(db);
}

static float dist(const float *a, const float *b, int lo, int hi)
{
	float s = 0;

	for (int i = lo; i < hi; i++)
		s += (a[i] - b[i]) * (a[i] - b[i]);
	return sqrtf(s);
}

/* Same peaks, different burst / SRAM / depthwise unit. */
static void test_embedding(void)
{
	struct mi_fp_opts o = opts("test-1");
	struct mi_dev *b = emu("emu-b", timing(32, 262144, 80));
	struct mi_dev *c = emu("emu-c", timing(128, 524288, 25));
	struct mi_dev *never = emu("emu-never", timing(64, 262144, 50));
	struct mi_fp_db *db = open_db("embed.db", true);
	struct mi_fp_feedback fb[2] = {
		{ MI_FP_CONV, 2e6, 1e6 }, { MI_FP_GEMM, 1e6, 1e6 },
	};
	float eb[MI_FP_EMBED_DIM], ec[MI_FP_EMBED_DIM], e2[MI_FP_EMBED_DIM];
	float ef[MI_FP_EMBED_DIM];
	int err;

	if (!b || !c || !never || !db) {
		fails++;
		return;
	}
	err = mi_fp_run(db, b, &o, NULL);
	CHECK(!err, "run b");
	err = mi_fp_run(db, c, &o, NULL);
	CHECK(!err, "run c");
	CHECK(mi_fp_embedding(db, b, NULL, 0, eb, MI_FP_EMBED_DIM) ==
		      MI_FP_EMBED_DIM, "embed b");
	CHECK(mi_fp_embedding(db, c, NULL, 0, ec, MI_FP_EMBED_DIM) ==
		      MI_FP_EMBED_DIM, "embed c");
	CHECK(mi_fp_embedding(db, b, NULL, 0, e2, MI_FP_EMBED_DIM) ==
		      MI_FP_EMBED_DIM, "embed b again");
	CHECK(dist(eb, e2, 0, MI_FP_EMBED_DIM) == 0, "not deterministic");
	/* the capabilities cannot tell them apart, the probes must */
	CHECK(dist(eb, ec, MI_FP_EMBED_CAPS, MI_FP_EMBED_PROBES) == 0,
	      "caps differ");
	printf("embedding distance b-c: probes %.3f (dw %.2f vs %.2f, small "
	       "transfer %.2f vs %.2f, gemm drop knee %.2f vs %.2f)\n",
	       dist(eb, ec, MI_FP_EMBED_PROBES, MI_FP_EMBED_FEEDBACK), eb[36],
	       ec[36], eb[38], ec[38], eb[34], ec[34]);
	CHECK(dist(eb, ec, MI_FP_EMBED_PROBES, MI_FP_EMBED_FEEDBACK) > 0.1,
	      "probes equal");
	CHECK(fabsf(eb[36] - ec[36]) > 0.1, "depthwise efficiency equal");
	CHECK(fabsf(eb[38] - ec[38]) > 0.05, "small-transfer efficiency equal");
	CHECK(eb[34] != ec[34] || dist(eb, ec, 27, 33) > 0.01,
	      "gemm curve equal (SRAM)");
	CHECK(dist(eb, ec, MI_FP_EMBED_FEEDBACK, MI_FP_EMBED_DIM) == 0,
	      "feedback without feedback");
	/* runtime feedback moves the feedback part only */
	CHECK(mi_fp_embedding(db, b, fb, 2, ef, MI_FP_EMBED_DIM) ==
		      MI_FP_EMBED_DIM, "embed with feedback");
	CHECK(dist(eb, ef, 0, MI_FP_EMBED_FEEDBACK) == 0 &&
		      fabsf(ef[MI_FP_EMBED_FEEDBACK] - 0.25f) < 1e-6 &&
		      ef[MI_FP_EMBED_FEEDBACK + 1] == 0,
	      "feedback slots %g %g", ef[40], ef[41]);

	/* transfers from another accelerator: emulated devices share
	 * buffers through memfd exports (as PRIME does), so the point is
	 * measured, with a time and a rate */
	{
		struct mi_fp_sample x = { 0 };

		CHECK(mi_fp_lookup(db, b, MI_FP_TRANSFER, "from:emu-c", NULL,
				   &x, 1) == 1 && !x.fell_back &&
			      !strcmp(x.variant, "prime") && x.median_ns > 0 &&
			      x.rate > 0,
		      "device-to-device row (fell back %d, %g ns)",
		      x.fell_back, x.median_ns);
	}

	/* errors: never fingerprinted, short vector */
	CHECK(mi_fp_embedding(db, never, NULL, 0, e2, MI_FP_EMBED_DIM) == -ENOENT,
	      "embedding of an unknown device");
	CHECK(mi_fp_lookup(db, never, -1, NULL, NULL, NULL, 0) == -ENOENT,
	      "lookup of an unknown device");
	CHECK(mi_fp_check(db, never, &o, NULL) == -ENOENT,
	      "check of an unknown device");
	CHECK(mi_fp_embedding(db, b, NULL, 0, e2, 8) == -EINVAL, "short vector");
	mi_fp_db_close(db);
}

static void test_errors(void)
{
	struct mi_fp_db *db = NULL;
	struct mi_fp_opts o = opts("test-1");
	int fd, err;

	CHECK(mi_fp_db_open("/nonexistent-dir/x.db", &db) < 0, "bad path");
	CHECK(mi_fp_family_parse("gemm") == MI_FP_GEMM &&
		      mi_fp_family_parse("nope") == -EINVAL, "family names");
	/* one suite at a time: a held lock makes the next one wait, then
	 * give up with one line */
	db = open_db("lock.db", true);
	fd = open(lockp, O_RDWR | O_CREAT, 0666);
	CHECK(fd >= 0 && !flock(fd, LOCK_EX), "take the lock");
	o.lock_wait_ms = 200;
	err = mi_fp_run(db, mi_dev_get(0), &o, NULL);
	CHECK(err == -EBUSY && strstr(mi_last_error(), "another"),
	      "locked run: %d", err);
	close(fd);
	mi_fp_db_close(db);
}

int main(int argc, char **argv)
{
	double t0 = now_s();

	snprintf(dir, sizeof(dir), "%s", argc > 1 ? argv[1] : ".");
	mkdir(dir, 0777);
	snprintf(lockp, sizeof(lockp), "%s/suite.lock", dir);
	test_cpu();
	test_emu();
	test_embedding();
	test_errors();
	printf("test-fingerprint: %s (%.1f s)\n", fails ? "FAILED" : "ok",
	       now_s() - t0);
	return fails ? 1 : 0;
}
