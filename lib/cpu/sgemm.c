// SPDX-License-Identifier: MIT
/*
 * SGEMM driver: BLIS-style loops around the per-ISA micro-kernel.
 *
 *   for jc in N step NC            (thread's column range)
 *     for pc in K step KC          pack B(kc x nc) -> NR-wide panels
 *                                  (KC_NARROW when N is narrow)
 *       for ic in M step MC        pack A(mc x kc) -> MR-high panels
 *         for ir in mc step MR
 *           for jr in nc step NR   micro-kernel, epilogue on the last pc
 *
 * A pre-packed operand (weights) holds panels over the whole K, so its
 * KC slice is a pointer offset and its packing loop disappears.
 * Threads claim ranges of N in units of NR (each packs its own B
 * blocks), or of M in units of MR when N has too few panels; then a
 * B that needs packing is packed once, in parallel, over the whole K
 * (shared), so no thread repeats another's packing.  Ranges are claimed
 * dynamically (struct mi_work): a thread that starts late does less.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

#ifndef KC
#define KC 256
#endif
#define KC_NARROW 1024
#define MC_PANELS 32 /* MC = 32 * MR */
#ifndef NC_PANELS
#define NC_PANELS 16 /* NC = 16 * NR: KC x NC of B stays in L2 */
#endif

static inline int64_t rup(int64_t a, int64_t b)
{
	return (a + b - 1) / b * b;
}

static int pack_alloc(int isa, int64_t rows, int64_t k, int r,
		      struct mi_packed *out)
{
	size_t n = (size_t)rup(rows, r) * (size_t)(k > 0 ? k : 1);

	out->isa = isa;
	out->rows = rows;
	out->k = k;
	out->data = mi_cpu_alloc(n * sizeof(float));
	if (!out->data)
		return -ENOMEM;
	return 0;
}

static inline void copy_lanes(float *d, const float *s, int r)
{
	/* constant sizes become a few vector moves */
	switch (r) {
	case 64:
		memcpy(d, s, 64 * sizeof(float));
		break;
	case 16:
		memcpy(d, s, 16 * sizeof(float));
		break;
	case 8:
		memcpy(d, s, 8 * sizeof(float));
		break;
	default:
		memcpy(d, s, r * sizeof(float));
	}
}

/* Lanes contiguous in the source (row-major B): walk it row by row,
 * scattering each row over the panels, so the reads are sequential. */
static void pack_rows(float *dst, int64_t row0, int64_t nrows, int64_t k0,
		      int64_t kk, int r, const float *src, ptrdiff_t rs_k)
{
	int64_t full = nrows / r, p, s;
	int tail = (int)(nrows % r), l;

	for (s = 0; s < kk; s++) {
		const float *sp = src + row0 + (k0 + s) * rs_k;
		float *d = dst + s * r;

		for (p = 0; p < full; p++)
			copy_lanes(d + p * kk * r, sp + p * r, r);
		if (tail) {
			float *dt = d + full * kk * r;

			memcpy(dt, sp + full * r, tail * sizeof(float));
			for (l = tail; l < r; l++)
				dt[l] = 0.0f;
		}
	}
}

/* dst: panels of r lanes over kk = k1-k0 steps; lane l, step s at
 * dst[p*kk*r + s*r + l] = src(row0 + p*r + l, k0 + s). */
static void pack_panels(float *dst, int64_t row0, int64_t nrows, int64_t k0,
			int64_t kk, int r, const float *src, ptrdiff_t rs_row,
			ptrdiff_t rs_k)
{
	int64_t p, s;
	int l;

	if (rs_row == 1) {
		pack_rows(dst, row0, nrows, k0, kk, r, src, rs_k);
		return;
	}
	for (p = 0; p * r < nrows; p++) {
		float *d = dst + p * kk * r;
		int lanes = nrows - p * r < r ? (int)(nrows - p * r) : r;
		const float *base = src + (row0 + p * r) * rs_row + k0 * rs_k;

		for (l = 0; l < lanes; l++) {
			const float *sp = base + l * rs_row;

			for (s = 0; s < kk; s++)
				d[s * r + l] = sp[s * rs_k];
		}
		for (; l < r; l++)
			for (s = 0; s < kk; s++)
				d[s * r + l] = 0.0f;
	}
}

