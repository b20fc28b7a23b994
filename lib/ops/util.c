// SPDX-License-Identifier: MIT
/* Helpers shared by the reference operators.  See ops.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/ops.h"

int mi_ops_need_rank(struct mi_graph *g, struct mi_node *n, int i)
{
	struct mi_tensor *t = mi_in(g, n, i);

	if (!t)
		return mi_graph_err(g, n, -EINVAL, "input %d is required", i);
	if (t->ndim < 0)
		return -EAGAIN;
	if (t->ndim > MI_MAX_DIMS)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "input %d has rank %d, at most %d supported",
				    i, t->ndim, MI_MAX_DIMS);
	return 0;
}

int mi_ops_axis(struct mi_graph *g, struct mi_node *n, const char *what,
		int64_t axis, int rank, int *out)
{
	int64_t a = axis < 0 ? axis + rank : axis;

	if (a < 0 || a >= rank || rank == 0)
		return mi_graph_err(g, n, -EINVAL,
				    "%s %lld out of range for rank %d", what,
				    (long long)axis, rank);
	*out = (int)a;
	return 0;
}

int64_t mi_ops_prod(const int64_t *dims, int from, int to)
{
	int64_t p = 1;

	for (int i = from; i < to; i++) {
		if (dims[i] < 0)
			return -1;
		if (dims[i] && p > MI_OPS_MAX_NUMEL / dims[i])
			return MI_OPS_MAX_NUMEL + 1;
		p *= dims[i];
	}
	return p;
}

int mi_ops_set_out(struct mi_graph *g, struct mi_node *n, int idx, int dtype,
		   int ndim, const int64_t *dims)
{
	struct mi_tensor *t = mi_ops_out(g, n, idx);

	if (!t)
		return 0;
	if (ndim > MI_MAX_DIMS)
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "output rank %d exceeds %d", ndim,
				    MI_MAX_DIMS);
	for (int i = 0; i < ndim; i++)
		if (dims[i] < -1)
			return mi_graph_err(g, n, -EINVAL,
					    "output dim %d is negative (%lld)",
					    i, (long long)dims[i]);
	if (mi_ops_prod(dims, 0, ndim) > MI_OPS_MAX_NUMEL)
		return mi_graph_err(g, n, -EINVAL,
				    "output has more than %lld elements",
				    (long long)MI_OPS_MAX_NUMEL);
	mi_tensor_set_shape(t, dtype, ndim, dims);
	return 0;
}

int mi_ops_same_as(struct mi_graph *g, struct mi_node *n, int idx, int in)
{
	struct mi_tensor *x = mi_in(g, n, in);
	int ret = mi_ops_need_rank(g, n, in);

	if (ret)
		return ret;
	return mi_ops_set_out(g, n, idx, x->dtype, x->ndim, x->dims);
}

int mi_ops_is_float(int dt)
{
	return dt == MI_DT_FLOAT || dt == MI_DT_DOUBLE || dt == MI_DT_FLOAT16 ||
	       dt == MI_DT_BFLOAT16;
}

int mi_ops_is_int(int dt)
{
	switch (dt) {
	case MI_DT_INT8: case MI_DT_INT16: case MI_DT_INT32: case MI_DT_INT64:
	case MI_DT_UINT8: case MI_DT_UINT16: case MI_DT_UINT32:
	case MI_DT_UINT64:
		return 1;
	default:
		return 0;
	}
}

static int input_vec(struct mi_graph *g, struct mi_node *n, int i, int max,
		     int *count, struct mi_tensor **tp)
{
	struct mi_tensor *t = mi_in(g, n, i);
	int64_t numel;

	*count = 0;
	if (!t)
		return -ENOENT;
	if (!t->data)
		return -EAGAIN;
	if (t->ndim > 1)
		return mi_graph_err(g, n, -EINVAL,
				    "input %d must be 1-D, has rank %d", i,
				    t->ndim);
	numel = mi_tensor_numel(t);
	if (numel < 0 || numel > max)
		return mi_graph_err(g, n, -EINVAL,
				    "input %d has %lld values, at most %d allowed",
				    i, (long long)numel, max);
	*count = (int)numel;
	*tp = t;
	return 0;
}

int mi_ops_input_ints(struct mi_graph *g, struct mi_node *n, int i,
		      int64_t *vals, int max, int *count)
{
	struct mi_tensor *t;
	int ret = input_vec(g, n, i, max, count, &t);

	if (ret)
		return ret;
	if (!mi_ops_is_int(t->dtype))
		return mi_graph_err(g, n, -EINVAL,
				    "input %d must be an integer tensor, is %s",
				    i, mi_dtype_name(t->dtype));
	for (int k = 0; k < *count; k++)
		vals[k] = mi_tensor_get_i64(t, k);
	return 0;
}

int mi_ops_input_floats(struct mi_graph *g, struct mi_node *n, int i,
			double *vals, int max, int *count)
{
	struct mi_tensor *t;
	int ret = input_vec(g, n, i, max, count, &t);

	if (ret)
		return ret;
	if (!mi_ops_is_float(t->dtype))
		return mi_graph_err(g, n, -EINVAL,
				    "input %d must be a float tensor, is %s", i,
				    mi_dtype_name(t->dtype));
	for (int k = 0; k < *count; k++)
		vals[k] = mi_ops_get_f64(t, k);
	return 0;
}

/* ---- float16 / bfloat16 ---------------------------------------------- */

