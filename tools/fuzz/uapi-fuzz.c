// SPDX-License-Identifier: GPL-2.0-only
/*
 * uapi-fuzz: structure-aware fuzzer of the MetaInfer uapi, run against a
 * metainfer_sim render node (inside the test VM: tools/vm/vmrun).
 *
 * N processes each run M steps of valid-looking call sequences: buffers,
 * contexts at every priority, submits of random command streams whose
 * descriptors are built to fit and then mutated (ops, dtypes, layouts,
 * shapes, strides and offsets near the bounds, foreign and stale handles,
 * in-fences signalled, unsignalled, never signalled or from another file),
 * waits, closes, PRIME export/import, syncobj transfer, io_uring commands,
 * fault knobs.  The parent kills and respawns processes and removes and
 * re-creates the device mid-run.  At the end it prints, per call, how many
 * were accepted and how many rejected (by errno), and fails unless every
 * call had both, no process crashed and none got stuck.  The kernel log is
 * vmrun's to check.
 *
 * The sequence of calls is a function of --seed (each process draws from
 * its own PRNG stream); results that depend on timing (waits, kills,
 * removal) can change what follows, so counts vary slightly between runs.
 * --trace prints every call for a repro.  See Documentation/testing.rst.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uapi-fuzz.h"

/* sw_sync (debugfs; CONFIG_SW_SYNC): fences that signal only on request */
struct sw_sync_create_fence_data {
	__u32 value;
	char name[32];
	__s32 fence;
};
#define SW_SYNC_IOC_CREATE_FENCE _IOWR('W', 0, struct sw_sync_create_fence_data)
#define SW_SYNC_IOC_INC _IOW('W', 1, __u32)
#define SW_SYNC_PATH "/sys/kernel/debug/sync/sw_sync"
/* a fence this far ahead signals only when the parent releases them all */
#define SW_NEVER 1000000u

static int sw_timeline = -1; /* the parent's, shared by the processes */

enum call_kind {
	C_GET_PARAM,
	C_BO_CREATE,
	C_BO_INFO,
	C_CTX_CREATE,
	C_CTX_DESTROY,
	C_SUBMIT,
	C_WAIT,
	C_GET_COUNTERS,
	C_URING_CMD,
	C_GEM_CLOSE,
	C_PRIME_EXPORT,
	C_PRIME_IMPORT,
	C_SYNCOBJ_CREATE,
	C_SYNCOBJ_DESTROY,
	C_SYNCOBJ_EXPORT,
	C_SYNCOBJ_IMPORT,
	C_COUNT
};

static const char *const call_name[C_COUNT] = {
	"GET_PARAM",	   "BO_CREATE",	      "BO_INFO",	"CTX_CREATE",
	"CTX_DESTROY",	   "SUBMIT",	      "WAIT",		"GET_COUNTERS",
	"URING_CMD",	   "GEM_CLOSE",	      "PRIME_EXPORT",	"PRIME_IMPORT",
	"SYNCOBJ_CREATE",  "SYNCOBJ_DESTROY", "SYNCOBJ_EXPORT", "SYNCOBJ_IMPORT",
};

#define MAX_ERRNO 140
#define MAX_PROCS 64

/* Shared between the parent and the processes (MAP_SHARED). */
struct shared {
	uint64_t acc[C_COUNT];
	uint64_t rej[C_COUNT];
	uint64_t err[C_COUNT][MAX_ERRNO];
	uint64_t steps;		  /* all processes together */
	uint64_t done[MAX_PROCS]; /* steps finished per process slot */
	uint64_t jobs_run, reopens, knobs, sw_fences, map_touches, map_faults;
	uint64_t sw_value;	  /* the shared sw_sync timeline's value */
	uint64_t releases;	  /* times the parent signalled every fence */
	int64_t deadline_ns;	  /* 0: none */
};

static struct shared *sh;

/* options */
static uint64_t opt_seed = 1;
static int opt_procs = 4;
static uint64_t opt_iters = 500;
static int opt_time;
static unsigned int opt_sim_id = 40;
static const char *opt_pers = "ethos-u55-high";
static int opt_kills = -1;
static int opt_del = 1;
static int opt_trace;

/* One MetaInfer ioctl in preparation: argument and what it refers to. */
struct call {
	int kind;
	unsigned long req;
	int fi; /* index into proc.f */
	uint8_t arg[ARGBUF];
	uint32_t handles[DRM_METAINFER_MAX_BOS + 2];
	struct drm_metainfer_sync syncs[DRM_METAINFER_MAX_SYNCS + 2];
	struct mi_stream stream;
	bool has_stream;
	int sync_slot; /* out_sync slot in f[fi].sync, -1 */
	uint64_t out_point;
	bool validate;
	int ctx_slot;
};

/* ---------------------------------------------------------------- counting */

