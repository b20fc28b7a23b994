// SPDX-License-Identifier: MIT
/*
 * A run of quantized units -> one MIcs command stream (lib/device/lower.h).
 *
 * The builder keeps, per graph tensor the job has touched, the job
 * tensor(s) holding it and their layout (struct lb_val).  A 4-D
 * activation enters the job as an INPUT in the graph's dense NCHW; ops
 * that care about layout (conv, pools) want the job's compute layout
 * (the device's preferred one when it has it), and a COPY into a TEMP
 * converts once; elementwise ops take any layout through strided views.
 * A value read after the job (by a node outside it or as a graph output)
 * is written to an OUTPUT tensor in dense NCHW / row-major, by a COPY
 * when it was computed in NHWC.
 *
 * Every tensor descriptor of the stream is recorded (struct lb_ref) with
 * its job tensor and the byte offset inside it, so offsets are filled in
 * once the buffers are laid out (constants in buffer 0, the rest in
 * buffer 1, each 64-byte aligned) and mi_lower_rebind can move a tensor.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/lower-impl.h"

#define LB_ALIGN 64

struct lower_job {
	struct mi_lower_job pub;
	struct lb_ref *refs;
	int nrefs;
};

uint32_t qu_drm_dtype(int dt)
{
	switch (dt) {
	case MI_DT_INT8:
		return DRM_METAINFER_DTYPE_INT8;
	case MI_DT_UINT8:
		return DRM_METAINFER_DTYPE_UINT8;
	case MI_DT_INT16:
		return DRM_METAINFER_DTYPE_INT16;
	case MI_DT_INT32:
		return DRM_METAINFER_DTYPE_INT32;
	}
	return 0;
}

int qu_mult_shift(double r, int32_t *m, int32_t *s)
{
	int e;
	double f;
	int64_t q;

	if (!(r > 0) || !isfinite(r))
		return -EINVAL;
	f = frexp(r, &e); /* r = f * 2^e, f in [0.5, 1) */
	q = llround(f * 2147483648.0);
	if (q == 2147483648ll) {
		q /= 2;
		e++;
	}
	if (e > 31)
		return -ERANGE;
	if (e < -31) {
		/* t = 31 - S caps at 62: a smaller multiplier instead */
		q = llround(r * 4611686018427387904.0); /* 2^62 */
		e = -31;
	}
	*m = (int32_t)q;
	*s = e;
	return 0;
}

static int32_t qbound(float v, const struct qu_act *y, int32_t qmin,
		      int32_t qmax)
{
	float r;

	if (isinf(v) || isnan(v))
		return v < 0 ? qmin : qmax;
	r = nearbyintf(v / y->scale) + (float)y->zp;
	return r < qmin ? qmin : r > qmax ? qmax : (int32_t)r;
}

void qu_bounds(const struct qu_info *qi, int32_t *lo, int32_t *hi)
{
	int32_t qmin = qi->out.dtype == MI_DT_UINT8 ? 0 : -128;
	int32_t qmax = qi->out.dtype == MI_DT_UINT8 ? 255 : 127;

	*lo = qbound(qi->lo, &qi->out, qmin, qmax);
	*hi = qbound(qi->hi, &qi->out, qmin, qmax);
	if (*hi < *lo)
		*hi = *lo;
}

/* ---- job tensors ------------------------------------------------------ */

static void *grow(void *p, int *cap, int need, size_t esz)
{
	void *np;
	int nc;

	if (need <= *cap)
		return p;
	nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	np = realloc(p, nc * esz);
	if (np)
		*cap = nc;
	return np;
}

static size_t dt_size(uint32_t dt)
{
	return dt == DRM_METAINFER_DTYPE_INT32 ? 4 :
	       dt == DRM_METAINFER_DTYPE_INT16 ? 2 : 1;
}

static int64_t sh_numel(const struct lb_shape *sh)
{
	int64_t n = 1;

	for (int k = 0; k < sh->nd; k++)
		n *= sh->dims[k];
	return n;
}

