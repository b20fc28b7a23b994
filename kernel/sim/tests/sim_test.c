// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer_sim end-to-end test, run inside the test VM (tools/vm/vmrun)
 * with metainfer.ko and metainfer_sim.ko loaded:
 *
 *   - the control files (new_device/del_device errors, live personality
 *     updates, capabilities per personality);
 *   - the timing model through the whole stack: the busy/stall time, MACs
 *     and DMA bytes the core reports for a job equal the formulas of
 *     Documentation/sim.rst, recomputed here from the personality;
 *   - the thermal model: a hot chip throttles, then cools back;
 *   - the fault knobs (DMA error, hang, failed reset) and removing a
 *     device with jobs in flight.
 *
 * Output is TAP; exit status 0 only if every check passed.  It uses the
 * selftests' helper library (selftests/mi_test_lib.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "mi_test.h"

#define SIMDEV "/sys/bus/platform/devices/metainfer_sim."

static int n_test, n_fail;

static void ok(int cond, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", cond ? "" : "not ", ++n_test);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond)
		n_fail++;
}

/* ---- personality and the documented timing model ---- */

struct pers {
	long long macs_int8, macs_int16, macs_int32, clock_hz, sram_bytes;
	long long dma_bw, dma_burst, dw_eff_pct, launch_ns;
	int layout;
};

static int read_pers(int id, struct pers *p)
{
	char path[128], buf[4096];
	int ret = 0;

	snprintf(path, sizeof(path), SIMDEV "%d/personality", id);
	ret |= mi_read_key(path, "macs_int8", &p->macs_int8);
	ret |= mi_read_key(path, "macs_int16", &p->macs_int16);
	ret |= mi_read_key(path, "macs_int32", &p->macs_int32);
	ret |= mi_read_key(path, "clock_hz", &p->clock_hz);
	ret |= mi_read_key(path, "sram_bytes", &p->sram_bytes);
	ret |= mi_read_key(path, "dma_bw", &p->dma_bw);
	ret |= mi_read_key(path, "dma_burst", &p->dma_burst);
	ret |= mi_read_key(path, "dw_eff_pct", &p->dw_eff_pct);
	ret |= mi_read_key(path, "launch_ns", &p->launch_ns);
	if (mi_read_file(path, buf, sizeof(buf)) < 0)
		return -EIO;
	p->layout = strstr(buf, "layout=nchw") ? DRM_METAINFER_LAYOUT_NCHW :
						 DRM_METAINFER_LAYOUT_NHWC;
	return ret ? -EIO : 0;
}

/* sin/sout: bytes of in/out that are on-chip intermediates (no DMA) */
struct cost {
	unsigned long long work, in, w, out, sin, sout;
	int esize, depthwise, layout_sensitive, layout;
};

struct expect {
	unsigned long long busy, stall, in, out;
};

static unsigned long long dma_ns(const struct pers *p, unsigned long long b)
{
	unsigned long long bursts = (b + p->dma_burst - 1) / p->dma_burst;

	return b ? (unsigned __int128)bursts * p->dma_burst * 1000000000ull /
			       p->dma_bw :
		   0;
}

/* One op, per Documentation/sim.rst "Timing model". */
static void model_op(const struct pers *p, const struct cost *c,
		     struct expect *e)
{
	long long rate = c->esize == 1 ? p->macs_int8 :
			 c->esize == 2 ? p->macs_int16 :
					 p->macs_int32;
	unsigned long long compute = 0, dma, tiling = 0, layout = 0, t;
	unsigned long long io = c->in + c->w + c->out, refetch = 0, lb = 0;

	if (!rate)
		rate = 1;
	if (c->work)
		compute = (unsigned __int128)c->work * 1000000000ull /
			  ((unsigned __int128)rate * p->clock_hz);
	if (c->depthwise)
		compute = compute * 100 / p->dw_eff_pct;
	dma = dma_ns(p, io - c->sin - c->sout);
	if (c->w && io > (unsigned long long)p->sram_bytes) {
		unsigned long long tiles =
			(io + p->sram_bytes - 1) / p->sram_bytes;

		refetch = (tiles - 1) * (c->in < c->w ? c->in : c->w);
		tiling = dma_ns(p, refetch);
	}
	if (c->layout_sensitive && c->layout != p->layout) {
		lb = 2 * (c->in + c->out);
		layout = dma_ns(p, lb);
	}
	t = (compute > dma ? compute : dma) + tiling + layout;
	e->busy += t;
	e->stall += t - (compute < t ? compute : t);
	e->in += c->in - c->sin + c->w + refetch + lb / 2;
	e->out += c->out - c->sout + lb / 2;
}

/* ---- jobs ---- */

struct dev {
	int id, fd, minor;
	uint32_t bo;
	int8_t *map;
	uint64_t size;
};

