// SPDX-License-Identifier: GPL-2.0-only
/*
 * Helpers shared by the MetaInfer kernel selftests, the bench and the demo.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "mi_test.h"

int mi_ioctl(int fd, unsigned long req, void *arg)
{
	int ret;

	do {
		ret = ioctl(fd, req, arg);
	} while (ret == -1 && (errno == EINTR || errno == EAGAIN));
	return ret == -1 ? -errno : 0;
}

/* Devices -------------------------------------------------------------- */

static int is_metainfer(int fd)
{
	struct drm_version v;
	char name[64] = "";

	memset(&v, 0, sizeof(v));
	v.name = name;
	v.name_len = sizeof(name) - 1;
	if (mi_ioctl(fd, DRM_IOCTL_VERSION, &v))
		return 0;
	return strcmp(name, "metainfer") == 0;
}

int mi_open_minor(int minor)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/dev/dri/renderD%d", minor);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!is_metainfer(fd)) {
		close(fd);
		return -ENODEV;
	}
	return fd;
}

int mi_list_minors(int *minors, int max)
{
	int n = 0, m;

	for (m = 128; m < 192 && n < max; m++) {
		int fd = mi_open_minor(m);

		if (fd < 0)
			continue;
		close(fd);
		minors[n++] = m;
	}
	return n;
}

int mi_open_named(const char *name, int *minor_out)
{
	int m;

	for (m = 128; m < 192; m++) {
		char buf[128];
		int fd = mi_open_minor(m);

		if (fd < 0)
			continue;
		if (!name || (!mi_get_param_str(fd, DRM_METAINFER_PARAM_NAME,
						buf, sizeof(buf)) &&
			      !strcmp(buf, name))) {
			if (minor_out)
				*minor_out = m;
			return fd;
		}
		close(fd);
	}
	return -ENODEV;
}

int mi_fd_minor(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISCHR(st.st_mode))
		return -ENOTTY;
	return minor(st.st_rdev);
}

int mi_get_param(int fd, uint32_t param, uint32_t index, uint64_t *value)
{
	struct drm_metainfer_get_param p;
	int ret;

	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.param = param;
	p.index = index;
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &p);
	if (!ret && value)
		*value = p.value;
	return ret;
}

int mi_get_param_str(int fd, uint32_t param, char *buf, size_t len)
{
	struct drm_metainfer_get_param p;
	int ret;

	if (!len)
		return -EINVAL;
	memset(&p, 0, sizeof(p));
	memset(buf, 0, len);
	p.size = sizeof(p);
	p.param = param;
	p.data_ptr = (uintptr_t)buf;
	p.data_size = len - 1;
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_GET_PARAM, &p);
	buf[len - 1] = 0;
	return ret;
}

/* Buffers --------------------------------------------------------------- */

int mi_bo_create(int fd, uint64_t size, uint32_t *handle)
{
	struct drm_metainfer_bo_create c;
	int ret;

	memset(&c, 0, sizeof(c));
	c.size = sizeof(c);
	c.bo_size = size;
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_BO_CREATE, &c);
	if (!ret)
		*handle = c.handle;
	return ret;
}

int mi_bo_info(int fd, uint32_t handle, uint64_t *size, uint64_t *mmap_off)
{
	struct drm_metainfer_bo_info i;
	int ret;

	memset(&i, 0, sizeof(i));
	i.size = sizeof(i);
	i.handle = handle;
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_BO_INFO, &i);
	if (!ret) {
		if (size)
			*size = i.bo_size;
		if (mmap_off)
			*mmap_off = i.mmap_offset;
	}
	return ret;
}

void *mi_bo_map(int fd, uint32_t handle, uint64_t *size)
{
	uint64_t sz, off;
	void *p;

	if (mi_bo_info(fd, handle, &sz, &off))
		return NULL;
	p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	if (p == MAP_FAILED)
		return NULL;
	if (size)
		*size = sz;
	return p;
}