static int add_tensor(struct lb *b, enum mi_lower_role role, int gt,
		      uint32_t dtype, uint32_t layout, const struct lb_shape *sh)
{
	struct mi_lower_tensor *t;
	int cap = b->tcap;
	void *p = grow(b->t, &b->tcap, b->nt + 1, sizeof(*b->t));

	if (!p)
		return -ENOMEM;
	b->t = p;
	p = grow(b->sh, &cap, b->nt + 1, sizeof(*b->sh));
	if (!p)
		return -ENOMEM;
	b->sh = p;
	t = &b->t[b->nt];
	memset(t, 0, sizeof(*t));
	t->role = role;
	t->graph_tensor = role == MI_LT_INPUT || role == MI_LT_OUTPUT ? gt : -1;
	t->dtype = dtype;
	t->layout = layout;
	t->bytes = (size_t)sh_numel(sh) * dt_size(dtype);
	t->bo_index = role == MI_LT_CONST ? 0 : 1;
	b->sh[b->nt] = *sh;
	return b->nt++;
}

int lb_gshape(struct lb *b, int gt, struct lb_shape *sh)
{
	const struct mi_tensor *t = &b->g->tensors[gt];

	if (!mi_tensor_shape_known(t) || t->ndim > 4)
		return -EOPNOTSUPP;
	sh->nd = t->ndim ? t->ndim : 1;
	sh->dims[0] = 1;
	for (int k = 0; k < t->ndim; k++)
		sh->dims[k] = t->dims[k];
	return 0;
}

static uint32_t glayout(const struct lb_shape *sh)
{
	return sh->nd == 4 ? DRM_METAINFER_LAYOUT_NCHW :
			     DRM_METAINFER_LAYOUT_PLAIN;
}

static int add_val(struct lb *b, int gt, int ti, uint32_t l)
{
	void *p = grow(b->v, &b->vcap, b->nv + 1, sizeof(*b->v));

	if (!p)
		return -ENOMEM;
	b->v = p;
	b->v[b->nv++] = (struct lb_val){ .gt = gt, .ti = ti, .layout = l };
	return 0;
}

static int find_val(const struct lb *b, int gt, int want)
{
	for (int i = b->nv - 1; i >= 0; i--)
		if (b->v[i].gt == gt && (want < 0 || b->v[i].layout == (uint32_t)want))
			return i;
	return -1;
}

int lb_const(struct lb *b, const void *data, size_t bytes, uint32_t dtype,
	     uint32_t l, const struct lb_shape *sh)
{
	struct lb_shape one = { .nd = 1, .dims = { (int64_t)(bytes / dt_size(dtype)) } };
	int ti = add_tensor(b, MI_LT_CONST, -1, dtype, l, sh ? sh : &one);

	if (ti < 0)
		return ti;
	b->t[ti].data = malloc(bytes ? bytes : 1);
	if (!b->t[ti].data)
		return -ENOMEM;
	memcpy(b->t[ti].data, data, bytes);
	b->t[ti].bytes = bytes;
	return ti;
}

int lb_temp(struct lb *b, uint32_t dtype, uint32_t l, const struct lb_shape *sh)
{
	return add_tensor(b, MI_LT_TEMP, -1, dtype, l, sh);
}

int lb_new_val(struct lb *b, int gt, uint32_t l, int dt)
{
	struct lb_shape sh;
	int ti, err;

	err = lb_gshape(b, gt, &sh);
	if (err)
		return err;
	if (sh.nd != 4)
		l = DRM_METAINFER_LAYOUT_PLAIN;
	ti = add_tensor(b, MI_LT_TEMP, gt, qu_drm_dtype(dt), l, &sh);
	if (ti < 0)
		return ti;
	err = add_val(b, gt, ti, l);
	return err ? err : ti;
}

