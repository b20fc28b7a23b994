/* SPDX-License-Identifier: MIT */
/* Private to the etcd backend: the gateway client (etcd-kv.c) that the
 * node and the watch (etcd.c) share. */
#ifndef MI_SCHED_ETCD_IMPL_H
#define MI_SCHED_ETCD_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "etcd.h"

#define KEY_MAX 256
#define BODY_MAX (1 << 20)	/* largest answer or watch message read */
#define KEY_B64 (4 * (KEY_MAX + 2) / 3 + 4)
#define VAL_B64 (4 * (MI_ETCD_VALUE_MAX + 2) / 3 + 4)

int64_t etcd_now_ns(void);
/* [A-Za-z0-9._-]+: what may stand between two '/' of a key. */
bool etcd_name_ok(const char *s, size_t len);

/* out needs 4 * ((len + 2) / 3) + 1 bytes. */
void etcd_b64_encode(const void *in, size_t len, char *out);
/* Decode n characters; -1 on bad input or when out (cap) is too small;
 * out gets a NUL after the bytes. */
ssize_t etcd_b64_decode(const char *in, size_t n, char *out, size_t cap);

/*
 * A small JSON reader, enough for the gateway's answers: find a member
 * of an object, walk an array, read a string (the gateway's strings are
 * base64 or plain ASCII: no unescaping) or a number (int64s arrive as
 * strings).  p..e is the text; NULL / -1 / def on malformed or absent.
 */
const char *etcd_js_skip(const char *p, const char *e);
const char *etcd_js_get(const char *p, const char *e, const char *key);
/* *it starts at the '['; the next element or NULL at the end. */
const char *etcd_js_next(const char **it, const char *e);
ssize_t etcd_js_str(const char *v, const char *e, const char **s);
int64_t etcd_js_int(const char *v, const char *e, int64_t def);
double etcd_js_num(const char *v, const char *e, double def);
bool etcd_js_true(const char *v, const char *e);
bool etcd_js_copy(const char *obj, const char *e, const char *key, char *buf,
		  size_t cap);

/* HTTP/1.0: a connected socket (or -errno with one line), one POST, the
 * answer's headers read into *buf (status 200 checked). */
int etcd_http_connect(const struct mi_etcd_opts *o);
int etcd_http_send(int fd, const struct mi_etcd_opts *o, const char *path,
		   const char *body);
int etcd_http_read_head(int fd, int timeout_ms, char **buf, size_t *cap,
			size_t *used, size_t *hdr, const char *path);
/* One unary request; *out (malloc'd, NUL-ended) is the JSON answer. */
int etcd_http_post(const struct mi_etcd_opts *o, const char *path,
		   const char *body, char **out, size_t *out_len);

/* base64 of a key, and of the end of the range of keys under a prefix. */
int etcd_key_b64(const char *key, char *out);
int etcd_prefix_end_b64(const char *prefix, char *out);
/* -EPROTO with one line if the answer is {"error": ...}, else 0. */
int etcd_answer_error(const char *path, const char *js, size_t len);

#endif /* MI_SCHED_ETCD_IMPL_H */