float mi_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	float f;

	if (exp == 0) {
		/* zero or subnormal: man * 2^-24 */
		f = ldexpf((float)man, -24);
		return sign ? -f : f;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (man << 13);
	else
		bits = sign | ((exp + 112) << 23) | (man << 13);
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t mi_float_to_half(float f)
{
	uint32_t x, sign, man;
	int32_t exp;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (int32_t)((x >> 23) & 0xff);
	man = x & 0x7fffff;
	if (exp == 255) /* inf / nan */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	exp = exp - 127 + 15;
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		uint32_t m, r, half, rest;
		int shift;

		if (exp < -10)
			return (uint16_t)sign;
		m = man | 0x800000;
		shift = 14 - exp;
		r = m >> shift;
		half = 1u << (shift - 1);
		rest = m & ((1u << shift) - 1);
		if (rest > half || (rest == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	{
		uint32_t r = ((uint32_t)exp << 10) | (man >> 13);
		uint32_t rest = man & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (r & 1)))
			r++; /* may carry into the exponent: still correct */
		return (uint16_t)(sign | r);
	}
}

float mi_bf16_to_float(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, 4);
	return f;
}

uint16_t mi_float_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	/* Truncate, as ONNX's reference Cast (and its 1.12 conformance data)
	 * does; newer ONNX rounds to nearest even. */
	return (uint16_t)(x >> 16);
}

/* ---- element access ---------------------------------------------------- */

double mi_ops_get_f64(const struct mi_tensor *t, int64_t i)
{
	const void *p = t->data;

	switch (t->dtype) {
	case MI_DT_FLOAT: return ((const float *)p)[i];
	case MI_DT_DOUBLE: return ((const double *)p)[i];
	case MI_DT_FLOAT16: return mi_half_to_float(((const uint16_t *)p)[i]);
	case MI_DT_BFLOAT16: return mi_bf16_to_float(((const uint16_t *)p)[i]);
	case MI_DT_UINT64: return (double)((const uint64_t *)p)[i];
	default: return (double)mi_tensor_get_i64(t, i);
	}
}

/* double -> int64 without undefined behaviour for NaN/out-of-range. */
int64_t mi_ops_f64_to_i64(double v)
{
	if (v != v)
		return 0;
	if (v >= 9223372036854775807.0)
		return INT64_MAX;
	if (v <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)v;
}

void mi_ops_set_f64(struct mi_tensor *t, int64_t i, double v)
{
	void *p = t->data;

	switch (t->dtype) {
	case MI_DT_FLOAT: ((float *)p)[i] = (float)v; break;
	case MI_DT_DOUBLE: ((double *)p)[i] = v; break;
	case MI_DT_FLOAT16:
		((uint16_t *)p)[i] = mi_float_to_half((float)v);
		break;
	case MI_DT_BFLOAT16:
		((uint16_t *)p)[i] = mi_float_to_bf16((float)v);
		break;
	case MI_DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	case MI_DT_UINT64:
		if (v >= 18446744073709551615.0)
			((uint64_t *)p)[i] = UINT64_MAX;
		else if (v > 0)
			((uint64_t *)p)[i] = (uint64_t)v;
		else
			((uint64_t *)p)[i] = (uint64_t)mi_ops_f64_to_i64(v);
		break;
	default: mi_ops_set_i64(t, i, mi_ops_f64_to_i64(v)); break;
	}
}

