// SPDX-License-Identifier: MIT
/*
 * Micro-benchmark of the fast CPU kernels (not a test): GFLOP/s of SGEMM
 * and of the conv layers of ResNet-50 and MobileNetV2 at 224x224, batch 1,
 * with every algorithm that supports the shape.
 *
 *   build/mi-cpu-bench [-t THREADS] [-r REPS] [-R] [-f FILTER] [-i ISA]
 * (-R: convs with a fused residual Add)
 * (FILTER: gemm, resnet50, resnet18, squeezenet, pool, mobilenetv2, stem)
 *
 * -i generic|avx2|avx512 selects the ISA path (at most the CPU's own, as
 * for the runtime's --isa; default the CPU's).  Each line gives
 * the fastest of REPS runs (wall clock) and, in parentheses, GFLOP/s over the process
 * CPU time (the kernel's own cost on a shared machine; with several
 * threads it also counts the pool's spinning).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *rbuf(size_t n)
{
	float *p = mi_cpu_alloc(n * sizeof(float));
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
	return p;
}

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int reps = 20;
static double last_cpu; /* median process CPU seconds of the last time_it */

static double median(double *t, int n)
{
	double tmp;
	int i, j;

	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (t[j] < t[i])
				tmp = t[i], t[i] = t[j], t[j] = tmp;
	return t[n / 2];
}

/*
 * Median wall seconds of reps runs.  The machine may be shared: the CPU
 * time (last_cpu) shows what the kernel itself costs when the wall clock
 * includes time spent descheduled.
 */
static double time_it(void (*fn)(void *), void *ctx)
{
	double t[256], c[256];
	int i, n = reps > 256 ? 256 : reps;

	fn(ctx);
	for (i = 0; i < n; i++) {
		double t0 = now(), c0 = cpu_now();

		fn(ctx);
		t[i] = now() - t0;
		c[i] = cpu_now() - c0;
	}
	last_cpu = median(c, n);
	/* the minimum: the least disturbed run on a shared machine */
	median(t, n);
	return t[0];
}

struct gemm_ctx {
	struct mi_sgemm_args a;
	void *ws;
};

static void gemm_fn(void *p)
{
	struct gemm_ctx *g = p;

	mi_sgemm(&g->a, g->ws);
}

static void bench_gemm(int isa, int nt, int m, int n, int k, int prepack_a)
{
	struct gemm_ctx g = { 0 };
	float *a = rbuf((size_t)m * k), *b = rbuf((size_t)k * n);
	float *c = rbuf((size_t)m * n);
	struct mi_packed pa;
	double t;

	g.a.isa = isa;
	g.a.m = m, g.a.n = n, g.a.k = k;
	g.a.a = a, g.a.a_rs = k, g.a.a_cs = 1;
	g.a.b = b, g.a.b_rs = n, g.a.b_cs = 1;
	g.a.c = c, g.a.ldc = n;
	g.a.nthreads = nt;
	if (prepack_a) {
		mi_sgemm_pack_a(isa, m, k, a, k, 1, &pa);
		g.a.pa = &pa;
	}
	g.ws = mi_cpu_alloc(mi_sgemm_ws_size(&g.a));
	t = time_it(gemm_fn, &g);
	printf("gemm   %-28s m=%-5d n=%-5d k=%-5d %8.3f ms %7.1f GFLOP/s (cpu %7.1f)\n",
	       prepack_a ? "packed-A" : "", m, n, k, t * 1e3,
	       2.0 * m * n * k / t * 1e-9,
	       2.0 * m * n * k / last_cpu * 1e-9);
	if (prepack_a)
		mi_packed_free(&pa);
	mi_cpu_free(g.ws);
	mi_cpu_free(a), mi_cpu_free(b), mi_cpu_free(c);
}

struct conv_ctx {
	struct mi_conv cv;
	float *x, *y, *res;
	void *ws;
};

static int with_res; /* -R: every conv adds a residual (fused Add) */

static void conv_fn(void *p)
{
	struct conv_ctx *c = p;

	mi_conv_run(&c->cv, c->x, c->y, c->res, MI_ACT_RELU, 0, 0, c->ws);
}

static const char *algo_names[] = { "gemm", "im2col", "depthwise",
				    "winograd" };

