// SPDX-License-Identifier: MIT
/*
 * The registry's etcd backend (etcd.h): requests to etcd's v3 JSON
 * gateway (grpc-gateway, /v3/...) as HTTP/1.0 POSTs on a fresh TCP
 * connection each.  HTTP/1.0 because the gateway then answers without
 * chunked encoding and ends the body by closing: a unary answer is
 * everything after the headers, and a watch is a stream of JSON objects
 * (one per change, "result" wrapped) on a connection that stays open.
 * The gateway writes int64 fields as strings and leaves fields at their
 * zero value out (a PUT event has no "type", a failed txn no
 * "succeeded"); keys and values are base64.
 *
 * One request per connection keeps it simple (its cost on 127.0.0.1 is
 * in Documentation/distributed.rst).  Also here: the registry spec parser.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "etcd-impl.h"
#include "sched-impl.h"

int64_t etcd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void mi_etcd_opts_defaults(struct mi_etcd_opts *o)
{
	if (!o->host[0])
		snprintf(o->host, sizeof(o->host), "127.0.0.1");
	if (!o->port)
		o->port = 2379;
	if (!o->cluster[0])
		snprintf(o->cluster, sizeof(o->cluster), "default");
	if (!o->ttl_s)
		o->ttl_s = 10;
	if (!o->timeout_ms)
		o->timeout_ms = 2000;
}

bool etcd_name_ok(const char *s, size_t len)
{
	if (!len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(s[i] == '-' || s[i] == '_' || s[i] == '.' ||
		      (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

int mi_registry_backend_parse(const char *spec,
			      struct mi_registry_backend_cfg *cfg)
{
	const char *p, *colon, *slash;
	struct in_addr a;
	size_t hl;

	memset(cfg, 0, sizeof(*cfg));
	if (!spec || !*spec || !strcmp(spec, "local")) {
		cfg->kind = MI_REG_BACKEND_LOCAL;
		return 0;
	}
	if (strncmp(spec, "etcd://", 7))
		return mi_set_error(-EINVAL, "registry: '%s' is neither 'local' nor 'etcd://HOST:PORT[/CLUSTER]'",
				    spec);
	p = spec + 7;
	slash = strchr(p, '/');
	colon = memchr(p, ':', slash ? (size_t)(slash - p) : strlen(p));
	hl = colon ? (size_t)(colon - p) : slash ? (size_t)(slash - p) : strlen(p);
	if (!hl || hl >= sizeof(cfg->etcd.host))
		return mi_set_error(-EINVAL, "registry: no host in '%s'", spec);
	memcpy(cfg->etcd.host, p, hl);
	if (inet_pton(AF_INET, cfg->etcd.host, &a) != 1)
		return mi_set_error(-EINVAL, "registry: '%s' is not an IPv4 address", cfg->etcd.host);
	if (colon) {
		char *end;
		long port = strtol(colon + 1, &end, 10);

		if (end == colon + 1 || port < 1 || port > 65535 ||
		    (*end && *end != '/'))
			return mi_set_error(-EINVAL, "registry: bad port in '%s'", spec);
		cfg->etcd.port = (uint16_t)port;
	}
	if (slash && slash[1]) {
		size_t cl = strlen(slash + 1);

		if (cl >= sizeof(cfg->etcd.cluster) || !etcd_name_ok(slash + 1, cl))
			return mi_set_error(-EINVAL, "registry: bad cluster name in '%s'", spec);
		memcpy(cfg->etcd.cluster, slash + 1, cl);
	}
	cfg->kind = MI_REG_BACKEND_ETCD;
	mi_etcd_opts_defaults(&cfg->etcd);
	return 0;
}

/* ==== base64 ========================================================= */

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void etcd_b64_encode(const void *in, size_t len, char *out)
{
	const unsigned char *s = in;
	size_t i;

	for (i = 0; i + 2 < len; i += 3) {
		*out++ = b64[s[i] >> 2];
		*out++ = b64[(s[i] & 3) << 4 | s[i + 1] >> 4];
		*out++ = b64[(s[i + 1] & 15) << 2 | s[i + 2] >> 6];
		*out++ = b64[s[i + 2] & 63];
	}
	if (i < len) {
		*out++ = b64[s[i] >> 2];
		if (i + 1 < len) {
			*out++ = b64[(s[i] & 3) << 4 | s[i + 1] >> 4];
			*out++ = b64[(s[i + 1] & 15) << 2];
		} else {
			*out++ = b64[(s[i] & 3) << 4];
			*out++ = '=';
		}
		*out++ = '=';
	}
	*out = 0;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

/* Decode n characters; -1 on bad input or when out (cap) is too small.
 * out gets a NUL after the bytes. */
ssize_t etcd_b64_decode(const char *in, size_t n, char *out, size_t cap)
{
	uint32_t acc = 0;
	size_t len = 0;
	int bits = 0;

	for (size_t i = 0; i < n && in[i] != '='; i++) {
		int v = b64_val(in[i]);

		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (len + 1 >= cap)
				return -1;
			out[len++] = (char)(acc >> bits & 0xff);
		}
	}
	out[len] = 0;
	return (ssize_t)len;
}

