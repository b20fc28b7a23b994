// SPDX-License-Identifier: MIT
/*
 * AMX-INT8 tiles for the dense int8 conv and GEMM (the 8x32 VNNI tile's
 * work, 8x faster per instruction where the shapes fill the tiles).
 *
 * TDPBSUD C[16][16] += A[16][64] (int8) x B[16][64] (uint8): A row m holds
 * 64 consecutive k of output channel m, B row r holds the 4 k of row r for
 * 16 pixels, exactly the VNNI path's "B panel" [k4][32 pixels][4] and the
 * C4 activations [c/4][H*W][4] (1x1 convs read them in place).  So only
 * the weights get a second packing ([g][chunk][oc][64], mi_qamx_pack());
 * panels, epilogues and work splitting are the VNNI path's (qgemm.c).
 * C tiles are int32 sums, exact like vpdpbusd's: outputs are byte-identical
 * to the VNNI path.
 *
 * One tile shape everywhere (16 rows x 64 bytes), so one configuration per
 * thread, loaded on the thread's first tile and kept.  K is covered in
 * chunks of 16 k4 rows; the last chunk starts at row k4 - 16 (overlapping
 * the previous one; its weights are zero on the overlap), so no load reads
 * past the panel or the caller's tensor.  K < 64 (k4 < 16: the narrow 1x1
 * convs of the mobile nets, 16-40 input channels): one chunk at row 0,
 * weights zero on rows k4..15; the B panel's rows past k4 are read (any
 * values: times zero), so callers pass a panel with 16 readable rows
 * (their workspace panel followed by the sums), never the caller's tensor.
 */
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <immintrin.h>

#include "quant/quant.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static bool amx_hw;   /* CPU + OS + permission */
static int amx_cur = -1; /* setting; -1: on where the CPU has AMX (first use) */

static void amx_detect(void)
{
	unsigned int a, b, c, d, lo, hi;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) ||
	    !(d & (1u << 24)) || !(d & (1u << 25))) /* AMX-TILE, AMX-INT8 */
		return;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
		return;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & (3u << 17)) != (3u << 17)) /* XTILECFG, XTILEDATA enabled */
		return;
	/* Linux: tile data is a dynamic feature, granted per process */
	if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA))
		return;
	amx_hw = true;
}

int mi_quant_set_amx(int on)
{
	pthread_once(&amx_once, amx_detect);
	__atomic_store_n(&amx_cur, on && amx_hw, __ATOMIC_RELAXED);
	return on && amx_hw;
}

bool mi_quant_amx(void)
{
	int v = __atomic_load_n(&amx_cur, __ATOMIC_RELAXED);

	if (v < 0)
		v = mi_quant_set_amx(1);
	return v;
}

/* rows per group and chunk: one zero block more, so a 16-row tile may
 * start at any block */
static int amx_ocp(const struct mi_qweights *w)
{
	return (w->nblk + 1) * MI_QMR;
}

int mi_qamx_pack(struct mi_qweights *w)
{
	int ocp = amx_ocp(w);

	w->kc = (w->k4 + 15) / 16;
	size_t bytes = (size_t)w->group * w->kc * ocp * 64;

	w->amx = aligned_alloc(64, bytes);
	if (!w->amx)
		return -ENOMEM;
	memset(w->amx, 0, bytes);
	for (int g = 0; g < w->group; g++)
		for (int c = 0; c < w->kc; c++) {
			int r0 = c * 16 < w->k4 - 16 ? c * 16 : w->k4 < 16 ? 0 : w->k4 - 16;
			int8_t *dst = w->amx + ((size_t)g * w->kc + c) * ocp * 64;

			for (int o = 0; o < w->nblk * MI_QMR; o++)
				for (int i = 0; i < 64; i++) {
					int r = r0 + i / 4;
					const int8_t *blk = w->packed +
						(size_t)(g * w->nblk + o / MI_QMR) * w->k4 * MI_QMR * 4;

					dst[o * 64 + i] = r < c * 16 || r >= w->k4 ? 0 :
						blk[r * MI_QMR * 4 + (o % MI_QMR) * 4 + i % 4];
				}
		}
	return 0;
}

/* palette 1, tiles 0-7 all 16 rows x 64 bytes */
struct tilecfg {
	uint8_t palette, start_row, rsvd[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

static __thread bool cfg_loaded;

__attribute__((target("amx-tile"))) static void load_cfg(void)
{
	struct tilecfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.palette = 1;
	for (int t = 0; t < 8; t++) {
		cfg.colsb[t] = 64;
		cfg.rows[t] = 16;
	}
	_tile_loadconfig(&cfg);
	cfg_loaded = true;
}

/* tiles 0-3: C (oc half, pixel half), 4-5: weights, 6-7: pixels 0-15, 16-31 */
#define AMX_KLOOP(NR)                                                         \
	for (int c = 0; c < w->kc; c++) {                                     \
		int r0 = c * 16 < w->k4 - 16 ? c * 16 : w->k4 < 16 ? 0 : w->k4 - 16; \
		const uint8_t *bb = toff ? b + toff[c / cpt] + (size_t)(c % cpt) * 16 * ldb : \
					   b + (size_t)r0 * ldb;              \
		const int8_t *aa = wa + (size_t)c * ocp * 64;                 \
		_tile_loadd(6, bb, ldb);                                      \
		_tile_loadd(4, aa, 64);                                       \
		_tile_dpbsud(0, 4, 6);                                        \
		_tile_loadd(7, bb + 64, ldb);                                 \
		_tile_dpbsud(1, 4, 7);                                        \
		if ((NR) == 2) {                                              \
			_tile_loadd(5, aa + 16 * 64, 64);                     \
			_tile_dpbsud(2, 5, 6);                                \
			_tile_dpbsud(3, 5, 7);                                \
		}                                                             \
	}

__attribute__((target("amx-tile,amx-int8"))) void
mi_qamx_tile(const struct mi_qweights *w, int g, int o0, int nr,
	     const uint8_t *b, size_t ldb, const ptrdiff_t *toff, int cpt,
	     int32_t *acc)
{
	int ocp = amx_ocp(w);
	const int8_t *wa = w->amx + (size_t)g * w->kc * ocp * 64 + (size_t)o0 * 64;

	if (!cfg_loaded)
		load_cfg();
	_tile_zero(0);
	_tile_zero(1);
	if (nr == 2) {
		_tile_zero(2);
		_tile_zero(3);
		AMX_KLOOP(2);
		_tile_stored(2, acc + 16 * MI_QNR, MI_QNR * 4);
		_tile_stored(3, acc + 16 * MI_QNR + 16, MI_QNR * 4);
	} else {
		AMX_KLOOP(1);
	}
	_tile_stored(0, acc, MI_QNR * 4);
	_tile_stored(1, acc + 16, MI_QNR * 4);
}
