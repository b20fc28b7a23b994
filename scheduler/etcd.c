// SPDX-License-Identifier: MIT
/*
 * The registry's etcd backend (etcd.h), its two halves: a node that
 * publishes what its in-process registry confirmed, under a lease it
 * keeps alive, and a solver's watch that keeps a view of every node's
 * devices.  The gateway client is etcd-kv.c.
 *
 * What a node publishes for a device (mi_etcd_device_value): its name
 * and class, per reported dimension the confirmed state and level, and
 * the solver state mi_registry_solver_state derives from them, so that a
 * remote solver sees exactly what a local one would.  Raw samples never
 * leave the node: the value is written at start and again only when the
 * registry sends an event (every one is a confirmed change).
 *
 * The watch: one range of /metainfer/<cluster>/nodes/ (its revision R),
 * then one streaming POST /v3/watch from R + 1; every complete JSON
 * object on the stream is one message.  A dropped stream is opened again
 * from the revision after the last event seen, so nothing is missed or
 * applied twice (unless etcd compacted meanwhile: the watch then stops
 * with "canceled" in its status; a new mi_etcd_watch_start lists again).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metainfer/metainfer.h"
#include "etcd-impl.h"
#include "sched-impl.h"

/* ==== the published value of a device ================================ */

int mi_etcd_device_value(struct mi_registry *reg, int dev, char *buf,
			 size_t cap)
{
	struct mi_sched_dev_state st[MI_SCHED_MAX_DEVICES];
	struct mi_device_view v;
	size_t n = 0;
	int ret, cnt;

	ret = mi_registry_device(reg, dev, &v);
	if (ret)
		return ret;
	cnt = mi_registry_count(reg);
	ret = mi_registry_solver_state(reg, st, (uint32_t)cnt);
	if (ret)
		return ret;
#define PUT(...) do { \
		int w_ = snprintf(buf + n, cap - n, __VA_ARGS__); \
		if (w_ < 0 || (size_t)w_ >= cap - n) \
			return mi_set_error(-E2BIG, "etcd: device value over %zu bytes", cap); \
		n += (size_t)w_; \
	} while (0)
	PUT("{\"dev\":\"%s\",\"class\":\"%s\",\"dims\":{", v.name, v.klass);
	for (int k = 0, first = 1; k < MI_REG_NDIM; k++) {
		if (!v.dim[k].present)
			continue;
		PUT("%s\"%s\":{\"state\":\"%s\",\"level\":%.4f}", first ? "" : ",",
		    mi_reg_dim_name(k),
		    v.dim[k].state == MI_DIM_DEGRADED ? "degraded" : "ok",
		    v.dim[k].confirmed);
		first = 0;
	}
	PUT("},\"solver\":{\"available\":%s,\"slowdown\":%.4f,\"xfer_slowdown\":%.4f,"
	    "\"mem_fraction\":%.4f,\"reliability\":%.4f}}",
	    st[dev].available ? "true" : "false", st[dev].slowdown,
	    st[dev].xfer_slowdown, st[dev].mem_fraction, st[dev].reliability);
#undef PUT
	return 0;
}

/* Parse a published value into d (node and dev come from the key). */
static int device_parse(const char *js, size_t len, struct mi_etcd_device *d)
{
	const char *e = js + len, *dims, *sv;

	if (!etcd_js_copy(js, e, "class", d->klass, sizeof(d->klass)))
		return -EPROTO;
	dims = etcd_js_get(js, e, "dims");
	for (int k = 0; dims && k < MI_REG_NDIM; k++) {
		const char *dm = etcd_js_get(dims, e, mi_reg_dim_name(k));
		char state[16];

		if (!dm)
			continue;
		d->present |= 1u << k;
		d->confirmed[k] = etcd_js_num(etcd_js_get(dm, e, "level"), e, 1.0);
		if (etcd_js_copy(dm, e, "state", state, sizeof(state)) &&
		    !strcmp(state, "degraded"))
			d->degraded |= 1u << k;
	}
	sv = etcd_js_get(js, e, "solver");
	if (!sv)
		return -EPROTO;
	d->state.available = etcd_js_true(etcd_js_get(sv, e, "available"), e);
	d->state.slowdown = etcd_js_num(etcd_js_get(sv, e, "slowdown"), e, 1.0);
	d->state.xfer_slowdown = etcd_js_num(etcd_js_get(sv, e, "xfer_slowdown"), e, 1.0);
	d->state.mem_fraction = etcd_js_num(etcd_js_get(sv, e, "mem_fraction"), e, 1.0);
	d->state.reliability = etcd_js_num(etcd_js_get(sv, e, "reliability"), e, 1.0);
	return 0;
}