/* ==== a small JSON reader ============================================ */
/*
 * Enough for the gateway's answers: find a member of an object, walk an
 * array, read a string (the gateway's strings are base64 or plain ASCII)
 * or a number (int64s arrive as strings).  p..e is the text; every
 * function returns NULL on malformed input.
 */

const char *etcd_js_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

static const char *js_skip_str(const char *p, const char *e)
{
	for (p++; p < e; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

const char *etcd_js_skip(const char *p, const char *e)
{
	int depth = 0;

	p = etcd_js_ws(p, e);
	if (p >= e)
		return NULL;
	if (*p == '"')
		return js_skip_str(p, e);
	if (*p != '{' && *p != '[') {
		while (p < e && *p != ',' && *p != '}' && *p != ']' &&
		       *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t')
			p++;
		return p;
	}
	for (; p < e; p++) {
		if (*p == '"') {
			p = js_skip_str(p, e);
			if (!p)
				return NULL;
			p--;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if (*p == '}' || *p == ']') {
			if (!--depth)
				return p + 1;
		}
	}
	return NULL;
}

/* The value of member key of the object at p, or NULL. */
const char *etcd_js_get(const char *p, const char *e, const char *key)
{
	size_t kl = strlen(key);

	p = etcd_js_ws(p, e);
	if (p >= e || *p != '{')
		return NULL;
	p++;
	for (;;) {
		const char *k, *ke;

		p = etcd_js_ws(p, e);
		if (p >= e || *p == '}' || *p != '"')
			return NULL;
		k = p + 1;
		ke = js_skip_str(p, e);
		if (!ke)
			return NULL;
		p = etcd_js_ws(ke, e);
		if (p >= e || *p != ':')
			return NULL;
		p = etcd_js_ws(p + 1, e);
		if ((size_t)(ke - 1 - k) == kl && !memcmp(k, key, kl))
			return p;
		p = etcd_js_skip(p, e);
		if (!p)
			return NULL;
		p = etcd_js_ws(p, e);
		if (p < e && *p == ',')
			p++;
	}
}

/* Array iteration: *it starts at the '['; returns the next element or
 * NULL at the end. */
const char *etcd_js_next(const char **it, const char *e)
{
	const char *p = etcd_js_ws(*it, e), *v, *after;

	if (p >= e || (*p != '[' && *p != ','))
		return NULL;
	v = etcd_js_ws(p + 1, e);
	if (v >= e || *v == ']')
		return NULL;
	after = etcd_js_skip(v, e);
	if (!after)
		return NULL;
	*it = etcd_js_ws(after, e);
	return v;
}

/* A string's raw characters (no unescaping: the gateway's strings need
 * none); -1 if v is not a string. */
ssize_t etcd_js_str(const char *v, const char *e, const char **s)
{
	const char *end;

	if (!v || v >= e || *v != '"')
		return -1;
	end = js_skip_str(v, e);
	if (!end)
		return -1;
	*s = v + 1;
	return end - 1 - (v + 1);
}

/* An integer, quoted (int64) or not; def if absent. */
int64_t etcd_js_int(const char *v, const char *e, int64_t def)
{
	char buf[32];
	size_t n = 0;

	if (!v)
		return def;
	if (*v == '"')
		v++;
	while (v < e && n < sizeof(buf) - 1 && (*v == '-' || (*v >= '0' && *v <= '9')))
		buf[n++] = *v++;
	buf[n] = 0;
	return n ? strtoll(buf, NULL, 10) : def;
}

double etcd_js_num(const char *v, const char *e, double def)
{
	char buf[48];
	size_t n = 0;

	if (!v)
		return def;
	while (v < e && n < sizeof(buf) - 1 && *v && strchr("+-.0123456789eE", *v))
		buf[n++] = *v++;
	buf[n] = 0;
	return n ? strtod(buf, NULL) : def;
}

bool etcd_js_true(const char *v, const char *e)
{
	return v && e - v >= 4 && !memcmp(v, "true", 4);
}

/* Copy a JSON string member into buf (NUL-ended); false if absent. */
bool etcd_js_copy(const char *obj, const char *e, const char *key, char *buf,
		  size_t cap)
{
	const char *s;
	ssize_t n = etcd_js_str(etcd_js_get(obj, e, key), e, &s);

	if (n < 0 || (size_t)n >= cap)
		return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	return true;
}

/* ==== HTTP/1.0 to the gateway ======================================== */

/* Connected socket to o (blocking afterwards), or -errno. */
int etcd_http_connect(const struct mi_etcd_opts *o)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct pollfd pfd;
	int fd, err = 0, one = 1;
	socklen_t sl = sizeof(err);

	sa.sin_port = htons(o->port);
	if (inet_pton(AF_INET, o->host, &sa.sin_addr) != 1)
		return mi_set_error(-EINVAL, "etcd: '%s' is not an IPv4 address", o->host);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return mi_set_error(-errno, "etcd: socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		err = -errno;
		goto fail;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&pfd, 1, (int)o->timeout_ms) != 1) {
		err = -ETIMEDOUT;
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) || err) {
		err = -(err ? err : errno);
		goto fail;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
fail:
	close(fd);
	return mi_set_error(err, "etcd: cannot reach %s:%u: %s", o->host, o->port,
			    strerror(-err));
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Send one POST; 0 or -errno. */
int etcd_http_send(int fd, const struct mi_etcd_opts *o, const char *path,
		   const char *body)
{
	char head[256];
	size_t bl = strlen(body);
	int n;

	n = snprintf(head, sizeof(head),
		     "POST %s HTTP/1.0\r\nHost: %s:%u\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
		     path, o->host, o->port, bl);
	if (send_all(fd, head, (size_t)n) || send_all(fd, body, bl))
		return mi_set_error(-EIO, "etcd: sending %s to %s:%u failed", path,
				    o->host, o->port);
	return 0;
}

/* Read into *buf (grown) until the headers end; *used: bytes held, *hdr:
 * header length.  Checks the status is 200. */
int etcd_http_read_head(int fd, int timeout_ms, char **buf, size_t *cap,
			size_t *used, size_t *hdr, const char *path)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char *end;
		ssize_t r;

		if (*used + 4096 + 1 > *cap) {
			size_t nc = *cap ? *cap * 2 : 16384;
			char *nb = realloc(*buf, nc);

			if (!nb)
				return mi_set_error(-ENOMEM, "etcd: out of memory");
			*buf = nb;
			*cap = nc;
		}
		(*buf)[*used] = 0;
		end = strstr(*buf, "\r\n\r\n");
		if (end) {
			*hdr = (size_t)(end + 4 - *buf);
			if (strncmp(*buf, "HTTP/1.", 7) || strncmp(*buf + 8, " 200", 4)) {
				char *nl = strchr(*buf, '\r');

				*nl = 0;
				return mi_set_error(-EPROTO, "etcd: %s answered '%s': %.120s",
						    path, *buf, *buf + *hdr);
			}
			return 0;
		}
		if (poll(&pfd, 1, timeout_ms) != 1)
			return mi_set_error(-ETIMEDOUT, "etcd: %s: no answer within %d ms",
					    path, timeout_ms);
		r = recv(fd, *buf + *used, *cap - *used - 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return mi_set_error(-ECONNRESET, "etcd: %s: connection closed before an answer",
					    path);
		*used += (size_t)r;
	}
}

/* One unary request: *out (malloc'd, NUL-ended) is the JSON answer. */
int etcd_http_post(const struct mi_etcd_opts *o, const char *path,
		   const char *body, char **out, size_t *out_len)
{
	size_t cap = 0, used = 0, hdr = 0;
	char *buf = NULL;
	int fd, ret;

	*out = NULL;
	fd = etcd_http_connect(o);
	if (fd < 0)
		return fd;
	ret = etcd_http_send(fd, o, path, body);
	if (!ret)
		ret = etcd_http_read_head(fd, (int)o->timeout_ms, &buf, &cap, &used, &hdr, path);
	/* the rest of the body, until etcd closes */
	while (!ret) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (used + 4096 + 1 > cap) {
			char *nb = cap * 2 > BODY_MAX ? NULL : realloc(buf, cap * 2);

			if (!nb) {
				ret = mi_set_error(-E2BIG, "etcd: %s: answer over %d bytes",
						   path, BODY_MAX);
				break;
			}
			buf = nb;
			cap *= 2;
		}
		if (poll(&pfd, 1, (int)o->timeout_ms) != 1) {
			ret = mi_set_error(-ETIMEDOUT, "etcd: %s: answer cut short", path);
			break;
		}
		r = recv(fd, buf + used, cap - used - 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			ret = mi_set_error(-ECONNRESET, "etcd: %s: %s", path, strerror(errno));
		if (r <= 0)
			break;
		used += (size_t)r;
	}
	close(fd);
	if (ret) {
		free(buf);
		return ret;
	}
	buf[used] = 0;
	memmove(buf, buf + hdr, used - hdr + 1);
	*out = buf;
	if (out_len)
		*out_len = used - hdr;
	return 0;
}

/* ==== key/value operations =========================================== */

/* base64 of a NUL-terminated key; -ENAMETOOLONG past KEY_MAX. */
int etcd_key_b64(const char *key, char *out)
{
	size_t n = strlen(key);

	if (!n || n > KEY_MAX)
		return mi_set_error(-ENAMETOOLONG, "etcd: key of %zu bytes", n);
	etcd_b64_encode(key, n, out);
	return 0;
}

/* The end of the range of every key starting with prefix: the prefix
 * with its last byte incremented. */
int etcd_prefix_end_b64(const char *prefix, char *out)
{
	char end[KEY_MAX + 1];
	size_t n = strlen(prefix);

	if (!n || n > KEY_MAX)
		return mi_set_error(-ENAMETOOLONG, "etcd: prefix of %zu bytes", n);
	memcpy(end, prefix, n);
	end[n - 1]++;
	etcd_b64_encode(end, n, out);
	return 0;
}

/* An answer carrying {"error": ...} instead of a result. */
int etcd_answer_error(const char *path, const char *js, size_t len)
{
	const char *e = js + len, *s;
	ssize_t n;

	if (!etcd_js_get(js, e, "error"))
		return 0;
	n = etcd_js_str(etcd_js_get(js, e, "message"), e, &s);
	return mi_set_error(-EPROTO, "etcd: %s failed: %.*s", path,
			    n > 0 ? (int)n : 7, n > 0 ? s : "unknown");
}

int mi_etcd_put(const struct mi_etcd_opts *o, const char *key,
		const void *val, size_t len, int64_t lease)
{
	char kb[KEY_B64], vb[VAL_B64], body[KEY_B64 + VAL_B64 + 96];
	char *ans;
	size_t al;
	int ret;

	if (len > MI_ETCD_VALUE_MAX)
		return mi_set_error(-E2BIG, "etcd: value of %zu bytes", len);
	ret = etcd_key_b64(key, kb);
	if (ret)
		return ret;
	etcd_b64_encode(val, len, vb);
	if (lease)
		snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%lld\"}",
			 kb, vb, (long long)lease);
	else
		snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"%s\"}", kb, vb);
	ret = etcd_http_post(o, "/v3/kv/put", body, &ans, &al);
	if (ret)
		return ret;
	ret = etcd_answer_error("put", ans, al);
	free(ans);
	return ret;
}

