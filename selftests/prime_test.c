// SPDX-License-Identifier: GPL-2.0-only
/*
 * prime_test: dma-buf sharing.  A buffer exported from one file is
 * imported in a second file (same device, and another device) and a job
 * there reads it; a job writing an imported buffer is seen by the exporter;
 * the buffer outlives the exporter's handle; re-importing gives the same
 * handle; no buffer is leaked once everything is closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mi_fixture.h"

#define N 1024

/* COPY N bytes bos[0] -> bos[1] on @fd/@ctx and wait. */
static int copy_job(int fd, uint32_t ctx, uint32_t src, uint32_t dst)
{
	uint32_t bos[2] = { src, dst };
	struct mi_stream s;
	uint64_t seq;
	int64_t st;
	int ret;

	mi_stream_init(&s);
	mi_copy_job(&s, N, 0, 0);
	mi_stream_finish(&s);
	ret = mi_submit(fd, ctx, bos, 2, s.buf, s.len, &seq);
	if (!ret)
		ret = mi_wait(fd, ctx, seq, 30000, &st);
	mi_stream_free(&s);
	return ret ? ret : (int)st;
}

static void fill(uint8_t *p, uint8_t seed)
{
	int i;

	for (i = 0; i < N; i++)
		p[i] = (uint8_t)(i * 13 + seed);
}

static int check(const uint8_t *p, uint8_t seed)
{
	int i;

	for (i = 0; i < N; i++)
		if (p[i] != (uint8_t)(i * 13 + seed))
			return 0;
	return 1;
}

/* Export from self->fd, import into a second file of @minor, job reads it. */
static void import_and_read(struct __test_metadata *_metadata, int fd, int minor)
{
	uint32_t h, imp, dst, ctx2;
	uint8_t *src, *out;
	int dmabuf, fd2;

	src = mi_bo_new(fd, 4096, &h);
	ASSERT_NE(NULL, src);
	fill(src, 7);
	ASSERT_EQ(0, mi_prime_export(fd, h, &dmabuf));
	fd2 = mi_open_minor(minor);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, mi_prime_import(fd2, dmabuf, &imp));
	ASSERT_EQ(0, mi_ctx_create(fd2, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx2));
	out = mi_bo_new(fd2, 4096, &dst);
	ASSERT_NE(NULL, out);
	ASSERT_EQ(0, copy_job(fd2, ctx2, imp, dst));
	EXPECT_TRUE(check(out, 7));
	munmap(out, 4096);
	munmap(src, 4096);
	close(dmabuf);
	close(fd2);
}

TEST_F(dev, import_in_second_file_job_reads)
{
	import_and_read(_metadata, self->fd, self->minor);
}

TEST_F(dev, import_in_other_device_job_reads)
{
	int minors[8], n, i, other = -1;

	n = mi_list_minors(minors, 8);
	for (i = 0; i < n; i++)
		if (minors[i] != self->minor)
			other = minors[i];
	ASSERT_LE(0, other) {
		TH_LOG("needs a second metainfer device");
	}
	import_and_read(_metadata, self->fd, other);
}

TEST_F(dev, job_writes_imported_buffer)
{
	uint32_t h, src_h, imp, ctx2;
	uint8_t *exported, *src;
	int dmabuf, fd2;

	exported = mi_bo_new(self->fd, 4096, &h);
	ASSERT_NE(NULL, exported);
	ASSERT_EQ(0, mi_prime_export(self->fd, h, &dmabuf));
	fd2 = mi_open_minor(self->minor);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, mi_prime_import(fd2, dmabuf, &imp));
	ASSERT_EQ(0, mi_ctx_create(fd2, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx2));
	src = mi_bo_new(fd2, 4096, &src_h);
	ASSERT_NE(NULL, src);
	fill(src, 99);
	ASSERT_EQ(0, copy_job(fd2, ctx2, src_h, imp));
	EXPECT_TRUE(check(exported, 99));
	close(dmabuf);
	close(fd2);
}

TEST_F(dev, imported_buffer_mmap_and_info)
{
	uint32_t h, imp;
	uint64_t size;
	uint8_t *a, *b;
	int dmabuf, fd2;

	a = mi_bo_new(self->fd, 8192, &h);
	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, mi_prime_export(self->fd, h, &dmabuf));
	fd2 = mi_open_minor(self->minor);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, mi_prime_import(fd2, dmabuf, &imp));
	b = mi_bo_map(fd2, imp, &size);
	ASSERT_NE(NULL, b);
	EXPECT_EQ(8192, size);
	a[8191] = 0x42;
	EXPECT_EQ(0x42, b[8191]);
	close(dmabuf);
	close(fd2);
}

TEST_F(dev, reimport_same_file_same_handle)
{
	uint32_t h, imp;
	int dmabuf;

	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &h));
	ASSERT_EQ(0, mi_prime_export(self->fd, h, &dmabuf));
	ASSERT_EQ(0, mi_prime_import(self->fd, dmabuf, &imp));
	EXPECT_EQ(h, imp);
	close(dmabuf);
}