static void count(struct proc *p, int kind, int ret)
{
	if (!ret) {
		__atomic_fetch_add(&sh->acc[kind], 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_add(&sh->rej[kind], 1, __ATOMIC_RELAXED);
	if (-ret > 0 && -ret < MAX_ERRNO)
		__atomic_fetch_add(&sh->err[kind][-ret], 1, __ATOMIC_RELAXED);
	if (ret == -ENODEV)
		p->lost = true;
}

static void trace(struct proc *p, int kind, int ret)
{
	if (opt_trace)
		fprintf(stderr, "uapi-fuzz: p%d step %llu %s -> %d\n", p->slot,
			(unsigned long long)p->step, call_name[kind], ret);
}

/* A DRM core ioctl (not size-mutated), counted. */
static int core_ioctl(struct proc *p, int kind, int fd, unsigned long req,
		      void *arg)
{
	int ret = mi_ioctl(fd, req, arg);

	count(p, kind, ret);
	trace(p, kind, ret);
	return ret;
}

/* ---------------------------------------------------------------- picking */

static struct file *other(struct proc *p, int fi)
{
	return &p->f[!fi];
}

static void stale_push(uint32_t *arr, unsigned int *n, uint32_t v)
{
	arr[*n % NSTALE] = v;
	(*n)++;
}

static uint32_t stale_pick(struct proc *p, const uint32_t *arr, unsigned int n)
{
	if (!n)
		return 1 + below(p, 64);
	return arr[below(p, n < NSTALE ? n : NSTALE)];
}

/* A live BO slot of @f, or -1. */
static int live_bo(struct proc *p, struct file *f)
{
	unsigned int i, start = below(p, NBO);

	for (i = 0; i < NBO; i++) {
		unsigned int s = (start + i) % NBO;

		if (f->bo[s].handle)
			return (int)s;
	}
	return -1;
}

/*
 * A BO handle for file @fi: mostly one of its own, sometimes a stale one,
 * one of the other file's (unknown here), 0 or random.  @size gets the
 * size the fuzzer believes (0 if unknown).
 */
static uint32_t pick_bo(struct proc *p, int fi, uint64_t *size)
{
	struct file *f = &p->f[fi];
	uint32_t r = below(p, 100);
	int s;

	*size = 0;
	if (r < 88 && (s = live_bo(p, f)) >= 0) {
		*size = f->bo[s].size;
		return f->bo[s].handle;
	}
	if (r < 92)
		return stale_pick(p, f->stale_bo, f->nstale_bo);
	if (r < 97 && (s = live_bo(p, other(p, fi))) >= 0)
		return other(p, fi)->bo[s].handle;
	return r < 98 ? 0 : (uint32_t)rnd(p);
}

static int live_ctx(struct proc *p, struct file *f)
{
	unsigned int i, start = below(p, NCTX);

	for (i = 0; i < NCTX; i++) {
		unsigned int s = (start + i) % NCTX;

		if (f->ctx[s])
			return (int)s;
	}
	return -1;
}

static uint32_t pick_ctx(struct proc *p, int fi)
{
	struct file *f = &p->f[fi];
	uint32_t r = below(p, 100);
	int s;

	if (r < 88 && (s = live_ctx(p, f)) >= 0)
		return f->ctx[s];
	if (r < 93)
		return stale_pick(p, f->stale_ctx, f->nstale_ctx);
	if (r < 97 && (s = live_ctx(p, other(p, fi))) >= 0)
		return other(p, fi)->ctx[s];
	return r < 98 ? 0 : (uint32_t)rnd(p);
}

static int pick_sync_slot(struct proc *p, struct file *f)
{
	unsigned int i, start = below(p, NSYNC);

	for (i = 0; i < NSYNC; i++) {
		unsigned int s = (start + i) % NSYNC;

		if (f->sync[s].handle)
			return (int)s;
	}
	return -1;
}

static void file_reset(struct file *f)
{
	int fd = f->fd;

	memset(f, 0, sizeof(*f));
	f->fd = fd;
}

/* ---------------------------------------------------------------- device */

static int open_device(void)
{
	int m = mi_sim_minor(opt_sim_id);

	if (m < 0)
		return m;
	return mi_open_minor(m);
}

static void query_caps(struct proc *p)
{
	int fd = p->f[0].fd;

	if (mi_get_param(fd, DRM_METAINFER_PARAM_OP_MASK, 0, &p->op_mask) ||
	    mi_get_param(fd, DRM_METAINFER_PARAM_DTYPE_MASK, 0, &p->dtype_mask) ||
	    mi_get_param(fd, DRM_METAINFER_PARAM_LAYOUT_MASK, 0,
			 &p->layout_mask) ||
	    mi_get_param(fd, DRM_METAINFER_PARAM_NUM_QUEUES, 0, &p->nqueues)) {
		p->op_mask = ~0ull;
		p->dtype_mask = ~0ull;
		p->layout_mask = ~0ull;
		p->nqueues = 1;
	}
}

static void fill_bo(struct proc *p, int fd, uint32_t handle);

/* A fresh file starts with two contexts, three buffers and two syncobjs. */
static void file_setup(struct proc *p, struct file *f)
{
	static const uint64_t sizes[3] = { 4096, 16384, 65536 };
	int i;

	for (i = 0; i < 2; i++) {
		struct drm_metainfer_ctx_create c = { .size = sizeof(c),
						      .priority = (uint32_t)i };

		if (!core_ioctl(p, C_CTX_CREATE, f->fd,
				DRM_IOCTL_METAINFER_CTX_CREATE, &c))
			f->ctx[i] = c.ctx_id;
	}
	for (i = 0; i < 3; i++) {
		struct drm_metainfer_bo_create b = { .size = sizeof(b),
						     .bo_size = sizes[i] };

		if (core_ioctl(p, C_BO_CREATE, f->fd,
			       DRM_IOCTL_METAINFER_BO_CREATE, &b))
			continue;
		f->bo[i].handle = b.handle;
		f->bo[i].size = b.bo_size;
		fill_bo(p, f->fd, b.handle);
	}
	for (i = 0; i < 2; i++) {
		struct drm_syncobj_create c = {
			.flags = i ? 0 : DRM_SYNCOBJ_CREATE_SIGNALED };

		if (core_ioctl(p, C_SYNCOBJ_CREATE, f->fd,
			       DRM_IOCTL_SYNCOBJ_CREATE, &c))
			continue;
		f->sync[i].handle = c.handle;
		f->sync[i].kind = i ? S_EMPTY : S_SIGNALLED;
	}
}

/* (Re)open both files; false if the device is not there (yet). */
static bool reopen(struct proc *p, int which)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (which >= 0 && i != which)
			continue;
		if (p->f[i].fd >= 0)
			close(p->f[i].fd);
		p->f[i].fd = open_device();
		file_reset(&p->f[i]);
		if (p->f[i].fd < 0)
			return false;
	}
	__atomic_fetch_add(&sh->reopens, 1, __ATOMIC_RELAXED);
	query_caps(p);
	p->lost = false;
	for (i = 0; i < 2; i++)
		if (which < 0 || i == which)
			file_setup(p, &p->f[i]);
	return true;
}

/* ---------------------------------------------------------------- calls */

/* Mutate the @size word of a MetaInfer argument struct now and then. */
static void mutate_size(struct proc *p, struct call *c, size_t kernel_size,
			size_t ver0)
{
	uint32_t *size = (uint32_t *)c->arg;

	*size = (uint32_t)kernel_size;
	if (!chance(p, 6))
		return;
	switch (below(p, 5)) {
	case 0:
		*size = (uint32_t)ver0 - 4 * (1 + below(p, 2));
		break;
	case 1:
		*size = 4097 + below(p, 64);
		break;
	case 2: /* larger, zero tail: accepted */
		*size = (uint32_t)kernel_size + 8 * (1 + below(p, 4));
		break;
	case 3: /* larger, non-zero tail: -E2BIG */
		*size = (uint32_t)kernel_size + 8;
		c->arg[kernel_size + below(p, 8)] = 1 + below(p, 255);
		break;
	default:
		*size = (uint32_t)ver0;
		break;
	}
}