static int dev_open(struct dev *d, int id)
{
	d->id = id;
	d->minor = mi_sim_minor(id);
	if (d->minor < 0)
		return d->minor;
	d->fd = mi_open_minor(d->minor);
	if (d->fd < 0)
		return d->fd;
	d->size = 1 << 20;
	d->map = mi_bo_new(d->fd, d->size, &d->bo);
	if (!d->map)
		return -ENOMEM;
	for (uint64_t i = 0; i < d->size; i++)
		d->map[i] = (int8_t)(i * 7 % 13 - 6);
	return 0;
}

static void dev_close(struct dev *d)
{
	if (d->map)
		munmap(d->map, d->size);
	if (d->fd >= 0) {
		mi_bo_close(d->fd, d->bo);
		close(d->fd);
	}
	d->map = NULL;
	d->fd = -1;
}

/* Submit a stream on a fresh context, wait; return the status, ctx counters. */
static int run_stream(struct dev *d, uint32_t queue, struct mi_stream *s,
		      int64_t *status, struct drm_metainfer_get_counters *c)
{
	uint64_t seq;
	uint32_t ctx;
	void *cmds;
	int ret;

	ret = mi_ctx_create(d->fd, queue, DRM_METAINFER_PRIORITY_NORMAL, &ctx);
	if (ret)
		return ret;
	cmds = mi_stream_finish(s);
	ret = mi_submit(d->fd, ctx, &d->bo, 1, cmds, s->len, &seq);
	if (!ret)
		ret = mi_wait(d->fd, ctx, seq, 30000, status);
	if (!ret && c) {
		memset(c, 0, sizeof(*c));
		ret = mi_counters(d->fd, ctx, c);
	}
	mi_ctx_destroy(d->fd, ctx);
	return ret;
}

/* Submit one op on a fresh context, wait; return the status, ctx counters. */
static int run_op(struct dev *d, uint32_t queue, void *op, size_t size,
		  int64_t *status, struct drm_metainfer_get_counters *c)
{
	struct mi_stream s;
	uint64_t seq;
	uint32_t ctx;
	void *cmds;
	int ret;

	ret = mi_ctx_create(d->fd, queue, DRM_METAINFER_PRIORITY_NORMAL, &ctx);
	if (ret)
		return ret;
	mi_stream_init(&s);
	mi_stream_add(&s, op, size);
	cmds = mi_stream_finish(&s);
	ret = mi_submit(d->fd, ctx, &d->bo, 1, cmds, s.len, &seq);
	if (!ret)
		ret = mi_wait(d->fd, ctx, seq, 30000, status);
	if (!ret && c) {
		memset(c, 0, sizeof(*c));
		ret = mi_counters(d->fd, ctx, c);
	}
	mi_stream_free(&s);
	mi_ctx_destroy(d->fd, ctx);
	return ret;
}

static struct drm_metainfer_op_gemm gemm_op(uint32_t m, uint32_t k, uint32_t n)
{
	struct drm_metainfer_op_gemm op = { 0 };
	uint32_t sa[2] = { m, k }, sb[2] = { k, n }, sy[2] = { m, n };

	op.hdr.op = DRM_METAINFER_OP_GEMM;
	op.a = mi_tensor(0, DRM_METAINFER_DTYPE_INT8,
			 DRM_METAINFER_LAYOUT_PLAIN, 0, 2, sa);
	op.b = mi_tensor(0, DRM_METAINFER_DTYPE_INT8,
			 DRM_METAINFER_LAYOUT_PLAIN, 262144, 2, sb);
	op.output = mi_tensor(0, DRM_METAINFER_DTYPE_INT32,
			      DRM_METAINFER_LAYOUT_PLAIN, 524288, 2, sy);
	return op;
}

static int gemm_ok(struct dev *d, uint32_t m, uint32_t k, uint32_t n)
{
	int32_t *y = (int32_t *)(d->map + 524288);
	int8_t *a = d->map, *b = d->map + 262144;

	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			int32_t acc = 0;

			for (uint32_t x = 0; x < k; x++)
				acc += a[i * k + x] * b[x * n + j];
			if (acc != y[i * n + j])
				return 0;
		}
	return 1;
}

/* conv2d 3x3, pad 1, stride 1, int8 -> int32, in layout @lay */
static struct drm_metainfer_op_conv2d
conv_op(uint32_t lay, uint32_t c, uint32_t hw, uint32_t oc, uint32_t groups)
{
	struct drm_metainfer_op_conv2d op = { 0 };
	int nhwc = lay == DRM_METAINFER_LAYOUT_NHWC;
	uint32_t si[4] = { 1, c, hw, hw }, sw[4] = { oc, c / groups, 3, 3 };
	uint32_t so[4] = { 1, oc, hw, hw };

	if (nhwc) {
		uint32_t a[4] = { 1, hw, hw, c },
			 b[4] = { oc, 3, 3, c / groups };
		uint32_t o[4] = { 1, hw, hw, oc };

		memcpy(si, a, sizeof(a));
		memcpy(sw, b, sizeof(b));
		memcpy(so, o, sizeof(o));
	}
	op.hdr.op = DRM_METAINFER_OP_CONV2D;
	op.stride_h = op.stride_w = op.dilation_h = op.dilation_w = 1;
	op.pad_top = op.pad_left = op.pad_bottom = op.pad_right = 1;
	op.groups = groups;
	op.input = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, lay, 0, 4, si);
	op.weight = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, lay, 262144, 4, sw);
	op.output = mi_tensor(0, DRM_METAINFER_DTYPE_INT32, lay, 524288, 4, so);
	return op;
}