int mi_sgemm_pack_a(int isa, int64_t m, int64_t k, const float *a,
		    ptrdiff_t rs, ptrdiff_t cs, struct mi_packed *out)
{
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(isa);
	int err = pack_alloc(isa, m, k, kt->mr, out);

	if (err)
		return err;
	pack_panels(out->data, 0, m, 0, k, kt->mr, a, rs, cs);
	return 0;
}

int mi_sgemm_pack_b(int isa, int64_t k, int64_t n, const float *b,
		    ptrdiff_t rs, ptrdiff_t cs, struct mi_packed *out)
{
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(isa);
	int err = pack_alloc(isa, n, k, kt->nr, out);

	if (err)
		return err;
	pack_panels(out->data, 0, n, 0, k, kt->nr, b, cs, rs);
	return 0;
}

void mi_packed_free(struct mi_packed *p)
{
	if (!p)
		return;
	mi_cpu_free(p->data);
	p->data = NULL;
}

/*
 * Row-major B needs no packing: the micro-kernel reads its rows in
 * place.  Not when the row stride is a multiple of 4 KiB (every row
 * would land in the same L1 set), nor when many micro-panels of A run
 * over a B of few panels: each of them rereads kc rows scattered over
 * as many pages, which a packed copy (read once, then contiguous) beats
 * (1x1 convs with 1024/2048 outputs on 14x14/7x7 maps: 1.25 -> 0.9 ms,
 * build/mi-cpu-bench -f resnet50).
 */
static bool use_direct_b(const struct mi_sgemm_args *a,
			 const struct mi_cpu_kern *kt)
{
	int64_t ntiles = (a->n + kt->nr - 1) / kt->nr;
	int64_t mtiles = (a->m + kt->mr - 1) / kt->mr;

	return !a->pb && !a->packb && a->b_cs == 1 &&
	       (a->b_rs * sizeof(float)) % 4096 != 0 &&
	       (mtiles <= 32 || ntiles > 16);
}

struct split {
	int nt;      /* threads used */
	int over_n;  /* 1: split N, 0: split M */
	int shared_b; /* split M: B packed once over the whole K first */
	int64_t mc, nc;
	int64_t kc;    /* K block */
	int64_t grain; /* units (NR or MR panels) per claimed range */
};

/* Shared packed B above this many bytes: repack per thread instead. */
#define SHARED_B_MAX (8u << 20)

