// SPDX-License-Identifier: MIT
/*
 * The sampler: one per device set.  A round reads every device once
 * (under sample_lock, so the thread and a caller of mi_health_sample()
 * never interleave their rate bookkeeping), appends each vector to the
 * device's ring (ring_lock, held only to copy) and calls the callback
 * with the round.  The thread waits on a condition variable: for the
 * period while started, indefinitely while stopped.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "health/health-impl.h"
#include "internal.h"

struct mi_health {
	struct mi_health_ctx ctx;
	char proc_root[256], sys_root[256];
	int n, naccel;			/* devices, those with a node */
	struct mi_health_state *st;
	mi_health_cb cb;
	void *cb_arg;
	uint64_t seq;
	struct mi_health_vec *round;	/* n vectors, the current round */

	pthread_mutex_t sample_lock;
	pthread_mutex_t ring_lock;
	struct mi_health_vec *ring;	/* n x ring_cap */
	uint32_t ring_cap;
	uint32_t *ring_len, *ring_head;

	pthread_mutex_t lock;		/* run, quit, period_ms */
	pthread_cond_t cond;
	pthread_t thread;
	bool inited, thread_started, run, quit;
	uint32_t period_ms;
};

static void sample_one(struct mi_health *h, int i, struct mi_health_vec *v)
{
	struct mi_health_state *s = &h->st[i];
	uint64_t prev = s->have_prev ? s->prev_mono_ns : 0;

	memset(v, 0, sizeof(*v));
	v->dev_index = s->dev->index;
	snprintf(v->dev_name, sizeof(v->dev_name), "%s", s->dev->name);
	v->seq = h->seq;
	if (s->dev->kind == MI_DEV_CPU) {
		v->mono_ns = mi_health_now_ns();
		mi_health_cpu_sample(&h->ctx, s, v);
		s->prev_mono_ns = v->mono_ns;
		s->have_prev = true;
	} else {
		mi_health_accel_sample(&h->ctx, s, v);
	}
	if (prev && v->mono_ns > prev && !(v->flags & MI_HEALTH_F_GONE))
		v->interval_ns = v->mono_ns - prev;
}

int mi_health_sample(struct mi_health *h, struct mi_health_vec *out)
{
	pthread_mutex_lock(&h->sample_lock);
	h->seq++;
	if (h->ctx.fdinfo && h->naccel)
		mi_health_fdinfo_scan(&h->ctx, h->st, h->n);
	for (int i = 0; i < h->n; i++)
		sample_one(h, i, &h->round[i]);
	pthread_mutex_lock(&h->ring_lock);
	for (int i = 0; i < h->n; i++) {
		uint32_t pos = h->ring_head[i];

		h->ring[(size_t)i * h->ring_cap + pos] = h->round[i];
		h->ring_head[i] = (pos + 1) % h->ring_cap;
		if (h->ring_len[i] < h->ring_cap)
			h->ring_len[i]++;
	}
	pthread_mutex_unlock(&h->ring_lock);
	if (out)
		memcpy(out, h->round, h->n * sizeof(*out));
	if (h->cb)
		h->cb(h->round, h->n, h->cb_arg);
	pthread_mutex_unlock(&h->sample_lock);
	return h->n;
}

int mi_health_latest(struct mi_health *h, int i, struct mi_health_vec *out,
		     int max)
{
	int n = 0;

	if (i < 0 || i >= h->n || max < 0)
		return mi_set_error(-EINVAL, "health: no device %d in the set", i);
	pthread_mutex_lock(&h->ring_lock);
	for (; n < max && n < (int)h->ring_len[i]; n++) {
		uint32_t pos = (h->ring_head[i] + h->ring_cap - 1 - n) %
			       h->ring_cap;

		out[n] = h->ring[(size_t)i * h->ring_cap + pos];
	}
	pthread_mutex_unlock(&h->ring_lock);
	return n;
}