static void check_model(const char *what, const struct expect *e,
			const struct drm_metainfer_get_counters *c)
{
	ok(c->busy_ns == e->busy && c->stall_ns == e->stall &&
		   c->dma_bytes_in == e->in && c->dma_bytes_out == e->out,
	   "%s: busy %llu stall %llu in %llu out %llu (model: %llu %llu %llu %llu)",
	   what, (unsigned long long)c->busy_ns,
	   (unsigned long long)c->stall_ns, (unsigned long long)c->dma_bytes_in,
	   (unsigned long long)c->dma_bytes_out, e->busy, e->stall, e->in,
	   e->out);
}

static void test_timing(int id, const char *name)
{
	struct drm_metainfer_get_counters c;
	struct drm_metainfer_op_gemm g;
	struct drm_metainfer_op_conv2d cv;
	struct dev d = { .fd = -1 };
	struct pers p;
	struct expect e;
	struct cost k;
	int64_t st = -1;
	int lay;

	if (dev_open(&d, id) || read_pers(id, &p)) {
		ok(0, "%s: open device and read its personality", name);
		dev_close(&d);
		return;
	}

	/* gemm: compute vs DMA bound depends on the chip */
	g = gemm_op(64, 256, 64);
	ok(!run_op(&d, 0, &g, sizeof(g), &st, &c) && st == 0 &&
		   gemm_ok(&d, 64, 256, 64),
	   "%s: gemm 64x256x64 result", name);
	memset(&e, 0, sizeof(e));
	e.busy = p.launch_ns;
	k = (struct cost){ .work = 64ull * 256 * 64,
			   .in = 64 * 256,
			   .w = 256 * 64,
			   .out = 4 * 64 * 64,
			   .esize = 1 };
	model_op(&p, &k, &e);
	check_model(name, &e, &c);
	ok(c.macs == 64ull * 256 * 64, "%s: gemm MACs %llu", name,
	   (unsigned long long)c.macs);

	/* conv2d in both layouts: the non-preferred one pays a conversion */
	for (lay = DRM_METAINFER_LAYOUT_NCHW; lay <= DRM_METAINFER_LAYOUT_NHWC;
	     lay++) {
		char what[96];

		cv = conv_op(lay, 8, 8, 8, 1);
		st = -1;
		ok(!run_op(&d, 1, &cv, sizeof(cv), &st, &c) && st == 0,
		   "%s: conv2d %s runs", name, lay == 1 ? "NCHW" : "NHWC");
		memset(&e, 0, sizeof(e));
		e.busy = p.launch_ns;
		k = (struct cost){ .work = 8ull * 8 * 8 * 8 * 9,
				   .in = 512,
				   .w = 576,
				   .out = 2048,
				   .esize = 1,
				   .layout_sensitive = 1,
				   .layout = lay };
		model_op(&p, &k, &e);
		snprintf(what, sizeof(what), "%s conv2d %s%s", name,
			 lay == 1 ? "NCHW" : "NHWC",
			 lay == p.layout ? " (preferred)" : " (converted)");
		check_model(what, &e, &c);
	}

	/* depthwise (groups == C) runs at dw_eff_pct of peak */
	cv = conv_op(p.layout, 64, 16, 64, 64);
	st = -1;
	ok(!run_op(&d, 0, &cv, sizeof(cv), &st, &c) && st == 0,
	   "%s: depthwise conv2d runs", name);
	memset(&e, 0, sizeof(e));
	e.busy = p.launch_ns;
	k = (struct cost){ .work = 64ull * 16 * 16 * 9,
			   .in = 64 * 256,
			   .w = 64 * 9,
			   .out = 4 * 64 * 256,
			   .esize = 1,
			   .depthwise = 1,
			   .layout_sensitive = 1,
			   .layout = p.layout };
	model_op(&p, &k, &e);
	check_model("depthwise", &e, &c);
	dev_close(&d);
}

static long long sim_state(int id, const char *key);

/* ---- on-chip intermediates (Documentation/sim.rst) ---- */

#define CX 0 /* conv input, 16x16x16 int8 */
#define CW1 65536 /* conv 1 weights (2304), multiplier, shift */
#define CY1 131072 /* conv 1 output = relu input */
#define CY2 196608 /* relu output = conv 2 input */
#define CW2 262144 /* conv 2 weights, multiplier, shift */
#define CZ 327680 /* conv 2 output */