static void prep_get_param(struct proc *p, struct call *c)
{
	struct drm_metainfer_get_param *a = (void *)c->arg;
	static char blob[128];

	c->kind = C_GET_PARAM;
	c->req = DRM_IOCTL_METAINFER_GET_PARAM;
	a->param = chance(p, 90) ? below(p, 17) : interesting32(p);
	if (a->param == DRM_METAINFER_PARAM_MACS_PER_CYCLE)
		a->index = below(p, 6);
	if (a->param == DRM_METAINFER_PARAM_NAME ||
	    a->param == DRM_METAINFER_PARAM_BACKEND || rare(p, 40)) {
		a->data_ptr = (uintptr_t)blob;
		a->data_size = below(p, sizeof(blob));
		if (rare(p, 50))
			a->data_ptr = 16; /* -EFAULT */
	}
	if (rare(p, 30))
		a->flags = 1u << below(p, 32);
	if (rare(p, 20))
		a->pad = 1;
	if (rare(p, 20))
		a->index = interesting32(p);
	mutate_size(p, c, sizeof(*a), DRM_METAINFER_GET_PARAM_SIZE_VER0);
}

static void prep_bo_info(struct proc *p, struct call *c)
{
	struct drm_metainfer_bo_info *a = (void *)c->arg;
	uint64_t size;

	c->kind = C_BO_INFO;
	c->req = DRM_IOCTL_METAINFER_BO_INFO;
	a->handle = pick_bo(p, c->fi, &size);
	if (rare(p, 30))
		a->flags = 1;
	if (rare(p, 20))
		a->pad = 1;
	mutate_size(p, c, sizeof(*a), DRM_METAINFER_BO_INFO_SIZE_VER0);
}

static void prep_ctx_create(struct proc *p, struct call *c)
{
	struct drm_metainfer_ctx_create *a = (void *)c->arg;

	c->kind = C_CTX_CREATE;
	c->req = DRM_IOCTL_METAINFER_CTX_CREATE;
	c->ctx_slot = (int)below(p, NCTX);
	a->queue = chance(p, 92) ? below(p, (uint32_t)p->nqueues) :
				   (uint32_t)p->nqueues + below(p, 8);
	a->priority = chance(p, 95) ? below(p, 3) : interesting32(p);
	if (rare(p, 30))
		a->flags = 1u << below(p, 32);
	if (rare(p, 20))
		a->pad = 1;
	mutate_size(p, c, sizeof(*a), DRM_METAINFER_CTX_CREATE_SIZE_VER0);
}

static void prep_wait(struct proc *p, struct call *c)
{
	struct drm_metainfer_wait *a = (void *)c->arg;
	struct file *f = &p->f[c->fi];

	c->kind = C_WAIT;
	c->req = DRM_IOCTL_METAINFER_WAIT;
	if (f->njob && chance(p, 85)) {
		struct job *j = &f->job[below(p, f->njob < NJOB ? f->njob : NJOB)];

		a->ctx_id = j->ctx;
		a->seqno = j->seqno;
	} else {
		a->ctx_id = pick_ctx(p, c->fi);
		a->seqno = chance(p, 50) ? 0 : 1 + below(p, 4) + (rare(p, 300) ? 1u << 30 : 0);
	}
	/* past (poll), or at most 30 ms away: every wait is bounded */
	a->timeout_ns = chance(p, 50) ? mi_now_ns() - 1 :
			mi_deadline_ms(below(p, 30));
	if (rare(p, 20))
		a->flags = 1;
	if (rare(p, 20))
		a->pad = 1;
	mutate_size(p, c, sizeof(*a), DRM_METAINFER_WAIT_SIZE_VER0);
}

static void prep_counters(struct proc *p, struct call *c)
{
	struct drm_metainfer_get_counters *a = (void *)c->arg;

	c->kind = C_GET_COUNTERS;
	c->req = DRM_IOCTL_METAINFER_GET_COUNTERS;
	if (chance(p, 40)) {
		a->flags = DRM_METAINFER_COUNTERS_CTX;
		a->ctx_id = pick_ctx(p, c->fi);
	}
	if (rare(p, 40))
		a->ctx_id = 1 + below(p, 4);
	if (rare(p, 30))
		a->flags |= 1u << below(p, 32);
	if (rare(p, 20))
		a->pad = 1;
	mutate_size(p, c, sizeof(*a), DRM_METAINFER_GET_COUNTERS_SIZE_VER0);
}

static void prep_submit(struct proc *p, struct call *c)
{
	struct drm_metainfer_submit *a = (void *)c->arg;
	struct file *f = &p->f[c->fi];
	struct bolist bl;
	uint32_t i, nops;

	c->kind = C_SUBMIT;
	c->req = DRM_IOCTL_METAINFER_SUBMIT;
	a->ctx_id = pick_ctx(p, c->fi);

	bl.n = 1 + below(p, 4);
	for (i = 0; i < bl.n; i++) {
		int s = live_bo(p, f);

		/* mostly the file's own buffers: a bad handle stops the rest */
		if (s >= 0 && chance(p, 90)) {
			c->handles[i] = f->bo[s].handle;
			bl.size[i] = f->bo[s].size;
		} else {
			c->handles[i] = pick_bo(p, c->fi, &bl.size[i]);
		}
		if (!bl.size[i])
			bl.size[i] = 4096;
	}
	a->bo_count = bl.n;
	a->bo_handles = (uintptr_t)c->handles;

	mi_stream_init(&c->stream);
	c->has_stream = true;
	nops = 1 + below(p, 3);
	for (i = 0; i < nops; i++)
		fuzz_gen_op(p, &c->stream, &bl);
	mi_stream_finish(&c->stream);
	a->cmds = (uintptr_t)c->stream.buf;
	a->cmds_size = (uint32_t)c->stream.len;
	if (chance(p, 6)) {
		struct drm_metainfer_stream_header *h = (void *)c->stream.buf;

		switch (below(p, 7)) {
		case 0: h->magic ^= 1u << below(p, 32); break;
		case 1: h->version = interesting32(p); break;
		case 2: h->op_count += chance(p, 50) ? 1 : -1; break;
		case 3: h->flags = 1; break;
		case 4: a->cmds_size -= 1 + below(p, 16); break;
		case 5: a->cmds_size = chance(p, 50) ? 0 : DRM_METAINFER_MAX_CMDS_SIZE + 1; break;
		default: a->cmds = chance(p, 50) ? 0 : 4096; break;
		}
	}

	/* in-fences */
	if (chance(p, 35)) {
		uint32_t n = 1 + below(p, 3);

		for (i = 0; i < n; i++) {
			int s = pick_sync_slot(p, f);
			uint32_t r = below(p, 100);

			memset(&c->syncs[i], 0, sizeof(c->syncs[i]));
			if (r < 80 && s >= 0) {
				c->syncs[i].handle = f->sync[s].handle;
				c->syncs[i].point = f->sync[s].point;
			} else if (r < 88 && (s = pick_sync_slot(p, other(p, c->fi))) >= 0) {
				c->syncs[i].handle = other(p, c->fi)->sync[s].handle;
			} else if (r < 94) {
				c->syncs[i].handle = stale_pick(p, f->stale_sync,
								f->nstale_sync);
			} else {
				c->syncs[i].handle = (uint32_t)rnd(p);
			}
			if (rare(p, 30))
				c->syncs[i].flags = 1;
			if (rare(p, 30))
				c->syncs[i].point += 1 + below(p, 3);
		}
		a->in_sync_count = n;
		a->in_syncs = (uintptr_t)c->syncs;
	}
	/* out-fence */
	c->sync_slot = -1;
	if (chance(p, 50)) {
		int s = pick_sync_slot(p, f);

		if (s >= 0) {
			c->sync_slot = s;
			a->out_sync = f->sync[s].handle;
			if (f->sync[s].point || chance(p, 20)) {
				c->out_point = f->sync[s].point + 1;
				a->out_point = c->out_point;
			}
		}
	}
	if (chance(p, 12)) {
		a->flags = DRM_METAINFER_SUBMIT_VALIDATE_ONLY;
		c->validate = true;
	}
	if (chance(p, 6)) {
		switch (below(p, 8)) {
		case 0: a->flags |= 1u << (1 + below(p, 31)); break;
		case 1: a->pad = 1; break;
		case 2: a->bo_count = DRM_METAINFER_MAX_BOS + 1; break;
		case 3: a->bo_count = 0; break;
		case 4: a->in_sync_count = DRM_METAINFER_MAX_SYNCS + 1; break;
		case 5: a->bo_handles = 8; break;
		case 6: a->in_syncs = 8; a->in_sync_count = 1; break;
		default: a->out_sync = (uint32_t)rnd(p); break;
		}
	}
	mutate_size(p, c, sizeof(*a), DRM_METAINFER_SUBMIT_SIZE_VER0);
}

