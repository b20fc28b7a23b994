// SPDX-License-Identifier: MIT
/*
 * int8 depthwise convolution, 3x3 and KxK rows per ISA, the padded
 * input planes and the per-channel items.
 */
#include "quant/qgemm-impl.h"
#include "quant/qdw-impl.h"

/* ---- depthwise 3x3 ------------------------------------------------------ */

/* acc[ox] += sum over 9 taps; rows: 3 input row pointers. */
#define MI_DW_ROW_BODY                                                         \
	{                                                                      \
		for (int ky = 0; ky < 3; ky++) {                               \
			const uint8_t *r = rows[ky];                           \
			int w0 = w[ky * 3], w1 = w[ky * 3 + 1],                \
			    w2 = w[ky * 3 + 2];                                \
			if (sw == 1 && dw == 1) {                              \
				for (int x = 0; x < ow; x++)                   \
					acc[x] += w0 * r[x] + w1 * r[x + 1] +  \
						  w2 * r[x + 2];               \
			} else {                                               \
				for (int x = 0; x < ow; x++)                   \
					acc[x] += w0 * r[x * sw] +             \
						  w1 * r[x * sw + dw] +        \
						  w2 * r[x * sw + 2 * dw];     \
			}                                                      \
		}                                                              \
	}

typedef void (*dw_row_fn)(int32_t *restrict acc, const uint8_t *const *rows,
			  const int8_t *w, int ow, int sw, int dw);

void dw_row_generic(int32_t *restrict acc, const uint8_t *const *rows,
		    const int8_t *w, int ow, int sw, int dw)
MI_DW_ROW_BODY

void dw_row_tail(int32_t *restrict acc, const uint8_t *const *rows,
		 const int8_t *w, int x0, int ow, int sw, int dw)
{
	for (int x = x0; x < ow; x++)
		acc[x] = 0;
	for (int ky = 0; ky < 3; ky++)
		for (int x = x0; x < ow; x++)
			acc[x] += w[ky * 3] * rows[ky][x * sw] +
				  w[ky * 3 + 1] * rows[ky][x * sw + dw] +
				  w[ky * 3 + 2] * rows[ky][x * sw + 2 * dw];
}

/* ---- depthwise KxK (kernels other than 3x3, up to 7x7) ------------------ */

/* acc[ox] = sum over kh*kw taps; rows: kh input row pointers. */
static void dw_rowk_generic(int32_t *restrict acc, const uint8_t *const *rows,
			    const int8_t *w, int kh, int kw, int ow, int sw, int dw)
{
	memset(acc, 0, ow * sizeof(int32_t));
	for (int ky = 0; ky < kh; ky++)
		for (int kx = 0; kx < kw; kx++) {
			const uint8_t *r = rows[ky] + kx * dw;
			int wv = w[ky * kw + kx];

			for (int x = 0; x < ow; x++)
				acc[x] += wv * r[x * sw];
		}
}

static int dwchan_cur = -1;

int mi_quant_set_dwchan(int on)
{
	dwchan_cur = !!on;
	return dwchan_cur;
}

/* Off (tests): the AVX2 row kernels instead of dwk_chan_avx2. */
static bool dwchan_on(void)
{
	return dwchan_cur != 0;
}

static void dw_prep_item(void *arg, int c, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv_shape *s = &j->cv->s;
	uint8_t *dst = j->xi + (size_t)c * (j->hp * j->wp + 64);
	const uint8_t *src = j->xsrc + (size_t)c * s->h * s->w;

	if (j->dw_isa == MI_QISA_AVX2 && s->pl <= 16 && s->pr <= 16) {
		dw_prep_avx2(j, s, c, dst, src);
		return;
	}

	for (size_t y = 0; y < j->hp; y++) {
		uint8_t *row = dst + y * j->wp;
		int iy = (int)y - s->pt;

		if (iy < 0 || iy >= s->h) {
			memset(row, j->zx, j->wp);
			continue;
		}
		/* pads are a byte or two: no memset calls */
		for (int x = 0; x < s->pl; x++)
			row[x] = j->zx;
		for (size_t x = s->pl + s->w; x < j->wp; x++)
			row[x] = j->zx;
		const uint8_t *sp = src + (size_t)iy * s->w;

		if (j->flip)
			for (int x = 0; x < s->w; x++)
				row[s->pl + x] = sp[x] ^ 0x80;
		else
			memcpy(row + s->pl, sp, s->w);
	}
}

/* The epilogues the AVX-512 depthwise kernels fuse (dw_store): uint8 /
 * int8, and planar fp32. */
static bool dw_rq_mode(const struct mi_qepi *ep)
{
	return ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8 ||
	       (ep->mode == MI_QOUT_F32 && !ep->out_c4);
}