/* gt as the job got it: a value, or a new INPUT in the graph's layout. */
int lb_get_any(struct lb *b, int gt, uint32_t *layout)
{
	struct lb_shape sh;
	int vi = find_val(b, gt, -1), ti, err;
	const struct mi_tensor *t = &b->g->tensors[gt];

	if (vi >= 0) {
		*layout = b->v[vi].layout;
		return b->v[vi].ti;
	}
	err = lb_gshape(b, gt, &sh);
	if (err)
		return err;
	ti = add_tensor(b, MI_LT_INPUT, gt, qu_drm_dtype(t->dtype), glayout(&sh), &sh);
	if (ti < 0)
		return ti;
	err = add_val(b, gt, ti, glayout(&sh));
	if (err)
		return err;
	*layout = glayout(&sh);
	return ti;
}

int lb_get(struct lb *b, int gt, uint32_t want)
{
	struct drm_metainfer_op_copy op;
	uint32_t have;
	int src, ti, vi, err;

	src = lb_get_any(b, gt, &have);
	if (src < 0)
		return src;
	if (b->sh[src].nd != 4)
		return src;
	vi = find_val(b, gt, want);
	if (vi >= 0)
		return b->v[vi].ti;
	/* a layout conversion inside the job */
	ti = add_tensor(b, MI_LT_TEMP, -1, b->t[src].dtype, want, &b->sh[src]);
	if (ti < 0)
		return ti;
	err = add_val(b, gt, ti, want);
	if (err)
		return err;
	memset(&op, 0, sizeof(op));
	op.hdr.op = DRM_METAINFER_OP_COPY;
	op.hdr.size = sizeof(op);
	lb_desc_own(b, &op.input, src);
	lb_desc_own(b, &op.output, ti);
	err = lb_emit(b, &op, sizeof(op));
	return err ? err : ti;
}

/* ---- descriptors -------------------------------------------------------- */

int64_t lb_stride(const struct lb *b, int ti, int k)
{
	const struct lb_shape *sh = &b->sh[ti];
	const int64_t *d = sh->dims;

	if (sh->nd == 4 && b->t[ti].layout == DRM_METAINFER_LAYOUT_NHWC) {
		static const int pos[4] = { 0, 3, 1, 2 }; /* n c h w -> NHWC */
		int64_t nhwc[4] = { d[0], d[2], d[3], d[1] }, s = 1;

		for (int j = 3; j > pos[k]; j--)
			s *= nhwc[j];
		return s;
	}
	int64_t s = 1;

	for (int j = sh->nd - 1; j > k; j--)
		s *= d[j];
	return s;
}

static void pend(struct lb *b, const struct drm_metainfer_tensor *d, int ti,
		 uint64_t delta)
{
	if (b->npend >= (int)(sizeof(b->pend) / sizeof(b->pend[0]))) {
		b->err = -EINVAL;
		return;
	}
	b->pend[b->npend].d = d;
	b->pend[b->npend].ti = ti;
	b->pend[b->npend].delta = delta;
	b->npend++;
}

void lb_desc_raw(struct lb *b, struct drm_metainfer_tensor *d, int ti,
		 uint32_t l, int nd, const int64_t *shape,
		 const int64_t *stride, uint64_t delta)
{
	bool any = false;

	memset(d, 0, sizeof(*d));
	d->bo_index = b->t[ti].bo_index;
	d->dtype = b->t[ti].dtype;
	d->layout = l;
	d->ndim = nd;
	d->offset = delta;
	for (int k = 0; k < nd; k++) {
		d->shape[k] = (uint32_t)shape[k];
		d->stride[k] = (uint64_t)stride[k];
		any |= stride[k] != 0;
	}
	if (!any) {
		/* all zero would mean dense: give a unit extent a stride */
		for (int k = 0; k < nd && !any; k++)
			if (shape[k] == 1)
				d->stride[k] = 1, any = true;
		if (!any)
			b->err = -EOPNOTSUPP;
	}
	b->dtypes_used |= 1ull << d->dtype;
	b->layouts_used |= 1ull << l;
	pend(b, d, ti, delta);
}

