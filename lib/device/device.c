// SPDX-License-Identifier: MIT
/*
 * The device registry: the CPU first, then the accelerators the backends
 * found (mi_kdev_scan(), render nodes), then emulated devices added by
 * tests.  Scanned once per process, under a lock; devices are never freed
 * before exit, so a struct mi_dev pointer stays valid.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "device/device-impl.h"
#include "debug.h"
#include "internal.h"

#define MI_DEV_MAX 64

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mi_dev *reg[MI_DEV_MAX];
static int nreg;
static bool scanned;

/* Called with reg_lock held. */
static int reg_add_locked(struct mi_dev *d)
{
	if (nreg >= MI_DEV_MAX)
		return mi_set_error(-ENOSPC, "devices: more than %d devices",
				    MI_DEV_MAX);
	d->index = nreg;
	reg[nreg++] = d;
	return 0;
}

int mi_dev_register(struct mi_dev *d)
{
	int ret;

	pthread_mutex_lock(&reg_lock);
	ret = reg_add_locked(d);
	pthread_mutex_unlock(&reg_lock);
	return ret;
}

static void scan_locked(void)
{
	struct mi_dev *d;

	if (scanned)
		return;
	scanned = true;
	if (!mi_cpu_dev_create(&d))
		reg_add_locked(d);
	mi_kdev_scan(reg_add_locked);
}

int mi_dev_count(void)
{
	int n;

	pthread_mutex_lock(&reg_lock);
	scan_locked();
	n = nreg;
	pthread_mutex_unlock(&reg_lock);
	return n;
}

struct mi_dev *mi_dev_get(int index)
{
	struct mi_dev *d = NULL;

	pthread_mutex_lock(&reg_lock);
	scan_locked();
	if (index >= 0 && index < nreg)
		d = reg[index];
	pthread_mutex_unlock(&reg_lock);
	return d;
}

struct mi_dev *mi_dev_find(const char *name)
{
	struct mi_dev *d = NULL;

	pthread_mutex_lock(&reg_lock);
	scan_locked();
	for (int i = 0; i < nreg && !d; i++)
		if (!strcmp(reg[i]->name, name))
			d = reg[i];
	pthread_mutex_unlock(&reg_lock);
	return d;
}

int mi_dev_rescan(void)
{
	int n;

	pthread_mutex_lock(&reg_lock);
	scan_locked();
	mi_kdev_scan(reg_add_locked); /* adds only nodes not known yet */
	n = nreg;
	pthread_mutex_unlock(&reg_lock);
	return n;
}

int mi_dev_select(const char *list, struct mi_dev **devs, int max)
{
	int n = 0, total = mi_dev_count();
	const char *p = list;

	if (max < 1)
		return mi_set_error(-EINVAL, "devices: no room for the list");
	devs[n++] = mi_dev_get(0);
	if (!list || !*list || !strcmp(list, "cpu"))
		return n;
	if (!strcmp(list, "all")) {
		for (int i = 1; i < total && n < max; i++) {
			struct mi_dev *d = mi_dev_get(i);

			if (d->kind != MI_DEV_EMU && mi_dev_up(d))
				devs[n++] = d;
		}
		return n;
	}
	while (*p) {
		char name[sizeof(devs[0]->name)];
		size_t len = strcspn(p, ",");
		struct mi_dev *d;
		bool dup = false;

		if (!len || len >= sizeof(name))
			return mi_set_error(-EINVAL,
					    "devices: bad entry in list '%s'",
					    list);
		memcpy(name, p, len);
		name[len] = 0;
		d = mi_dev_find(name);
		if (!d)
			return mi_set_error(-ENODEV,
					    "devices: no device '%s' (see metainfer devices)",
					    name);
		for (int i = 0; i < n; i++)
			dup |= devs[i] == d;
		if (!dup) {
			if (n >= max)
				return mi_set_error(-E2BIG,
						    "devices: more than %d in '%s'",
						    max, list);
			devs[n++] = d;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return n;
}

void mi_dev_mark_down(struct mi_dev *d, int err)
{
	if (d->kind == MI_DEV_CPU)
		return;
	atomic_fetch_add(&d->faults, 1);
	atomic_store(&d->down, true);
	if (mi_debug("device"))
		fprintf(stderr, "metainfer: device %s marked down (%s)\n",
			d->name, strerror(-err));
}

bool mi_dev_up(struct mi_dev *d)
{
	if (!atomic_load(&d->down))
		return true;
	if (d->ops->alive && d->ops->alive(d) == 1) {
		atomic_store(&d->down, false);
		if (mi_debug("device"))
			fprintf(stderr, "metainfer: device %s answers again\n",
				d->name);
		return true;
	}
	return false;
}