static struct dw_rq dw_rq_of(const struct mi_qepi *ep, int c, uint8_t *out)
{
	return (struct dw_rq){ ep->comp[c], ep->mult[c], ep->flo, ep->fhi, ep->zy, out,
			       ep->out_c4, ep->mode == MI_QOUT_F32,
			       ep->fbias ? ep->fbias[c] : 0.0f };
}

/* Requantization fused into the AVX-512 depthwise kernels. */
bool dw_fused(const struct conv_job *j)
{
	const struct mi_qconv_shape *s = &j->cv->s;

	return j->dw_isa == MI_QISA_AVX512 && s->dw == 1 && (s->sw == 1 || s->sw == 2) &&
	       dw_rq_mode(j->ep);
}

/* The channel runs dw_chan_vbmi on the unpadded input (no dw_prep_item). */
static bool dw_direct(const struct conv_job *j)
{
	const struct mi_qconv_shape *s = &j->cv->s;

	return j->dw_isa == MI_QISA_AVX512 && qg_have_vbmi() && !j->flip && s->dw == 1 &&
	       s->dh == 1 && (s->sw == 1 || s->sw == 2) && dw_rq_mode(j->ep);
}

static void dw_item(void *arg, int c, int tid)
{
	struct conv_job *j = arg;
	const struct mi_qconv *cv = j->cv;
	const struct mi_qconv_shape *s = &cv->s;
	const uint8_t *xp = j->xi + (size_t)c * (j->hp * j->wp + 64);
	size_t npix = (size_t)s->oh * s->ow;
	/* dw_defer: channel c % 4 of the quad's sums */
	int32_t *acc = (int32_t *)(void *)(j->ws + tid * j->ws_per) + j->dw_defer * (c % 4) * npix;
	dw_row_fn row = j->dw_isa == MI_QISA_AVX512 ? dw_row_avx512 :
			j->dw_isa == MI_QISA_AVX2   ? dw_row_avx2 :
						      dw_row_generic;
	size_t es = qg_out_elem(j->ep->mode);
	uint8_t *yc = j->ep->out_c4 ? j->y + (c / 4) * npix * 4 + c % 4 : j->y + c * npix * es;
	size_t rowstep = j->ep->out_c4 ? (size_t)s->ow * 4 : (size_t)s->ow * es;

	bool fused = dw_fused(j);

	if (dw_direct(j)) {
		struct dw_rq rq = dw_rq_of(j->ep, c, yc);

		dw_chan_vbmi(j->xsrc + (size_t)c * s->h * s->w, s->h, s->w, s->pt, s->pl, j->zx,
			     cv->dww + (size_t)c * s->kh * s->kw, s->kh, s->kw, s->oh, s->ow, s->sh,
			     s->sw, NULL, &rq, rowstep);
		return;
	}

	if (j->dw_isa == MI_QISA_AVX2 && dwchan_on() && s->dw == 1 && s->dh == 1 &&
	    (s->sw == 1 || s->sw == 2)) {
		dwk_chan_avx2(xp, j->wp, cv->dww + (size_t)c * s->kh * s->kw, s->kh, s->kw, s->oh,
			      s->ow, s->sh, s->sw, acc);
		if (!j->dw_defer)
			j->k.epi(acc, s->oh * s->ow, 1, s->oh * s->ow, j->ep, c, yc, 0);
		return;
	}
	if (s->kh != 3 || s->kw != 3) {
		const uint8_t *rows[MI_QDW_KMAX];
		const int8_t *wc = cv->dww + (size_t)c * s->kh * s->kw;
		bool simd = j->dw_isa == MI_QISA_AVX512 && s->dw == 1 &&
			    (s->sw == 1 || s->sw == 2);

		if (simd && s->dh == 1) {
			struct dw_rq rq = dw_rq_of(j->ep, c, yc);

			dwk_chan_avx512(xp, j->wp, wc, s->kh, s->kw, s->oh, s->ow, s->sh, s->sw,
					fused ? NULL : acc, fused ? &rq : NULL, rowstep);
			if (!fused && !j->dw_defer)
				j->k.epi(acc, s->oh * s->ow, 1, s->oh * s->ow, j->ep, c, yc, 0);
			return;
		}
		for (int oy = 0; oy < s->oh; oy++) {
			int32_t *ar = acc + (size_t)oy * s->ow;

			for (int ky = 0; ky < s->kh; ky++)
				rows[ky] = xp + ((size_t)oy * s->sh + ky * s->dh) * j->wp;
			if (fused) {
				struct dw_rq rq = dw_rq_of(j->ep, c, yc + oy * rowstep);

				dw_rowk_avx512(ar, rows, wc, s->kh, s->kw, s->ow, s->sw, &rq);
			} else if (simd) {
				dw_rowk_avx512(ar, rows, wc, s->kh, s->kw, s->ow, s->sw, NULL);
			} else if (j->dw_isa == MI_QISA_AVX2 && s->dw == 1 &&
				   (s->sw == 1 || s->sw == 2)) {
				dw_rowk_avx2(ar, rows, wc, s->kh, s->kw, s->ow, s->sw);
			} else {
				dw_rowk_generic(ar, rows, wc, s->kh, s->kw, s->ow, s->sw, s->dw);
			}
		}
		if (!fused && !j->dw_defer)
			j->k.epi(acc, s->oh * s->ow, 1, s->oh * s->ow, j->ep, c, yc, 0);
		return;
	}

	if (fused && s->dh == 1) {
		struct dw_rq rq = dw_rq_of(j->ep, c, yc);

		dw3_chan_avx512_rq(xp, j->wp, cv->dww + c * 9, s->oh, s->ow, s->sh, s->sw, rq,
				   rowstep);
		return;
	}
	for (int oy = 0; oy < s->oh; oy++) {
		const uint8_t *rows[3];
		int32_t *ar = acc + (size_t)oy * s->ow;

		for (int ky = 0; ky < 3; ky++)
			rows[ky] = xp + ((size_t)oy * s->sh + ky * s->dh) * j->wp;
		if (fused) {
			struct dw_rq rq = dw_rq_of(j->ep, c, yc + oy * rowstep);
			dw_row_avx512_rq(ar, rows, cv->dww + c * 9, s->ow, s->sw, &rq);
			continue;
		}
		if (row == dw_row_generic)
			memset(ar, 0, s->ow * sizeof(int32_t));
		if (row == dw_row_avx2 && s->dw == 1 && (s->sw == 1 || s->sw == 2) && s->ow % 8)
			dw_rowk_avx2(ar, rows, cv->dww + c * 9, 3, 3, s->ow, s->sw); /* no scalar tail */
		else
			row(ar, rows, cv->dww + c * 9, s->ow, s->sw, s->dw);
	}
	if (!fused && !j->dw_defer)
		j->k.epi(acc, s->oh * s->ow, 1, s->oh * s->ow, j->ep, c, yc, 0);
}