void lb_desc(struct lb *b, struct drm_metainfer_tensor *d, int ti,
	     uint32_t l, int nd, const int64_t *dims, uint64_t delta)
{
	const struct lb_shape *sh = &b->sh[ti];
	int64_t st[4], shape[4], stride[4];

	for (int k = 0; k < nd; k++) {
		/* right-aligned, as ONNX broadcasting */
		int sk = k - (nd - sh->nd);
		int64_t sd = sk >= 0 ? sh->dims[sk] : 1;

		st[k] = sk < 0 || (sd == 1 && dims[k] != 1) ? 0 : lb_stride(b, ti, sk);
	}
	if (nd == 4 && l == DRM_METAINFER_LAYOUT_NHWC) {
		static const int from[4] = { 0, 2, 3, 1 };

		for (int k = 0; k < 4; k++) {
			shape[k] = dims[from[k]];
			stride[k] = st[from[k]];
		}
	} else {
		for (int k = 0; k < nd; k++) {
			shape[k] = dims[k];
			stride[k] = st[k];
		}
	}
	if (nd != 4)
		l = DRM_METAINFER_LAYOUT_PLAIN;
	lb_desc_raw(b, d, ti, l, nd, shape, stride, delta);
}

void lb_desc_own(struct lb *b, struct drm_metainfer_tensor *d, int ti)
{
	const struct lb_shape *sh = &b->sh[ti];

	lb_desc(b, d, ti, b->t[ti].layout, sh->nd, sh->dims, 0);
}

int lb_emit(struct lb *b, const void *op, size_t size)
{
	const struct drm_metainfer_op_header *h = op;
	void *p;

	if (b->err)
		return b->err;
	if (b->size + size > b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 4096;

		while (nc < b->size + size)
			nc *= 2;
		p = realloc(b->cmds, nc);
		if (!p)
			return -ENOMEM;
		b->cmds = p;
		b->cap = nc;
	}
	for (int i = 0; i < b->npend; i++) {
		struct lb_ref *r;

		p = grow(b->refs, &b->refcap, b->nrefs + 1, sizeof(*b->refs));
		if (!p)
			return -ENOMEM;
		b->refs = p;
		r = &b->refs[b->nrefs++];
		r->pos = b->size + (size_t)((const uint8_t *)b->pend[i].d - (const uint8_t *)op);
		r->ti = b->pend[i].ti;
		r->delta = b->pend[i].delta;
	}
	b->npend = 0;
	memcpy(b->cmds + b->size, op, size);
	b->size += size;
	b->nops++;
	b->ops_used |= 1ull << h->op;
	return 0;
}

/* ---- the job ------------------------------------------------------------ */

static void patch(uint8_t *cmds, const struct lb_ref *r,
		  const struct mi_lower_tensor *t)
{
	struct drm_metainfer_tensor d;

	memcpy(&d, cmds + r->pos, sizeof(d));
	d.bo_index = t->bo_index;
	d.offset = t->offset + r->delta;
	memcpy(cmds + r->pos, &d, sizeof(d));
}

/* Is graph tensor gt read by a node outside the job (or a graph output)?
 * A DQ of the job counts as outside when its float result has readers
 * that are not in the job. */
static bool in_job(const struct lb *b, int ni)
{
	for (int u = 0; u < b->nunits; u++)
		for (int i = 0; i < b->units[u]->nmembers; i++)
			if (b->units[u]->members[i] == ni)
				return true;
	return false;
}

static bool read_outside(const struct lb *b, int gt, int depth)
{
	const struct mi_graph *g = b->g;

	if (g->tensors[gt].flags & MI_TF_OUTPUT)
		return true;
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == gt)
			return true;
	for (int ni = 0; ni < g->nnodes; ni++) {
		const struct mi_node *n = &g->nodes[ni];
		bool reads = false;

		if (n->dead)
			continue;
		for (int j = 0; j < n->ninputs; j++)
			reads |= n->inputs[j] == gt;
		if (!reads)
			continue;
		if (!in_job(b, ni))
			return true;
		if (depth == 0 && !strcmp(n->op_type, "DequantizeLinear") &&
		    read_outside(b, n->outputs[0], 1))
			return true;
	}
	return false;
}