int64_t mi_ops_get_i64(const struct mi_tensor *t, int64_t i)
{
	if (mi_ops_is_float(t->dtype))
		return mi_ops_f64_to_i64(mi_ops_get_f64(t, i));
	return mi_tensor_get_i64(t, i);
}

void mi_ops_set_i64(struct mi_tensor *t, int64_t i, int64_t v)
{
	void *p = t->data;

	switch (t->dtype) {
	case MI_DT_INT64: ((int64_t *)p)[i] = v; break;
	case MI_DT_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	case MI_DT_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)v; break;
	case MI_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case MI_DT_INT16: ((int16_t *)p)[i] = (int16_t)(uint16_t)v; break;
	case MI_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
	case MI_DT_INT8: ((int8_t *)p)[i] = (int8_t)(uint8_t)v; break;
	case MI_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case MI_DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	case MI_DT_FLOAT: case MI_DT_DOUBLE: case MI_DT_FLOAT16:
	case MI_DT_BFLOAT16:
		mi_ops_set_f64(t, i, (double)v);
		break;
	default: break;
	}
}

/* ---- broadcasting ------------------------------------------------------ */

static void fmt_shape(char *buf, size_t sz, const struct mi_tensor *t)
{
	size_t off = 0;

	off += snprintf(buf + off, sz - off, "[");
	for (int i = 0; i < t->ndim && off < sz; i++)
		off += snprintf(buf + off, sz - off, "%s%lld", i ? "," : "",
				(long long)t->dims[i]);
	if (off < sz)
		snprintf(buf + off, sz - off, "]");
}

int mi_bcast_infer(struct mi_graph *g, struct mi_node *n, int nin,
		   struct mi_tensor *const *ins, int *ndim, int64_t *dims)
{
	int r = 0;

	for (int k = 0; k < nin; k++) {
		if (!ins[k])
			return mi_graph_err(g, n, -EINVAL,
					    "input %d is required", k);
		if (ins[k]->ndim < 0)
			return -EAGAIN;
		if (ins[k]->ndim > MI_MAX_DIMS)
			return mi_graph_err(g, n, -EOPNOTSUPP,
					    "input %d has rank %d", k,
					    ins[k]->ndim);
		if (ins[k]->ndim > r)
			r = ins[k]->ndim;
	}
	for (int d = 0; d < r; d++) {
		int64_t known = 1;
		int unknown = 0;

		for (int k = 0; k < nin; k++) {
			int kd = d - (r - ins[k]->ndim);
			int64_t v;

			if (kd < 0)
				continue;
			v = ins[k]->dims[kd];
			if (v < 0) {
				unknown = 1;
				continue;
			}
			if (v == 1)
				continue;
			if (known != 1 && known != v) {
				char a[128], b[128];

				fmt_shape(a, sizeof(a), ins[0]);
				fmt_shape(b, sizeof(b), ins[k]);
				return mi_graph_err(
					g, n, -EINVAL,
					"cannot broadcast shapes %s and %s", a,
					b);
			}
			known = v;
		}
		dims[d] = known != 1 ? known : unknown ? -1 : 1;
	}
	*ndim = r;
	return 0;
}

void mi_bcast_init(struct mi_bcast *b, int nin, struct mi_tensor *const *ins,
		   const struct mi_tensor *out)
{
	int r = out->ndim, m = 0;
	int64_t st[MI_BCAST_MAX][MI_MAX_DIMS];

	memset(b, 0, sizeof(*b));
	b->nin = nin;
	for (int k = 0; k < nin; k++) {
		const struct mi_tensor *t = ins[k];
		int64_t s = 1;

		for (int d = r - 1; d >= 0; d--) {
			int kd = d - (r - t->ndim);

			if (kd < 0 || t->dims[kd] == 1) {
				st[k][d] = 0;
			} else {
				st[k][d] = s;
				s *= t->dims[kd];
			}
		}
	}
	/* drop size-1 dims, then merge contiguous neighbours */
	for (int d = 0; d < r; d++) {
		if (out->dims[d] == 1)
			continue;
		if (m > 0) {
			int merge = 1;

			for (int k = 0; k < nin; k++)
				if (b->st[k][m - 1] != st[k][d] * out->dims[d])
					merge = 0;
			if (merge) {
				b->dims[m - 1] *= out->dims[d];
				for (int k = 0; k < nin; k++)
					b->st[k][m - 1] = st[k][d];
				continue;
			}
		}
		b->dims[m] = out->dims[d];
		for (int k = 0; k < nin; k++)
			b->st[k][m] = st[k][d];
		m++;
	}
	if (m == 0) {
		b->dims[0] = 1;
		for (int k = 0; k < nin; k++)
			b->st[k][0] = 0;
		m = 1;
	}
	b->ndim = m;
	b->inner = b->dims[m - 1];
	b->rows = 1;
	for (int d = 0; d < m - 1; d++)
		b->rows *= b->dims[d];
	for (int k = 0; k < nin; k++)
		b->step[k] = b->st[k][m - 1];
}