/*
 * Four channels per work item, each padded and then convolved by the same
 * thread: one pool dispatch per depthwise node instead of two (no barrier
 * between the copy and its only reader), the padded plane is still in
 * this core's cache, and with a C4 output the four channels that share
 * every output cache line are written by one thread (no false sharing).
 */
void dw_quad_item(void *arg, int item, int tid)
{
	struct conv_job *j = arg;
	int c1 = item * 4 + 4 < j->cv->s.c ? item * 4 + 4 : j->cv->s.c;

	bool direct = dw_direct(j);

	for (int c = item * 4; c < c1; c++) {
		if (!direct)
			dw_prep_item(arg, c, tid);
		dw_item(arg, c, tid);
	}
	if (j->dw_defer) { /* the quad's four channels in one C4 epilogue */
		size_t npix = (size_t)j->cv->s.oh * j->cv->s.ow;

		j->k.epi((int32_t *)(void *)(j->ws + tid * j->ws_per), npix, c1 - item * 4, npix,
			 j->ep, item * 4, j->y + (size_t)item * npix * 4, npix);
	}
}

static int dwc4_cur = -1;
static bool dwc4_all;

/* on = 2: every shape the kernel takes (tests), not only the small maps */
int mi_quant_set_dwc4(int on)
{
	dwc4_all = on == 2;
	return dwc4_cur = !!on;
}

/* Off (tests): AVX2 depthwise convs with a C4 output take the
 * per-channel planes (dw_prep_item, dwk_chan_avx2, epi_avx2); 2: the quad
 * kernel on every shape it takes. */
static bool dwc4_on(void)
{
	return dwc4_cur != 0;
}

/* The AVX2 quad kernel (dwq_item) applies: uint8/int8 output (C4 by the
 * caller), no dilation, stride 1 or 2, kernels up to MI_QDW_KMAX (used
 * for 3x3 and 5x5 kernels, maps of any size: with the tap pairs shared by
 * the 4 rows of a step it beats the planes there, bench-qconv; 5x5 of
 * stride 2 measured even until the last rows and the weight pairs were
 * vectorized, then 0.098 -> 0.059 ms on 14x14 c576) */
bool mi_qconv_dw_c4(const struct mi_qconv *cv, const struct mi_qepi *ep)
{
	const struct mi_qconv_shape *s = &cv->s;

	return mi_quant_isa() == MI_QISA_AVX2 && cv->depthwise && s->c % 4 == 0 &&
	       (ep->mode == MI_QOUT_U8 || ep->mode == MI_QOUT_S8) && s->dw == 1 &&
	       s->dh == 1 && (s->sw == 1 || s->sw == 2) && (s->sh == 1 || s->sh == 2) &&
	       s->kw <= MI_QDW_KMAX && s->kh <= MI_QDW_KMAX && dwc4_on() &&
	       (dwc4_all || (s->kh == 3 && s->kw == 3) ||
		(s->kh == 5 && s->kw == 5));
}