/* Bookkeeping after a MetaInfer call returned @ret. */
static void finish(struct proc *p, struct call *c, int ret)
{
	struct file *f = &p->f[c->fi];

	if (c->has_stream)
		mi_stream_free(&c->stream);
	if (ret)
		return;
	switch (c->kind) {
	case C_CTX_CREATE: {
		struct drm_metainfer_ctx_create *a = (void *)c->arg;
		uint32_t old = f->ctx[c->ctx_slot];

		if (old) {
			struct drm_metainfer_ctx_destroy d = {
				.size = sizeof(d), .ctx_id = old };

			if (!core_ioctl(p, C_CTX_DESTROY, f->fd,
					DRM_IOCTL_METAINFER_CTX_DESTROY, &d))
				stale_push(f->stale_ctx, &f->nstale_ctx, old);
		}
		f->ctx[c->ctx_slot] = a->ctx_id;
		break;
	}
	case C_SUBMIT: {
		struct drm_metainfer_submit *a = (void *)c->arg;

		if (c->validate)
			break;
		f->job[f->njob % NJOB].ctx = a->ctx_id;
		f->job[f->njob % NJOB].seqno = a->seqno;
		f->njob++;
		__atomic_fetch_add(&sh->jobs_run, 1, __ATOMIC_RELAXED);
		if (c->sync_slot >= 0 && a->out_sync == f->sync[c->sync_slot].handle) {
			f->sync[c->sync_slot].kind = S_FENCED;
			f->sync[c->sync_slot].point = c->out_point;
		}
		break;
	}
	default:
		break;
	}
}

typedef void (*prep_fn)(struct proc *, struct call *);

static const prep_fn uring_preps[] = {
	prep_get_param, prep_bo_info, prep_ctx_create, prep_submit,
	prep_submit,	prep_wait,    prep_counters,
};

static struct call calls[8];

/* One MetaInfer ioctl, prepared by @prep, on file @fi. */
static void do_mi_ioctl(struct proc *p, prep_fn prep, int fi)
{
	struct call *c = &calls[0];
	int ret;

	memset(c, 0, sizeof(*c));
	c->fi = fi;
	prep(p, c);
	ret = mi_ioctl(p->f[fi].fd, c->req, c->arg);
	count(p, c->kind, ret);
	trace(p, c->kind, ret);
	finish(p, c, ret);
}

/*
 * 1..6 MetaInfer commands as IORING_OP_URING_CMD in one io_uring_enter(),
 * then every completion (each must come: the waits are bounded).
 */
static void do_uring(struct proc *p, int fi)
{
	int n = 1 + (int)below(p, 6), i, got = 0, submitted;

	if (!p->ring_ok)
		return;
	for (i = 0; i < n; i++) {
		struct call *c = &calls[i];
		struct io_uring_sqe *sqe = io_uring_get_sqe(&p->ring);
		struct drm_metainfer_uring_cmd cmd = { 0 };

		memset(c, 0, sizeof(*c));
		c->fi = fi;
		uring_preps[below(p, sizeof(uring_preps) / sizeof(uring_preps[0]))](p, c);
		cmd.arg_ptr = (uintptr_t)c->arg;
		if (rare(p, 30))
			cmd.flags = 1;
		if (rare(p, 20))
			cmd.pad = 1;
		if (rare(p, 20))
			cmd.arg_ptr = 16;
		io_uring_prep_rw(IORING_OP_URING_CMD, sqe, p->f[fi].fd, NULL, 0, 0);
		sqe->cmd_op = rare(p, 40) ? (uint32_t)DRM_IOCTL_GEM_CLOSE :
			      rare(p, 20) ? (uint32_t)rnd(p) : (uint32_t)c->req;
		memcpy(sqe->cmd, &cmd, sizeof(cmd));
		sqe->user_data = (uint64_t)i;
	}
	submitted = io_uring_submit(&p->ring);
	if (submitted < 0)
		submitted = 0;
	while (got < submitted) {
		struct io_uring_cqe *cqe;
		int ret = io_uring_wait_cqe(&p->ring, &cqe);

		if (ret == -EINTR)
			continue;
		if (ret)
			break;
		if (cqe->user_data < (uint64_t)n) {
			struct call *c = &calls[cqe->user_data];

			count(p, C_URING_CMD, cqe->res);
			trace(p, C_URING_CMD, cqe->res);
			finish(p, c, cqe->res);
			c->has_stream = false;
		}
		io_uring_cqe_seen(&p->ring, cqe);
		got++;
	}
	for (i = 0; i < n; i++)
		if (calls[i].has_stream)
			mi_stream_free(&calls[i].stream);
}