void mi_bcast_row(const struct mi_bcast *b, int64_t r, int64_t *offs)
{
	for (int k = 0; k < b->nin; k++)
		offs[k] = 0;
	for (int d = b->ndim - 2; d >= 0; d--) {
		int64_t idx = r % b->dims[d];

		r /= b->dims[d];
		for (int k = 0; k < b->nin; k++)
			offs[k] += idx * b->st[k][d];
	}
}

/* ---- spatial ------------------------------------------------------------ */

#define MI_SPATIAL_LIMIT (INT64_C(1) << 24)

int mi_ops_spatial(struct mi_graph *g, struct mi_node *n, struct mi_spatial *s,
		   const struct mi_tensor *x, int use_ceil)
{
	int nsp = x->ndim - 2, cnt;
	const int64_t *v;
	const char *ap = mi_attr_string(n, "auto_pad", "NOTSET");
	int ceil_mode = use_ceil ? (int)mi_attr_int(n, "ceil_mode", 0) : 0;

	if (nsp < 1)
		return mi_graph_err(g, n, -EINVAL,
				    "input must have rank >= 3, has %d",
				    x->ndim);
	s->nsp = nsp;
	for (int i = 0; i < nsp; i++) {
		s->in[i] = x->dims[i + 2];
		s->stride[i] = 1;
		s->dil[i] = 1;
		s->pad_begin[i] = s->pad_end[i] = 0;
	}
	v = mi_attr_ints(n, "strides", &cnt);
	if (v) {
		if (cnt != nsp)
			return mi_graph_err(g, n, -EINVAL,
					    "strides has %d values, expected %d",
					    cnt, nsp);
		for (int i = 0; i < nsp; i++)
			s->stride[i] = v[i];
	}
	v = mi_attr_ints(n, "dilations", &cnt);
	if (v) {
		if (cnt != nsp)
			return mi_graph_err(g, n, -EINVAL,
					    "dilations has %d values, expected %d",
					    cnt, nsp);
		for (int i = 0; i < nsp; i++)
			s->dil[i] = v[i];
	}
	v = mi_attr_ints(n, "pads", &cnt);
	if (v) {
		if (cnt != 2 * nsp)
			return mi_graph_err(g, n, -EINVAL,
					    "pads has %d values, expected %d",
					    cnt, 2 * nsp);
		for (int i = 0; i < nsp; i++) {
			s->pad_begin[i] = v[i];
			s->pad_end[i] = v[i + nsp];
		}
	}
	for (int i = 0; i < nsp; i++) {
		if (s->kernel[i] < 1 || s->kernel[i] > MI_SPATIAL_LIMIT)
			return mi_graph_err(g, n, -EINVAL,
					    "kernel size %lld is invalid",
					    (long long)s->kernel[i]);
		if (s->stride[i] < 1 || s->stride[i] > MI_SPATIAL_LIMIT)
			return mi_graph_err(g, n, -EINVAL,
					    "stride %lld is invalid",
					    (long long)s->stride[i]);
		if (s->dil[i] < 1 || s->dil[i] > MI_SPATIAL_LIMIT)
			return mi_graph_err(g, n, -EINVAL,
					    "dilation %lld is invalid",
					    (long long)s->dil[i]);
		if (s->pad_begin[i] < 0 || s->pad_end[i] < 0 ||
		    s->pad_begin[i] > MI_SPATIAL_LIMIT ||
		    s->pad_end[i] > MI_SPATIAL_LIMIT)
			return mi_graph_err(g, n, -EINVAL,
					    "pads value %lld/%lld is invalid",
					    (long long)s->pad_begin[i],
					    (long long)s->pad_end[i]);
	}
	{
		int64_t kp = 1;

		for (int i = 0; i < nsp; i++) {
			kp *= s->kernel[i];
			if (kp > MI_SPATIAL_LIMIT)
				return mi_graph_err(g, n, -EOPNOTSUPP,
						    "kernel has more than %lld elements",
						    (long long)MI_SPATIAL_LIMIT);
		}
	}
	for (int i = 0; i < nsp; i++) {
		int64_t ek = (s->kernel[i] - 1) * s->dil[i] + 1;
		int64_t in = s->in[i], o;

		if (in < 0) {
			s->out[i] = -1;
			continue;
		}
		if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
			int64_t total;

			o = (in + s->stride[i] - 1) / s->stride[i];
			total = (o - 1) * s->stride[i] + ek - in;
			if (total < 0)
				total = 0;
			if (!strcmp(ap, "SAME_UPPER")) {
				s->pad_begin[i] = total / 2;
				s->pad_end[i] = total - total / 2;
			} else {
				s->pad_end[i] = total / 2;
				s->pad_begin[i] = total - total / 2;
			}
		} else if (!strcmp(ap, "VALID")) {
			s->pad_begin[i] = s->pad_end[i] = 0;
			o = in >= ek ? (in - ek) / s->stride[i] + 1 : 0;
		} else if (!strcmp(ap, "NOTSET") || !*ap) {
			int64_t span = in + s->pad_begin[i] + s->pad_end[i] - ek;

			if (span < 0) {
				o = 0;
			} else if (ceil_mode) {
				o = (span + s->stride[i] - 1) / s->stride[i] + 1;
				/* the last window must start inside the
				 * input or left padding */
				if ((o - 1) * s->stride[i] >=
				    in + s->pad_begin[i])
					o--;
			} else {
				o = span / s->stride[i] + 1;
			}
		} else {
			return mi_graph_err(g, n, -EINVAL,
					    "auto_pad '%s' is not valid", ap);
		}
		if (o < 1)
			return mi_graph_err(
				g, n, -EINVAL,
				"kernel %lld (dilation %lld) does not fit input size %lld with pads %lld+%lld",
				(long long)s->kernel[i], (long long)s->dil[i],
				(long long)in, (long long)s->pad_begin[i],
				(long long)s->pad_end[i]);
		s->out[i] = o;
	}
	return 0;
}

