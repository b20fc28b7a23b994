// SPDX-License-Identifier: MIT
/*
 * int8 conv kernel micro-benchmark: ResNet/MobileNet layer shapes on every
 * ISA path, 1 thread, uint8 output.  Prints milliseconds per call (thread
 * CPU time, so other load on the machine matters less) and GMAC/s.
 *
 *   build/lib/quant/tests/bench-qconv [seconds-per-shape [isa]]
 *
 * isa: generic|avx2|avx512|amx runs that path only (avx512: VNNI tiles,
 * amx: AMX tiles where the CPU has them).  --w7: 7-bit weights (in
 * [-64, 63]: tile_avx2b on AVX2).  Shapes marked c4 read and
 * write the C4 layout, as the planner chains int8 convs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant/quant.h"

static int w7; /* --w7: weights in [-64, 63] (tile_avx2b on AVX2) */

static int wget(const void *ctx, int g, int o, int k)
{
	return w7 ? ((o * 7 + k * 13 + g) % 128) - 64 : ((o * 7 + k * 13 + g) % 255) - 127;
}

static double cpu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/*
 * --split NT: the split for nt threads, measured on one core: the
 * items run in order, each timed (thread CPU time), then are handed out
 * as lib/quant's pool does (qplan.c pool_for, one item a claim): thread t
 * owns the t-th contiguous range, then takes from the ranges after its
 * own, the thread free first claiming first.  A call's time is the sum
 * over its parallel loops of the slowest thread's.  Alternated call by
 * call between the splits as before (MI_QUANT_WSPLIT=0 and
 * MI_QUANT_CHUNK8=0) and now (=1): the fastest call of each.
 */
static int split_nt;
static double split_ms, split_sum;
static double item_cost[1 << 16];

static void timed_for(int n, mi_qpar_fn fn, void *arg)
{
	double fin[64] = { 0 }, worst = 0;
	int next[64], end[64];

	for (int i = 0; i < n; i++) {
		double t0 = cpu_now();

		fn(arg, i, 0);
		item_cost[i < (1 << 16) ? i : 0] = cpu_now() - t0;
		split_sum += item_cost[i < (1 << 16) ? i : 0];
	}
	for (int t = 0; t < split_nt; t++) {
		next[t] = (int)((int64_t)n * t / split_nt);
		end[t] = (int)((int64_t)n * (t + 1) / split_nt);
	}
	for (int done = 0; done < n && n <= (1 << 16); done++) {
		int t = 0, u = -1;

		for (int k = 1; k < split_nt; k++)
			if (fin[k] < fin[t])
				t = k;
		for (int k = 0; k < split_nt && u < 0; k++)
			if (next[(t + k) % split_nt] < end[(t + k) % split_nt])
				u = (t + k) % split_nt;
		fin[t] += item_cost[next[u]++];
		worst = fin[t] > worst ? fin[t] : worst;
	}
	split_ms += worst * 1e3;
}