int mi_bo_close(int fd, uint32_t handle)
{
	struct drm_gem_close c = { .handle = handle };

	return mi_ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
}

void *mi_bo_new(int fd, uint64_t size, uint32_t *handle)
{
	if (mi_bo_create(fd, size, handle))
		return NULL;
	return mi_bo_map(fd, *handle, NULL);
}

/* Contexts, submission -------------------------------------------------- */

int mi_ctx_create(int fd, uint32_t queue, uint32_t prio, uint32_t *ctx)
{
	struct drm_metainfer_ctx_create c;
	int ret;

	memset(&c, 0, sizeof(c));
	c.size = sizeof(c);
	c.queue = queue;
	c.priority = prio;
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_CTX_CREATE, &c);
	if (!ret)
		*ctx = c.ctx_id;
	return ret;
}

int mi_ctx_destroy(int fd, uint32_t ctx)
{
	struct drm_metainfer_ctx_destroy d;

	memset(&d, 0, sizeof(d));
	d.size = sizeof(d);
	d.ctx_id = ctx;
	return mi_ioctl(fd, DRM_IOCTL_METAINFER_CTX_DESTROY, &d);
}

int mi_submit(int fd, uint32_t ctx, const uint32_t *bos, uint32_t nbos,
	      const void *cmds, uint32_t cmds_size, uint64_t *seqno)
{
	struct drm_metainfer_submit s;
	int ret;

	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	s.ctx_id = ctx;
	s.bo_count = nbos;
	s.bo_handles = (uintptr_t)bos;
	s.cmds = (uintptr_t)cmds;
	s.cmds_size = cmds_size;
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_SUBMIT, &s);
	if (!ret && seqno)
		*seqno = s.seqno;
	return ret;
}

int64_t mi_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t mi_deadline_ms(int64_t ms)
{
	return mi_now_ns() + ms * 1000000LL;
}

int mi_wait(int fd, uint32_t ctx, uint64_t seqno, int64_t timeout_ms,
	    int64_t *status)
{
	struct drm_metainfer_wait w;
	int ret;

	memset(&w, 0, sizeof(w));
	w.size = sizeof(w);
	w.ctx_id = ctx;
	w.seqno = seqno;
	w.timeout_ns = mi_deadline_ms(timeout_ms);
	ret = mi_ioctl(fd, DRM_IOCTL_METAINFER_WAIT, &w);
	if (!ret && status)
		*status = w.status;
	return ret;
}

int mi_counters(int fd, uint32_t ctx, struct drm_metainfer_get_counters *c)
{
	memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	if (ctx) {
		c->flags = DRM_METAINFER_COUNTERS_CTX;
		c->ctx_id = ctx;
	}
	return mi_ioctl(fd, DRM_IOCTL_METAINFER_GET_COUNTERS, c);
}

int mi_syncobj_create(int fd, uint32_t flags, uint32_t *handle)
{
	struct drm_syncobj_create c = { .flags = flags };
	int ret = mi_ioctl(fd, DRM_IOCTL_SYNCOBJ_CREATE, &c);

	if (!ret)
		*handle = c.handle;
	return ret;
}

int mi_syncobj_destroy(int fd, uint32_t handle)
{
	struct drm_syncobj_destroy d = { .handle = handle };

	return mi_ioctl(fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d);
}

int mi_syncobj_timeline_wait(int fd, uint32_t handle, uint64_t point,
			     int64_t timeout_ms, uint32_t flags)
{
	struct drm_syncobj_timeline_wait w;

	memset(&w, 0, sizeof(w));
	w.handles = (uintptr_t)&handle;
	w.points = (uintptr_t)&point;
	w.count_handles = 1;
	w.timeout_nsec = mi_deadline_ms(timeout_ms);
	w.flags = flags;
	return mi_ioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w);
}