static int finish_outputs(struct lb *b)
{
	for (int u = 0; u < b->nunits; u++) {
		int gt = b->units[u]->output, vi, ti, src, err;
		struct drm_metainfer_op_copy op;

		if (!read_outside(b, gt, 0))
			continue;
		vi = find_val(b, gt, -1);
		if (vi < 0)
			return -EINVAL;
		src = b->v[vi].ti;
		if (b->v[vi].layout != DRM_METAINFER_LAYOUT_NHWC) {
			b->t[src].role = MI_LT_OUTPUT;
			b->t[src].graph_tensor = gt;
			continue;
		}
		ti = add_tensor(b, MI_LT_OUTPUT, gt, b->t[src].dtype,
				DRM_METAINFER_LAYOUT_NCHW, &b->sh[src]);
		if (ti < 0)
			return ti;
		memset(&op, 0, sizeof(op));
		op.hdr.op = DRM_METAINFER_OP_COPY;
		op.hdr.size = sizeof(op);
		lb_desc_own(b, &op.input, src);
		lb_desc_own(b, &op.output, ti);
		err = lb_emit(b, &op, sizeof(op));
		if (err)
			return err;
	}
	return 0;
}

static void lb_fini(struct lb *b)
{
	for (int i = 0; i < b->nt; i++)
		free(b->t[i].data);
	free(b->t);
	free(b->sh);
	free(b->v);
	free(b->refs);
	free(b->cmds);
	memset(b, 0, sizeof(*b));
}

static uint32_t compute_layout(const struct mi_dev_caps *caps)
{
	if (caps->preferred_layout == DRM_METAINFER_LAYOUT_NHWC &&
	    (caps->layout_mask & (1u << DRM_METAINFER_LAYOUT_NHWC)))
		return DRM_METAINFER_LAYOUT_NHWC;
	if (!(caps->layout_mask & (1u << DRM_METAINFER_LAYOUT_NCHW)) &&
	    (caps->layout_mask & (1u << DRM_METAINFER_LAYOUT_NHWC)))
		return DRM_METAINFER_LAYOUT_NHWC;
	return DRM_METAINFER_LAYOUT_NCHW;
}

/* Build units[0..n-1] into b (stream without its header yet). */
static int build(struct lb *b, struct mi_graph *g,
		 const struct mi_qunit *const *units, int n,
		 const struct mi_dev_caps *caps, char *why, size_t whylen)
{
	struct drm_metainfer_stream_header hdr = {
		.magic = DRM_METAINFER_STREAM_MAGIC,
		.version = DRM_METAINFER_STREAM_VERSION,
	};
	int err = 0;

	memset(b, 0, sizeof(*b));
	b->g = g;
	b->caps = caps;
	b->units = units;
	b->nunits = n;
	b->cl = compute_layout(caps);
	b->cmds = malloc(4096);
	if (!b->cmds)
		return -ENOMEM;
	b->cap = 4096;
	memcpy(b->cmds, &hdr, sizeof(hdr));
	b->size = sizeof(hdr);
	for (int i = 0; i < n && !err; i++) {
		struct qu_info qi;

		err = qu_analyze(g, units[i], &qi, why, whylen);
		if (err)
			break;
		err = lb_unit(b, units[i], &qi);
		if (err && why && whylen && !why[0])
			snprintf(why, whylen, "%s '%s': cannot be lowered (%s)",
				 qi.anchor->op_type, qi.anchor->name ? qi.anchor->name : "",
				 strerror(-err));
		qu_info_fini(&qi);
		b->macs += units[i]->macs;
	}
	if (!err)
		err = finish_outputs(b);
	if (!err && b->err)
		err = b->err;
	if (!err && (b->nops > DRM_METAINFER_MAX_OPS ||
		     b->size > DRM_METAINFER_MAX_CMDS_SIZE)) {
		if (why && whylen)
			snprintf(why, whylen, "job of %d ops / %zu bytes exceeds the uapi's %d ops / %d bytes",
				 b->nops, b->size, DRM_METAINFER_MAX_OPS,
				 DRM_METAINFER_MAX_CMDS_SIZE);
		err = -E2BIG;
	}
	if (!err && b->nops == 0) {
		if (why && whylen)
			snprintf(why, whylen, "nothing to lower");
		err = -EINVAL;
	}
	hdr.op_count = b->nops;
	memcpy(b->cmds, &hdr, sizeof(hdr));
	return err;
}

