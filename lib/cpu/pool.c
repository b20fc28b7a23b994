// SPDX-License-Identifier: MIT
/*
 * Process-wide thread pool.  Workers spin for a short while on a
 * generation counter (the gap between two kernels of one inference is
 * usually microseconds), then sleep on a futex.  The caller takes part as
 * thread 0 and waits on a pending counter the same way.
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/cpu.h"

#define POOL_MAX 64
#define SPIN_ITERS 1000 /* ~50 us with pause: bridges kernel-to-kernel gaps */

static struct {
	pthread_mutex_t lock; /* held for the whole of one run */
	pthread_mutex_t grow;
	int nworkers;
	atomic_int gen;
	atomic_int pending;
	atomic_int sleepers;
	mi_pool_fn fn;
	void *ctx;
	int nt;
	int start_gen[POOL_MAX]; /* gen when worker t was created */
} pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.grow = PTHREAD_MUTEX_INITIALIZER,
};

static void futex_wait(atomic_int *addr, int val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_int *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

int mi_cpu_ncores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (n > POOL_MAX ? POOL_MAX : (int)n);
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	int seen = pool.start_gen[t];

	for (;;) {
		int g, i;

		for (i = 0; i < SPIN_ITERS; i++) {
			g = atomic_load_explicit(&pool.gen,
						 memory_order_acquire);
			if (g != seen)
				break;
			cpu_relax();
		}
		while ((g = atomic_load_explicit(&pool.gen,
						 memory_order_acquire)) == seen) {
			atomic_fetch_add(&pool.sleepers, 1);
			if (atomic_load(&pool.gen) == seen)
				futex_wait(&pool.gen, seen);
			atomic_fetch_sub(&pool.sleepers, 1);
		}
		seen = g;
		/* Every worker acknowledges every run, so no new run can
		 * start before all of them have seen this one. */
		if (t < pool.nt)
			pool.fn(pool.ctx, t, pool.nt);
		if (atomic_fetch_sub_explicit(&pool.pending, 1,
					      memory_order_acq_rel) == 1)
			futex_wake(&pool.pending, 1);
	}
	return NULL;
}

/* Make sure nt-1 workers exist; returns how many threads can run. */
static int pool_grow(int nt)
{
	pthread_mutex_lock(&pool.grow);
	while (pool.nworkers < nt - 1 && pool.nworkers < POOL_MAX - 1) {
		pthread_t th;
		pthread_attr_t at;

		/* gen cannot move: callers hold pool.lock */
		pool.start_gen[pool.nworkers + 1] = atomic_load(&pool.gen);
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &at, worker,
				   (void *)(intptr_t)(pool.nworkers + 1))) {
			pthread_attr_destroy(&at);
			break;
		}
		pthread_attr_destroy(&at);
		pool.nworkers++;
	}
	nt = nt - 1 > pool.nworkers ? pool.nworkers + 1 : nt;
	pthread_mutex_unlock(&pool.grow);
	return nt;
}

void mi_pool_run(int nt, mi_pool_fn fn, void *ctx)
{
	int t, i, p;

	if (nt < 1)
		nt = 1;
	if (nt > 1 && pthread_mutex_trylock(&pool.lock) == 0) {
		int got = pool_grow(nt);

		if (got == nt) {
			pool.fn = fn;
			pool.ctx = ctx;
			pool.nt = nt;
			atomic_store(&pool.pending, pool.nworkers);
			atomic_fetch_add_explicit(&pool.gen, 1,
						  memory_order_release);
			if (atomic_load(&pool.sleepers))
				futex_wake(&pool.gen, INT_MAX);
			fn(ctx, 0, nt);
			for (i = 0; i < SPIN_ITERS; i++) {
				if (!atomic_load_explicit(&pool.pending,
							  memory_order_acquire))
					break;
				cpu_relax();
			}
			while ((p = atomic_load(&pool.pending)) != 0)
				futex_wait(&pool.pending, p);
			pthread_mutex_unlock(&pool.lock);
			return;
		}
		pthread_mutex_unlock(&pool.lock);
	}
	/* Busy, nested or single-threaded: same chunks, in the caller. */
	for (t = 0; t < nt; t++)
		fn(ctx, t, nt);
}

static atomic_int cfg_threads;

int mi_cpu_nthreads(void)
{
	int n = atomic_load(&cfg_threads);

	return n > 0 ? n : mi_cpu_ncores();
}

void mi_cpu_set_nthreads(int nt)
{
	atomic_store(&cfg_threads, nt > 0 ? (nt > POOL_MAX ? POOL_MAX : nt) : 0);
}

struct pfor {
	int n;
	void (*fn)(void *arg, int i, int tid);
	void *arg;
};

static void pfor_thread(void *ctx, int t, int nt)
{
	const struct pfor *p = ctx;
	int64_t b, e, i;

	mi_chunk(p->n, t, nt, &b, &e);
	for (i = b; i < e; i++)
		p->fn(p->arg, (int)i, t);
}

void mi_cpu_parallel_for(int n, void (*fn)(void *arg, int i, int tid),
			 void *arg)
{
	struct pfor p = { .n = n, .fn = fn, .arg = arg };
	int nt = mi_cpu_nthreads();

	if (n <= 0)
		return;
	mi_pool_run(nt < n ? nt : n, pfor_thread, &p);
}