/* 3x3 conv, pad 1, 16 -> 16 channels, 16x16, int8 -> int8 (requantized) */
static struct drm_metainfer_op_conv2d casc_conv(uint32_t lay, uint64_t in,
						uint64_t w, uint64_t out)
{
	struct drm_metainfer_op_conv2d op = conv_op(lay, 16, 16, 16, 1);
	uint32_t one = 1;

	op.hdr.flags = DRM_METAINFER_OP_F_REQUANT;
	op.input.offset = in;
	op.weight.offset = w;
	op.output.offset = out;
	op.output.dtype = DRM_METAINFER_DTYPE_INT8;
	op.multiplier = mi_tensor(0, DRM_METAINFER_DTYPE_INT32,
				  DRM_METAINFER_LAYOUT_PLAIN, w + 4096, 1,
				  &one);
	op.shift = mi_tensor(0, DRM_METAINFER_DTYPE_INT32,
			     DRM_METAINFER_LAYOUT_PLAIN, w + 4100, 1, &one);
	op.rq.act_min = -128;
	op.rq.act_max = 127;
	return op;
}

static struct drm_metainfer_op_clip casc_relu(uint32_t lay, uint64_t in,
					      uint64_t out)
{
	struct drm_metainfer_op_clip op = { 0 };
	uint32_t nchw[4] = { 1, 16, 16, 16 };

	op.hdr.op = DRM_METAINFER_OP_RELU;
	op.input = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, lay, in, 4, nchw);
	op.output = mi_tensor(0, DRM_METAINFER_DTYPE_INT8, lay, out, 4, nchw);
	return op;
}

/* The model's cost of the two convs and the relu (sin/sout set later). */
static const struct cost casc_conv_cost = { .work = 16ull * 16 * 16 * 16 * 9,
					    .in = 4096,
					    .w = 2304 + 8,
					    .out = 4096,
					    .esize = 1,
					    .layout_sensitive = 1 };
static const struct cost casc_relu_cost = { .work = 4096,
					    .in = 4096,
					    .out = 4096,
					    .esize = 1 };

/*
 * Run conv -> relu -> conv as ops [first, last] of one job; compare the
 * context's counters with the model, where @keep says which of the two
 * intermediates the formula keeps on chip (bit 0: conv 1's output, bit 1:
 * the relu's).  Adds the counters to @sum.
 */
static int casc_job(struct dev *d, const struct pers *p, int first, int last,
		    int keep, const char *what, struct expect *sum)
{
	struct drm_metainfer_op_conv2d c1 = casc_conv(p->layout, CX, CW1, CY1);
	struct drm_metainfer_op_clip r = casc_relu(p->layout, CY1, CY2);
	struct drm_metainfer_op_conv2d c2 = casc_conv(p->layout, CY2, CW2, CZ);
	struct drm_metainfer_get_counters c;
	struct mi_stream s;
	struct expect e = { .busy = (unsigned long long)p->launch_ns };
	struct cost k;
	int64_t st = -1;
	int ret;

	mi_stream_init(&s);
	if (first == 0) {
		mi_stream_add(&s, &c1, sizeof(c1));
		k = casc_conv_cost;
		k.layout = p->layout;
		k.sout = keep & 1 ? 4096 : 0;
		model_op(p, &k, &e);
	}
	if (first <= 1 && last >= 1) {
		mi_stream_add(&s, &r, sizeof(r));
		k = casc_relu_cost;
		k.sin = keep & 1 ? 4096 : 0;
		k.sout = keep & 2 ? 4096 : 0;
		model_op(p, &k, &e);
	}
	if (last == 2) {
		mi_stream_add(&s, &c2, sizeof(c2));
		k = casc_conv_cost;
		k.layout = p->layout;
		k.sin = keep & 2 ? 4096 : 0;
		model_op(p, &k, &e);
	}
	ret = run_stream(d, 0, &s, &st, &c);
	mi_stream_free(&s);
	ok(!ret && st == 0, "%s: runs", what);
	if (ret || st)
		return -EIO;
	check_model(what, &e, &c);
	sum->busy += c.busy_ns;
	sum->in += c.dma_bytes_in;
	sum->out += c.dma_bytes_out;
	return 0;
}

