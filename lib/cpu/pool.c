// SPDX-License-Identifier: MIT
/*
 * Process-wide thread pool.  Workers spin for a short while on a
 * generation counter (the gap between two kernels of one inference is
 * usually microseconds), then poll it while yielding the core
 * (sched_yield, so other runnable threads are not held off) for up to a
 * millisecond, then sleep on a futex.  A futex wake costs the caller a
 * syscall and an IPI (a VM exit in a guest) and the woken worker joins
 * tens of microseconds late; between the split nodes of a mobile CNN
 * (tables, pools, small convs on one thread) the worker used to be asleep
 * before almost every run.
 *
 * A run does not wait for workers that are late: each worker *joins* the
 * open run by claiming the next thread index with a CAS on the run state;
 * the caller, once done with index 0, closes the run and executes every
 * index nobody claimed itself, then waits only for the workers that
 * joined.  On a loaded machine (a worker descheduled for a time slice)
 * a run thus never stalls on a thread that has not started; jobs that
 * claim their work dynamically (struct mi_work) also rebalance the work
 * of a worker that starts late.
 */
#include <dlfcn.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "debug.h"
#include "cpu/cpu.h"

#define POOL_MAX 64
#define SPIN_ITERS 1000 /* ~20 us with pause: bridges kernel-to-kernel gaps */
#define YIELD_POLL 100   /* pauses between two sched_yield() calls (~2 us) */
#ifndef YIELD_NS
#define YIELD_NS 1000000L /* then polls with sched_yield() before sleeping */
#endif

/* run state: bit 31 closed, bits 30..16 nt, bits 15..0 workers joined */
#define ST_CLOSED (1u << 31)
#define ST_NT(s) (((s) >> 16) & 0x7fff)
#define ST_JOINED(s) ((s) & 0xffff)

static struct {
	pthread_mutex_t lock; /* held for the whole of one run */
	pthread_mutex_t grow;
	int nworkers;
	atomic_int gen;
	atomic_uint state;
	atomic_int done;      /* joined workers finished */
	atomic_int cwait;     /* caller sleeps on done */
	atomic_int sleepers;
	mi_pool_fn fn;
	void *ctx;
	int start_gen[POOL_MAX]; /* gen when worker t was created */
} pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.grow = PTHREAD_MUTEX_INITIALIZER,
	.state = ST_CLOSED,
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

/* Join the open run if it still has an unclaimed index; run it. */
static void worker_join(void)
{
	unsigned int s = atomic_load_explicit(&pool.state, memory_order_acquire);

	while (!(s & ST_CLOSED) && ST_JOINED(s) + 1 < ST_NT(s)) {
		if (atomic_compare_exchange_weak_explicit(
			    &pool.state, &s, s + 1, memory_order_acq_rel,
			    memory_order_acquire)) {
			/* fn/ctx were published before the state opened */
			pool.fn(pool.ctx, (int)ST_JOINED(s) + 1, (int)ST_NT(s));
			atomic_fetch_add(&pool.done, 1);
			if (atomic_load(&pool.cwait))
				futex_wake(&pool.done, 1);
			return;
		}
	}
}

/* Spin up to iters pauses for the generation to move off seen; return it. */
static int poll_gen(int seen, int iters)
{
	int g = seen;

	for (int i = 0; i < iters; i++) {
		g = atomic_load_explicit(&pool.gen, memory_order_acquire);
		if (g != seen)
			break;
		cpu_relax();
	}
	return g;
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	int seen = pool.start_gen[t];

	for (;;) {
		int g;

		g = poll_gen(seen, SPIN_ITERS);
		/* then poll and yield the core for a while before sleeping */
		if (g == seen) {
			struct timespec t0, t1;
			long ns = 0;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			while (ns < YIELD_NS) {
				g = poll_gen(seen, YIELD_POLL);
				if (g != seen)
					break;
				sched_yield();
				clock_gettime(CLOCK_MONOTONIC, &t1);
				ns = (t1.tv_sec - t0.tv_sec) * 1000000000L +
				     (t1.tv_nsec - t0.tv_nsec);
			}
		}
		while ((g = atomic_load(&pool.gen)) == seen) {
			atomic_fetch_add(&pool.sleepers, 1);
			if (atomic_load(&pool.gen) == seen)
				futex_wait(&pool.gen, seen);
			atomic_fetch_sub(&pool.sleepers, 1);
		}
		seen = g;
		worker_join();
	}
	return NULL;
}

/* Make sure nt-1 workers exist (as far as threads can be created). */
static void pool_grow(int nt)
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
	pthread_mutex_unlock(&pool.grow);
}

/*
 * MI_DEBUG=pool: at exit, print how many runs the pool opened, how many
 * thread indices no worker joined (the caller ran them), how often the
 * caller slept on the futex, and per pool function (fn) the caller's
 * time between finishing its own indices and the last joined worker
 * finishing: the imbalance and join latency of that kind of node at
 * this thread count.  Functions are printed as offsets in their ELF
 * file, for `addr2line -f -e FILE OFFSET`.  Written only by the caller
 * holding pool.lock.
 */
#define PS_FNS 64

static struct {
	int on; /* -1 unread */
	long runs, unjoined, sleeps;
	int nfn;
	mi_pool_fn fn[PS_FNS];
	long fruns[PS_FNS], fwait_ns[PS_FNS];
} ps = { .on = -1 };