/* Walk the kvs of a range answer. */
static int range_walk(const char *ans, size_t al, mi_etcd_kv_cb cb, void *arg,
		      int64_t *rev)
{
	const char *e = ans + al, *it, *kv;
	char key[KEY_MAX + 1], *val;
	int ret = 0;

	if (rev)
		*rev = etcd_js_int(etcd_js_get(etcd_js_get(ans, e, "header"), e, "revision"), e, 0);
	it = etcd_js_get(ans, e, "kvs");
	if (!it)
		return 0;	/* nothing there */
	val = malloc(MI_ETCD_VALUE_MAX + 1);
	if (!val)
		return mi_set_error(-ENOMEM, "etcd: out of memory");
	while (!ret && (kv = etcd_js_next(&it, e))) {
		const char *ks, *vs = "";
		ssize_t kn = etcd_js_str(etcd_js_get(kv, e, "key"), e, &ks);
		ssize_t vn = etcd_js_str(etcd_js_get(kv, e, "value"), e, &vs);
		ssize_t klen, vlen;

		if (vn < 0)
			vn = 0;	/* an empty value is left out */
		klen = kn < 0 ? -1 : etcd_b64_decode(ks, (size_t)kn, key, sizeof(key));
		vlen = etcd_b64_decode(vs, (size_t)vn, val, MI_ETCD_VALUE_MAX + 1);
		if (klen < 0 || vlen < 0) {
			ret = mi_set_error(-EPROTO, "etcd: range answer with a bad key or value");
			break;
		}
		ret = cb(key, val, (size_t)vlen,
			 etcd_js_int(etcd_js_get(kv, e, "mod_revision"), e, 0), arg);
	}
	free(val);
	return ret < 0 ? ret : 0;
}