void mi_ops_strides(int ndim, const int64_t *dims, int64_t *strides)
{
	int64_t s = 1;

	for (int i = ndim - 1; i >= 0; i--) {
		strides[i] = s;
		s *= dims[i];
	}
}

int mi_ops_copy_data(struct mi_graph *g, struct mi_node *n, int out, int in)
{
	struct mi_tensor *x = mi_in(g, n, in), *y = mi_ops_out(g, n, out);
	int64_t cnt = mi_tensor_numel(y);
	size_t bytes;

	if (x->dtype != y->dtype || cnt != mi_tensor_numel(x) || cnt < 0)
		return mi_graph_err(g, n, -EINVAL,
				    "input/output dtype or size mismatch");
	bytes = (size_t)cnt * mi_dtype_size(y->dtype);
	if (bytes && x->data != y->data)
		memmove(y->data, x->data, bytes);
	return 0;
}

void mi_ops_strided_copy(void *dst, const void *src, size_t es, int ndim,
			 const int64_t *dims, const int64_t *sst, int64_t soff)
{
	int64_t total = mi_ops_prod(dims, 0, ndim), inner, rows, sinner;
	char *d = dst;
	const char *s = src;

	if (total <= 0)
		return;
	if (ndim == 0) {
		memcpy(d, s + soff * (int64_t)es, es);
		return;
	}
	inner = dims[ndim - 1];
	sinner = sst[ndim - 1];
	rows = total / inner;
	for (int64_t r = 0; r < rows; r++) {
		int64_t off = soff, rr = r;

		for (int k = ndim - 2; k >= 0; k--) {
			off += (rr % dims[k]) * sst[k];
			rr /= dims[k];
		}
		if (sinner == 1) {
			memcpy(d, s + off * (int64_t)es, inner * es);
			d += inner * es;
			continue;
		}
		switch (es) {
		case 4:
			for (int64_t j = 0; j < inner; j++)
				((uint32_t *)d)[j] =
					*(const uint32_t *)(s + (off + j * sinner) * 4);
			break;
		case 8:
			for (int64_t j = 0; j < inner; j++)
				((uint64_t *)d)[j] =
					*(const uint64_t *)(s + (off + j * sinner) * 8);
			break;
		default:
			for (int64_t j = 0; j < inner; j++)
				memcpy(d + j * es,
				       s + (off + j * sinner) * (int64_t)es, es);
			break;
		}
		d += inner * es;
	}
}
