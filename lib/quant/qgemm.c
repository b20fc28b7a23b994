// SPDX-License-Identifier: MIT
/*
 * int8 GEMM and convolution kernels: uint8 activations x int8 weights,
 * int32 accumulation, fp32 requantization.  See quant.h for the number
 * format.
 *
 * Micro-tile: 8 output channels x 32 pixels.  Weights are packed
 * [block][k4][8 rows][4 k] so that one 32-bit broadcast gives a row's four
 * consecutive k; activations ("B panel") are [k4][32 pixels][4 k] so that
 * one 64-byte load gives 16 pixels x 4 k, exactly vpdpbusd's operands.
 * Convolution input is reordered once to [c/4][H+pads][W+pads][4] so that
 * im2col of a panel is a copy of 4-byte words (memcpy for stride 1) and
 * a 1x1/stride-1 conv needs no im2col at all.  K is ordered
 * (tap, channel quad, channel in quad).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>

#include "quant/quant.h"
#include "quant/qgemm-impl.h"

/* ---- ISA selection ---------------------------------------------------- */

static int isa_max = -1;
static int isa_cur = -1;

int mi_quant_isa_max(void)
{
	if (isa_max < 0) {
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512f") &&
		    __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") &&
		    __builtin_cpu_supports("avx512vnni"))
			isa_max = MI_QISA_AVX512;
		else if (__builtin_cpu_supports("avx2") &&
			 __builtin_cpu_supports("fma"))
			isa_max = MI_QISA_AVX2;
		else
			isa_max = MI_QISA_GENERIC;
	}
	return isa_max;
}

int mi_quant_set_isa(int isa)
{
	int max = mi_quant_isa_max();

	if (isa < MI_QISA_GENERIC)
		isa = MI_QISA_GENERIC;
	isa_cur = isa > max ? max : isa;
	return isa_cur;
}

int mi_quant_isa(void)
{
	/* the best this CPU has until a planner (mi_quant_plan: the model's
	 * ISA cap, as lib/cpu's) or a test sets it */
	if (isa_cur < 0)
		mi_quant_set_isa(MI_QISA_AVX512);
	return isa_cur;
}

/* AVX-512 VBMI (vpermb) for the depthwise rows; tests turn it off to
 * cover the AVX-512 path without it. */
static int vbmi_cur = -1;

int mi_quant_set_vbmi(int on)
{
	__builtin_cpu_init();
	vbmi_cur = on && __builtin_cpu_supports("avx512vbmi");
	return vbmi_cur;
}

bool qg_have_vbmi(void)
{
	if (vbmi_cur < 0)
		mi_quant_set_vbmi(1);
	return vbmi_cur;
}

const char *mi_quant_isa_name(int isa)
{
	switch (isa) {
	case MI_QISA_AVX512:
		return "avx512vnni";
	case MI_QISA_AVX2:
		return "avx2";
	default:
		return "generic";
	}
}

/* ---- parallel-for ------------------------------------------------------- */

static void serial_for(int n, mi_qpar_fn fn, void *arg)
{
	for (int i = 0; i < n; i++)
		fn(arg, i, 0);
}

mi_qparallel_for qg_par_for = serial_for;
int qg_par_threads = 1;

/* Threads the next kernel call will get (0: qg_par_threads); per caller thread. */
__thread int qg_call_threads;

void mi_quant_set_call_threads(int n)
{
	qg_call_threads = n;
}

static __thread int par_align;

void mi_quant_par_align(int items)
{
	par_align = items;
}

int mi_quant_par_align_take(void)
{
	int a = par_align > 0 ? par_align : 1;

	par_align = 0;
	return a;
}

void mi_quant_set_parallel(mi_qparallel_for pf, int nthreads)
{
	qg_par_for = pf ? pf : serial_for;
	qg_par_threads = pf && nthreads > 0 ? nthreads : 1;
}

/* ---- weight packing ----------------------------------------------------- */

/* AMX below k4 = 16 (K < 64, padded to 64 in the tiles) from k4 = 8 with
 * 32+ output channels: bench-qconv c32 28x28 oc192 1x1 0.026 vs 0.028 ms
 * (VNNI); K 16 and 24 were slower on AMX (0.21 vs 0.17, 0.085 vs 0.071
 * ms: the tile store + reload of the sums costs more than the VNNI MACs
 * saved), and so looked 32 -> 16 channels at 112x112 (EfficientNet-B0). */
