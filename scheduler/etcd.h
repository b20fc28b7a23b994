/* SPDX-License-Identifier: MIT */
/*
 * The registry's etcd backend: the hardware state of several machines in
 * etcd (Debian's etcd-server 3.4), spoken to through etcd's v3 JSON
 * gateway over plain HTTP/1.0 on a TCP socket (keys and values base64).
 *
 *   node     a process with devices keeps its in-process registry (the
 *            credibility checks stay local) and publishes only what that
 *            registry confirmed, one key per device
 *                /metainfer/<cluster>/nodes/<node>/devices/<dev>
 *            bound to a lease it keeps alive (TTL ttl_s).  A killed node
 *            stops refreshing; etcd expires the lease and deletes its keys.
 *   watch    a solver lists the prefix, then follows it with one streaming
 *            watch (POST /v3/watch, one JSON message per change) from the
 *            listed revision on, and keeps a view of every live device;
 *            nodes join with their first key and leave with their last.
 *   kv       the few plain operations a work protocol needs on top (put,
 *            get, prefix range, a compare-and-put transaction).
 *
 * The in-process registry stays the default: the backend is chosen with
 * a registry spec, "local" or "etcd://HOST:PORT[/CLUSTER]"
 * (mi_registry_backend_parse), never from the environment.  Every call
 * returns 0 or -errno with one line readable with mi_last_error(); the
 * node's and the watch's background threads keep theirs in their status.
 * Documentation/distributed.rst.
 */
#ifndef MI_SCHED_ETCD_H
#define MI_SCHED_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mi_etcd_opts {
	char host[64];		/* "127.0.0.1" (an IPv4 address) */
	uint16_t port;		/* 2379 */
	char cluster[32];	/* "default" */
	char node[32];		/* this node's name (publishers only) */
	uint32_t ttl_s;		/* lease TTL: 10 (a node takes 2 at least) */
	uint32_t timeout_ms;	/* connect + one unary request: 2000 */
};

enum mi_registry_backend {
	MI_REG_BACKEND_LOCAL,	/* in-process only (the default) */
	MI_REG_BACKEND_ETCD,	/* in-process + published to etcd */
};

struct mi_registry_backend_cfg {
	enum mi_registry_backend kind;
	struct mi_etcd_opts etcd;	/* kind == ETCD */
};

/* "local" (or NULL / "") -> LOCAL; "etcd://HOST[:PORT][/CLUSTER]" -> ETCD
 * with the other fields at their defaults.  -EINVAL otherwise. */
int mi_registry_backend_parse(const char *spec,
			      struct mi_registry_backend_cfg *cfg);
/* Fill zero fields of o with the defaults above. */
void mi_etcd_opts_defaults(struct mi_etcd_opts *o);

/* ==== plain key/value operations (unary requests) ==================== */

/* Values are bytes (at most MI_ETCD_VALUE_MAX).  lease 0: none. */
#define MI_ETCD_VALUE_MAX 2048

int mi_etcd_put(const struct mi_etcd_opts *o, const char *key,
		const void *val, size_t len, int64_t lease);
/* -ENOENT when absent (no error line: not a failure); val gets a NUL
 * after the len bytes (cap > len). */
int mi_etcd_get(const struct mi_etcd_opts *o, const char *key, char *val,
		size_t cap, size_t *len, int64_t *mod_rev);
typedef int (*mi_etcd_kv_cb)(const char *key, const char *val, size_t len,
			     int64_t mod_rev, void *arg);
/* Every key under prefix in key order (cb returning non-zero stops it);
 * *rev (may be NULL): the store's revision the list is consistent at. */
int mi_etcd_range(const struct mi_etcd_opts *o, const char *prefix,
		  mi_etcd_kv_cb cb, void *arg, int64_t *rev);
int mi_etcd_delete_prefix(const struct mi_etcd_opts *o, const char *prefix);

/* One compare of a transaction: key's value equals value (NULL: the key
 * does not exist). */
struct mi_etcd_cmp {
	const char *key;
	const char *value;
};

struct mi_etcd_kv {
	const char *key;
	const char *value;	/* a NUL-terminated string */
};

/* If every compare holds, do every put (atomically): *ok tells which. */
int mi_etcd_txn(const struct mi_etcd_opts *o, const struct mi_etcd_cmp *cmp,
		uint32_t n_cmp, const struct mi_etcd_kv *put, uint32_t n_put,
		bool *ok);