static void test_cascade(int id, const char *name)
{
	struct expect one = { 0 }, two = { 0 }, three = { 0 }, over = { 0 };
	char path[128], what[128], *z1 = NULL;
	struct dev d = { .fd = -1 };
	long long kept0, kept1, kept2;
	long long sram0 = 0;
	struct pers p;
	int i;

	if (dev_open(&d, id) || read_pers(id, &p)) {
		ok(0, "%s: open device and read its personality", name);
		dev_close(&d);
		return;
	}
	/* requant: scale 2^-4 (M = 2^30, S = -3), per tensor */
	for (i = 0; i < 2; i++) {
		int32_t m = 1 << 30, sh = -3;

		memcpy(d.map + (i ? CW2 : CW1) + 4096, &m, 4);
		memcpy(d.map + (i ? CW2 : CW1) + 4100, &sh, 4);
	}
	kept0 = sim_state(id, "sram_kept_bytes");
	/* one job: both intermediates stay on chip (ws 10504 <= SRAM) */
	snprintf(what, sizeof(what), "%s: conv->relu->conv, one job", name);
	if (casc_job(&d, &p, 0, 2, 3, what, &one))
		goto out;
	z1 = malloc(4096);
	memcpy(z1, d.map + CZ, 4096);
	memset(d.map + CZ, 0, 4096);
	kept1 = sim_state(id, "sram_kept_bytes");
	/* two jobs (conv->relu | conv): the relu's output goes to memory */
	snprintf(what, sizeof(what), "%s: conv->relu | conv", name);
	casc_job(&d, &p, 0, 1, 1, what, &two);
	casc_job(&d, &p, 2, 2, 0, what, &two);
	kept2 = sim_state(id, "sram_kept_bytes");
	ok(!memcmp(z1, d.map + CZ, 4096),
	   "%s: one job and two jobs compute the same output", name);
	/* three jobs: every tensor over DMA */
	snprintf(what, sizeof(what), "%s: conv | relu | conv", name);
	for (i = 0; i < 3; i++)
		casc_job(&d, &p, i, i, 0, what, &three);
	ok(kept1 - kept0 == 8192 && kept2 - kept1 == 4096 &&
		   sim_state(id, "sram_kept_bytes") == kept2,
	   "%s: sram_kept_bytes grows by 8192, 4096, 0 (%lld, %lld, %lld)",
	   name, kept1 - kept0, kept2 - kept1,
	   sim_state(id, "sram_kept_bytes") - kept2);
	/* exactly one intermediate (4096 B) written and read less per step */
	ok(two.in - one.in == 4096 && two.out - one.out == 4096 &&
		   three.in - two.in == 4096 && three.out - two.out == 4096,
	   "%s: DMA in/out one job %llu/%llu, two %llu/%llu, three %llu/%llu",
	   name, one.in, one.out, two.in, two.out, three.in, three.out);
	ok(one.busy < two.busy && two.busy < three.busy,
	   "%s: busy ns one job %llu < two jobs %llu < three jobs %llu", name,
	   one.busy, two.busy, three.busy);

	/* one byte less SRAM than the conv's working set: nothing stays */
	snprintf(path, sizeof(path), SIMDEV "%d/personality", id);
	sram0 = p.sram_bytes;
	ok(!mi_write_file(path, "sram_bytes=10503"), "%s: sram_bytes=10503",
	   name);
	p.sram_bytes = 10503;
	snprintf(what, sizeof(what), "%s: one job, SRAM 1 byte short", name);
	casc_job(&d, &p, 0, 2, 0, what, &over);
	ok(sim_state(id, "sram_kept_bytes") == kept2 && over.out == three.out &&
		   over.busy > one.busy,
	   "%s: just over SRAM spills: out %llu, busy %llu", name, over.out,
	   over.busy);
	snprintf(what, sizeof(what), "sram_bytes=%lld", sram0);
	ok(!mi_write_file(path, what), "%s: restore sram_bytes", name);
out:
	free(z1);
	dev_close(&d);
}

/* LUT: advertised by the Ethos-U presets, not by dsp-nchw; its timing. */
static void test_lut(int id, const char *name, int has_lut)
{
	struct drm_metainfer_op_lut op = { 0 };
	struct drm_metainfer_get_counters c;
	uint32_t shape[1] = { 1000 }, t256[1] = { 256 };
	struct dev d = { .fd = -1 };
	uint64_t om = 0;
	struct pers p;
	struct expect e = { 0 };
	struct cost k = {
		.work = 1000, .in = 1000 + 256, .out = 1000, .esize = 1
	};
	int64_t st = -1;
	int ret, good = 1;

	if (dev_open(&d, id) || read_pers(id, &p)) {
		ok(0, "%s: open device", name);
		dev_close(&d);
		return;
	}
	mi_get_param(d.fd, DRM_METAINFER_PARAM_OP_MASK, 0, &om);
	ok(!!(om & (1ull << DRM_METAINFER_OP_LUT)) == has_lut,
	   "%s: OP_MASK %#llx %s LUT", name, (unsigned long long)om,
	   has_lut ? "has" : "lacks");
	op.hdr.op = DRM_METAINFER_OP_LUT;
	op.input = mi_tensor(0, DRM_METAINFER_DTYPE_INT8,
			     DRM_METAINFER_LAYOUT_PLAIN, 0, 1, shape);
	op.table = mi_tensor(0, DRM_METAINFER_DTYPE_UINT8,
			     DRM_METAINFER_LAYOUT_PLAIN, 4096, 1, t256);
	op.output = mi_tensor(0, DRM_METAINFER_DTYPE_UINT8,
			      DRM_METAINFER_LAYOUT_PLAIN, 8192, 1, shape);
	for (int i = 0; i < 256; i++)
		d.map[4096 + i] = (int8_t)(255 - i);
	ret = run_op(&d, 0, &op, sizeof(op), &st, &c);
	if (!has_lut) {
		ok(ret == -EOPNOTSUPP, "%s: LUT refused: EOPNOTSUPP (%d)", name,
		   ret);
		dev_close(&d);
		return;
	}
	for (int i = 0; i < 1000; i++)
		good &= (uint8_t)d.map[8192 + i] ==
			(uint8_t)(255 - (d.map[i] + 128));
	ok(!ret && st == 0 && good, "%s: LUT result", name);
	e.busy = p.launch_ns;
	model_op(&p, &k, &e);
	check_model(name, &e, &c);
	dev_close(&d);
}

