/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Helpers shared by the MetaInfer kernel selftests (and the bench and demo
 * programs): finding devices, thin ioctl wrappers that return 0 or -errno,
 * a command-stream builder, and the metainfer_sim control files.
 */
#ifndef MI_TEST_H
#define MI_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drm/metainfer_accel.h"

#define MI_SIM_BUS "/sys/bus/metainfer_sim"
#define MI_SIM_DEBUGFS "/sys/kernel/debug/metainfer_sim"

/* ioctl() that returns 0 or -errno and retries on EINTR/EAGAIN. */
int mi_ioctl(int fd, unsigned long req, void *arg);

/* Devices -------------------------------------------------------------- */

/* Open the render node /dev/dri/renderD<minor>; -errno if it is not ours. */
int mi_open_minor(int minor);
/*
 * Open the first metainfer render node whose NAME param is @name (any
 * device if @name is NULL); returns the fd, -ENODEV if none.  @minor_out
 * (may be NULL) receives the render minor.
 */
int mi_open_named(const char *name, int *minor_out);
/* The metainfer render minors present, ascending; returns how many. */
int mi_list_minors(int *minors, int max);
/* Render minor of an open fd, or -errno. */
int mi_fd_minor(int fd);

int mi_get_param(int fd, uint32_t param, uint32_t index, uint64_t *value);
/* Blob param into @buf (NUL-terminated, truncated to @len). */
int mi_get_param_str(int fd, uint32_t param, char *buf, size_t len);

/* Buffers --------------------------------------------------------------- */

int mi_bo_create(int fd, uint64_t size, uint32_t *handle);
int mi_bo_info(int fd, uint32_t handle, uint64_t *size, uint64_t *mmap_off);
/* Map a whole buffer read-write; returns NULL on failure. */
void *mi_bo_map(int fd, uint32_t handle, uint64_t *size);
int mi_bo_close(int fd, uint32_t handle);
/* Create and map in one go. */
void *mi_bo_new(int fd, uint64_t size, uint32_t *handle);

/* Contexts, submission -------------------------------------------------- */

int mi_ctx_create(int fd, uint32_t queue, uint32_t prio, uint32_t *ctx);
int mi_ctx_destroy(int fd, uint32_t ctx);
int mi_submit(int fd, uint32_t ctx, const uint32_t *bos, uint32_t nbos,
	      const void *cmds, uint32_t cmds_size, uint64_t *seqno);
/* Absolute CLOCK_MONOTONIC time @ms milliseconds from now, in ns. */
int64_t mi_deadline_ms(int64_t ms);
int64_t mi_now_ns(void);
/* WAIT with a relative timeout; the ioctl result, job status in @status. */
int mi_wait(int fd, uint32_t ctx, uint64_t seqno, int64_t timeout_ms,
	    int64_t *status);
int mi_counters(int fd, uint32_t ctx, struct drm_metainfer_get_counters *c);

/* Syncobjs (core DRM) */
int mi_syncobj_create(int fd, uint32_t flags, uint32_t *handle);
int mi_syncobj_destroy(int fd, uint32_t handle);
int mi_syncobj_timeline_wait(int fd, uint32_t handle, uint64_t point,
			     int64_t timeout_ms, uint32_t flags);
int mi_syncobj_query(int fd, uint32_t handle, uint64_t *point);

/* PRIME */
int mi_prime_export(int fd, uint32_t handle, int *dmabuf);
int mi_prime_import(int fd, int dmabuf, uint32_t *handle);

/* Command streams ------------------------------------------------------- */

struct mi_stream {
	uint8_t *buf;
	size_t len;
	size_t cap;
	uint32_t nops;
};

void mi_stream_init(struct mi_stream *s);
/* Append an op struct of @size bytes; sets hdr.size = @size. */
void mi_stream_add(struct mi_stream *s, void *op, size_t size);
/* Fill in the stream header; returns the stream. */
void *mi_stream_finish(struct mi_stream *s);
void mi_stream_free(struct mi_stream *s);

/* A dense tensor descriptor. */
struct drm_metainfer_tensor mi_tensor(uint32_t bo_index, uint32_t dtype,
				      uint32_t layout, uint64_t offset,
				      uint32_t ndim, const uint32_t *shape);
/* Bytes a dense tensor of this shape covers. */
uint64_t mi_tensor_bytes(uint32_t dtype, uint32_t ndim, const uint32_t *shape);

/* One COPY of @n int8 elements from bo 0 @src_off to bo 1 @dst_off. */
void mi_copy_job(struct mi_stream *s, uint32_t n, uint64_t src_off,
		 uint64_t dst_off);

/* metainfer_sim control ------------------------------------------------- */

bool mi_sim_present(void);
/* echo "ID PERS [params]" > new_device; waits for the render node. */
int mi_sim_new(unsigned int id, const char *pers, const char *params);
int mi_sim_del(unsigned int id);
/* Render minor of sim device @id, or -errno. */
int mi_sim_minor(unsigned int id);
/* Sim id behind a render minor, or -errno. */
int mi_sim_id_of_minor(int minor);
/* Write a debugfs knob of sim device @id (e.g. "fail_hang"). */
int mi_sim_knob(unsigned int id, const char *knob, long value);

/* Core debugfs (/sys/kernel/debug/metainfer/renderD<minor>/) */
#define MI_DEBUGFS "/sys/kernel/debug/metainfer"
/* Live buffer objects of the device, or -errno. */
long long mi_dbg_bo_count(int minor);
/* A "key value" line of the device's debugfs status file. */
int mi_dbg_status(int minor, const char *key, long long *value);

/* Generic -------------------------------------------------------------- */

int mi_write_file(const char *path, const char *s);
/* Read a whole small file into @buf; returns bytes or -errno. */
int mi_read_file(const char *path, char *buf, size_t len);
/* Find "key<sep>value" (sep is '=', ':' or blanks) in a file; -errno if absent. */
int mi_read_key(const char *path, const char *key, long long *value);
/* Deterministic PRNG (xorshift64*). */
uint64_t mi_rand(uint64_t *state);
int32_t mi_rand_range(uint64_t *state, int32_t lo, int32_t hi);

#endif