struct get_ctx {
	char *val;
	size_t cap, len;
	int64_t mod_rev;
	bool found;
};

static int get_cb(const char *key, const char *val, size_t len,
		  int64_t mod_rev, void *arg)
{
	struct get_ctx *g = arg;

	if (len >= g->cap)
		return mi_set_error(-E2BIG, "etcd: %s holds %zu bytes, %zu room",
				    key, len, g->cap);
	memcpy(g->val, val, len);
	g->val[len] = 0;
	g->len = len;
	g->mod_rev = mod_rev;
	g->found = true;
	return 1;
}

int mi_etcd_get(const struct mi_etcd_opts *o, const char *key, char *val,
		size_t cap, size_t *len, int64_t *mod_rev)
{
	struct get_ctx g = { .val = val, .cap = cap };
	char kb[KEY_B64], body[KEY_B64 + 32], *ans;
	size_t al;
	int ret;

	ret = etcd_key_b64(key, kb);
	if (ret)
		return ret;
	snprintf(body, sizeof(body), "{\"key\":\"%s\"}", kb);
	ret = etcd_http_post(o, "/v3/kv/range", body, &ans, &al);
	if (ret)
		return ret;
	ret = etcd_answer_error("range", ans, al);
	if (!ret)
		ret = range_walk(ans, al, get_cb, &g, NULL);
	free(ans);
	if (ret)
		return ret;
	if (!g.found)
		return -ENOENT;
	if (len)
		*len = g.len;
	if (mod_rev)
		*mod_rev = g.mod_rev;
	return 0;
}