static bool amx_fits(const struct mi_qweights *w)
{
	return w->nblk >= 2 && (w->k4 >= 16 || (w->k4 >= 8 && w->nblk >= 4));
}

/* w's AVX2 tiles are tile_avx2b's (vpmaddubsw, exact for 7-bit weights) */
bool qg_avx2b_use(const struct mi_qweights *w)
{
	return w->s7;
}

int mi_qweights_pack(struct mi_qweights *w, int group, int ocg, int k,
		     mi_qw_get get, const void *ctx)
{
	int wmin = 0, wmax = 0;

	memset(w, 0, sizeof(*w));
	if (group <= 0 || ocg <= 0 || k <= 0)
		return -EINVAL;
	w->group = group;
	w->ocg = ocg;
	w->k = k;
	w->k4 = (k + 3) / 4;
	w->nblk = (ocg + MI_QMR - 1) / MI_QMR;
	size_t bytes = (size_t)group * w->nblk * w->k4 * MI_QMR * 4;
	w->packed = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	w->wsum = calloc((size_t)group * ocg, sizeof(int32_t));
	if (!w->packed || !w->wsum) {
		mi_qweights_free(w);
		return -ENOMEM;
	}
	memset(w->packed, 0, bytes);
	for (int g = 0; g < group; g++)
		for (int o = 0; o < ocg; o++) {
			int8_t *blk = w->packed +
				      ((size_t)(g * w->nblk + o / MI_QMR) *
				       w->k4 * MI_QMR * 4);
			int r = o % MI_QMR;
			int32_t sum = 0;

			for (int kk = 0; kk < k; kk++) {
				int v = get(ctx, g, o, kk);

				blk[(kk / 4) * MI_QMR * 4 + r * 4 + kk % 4] =
					(int8_t)v;
				sum += v;
				wmin = v < wmin ? v : wmin;
				wmax = v > wmax ? v : wmax;
			}
			w->wsum[g * ocg + o] = sum;
		}
	w->s7 = wmin >= -64 && wmax <= 63;
	if (amx_fits(w) && mi_quant_amx() && mi_qamx_pack(w)) {
		mi_qweights_free(w);
		return -ENOMEM;
	}
	/* the int16 weights, unless tile_avx2b takes the int8 ones */
	if ((mi_quant_isa_max() == MI_QISA_AVX2 || mi_quant_isa() == MI_QISA_AVX2) &&
	    !qg_avx2b_use(w)) {
		size_t n = bytes / 4;

		w->w16 = aligned_alloc(64, (bytes * 2 + 63) & ~(size_t)63);
		if (!w->w16) {
			mi_qweights_free(w);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++) {
			const int8_t *q = w->packed + i * 4;
			int16_t *d = w->w16 + i * 4;

			d[0] = q[0];
			d[1] = q[2];
			d[2] = q[1];
			d[3] = q[3];
		}
	}
	return 0;
}

void mi_qweights_free(struct mi_qweights *w)
{
	free(w->packed);
	free(w->wsum);
	free(w->amx);
	free(w->w16);
	memset(w, 0, sizeof(*w));
}

/* qg_kernels_for, for the convs' panels: on AVX2 the panel split once per
 * item (split_panel_avx2), not per output block and step */
struct kernels qg_conv_kernels(int isa, const struct mi_qweights *w)
{
	struct kernels k = qg_kernels_for(isa, w);

	if (isa == MI_QISA_AVX2 && k.w16 && k.tile == tile_avx2w) {
		k.tile = tile_avx2s;
		k.tile_rq = k.tile_rq ? tile_avx2s_rq : NULL;
		k.split = true;
	}
	return k;
}

struct kernels qg_kernels_for(int isa, const struct mi_qweights *w)
{
	switch (isa) {
	case MI_QISA_AVX512:
		return (struct kernels){ tile_vnni, epi_avx512, tile_vnni_rq, false, false };
	case MI_QISA_AVX2:
		if (qg_avx2b_use(w))
			return (struct kernels){ tile_avx2b, epi_avx2, tile_avx2b_rq, false, false };
		if (w->w16)
			return (struct kernels){ tile_avx2w, epi_avx2, tile_avx2w_rq, true, false };
		return (struct kernels){ tile_avx2, epi_avx2, NULL, false, false };
	default:
		return (struct kernels){ tile_generic, epi_generic, NULL, false, false };
	}
}