static void deadline_after(struct timespec *ts, uint32_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

static void *sampler_thread(void *arg)
{
	struct mi_health *h = arg;
	struct timespec next;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (!h->run && !h->quit)
			pthread_cond_wait(&h->cond, &h->lock);
		if (h->quit)
			break;
		deadline_after(&next, h->period_ms);
		pthread_mutex_unlock(&h->lock);
		mi_health_sample(h, NULL);
		pthread_mutex_lock(&h->lock);
		/* sleep out the rest of the period unless stopped or told */
		while (h->run && !h->quit &&
		       pthread_cond_timedwait(&h->cond, &h->lock, &next) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

int mi_health_create(struct mi_dev *const *devs, int n,
		     const struct mi_health_opts *opts, struct mi_health **hp)
{
	struct mi_health_opts def = { 0 };
	pthread_condattr_t ca;
	struct mi_health *h;

	if (!opts)
		opts = &def;
	if (n < 1 || !devs)
		return mi_set_error(-EINVAL, "health: no devices to sample");
	for (int i = 0; i < n; i++)
		if (!devs[i])
			return mi_set_error(-EINVAL, "health: device %d is NULL", i);
	if (opts->period_ms > 3600000)
		return mi_set_error(-EINVAL, "health: period %u ms is too long",
				    opts->period_ms);
	if (opts->ring > 1u << 20)
		return mi_set_error(-EINVAL, "health: ring of %u is too large",
				    opts->ring);
	h = calloc(1, sizeof(*h));
	if (!h)
		return mi_set_error(-ENOMEM, "health: out of memory");
	snprintf(h->proc_root, sizeof(h->proc_root), "%s",
		 opts->proc_root ? opts->proc_root : "/proc");
	snprintf(h->sys_root, sizeof(h->sys_root), "%s",
		 opts->sys_root ? opts->sys_root : "/sys");
	h->ctx.proc_root = h->proc_root;
	h->ctx.sys_root = h->sys_root;
	h->ctx.ambient_mc = opts->ambient_mc ? opts->ambient_mc : 25000;
	h->ctx.fdinfo = !opts->no_fdinfo;
	h->n = n;
	h->cb = opts->cb;
	h->cb_arg = opts->cb_arg;
	h->period_ms = opts->period_ms ? opts->period_ms : 100;
	h->ring_cap = opts->ring ? opts->ring : 64;
	h->st = calloc(n, sizeof(*h->st));
	h->round = calloc(n, sizeof(*h->round));
	h->ring = calloc((size_t)n * h->ring_cap, sizeof(*h->ring));
	h->ring_len = calloc(n, sizeof(*h->ring_len));
	h->ring_head = calloc(n, sizeof(*h->ring_head));
	if (!h->st || !h->round || !h->ring || !h->ring_len || !h->ring_head) {
		mi_health_destroy(h);
		return mi_set_error(-ENOMEM, "health: out of memory");
	}
	for (int i = 0; i < n; i++) {
		h->st[i].dev = devs[i];
		h->naccel += devs[i]->kind != MI_DEV_CPU && devs[i]->node[0];
	}
	pthread_mutex_init(&h->sample_lock, NULL);
	pthread_mutex_init(&h->ring_lock, NULL);
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cond, &ca);
	pthread_condattr_destroy(&ca);
	h->inited = true;
	*hp = h;
	return 0;
}

int mi_health_start(struct mi_health *h)
{
	int ret = 0;

	pthread_mutex_lock(&h->lock);
	if (!h->thread_started) {
		ret = -pthread_create(&h->thread, NULL, sampler_thread, h);
		if (ret) {
			pthread_mutex_unlock(&h->lock);
			return mi_set_error(ret, "health: cannot start the sampler thread");
		}
		h->thread_started = true;
	}
	h->run = true;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

void mi_health_stop(struct mi_health *h)
{
	pthread_mutex_lock(&h->lock);
	h->run = false;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

int mi_health_set_period(struct mi_health *h, uint32_t period_ms)
{
	if (!period_ms || period_ms > 3600000)
		return mi_set_error(-EINVAL, "health: period %u ms is out of range (1..3600000)",
				    period_ms);
	pthread_mutex_lock(&h->lock);
	h->period_ms = period_ms;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

void mi_health_destroy(struct mi_health *h)
{
	if (!h)
		return;
	if (h->thread_started) {
		pthread_mutex_lock(&h->lock);
		h->quit = true;
		pthread_cond_broadcast(&h->cond);
		pthread_mutex_unlock(&h->lock);
		pthread_join(h->thread, NULL);
	}
	if (h->inited) {
		pthread_mutex_destroy(&h->sample_lock);
		pthread_mutex_destroy(&h->ring_lock);
		pthread_mutex_destroy(&h->lock);
		pthread_cond_destroy(&h->cond);
	}
	free(h->st);
	free(h->round);
	free(h->ring);
	free(h->ring_len);
	free(h->ring_head);
	free(h);
}