/* POST a {key, range_end} request covering every key under prefix to
 * path; *ans is the answer body (free it) once etcd reported no error. */
static int prefix_call(const struct mi_etcd_opts *o, const char *path,
		       const char *what, const char *prefix, char **ans,
		       size_t *al)
{
	char kb[KEY_B64], eb[KEY_B64], body[2 * KEY_B64 + 48];
	int ret;

	ret = etcd_key_b64(prefix, kb);
	if (!ret)
		ret = etcd_prefix_end_b64(prefix, eb);
	if (ret)
		return ret;
	snprintf(body, sizeof(body), "{\"key\":\"%s\",\"range_end\":\"%s\"}", kb, eb);
	ret = etcd_http_post(o, path, body, ans, al);
	if (ret)
		return ret;
	ret = etcd_answer_error(what, *ans, *al);
	if (ret) {
		free(*ans);
		*ans = NULL;
	}
	return ret;
}

int mi_etcd_range(const struct mi_etcd_opts *o, const char *prefix,
		  mi_etcd_kv_cb cb, void *arg, int64_t *rev)
{
	char *ans;
	size_t al;
	int ret = prefix_call(o, "/v3/kv/range", "range", prefix, &ans, &al);

	if (ret)
		return ret;
	ret = range_walk(ans, al, cb, arg, rev);
	free(ans);
	return ret;
}

int mi_etcd_delete_prefix(const struct mi_etcd_opts *o, const char *prefix)
{
	char *ans;
	size_t al;
	int ret = prefix_call(o, "/v3/kv/deleterange", "deleterange", prefix,
			      &ans, &al);

	if (!ret)
		free(ans);
	return ret;
}

#define TXN_MAX 8