static struct split plan_split(const struct mi_sgemm_args *a,
			       const struct mi_cpu_kern *kt)
{
	struct split s;
	int64_t ntiles = (a->n + kt->nr - 1) / kt->nr;
	int64_t mtiles = (a->m + kt->mr - 1) / kt->mr;
	int nt = a->nthreads > 0 ? a->nthreads : 1;
	bool direct_b = use_direct_b(a, kt);

	s.mc = (int64_t)MC_PANELS * kt->mr;
	s.nc = (int64_t)NC_PANELS * kt->nr;
	/* blocks no larger than the problem (workspace sizes) */
	if (s.mc > mtiles * kt->mr)
		s.mc = mtiles * kt->mr;
	if (s.nc > ntiles * kt->nr)
		s.nc = ntiles * kt->nr;
	/*
	 * Narrow N (<= 4 panels: 3x3 and 1x1 convs on 14x14 / 7x7 maps)
	 * reuses each pre-packed A micro-panel only a few times, so A
	 * streams from L3/memory: longer K blocks read it in longer
	 * sequential runs and store C less often (512x49x4608: 76 -> 100+
	 * GFLOP/s, 256x196x2304: 80 -> 115, build/mi-cpu-bench -f gemm).
	 */
	s.kc = a->pa && ntiles <= 4 ? KC_NARROW : KC;
	s.shared_b = 0;
	/* Tiny problems are not worth waking a thread for. */
	if ((double)a->m * a->n * a->k < 64.0 * 1024)
		nt = 1;
	/*
	 * Split N while it has a few panels per thread (each thread packs
	 * only its own B; a ragged last panel costs little); else M, in
	 * finer MR units.  N is also kept when M has fewer panels.
	 */
	s.over_n = nt == 1 || ntiles >= 3 * nt || ntiles >= mtiles;
	/*
	 * Pre-packed B (constant weights: MatMul/Gemm) and A packed per
	 * call (the activations): a thread that splits N packs all of A
	 * once per claimed range (the Transformer's 64 x 512 by 512 x 128:
	 * 4 ranges, A packed 4 times), one that splits M packs only its own
	 * rows and reads B as it is.  So such GEMMs split M while it has
	 * two panels per thread (2 threads, CPU minima: its linear1/2
	 * MatMuls 66-72 -> 57-58 us, QKV 48 -> 44).
	 */
	if (nt > 1 && a->pb && !a->pa && mtiles >= 2 * nt)
		s.over_n = 0;
	if (s.over_n) {
		if (nt > ntiles)
			nt = (int)ntiles;
		/* ~3 ranges per thread, at most one NC block each */
		s.grain = mi_work_grain(ntiles, nt, 3);
		if (s.grain > NC_PANELS)
			s.grain = NC_PANELS;
	} else {
		if (nt > mtiles)
			nt = (int)mtiles;
		s.grain = mi_work_grain(mtiles, nt, 4);
		if (s.grain > MC_PANELS)
			s.grain = MC_PANELS;
		s.shared_b = nt > 1 && !a->pb && !direct_b &&
			     (uint64_t)a->k * ntiles * kt->nr * sizeof(float) <=
				     SHARED_B_MAX;
		if (nt > 1 && !a->pb && !direct_b && !s.shared_b) {
			/* every range repacks all of B: one per thread */
			s.grain = (mtiles + nt - 1) / nt;
		}
	}
	s.nt = nt < 1 ? 1 : nt;
	if (s.nt == 1)
		s.grain = s.over_n ? ntiles : mtiles;
	return s;
}

static size_t shared_b_bytes(const struct mi_sgemm_args *a,
			     const struct mi_cpu_kern *kt,
			     const struct split *s)
{
	return s->shared_b ? rup((int64_t)a->k * rup(a->n, kt->nr) *
					 sizeof(float),
				 64) :
			     0;
}

static size_t ws_per_thread(const struct mi_sgemm_args *a,
			    const struct mi_cpu_kern *kt,
			    const struct split *s)
{
	size_t bytes = 0;
	int64_t kc = a->k < s->kc ? a->k : s->kc;

	if (kc < 1)
		kc = 1;
	if (!a->pb)
		bytes += rup(kc * rup(s->nc, kt->nr) * sizeof(float), 64);
	if (!a->pa)
		bytes += rup(kc * rup(s->mc, kt->mr) * sizeof(float), 64);
	return bytes;
}

size_t mi_sgemm_ws_size(const struct mi_sgemm_args *a)
{
	const struct mi_cpu_kern *kt = mi_cpu_kern_get(a->isa);
	struct split s = plan_split(a, kt);

	return shared_b_bytes(a, kt, &s) + ws_per_thread(a, kt, &s) * s.nt;
}

struct job {
	const struct mi_sgemm_args *a;
	const struct mi_cpu_kern *kt;
	struct split s;
	char *ws;
	size_t ws_thread;
	bool has_epi;
	bool direct_b; /* row-major B read in place, not packed */
	struct mi_work work;
	/* shared B packing: tasks of (panel, KC slice) */
	float *sb;
	int64_t kslices;
};