int mi_syncobj_query(int fd, uint32_t handle, uint64_t *point)
{
	struct drm_syncobj_timeline_array a;

	memset(&a, 0, sizeof(a));
	a.handles = (uintptr_t)&handle;
	a.points = (uintptr_t)point;
	a.count_handles = 1;
	return mi_ioctl(fd, DRM_IOCTL_SYNCOBJ_QUERY, &a);
}

int mi_prime_export(int fd, uint32_t handle, int *dmabuf)
{
	struct drm_prime_handle p = { .handle = handle,
				      .flags = DRM_CLOEXEC | DRM_RDWR };
	int ret = mi_ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p);

	if (!ret)
		*dmabuf = p.fd;
	return ret;
}

int mi_prime_import(int fd, int dmabuf, uint32_t *handle)
{
	struct drm_prime_handle p = { .fd = dmabuf };
	int ret = mi_ioctl(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &p);

	if (!ret)
		*handle = p.handle;
	return ret;
}

/* Command streams ------------------------------------------------------- */

void mi_stream_init(struct mi_stream *s)
{
	s->cap = 4096;
	s->buf = calloc(1, s->cap);
	s->len = sizeof(struct drm_metainfer_stream_header);
	s->nops = 0;
	if (!s->buf)
		abort();
}

void mi_stream_add(struct mi_stream *s, void *op, size_t size)
{
	struct drm_metainfer_op_header *h = op;

	h->size = (uint32_t)size;
	while (s->len + size > s->cap) {
		s->cap *= 2;
		s->buf = realloc(s->buf, s->cap);
		if (!s->buf)
			abort();
	}
	memcpy(s->buf + s->len, op, size);
	s->len += size;
	s->nops++;
}

void *mi_stream_finish(struct mi_stream *s)
{
	struct drm_metainfer_stream_header h = {
		.magic = DRM_METAINFER_STREAM_MAGIC,
		.version = DRM_METAINFER_STREAM_VERSION,
		.op_count = s->nops,
	};

	memcpy(s->buf, &h, sizeof(h));
	return s->buf;
}

void mi_stream_free(struct mi_stream *s)
{
	free(s->buf);
	s->buf = NULL;
}

struct drm_metainfer_tensor mi_tensor(uint32_t bo_index, uint32_t dtype,
				      uint32_t layout, uint64_t offset,
				      uint32_t ndim, const uint32_t *shape)
{
	struct drm_metainfer_tensor t;
	uint32_t k;

	memset(&t, 0, sizeof(t));
	t.bo_index = bo_index;
	t.dtype = dtype;
	t.layout = layout;
	t.ndim = ndim;
	t.offset = offset;
	for (k = 0; k < ndim && k < 4; k++)
		t.shape[k] = shape[k];
	return t;
}

uint64_t mi_tensor_bytes(uint32_t dtype, uint32_t ndim, const uint32_t *shape)
{
	uint64_t n = dtype == DRM_METAINFER_DTYPE_INT32 ? 4 :
		     dtype == DRM_METAINFER_DTYPE_INT16 ? 2 : 1;
	uint32_t k;

	for (k = 0; k < ndim; k++)
		n *= shape[k];
	return n;
}

void mi_copy_job(struct mi_stream *s, uint32_t n, uint64_t src_off,
		 uint64_t dst_off)
{
	struct drm_metainfer_op_copy op;
	uint32_t shape[1] = { n };

	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_COPY;
	op.input = mi_tensor(0, DRM_METAINFER_DTYPE_INT8,
			     DRM_METAINFER_LAYOUT_PLAIN, src_off, 1, shape);
	op.output = mi_tensor(1, DRM_METAINFER_DTYPE_INT8,
			      DRM_METAINFER_LAYOUT_PLAIN, dst_off, 1, shape);
	mi_stream_add(s, &op, sizeof(op));
}

/* metainfer_sim control ------------------------------------------------- */