static void bench_conv(int isa, int nt, const char *net, int c, int h, int m,
		       int k, int s, int group)
{
	struct mi_conv_shape sh = { 0 };
	int algo;

	sh.n = 1, sh.c = c, sh.h = sh.w = h, sh.m = m;
	sh.kh = sh.kw = k, sh.group = group;
	sh.sh = sh.sw = s, sh.dh = sh.dw = 1;
	sh.pt = sh.pl = sh.pb = sh.pr = k / 2;
	sh.oh = sh.ow = (h + 2 * (k / 2) - k) / s + 1;
	for (algo = 0; algo < MI_CONV_COUNT; algo++) {
		struct conv_ctx cc;
		float *w, *bias;
		double t, flops;

		if (!mi_conv_supports(algo, &sh))
			continue;
		/* im2col is the fallback; skip it where something
		 * specialised applies, except for 3x3 (vs winograd) */
		if (algo == MI_CONV_IM2COL && k == 1 && s == 1)
			continue;
		if (algo == MI_CONV_IM2COL && group == c && group > 1)
			continue;
		w = rbuf((size_t)m * (c / group) * k * k);
		bias = rbuf(m);
		if (mi_conv_init(&cc.cv, algo, isa, nt, &sh, w, bias)) {
			mi_cpu_free(w), mi_cpu_free(bias);
			continue;
		}
		cc.x = rbuf((size_t)c * h * h);
		cc.y = rbuf((size_t)m * sh.oh * sh.ow);
		cc.res = with_res ? rbuf((size_t)m * sh.oh * sh.ow) : NULL;
		cc.ws = mi_cpu_alloc(cc.cv.ws_size);
		t = time_it(conv_fn, &cc);
		flops = 2.0 * m * (c / group) * k * k * sh.oh * sh.ow;
		printf("conv   %-11s %-10s c=%-4d %3dx%-3d m=%-4d k=%d s=%d g=%-4d %8.3f ms %7.1f GFLOP/s (cpu %7.1f)\n",
		       net, algo_names[algo], c, h, h, m, k, s, group,
		       t * 1e3, flops / t * 1e-9, flops / last_cpu * 1e-9);
		mi_conv_fini(&cc.cv);
		mi_cpu_free(cc.x), mi_cpu_free(cc.y), mi_cpu_free(cc.ws);
		mi_cpu_free(cc.res);
		mi_cpu_free(w), mi_cpu_free(bias);
	}
}

struct pool_ctx {
	struct mi_pool2d p;
	int planes;
	const struct mi_cpu_kern *kt;
	float *x, *y, *ws;
};

static void pool_fn(void *v)
{
	struct pool_ctx *c = v;
	size_t isz = (size_t)c->p.ih * c->p.iw, osz = (size_t)c->p.oh * c->p.ow;
	int i;

	for (i = 0; i < c->planes; i++)
		c->kt->pool(&c->p, c->x + i * isz, c->y + i * osz, c->ws);
}

/* MaxPool k x k, stride s, ceil_mode, no pads (SqueezeNet's) */
static void bench_pool(int isa, int planes, int h, int k, int s)
{
	struct pool_ctx c = { .planes = planes, .kt = mi_cpu_kern_get(isa) };
	double t;

	c.p.ih = c.p.iw = h, c.p.kh = c.p.kw = k, c.p.s = s;
	c.p.oh = c.p.ow = (h - k + s - 1) / s + 1;
	c.x = rbuf((size_t)planes * h * h);
	c.y = rbuf((size_t)planes * c.p.oh * c.p.ow);
	c.ws = rbuf(mi_pool_ws_floats(&c.p));
	t = time_it(pool_fn, &c);
	printf("pool   max %dx%d s%d        c=%-4d %3dx%-3d                       %8.3f ms %7.2f Gpix/s (cpu %7.2f)\n",
	       k, k, s, planes, h, h, t * 1e3,
	       (double)planes * c.p.oh * c.p.ow / t * 1e-9,
	       (double)planes * c.p.oh * c.p.ow / last_cpu * 1e-9);
	mi_cpu_free(c.x), mi_cpu_free(c.y), mi_cpu_free(c.ws);
}

