// SPDX-License-Identifier: MIT
/* NumPy .npy read/write (format versions 1.0-3.0, little-endian, C order). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NPY_MAX_BYTES (4ull << 30)

static const struct {
	const char *descr;
	int dtype;
} npy_types[] = {
	{ "<f4", MI_DT_FLOAT },	  { "<f8", MI_DT_DOUBLE },
	{ "<i8", MI_DT_INT64 },	  { "<i4", MI_DT_INT32 },
	{ "<i2", MI_DT_INT16 },	  { "|i1", MI_DT_INT8 },
	{ "|u1", MI_DT_UINT8 },	  { "<u2", MI_DT_UINT16 },
	{ "<u4", MI_DT_UINT32 },  { "<u8", MI_DT_UINT64 },
	{ "|b1", MI_DT_BOOL },	  { "<f2", MI_DT_FLOAT16 },
	{ "<i1", MI_DT_INT8 },	  { "<u1", MI_DT_UINT8 },
	{ "<b1", MI_DT_BOOL },
};

static int npy_err(char *err, size_t len, int e, const char *path,
		   const char *why)
{
	snprintf(err, len, "%s: %s", path, why);
	return e;
}

/* Find 'key': in the header dict and return a pointer after the colon. */
static const char *dict_value(const char *h, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), "'%s'", key);
	p = strstr(h, pat);
	if (!p) {
		snprintf(pat, sizeof(pat), "\"%s\"", key);
		p = strstr(h, pat);
	}
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	if (*p != ':')
		return NULL;
	p++;
	while (*p == ' ')
		p++;
	return p;
}

int mi_npy_read(const char *path, struct mi_tensor *t, char *err,
		size_t errlen)
{
	unsigned char *buf;
	size_t len, hlen, hoff;
	char *hdr = NULL;
	const char *v;
	int64_t numel = 1;
	int ret, dtype = 0;

	memset(t, 0, sizeof(*t));
	t->producer = -1;
	ret = mi_read_file(path, NPY_MAX_BYTES, (void **)&buf, &len);
	if (ret) {
		snprintf(err, errlen, "%s: cannot read: %s", path,
			 strerror(-ret));
		return ret;
	}
	if (len < 10 || memcmp(buf, "\x93NUMPY", 6)) {
		ret = npy_err(err, errlen, -EINVAL, path, "not a .npy file");
		goto out;
	}
	if (buf[6] == 1) {
		hlen = buf[8] | (size_t)buf[9] << 8;
		hoff = 10;
	} else if ((buf[6] == 2 || buf[6] == 3) && len >= 12) {
		hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
		       (size_t)buf[11] << 24;
		hoff = 12;
	} else {
		ret = npy_err(err, errlen, -EINVAL, path,
			      "unsupported .npy version");
		goto out;
	}
	if (hlen > len - hoff || hlen > 65536) {
		ret = npy_err(err, errlen, -EINVAL, path, "truncated header");
		goto out;
	}
	hdr = strndup((char *)buf + hoff, hlen);
	if (!hdr) {
		ret = -ENOMEM;
		goto out;
	}
	v = dict_value(hdr, "descr");
	if (!v || (*v != '\'' && *v != '"')) {
		ret = npy_err(err, errlen, -EINVAL, path, "header has no descr");
		goto out;
	}
	for (size_t i = 0; i < sizeof(npy_types) / sizeof(npy_types[0]); i++)
		if (!strncmp(v + 1, npy_types[i].descr, 3) && v[4] == v[0])
			dtype = npy_types[i].dtype;
	if (!dtype) {
		char why[96];

		snprintf(why, sizeof(why), "unsupported dtype %.12s", v);
		ret = npy_err(err, errlen, -EOPNOTSUPP, path, why);
		goto out;
	}
	v = dict_value(hdr, "fortran_order");
	if (!v || strncmp(v, "False", 5)) {
		ret = npy_err(err, errlen, -EOPNOTSUPP, path,
			      "Fortran-order arrays are not supported");
		goto out;
	}
	v = dict_value(hdr, "shape");
	if (!v || *v != '(') {
		ret = npy_err(err, errlen, -EINVAL, path, "header has no shape");
		goto out;
	}
	v++;
	t->ndim = 0;
	for (;;) {
		char *end;

		while (*v == ' ' || *v == ',')
			v++;
		if (*v == ')')
			break;
		if (!isdigit((unsigned char)*v) || t->ndim >= MI_MAX_DIMS) {
			ret = npy_err(err, errlen, -EINVAL, path,
				      "bad shape (or rank above 8)");
			goto out;
		}
		errno = 0;
		long long d = strtoll(v, &end, 10);

		if (errno || d < 0 || (d && numel > INT64_MAX / d)) {
			ret = npy_err(err, errlen, -EINVAL, path, "bad shape");
			goto out;
		}
		t->dims[t->ndim++] = d;
		numel *= d;
		v = end;
		if (*v == 'L')
			v++;
	}
	t->dtype = dtype;
	if ((uint64_t)numel > (len - hoff - hlen) / mi_dtype_size(dtype) ||
	    (uint64_t)numel * mi_dtype_size(dtype) != len - hoff - hlen) {
		ret = npy_err(err, errlen, -EINVAL, path,
			      "data size does not match the shape");
		goto out;
	}
	ret = mi_tensor_alloc(t);
	if (ret) {
		npy_err(err, errlen, ret, path, "cannot allocate");
		goto out;
	}
	memcpy(t->data, buf + hoff + hlen, t->nbytes);
	t->name = strdup("");
	ret = t->name ? 0 : -ENOMEM;
out:
	if (ret)
		mi_tensor_fini(t);
	free(hdr);
	free(buf);
	return ret;
}