size_t qg_out_elem(int mode)
{
	return mode == MI_QOUT_S32 || mode == MI_QOUT_F32 ? 4 : 1;
}

/* ---- GEMM with constant weights (MatMul / Gemm) ------------------------ */

struct gemm_job {
	const struct mi_qweights *w;
	const uint8_t *a;
	int m, lda, ldy, nchunk, bpc;
	const struct mi_qepi *ep;
	void *y;
	struct kernels k;
	uint8_t *ws; /* per thread: panel + acc + out tile */
	size_t ws_per;
	bool amx;
};

static void gemm_item(void *arg, int item, int tid)
{
	struct gemm_job *j = arg;
	const struct mi_qweights *w = j->w;
	int panel = item / j->nchunk, chunk = item % j->nchunk;
	int p0 = panel * MI_QNR, np = j->m - p0 < MI_QNR ? j->m - p0 : MI_QNR;
	uint8_t *pb = j->ws + tid * j->ws_per;
	int32_t *acc = (int32_t *)(pb + (size_t)w->k4 * MI_QNR * 4);
	uint8_t *ot = (uint8_t *)(acc + 4 * MI_QMR * MI_QNR);
	size_t es = qg_out_elem(j->ep->mode);

	/* B panel: 4 consecutive k of row p are 4 contiguous bytes of A. */
	for (int p = 0; p < MI_QNR; p++) {
		const uint8_t *ar = j->a + (size_t)(p0 + (p < np ? p : 0)) * j->lda;

		for (int kq = 0; kq < w->k4; kq++) {
			uint8_t *d = pb + ((size_t)kq * MI_QNR + p) * 4;
			int kk = kq * 4;

			if (kk + 4 <= w->k) {
				memcpy(d, ar + kk, 4);
			} else {
				memset(d, 0, 4);
				memcpy(d, ar + kk, w->k - kk);
			}
		}
	}
	int b0 = chunk * j->bpc, b1 = b0 + j->bpc;

	if (b1 > w->nblk)
		b1 = w->nblk;
	for (int b = b0; b < b1; b++) {
		int oc0 = b * MI_QMR;
		int rows = w->ocg - oc0 < MI_QMR ? w->ocg - oc0 : MI_QMR;

		/* AMX: pairs of blocks, as in conv_gemm_item */
		bool amx = j->amx && b - b0 < b1 - b0 - (b1 - b0) % 2;

		if (amx && (b - b0) % 4 == 0)
			mi_qamx_tile(w, 0, oc0, b + 4 <= b1 ? 2 : 1, pb, MI_QNR * 4, NULL, 0, acc);
		if (!amx)
			j->k.tile(j->k.w16 ? (const int8_t *)(w->w16 + (size_t)b * w->k4 * MI_QMR * 4) :
					     w->packed + (size_t)b * w->k4 * MI_QMR * 4,
				  pb, MI_QNR * 4, w->k4, acc);
		j->k.epi(amx ? acc + (b - b0) % 4 * MI_QMR * MI_QNR : acc, MI_QNR, rows, np,
			 j->ep, oc0, ot, MI_QNR);
		/* transpose the 8 x np tile into Y[p][oc] */
		for (int p = 0; p < np; p++) {
			uint8_t *dst = (uint8_t *)j->y +
				       ((size_t)(p0 + p) * j->ldy + oc0) * es;

			for (int r = 0; r < rows; r++)
				memcpy(dst + r * es, ot + (r * MI_QNR + p) * es,
				       es);
		}
	}
}

/*
 * Few rows (a classifier's Gemm on one image): a GEMV per row, the packed
 * weights streamed once.  One 64-byte load holds two k4 steps of a block's
 * 8 rows; the row's matching 2 x 4 activation bytes are broadcast to the
 * two halves, so vpdpbusd does 64 multiply-adds with no padding to the
 * 32-pixel panel the tile kernel needs.
 */