TEST_F(dev, buffer_outlives_exporter_handle)
{
	uint32_t h, imp, dst, ctx2;
	uint8_t *src, *out;
	int dmabuf, fd2;

	src = mi_bo_new(self->fd, 4096, &h);
	ASSERT_NE(NULL, src);
	fill(src, 3);
	munmap(src, 4096);
	ASSERT_EQ(0, mi_prime_export(self->fd, h, &dmabuf));
	ASSERT_EQ(0, mi_bo_close(self->fd, h));
	fd2 = mi_open_minor(self->minor);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, mi_prime_import(fd2, dmabuf, &imp));
	close(dmabuf);
	ASSERT_EQ(0, mi_ctx_create(fd2, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx2));
	out = mi_bo_new(fd2, 4096, &dst);
	ASSERT_NE(NULL, out);
	ASSERT_EQ(0, copy_job(fd2, ctx2, imp, dst));
	EXPECT_TRUE(check(out, 3));
	close(fd2);
}

TEST_F(dev, import_bad_fd)
{
	uint32_t imp;

	ASSERT_NE(0, mi_prime_import(self->fd, -1, &imp));
}

TEST_F(dev, import_non_dmabuf_fd)
{
	uint32_t imp;
	int p[2];

	ASSERT_EQ(0, pipe(p));
	ASSERT_NE(0, mi_prime_import(self->fd, p[0], &imp));
	close(p[0]);
	close(p[1]);
}

TEST_F(dev, export_unknown_handle)
{
	int dmabuf;

	ASSERT_EQ(-ENOENT, mi_prime_export(self->fd, 0x7ffffff0, &dmabuf));
}

TEST_F(dev, shared_buffers_not_leaked)
{
	long long n0 = mi_dbg_bo_count(self->minor), n;
	uint32_t h, imp;
	int dmabuf, fd2, i;

	ASSERT_LE(0, n0);
	fd2 = mi_open_minor(self->minor);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, mi_bo_create(self->fd, 4096, &h));
	ASSERT_EQ(0, mi_prime_export(self->fd, h, &dmabuf));
	ASSERT_EQ(0, mi_prime_import(fd2, dmabuf, &imp));
	/* one object, however many handles and dma-bufs point at it */
	EXPECT_EQ(n0 + 1, mi_dbg_bo_count(self->minor));
	close(dmabuf);
	ASSERT_EQ(0, mi_bo_close(self->fd, h));
	close(fd2);
	for (i = 0; i < 100; i++) {
		n = mi_dbg_bo_count(self->minor);
		if (n == n0)
			break;
		usleep(20000);
	}
	EXPECT_EQ(n0, n);
}

/* Open the vgem primary node (loading vgem if needed), or -errno. */
static int open_vgem(void)
{
	int i;

	if (access("/sys/module/vgem", F_OK) && system("modprobe vgem 2>/dev/null"))
		return -ENODEV;
	for (i = 0; i < 64; i++) {
		char path[32], name[16] = "";
		struct drm_version v;
		int fd;

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(&v, 0, sizeof(v));
		v.name = name;
		v.name_len = sizeof(name) - 1;
		if (!mi_ioctl(fd, DRM_IOCTL_VERSION, &v) && !strcmp(name, "vgem"))
			return fd;
		close(fd);
	}
	return -ENODEV;
}

/* A buffer of another driver (vgem) imported and read by a job. */
TEST_F(dev, import_from_another_driver)
{
	struct drm_mode_create_dumb cd = { .width = 1024, .height = 1, .bpp = 8 };
	struct drm_mode_map_dumb md = { 0 };
	uint32_t imp, dst, ctx2;
	uint8_t *src, *out;
	int vg, dmabuf;

	vg = open_vgem();
	if (vg < 0)
		SKIP(return, "vgem is not available");
	ASSERT_EQ(0, mi_ioctl(vg, DRM_IOCTL_MODE_CREATE_DUMB, &cd));
	md.handle = cd.handle;
	ASSERT_EQ(0, mi_ioctl(vg, DRM_IOCTL_MODE_MAP_DUMB, &md));
	src = mmap(NULL, cd.size, PROT_READ | PROT_WRITE, MAP_SHARED, vg, (off_t)md.offset);
	ASSERT_NE(MAP_FAILED, src);
	fill(src, 21);
	ASSERT_EQ(0, mi_prime_export(vg, cd.handle, &dmabuf));
	ASSERT_EQ(0, mi_prime_import(self->fd, dmabuf, &imp));
	ASSERT_EQ(0, mi_ctx_create(self->fd, 0, DRM_METAINFER_PRIORITY_NORMAL, &ctx2));
	out = mi_bo_new(self->fd, 4096, &dst);
	ASSERT_NE(NULL, out);
	ASSERT_EQ(0, copy_job(self->fd, ctx2, imp, dst));
	EXPECT_TRUE(check(out, 21));
	munmap(src, cd.size);
	close(dmabuf);
	close(vg);
}

TEST_HARNESS_MAIN
