// SPDX-License-Identifier: GPL-2.0-only
/*
 * accel-demo: run a few jobs on every MetaInfer accelerator and say what
 * happened.  Uses only the uapi (uapi/drm/metainfer_accel.h) and the
 * standard DRM ioctls.
 *
 *   accel-demo [--device NAME]
 *
 * For each device: its capabilities, then a handful of int8 jobs (conv2d
 * in both layouts, depthwise conv2d, gemm, maxpool, add), each with its
 * shapes, the time the device models for it, MACs and DMA bytes, and
 * whether the result equals the userspace reference bit for bit; then the
 * device's counters and sensors.  Exit status 1 if any result is wrong.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mi_ref.h"
#include "mi_test.h"

#define NBOS 3
#define BO_SIZE (512 * 1024)

#define I8 DRM_METAINFER_DTYPE_INT8
#define I32 DRM_METAINFER_DTYPE_INT32
#define PLAIN DRM_METAINFER_LAYOUT_PLAIN
#define NCHW DRM_METAINFER_LAYOUT_NCHW
#define NHWC DRM_METAINFER_LAYOUT_NHWC

static const char *layout_name(uint32_t l)
{
	return l == NCHW ? "NCHW" : l == NHWC ? "NHWC" : "plain";
}

static const char *dtype_name(uint32_t d)
{
	static const char *const n[] = { "?", "int8", "uint8", "int16", "int32" };

	return d < 5 ? n[d] : "?";
}

static void shape_str(char *buf, size_t len, const struct drm_metainfer_tensor *t)
{
	size_t n = 0;
	uint32_t k;

	n += snprintf(buf + n, len - n, "[");
	for (k = 0; k < t->ndim && n < len; k++)
		n += snprintf(buf + n, len - n, "%s%u", k ? "," : "", t->shape[k]);
	if (n < len)
		snprintf(buf + n, len - n, "] %s %s", dtype_name(t->dtype),
			 layout_name(t->layout));
}

static struct drm_metainfer_tensor act(uint32_t bo, uint32_t dt, uint32_t lay,
				       uint64_t off, uint32_t n, uint32_t c,
				       uint32_t h, uint32_t w)
{
	uint32_t nchw[4] = { n, c, h, w }, nhwc[4] = { n, h, w, c };

	return mi_tensor(bo, dt, lay, off, 4, lay == NHWC ? nhwc : nchw);
}

static struct drm_metainfer_tensor vec(uint32_t bo, uint32_t dt, uint64_t off,
				       uint32_t n)
{
	return mi_tensor(bo, dt, PLAIN, off, 1, &n);
}

/* The demo jobs; each fills @op and returns its size, describes itself. */
struct job {
	const char *what;
	size_t (*build)(void *op, uint32_t layout, char *desc, size_t dlen);
	int layout; /* 0: plain, else the layout to use */
};

static void set_i32(uint8_t *p, uint64_t off, uint32_t n, int32_t base, int32_t step)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		int32_t v = base + (int32_t)i * step;

		memcpy(p + off + 4ull * i, &v, 4);
	}
}

static uint8_t *g_params; /* bo 1 mapping, for bias/multiplier/shift */

static size_t build_conv(void *p, uint32_t lay, char *desc, size_t dlen,
			 int depthwise)
{
	struct drm_metainfer_op_conv2d *op = p;
	uint32_t cin = 16, cout = depthwise ? 16 : 32, hw = 16;
	char a[64], w[64], o[64];

	memset(op, 0, sizeof(*op));
	op->hdr.op = DRM_METAINFER_OP_CONV2D;
	op->hdr.flags = DRM_METAINFER_OP_F_BIAS | DRM_METAINFER_OP_F_REQUANT;
	op->stride_h = op->stride_w = op->dilation_h = op->dilation_w = 1;
	op->pad_top = op->pad_left = op->pad_bottom = op->pad_right = 1;
	op->groups = depthwise ? cin : 1;
	op->input_zp = -3;
	op->weight_zp = 0;
	op->input = act(0, I8, lay, 0, 1, cin, hw, hw);
	op->weight = act(1, I8, lay, 0, cout, depthwise ? 1 : cin, 3, 3);
	op->bias = vec(1, I32, 65536, cout);
	op->multiplier = vec(1, I32, 65536 + 4096, cout);
	op->shift = vec(1, I32, 65536 + 8192, cout);
	set_i32(g_params, 65536, cout, -500, 37);
	set_i32(g_params, 65536 + 4096, cout, 1518500250, 1000003);
	set_i32(g_params, 65536 + 8192, cout, -6, 0);
	op->rq.output_zp = 2;
	op->rq.act_min = -128;
	op->rq.act_max = 127;
	op->output = act(2, I8, lay, 0, 1, cout, hw, hw);
	shape_str(a, sizeof(a), &op->input);
	shape_str(w, sizeof(w), &op->weight);
	shape_str(o, sizeof(o), &op->output);
	snprintf(desc, dlen, "%s 3x3%s: %s * %s -> %s", depthwise ? "depthwise conv2d" : "conv2d",
		 " +bias, per-channel requant", a, w, o);
	return sizeof(*op);
}