#define GEMV_MAX_M 4
#define GEMV_BLK 64 /* blocks per epilogue call */

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
gemv_vnni(const struct mi_qweights *w, const uint8_t *a, int b0, int b1, int32_t *acc)
{
	const __m512i sel = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
	int k4 = w->k4, kfull = w->k / 4;

	for (int b = b0; b < b1; b++) {
		const int8_t *wp = w->packed + (size_t)b * k4 * MI_QMR * 4;
		__m512i s0 = _mm512_setzero_si512(), s1 = s0;
		__m256i t = _mm256_setzero_si256();
		int kq = 0;

		for (; kq + 4 <= kfull; kq += 4) {
			__m512i x0 = _mm512_permutexvar_epi32(
				sel, _mm512_castsi128_si512(_mm_loadl_epi64((const void *)(a + kq * 4))));
			__m512i x1 = _mm512_permutexvar_epi32(
				sel, _mm512_castsi128_si512(_mm_loadl_epi64((const void *)(a + kq * 4 + 8))));

			s0 = _mm512_dpbusd_epi32(s0, x0, _mm512_loadu_si512((const void *)(wp + kq * 32)));
			s1 = _mm512_dpbusd_epi32(s1, x1,
						 _mm512_loadu_si512((const void *)(wp + kq * 32 + 64)));
		}
		for (; kq < k4; kq++) {
			uint32_t d = 0;

			memcpy(&d, a + kq * 4, kq < kfull ? 4 : w->k - kq * 4);
			t = _mm256_dpbusd_epi32(t, _mm256_set1_epi32((int)d),
						_mm256_loadu_si256((const void *)(wp + kq * 32)));
		}
		s0 = _mm512_add_epi32(s0, s1);
		t = _mm256_add_epi32(t, _mm256_add_epi32(_mm512_castsi512_si256(s0),
							 _mm512_extracti64x4_epi64(s0, 1)));
		_mm256_storeu_si256((void *)(acc + (b - b0) * MI_QMR), t);
	}
}

/*
 * The same on AVX2: the block's 8 rows x 4 k of a k4 step widened to
 * int16 (rows 0-3 and 4-7), times the step's 4 activation bytes widened
 * and broadcast, by vpmaddwd (u8 x s8 pairs: exact in int32); each row's
 * two pair sums are added at the end.  The tile kernel padded one row to
 * a 32-pixel panel: 32x the work (the int8 classifier of MobileNetV2,
 * 1280 x 1000, ~1.2 ms on a Zen 3 core).
 */
__attribute__((target("avx2,fma"))) static void
gemv_avx2(const struct mi_qweights *w, const uint8_t *a, int b0, int b1, int32_t *acc)
{
	const __m256i ord = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
	int k4 = w->k4, kfull = w->k / 4;

	for (int b = b0; b < b1; b++) {
		const int8_t *wp = w->packed + (size_t)b * k4 * MI_QMR * 4;
		__m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
		int kq = 0;

#define MI_GEMV2_X(kk)                                                                   \
	_mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(d[kk])))
#define MI_GEMV2_W(kk, h)                                                                \
	_mm256_cvtepi8_epi16(_mm_loadu_si128((const void *)(wp + (kq + (kk)) * 32 + 16 * (h))))
		for (; kq + 2 <= kfull; kq += 2) {
			int32_t d[2];

			memcpy(d, a + kq * 4, 8);
			__m256i x0 = MI_GEMV2_X(0), x1 = MI_GEMV2_X(1);

			s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(MI_GEMV2_W(0, 0), x0));
			s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(MI_GEMV2_W(0, 1), x0));
			s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(MI_GEMV2_W(1, 0), x1));
			s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(MI_GEMV2_W(1, 1), x1));
		}
		for (; kq < k4; kq++) {
			int32_t d[1] = { 0 };

			memcpy(d, a + kq * 4, kq < kfull ? 4 : w->k - kq * 4);
			__m256i x0 = MI_GEMV2_X(0);

			s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(MI_GEMV2_W(0, 0), x0));
			s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(MI_GEMV2_W(0, 1), x0));
		}
#undef MI_GEMV2_X
#undef MI_GEMV2_W
		/* lanes (row r, k 0-1), (row r, k 2-3): rows 0 1 4 5 | 2 3 6 7 */
		__m256i h = _mm256_hadd_epi32(_mm256_add_epi32(s0, s2), _mm256_add_epi32(s1, s3));

		_mm256_storeu_si256((void *)(acc + (b - b0) * MI_QMR),
				    _mm256_permutevar8x32_epi32(h, ord));
	}
}

static int gemv2_cur = -1;

/* Off (tests): AVX2 GEMMs of few rows and 1x1 convs of one pixel
 * through the tile kernel's 32-pixel panel instead of gemv_avx2. */