int mi_etcd_txn(const struct mi_etcd_opts *o, const struct mi_etcd_cmp *cmp,
		uint32_t n_cmp, const struct mi_etcd_kv *put, uint32_t n_put,
		bool *ok)
{
	char kb[KEY_B64], vb[VAL_B64], *body, *ans;
	size_t cap = (size_t)(n_cmp + n_put) * (KEY_B64 + VAL_B64 + 96) + 64;
	size_t n = 0, al, vl;
	int ret = 0;

	*ok = false;
	if (n_cmp > TXN_MAX || n_put > TXN_MAX)
		return mi_set_error(-E2BIG, "etcd: txn over %d compares or puts", TXN_MAX);
	body = malloc(cap);
	if (!body)
		return mi_set_error(-ENOMEM, "etcd: out of memory");
	n += snprintf(body + n, cap - n, "{\"compare\":[");
	for (uint32_t i = 0; i < n_cmp && !ret; i++) {
		ret = etcd_key_b64(cmp[i].key, kb);
		if (ret)
			break;
		if (cmp[i].value) {
			vl = strlen(cmp[i].value);
			if (vl > MI_ETCD_VALUE_MAX) {
				ret = mi_set_error(-E2BIG, "etcd: compare value of %zu bytes", vl);
				break;
			}
			etcd_b64_encode(cmp[i].value, vl, vb);
			n += snprintf(body + n, cap - n,
				      "%s{\"key\":\"%s\",\"target\":\"VALUE\",\"result\":\"EQUAL\",\"value\":\"%s\"}",
				      i ? "," : "", kb, vb);
		} else {
			n += snprintf(body + n, cap - n,
				      "%s{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"}",
				      i ? "," : "", kb);
		}
	}
	n += snprintf(body + n, cap - n, "],\"success\":[");
	for (uint32_t i = 0; i < n_put && !ret; i++) {
		ret = etcd_key_b64(put[i].key, kb);
		if (ret)
			break;
		vl = strlen(put[i].value);
		if (vl > MI_ETCD_VALUE_MAX) {
			ret = mi_set_error(-E2BIG, "etcd: value of %zu bytes", vl);
			break;
		}
		etcd_b64_encode(put[i].value, vl, vb);
		n += snprintf(body + n, cap - n,
			      "%s{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}",
			      i ? "," : "", kb, vb);
	}
	snprintf(body + n, cap - n, "]}");
	if (!ret)
		ret = etcd_http_post(o, "/v3/kv/txn", body, &ans, &al);
	free(body);
	if (ret)
		return ret;
	ret = etcd_answer_error("txn", ans, al);
	if (!ret)
		*ok = etcd_js_true(etcd_js_get(ans, ans + al, "succeeded"), ans + al);
	free(ans);
	return ret;
}

/* ==== leases ========================================================= */

int mi_etcd_lease_grant(const struct mi_etcd_opts *o, uint32_t ttl_s,
			int64_t *lease)
{
	char body[48], *ans;
	size_t al;
	int ret;

	snprintf(body, sizeof(body), "{\"TTL\":\"%u\"}", ttl_s);
	ret = etcd_http_post(o, "/v3/lease/grant", body, &ans, &al);
	if (ret)
		return ret;
	ret = etcd_answer_error("lease grant", ans, al);
	if (!ret) {
		*lease = etcd_js_int(etcd_js_get(ans, ans + al, "ID"), ans + al, 0);
		if (!*lease)
			ret = mi_set_error(-EPROTO, "etcd: lease grant without an ID: %.100s", ans);
	}
	free(ans);
	return ret;
}

int mi_etcd_lease_keepalive(const struct mi_etcd_opts *o, int64_t lease,
			    int64_t *ttl_s)
{
	char body[48], *ans;
	const char *r;
	size_t al;
	int ret;

	/* a stream on the gRPC side: one message in, one answer out, then
	 * the gateway closes it because the request body ended */
	snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
	ret = etcd_http_post(o, "/v3/lease/keepalive", body, &ans, &al);
	if (ret)
		return ret;
	r = etcd_js_get(ans, ans + al, "result");
	if (!r) {
		ret = etcd_answer_error("lease keepalive", ans, al);
		if (!ret)
			ret = mi_set_error(-EPROTO, "etcd: keepalive answer: %.100s", ans);
	} else {
		*ttl_s = etcd_js_int(etcd_js_get(r, ans + al, "TTL"), ans + al, 0);
	}
	free(ans);
	return ret;
}

int mi_etcd_lease_revoke(const struct mi_etcd_opts *o, int64_t lease)
{
	char body[48], *ans;
	size_t al;
	int ret;

	snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
	ret = etcd_http_post(o, "/v3/lease/revoke", body, &ans, &al);
	if (ret)
		return ret;
	ret = etcd_answer_error("lease revoke", ans, al);
	free(ans);
	return ret;
}