static long ps_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void ps_print(void)
{
	fprintf(stderr, "metainfer: pool: %ld runs, %ld indices not joined, %ld caller sleeps\n",
		ps.runs, ps.unjoined, ps.sleeps);
	for (int i = 0; i < ps.nfn; i++) {
		Dl_info di;
		void *p = *(void **)&ps.fn[i];
		bool ok = dladdr(p, &di) && di.dli_fname;

		fprintf(stderr, "metainfer: pool:   %s+0x%lx: %ld runs, caller waited %.1f us (%.2f us per run)\n",
			ok ? di.dli_fname : "?", (long)((char *)p - (ok ? (char *)di.dli_fbase : NULL)),
			ps.fruns[i], ps.fwait_ns[i] / 1e3, ps.fwait_ns[i] / 1e3 / ps.fruns[i]);
	}
}

static void ps_note(mi_pool_fn fn, int unjoined, bool slept, long wait_ns)
{
	int i;

	ps.runs++;
	ps.unjoined += unjoined;
	ps.sleeps += slept;
	for (i = 0; i < ps.nfn && ps.fn[i] != fn; i++)
		;
	if (i == ps.nfn) {
		if (i == PS_FNS)
			return;
		ps.fn[ps.nfn++] = fn;
	}
	ps.fruns[i]++;
	ps.fwait_ns[i] += wait_ns;
}

/*
 * The caller's wait for the joined workers past SPIN_ITERS: it keeps
 * spinning, checking the clock every YIELD_POLL pauses, for up to
 * CALLER_SPIN_NS (100 us) before it sleeps on the futex.  A worker that
 * finishes a few tens of microseconds after the caller (the imbalance of
 * a node split in a few large items: EfficientNet-B0's fused 1x1 +
 * depthwise nodes wait 12-23 us per run at 2 threads) then costs that
 * wait only, not a futex wake on top: a syscall and an IPI in the worker
 * (a VM exit in a guest) and the caller running again ~25 us later.  No
 * sched_yield() here, unlike the idle workers: on a loaded machine the
 * caller would hand its core away for a time slice (milliseconds) while
 * the whole inference waits on it.  The bound caps what the spin costs
 * when a joined worker was preempted.  A model loaded with
 * MI_MODEL_NO_SPIN keeps the short spin (its runs set the calling
 * thread's mode, mi_pool_caller_spin()).
 */
#ifndef CALLER_SPIN_NS
#define CALLER_SPIN_NS 100000L
#endif

static __thread bool caller_nospin;

void mi_pool_caller_spin(bool on)
{
	caller_nospin = !on;
}

static void wait_done_spin(int joined)
{
	struct timespec t0, t1;
	long ns = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ns < CALLER_SPIN_NS) {
		for (int i = 0; i < YIELD_POLL; i++) {
			if (atomic_load_explicit(&pool.done,
						 memory_order_acquire) == joined)
				return;
			cpu_relax();
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ns = (t1.tv_sec - t0.tv_sec) * 1000000000L +
		     (t1.tv_nsec - t0.tv_nsec);
	}
}

static __thread bool pool_serial;

bool mi_pool_serial(bool on)
{
	bool was = pool_serial;

	pool_serial = on;
	return was;
}

void mi_pool_run(int nt, mi_pool_fn fn, void *ctx)
{
	int t, i, d;

	if (nt < 1)
		nt = 1;
	if (nt > POOL_MAX)
		nt = POOL_MAX;
	if (nt > 1 && !pool_serial && pthread_mutex_trylock(&pool.lock) == 0) {
		unsigned int s;
		int joined;
		bool slept = false;
		long t0;

		pool_grow(nt);
		pool.fn = fn;
		pool.ctx = ctx;
		atomic_store(&pool.done, 0);
		atomic_store_explicit(&pool.state, (unsigned int)nt << 16,
				      memory_order_release);
		atomic_fetch_add(&pool.gen, 1);
		if (atomic_load(&pool.sleepers))
			futex_wake(&pool.gen, nt - 1);
		fn(ctx, 0, nt);
		/* close the run; indices nobody claimed run here */
		s = atomic_fetch_or(&pool.state, ST_CLOSED);
		joined = (int)ST_JOINED(s);
		for (t = joined + 1; t < nt; t++)
			fn(ctx, t, nt);
		if (ps.on < 0) {
			ps.on = mi_debug("pool");
			if (ps.on)
				atexit(ps_print);
		}
		t0 = ps.on ? ps_ns() : 0;
		for (i = 0; i < SPIN_ITERS; i++) {
			if (atomic_load_explicit(&pool.done,
						 memory_order_acquire) == joined)
				break;
			cpu_relax();
		}
		if (atomic_load(&pool.done) != joined && !caller_nospin)
			wait_done_spin(joined);
		if (atomic_load(&pool.done) != joined) {
			atomic_store(&pool.cwait, 1);
			while ((d = atomic_load(&pool.done)) != joined)
				futex_wait(&pool.done, d);
			atomic_store(&pool.cwait, 0);
			slept = true;
		}
		if (ps.on)
			ps_note(fn, nt - 1 - joined, slept, ps_ns() - t0);
		pthread_mutex_unlock(&pool.lock);
		return;
	}
	/* Busy, nested, serial or single-threaded: same chunks, in the caller. */
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