static void gemm_range(const struct job *j, int64_t m0, int64_t m1,
		       int64_t n0, int64_t n1, float *wsb, float *wsa)
{
	const struct mi_sgemm_args *a = j->a;
	const struct mi_cpu_kern *kt = j->kt;
	const int mr = kt->mr, nr = kt->nr;
	int64_t jc, pc, ic, jr, ir;

	for (jc = n0; jc < n1; jc += j->s.nc) {
		int64_t nc = n1 - jc < j->s.nc ? n1 - jc : j->s.nc;

		for (pc = 0; pc < a->k; pc += j->s.kc) {
			int kc = a->k - pc < j->s.kc ? (int)(a->k - pc) :
						       (int)j->s.kc;
			const struct mi_epi *epi =
				pc + kc >= a->k && j->has_epi ? &a->epi : NULL;
			const float *bp;
			int64_t bstride, nfull = nc;
			ptrdiff_t ldb = nr;

			if (a->pb) {
				bp = a->pb->data + (jc / nr) * a->k * nr +
				     pc * nr;
				bstride = a->k * nr;
			} else if (j->direct_b) {
				/* full panels read in place; the ragged last
				 * one is packed (reading it whole would run
				 * past the row) */
				bp = a->b + pc * a->b_rs + jc;
				bstride = nr;
				ldb = a->b_rs;
				nfull = nc / nr * nr;
				if (nfull < nc)
					pack_panels(wsb, jc + nfull, nc - nfull,
						    pc, kc, nr, a->b, a->b_cs,
						    a->b_rs);
			} else {
				if (a->packb)
					a->packb(a->packb_ctx, pc, kc, jc,
						 (int)nc, nr, wsb);
				else
					pack_panels(wsb, jc, nc, pc, kc, nr,
						    a->b, a->b_cs, a->b_rs);
				bp = wsb;
				bstride = (int64_t)kc * nr;
			}
			for (ic = m0; ic < m1; ic += j->s.mc) {
				int64_t mc = m1 - ic < j->s.mc ? m1 - ic :
								 j->s.mc;
				const float *ap;
				int64_t astride;

				if (a->pa) {
					ap = a->pa->data +
					     (ic / mr) * a->k * mr + pc * mr;
					astride = a->k * mr;
				} else {
					pack_panels(wsa, ic, mc, pc, kc, mr,
						    a->a, a->a_rs, a->a_cs);
					ap = wsa;
					astride = (int64_t)kc * mr;
				}
				/* A micro-panel (MR x kc) stays in L1 while
				 * the B block streams from L2 */
				for (ir = 0; ir < mc; ir += mr) {
					int mrr = mc - ir < mr ? (int)(mc - ir) :
								 mr;
					const float *ai =
						ap + (ir / mr) * astride;

					for (jr = 0; jr < nc; jr += nr) {
						int nrr = nc - jr < nr ?
								  (int)(nc - jr) :
								  nr;
						const float *bj =
							jr < nfull ?
								bp + (jr / nr) * bstride :
								wsb;

						kt->ukr(kc, ai, bj,
							jr < nfull ? ldb : nr,
							a->c + (ic + ir) * a->ldc +
								jc + jr,
							a->ldc, mrr, nrr, pc > 0,
							epi, ic + ir, jc + jr);
					}
				}
			}
		}
	}
}

static void gemm_thread(void *ctx, int t, int nt)
{
	struct job *j = ctx;
	const struct mi_sgemm_args *a = j->a;
	char *ws = j->ws + j->ws_thread * t;
	size_t bbytes = 0;
	float *wsb = NULL, *wsa = NULL;
	int64_t b, e, unit;

	if (!a->pb) {
		int64_t kc = a->k < j->s.kc ? a->k : j->s.kc;

		wsb = (float *)ws;
		bbytes = rup((kc < 1 ? 1 : kc) * rup(j->s.nc, j->kt->nr) *
				     sizeof(float),
			     64);
	}
	if (!a->pa)
		wsa = (float *)(ws + bbytes);

	unit = j->s.over_n ? j->kt->nr : j->kt->mr;
	while (mi_work_claim(&j->work, &b, &e)) {
		b *= unit;
		e *= unit;
		if (j->s.over_n) {
			if (e > a->n)
				e = a->n;
			gemm_range(j, 0, a->m, b, e, wsb, wsa);
		} else {
			if (e > a->m)
				e = a->m;
			gemm_range(j, b, e, 0, a->n, wsb, wsa);
		}
	}
}