static bool gemv2_on(void)
{
	return gemv2_cur != 0;
}

int mi_quant_set_gemv2(int on)
{
	gemv2_cur = !!on;
	return gemv2_cur;
}

/* The GEMV kernels of an ISA (AVX-512 VNNI, AVX2). */
bool qg_gemv_isa(int isa)
{
	return isa == MI_QISA_AVX512 || (isa == MI_QISA_AVX2 && gemv2_on());
}

void qg_gemv_item(void *arg, int item, int tid)
{
	struct gemv_job *j = arg;
	const struct mi_qweights *w = j->w;
	int row = item / j->nchunk, chunk = item % j->nchunk;
	int b0 = chunk * j->bpc, b1 = b0 + j->bpc < w->nblk ? b0 + j->bpc : w->nblk;
	size_t es = qg_out_elem(j->ep->mode);
	int32_t acc[GEMV_BLK * MI_QMR];

	for (int c0 = b0; c0 < b1; c0 += GEMV_BLK) {
		int c1 = c0 + GEMV_BLK < b1 ? c0 + GEMV_BLK : b1;
		int oc0 = c0 * MI_QMR, noc = (c1 * MI_QMR < w->ocg ? c1 * MI_QMR : w->ocg) - oc0;

		if (j->isa == MI_QISA_AVX512)
			gemv_vnni(w, j->a + (size_t)row * j->lda, c0, c1, acc);
		else
			gemv_avx2(w, j->a + (size_t)row * j->lda, c0, c1, acc);
		/* one pixel, noc rows: out[r] */
		j->epi(acc, 1, noc, 1, j->ep, oc0,
		       (uint8_t *)j->y + ((size_t)row * j->ldy + oc0) * es, 1);
	}
}

static size_t gemm_ws_per(const struct mi_qweights *w)
{
	/* panel, 32 x 32 sums (AMX), 8 x 32 output tile */
	return ((size_t)w->k4 * MI_QNR * 4 + 5 * MI_QMR * MI_QNR * 4 + 63) & ~(size_t)63;
}

size_t mi_qgemm_workspace(const struct mi_qweights *w, int m)
{
	int nt = qg_par_threads > 64 ? 64 : qg_par_threads;

	return gemm_ws_per(w) * nt + 64;
}

int mi_qgemm(const struct mi_qweights *w, const uint8_t *a, int m, int lda,
	     const struct mi_qepi *ep, void *y, int ldy, void *ws)
{
	struct gemm_job j = {
		.w = w, .a = a, .m = m, .lda = lda, .ldy = ldy, .ep = ep, .y = y,
		.k = qg_kernels_for(mi_quant_isa(), w),
		.amx = mi_quant_isa() == MI_QISA_AVX512 && w->amx && mi_quant_amx(),
	};
	int npanel = (m + MI_QNR - 1) / MI_QNR;

	if (w->group != 1 || m <= 0)
		return -EINVAL;
	if (m <= GEMV_MAX_M && qg_gemv_isa(mi_quant_isa())) {
		struct gemv_job v = { .w = w, .a = a, .lda = lda, .ldy = ldy, .ep = ep, .y = y,
				      .epi = j.k.epi, .isa = mi_quant_isa() };

		v.nchunk = 2 * qg_par_threads < w->nblk ? 2 * qg_par_threads : w->nblk;
		v.bpc = (w->nblk + v.nchunk - 1) / v.nchunk;
		v.nchunk = (w->nblk + v.bpc - 1) / v.bpc;
		qg_par_for(m * v.nchunk, qg_gemv_item, &v);
		return 0;
	}
	/* split the output channels too when there are few panels */
	j.nchunk = npanel >= 2 * qg_par_threads ? 1 : 2 * qg_par_threads;
	if (j.nchunk > w->nblk)
		j.nchunk = w->nblk;
	j.bpc = (w->nblk + j.nchunk - 1) / j.nchunk;
	j.nchunk = (w->nblk + j.bpc - 1) / j.bpc;
	j.ws_per = gemm_ws_per(w);
	void *own = NULL;

	if (!ws) {
		own = ws = aligned_alloc(64, (mi_qgemm_workspace(w, m) + 63) & ~(size_t)63);
		if (!own)
			return -ENOMEM;
	}
	j.ws = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
	qg_par_for(npanel * j.nchunk, gemm_item, &j);
	free(own);
	return 0;
}