int main(int argc, char **argv)
{
	int nt = 1, opt, isa = mi_cpu_isa();
	const char *filter = NULL;

	while ((opt = getopt(argc, argv, "t:r:f:i:R")) != -1) {
		switch (opt) {
		case 'i':
			for (int i = 0; i < MI_ISA_COUNT; i++)
				if (!strcmp(optarg, mi_cpu_isa_name(i)) &&
				    i <= mi_cpu_isa())
					isa = i;
			break;
		case 'R':
			with_res = 1;
			break;
		case 't':
			nt = atoi(optarg);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'f':
			filter = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: mi-cpu-bench [-t THREADS] [-r REPS] [-R] [-f gemm|resnet50|resnet18|squeezenet|pool|mobilenetv2] [-i ISA]\n");
			return 2;
		}
	}
	if (reps < 1)
		reps = 1;
	printf("mi-cpu-bench: isa=%s threads=%d reps=%d (best run; cpu: median CPU time)\n",
	       mi_cpu_isa_name(isa), nt, reps);
	if (!filter || strstr("gemm", filter)) {
		bench_gemm(isa, nt, 256, 256, 256, 1);
		bench_gemm(isa, nt, 512, 512, 512, 1);
		bench_gemm(isa, nt, 1024, 1024, 1024, 1);
		bench_gemm(isa, nt, 1024, 1024, 1024, 0);
		bench_gemm(isa, nt, 64, 3136, 576, 1);
		/* the GEMMs of im2col 3x3 on 14x14 / 7x7 maps */
		bench_gemm(isa, nt, 256, 196, 2304, 1);
		bench_gemm(isa, nt, 512, 49, 4608, 1);
	}
	if (!filter || strstr("resnet50", filter)) {
		bench_conv(isa, nt, "resnet50", 3, 224, 64, 7, 2, 1);
		bench_conv(isa, nt, "resnet50", 64, 56, 64, 1, 1, 1);
		bench_conv(isa, nt, "resnet50", 64, 56, 64, 3, 1, 1);
		bench_conv(isa, nt, "resnet50", 64, 56, 256, 1, 1, 1);
		bench_conv(isa, nt, "resnet50", 128, 28, 128, 3, 1, 1);
		bench_conv(isa, nt, "resnet50", 128, 28, 512, 1, 1, 1);
		bench_conv(isa, nt, "resnet50", 256, 14, 256, 3, 1, 1);
		bench_conv(isa, nt, "resnet50", 256, 14, 1024, 1, 1, 1);
		bench_conv(isa, nt, "resnet50", 512, 7, 512, 3, 1, 1);
		bench_conv(isa, nt, "resnet50", 512, 7, 2048, 1, 1, 1);
	}
	if (filter && !strcmp(filter, "stem")) /* 7x7 s2 im2col alone */
		bench_conv(isa, nt, "resnet50", 3, 224, 64, 7, 2, 1);
	if (!filter || strstr("resnet18", filter)) {
		bench_conv(isa, nt, "resnet18", 64, 56, 128, 3, 2, 1);
		bench_conv(isa, nt, "resnet18", 128, 28, 256, 3, 2, 1);
		bench_conv(isa, nt, "resnet18", 256, 14, 256, 3, 1, 1);
		bench_conv(isa, nt, "resnet18", 256, 14, 512, 3, 2, 1);
		bench_conv(isa, nt, "resnet18", 512, 7, 512, 3, 1, 1);
	}
	if (!filter || strstr("squeezenet", filter)) {
		bench_conv(isa, nt, "squeezenet", 3, 224, 64, 3, 2, 1);
		bench_conv(isa, nt, "squeezenet", 128, 55, 16, 1, 1, 1);
		bench_conv(isa, nt, "squeezenet", 16, 55, 64, 3, 1, 1);
		bench_conv(isa, nt, "squeezenet", 32, 27, 128, 3, 1, 1);
		bench_conv(isa, nt, "squeezenet", 64, 13, 256, 3, 1, 1);
		bench_conv(isa, nt, "squeezenet", 512, 13, 1000, 1, 1, 1);
	}
	if (!filter || strstr("pool", filter)) {
		bench_pool(isa, 64, 111, 3, 2);
		bench_pool(isa, 128, 55, 3, 2);
		bench_pool(isa, 256, 27, 3, 2);
		bench_pool(isa, 64, 112, 3, 2);
	}
	if (!filter || strstr("mobilenetv2", filter)) {
		bench_conv(isa, nt, "mobilenetv2", 3, 224, 32, 3, 2, 1);
		bench_conv(isa, nt, "mobilenetv2", 32, 112, 32, 3, 1, 32);
		bench_conv(isa, nt, "mobilenetv2", 96, 112, 96, 3, 2, 96);
		bench_conv(isa, nt, "mobilenetv2", 144, 56, 144, 3, 1, 144);
		bench_conv(isa, nt, "mobilenetv2", 24, 56, 144, 1, 1, 1);
		bench_conv(isa, nt, "mobilenetv2", 144, 56, 24, 1, 1, 1);
		bench_conv(isa, nt, "mobilenetv2", 384, 14, 64, 1, 1, 1);
		bench_conv(isa, nt, "mobilenetv2", 960, 7, 320, 1, 1, 1);
		bench_conv(isa, nt, "mobilenetv2", 320, 7, 1280, 1, 1, 1);
	}
	return 0;
}