int main(int argc, char **argv)
{
	static const struct { int c, hw, oc, k, s, g, c4; } L[] = {
		{ 64, 56, 64, 3, 1, 1, 0 },   { 128, 28, 128, 3, 1, 1, 0 },
		{ 256, 14, 256, 3, 1, 1, 0 }, { 512, 7, 512, 3, 1, 1, 0 },
		{ 64, 56, 256, 1, 1, 1, 0 },  { 256, 56, 64, 1, 1, 1, 0 },
		{ 96, 112, 96, 3, 2, 96, 0 }, { 144, 56, 144, 3, 1, 144, 0 },
		{ 3, 224, 64, 7, 2, 1, 0 },
		/* mobile nets: narrow 1x1 and small 3x3, C4 in and out */
		{ 16, 112, 96, 1, 1, 1, 1 }, { 96, 56, 24, 1, 1, 1, 1 },
		{ 32, 28, 192, 1, 1, 1, 1 }, { 16, 55, 64, 3, 1, 1, 1 },
		{ 3, 224, 64, 3, 2, 1, 0 },
		/* 1x1 convs of the bottlenecks and inverted residuals, C4 */
		{ 64, 56, 256, 1, 1, 1, 1 },  { 256, 56, 64, 1, 1, 1, 1 },
		{ 1024, 14, 256, 1, 1, 1, 1 }, { 256, 14, 1024, 1, 1, 1, 1 },
		{ 2048, 7, 512, 1, 1, 1, 1 }, { 512, 7, 2048, 1, 1, 1, 1 },
		{ 24, 56, 144, 1, 1, 1, 1 },  { 144, 56, 24, 1, 1, 1, 1 },
		{ 64, 14, 384, 1, 1, 1, 1 },  { 384, 14, 64, 1, 1, 1, 1 },
		{ 160, 7, 960, 1, 1, 1, 1 },  { 960, 7, 160, 1, 1, 1, 1 },
		{ 64, 56, 64, 3, 1, 1, 1 },   { 256, 14, 256, 3, 1, 1, 1 },
		{ 512, 7, 512, 3, 1, 1, 1 },  { 128, 56, 128, 3, 2, 1, 1 },
		{ 256, 56, 512, 1, 2, 1, 1 }, { 1024, 14, 2048, 1, 2, 1, 1 },
		/* ... and their stride-1 twins (same output map and K) */
		{ 256, 28, 512, 1, 1, 1, 1 }, { 1024, 7, 2048, 1, 1, 1, 1 },
		{ 512, 28, 1024, 1, 2, 1, 1 }, { 512, 14, 1024, 1, 1, 1, 1 },
		/* depthwise (mobile nets), C4 output */
		{ 576, 7, 576, 5, 1, 576, 1 },	{ 576, 14, 576, 5, 2, 576, 1 },
		{ 240, 14, 240, 5, 1, 240, 1 }, { 672, 14, 672, 5, 1, 672, 1 },
		{ 960, 7, 960, 3, 1, 960, 1 },	{ 576, 14, 576, 3, 1, 576, 1 },
		{ 144, 56, 144, 3, 2, 144, 1 }, { 144, 56, 144, 3, 1, 144, 1 },
		{ 32, 112, 32, 3, 1, 32, 1 },	{ 96, 112, 96, 3, 2, 96, 1 },
		{ 16, 112, 16, 3, 2, 16, 1 },	{ 96, 28, 96, 5, 2, 96, 1 },
		/* first convs of the mobile nets: planar input, C4 output (c4 2) */
		{ 3, 224, 16, 3, 2, 1, 2 },	{ 3, 224, 32, 3, 2, 1, 2 },
	};
	/* bench-qconv [SECS [ISA]] [--shape c,hw,oc,k,s,g,c4[,pad]] [--w7]
	 * [--split NT] [--dw 1|C]: --shape that shape only (pad: default
	 * k / 2); --dw depthwise shapes only, or those with C input channels */
	const char *pos[2] = { NULL, NULL }, *bsh = NULL, *dwf = NULL;
	int bs[8] = { 0, 0, 0, 0, 0, 0, 0, -1 }, npos = 0;

	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--w7"))
			w7 = 1;
		else if (!strcmp(argv[a], "--shape") && a + 1 < argc)
			bsh = argv[++a];
		else if (!strcmp(argv[a], "--split") && a + 1 < argc)
			split_nt = atoi(argv[++a]);
		else if (!strcmp(argv[a], "--dw") && a + 1 < argc)
			dwf = argv[++a];
		else if (argv[a][0] != '-' && npos < 2)
			pos[npos++] = argv[a];
		else {
			fprintf(stderr, "bench-qconv: unknown argument '%s'\n", argv[a]);
			return 2;
		}
	}
	double secs = pos[0] ? atof(pos[0]) : 0.3;

	if (bsh && sscanf(bsh, "%d,%d,%d,%d,%d,%d,%d,%d", &bs[0], &bs[1], &bs[2], &bs[3],
			  &bs[4], &bs[5], &bs[6], &bs[7]) < 7) {
		fprintf(stderr, "bench-qconv: --shape c,hw,oc,k,s,g,c4[,pad]\n");
		return 1;
	}
	split_nt = split_nt < 2 ? 0 : split_nt > 64 ? 64 : split_nt;
	if (split_nt)
		mi_quant_set_parallel(timed_for, split_nt);
	int only = -1;

	if (pos[1])
		only = !strcmp(pos[1], "generic") ? MI_QISA_GENERIC :
		       !strcmp(pos[1], "avx2")	  ? MI_QISA_AVX2 :
		       !strcmp(pos[1], "avx512")  ? MI_QISA_AVX512 :
						    MI_QISA_AVX512 + 1;
	if (split_nt)
		printf("%-11s %-26s %10s %10s %6s %10s %10s\n", "isa", "layer", "ms split0",
		       "ms split1", "ratio", "sum0", "sum1");
	else
		printf("%-11s %-26s %10s %10s\n", "isa", "layer", "ms", "GMAC/s");
	/* path MI_QISA_AVX512 + 1: AVX-512 with the AMX tiles */
	for (int path = MI_QISA_GENERIC; path <= MI_QISA_AVX512 + 1; path++) {
		int isa = path > MI_QISA_AVX512 ? MI_QISA_AVX512 : path;

		if ((only >= 0 && path != only) || isa > mi_quant_isa_max() ||
		    (path > MI_QISA_AVX512 && !mi_quant_set_amx(1)))
			continue;
		mi_quant_set_isa(isa);
		mi_quant_set_amx(path > MI_QISA_AVX512);
		for (size_t i = 0; i < (bsh ? 1 : sizeof(L) / sizeof(L[0])); i++) {
			if (dwf && ((L[i].g == 1 && atoi(dwf) != L[i].c) ||
				    (atoi(dwf) > 1 && atoi(dwf) != L[i].c)))
				continue;
			struct { int c, hw, oc, k, s, g, c4; } l = { L[i].c, L[i].hw, L[i].oc, L[i].k,
								   L[i].s, L[i].g, L[i].c4 };

			if (bsh)
				memcpy(&l, bs, sizeof(l));
			int pad = bsh && bs[7] >= 0 ? bs[7] : l.k / 2;
			struct mi_qconv_shape s = {
				.c = l.c, .h = l.hw, .w = l.hw, .oc = l.oc, .kh = l.k, .kw = l.k,
				.sh = l.s, .sw = l.s, .dh = 1, .dw = 1, .pt = pad, .pl = pad,
				.pb = pad, .pr = pad, .group = l.g,
			};
			struct mi_qconv cv;

			s.oh = (s.h + 2 * s.pt - s.kh) / s.sh + 1;
			s.ow = s.oh;
			if (mi_qconv_init(&cv, &s, wget, NULL)) {
				fprintf(stderr, "bench-qconv: bad shape\n");
				return 1;
			}
			uint8_t *x = malloc((size_t)s.c * s.h * s.w);
			uint8_t *y = malloc((size_t)s.oc * s.oh * s.ow);
			int32_t *comp = calloc(s.oc, 4);
			float *mult = malloc(s.oc * 4);
			size_t wsb = mi_qconv_workspace(&cv);
			void *ws;
			struct mi_qepi ep = { .mode = MI_QOUT_U8, .comp = comp, .mult = mult,
					      .flo = 0, .fhi = 255, .out_c4 = l.c4 };
			unsigned int fl = l.c4 == 1 && l.g == 1 ? MI_QCONV_IN_C4 : 0;

			ws = aligned_alloc(64, (wsb + 63) & ~(size_t)63);
			memset(x, 3, (size_t)s.c * s.h * s.w);
			for (int o = 0; o < s.oc; o++)
				mult[o] = 0.001f;
			mi_qconv_run(&cv, x, false, 3, &ep, y, ws, fl);
			int it = 0;
			double t0 = cpu_now(), t = t0, best[2] = { 1e9, 1e9 };

			double one = 1e9;

			double one1 = 1e9;

			while (split_nt && (it < 3 || cpu_now() - t0 < secs)) {
				for (int v = 0; v <= 1; v++) {
					mi_quant_set_wsplit(v);
					split_ms = split_sum = 0;
					mi_qconv_run(&cv, x, false, 3, &ep, y, ws, fl);
					best[v] = split_ms < best[v] ? split_ms : best[v];
					one = !v && split_sum < one ? split_sum : one;
					one1 = v && split_sum < one1 ? split_sum : one1;
				}
				it++;
			}
			do {
				if (split_nt)
					break;
				mi_qconv_run(&cv, x, false, 3, &ep, y, ws, fl);
				it++;
				t = cpu_now();
			} while (t - t0 < secs);
			double macs = (double)s.oc * s.oh * s.ow * (s.c / s.group) * s.kh * s.kw;
			char name[64];

			snprintf(name, sizeof(name), "c%d %dx%d oc%d k%d s%d g%d%s", s.c, s.h, s.w,
				 s.oc, s.kh, s.sh, s.group, l.c4 ? " c4" : "");
			if (split_nt)
				printf("%-11s %-26s %10.3f %10.3f %6.3f %10.3f %10.3f\n",
				       mi_quant_isa_name(isa), name, best[0], best[1], best[1] / best[0],
				       one * 1e3, one1 * 1e3);
			else
				printf("%-11s %-26s %10.3f %10.1f\n",
				       path > MI_QISA_AVX512 ? "amx" : mi_quant_isa_name(isa), name,
				       (t - t0) / it * 1e3, macs * it / (t - t0) / 1e9);
			mi_qconv_fini(&cv);
			free(x);
			free(y);
			free(comp);
			free(mult);
			free(ws);
		}
	}
	return 0;
}