/* Lease calls (publishers use them through struct mi_etcd_node). */
int mi_etcd_lease_grant(const struct mi_etcd_opts *o, uint32_t ttl_s,
			int64_t *lease);
/* *ttl_s: the TTL left after refreshing, 0 if the lease is gone. */
int mi_etcd_lease_keepalive(const struct mi_etcd_opts *o, int64_t lease,
			    int64_t *ttl_s);
int mi_etcd_lease_revoke(const struct mi_etcd_opts *o, int64_t lease);

/* ==== a node: publishes its registry's confirmed states ============== */

struct mi_etcd_node;

struct mi_etcd_node_status {
	bool connected;		/* the last request to etcd worked */
	int64_t lease;
	uint64_t publishes;	/* device keys written */
	uint64_t failures;	/* requests that failed */
	uint64_t relets;	/* leases granted again after losing one */
	char error[160];	/* the last failure ("" none) */
};

/*
 * Grant a lease of o->ttl_s, publish every device of reg as it stands
 * (confirmed state only), subscribe to reg and start a thread that
 * publishes each device again when reg confirms a change about it and
 * refreshes the lease every ttl_s / 3.  etcd unreachable at start:
 * -ECONNREFUSED / -ETIMEDOUT / -EHOSTUNREACH with one line, nothing kept
 * (reg keeps working on its own).  Later failures leave the node running
 * on local state; it keeps retrying, and on reconnecting with the lease
 * expired it takes a new one and publishes everything again.
 */
int mi_etcd_node_start(struct mi_registry *reg, const struct mi_etcd_opts *o,
		       struct mi_etcd_node **np);
/* Unsubscribe, stop the thread; revoke (keys go at once) or leave the
 * lease to expire. */
void mi_etcd_node_stop(struct mi_etcd_node *n, bool revoke);
void mi_etcd_node_status(struct mi_etcd_node *n,
			 struct mi_etcd_node_status *st);
/* The value published for device dev of reg (a JSON object, NUL-ended);
 * for tests and tools. */
int mi_etcd_device_value(struct mi_registry *reg, int dev, char *buf,
			 size_t cap);

/* ==== a solver: watches every node's devices ======================== */

/* A device as published: its registry's confirmed state. */
struct mi_etcd_device {
	char node[32];
	char dev[32];
	char klass[64];
	uint32_t present;	/* bit d: dimension d reported */
	uint32_t degraded;	/* bit d: confirmed DEGRADED */
	double confirmed[MI_REG_NDIM];
	struct mi_sched_dev_state state;	/* mi_registry_solver_state's */
	int64_t mod_rev;	/* etcd revision of the value */
};

enum mi_etcd_event_type {
	MI_ETCD_EV_NODE_JOINED,	/* first device key of a node */
	MI_ETCD_EV_DEVICE_PUT,	/* a device key written (new or changed) */
	MI_ETCD_EV_DEVICE_GONE,	/* a device key deleted (lease expired) */
	MI_ETCD_EV_NODE_LEFT,	/* its last device key deleted */
};

struct mi_etcd_event {
	enum mi_etcd_event_type type;
	const struct mi_etcd_device *dev;
	int64_t revision;
	int64_t host_ns;	/* CLOCK_MONOTONIC when the watch got it */
};

typedef void (*mi_etcd_watch_cb)(const struct mi_etcd_event *ev, void *arg);

struct mi_etcd_watch;

struct mi_etcd_watch_status {
	bool connected;		/* the stream is open */
	int64_t revision;	/* last revision seen */
	uint64_t messages;	/* watch messages received */
	uint64_t reconnects;
	char error[160];
};

/* List the prefix (events for what is there), then follow it from the
 * listed revision on in a thread; cb (may be NULL) runs on that thread
 * without the view's lock held and may call mi_etcd_watch_devices. */
int mi_etcd_watch_start(const struct mi_etcd_opts *o, mi_etcd_watch_cb cb,
			void *arg, struct mi_etcd_watch **wp);
void mi_etcd_watch_stop(struct mi_etcd_watch *w);
/* The live devices, in key order; *n: how many (at most max copied). */
int mi_etcd_watch_devices(struct mi_etcd_watch *w, struct mi_etcd_device *out,
			  uint32_t max, uint32_t *n);
void mi_etcd_watch_status(struct mi_etcd_watch *w,
			  struct mi_etcd_watch_status *st);

#ifdef __cplusplus
}
#endif

#endif /* MI_SCHED_ETCD_H */