static void test_control(void)
{
	char path[128], buf[4096];
	uint64_t v8 = 0, v16 = 1, clk = 0, lay = 0, fw0 = 0, fw1 = 0;
	struct dev d = { .fd = -1 };
	long long x = 0;

	ok(mi_read_file(MI_SIM_BUS "/personalities", buf, sizeof(buf)) > 0 &&
		   strstr(buf, "ethos-u55-deep") &&
		   strstr(buf, "ethos-u65-server") && strstr(buf, "dsp-nchw"),
	   "personalities lists the presets");
	ok(mi_sim_new(0, "ethos-u55-high", NULL) == -EEXIST,
	   "new_device with a used id: EEXIST");
	ok(mi_sim_new(7, "no-such-chip", NULL) == -EINVAL,
	   "unknown personality: EINVAL");
	ok(mi_sim_new(7, "dsp-nchw", "bogus_key=1") == -EINVAL,
	   "unknown key: EINVAL");
	ok(mi_sim_new(7, "dsp-nchw", "queues=99") == -ERANGE,
	   "out-of-range value: ERANGE");
	ok(mi_sim_new(7, "dsp-nchw", "clock_hz=12abc") == -EINVAL,
	   "malformed value: EINVAL");
	ok(mi_write_file(MI_SIM_BUS "/new_device", "banana") == -EINVAL,
	   "malformed new_device line: EINVAL");
	ok(mi_sim_del(777) == -ENOENT, "del_device of an unknown id: ENOENT");
	ok(access(SIMDEV "7", F_OK) != 0, "no device left behind by errors");

	/* live and fixed fields */
	snprintf(path, sizeof(path), SIMDEV "%d/personality", 1);
	ok(!mi_write_file(path, "clock_hz=700000000 tau_ms=1500") &&
		   !mi_read_key(path, "clock_hz", &x) && x == 700000000,
	   "live personality update (clock_hz) takes effect");
	ok(mi_write_file(path, "macs_int8=1") == -EBUSY,
	   "fixed field (macs_int8) cannot change: EBUSY");
	ok(mi_write_file(path, "clock_hz=800000000") == 0, "restore clock_hz");
	ok(!mi_read_key(MI_SIM_DEBUGFS "/1/personality", "dma_burst", &x) &&
		   x == 64,
	   "debugfs personality readable");
	ok(!mi_write_file(MI_SIM_DEBUGFS "/1/personality", "idle_mw=41") &&
		   !mi_read_key(path, "idle_mw", &x) && x == 41 &&
		   !mi_write_file(path, "idle_mw=40"),
	   "debugfs personality writable");
	snprintf(path, sizeof(path), MI_DEBUGFS "/renderD%d/fail_dma",
		 mi_sim_minor(1));
	ok(access(path, W_OK) == 0, "knobs also in the core's directory");

	/* capabilities come from the personality */
	ok(!mi_sim_new(5, "ethos-u65-mid",
		       "macs_int16=0 queues=3 op_mask=0x7fc"),
	   "new_device with overrides");
	ok(!dev_open(&d, 5), "open the new device");
	if (d.fd >= 0) {
		struct drm_metainfer_op_conv2d cv;
		struct drm_metainfer_op_gemm g;
		uint64_t nq = 0, dt = 0, om = 0;
		int64_t st = -1;

		mi_get_param(d.fd, DRM_METAINFER_PARAM_MACS_PER_CYCLE,
			     DRM_METAINFER_DTYPE_INT8, &v8);
		mi_get_param(d.fd, DRM_METAINFER_PARAM_MACS_PER_CYCLE,
			     DRM_METAINFER_DTYPE_INT16, &v16);
		mi_get_param(d.fd, DRM_METAINFER_PARAM_CLOCK_KHZ, 0, &clk);
		mi_get_param(d.fd, DRM_METAINFER_PARAM_PREFERRED_LAYOUT, 0,
			     &lay);
		mi_get_param(d.fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &nq);
		mi_get_param(d.fd, DRM_METAINFER_PARAM_DTYPE_MASK, 0, &dt);
		mi_get_param(d.fd, DRM_METAINFER_PARAM_OP_MASK, 0, &om);
		mi_get_param(d.fd, DRM_METAINFER_PARAM_FW_VERSION, 0, &fw1);
		ok(v8 == 256 && v16 == 0 && clk == 500000 &&
			   lay == DRM_METAINFER_LAYOUT_NHWC && nq == 3 &&
			   !(dt & (1u << DRM_METAINFER_DTYPE_INT16)) &&
			   om == 0x7fc,
		   "caps: 256 int8 MACs, no int16, 500 MHz, NHWC, 3 queues, "
		   "no conv2d");
		cv = conv_op(DRM_METAINFER_LAYOUT_NHWC, 8, 8, 8, 1);
		ok(run_op(&d, 0, &cv, sizeof(cv), &st, NULL) == -EOPNOTSUPP,
		   "conv2d outside op_mask: EOPNOTSUPP");
		g = gemm_op(4, 4, 4);
		g.a.dtype = DRM_METAINFER_DTYPE_INT16;
		ok(run_op(&d, 0, &g, sizeof(g), &st, NULL) == -EOPNOTSUPP,
		   "int16 without int16 MACs: EOPNOTSUPP");
		g = gemm_op(4, 4, 4);
		ok(!run_op(&d, 2, &g, sizeof(g), &st, NULL) && st == 0 &&
			   gemm_ok(&d, 4, 4, 4),
		   "gemm on queue 2 runs");
	}
	dev_close(&d);
	ok(!mi_sim_del(5), "del_device");
	ok(!mi_sim_new(5, "ethos-u65-mid", NULL) && !dev_open(&d, 5),
	   "same id again, without overrides");
	mi_get_param(d.fd, DRM_METAINFER_PARAM_FW_VERSION, 0, &fw0);
	ok(fw0 && fw1 && fw0 != fw1,
	   "FW_VERSION differs when the personality differs (%llx, %llx)",
	   (unsigned long long)fw0, (unsigned long long)fw1);
	dev_close(&d);
	ok(!mi_sim_del(5), "del_device");
}