int mi_write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int ret = 0;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	if (n < 0)
		ret = -errno;
	else if ((size_t)n != strlen(s))
		ret = -EIO;
	close(fd);
	return ret;
}

int mi_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += n;
	buf[got] = 0;
	close(fd);
	return (int)got;
}

int mi_read_key(const char *path, const char *key, long long *value)
{
	char buf[8192], *p;
	size_t kl = strlen(key);
	int n = mi_read_file(path, buf, sizeof(buf));

	if (n < 0)
		return n;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, key, kl))
			continue;
		p += kl;
		if (*p != '=' && *p != ':' && *p != ' ' && *p != '\t')
			continue;
		while (*p == '=' || *p == ':' || *p == ' ' || *p == '\t')
			p++;
		*value = strtoll(p, NULL, 0);
		return 0;
	}
	return -ENOENT;
}

bool mi_sim_present(void)
{
	return access(MI_SIM_BUS "/new_device", W_OK) == 0;
}

int mi_sim_minor(unsigned int id)
{
	char path[128];
	struct dirent *de;
	int minor = -ENOENT;
	DIR *d;

	snprintf(path, sizeof(path),
		 "/sys/bus/platform/devices/metainfer_sim.%u/drm", id);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "renderD", 7))
			minor = atoi(de->d_name + 7);
	closedir(d);
	return minor;
}

int mi_sim_id_of_minor(int minor)
{
	char path[128], buf[32];
	int n;

	snprintf(path, sizeof(path), "/sys/class/drm/renderD%d/device/sim_id",
		 minor);
	n = mi_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	return atoi(buf);
}

int mi_sim_new(unsigned int id, const char *pers, const char *params)
{
	char cmd[512], dev[64];
	int ret, i;

	snprintf(cmd, sizeof(cmd), "%u %s%s%s", id, pers, params ? " " : "",
		 params ? params : "");
	ret = mi_write_file(MI_SIM_BUS "/new_device", cmd);
	if (ret)
		return ret;
	/* devtmpfs creates the node; wait for it to be openable */
	for (i = 0; i < 500; i++) {
		int m = mi_sim_minor(id);

		if (m >= 0) {
			snprintf(dev, sizeof(dev), "/dev/dri/renderD%d", m);
			if (access(dev, R_OK | W_OK) == 0)
				return 0;
		}
		usleep(10000);
	}
	return -ETIMEDOUT;
}

int mi_sim_del(unsigned int id)
{
	char cmd[32];

	snprintf(cmd, sizeof(cmd), "%u", id);
	return mi_write_file(MI_SIM_BUS "/del_device", cmd);
}

int mi_sim_knob(unsigned int id, const char *knob, long value)
{
	char path[256], val[32];

	/* Documentation/sim.rst: /sys/kernel/debug/metainfer_sim/ID/<knob> */
	snprintf(path, sizeof(path), MI_SIM_DEBUGFS "/%u/%s", id, knob);
	snprintf(val, sizeof(val), "%ld", value);
	return mi_write_file(path, val);
}

long long mi_dbg_bo_count(int minor)
{
	char path[128], buf[32];
	int n;

	snprintf(path, sizeof(path), MI_DEBUGFS "/renderD%d/bo_count", minor);
	n = mi_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	if (n == 0)
		return -EIO;
	return strtoll(buf, NULL, 0);
}

int mi_dbg_status(int minor, const char *key, long long *value)
{
	char path[128];

	snprintf(path, sizeof(path), MI_DEBUGFS "/renderD%d/status", minor);
	return mi_read_key(path, key, value);
}

/* Generic -------------------------------------------------------------- */

uint64_t mi_rand(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

int32_t mi_rand_range(uint64_t *state, int32_t lo, int32_t hi)
{
	uint64_t span = (uint64_t)((int64_t)hi - lo) + 1;

	return (int32_t)(lo + (int64_t)(mi_rand(state) % span));
}
