/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * metainfer serve --registry etcd://...: the node's confirmed device
 * states published to etcd (scheduler/etcd.h), the other nodes watched,
 * and the cluster's streams owned through etcd so that a node that dies
 * has its streams adopted by another with no inference lost or run twice.
 * Documentation/distributed.rst.
 */
#ifndef MI_SERVE_ETCD_H
#define MI_SERVE_ETCD_H

#include <stdbool.h>
#include <stdint.h>

struct mi_registry;
struct serve_etcd;

struct serve_etcd_opts {
	const char *spec;	/* etcd://HOST[:PORT][/CLUSTER] */
	const char *node;	/* this node's name */
	unsigned int ttl_s;	/* lease TTL, 0: the backend's default */
	int nstreams;		/* the cluster's streams 0..n-1 */
	uint64_t own;		/* bit k: claim stream k if nobody has it */
	bool json;		/* event lines as JSON objects */
};

/* Publish reg, start the watch and the ownership thread.  An etcd that
 * cannot be reached is one line and -errno (serve then runs locally). */
int serve_etcd_start(struct mi_registry *reg, const struct serve_etcd_opts *o,
		     struct serve_etcd **ep);
/* Stream threads: does this node own stream k now (*item: its next)? */
bool serve_etcd_owns(struct serve_etcd *e, int k, int64_t *item);
/* Commit item of stream k after its inference: 1 done (exactly once),
 * 0 discarded (the stream is not ours any more), < 0 etcd failed. */
int serve_etcd_commit(struct serve_etcd *e, int k, int64_t item);
/* Once a second (and at the end): ownership and counts. */
void serve_etcd_print(struct serve_etcd *e, bool json, bool final);
/* Stop; revoke the lease (keys go at once) unless the node should be
 * seen to expire. */
void serve_etcd_stop(struct serve_etcd *e);

#endif /* MI_SERVE_ETCD_H */