static size_t build_conv_dense(void *p, uint32_t lay, char *desc, size_t dlen)
{
	return build_conv(p, lay, desc, dlen, 0);
}

static size_t build_conv_dw(void *p, uint32_t lay, char *desc, size_t dlen)
{
	return build_conv(p, lay, desc, dlen, 1);
}

static size_t build_gemm(void *p, uint32_t lay, char *desc, size_t dlen)
{
	struct drm_metainfer_op_gemm *op = p;
	uint32_t sa[2] = { 64, 128 }, sb[2] = { 128, 64 }, so[2] = { 64, 64 };
	char a[64], b[64], o[64];

	memset(op, 0, sizeof(*op));
	op->hdr.op = DRM_METAINFER_OP_GEMM;
	op->a_zp = 1;
	op->b_zp = -2;
	op->a = mi_tensor(0, I8, PLAIN, 0, 2, sa);
	op->b = mi_tensor(1, I8, PLAIN, 0, 2, sb);
	op->output = mi_tensor(2, I32, PLAIN, 0, 2, so);
	shape_str(a, sizeof(a), &op->a);
	shape_str(b, sizeof(b), &op->b);
	shape_str(o, sizeof(o), &op->output);
	snprintf(desc, dlen, "gemm: %s x %s -> %s", a, b, o);
	return sizeof(*op);
}

static size_t build_pool(void *p, uint32_t lay, char *desc, size_t dlen)
{
	struct drm_metainfer_op_pool *op = p;
	char a[64], o[64];

	memset(op, 0, sizeof(*op));
	op->hdr.op = DRM_METAINFER_OP_MAXPOOL;
	op->kernel_h = op->kernel_w = 2;
	op->stride_h = op->stride_w = 2;
	op->input = act(0, I8, lay, 0, 1, 32, 16, 16);
	op->output = act(2, I8, lay, 0, 1, 32, 8, 8);
	shape_str(a, sizeof(a), &op->input);
	shape_str(o, sizeof(o), &op->output);
	snprintf(desc, dlen, "maxpool 2x2/2: %s -> %s", a, o);
	return sizeof(*op);
}

static size_t build_add(void *p, uint32_t lay, char *desc, size_t dlen)
{
	struct drm_metainfer_op_eltwise *op = p;
	uint32_t shape[2] = { 64, 256 };
	char a[64];

	memset(op, 0, sizeof(*op));
	op->hdr.op = DRM_METAINFER_OP_ADD;
	op->a_mult = 3;
	op->b_mult = 5;
	op->shift = 3;
	op->rq.act_min = -128;
	op->rq.act_max = 127;
	op->a = mi_tensor(0, I8, PLAIN, 0, 2, shape);
	op->b = mi_tensor(1, I8, PLAIN, 0, 2, shape);
	op->output = mi_tensor(2, I8, PLAIN, 0, 2, shape);
	shape_str(a, sizeof(a), &op->a);
	snprintf(desc, dlen, "add (3a + 5b) >> 3: %s + same -> same", a);
	return sizeof(*op);
}