/* Shared B: task i packs panel i / kslices, K slice i % kslices. */
static void packb_thread(void *ctx, int t, int nt)
{
	struct job *j = ctx;
	const struct mi_sgemm_args *a = j->a;
	const int nr = j->kt->nr;
	int64_t b, e, i;

	while (mi_work_claim(&j->work, &b, &e))
		for (i = b; i < e; i++) {
			int64_t p = i / j->kslices, k0 = i % j->kslices * KC;
			int kc = a->k - k0 < KC ? (int)(a->k - k0) : KC;
			int64_t n0 = p * nr;
			int nc = a->n - n0 < nr ? (int)(a->n - n0) : nr;
			float *dst = j->sb + p * a->k * nr + k0 * nr;

			if (a->packb)
				a->packb(a->packb_ctx, k0, kc, n0, nc, nr, dst);
			else
				pack_panels(dst, n0, nc, k0, kc, nr, a->b,
					    a->b_cs, a->b_rs);
		}
}

void mi_sgemm(const struct mi_sgemm_args *a, void *ws)
{
	struct job j;

	if (a->m <= 0 || a->n <= 0)
		return;
	j.a = a;
	j.kt = mi_cpu_kern_get(a->isa);
	if (a->k <= 0) {
		/* C = epilogue(0) */
		static const float zero[16];
		int64_t i, c;

		for (i = 0; i < a->m; i++)
			for (c = 0; c < a->n; c++)
				a->c[i * a->ldc + c] =
					mi_epi_scalar(&a->epi, zero[0], i, c);
		return;
	}
	j.has_epi = a->epi.bias_kind != MI_BIAS_NONE || a->epi.res ||
		    a->epi.act != MI_ACT_NONE;
	j.s = plan_split(a, j.kt);
	j.direct_b = use_direct_b(a, j.kt);
	j.ws = ws;
	j.ws_thread = ws_per_thread(a, j.kt, &j.s);
	if (j.s.shared_b) {
		/* pack B once (in parallel), then split M over it */
		struct mi_sgemm_args a2 = *a;
		struct mi_packed pb = {
			.isa = a->isa, .rows = a->n, .k = a->k,
		};
		int64_t tasks;

		j.sb = (float *)ws;
		j.ws = (char *)ws + shared_b_bytes(a, j.kt, &j.s);
		j.kslices = (a->k + KC - 1) / KC;
		tasks = (a->n + j.kt->nr - 1) / j.kt->nr * j.kslices;
		mi_work_init(&j.work, tasks, mi_work_grain(tasks, j.s.nt, 2));
		mi_pool_run(tasks < j.s.nt ? (int)tasks : j.s.nt, packb_thread,
			    &j);
		pb.data = j.sb;
		a2.pb = &pb;
		a2.packb = NULL;
		j.a = &a2;
		j.direct_b = false;
		mi_work_init(&j.work, (a->m + j.kt->mr - 1) / j.kt->mr,
			     j.s.grain);
		mi_pool_run(j.s.nt, gemm_thread, &j);
		return;
	}
	mi_work_init(&j.work,
		     j.s.over_n ? (a->n + j.kt->nr - 1) / j.kt->nr :
				  (a->m + j.kt->mr - 1) / j.kt->mr,
		     j.s.grain);
	mi_pool_run(j.s.nt, gemm_thread, &j);
}
