// SPDX-License-Identifier: MIT
/*
 * The predictor calibrated from a fingerprint database (lib/predict/
 * fpdb.c), on an emulated accelerator whose hidden timing parameters
 * (burst, depthwise efficiency, launch cost) the roofline cannot see:
 * calibrated from the tiny grid, the device's predicted times of the
 * quick grid's points (most of them not in the tiny grid) must be closer
 * to the measured ones than the roofline's; rows made stale by a library
 * change are not used; rows map onto nodes as a model's would.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metainfer/metainfer.h"
#include "device/device.h"
#include "fingerprint/fingerprint.h"
#include "predict/predict.h"
#include "tests/check.h"

static const struct mi_dev_caps caps = {
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
	.dma_burst = 32,
	.api_version = 1,
};

static char dir[256];

static struct mi_fp_db *db_with(struct mi_dev *d, const char *name, int grid,
				const char *libv)
{
	char path[512], lock[512];
	struct mi_fp_opts o = { .grid = grid, .lib_version = libv,
				.lock_path = lock };
	struct mi_fp_db *db = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(lock, sizeof(lock), "%s/lock", dir);
	unlink(path);
	if (mi_fp_db_open(path, &db) || mi_fp_run(db, d, &o, NULL)) {
		fprintf(stderr, "%s: %s\n", name, mi_last_error());
		mi_fp_db_close(db);
		return NULL;
	}
	return db;
}

/* The device as GET_PARAM shows it: no burst, efficiency or launch cost. */
static void visible(struct mi_pred_dev *pd)
{
	memset(pd, 0, sizeof(*pd));
	snprintf(pd->name, sizeof(pd->name), "emu");
	pd->caps.macs_per_s = (double)caps.macs_per_cycle * caps.clock_khz * 1e3;
	pd->caps.bytes_per_s = (double)caps.dma_bw;
	pd->caps.link_bytes_per_s = (double)caps.dma_bw;
}

/* Mean |log(predicted / measured)| over db's node rows of d. */
static double log_err(struct mi_fp_db *db, struct mi_dev *d,
		      const struct mi_pred_dev *pd, int *count)
{
	struct mi_fp_sample s[256];
	struct mi_pred_node n;
	double sum = 0;
	int k = mi_fp_lookup(db, d, -1, NULL, NULL, s, 256), used = 0;

	for (int i = 0; i < k; i++) {
		if (s[i].fell_back || s[i].median_ns <= 0 ||
		    mi_pred_fp_node(NULL, &s[i], &n))
			continue;
		sum += fabs(log(mi_pred_node_ns(NULL, &n, pd) / s[i].median_ns));
		used++;
	}
	*count = used;
	return used ? sum / used : INFINITY;
}

static void test_nodes(void)
{
	struct mi_fp_sample s = { .family = MI_FP_DWCONV, .op = "conv2d",
				  .variant = "device", .dtype = "int8",
				  .p = { 1, 32, 14, 14, 32, 3, 2, 32 },
				  .threads = 1, .work = 32.0 * 7 * 7 * 9 };
	struct mi_pred_node n;

	CHECK(!mi_pred_fp_node(NULL, &s, &n), "dwconv row");
	CHECK(n.cls == MI_PC_DWCONV && n.int8 && n.groups == 32 &&
		      n.stride == 2 && n.kh == 3 && n.out_hw == 49 &&
		      n.macs == s.work && n.in_bytes == 32 * 14 * 14 &&
		      n.out_bytes == 32 * 49 && n.w_bytes == 32 * 9,
	      "dwconv features cls %d hw %g in %g out %g w %g", n.cls,
	      n.out_hw, n.in_bytes, n.out_bytes, n.w_bytes);
	s.family = MI_FP_CONV;
	s.p[5] = 1;
	s.p[7] = 1;
	CHECK(!mi_pred_fp_node(NULL, &s, &n) && n.cls == MI_PC_CONV1X1 &&
		      n.out_hw == 49, "1x1 conv cls %d hw %g", n.cls, n.out_hw);
	s.family = MI_FP_TRANSFER;
	CHECK(mi_pred_fp_node(NULL, &s, &n) == -EINVAL, "transfer is no node");
}

int main(int argc, char **argv)
{
	struct mi_dev_emu_timing t = {
		.clock_khz = caps.clock_khz, .macs_per_cycle = caps.macs_per_cycle,
		.dma_bw = caps.dma_bw, .dma_burst = 32,
		.sram_bytes = caps.sram_bytes, .launch_ns = 20000,
		.dw_eff_pct = 20,
		.preferred_layout = DRM_METAINFER_LAYOUT_NCHW,
	};
	struct mi_fp_db *tiny, *quick;
	struct mi_fp_opts o = { .lib_version = "test-2" };
	struct mi_pred_dev roof, cal;
	struct mi_dev *d = NULL;
	double e_roof, e_cal;
	char lock[512];
	int n_roof, n_cal, k;

	snprintf(dir, sizeof(dir), "%s", argc > 1 ? argv[1] : "/tmp");
	test_nodes();
	if (mi_dev_emu_add("emu-fp", &caps, &d) ||
	    mi_dev_emu_set_timing(d, &t)) {
		fprintf(stderr, "emu: %s\n", mi_last_error());
		return 1;
	}
	tiny = db_with(d, "fpdb-tiny.db", MI_FP_GRID_TINY, "test-1");
	quick = db_with(d, "fpdb-quick.db", MI_FP_GRID_QUICK, "test-1");
	if (!tiny || !quick)
		return 1;
	visible(&roof);
	cal = roof;
	k = mi_pred_dev_from_fp(NULL, tiny, d, 1, &cal);
	CHECK(k > 0, "calibration used %d rows", k);
	e_roof = log_err(quick, d, &roof, &n_roof);
	e_cal = log_err(quick, d, &cal, &n_cal);
	printf("quick grid, %d points: mean |log(pred/measured)| roofline %.3f, "
	       "calibrated from %d tiny-grid rows %.3f\n", n_cal, e_roof, k,
	       e_cal);
	CHECK(n_cal > k && e_cal < e_roof, "calibrated %.3f vs roofline %.3f",
	      e_cal, e_roof);
	/* an emulated buffer is host memory: its "transfer" is a memcpy */
	CHECK(cal.caps.link_bytes_per_s > 0 &&
		      cal.caps.link_bytes_per_s != roof.caps.link_bytes_per_s,
	      "link %g B/s", cal.caps.link_bytes_per_s);

	/* a new library build: every row stale, none used */
	snprintf(lock, sizeof(lock), "%s/lock", dir);
	o.lock_path = lock;
	CHECK(mi_fp_check(tiny, d, &o, NULL) > 0, "version change not seen");
	cal = roof;
	CHECK(mi_pred_dev_from_fp(NULL, tiny, d, 1, &cal) == -ENOENT,
	      "stale rows used");
	mi_fp_db_close(tiny);
	mi_fp_db_close(quick);
	if (fails) {
		printf("test-fpdb: %d failed\n", fails);
		return 1;
	}
	printf("test-fpdb: all passed\n");
	return 0;
}