int mi_lower_probe(struct mi_graph *g, const struct mi_qunit *u,
		   const struct mi_dev_caps *caps, uint64_t *ops,
		   uint64_t *dtypes, uint64_t *layouts, char *why,
		   size_t whylen)
{
	const struct mi_qunit *us[1] = { u };
	struct lb b;
	int err;

	err = build(&b, g, us, 1, caps, why, whylen);
	*ops = b.ops_used;
	*dtypes = b.dtypes_used;
	*layouts = b.layouts_used;
	lb_fini(&b);
	return err;
}

int mi_lower_job(struct mi_graph *g, const struct mi_qunit *const *units,
		 int n, const struct mi_dev_caps *caps,
		 struct mi_lower_job **jobp)
{
	struct lower_job *lj;
	struct lb b;
	char why[256] = "";
	size_t off[2] = { 0, 0 };
	int err;

	*jobp = NULL;
	if (n <= 0)
		return mi_set_error(-EINVAL, "lower: no units");
	for (int i = 0; i < n; i++) {
		if (!mi_qunit_supported(g, units[i], caps, why, sizeof(why)))
			return mi_set_error(-EOPNOTSUPP, "lower: %s", why);
	}
	err = build(&b, g, units, n, caps, why, sizeof(why));
	if (err) {
		lb_fini(&b);
		return mi_set_error(err, "lower: %s", why[0] ? why : strerror(-err));
	}
	lj = calloc(1, sizeof(*lj));
	if (!lj) {
		lb_fini(&b);
		return -ENOMEM;
	}
	for (int i = 0; i < b.nt; i++) {
		struct mi_lower_tensor *t = &b.t[i];
		size_t *o = &off[t->bo_index];

		t->offset = *o;
		*o += (t->bytes + LB_ALIGN - 1) & ~(size_t)(LB_ALIGN - 1);
	}
	for (int i = 0; i < b.nrefs; i++)
		patch(b.cmds, &b.refs[i], &b.t[b.refs[i].ti]);
	lj->pub.cmds = b.cmds;
	lj->pub.cmds_size = b.size;
	lj->pub.nops = b.nops;
	lj->pub.t = b.t;
	lj->pub.nt = b.nt;
	lj->pub.const_bytes = off[0];
	lj->pub.act_bytes = off[1];
	lj->pub.macs = b.macs;
	lj->pub.units = units;
	lj->pub.nunits = n;
	lj->refs = b.refs;
	lj->nrefs = b.nrefs;
	free(b.sh);
	free(b.v);
	*jobp = &lj->pub;
	return 0;
}

void mi_lower_job_free(struct mi_lower_job *job)
{
	struct lower_job *lj = (struct lower_job *)job;

	if (!job)
		return;
	for (int i = 0; i < job->nt; i++)
		free(job->t[i].data);
	free(job->t);
	free(job->cmds);
	free(lj->refs);
	free(lj);
}

int mi_lower_rebind(struct mi_lower_job *job, int ti, uint32_t bo_index,
		    uint64_t offset)
{
	struct lower_job *lj = (struct lower_job *)job;
	struct mi_lower_tensor *t;

	if (ti < 0 || ti >= job->nt)
		return mi_set_error(-EINVAL, "lower: no job tensor %d", ti);
	if (bo_index >= DRM_METAINFER_MAX_BOS)
		return mi_set_error(-EINVAL, "lower: buffer index %u", bo_index);
	t = &job->t[ti];
	if (offset % dt_size(t->dtype))
		return mi_set_error(-EINVAL, "lower: offset %llu not aligned",
				    (unsigned long long)offset);
	t->bo_index = bo_index;
	t->offset = offset;
	for (int i = 0; i < lj->nrefs; i++)
		if (lj->refs[i].ti == ti)
			patch(job->cmds, &lj->refs[i], t);
	return 0;
}
