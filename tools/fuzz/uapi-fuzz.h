/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * uapi-fuzz: what the fuzzer's processes know about their files, the PRNG
 * helpers, and the command-stream generator (uapi-fuzz-ops.c).
 */
#ifndef UAPI_FUZZ_H
#define UAPI_FUZZ_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

#include "mi_test.h"


#define NBO 12
#define NCTX 6
#define NSYNC 8
#define NJOB 16
#define NSTALE 8
#define NDMABUF 4
#define ARGBUF 4224

enum sync_kind { S_EMPTY, S_SIGNALLED, S_FENCED };

struct bo {
	uint32_t handle;
	uint64_t size;
};

struct sync {
	uint32_t handle;
	int kind;
	uint64_t point; /* last timeline point a job signals, 0: binary */
};

struct job {
	uint32_t ctx;
	uint64_t seqno;
};

/* One open file of the device and what the fuzzer knows it holds. */
struct file {
	int fd;
	struct bo bo[NBO];
	uint32_t ctx[NCTX];
	struct sync sync[NSYNC];
	struct job job[NJOB];
	unsigned int njob;
	uint32_t stale_bo[NSTALE], stale_ctx[NSTALE], stale_sync[NSTALE];
	unsigned int nstale_bo, nstale_ctx, nstale_sync;
};

struct proc {
	int slot;
	uint64_t rng;
	uint64_t step;
	struct file f[2];
	bool lost;
	struct io_uring ring;
	bool ring_ok;
	int sw_tl; /* sw_sync timeline, -1 if none */
	int dmabuf[NDMABUF];
	uint8_t *map; /* a mapping kept across closes and device removal */
	uint64_t map_size;
	uint64_t op_mask, dtype_mask, layout_mask, nqueues;
};

/* ---------------------------------------------------------------- random */

static inline uint64_t rnd(struct proc *p)
{
	return mi_rand(&p->rng);
}

static inline uint32_t below(struct proc *p, uint32_t n)
{
	return n ? (uint32_t)(rnd(p) % n) : 0;
}

static inline bool chance(struct proc *p, unsigned int pct)
{
	return below(p, 1000) < pct * 10;
}

/* per mille */
static inline bool rare(struct proc *p, unsigned int pm)
{
	return below(p, 1000) < pm;
}

static inline uint32_t interesting32(struct proc *p)
{
	static const uint32_t v[] = { 0, 1, 2, 3, 7, 31, 32, 62, 63, 64,
				      255, 256, 65535, 65536, 0x7fffffff,
				      0x80000000u, 0xfffffffeu, 0xffffffffu };

	return v[below(p, sizeof(v) / sizeof(v[0]))];
}

static inline uint64_t interesting64(struct proc *p)
{
	static const uint64_t v[] = { 0, 1, 4095, 4096, 1ull << 32,
				      1ull << 40, 1ull << 62, 1ull << 63,
				      ~0ull - 3, ~0ull };

	return v[below(p, sizeof(v) / sizeof(v[0]))];
}

/* The submit's buffers, as the fuzzer believes them to be. */
struct bolist {
	uint32_t n;
	uint64_t size[DRM_METAINFER_MAX_BOS];
};

/*
 * Append one op to @s: valid for the device most of the time, then with
 * some probability mutated (a tensor, the header, a parameter word).
 */
void fuzz_gen_op(struct proc *p, struct mi_stream *s, const struct bolist *bl);

#endif