static long long sim_state(int id, const char *key)
{
	char path[128];
	long long v = -1;

	snprintf(path, sizeof(path), MI_SIM_DEBUGFS "/%d/sim_state", id);
	mi_read_key(path, key, &v);
	return v;
}

static void test_thermal(void)
{
	struct drm_metainfer_get_counters c;
	/* 4096 MACs at 64 MACs/cycle and 1 kHz: 64 ms modelled per job */
	struct drm_metainfer_op_gemm g = gemm_op(16, 16, 16);
	struct dev d = { .fd = -1 };
	long long hot = 0, t_max = 0, slow = 0;
	int64_t st;
	int i, err = 0;

	ok(!mi_sim_new(
		   6, "dsp-nchw",
		   "clock_hz=1000 fj_per_mac=1000000000 rth_mc_per_w=2000000 "
		   "tau_ms=50 throttle_mc=60000 idle_mw=1") &&
		   !dev_open(&d, 6),
	   "hot chip created");
	for (i = 0; i < 30 && d.fd >= 0; i++) {
		err |= run_op(&d, 0, &g, sizeof(g), &st, NULL) || st;
		memset(&c, 0, sizeof(c));
		err |= mi_counters(d.fd, 0, &c);
		if (c.temp_mc > t_max)
			t_max = c.temp_mc;
		if (c.throttle & DRM_METAINFER_THROTTLE_THERMAL)
			hot = 1;
		if (sim_state(6, "last_job_ns") > 64008000)
			slow = 1;
		if (hot && slow && i >= 4)
			break;
	}
	ok(!err, "jobs on the hot chip succeed");
	ok(c.valid ==
		   (DRM_METAINFER_VALID_TEMP | DRM_METAINFER_VALID_POWER |
		    DRM_METAINFER_VALID_CLOCK | DRM_METAINFER_VALID_THROTTLE),
	   "all four sensors valid");
	ok(t_max > 55000, "temperature rises under load (max %.1f C)",
	   t_max / 1000.0);
	ok(sim_state(6, "throttle_events") > 0 && hot,
	   "clock throttled when hot (%lld events)",
	   sim_state(6, "throttle_events"));
	ok(slow, "throttled jobs take longer (modelled)");
	usleep(600000);
	memset(&c, 0, sizeof(c));
	mi_counters(d.fd, 0, &c);
	ok(c.temp_mc < 30000 && !c.throttle && c.clock_khz == 1,
	   "after 600 ms idle: %.1f C, throttle %llu, clock %llu kHz",
	   c.temp_mc / 1000.0, (unsigned long long)c.throttle,
	   (unsigned long long)c.clock_khz);
	dev_close(&d);
	ok(!mi_sim_del(6), "del_device");
}