/* ==== a node: publisher and lease keeper ============================= */

struct mi_etcd_node {
	struct mi_etcd_opts o;
	struct mi_registry *reg;
	pthread_t thread;
	pthread_mutex_t lock;	/* dirty, stop, st */
	pthread_cond_t cond;
	bool stop;
	uint64_t dirty;		/* bit d: publish device d */
	struct mi_etcd_node_status st;
};

static void node_key(const struct mi_etcd_opts *o, const char *dev, char *key)
{
	snprintf(key, KEY_MAX + 1, "/metainfer/%s/nodes/%s/devices/%s",
		 o->cluster, o->node, dev);
}

/* Confirmed changes only reach here: every registry event is one. */
static void node_event(const struct mi_registry_event *ev, void *arg)
{
	struct mi_etcd_node *n = arg;

	if (ev->device < 0 || ev->device >= MI_SCHED_MAX_DEVICES)
		return;
	pthread_mutex_lock(&n->lock);
	n->dirty |= 1ull << ev->device;
	pthread_cond_signal(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

static uint64_t all_devices(struct mi_registry *reg)
{
	int c = mi_registry_count(reg);

	return c >= 64 ? ~0ull : (1ull << c) - 1;
}

/* Publish the devices in mask; the ones that failed stay in *left. */
static int node_publish(struct mi_etcd_node *n, uint64_t mask, int64_t lease,
			uint64_t *left, uint64_t *done)
{
	char key[KEY_MAX + 1], val[MI_ETCD_VALUE_MAX];
	struct mi_device_view v;
	int ret = 0;

	*left = 0;
	*done = 0;
	for (int d = 0; d < 64; d++) {
		if (!(mask >> d & 1))
			continue;
		if (ret) {
			*left |= 1ull << d;
			continue;
		}
		if (mi_registry_device(n->reg, d, &v) ||
		    mi_etcd_device_value(n->reg, d, val, sizeof(val)))
			continue;	/* gone from the registry: nothing to say */
		node_key(&n->o, v.name, key);
		ret = mi_etcd_put(&n->o, key, val, strlen(val), lease);
		if (ret)
			*left |= 1ull << d;
		else
			(*done)++;
	}
	return ret;
}

static void node_fail(struct mi_etcd_node *n)
{
	pthread_mutex_lock(&n->lock);
	n->st.connected = false;
	n->st.failures++;
	snprintf(n->st.error, sizeof(n->st.error), "%s", mi_last_error());
	pthread_mutex_unlock(&n->lock);
}

/*
 * The node's thread: publishes dirty devices at once, refreshes the
 * lease every ttl / 3.  When etcd does not answer it keeps the dirty set
 * and retries on the next refresh; a lease found gone at a refresh (TTL
 * 0: expired while etcd was out of reach, or revoked) is granted again
 * and every device published again.
 */
static void *node_thread(void *arg)
{
	struct mi_etcd_node *n = arg;
	int64_t period = (int64_t)n->o.ttl_s * 1000000000LL / 3;
	int64_t next = etcd_now_ns() + period;

	pthread_mutex_lock(&n->lock);
	while (!n->stop) {
		uint64_t mask, left, done;
		int64_t lease, t = etcd_now_ns();
		bool refresh, connected;
		int ret = 0;

		if ((!n->dirty || !n->st.connected) && t < next) {
			struct timespec ts;
			int64_t abs_ns;

			clock_gettime(CLOCK_REALTIME, &ts);
			abs_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + (next - t);
			ts.tv_sec = abs_ns / 1000000000LL;
			ts.tv_nsec = abs_ns % 1000000000LL;
			pthread_cond_timedwait(&n->cond, &n->lock, &ts);
			continue;
		}
		refresh = t >= next;
		mask = n->dirty;
		n->dirty = 0;
		lease = n->st.lease;
		connected = n->st.connected;
		pthread_mutex_unlock(&n->lock);

		if (refresh || !connected) {
			int64_t ttl = 0;

			next = t + period;
			ret = lease ? mi_etcd_lease_keepalive(&n->o, lease, &ttl) : 0;
			if (!ret && ttl <= 0) {
				/* expired while we were cut off: a new lease */
				ret = mi_etcd_lease_grant(&n->o, n->o.ttl_s, &lease);
				if (!ret) {
					mask = all_devices(n->reg);
					pthread_mutex_lock(&n->lock);
					n->st.lease = lease;
					n->st.relets++;
					pthread_mutex_unlock(&n->lock);
				}
			}
		}
		if (!ret)
			ret = node_publish(n, mask, lease, &left, &done);
		else
			left = mask, done = 0;
		if (ret)
			node_fail(n);
		pthread_mutex_lock(&n->lock);
		n->dirty |= left;
		n->st.publishes += done;
		if (!ret) {
			n->st.connected = true;
			n->st.error[0] = 0;
		}
	}
	pthread_mutex_unlock(&n->lock);
	return NULL;
}

int mi_etcd_node_start(struct mi_registry *reg, const struct mi_etcd_opts *o,
		       struct mi_etcd_node **np)
{
	struct mi_etcd_node *n;
	uint64_t left, done;
	int ret;

	*np = NULL;
	if (!reg || !o)
		return mi_set_error(-EINVAL, "etcd: a node needs a registry and options");
	if (!etcd_name_ok(o->node, strlen(o->node)) || !etcd_name_ok(o->cluster, strlen(o->cluster)))
		return mi_set_error(-EINVAL, "etcd: node '%s' / cluster '%s': names are [A-Za-z0-9._-]+",
				    o->node, o->cluster);
	for (int d = 0; d < mi_registry_count(reg); d++) {
		struct mi_device_view v;

		ret = mi_registry_device(reg, d, &v);
		if (ret)
			return ret;
		if (!etcd_name_ok(v.name, strlen(v.name)))
			return mi_set_error(-EINVAL, "etcd: device name '%s' cannot be a key", v.name);
		/* the class goes into the value's JSON as it is */
		for (const char *c = v.klass; *c; c++)
			if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
				return mi_set_error(-EINVAL, "etcd: device %s: a class with quotes, backslashes or control characters",
						    v.name);
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return mi_set_error(-ENOMEM, "etcd: out of memory");
	n->o = *o;
	mi_etcd_opts_defaults(&n->o);
	if (n->o.ttl_s < 2)
		n->o.ttl_s = 2;	/* a refresh every ttl / 3: not tighter */
	n->reg = reg;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->cond, NULL);
	ret = mi_etcd_lease_grant(&n->o, n->o.ttl_s, &n->st.lease);
	if (ret)
		goto err_free;
	/* subscribe first: a change confirmed meanwhile is published again */
	ret = mi_registry_subscribe(reg, node_event, n);
	if (ret)
		goto err_revoke;
	ret = node_publish(n, all_devices(reg), n->st.lease, &left, &done);
	if (ret)
		goto err_unsubscribe;
	n->st.publishes = done;
	n->st.connected = true;
	ret = -pthread_create(&n->thread, NULL, node_thread, n);
	if (ret) {
		mi_set_error(ret, "etcd: cannot start the node's thread");
		goto err_unsubscribe;
	}
	*np = n;
	return 0;

err_unsubscribe:
	mi_registry_unsubscribe(reg, node_event, n);
err_revoke:
	mi_etcd_lease_revoke(&n->o, n->st.lease);
err_free:
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	free(n);
	return ret;
}

void mi_etcd_node_stop(struct mi_etcd_node *n, bool revoke)
{
	if (!n)
		return;
	mi_registry_unsubscribe(n->reg, node_event, n);
	pthread_mutex_lock(&n->lock);
	n->stop = true;
	pthread_cond_signal(&n->cond);
	pthread_mutex_unlock(&n->lock);
	pthread_join(n->thread, NULL);
	if (revoke && n->st.lease)
		mi_etcd_lease_revoke(&n->o, n->st.lease);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

void mi_etcd_node_status(struct mi_etcd_node *n,
			 struct mi_etcd_node_status *st)
{
	pthread_mutex_lock(&n->lock);
	*st = n->st;
	pthread_mutex_unlock(&n->lock);
}

/* ==== a solver's watch ================================================ */

#define WATCH_BATCH 16

struct mi_etcd_watch {
	struct mi_etcd_opts o;
	mi_etcd_watch_cb cb;
	void *arg;
	char prefix[KEY_MAX + 1];	/* /metainfer/<cluster>/nodes/ */
	pthread_t thread;
	pthread_mutex_t lock;		/* dev, n, st */
	bool stop;
	int64_t from;			/* next revision to watch from */
	struct mi_etcd_device dev[MI_SCHED_MAX_DEVICES];	/* sorted */
	uint32_t n;
	struct mi_etcd_watch_status st;
};

struct watch_batch {
	struct mi_etcd_event ev[WATCH_BATCH];
	struct mi_etcd_device dev[WATCH_BATCH];
	int n;
};

static void batch_add(struct watch_batch *b, enum mi_etcd_event_type type,
		      const struct mi_etcd_device *d, int64_t rev)
{
	if (b->n == WATCH_BATCH)
		return;
	b->dev[b->n] = *d;
	b->ev[b->n] = (struct mi_etcd_event){
		.type = type, .dev = &b->dev[b->n], .revision = rev,
		.host_ns = etcd_now_ns(),
	};
	b->n++;
}

static void batch_deliver(struct mi_etcd_watch *w, struct watch_batch *b)
{
	for (int i = 0; i < b->n; i++) {
		b->ev[i].dev = &b->dev[i];
		if (w->cb)
			w->cb(&b->ev[i], w->arg);
	}
	b->n = 0;
}

static bool node_has_devices(struct mi_etcd_watch *w, const char *node)
{
	for (uint32_t i = 0; i < w->n; i++)
		if (!strcmp(w->dev[i].node, node))
			return true;
	return false;
}

/* Apply one key change (val NULL: deleted) to the view; w->lock held. */
static void watch_apply(struct mi_etcd_watch *w, struct watch_batch *b,
			const char *key, const char *val, size_t len,
			int64_t rev)
{
	struct mi_etcd_device d = { .mod_rev = rev };
	size_t pl = strlen(w->prefix);
	const char *p, *slash;
	uint32_t i;
	int c = 1;

	if (strncmp(key, w->prefix, pl))
		return;
	p = key + pl;
	slash = strchr(p, '/');
	if (!slash || (size_t)(slash - p) >= sizeof(d.node) ||
	    strncmp(slash, "/devices/", 9) || strlen(slash + 9) >= sizeof(d.dev) ||
	    !slash[9] || strchr(slash + 9, '/'))
		return;		/* not a device key */
	memcpy(d.node, p, slash - p);
	snprintf(d.dev, sizeof(d.dev), "%s", slash + 9);
	if (rev >= w->from)
		w->from = rev + 1;
	for (i = 0; i < w->n; i++) {
		c = strcmp(w->dev[i].node, d.node);
		if (!c)
			c = strcmp(w->dev[i].dev, d.dev);
		if (c >= 0)
			break;
	}
	if (!val) {
		if (i == w->n || c)
			return;
		d = w->dev[i];
		d.mod_rev = rev;
		memmove(&w->dev[i], &w->dev[i + 1], (w->n - i - 1) * sizeof(d));
		w->n--;
		batch_add(b, MI_ETCD_EV_DEVICE_GONE, &d, rev);
		if (!node_has_devices(w, d.node))
			batch_add(b, MI_ETCD_EV_NODE_LEFT, &d, rev);
		return;
	}
	if (device_parse(val, len, &d)) {
		snprintf(w->st.error, sizeof(w->st.error),
			 "etcd: %s holds no device state", key);
		return;
	}
	if (i == w->n || c) {
		bool joined = !node_has_devices(w, d.node);

		if (w->n == MI_SCHED_MAX_DEVICES) {
			snprintf(w->st.error, sizeof(w->st.error),
				 "etcd: more than %d devices, %s left out",
				 MI_SCHED_MAX_DEVICES, key);
			return;
		}
		memmove(&w->dev[i + 1], &w->dev[i], (w->n - i) * sizeof(d));
		w->n++;
		if (joined)
			batch_add(b, MI_ETCD_EV_NODE_JOINED, &d, rev);
	}
	w->dev[i] = d;
	batch_add(b, MI_ETCD_EV_DEVICE_PUT, &d, rev);
}

struct list_ctx {
	struct mi_etcd_watch *w;
	struct watch_batch *b;
};

static int list_cb(const char *key, const char *val, size_t len,
		   int64_t mod_rev, void *arg)
{
	struct list_ctx *l = arg;

	watch_apply(l->w, l->b, key, val, len, mod_rev);
	if (l->b->n > WATCH_BATCH - 3) {
		pthread_mutex_unlock(&l->w->lock);
		batch_deliver(l->w, l->b);
		pthread_mutex_lock(&l->w->lock);
	}
	return 0;
}

/* One watch message: {"result":{"header":..,"events":[..]}} or an error. */
static int watch_message(struct mi_etcd_watch *w, const char *js, size_t len)
{
	const char *e = js + len, *r, *it, *ev;
	struct watch_batch b = { .n = 0 };
	char key[KEY_MAX + 1], *val;
	int ret = 0;

	r = etcd_js_get(js, e, "result");
	if (!r) {
		ret = etcd_answer_error("watch", js, len);
		return ret ? ret : mi_set_error(-EPROTO, "etcd: watch message: %.100s", js);
	}
	if (etcd_js_true(etcd_js_get(r, e, "canceled"), e))
		return mi_set_error(-ECANCELED, "etcd: watch canceled (compacted at %lld)",
				    (long long)etcd_js_int(etcd_js_get(r, e, "compact_revision"), e, 0));
	it = etcd_js_get(r, e, "events");
	if (!it)
		return 0;
	val = malloc(MI_ETCD_VALUE_MAX + 1);
	if (!val)
		return mi_set_error(-ENOMEM, "etcd: out of memory");
	pthread_mutex_lock(&w->lock);
	w->st.messages++;
	while ((ev = etcd_js_next(&it, e))) {
		const char *kv = etcd_js_get(ev, e, "kv"), *ks, *vs = "";
		char type[16] = "PUT";
		ssize_t kn, vn, klen, vlen;
		int64_t rev;

		etcd_js_copy(ev, e, "type", type, sizeof(type));
		kn = etcd_js_str(etcd_js_get(kv, e, "key"), e, &ks);
		vn = etcd_js_str(etcd_js_get(kv, e, "value"), e, &vs);
		rev = etcd_js_int(etcd_js_get(kv, e, "mod_revision"), e, 0);
		if (vn < 0)
			vn = 0;
		klen = kn < 0 ? -1 : etcd_b64_decode(ks, (size_t)kn, key, sizeof(key));
		vlen = etcd_b64_decode(vs, (size_t)vn, val, MI_ETCD_VALUE_MAX + 1);
		if (klen < 0 || vlen < 0)
			continue;
		if (rev > w->st.revision)
			w->st.revision = rev;
		watch_apply(w, &b, key, strcmp(type, "DELETE") ? val : NULL,
			    (size_t)vlen, rev);
		if (b.n > WATCH_BATCH - 3) {
			pthread_mutex_unlock(&w->lock);
			batch_deliver(w, &b);
			pthread_mutex_lock(&w->lock);
		}
	}
	pthread_mutex_unlock(&w->lock);
	free(val);
	batch_deliver(w, &b);
	return 0;
}

static bool watch_stopping(struct mi_etcd_watch *w)
{
	bool s;

	pthread_mutex_lock(&w->lock);
	s = w->stop;
	pthread_mutex_unlock(&w->lock);
	return s;
}

/* One watch stream, until an error or stop: every complete JSON object
 * in what arrives is one message. */
static int watch_stream(struct mi_etcd_watch *w)
{
	char kb[KEY_B64], eb[KEY_B64], body[2 * KEY_B64 + 128];
	size_t cap = 0, used = 0, hdr = 0;
	char *buf = NULL;
	int64_t from;
	int fd, ret;

	pthread_mutex_lock(&w->lock);
	from = w->from;
	pthread_mutex_unlock(&w->lock);
	etcd_key_b64(w->prefix, kb);
	etcd_prefix_end_b64(w->prefix, eb);
	snprintf(body, sizeof(body),
		 "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\",\"start_revision\":\"%lld\"}}",
		 kb, eb, (long long)from);
	fd = etcd_http_connect(&w->o);
	if (fd < 0)
		return fd;
	ret = etcd_http_send(fd, &w->o, "/v3/watch", body);
	if (!ret)
		ret = etcd_http_read_head(fd, (int)w->o.timeout_ms, &buf, &cap, &used, &hdr,
				     "/v3/watch");
	if (ret)
		goto out;
	memmove(buf, buf + hdr, used - hdr);
	used -= hdr;
	pthread_mutex_lock(&w->lock);
	w->st.connected = true;
	w->st.error[0] = 0;
	pthread_mutex_unlock(&w->lock);
	while (!watch_stopping(w)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		const char *p, *end;
		ssize_t r;
		int pr;

		/* the complete messages held */
		p = buf;
		while ((p = memchr(p, '{', used - (p - buf)))) {
			end = etcd_js_skip(p, buf + used);
			if (!end)
				break;
			ret = watch_message(w, p, (size_t)(end - p));
			if (ret)
				goto out;
			p = end;
		}
		if (p) {
			used -= (size_t)(p - buf);
			memmove(buf, p, used);
		} else {
			used = 0;
		}
		if (used + 4096 + 1 > cap) {
			char *nb = cap * 2 > BODY_MAX ? NULL : realloc(buf, cap * 2);

			if (!nb) {
				ret = mi_set_error(-E2BIG, "etcd: watch message over %d bytes",
						   BODY_MAX);
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		pr = poll(&pfd, 1, 100);
		if (pr == 0 || (pr < 0 && errno == EINTR))
			continue;
		r = recv(fd, buf + used, cap - used - 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = mi_set_error(-ECONNRESET, "etcd: watch stream from %s:%u closed",
					   w->o.host, w->o.port);
			goto out;
		}
		used += (size_t)r;
	}
out:
	close(fd);
	free(buf);
	return ret;
}

static void *watch_thread(void *arg)
{
	struct mi_etcd_watch *w = arg;

	while (!watch_stopping(w)) {
		int ret = watch_stream(w);

		if (!ret)
			break;
		pthread_mutex_lock(&w->lock);
		if (w->st.connected)
			w->st.reconnects++;
		w->st.connected = false;
		snprintf(w->st.error, sizeof(w->st.error), "%s", mi_last_error());
		pthread_mutex_unlock(&w->lock);
		if (ret == -ECANCELED)
			break;	/* compacted past us: only a new list helps */
		for (int i = 0; i < 5 && !watch_stopping(w); i++)
			usleep(100000);	/* 0.5 s between attempts */
	}
	return NULL;
}

int mi_etcd_watch_start(const struct mi_etcd_opts *o, mi_etcd_watch_cb cb,
			void *arg, struct mi_etcd_watch **wp)
{
	struct watch_batch b = { .n = 0 };
	struct mi_etcd_watch *w;
	struct list_ctx l;
	int64_t rev = 0;
	int ret;

	*wp = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return mi_set_error(-ENOMEM, "etcd: out of memory");
	w->o = *o;
	mi_etcd_opts_defaults(&w->o);
	if (!etcd_name_ok(w->o.cluster, strlen(w->o.cluster))) {
		free(w);
		return mi_set_error(-EINVAL, "etcd: bad cluster name '%s'", w->o.cluster);
	}
	snprintf(w->prefix, sizeof(w->prefix), "/metainfer/%s/nodes/", w->o.cluster);
	w->cb = cb;
	w->arg = arg;
	pthread_mutex_init(&w->lock, NULL);
	l = (struct list_ctx){ w, &b };
	pthread_mutex_lock(&w->lock);
	ret = mi_etcd_range(&w->o, w->prefix, list_cb, &l, &rev);
	if (!ret) {
		if (rev + 1 > w->from)
			w->from = rev + 1;
		w->st.revision = rev;
	}
	pthread_mutex_unlock(&w->lock);
	if (ret)
		goto err;
	batch_deliver(w, &b);
	ret = -pthread_create(&w->thread, NULL, watch_thread, w);
	if (ret) {
		mi_set_error(ret, "etcd: cannot start the watch thread");
		goto err;
	}
	*wp = w;
	return 0;
err:
	pthread_mutex_destroy(&w->lock);
	free(w);
	return ret;
}

void mi_etcd_watch_stop(struct mi_etcd_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

int mi_etcd_watch_devices(struct mi_etcd_watch *w, struct mi_etcd_device *out,
			  uint32_t max, uint32_t *n)
{
	pthread_mutex_lock(&w->lock);
	*n = w->n;
	memcpy(out, w->dev, (w->n < max ? w->n : max) * sizeof(*out));
	pthread_mutex_unlock(&w->lock);
	return 0;
}

void mi_etcd_watch_status(struct mi_etcd_watch *w,
			  struct mi_etcd_watch_status *st)
{
	pthread_mutex_lock(&w->lock);
	*st = w->st;
	pthread_mutex_unlock(&w->lock);
}