/* Fill the first bytes of a buffer with random data (the ops compute it). */
static void fill_bo(struct proc *p, int fd, uint32_t handle)
{
	uint64_t size, i;
	uint8_t *m = mi_bo_map(fd, handle, &size);

	if (!m)
		return;
	for (i = 0; i < size && i < 4096; i += 8) {
		uint64_t v = rnd(p);

		memcpy(m + i, &v, 8);
	}
	if (!p->map && chance(p, 20)) {
		p->map = m;
		p->map_size = size;
		return;
	}
	munmap(m, size);
}

static sigjmp_buf bus_jmp;
static volatile sig_atomic_t in_touch;

static void on_sigbus(int sig)
{
	if (in_touch)
		siglongjmp(bus_jmp, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Write to the kept mapping (its buffer's handle may be closed, its file
 * closed, its device removed); SIGBUS is an answer, not a crash.
 */
static void do_touch(struct proc *p)
{
	if (!p->map)
		return;
	in_touch = 1;
	if (!sigsetjmp(bus_jmp, 1)) {
		p->map[below(p, (uint32_t)p->map_size)] ^= 0x5a;
		__atomic_fetch_add(&sh->map_touches, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_fetch_add(&sh->map_faults, 1, __ATOMIC_RELAXED);
	}
	in_touch = 0;
	if (chance(p, 10)) {
		munmap(p->map, p->map_size);
		p->map = NULL;
	}
}

static void do_bo_create(struct proc *p, int fi)
{
	struct file *f = &p->f[fi];
	static const uint64_t sizes[] = { 64, 4096, 16384, 65536, 1 << 20 };
	struct drm_metainfer_bo_create a;
	int slot = (int)below(p, NBO), ret;
	uint8_t buf[64] = { 0 };

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.bo_size = 1 + below(p, sizes[below(p, 5)]);
	if (rare(p, 40))
		a.bo_size = chance(p, 50) ? 0 : interesting64(p) | (1ull << 60);
	if (rare(p, 30))
		a.flags = 1u << below(p, 32);
	if (rare(p, 20))
		a.pad = 1;
	if (rare(p, 30)) { /* a size past the struct with a non-zero tail */
		memcpy(buf, &a, sizeof(a));
		buf[sizeof(a) + 3] = 7;
		((struct drm_metainfer_bo_create *)buf)->size = sizeof(a) + 8;
		ret = core_ioctl(p, C_BO_CREATE, f->fd,
				 DRM_IOCTL_METAINFER_BO_CREATE, buf);
		return;
	}
	ret = core_ioctl(p, C_BO_CREATE, f->fd, DRM_IOCTL_METAINFER_BO_CREATE, &a);
	if (ret)
		return;
	if (f->bo[slot].handle) {
		struct drm_gem_close cl = { .handle = f->bo[slot].handle };

		if (!core_ioctl(p, C_GEM_CLOSE, f->fd, DRM_IOCTL_GEM_CLOSE, &cl))
			stale_push(f->stale_bo, &f->nstale_bo, cl.handle);
	}
	f->bo[slot].handle = a.handle;
	f->bo[slot].size = a.bo_size;
	if (chance(p, 40))
		fill_bo(p, f->fd, a.handle);
}

static void do_gem_close(struct proc *p, int fi)
{
	struct file *f = &p->f[fi];
	uint64_t size;
	struct drm_gem_close cl = { .handle = pick_bo(p, fi, &size) };
	int i;

	/*
	 * pick_bo()'s stale and foreign handles are mostly valid again here
	 * (DRM reuses the lowest free handle), so its few invalid ones left
	 * some runs without any rejected GEM_CLOSE (seen in the debug kernel): add
	 * handles no file has.
	 */
	if (chance(p, 10))
		cl.handle = chance(p, 50) ? 0 : 0x7fff0000u + below(p, 0x10000);
	if (core_ioctl(p, C_GEM_CLOSE, f->fd, DRM_IOCTL_GEM_CLOSE, &cl))
		return;
	for (i = 0; i < NBO; i++)
		if (f->bo[i].handle == cl.handle)
			f->bo[i].handle = 0;
	stale_push(f->stale_bo, &f->nstale_bo, cl.handle);
}

static void do_ctx_destroy(struct proc *p, int fi)
{
	struct file *f = &p->f[fi];
	struct drm_metainfer_ctx_destroy d;
	int i, ret;

	memset(&d, 0, sizeof(d));
	d.size = sizeof(d);
	d.ctx_id = pick_ctx(p, fi);
	if (rare(p, 30))
		d.flags = 1;
	if (rare(p, 20))
		d.size = DRM_METAINFER_CTX_DESTROY_SIZE_VER0 - 4;
	ret = core_ioctl(p, C_CTX_DESTROY, f->fd, DRM_IOCTL_METAINFER_CTX_DESTROY, &d);
	if (ret)
		return;
	for (i = 0; i < NCTX; i++)
		if (f->ctx[i] == d.ctx_id)
			f->ctx[i] = 0;
	stale_push(f->stale_ctx, &f->nstale_ctx, d.ctx_id);
}

static void do_prime(struct proc *p, int fi)
{
	struct file *f = &p->f[fi];
	int slot = (int)below(p, NDMABUF);
	uint64_t size;

	if (chance(p, 50) || p->dmabuf[slot] < 0) {
		struct drm_prime_handle e = { .handle = pick_bo(p, fi, &size),
					      .flags = DRM_CLOEXEC | DRM_RDWR };

		if (rare(p, 50))
			e.flags |= 1u << (3 + below(p, 20));
		if (core_ioctl(p, C_PRIME_EXPORT, f->fd,
			       DRM_IOCTL_PRIME_HANDLE_TO_FD, &e))
			return;
		if (p->dmabuf[slot] >= 0)
			close(p->dmabuf[slot]);
		p->dmabuf[slot] = e.fd;
	} else {
		/* into either file: the same file gives the handle back */
		int to = (int)below(p, 2), s = (int)below(p, NBO);
		struct file *t = &p->f[to];
		struct drm_prime_handle im = { .fd = p->dmabuf[slot] };
		off_t len;

		if (chance(p, 10))
			im.fd = chance(p, 50) ? -1 : t->fd; /* not a dma-buf */
		if (core_ioctl(p, C_PRIME_IMPORT, t->fd,
			       DRM_IOCTL_PRIME_FD_TO_HANDLE, &im))
			return;
		len = lseek(im.fd, 0, SEEK_END);
		for (int i = 0; i < NBO; i++)
			if (t->bo[i].handle == im.handle)
				return;
		if (t->bo[s].handle) {
			struct drm_gem_close cl = { .handle = t->bo[s].handle };

			if (!core_ioctl(p, C_GEM_CLOSE, t->fd, DRM_IOCTL_GEM_CLOSE, &cl))
				stale_push(t->stale_bo, &t->nstale_bo, cl.handle);
		}
		t->bo[s].handle = im.handle;
		t->bo[s].size = len > 0 ? (uint64_t)len : 0;
	}
}

static void sync_destroy_slot(struct proc *p, struct file *f, int s)
{
	struct drm_syncobj_destroy d = { .handle = f->sync[s].handle };

	if (!core_ioctl(p, C_SYNCOBJ_DESTROY, f->fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d))
		stale_push(f->stale_sync, &f->nstale_sync, d.handle);
	memset(&f->sync[s], 0, sizeof(f->sync[s]));
}

static void do_syncobj(struct proc *p, int fi)
{
	struct file *f = &p->f[fi];
	int s = (int)below(p, NSYNC), ret;
	uint32_t r = below(p, 100);

	if (r < 45) { /* create, signalled or empty */
		struct drm_syncobj_create c = { 0 };

		if (chance(p, 50))
			c.flags = DRM_SYNCOBJ_CREATE_SIGNALED;
		if (rare(p, 60))
			c.flags |= 1u << (1 + below(p, 31));
		if (core_ioctl(p, C_SYNCOBJ_CREATE, f->fd, DRM_IOCTL_SYNCOBJ_CREATE, &c))
			return;
		if (f->sync[s].handle)
			sync_destroy_slot(p, f, s);
		f->sync[s].handle = c.handle;
		f->sync[s].kind = c.flags ? S_SIGNALLED : S_EMPTY;
	} else if (r < 60) { /* destroy: own, stale or the other file's */
		struct drm_syncobj_destroy d = { 0 };

		if (f->sync[s].handle && chance(p, 70)) {
			sync_destroy_slot(p, f, s);
			return;
		}
		d.handle = chance(p, 50) ? stale_pick(p, f->stale_sync, f->nstale_sync) :
					   (uint32_t)rnd(p);
		if (rare(p, 100))
			d.pad = 1;
		core_ioctl(p, C_SYNCOBJ_DESTROY, f->fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d);
	} else if (r < 85) { /* export to the other file */
		struct drm_syncobj_handle e = { 0 }, im = { 0 };
		struct file *t = other(p, fi);
		int ts = (int)below(p, NSYNC);

		s = pick_sync_slot(p, f);
		e.handle = s >= 0 && chance(p, 90) ? f->sync[s].handle : (uint32_t)rnd(p);
		if (rare(p, 50))
			e.flags = 1u << (2 + below(p, 30));
		if (core_ioctl(p, C_SYNCOBJ_EXPORT, f->fd,
			       DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &e))
			return;
		im.fd = e.fd;
		if (chance(p, 10))
			im.fd = -1;
		ret = core_ioctl(p, C_SYNCOBJ_IMPORT, t->fd,
				 DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &im);
		close(e.fd);
		if (ret)
			return;
		if (t->sync[ts].handle)
			sync_destroy_slot(p, t, ts);
		if (s >= 0)
			t->sync[ts] = f->sync[s];
		t->sync[ts].handle = im.handle;
	} else if (p->sw_tl >= 0) {
		/* a sw_sync fence: signalled later, or never (until exit) */
		struct sw_sync_create_fence_data d = { 0 };
		struct drm_syncobj_handle im = { 0 };

		if (chance(p, 30)) {
			uint32_t inc = 1 + below(p, 2);

			ioctl(p->sw_tl, SW_SYNC_IOC_INC, &inc);
			return;
		}
		/* the parent moves the timeline on by 1 a second */
		d.value = __atomic_load_n(&sh->sw_value, __ATOMIC_RELAXED) + 1 +
			  (chance(p, 30) ? SW_NEVER : below(p, 3));
		strcpy(d.name, "uapi-fuzz");
		if (ioctl(p->sw_tl, SW_SYNC_IOC_CREATE_FENCE, &d))
			return;
		__atomic_fetch_add(&sh->sw_fences, 1, __ATOMIC_RELAXED);
		if (!f->sync[s].handle || f->sync[s].point) {
			close(d.fence);
			return;
		}
		im.fd = d.fence;
		im.handle = f->sync[s].handle;
		im.flags = DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE;
		if (!core_ioctl(p, C_SYNCOBJ_IMPORT, f->fd,
				DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &im))
			f->sync[s].kind = S_FENCED;
		close(d.fence);
	}
}

static void do_knob(struct proc *p)
{
	static const char *const knobs[] = { "fail_hang", "fail_dma" };

	if (!mi_sim_knob(opt_sim_id, knobs[below(p, 2)], 1))
		__atomic_fetch_add(&sh->knobs, 1, __ATOMIC_RELAXED);
}

/* One step: a call chosen by weight, on one of the two files. */
static void step(struct proc *p)
{
	int fi = chance(p, 75) ? 0 : 1;
	uint32_t r = below(p, 1000);

	if (p->lost && !reopen(p, -1)) {
		usleep(20000);
		return;
	}
	if (r < 40)
		do_mi_ioctl(p, prep_get_param, fi);
	else if (r < 130)
		do_bo_create(p, fi);
	else if (r < 170)
		do_mi_ioctl(p, prep_bo_info, fi);
	else if (r < 200)
		do_gem_close(p, fi);
	else if (r < 260)
		do_mi_ioctl(p, prep_ctx_create, fi);
	else if (r < 280)
		do_ctx_destroy(p, fi);
	else if (r < 560)
		do_mi_ioctl(p, prep_submit, fi);
	else if (r < 660)
		do_mi_ioctl(p, prep_wait, fi);
	else if (r < 690)
		do_mi_ioctl(p, prep_counters, fi);
	else if (r < 780)
		do_uring(p, fi);
	else if (r < 840)
		do_prime(p, fi);
	else if (r < 986)
		do_syncobj(p, fi);
	else if (r < 992)
		do_touch(p);
	else if (r < 997)
		reopen(p, fi);
	else
		do_knob(p);
}

/* Drop CAP_SYS_NICE: HIGH priority contexts then fail with -EACCES. */
static void drop_sys_nice(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return;
	d[CAP_SYS_NICE / 32].effective &= ~(1u << (CAP_SYS_NICE % 32));
	syscall(SYS_capset, &h, d);
}

static int child(int slot, unsigned int gen)
{
	struct proc p;
	int i;

	memset(&p, 0, sizeof(p));
	p.slot = slot;
	p.rng = opt_seed * 0x9e3779b97f4a7c15ull + (uint64_t)slot * 1000003 +
		gen * 7919 + 1;
	p.f[0].fd = p.f[1].fd = -1;
	for (i = 0; i < NDMABUF; i++)
		p.dmabuf[i] = -1;
	p.sw_tl = sw_timeline;
	signal(SIGBUS, on_sigbus);
	if (slot == 1)
		drop_sys_nice();
	p.ring_ok = io_uring_queue_init(32, &p.ring, 0) == 0;
	if (!reopen(&p, -1))
		p.lost = true;
	for (p.step = sh->done[slot]; p.step < opt_iters; p.step++) {
		if (sh->deadline_ns && mi_now_ns() > sh->deadline_ns)
			break;
		step(&p);
		sh->done[slot] = p.step + 1;
		__atomic_fetch_add(&sh->steps, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

/* ---------------------------------------------------------------- parent */

static pid_t pids[MAX_PROCS];
static unsigned int gens[MAX_PROCS];

static pid_t spawn(int slot)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(child(slot, gens[slot]));
	return pid;
}

static int sim_create(const char *pers)
{
	int ret = mi_sim_new(opt_sim_id, pers, NULL);

	if (ret)
		fprintf(stderr, "uapi-fuzz: cannot create sim device %u (%s): %s\n",
			opt_sim_id, pers, strerror(-ret));
	return ret;
}

static void usage(void)
{
	printf("Usage: uapi-fuzz [options]\n"
	       "  -s, --seed N         PRNG seed (default 1)\n"
	       "  -p, --procs N        processes (default 4, at most %d)\n"
	       "  -n, --iters M        steps per process (default 500)\n"
	       "  -t, --time SEC       stop after SEC seconds (default: no limit)\n"
	       "  -i, --sim-id ID      metainfer_sim device id to create (default 40)\n"
	       "  -P, --personality P  its personality (default ethos-u55-high)\n"
	       "  -k, --kills N        processes killed and respawned mid-run (default: procs)\n"
	       "      --no-del         do not remove and re-create the device mid-run\n"
	       "      --trace          print every call\n"
	       "Run as root in the test VM (tools/vm/vmrun) with metainfer_sim loaded.\n",
	       MAX_PROCS);
}

static void print_report(double secs, int kills, int dels)
{
	int k, e;

	printf("uapi-fuzz: seed %llu, %d processes x %llu steps (%llu run), "
	       "%d kills, %d del_device, %.1f s\n",
	       (unsigned long long)opt_seed, opt_procs,
	       (unsigned long long)opt_iters, (unsigned long long)sh->steps,
	       kills, dels, secs);
	printf("uapi-fuzz: %llu jobs queued, %llu reopens, %llu fault knobs, "
	       "%llu sw_sync fences (all signalled %llu times), "
	       "%llu/%llu kept-mapping writes faulted\n",
	       (unsigned long long)sh->jobs_run, (unsigned long long)sh->reopens,
	       (unsigned long long)sh->knobs, (unsigned long long)sh->sw_fences,
	       (unsigned long long)sh->releases,
	       (unsigned long long)sh->map_faults,
	       (unsigned long long)(sh->map_touches + sh->map_faults));
	printf("%-16s %9s %9s  %s\n", "call", "accepted", "rejected",
	       "rejections by errno");
	for (k = 0; k < C_COUNT; k++) {
		char errs[512] = "";
		size_t len = 0;

		for (e = 1; e < MAX_ERRNO; e++) {
			const char *name;

			if (!sh->err[k][e])
				continue;
			name = strerrorname_np(e);
			len += snprintf(errs + len, sizeof(errs) - len, "%s%s %llu",
					len ? ", " : "", name ? name : "?",
					(unsigned long long)sh->err[k][e]);
			if (len >= sizeof(errs))
				break;
		}
		printf("%-16s %9llu %9llu  %s\n", call_name[k],
		       (unsigned long long)sh->acc[k],
		       (unsigned long long)sh->rej[k], errs);
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "seed", required_argument, 0, 's' },
		{ "procs", required_argument, 0, 'p' },
		{ "iters", required_argument, 0, 'n' },
		{ "time", required_argument, 0, 't' },
		{ "sim-id", required_argument, 0, 'i' },
		{ "personality", required_argument, 0, 'P' },
		{ "kills", required_argument, 0, 'k' },
		{ "no-del", no_argument, 0, 'D' },
		{ "trace", no_argument, 0, 'T' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 }
	};
	uint64_t prng, total, next_kill = 0, del_at;
	int c, i, kills = 0, dels = 0, alive, failed = 0, kills_left;
	int64_t t0, hard_deadline, last_report, last_tick, last_progress;
	uint64_t last_steps = 0;
	bool released_end = false;
	const char *pers2;

	while ((c = getopt_long(argc, argv, "s:p:n:t:i:P:k:h", lo, NULL)) != -1) {
		switch (c) {
		case 's': opt_seed = strtoull(optarg, NULL, 0); break;
		case 'p': opt_procs = atoi(optarg); break;
		case 'n': opt_iters = strtoull(optarg, NULL, 0); break;
		case 't': opt_time = atoi(optarg); break;
		case 'i': opt_sim_id = (unsigned int)atoi(optarg); break;
		case 'P': opt_pers = optarg; break;
		case 'k': opt_kills = atoi(optarg); break;
		case 'D': opt_del = 0; break;
		case 'T': opt_trace = 1; break;
		case 'h': usage(); return 0;
		default: usage(); return 2;
		}
	}
	if (opt_procs < 1 || opt_procs > MAX_PROCS || !opt_iters || opt_time < 0) {
		fprintf(stderr, "uapi-fuzz: --procs must be 1..%d, --iters >= 1, --time >= 0\n",
			MAX_PROCS);
		return 2;
	}
	if (opt_kills < 0)
		opt_kills = opt_procs;
	if (!mi_sim_present()) {
		fprintf(stderr, "uapi-fuzz: %s missing: load metainfer_sim (run in tools/vm/vmrun)\n",
			MI_SIM_BUS);
		return 1;
	}
	if (mi_sim_minor(opt_sim_id) >= 0) {
		fprintf(stderr, "uapi-fuzz: sim device %u exists already; pick another --sim-id\n",
			opt_sim_id);
		return 1;
	}
	if (sim_create(opt_pers))
		return 1;
	pers2 = strcmp(opt_pers, "dsp-nchw") ? "dsp-nchw" : "ethos-u55-high";

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("uapi-fuzz: mmap");
		return 1;
	}
	memset(sh, 0, sizeof(*sh));
	setvbuf(stdout, NULL, _IOLBF, 0);
	/*
	 * One sw_sync timeline for all (debug kernels; Debian's has none).
	 * A job waiting on a fence that never signals makes a close of its
	 * file, and CTX_DESTROY, wait for it (6.1's drm_sched waits for a
	 * killed job's dependencies), so the parent, not the process, owns the
	 * timeline and signals everything when the processes stop making
	 * progress and at the end.
	 */
	sw_timeline = open(SW_SYNC_PATH, O_RDWR | O_CLOEXEC);
	t0 = mi_now_ns();
	last_report = last_tick = last_progress = t0;
	if (opt_time)
		sh->deadline_ns = t0 + (int64_t)opt_time * 1000000000LL;
	/* generous: a stuck process is a finding, not a slow one */
	hard_deadline = t0 + (int64_t)(opt_time ? opt_time + 120 : 1800) * 1000000000LL;

	/* The parent's plan (kill points, removal point) comes from the seed. */
	prng = opt_seed ^ 0x5bd1e995u;
	total = opt_iters * (uint64_t)opt_procs;
	del_at = opt_del ? total / 3 + mi_rand(&prng) % (total / 3 + 1) : ~0ull;
	kills_left = opt_kills;
	if (kills_left)
		next_kill = mi_rand(&prng) % (total / (kills_left + 1) + 1) + 1;

	for (i = 0; i < opt_procs; i++)
		pids[i] = spawn(i);
	signal(SIGPIPE, SIG_IGN);

	for (;;) {
		int st;
		pid_t pid;
		uint64_t steps = __atomic_load_n(&sh->steps, __ATOMIC_RELAXED);

		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			for (i = 0; i < opt_procs; i++)
				if (pids[i] == pid)
					break;
			if (i == opt_procs)
				continue;
			if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && gens[i] & 0x80000000u) {
				/* ours: respawn where it was */
				gens[i] = (gens[i] & 0x7fffffffu) + 1;
				pids[i] = spawn(i);
				continue;
			}
			if (WIFSIGNALED(st)) {
				fprintf(stderr, "uapi-fuzz: process %d died of signal %d (%s) at step %llu\n",
					i, WTERMSIG(st), strsignal(WTERMSIG(st)),
					(unsigned long long)sh->done[i]);
				failed = 1;
			} else if (WEXITSTATUS(st)) {
				fprintf(stderr, "uapi-fuzz: process %d exited with %d\n", i,
					WEXITSTATUS(st));
				failed = 1;
			}
			pids[i] = 0;
		}
		alive = 0;
		for (i = 0; i < opt_procs; i++)
			alive += pids[i] > 0;
		if (!alive)
			break;

		if (kills_left && steps >= next_kill) {
			int v = (int)(mi_rand(&prng) % (uint64_t)opt_procs);

			if (pids[v] > 0 && sh->done[v] < opt_iters &&
			    !(gens[v] & 0x80000000u)) {
				gens[v] |= 0x80000000u;
				kill(pids[v], SIGKILL);
				kills++;
			}
			kills_left--;
			next_kill = steps + mi_rand(&prng) % (total / (opt_kills + 1) + 1) + 1;
		}
		if (steps >= del_at) {
			/* remove the device under the processes, then bring it back */
			int ret = mi_sim_del(opt_sim_id);

			if (ret) {
				fprintf(stderr, "uapi-fuzz: del_device %u: %s\n",
					opt_sim_id, strerror(-ret));
				failed = 1;
			} else {
				dels++;
				usleep(50000 + (useconds_t)(mi_rand(&prng) % 150000));
				if (sim_create(pers2))
					failed = 1;
			}
			del_at = ~0ull;
		}
		if (sw_timeline >= 0) {
			int64_t now = mi_now_ns();
			bool end = true;
			uint32_t inc = 0;

			for (i = 0; i < opt_procs; i++)
				if (pids[i] > 0 && sh->done[i] < opt_iters)
					end = false;
			if (sh->deadline_ns && now > sh->deadline_ns)
				end = true;
			if (steps != last_steps) {
				last_steps = steps;
				last_progress = now;
			}
			if (now - last_tick > 1000000000LL) {
				inc = 1;
				last_tick = now;
			}
			if ((end && !released_end) ||
			    now - last_progress > 15000000000LL) {
				if (!end)
					fprintf(stderr, "uapi-fuzz: no step for 15 s: signalling every sw_sync fence\n");
				released_end = end;
				inc = 2 * SW_NEVER;
				last_progress = now;
				sh->releases++;
			}
			if (inc && !ioctl(sw_timeline, SW_SYNC_IOC_INC, &inc))
				__atomic_fetch_add(&sh->sw_value, inc, __ATOMIC_RELAXED);
		}
		if (mi_now_ns() - last_report > 30000000000LL) {
			/* a line now and then: a slow run is told from a stuck one */
			last_report = mi_now_ns();
			fprintf(stderr, "uapi-fuzz: %llu steps after %.0f s:",
				(unsigned long long)steps, (last_report - t0) / 1e9);
			for (i = 0; i < opt_procs; i++)
				fprintf(stderr, " %llu", (unsigned long long)sh->done[i]);
			fprintf(stderr, "\n");
		}
		if (mi_now_ns() > hard_deadline) {
			fprintf(stderr, "uapi-fuzz: processes still running %d s after the deadline:\n",
				opt_time ? 120 : 1800);
			for (i = 0; i < opt_procs; i++) {
				char path[64], buf[4096];
				int n;

				if (pids[i] <= 0)
					continue;
				snprintf(path, sizeof(path), "/proc/%d/stack", pids[i]);
				n = mi_read_file(path, buf, sizeof(buf));
				fprintf(stderr, "uapi-fuzz: process %d (pid %d) at step %llu, kernel stack:\n%s\n",
					i, pids[i], (unsigned long long)sh->done[i],
					n > 0 ? buf : "(unreadable)");
				kill(pids[i], SIGKILL);
			}
			failed = 1;
			hard_deadline = INT64_MAX;
		}
		usleep(5000);
	}

	print_report((mi_now_ns() - t0) / 1e9, kills, dels);
	for (c = 0; c < C_COUNT; c++) {
		if (!sh->acc[c]) {
			fprintf(stderr, "uapi-fuzz: FAIL: %s was never accepted\n", call_name[c]);
			failed = 1;
		}
		if (!sh->rej[c]) {
			fprintf(stderr, "uapi-fuzz: FAIL: %s was never rejected\n", call_name[c]);
			failed = 1;
		}
	}
	c = mi_sim_del(opt_sim_id);
	if (c) {
		fprintf(stderr, "uapi-fuzz: removing sim device %u at the end: %s\n",
			opt_sim_id, strerror(-c));
		failed = 1;
	}
	printf("uapi-fuzz: %s\n", failed ? "FAIL" : "ok");
	return failed;
}