int mi_npy_write(const char *path, int dtype, int ndim, const int64_t *dims,
		 const void *data, char *err, size_t errlen)
{
	const char *descr = NULL;
	char hdr[512];
	int64_t numel = 1;
	size_t hl, bytes;
	int n;
	FILE *f;

	for (size_t i = 0; i < sizeof(npy_types) / sizeof(npy_types[0]); i++)
		if (npy_types[i].dtype == dtype) {
			descr = npy_types[i].descr;
			break;
		}
	if (!descr) {
		snprintf(err, errlen, "%s: cannot write %s as .npy", path,
			 mi_dtype_name(dtype));
		return -EOPNOTSUPP;
	}
	n = snprintf(hdr, sizeof(hdr),
		     "{'descr': '%s', 'fortran_order': False, 'shape': (",
		     descr);
	for (int i = 0; i < ndim; i++) {
		n += snprintf(hdr + n, sizeof(hdr) - n, "%" PRId64 "%s",
			      dims[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
		numel *= dims[i];
	}
	n += snprintf(hdr + n, sizeof(hdr) - n, "), }");
	/* pad with spaces so that magic+len+header is a multiple of 64 */
	hl = (size_t)n + 1;
	while ((10 + hl) % 64)
		hl++;
	memset(hdr + n, ' ', hl - n - 1);
	hdr[hl - 1] = '\n';
	bytes = (size_t)numel * mi_dtype_size(dtype);
	f = fopen(path, "wb");
	if (!f) {
		int e = -errno;

		snprintf(err, errlen, "%s: %s", path, strerror(-e));
		return e;
	}
	unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
				  hl & 0xff, hl >> 8 };

	if (fwrite(pre, 1, 10, f) != 10 || fwrite(hdr, 1, hl, f) != hl ||
	    (bytes && fwrite(data, 1, bytes, f) != bytes)) {
		fclose(f);
		snprintf(err, errlen, "%s: write failed", path);
		return -EIO;
	}
	if (fclose(f)) {
		snprintf(err, errlen, "%s: write failed", path);
		return -EIO;
	}
	return 0;
}