static void test_faults(void)
{
	struct drm_metainfer_op_gemm g = gemm_op(16, 16, 16);
	struct dev d = { .fd = -1 };
	uint64_t lost = 0, seqs[6], seq;
	int32_t *y;
	int64_t st;
	uint32_t ctx;
	int i, n = 0, ret;
	struct mi_stream s;
	void *cmds;

	ok(!mi_sim_new(8, "ethos-u55-deep", NULL) && !dev_open(&d, 8),
	   "fault device created");
	if (d.fd < 0)
		return;
	y = (int32_t *)(d.map + 524288);
	y[0] = 0x5a5a5a5a;
	mi_sim_knob(8, "fail_dma", 1);
	st = 0;
	ok(!run_op(&d, 0, &g, sizeof(g), &st, NULL) && st == -EIO &&
		   y[0] == 0x5a5a5a5a,
	   "fail_dma: status -EIO, output untouched");
	mi_sim_knob(8, "fail_hang", 1);
	st = 0;
	ret = run_op(&d, 0, &g, sizeof(g), &st, NULL);
	ok(!ret && st == -ETIMEDOUT, "fail_hang: status -ETIMEDOUT (%lld)",
	   (long long)st);
	st = -1;
	ok(!run_op(&d, 0, &g, sizeof(g), &st, NULL) && st == 0 &&
		   gemm_ok(&d, 16, 16, 16),
	   "the queue works again after the reset");
	ok(sim_state(8, "resets") == 1 && sim_state(8, "jobs_hung") == 1,
	   "sim_state counts the hang and the reset");

	/* remove the device with jobs in flight: one hung, more queued */
	mi_sim_knob(8, "fail_hang", 1);
	mi_ctx_create(d.fd, 1, DRM_METAINFER_PRIORITY_NORMAL, &ctx);
	mi_stream_init(&s);
	mi_stream_add(&s, &g, sizeof(g));
	cmds = mi_stream_finish(&s);
	for (i = 0; i < 6; i++)
		n += !mi_submit(d.fd, ctx, &d.bo, 1, cmds, s.len, &seqs[i]);
	mi_stream_free(&s);
	ok(n == 6, "6 jobs queued");
	ok(!mi_sim_del(8), "del_device with jobs in flight");
	for (i = 0, n = 0; i < 6; i++) {
		st = 0;
		ret = mi_wait(d.fd, ctx, seqs[i], 2000, &st);
		n += ret == -ENODEV || !ret; /* not -ETIMEDOUT: finished */
	}
	ok(n == 6, "every job finished or the device is gone (no hang)");
	dev_close(&d);

	/* a failed reset loses the device */
	ok(!mi_sim_new(8, "ethos-u65-high", NULL) && !dev_open(&d, 8),
	   "device recreated");
	mi_sim_knob(8, "fail_hang", 1);
	mi_sim_knob(8, "fail_reset", 1);
	st = 0;
	ok(!run_op(&d, 1, &g, sizeof(g), &st, NULL) && st == -ETIMEDOUT,
	   "hung job with a failing reset: -ETIMEDOUT");
	mi_get_param(d.fd, DRM_METAINFER_PARAM_DEVICE_LOST, 0, &lost);
	ok(lost == 1, "device lost");
	mi_ctx_create(d.fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx);
	mi_stream_init(&s);
	mi_stream_add(&s, &g, sizeof(g));
	cmds = mi_stream_finish(&s);
	ok(mi_submit(d.fd, ctx, &d.bo, 1, cmds, s.len, &seq) == -ENODEV,
	   "submit to a lost device: ENODEV");
	mi_stream_free(&s);
	dev_close(&d);
	ok(!mi_sim_del(8), "del_device of a lost device");
}

int main(void)
{
	if (!mi_sim_present()) {
		printf("1..0 # SKIP metainfer_sim not loaded\n");
		return 4;
	}
	if (mi_sim_minor(0) < 0 && mi_sim_new(0, "ethos-u55-high", NULL))
		return 1;
	if (mi_sim_minor(1) < 0 && mi_sim_new(1, "dsp-nchw", NULL))
		return 1;
	printf("TAP version 13\n");
	test_control();
	test_timing(0, "ethos-u55-high");
	test_timing(1, "dsp-nchw");
	test_lut(0, "ethos-u55-high", 1);
	test_lut(1, "dsp-nchw", 0);
	test_cascade(0, "ethos-u55-high");
	test_cascade(1, "dsp-nchw");
	test_thermal();
	test_faults();
	printf("1..%d\n# %d/%d passed\n", n_test, n_test - n_fail, n_test);
	return n_fail ? 1 : 0;
}