static const struct job jobs[] = {
	{ "conv2d", build_conv_dense, NHWC },
	{ "conv2d", build_conv_dense, NCHW },
	{ "dwconv", build_conv_dw, NHWC },
	{ "dwconv", build_conv_dw, NCHW },
	{ "gemm", build_gemm, 0 },
	{ "maxpool", build_pool, NHWC },
	{ "add", build_add, 0 },
};

static int run_device(int fd)
{
	char name[64] = "?", backend[64] = "?", desc[256];
	uint64_t clock, macs8, sram, bw, burst, pref, nq;
	struct drm_metainfer_get_counters c0, c1, dev;
	struct mi_ref_buf rb[NBOS];
	uint32_t bos[NBOS], ctx;
	uint8_t *map[NBOS], *ref[NBOS];
	uint64_t rng = 42;
	int i, bad = 0;
	size_t k;

	mi_get_param_str(fd, DRM_METAINFER_PARAM_NAME, name, sizeof(name));
	mi_get_param_str(fd, DRM_METAINFER_PARAM_BACKEND, backend, sizeof(backend));
	mi_get_param(fd, DRM_METAINFER_PARAM_CLOCK_KHZ, 0, &clock);
	mi_get_param(fd, DRM_METAINFER_PARAM_MACS_PER_CYCLE, I8, &macs8);
	mi_get_param(fd, DRM_METAINFER_PARAM_SRAM_BYTES, 0, &sram);
	mi_get_param(fd, DRM_METAINFER_PARAM_DMA_BW, 0, &bw);
	mi_get_param(fd, DRM_METAINFER_PARAM_DMA_BURST, 0, &burst);
	mi_get_param(fd, DRM_METAINFER_PARAM_PREFERRED_LAYOUT, 0, &pref);
	mi_get_param(fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &nq);
	printf("\n== renderD%d: %s (%s): %llu queues, %.0f MHz, int8 %llu MACs/cycle, SRAM %llu KiB, DMA %.2f GB/s burst %llu, prefers %s\n",
	       mi_fd_minor(fd), name, backend, (unsigned long long)nq, clock / 1e3,
	       (unsigned long long)macs8, (unsigned long long)sram / 1024, bw / 1e9,
	       (unsigned long long)burst, layout_name((uint32_t)pref));

	if (mi_ctx_create(fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx)) {
		fprintf(stderr, "accel-demo: CTX_CREATE failed\n");
		return 1;
	}
	for (i = 0; i < NBOS; i++) {
		map[i] = mi_bo_new(fd, BO_SIZE, &bos[i]);
		ref[i] = malloc(BO_SIZE);
		if (!map[i] || !ref[i]) {
			fprintf(stderr, "accel-demo: cannot allocate buffers\n");
			return 1;
		}
		for (k = 0; k < BO_SIZE; k += 8) {
			uint64_t r = mi_rand(&rng);

			memcpy(map[i] + k, &r, 8);
		}
	}
	g_params = map[1];

	printf("  %-3s %-12s %12s %10s %10s %10s  %-8s %s\n", "job", "op", "modelled",
	       "MACs", "DMA in", "DMA out", "result", "what");
	for (i = 0; i < (int)(sizeof(jobs) / sizeof(jobs[0])); i++) {
		union {
			struct drm_metainfer_op_conv2d conv;
			struct drm_metainfer_op_gemm gemm;
			struct drm_metainfer_op_pool pool;
			struct drm_metainfer_op_eltwise add;
		} op;
		struct mi_stream s;
		uint64_t seq;
		int64_t st = 0, t0, t1;
		size_t size;
		int ret, same = 1;
		char lbl[32];

		size = jobs[i].build(&op, jobs[i].layout ? jobs[i].layout : PLAIN,
				     desc, sizeof(desc));
		mi_stream_init(&s);
		mi_stream_add(&s, &op, size);
		mi_stream_finish(&s);
		for (k = 0; k < NBOS; k++) {
			memcpy(ref[k], map[k], BO_SIZE);
			rb[k].data = ref[k];
			rb[k].size = BO_SIZE;
		}
		mi_counters(fd, ctx, &c0);
		t0 = mi_now_ns();
		ret = mi_submit(fd, ctx, bos, NBOS, s.buf, s.len, &seq);
		if (!ret)
			ret = mi_wait(fd, ctx, seq, 60000, &st);
		t1 = mi_now_ns();
		mi_counters(fd, ctx, &c1);
		snprintf(lbl, sizeof(lbl), "%s%s%s", jobs[i].what,
			 jobs[i].layout ? " " : "",
			 jobs[i].layout ? layout_name(jobs[i].layout) : "");
		if (ret == -EOPNOTSUPP) {
			printf("  %-3d %-12s %12s %10s %10s %10s  %-8s %s\n", i + 1, lbl,
			       "-", "-", "-", "-", "n/a", "not supported by this device");
			mi_stream_free(&s);
			continue;
		}
		if (ret || st) {
			printf("  %-3d %-12s job failed: %s\n", i + 1, lbl,
			       strerror(ret ? -ret : (int)-st));
			bad = 1;
			mi_stream_free(&s);
			continue;
		}
		mi_ref_run(s.buf, s.len, rb, NBOS);
		for (k = 0; k < NBOS; k++)
			if (memcmp(map[k], ref[k], BO_SIZE))
				same = 0;
		bad |= !same;
		printf("  %-3d %-12s %9.1f us %10llu %10llu %10llu  %-8s %s (wall %.1f ms under TCG)\n",
		       i + 1, lbl, (c1.busy_ns - c0.busy_ns) / 1e3,
		       (unsigned long long)(c1.macs - c0.macs),
		       (unsigned long long)(c1.dma_bytes_in - c0.dma_bytes_in),
		       (unsigned long long)(c1.dma_bytes_out - c0.dma_bytes_out),
		       same ? "exact" : "WRONG", desc, (t1 - t0) / 1e6);
		mi_stream_free(&s);
	}

	if (!mi_counters(fd, 0, &dev)) {
		printf("  counters: %llu jobs submitted, %llu completed, %llu failed, %llu timed out; busy %.1f us, stall %.1f us, %llu MACs, DMA %llu B in / %llu B out\n",
		       (unsigned long long)dev.jobs_submitted,
		       (unsigned long long)dev.jobs_completed,
		       (unsigned long long)dev.jobs_failed,
		       (unsigned long long)dev.jobs_timed_out, dev.busy_ns / 1e3,
		       dev.stall_ns / 1e3, (unsigned long long)dev.macs,
		       (unsigned long long)dev.dma_bytes_in,
		       (unsigned long long)dev.dma_bytes_out);
		printf("  sensors:");
		if (dev.valid & DRM_METAINFER_VALID_TEMP)
			printf(" %.2f C", dev.temp_mc / 1e3);
		if (dev.valid & DRM_METAINFER_VALID_POWER)
			printf(", %llu mW", (unsigned long long)dev.power_mw);
		if (dev.valid & DRM_METAINFER_VALID_CLOCK)
			printf(", clock %.0f MHz", dev.clock_khz / 1e3);
		if (dev.valid & DRM_METAINFER_VALID_THROTTLE)
			printf(", %s", dev.throttle ? "throttled" : "not throttled");
		printf("\n");
	}
	for (i = 0; i < NBOS; i++) {
		munmap(map[i], BO_SIZE);
		free(ref[i]);
	}
	return bad;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int minors[64], n, i, bad = 0, c;

	while ((c = getopt(argc, argv, "d:h")) != -1) {
		if (c == 'd') {
			only = optarg;
		} else {
			fprintf(stderr, "usage: accel-demo [-d NAME]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	n = mi_list_minors(minors, 64);
	if (n == 0) {
		fprintf(stderr, "accel-demo: no metainfer device (load metainfer.ko and a backend, e.g. metainfer_sim)\n");
		return 1;
	}
	for (i = 0; i < n; i++) {
		char name[64] = "";
		int fd = mi_open_minor(minors[i]);

		if (fd < 0)
			continue;
		mi_get_param_str(fd, DRM_METAINFER_PARAM_NAME, name, sizeof(name));
		if (!only || !strcmp(only, name))
			bad |= run_device(fd);
		close(fd);
	}
	printf("\n%s\n", bad ? "accel-demo: SOME RESULTS WERE WRONG" :
			       "accel-demo: every result equals the userspace reference bit for bit");
	return bad;
}
