// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution: data movement on quantized tensors
 * (Slice, Split, Reshape, Transpose, ... as byte gathers).
 */
#include "debug.h"
#include "quant/qplan-impl.h"

/* ---- data movement on quantized tensors ------------------------------------ */

/*
 * Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Slice, Split,
 * Concat and Gather (constant indices) move values without changing them.
 * A connected set of them whose data come from per-tensor
 * DequantizeLinear nodes ("sources") and whose results go to per-tensor
 * QuantizeLinear nodes ("sinks") runs on the bytes: every element of a
 * sink is Q_sink(DQ_src(byte)) of one source byte, a byte table per
 * (source, sink) pair (the identity, i.e. a copy, when their parameters
 * are equal: Q(DQ(q)) = q because (q - zp) * scale / scale is within a few
 * ulps of q - zp, |q - zp| <= 255), computed with the Q/DQ kernels
 * themselves, so the bytes are those of DQ -> float moves -> Q.  Which
 * source byte lands where is found at plan time by running the moves on
 * the elements' origins (source, offset) and kept as runs of consecutive
 * bytes.  The node that wrote a sink's tensor writes the sink's bytes from
 * the sources (its inputs become them); the other moves, the sinks'
 * QuantizeLinear nodes and the DequantizeLinear nodes nobody reads any
 * more go dead.  A move whose result an fp32 node reads (or a graph
 * output) keeps running in fp32 with everything it needs.  Q -> DQ pairs
 * between moves that round-trip every byte reaching them are looked
 * through (mv_through).  Sources are read planar; a sink whose channel
 * planes are whole runs may write C4 for its conv (qp_plan_c4_tensors).
 */
#define QMV_SHIFT 40 /* origin = source << QMV_SHIFT | offset */
#define QMV_MAXSRC 64 /* sources (inputs) of one node */

static bool mv_op(const struct mi_node *n)
{
	static const char *const ops[] = { "Identity", "Reshape", "Flatten", "Squeeze",
					   "Unsqueeze", "Transpose", "Slice", "Split",
					   "Concat", "Gather", NULL };

	if (n->dead || n->priv || n->domain[0] || n->noutputs < 1 ||
	    n->noutputs > MI_MAX_DIMS)
		return false;
	for (int i = 0; ops[i]; i++)
		if (!strcmp(n->op_type, ops[i]))
			return true;
	return false;
}

/* Inputs of move n that carry data (the others are shapes / indices). */
static int mv_ndata(const struct mi_node *n)
{
	return !strcmp(n->op_type, "Concat") ? n->ninputs : 1;
}

struct mvctx {
	struct mi_graph *g;
	int64_t **org;  /* per tensor: origins of its elements, or NULL */
	int8_t *state;  /* per tensor: 0 not yet, 1 org set, -1 not movable */
	int nsrc, csrc; /* every source of the graph's moves */
	int *src_t;
	struct qact *src_q;
};

/* integer constant (or plan-time shape value) input i: -ENOENT if absent */
static int mv_ints(struct mi_graph *g, struct mi_node *n, int i, int64_t *v, int max, int *cnt)
{
	struct mi_tensor *t = mi_in(g, n, i);

	if (!t)
		return -ENOENT;
	if (!(t->flags & (MI_TF_CONST | MI_TF_SHAPEVAL)) || !t->data ||
	    (t->dtype != MI_DT_INT64 && t->dtype != MI_DT_INT32) || t->ndim > 1 ||
	    mi_tensor_numel(t) > max)
		return -EINVAL;
	*cnt = (int)mi_tensor_numel(t);
	for (int k = 0; k < *cnt; k++)
		v[k] = mi_tensor_get_i64(t, k);
	return 0;
}

static void mv_strides(const struct mi_tensor *t, int64_t *s)
{
	int64_t v = 1;

	for (int i = t->ndim - 1; i >= 0; i--) {
		s[i] = v;
		v *= t->dims[i];
	}
}

/* y[i] = x[xoff + sum_k idx_k(i) xs_k] over y's dims (row-major). */
static void mv_gather(const int64_t *x, int64_t xoff, const int64_t *xs, const int64_t *dims,
		      int nd, int64_t *y)
{
	int64_t idx[MI_MAX_DIMS] = { 0 }, n = 1, xo = xoff;

	for (int k = 0; k < nd; k++)
		n *= dims[k];
	for (int64_t i = 0; i < n; i++) {
		y[i] = x[xo];
		for (int k = nd - 1; k >= 0; k--) {
			xo += xs[k];
			if (++idx[k] < dims[k])
				break;
			xo -= dims[k] * xs[k];
			idx[k] = 0;
		}
	}
}

/* Slice geometry as the reference op computes it: per axis start and step. */
static bool mv_slice(struct mi_graph *g, struct mi_node *n, const struct mi_tensor *x,
		     const struct mi_tensor *y, int64_t *xoff, int64_t *xs)
{
	int64_t st[MI_MAX_DIMS], en[MI_MAX_DIMS], ax[MI_MAX_DIMS], sp[MI_MAX_DIMS];
	int ns, ne, na = -1, nst = -1, r = x->ndim, seen[MI_MAX_DIMS] = { 0 };

	if (y->ndim != r)
		return false;
	if (n->ninputs >= 3) {
		int e3, e4;

		if (mv_ints(g, n, 1, st, MI_MAX_DIMS, &ns) || mv_ints(g, n, 2, en, MI_MAX_DIMS, &ne))
			return false;
		e3 = mv_ints(g, n, 3, ax, MI_MAX_DIMS, &na);
		e4 = mv_ints(g, n, 4, sp, MI_MAX_DIMS, &nst);
		if ((e3 && e3 != -ENOENT) || (e4 && e4 != -ENOENT))
			return false;
		if (e3)
			na = -1;
		if (e4)
			nst = -1;
	} else {
		const int64_t *a = mi_attr_ints(n, "starts", &ns);
		const int64_t *b = mi_attr_ints(n, "ends", &ne);
		const int64_t *c = mi_attr_ints(n, "axes", &na);

		if (!a || !b || ns > MI_MAX_DIMS || ne > MI_MAX_DIMS || (c && na > MI_MAX_DIMS))
			return false;
		memcpy(st, a, ns * sizeof(int64_t));
		memcpy(en, b, ne * sizeof(int64_t));
		if (c)
			memcpy(ax, c, na * sizeof(int64_t));
		else
			na = -1;
	}
	if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
		return false;
	mv_strides(x, xs);
	*xoff = 0;
	for (int i = 0; i < ns; i++) {
		int64_t a = na >= 0 ? ax[i] : i, dim, s, step, len;

		if (a < 0)
			a += r;
		if (a < 0 || a >= r || seen[a])
			return false;
		seen[a] = 1;
		step = nst >= 0 ? sp[i] : 1;
		dim = x->dims[a];
		if (step == 0)
			return false;
		len = mi_slice_axis(dim, st[i], en[i], &step, &s);
		if (len != y->dims[a])
			return false;
		*xoff += s * xs[a];
		xs[a] *= step;
	}
	for (int i = 0; i < r; i++)
		if (!seen[i] && x->dims[i] != y->dims[i])
			return false;
	return true;
}

static int64_t *mv_origins(struct mvctx *c, int t);

/* Origins of output `o` of move n into y (numel of that output). */
static bool mv_apply(struct mvctx *c, struct mi_node *n, int o, int64_t *y)
{
	struct mi_graph *g = c->g;
	struct mi_tensor *yt = mi_out(g, n, o), *xt = mi_in(g, n, 0);
	int64_t *x[QMV_MAXSRC], xs[MI_MAX_DIMS], xoff = 0;
	int nd = mv_ndata(n), r = yt->ndim;

	if (nd > QMV_MAXSRC)
		return false;
	for (int k = 0; k < nd; k++) {
		x[k] = mv_origins(c, n->inputs[k]);
		if (!x[k])
			return false;
	}
	if (!strcmp(n->op_type, "Transpose")) {
		int cnt, seen[MI_MAX_DIMS] = { 0 };
		const int64_t *p = mi_attr_ints(n, "perm", &cnt);
		int64_t s[MI_MAX_DIMS];

		if (xt->ndim != r || (p && cnt != r))
			return false;
		mv_strides(xt, s);
		for (int i = 0; i < r; i++) {
			int64_t a = p ? p[i] : r - 1 - i;

			if (a < 0 || a >= r || seen[a] || yt->dims[i] != xt->dims[a])
				return false;
			seen[a] = 1;
			xs[i] = s[a];
		}
	} else if (!strcmp(n->op_type, "Slice")) {
		if (!mv_slice(g, n, xt, yt, &xoff, xs))
			return false;
	} else if (!strcmp(n->op_type, "Split") || !strcmp(n->op_type, "Gather") ||
		   !strcmp(n->op_type, "Concat")) {
		bool gather = !strcmp(n->op_type, "Gather"), cat = !strcmp(n->op_type, "Concat");
		int64_t axis = mi_attr_int(n, "axis", 0), outer = 1, inner = 1, pos = 0;
		int xr = cat ? r : xt->ndim;

		if (axis < 0)
			axis += xr;
		if (axis < 0 || axis >= xr)
			return false;
		for (int i = 0; i < axis; i++)
			outer *= (cat ? yt : xt)->dims[i];
		for (int i = axis + 1; i < xr; i++)
			inner *= (cat ? yt : xt)->dims[i];
		if (cat) {
			for (int k = 0; k < nd; k++) {
				struct mi_tensor *in = mi_in(g, n, k);
				int64_t w = in->dims[axis] * inner;

				if (in->ndim != r)
					return false;
				for (int64_t b = 0; b < outer; b++)
					memcpy(y + b * yt->dims[axis] * inner + pos * inner,
					       x[k] + b * w, w * sizeof(int64_t));
				pos += in->dims[axis];
			}
			return pos == yt->dims[axis];
		}
		if (gather) {
			struct mi_tensor *it = mi_in(g, n, 1);
			int64_t ni, dim = xt->dims[axis];

			if (!it || !qp_const_t(it) || (it->dtype != MI_DT_INT64 && it->dtype != MI_DT_INT32))
				return false;
			ni = mi_tensor_numel(it);
			if (outer * ni * inner != mi_tensor_numel(yt))
				return false;
			for (int64_t b = 0; b < outer; b++)
				for (int64_t j = 0; j < ni; j++) {
					int64_t v = mi_tensor_get_i64(it, j);

					if (v < 0)
						v += dim;
					if (v < 0 || v >= dim)
						return false;
					memcpy(y + (b * ni + j) * inner, x[0] + (b * dim + v) * inner,
					       inner * sizeof(int64_t));
				}
			return true;
		}
		/* Split: output o is the part after the outputs before it */
		for (int k = 0; k < o; k++)
			pos += mi_out(g, n, k)->dims[axis];
		if (yt->ndim != xr || pos + yt->dims[axis] > xt->dims[axis])
			return false;
		for (int64_t b = 0; b < outer; b++)
			memcpy(y + b * yt->dims[axis] * inner,
			       x[0] + (b * xt->dims[axis] + pos) * inner,
			       yt->dims[axis] * inner * sizeof(int64_t));
		return true;
	} else {
		/* reshapes: the same elements in the same order */
		if (mi_tensor_numel(xt) != mi_tensor_numel(yt))
			return false;
		memcpy(y, x[0], mi_tensor_numel(yt) * sizeof(int64_t));
		return true;
	}
	mv_gather(x[0], xoff, xs, yt->dims, r, y);
	return true;
}

/* Every origin in org[0..n) is a source with parameters a. */
static bool mv_all_src(const struct mvctx *c, const int64_t *org, int64_t n, const struct qact *a)
{
	int last = -1;

	for (int64_t i = 0; i < n; i++) {
		int s = (int)(org[i] >> QMV_SHIFT);

		if (s == last)
			continue;
		if (!qp_same_q(&c->src_q[s], a))
			return false;
		last = s;
	}
	return true;
}

/*
 * DQ p (parameters a, writing t of n elements) reads a QuantizeLinear of
 * a move's output whose sources all have parameters a (ONNX Runtime's
 * quantizer puts a Q/DQ pair after every move): Q rounds DQ(q) back to q,
 * so t's origins are those of the Q's input.
 */
static bool mv_through(struct mvctx *c, struct mi_node *p, const struct qact *a, int t,
		       int64_t n)
{
	struct mi_graph *g = c->g;
	struct mi_node *qn = qp_producer(g, p->inputs[0], "QuantizeLinear"), *pp;
	struct qact qa;
	int64_t *o0;
	int t0;

	if (!qn || qn->priv || !qp_q_params(g, qn, &qa) || !qp_same_q(&qa, a))
		return false;
	t0 = qn->inputs[0];
	pp = t0 >= 0 && g->tensors[t0].producer >= 0 ? &g->nodes[g->tensors[t0].producer] : NULL;
	if (!pp || !mv_op(pp) || mi_tensor_numel(&g->tensors[t0]) != n)
		return false;
	o0 = mv_origins(c, t0);
	if (!o0 || !mv_all_src(c, o0, n, a))
		return false;
	c->org[t] = malloc(n * sizeof(int64_t));
	if (!c->org[t])
		return false;
	memcpy(c->org[t], o0, n * sizeof(int64_t));
	return true;
}

/* Origins of tensor t's elements (NULL: not all from quantized sources). */
static int64_t *mv_origins(struct mvctx *c, int t)
{
	struct mi_graph *g = c->g;
	struct mi_tensor *y = t >= 0 ? &g->tensors[t] : NULL;
	struct mi_node *p;
	int64_t n;
	int o = 0;

	if (!y)
		return NULL;
	if (c->state[t])
		return c->state[t] > 0 ? c->org[t] : NULL;
	c->state[t] = -1;
	n = mi_tensor_numel(y);
	if (y->producer < 0 || y->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(y) || n <= 0 ||
	    n >= ((int64_t)1 << QMV_SHIFT))
		return NULL;
	p = &g->nodes[y->producer];
	while (o < p->noutputs && p->outputs[o] != t)
		o++;
	if (p->dead || o == p->noutputs)
		return NULL;
	if (!strcmp(p->op_type, "DequantizeLinear") && !p->domain[0] && !p->priv) {
		struct qact a;
		int s;

		if (!qp_act_params(g, p, 0, 1, 2, &a) || mi_tensor_numel(mi_in(g, p, 0)) != n)
			return NULL;
		if (mv_through(c, p, &a, t, n))
			goto done;
		for (s = 0; s < c->nsrc && c->src_t[s] != a.t; s++)
			;
		if (s == c->csrc) {
			int *nt = realloc(c->src_t, (2 * s + 16) * sizeof(int));
			struct qact *nq = nt ? realloc(c->src_q, (2 * s + 16) * sizeof(*nq)) : NULL;

			if (nt)
				c->src_t = nt;
			if (!nq)
				return NULL;
			c->src_q = nq;
			c->csrc = 2 * s + 16;
		}
		if (s == c->nsrc) {
			c->src_t[s] = a.t;
			c->src_q[s] = a;
			c->nsrc++;
		}
		c->org[t] = malloc(n * sizeof(int64_t));
		if (!c->org[t])
			return NULL;
		for (int64_t i = 0; i < n; i++)
			c->org[t][i] = (int64_t)s << QMV_SHIFT | i;
	} else {
		if (!mv_op(p))
			return NULL;
		c->org[t] = malloc(n * sizeof(int64_t));
		if (!c->org[t] || !mv_apply(c, p, o, c->org[t])) {
			free(c->org[t]);
			c->org[t] = NULL;
			return NULL;
		}
	}
done:
	c->state[t] = 1;
	return c->org[t];
}

struct qmv_job {
	const struct qmv_out *o;
	const uint8_t *x[QMV_MAXSRC];
	uint8_t *y;
};

/*
 * A move's byte tables (a sink's parameters differ from a source's:
 * ShuffleNetV2's split reads the branch outputs of several units, each
 * with its own scale) are looked up once per channel plane, 49-784 bytes.
 * qp_lut8_any set the 16 table slices up on every call and did the last
 * n % 32 bytes one at a time (17 of ShuffleNetV2 stage4's 49-byte planes:
 * its Slices cost ~1 cycle per byte).  qmv_lut takes the slices made at
 * plan time (tel_make) and ends with a vector overlapping the one before
 * (the same table, so the same bytes).
 */
/* lut8x_tel_avx2's slices: slice c XOR slice c - 1 within each half. */
static void tel_make(const uint8_t *lut, uint8_t *d)
{
	for (int c = 0; c < 16; c++)
		for (int b = 0; b < 16; b++)
			d[16 * c + b] = lut[16 * c + b] ^ (c % 8 ? lut[16 * (c - 1) + b] : 0);
}

/* y[i] = lut[x[i]], i < n (n >= 32, x and y apart), from tel_make's d. */
__attribute__((target("avx2"))) static void lut8_tel_pre(const uint8_t *x, const uint8_t *tel,
							  int64_t n, uint8_t *y)
{
	__m256i d[16];

	for (int c = 0; c < 16; c++)
		d[c] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(tel + 16 * c)));
	for (int64_t i = 0;; i += 32) {
		if (i + 32 > n)
			i = n - 32; /* the last vector overlaps the one before */
		_mm256_storeu_si256((__m256i *)(y + i),
				    tel32_avx2(d, _mm256_loadu_si256((const __m256i *)(x + i))));
		if (i + 32 >= n)
			break;
	}
}

/*
 * Better still, a table is mostly Q_sink(DQ_src(q)) = round((q - zp) *
 * ratio) + zp', i.e. ((u * m + r) >> sh) saturated, found at plan time
 * and kept only if it gives every one of the 256 table bytes
 * (qmv_aff_fit): 4 vpmulld + 4 vpaddd + 4 vpsravd + 3 packs + vpermd per
 * 32 bytes instead of 16 vpshufb, 14 vpsubb, 15 vpxor, with m, r, sh per
 * 32-bit lane, so a C4 quad is interleaved first and requantized in place
 * with its 4 planes' parameters (qmv_c4_range).
 */
static int qmv_sat(int64_t v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : (int)v;
}

/* f gives every byte of tab, computed as qmv_aff32 does. */
static bool qmv_aff_ok(const uint8_t *tab, int s8y, const struct qmv_aff *f)
{
	for (int b = 0; b < 256; b++) {
		int64_t p = (int64_t)(b ^ f->flip) * f->m, w = p + f->r;
		int v;

		if (p > INT32_MAX || w < INT32_MIN || w > INT32_MAX)
			return false;
		v = qmv_sat(qmv_sat(w >> f->sh, -32768, 32767) + f->zp, -32768, 32767);
		if (qmv_sat(v, s8y ? -128 : 0, s8y ? 127 : 255) != (s8y ? (int8_t)tab[b] : tab[b]))
			return false;
	}
	return true;
}

/* Table tab of source a into sink y in fixed point: false if none found. */
static bool qmv_aff_fit(const uint8_t *tab, const struct qact *a, const struct qact *y,
			struct qmv_aff *f)
{
	double ratio = (double)a->scale / (double)y->scale;
	int s8x = a->dtype == MI_DT_INT8, s8y = y->dtype == MI_DT_INT8;
	int64_t zx = a->zp + (s8x ? 128 : 0);

	if ((a->dtype != MI_DT_UINT8 && !s8x) || (y->dtype != MI_DT_UINT8 && !s8y) ||
	    !(ratio > 0) || ratio > 32767)
		return false;
	f->flip = s8x ? 0x80 : 0;
	f->zp = y->zp;
	for (int sh = 30; sh >= 0; sh--) {
		int64_t m0 = llrint(ldexp(ratio, sh));

		if (m0 > INT32_MAX / 384)
			continue;
		for (int dm = 0; dm < 3; dm++) {
			int64_t m = m0 + (dm == 1 ? -1 : dm == 2 ? 1 : 0);

			for (int dr = -2; dr <= 2 && m >= 0; dr++) {
				int64_t r = ((int64_t)1 << sh >> 1) - zx * m + dr;

				if (r < INT32_MIN || r > INT32_MAX)
					continue;
				f->m = (int32_t)m;
				f->r = (int32_t)r;
				f->sh = sh;
				if (qmv_aff_ok(tab, s8y, f))
					return true;
			}
		}
	}
	return false;
}

/* 32 bytes requantized: lane l of m, r, sh for bytes l mod 8 of 8. */
__attribute__((target("avx2"), always_inline)) static inline __m256i
qmv_aff32(__m256i v, const __m256i *p, bool s8y)
{
	__m128i lo, hi;
	__m256i a, b, c, d;

	v = _mm256_xor_si256(v, p[3]);
	lo = _mm256_castsi256_si128(v);
	hi = _mm256_extracti128_si256(v, 1);
	a = _mm256_cvtepu8_epi32(lo);
	b = _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8));
	c = _mm256_cvtepu8_epi32(hi);
	d = _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8));
	a = _mm256_srav_epi32(_mm256_add_epi32(_mm256_mullo_epi32(a, p[0]), p[1]), p[2]);
	b = _mm256_srav_epi32(_mm256_add_epi32(_mm256_mullo_epi32(b, p[0]), p[1]), p[2]);
	c = _mm256_srav_epi32(_mm256_add_epi32(_mm256_mullo_epi32(c, p[0]), p[1]), p[2]);
	d = _mm256_srav_epi32(_mm256_add_epi32(_mm256_mullo_epi32(d, p[0]), p[1]), p[2]);
	a = _mm256_adds_epi16(_mm256_packs_epi32(a, b), p[4]); /* bytes 0-3 8-11 | 4-7 12-15 */
	c = _mm256_adds_epi16(_mm256_packs_epi32(c, d), p[4]);
	a = s8y ? _mm256_packs_epi16(a, c) : _mm256_packus_epi16(a, c);
	return _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* y[i] = aff(x[i]), i < n (y may be x): lanes' parameters p[0..5) (m, r,
 * sh, flip, zp), a pattern of 4 bytes. */
__attribute__((target("avx2"))) static void qmv_aff_avx2(const uint8_t *x, int64_t n,
							  const __m256i *p, bool s8y, uint8_t *y)
{
	int64_t i = 0;

	for (; i + 32 <= n; i += 32)
		_mm256_storeu_si256((__m256i *)(y + i),
				    qmv_aff32(_mm256_loadu_si256((const __m256i *)(x + i)), p, s8y));
	if (i < n) {
		uint8_t b[32] = { 0 };

		memcpy(b, x + i, n - i);
		_mm256_storeu_si256((__m256i *)b,
				    qmv_aff32(_mm256_loadu_si256((const __m256i *)b), p, s8y));
		memcpy(y + i, b, n - i);
	}
}

/* Parameters of qmv_aff_avx2 for sources s[0..4) (byte k of 4: s[k]);
 * the zero point is the sink's, one per output. */
__attribute__((target("avx2"))) static void qmv_aff_par(const struct qmv_out *o, const int *s,
							  __m256i *p)
{
	const struct qmv_aff *f[4] = { &o->aff[s[0]], &o->aff[s[1]], &o->aff[s[2]], &o->aff[s[3]] };

	p[0] = _mm256_setr_epi32(f[0]->m, f[1]->m, f[2]->m, f[3]->m, f[0]->m, f[1]->m, f[2]->m,
				 f[3]->m);
	p[1] = _mm256_setr_epi32(f[0]->r, f[1]->r, f[2]->r, f[3]->r, f[0]->r, f[1]->r, f[2]->r,
				 f[3]->r);
	p[2] = _mm256_setr_epi32(f[0]->sh, f[1]->sh, f[2]->sh, f[3]->sh, f[0]->sh, f[1]->sh,
				 f[2]->sh, f[3]->sh);
	p[3] = _mm256_set1_epi32((int32_t)((uint32_t)f[0]->flip | (uint32_t)f[1]->flip << 8 |
					   (uint32_t)f[2]->flip << 16 | (uint32_t)f[3]->flip << 24));
	p[4] = _mm256_set1_epi16((int16_t)f[0]->zp);
}

/* The fixed-point path runs (AVX2, tables fitted, switch on). */
static bool qmv_aff_use(const struct qmv_out *o)
{
	return o->aff && mi_quant_isa() == MI_QISA_AVX2;
}

/* y[i] = table s of output o at x[i], i < n. */
static void qmv_lut(const struct qmv_out *o, int s, const uint8_t *x, int64_t n, uint8_t *y)
{
	if (qmv_aff_use(o)) {
		int ss[4] = { s, s, s, s };
		__m256i p[5];

		qmv_aff_par(o, ss, p);
		qmv_aff_avx2(x, n, p, o->s8y, y);
	} else if (o->tel && n >= 32 && (x + n <= y || y + n <= x) &&
		   mi_quant_isa() == MI_QISA_AVX2) {
		lut8_tel_pre(x, o->tel + (size_t)s * 256, n, y);
	} else {
		qp_lut8_any(x, o->tab + (size_t)s * 256, n, y);
	}
}

/* Output bytes [b, e) of one sink: the runs they fall in. */
static void qmv_range(void *arg, int64_t b, int64_t e)
{
	const struct qmv_job *j = arg;
	const struct qmv_out *o = j->o;
	int lo = 0, hi = o->nruns - 1;

	while (lo < hi) { /* last run starting at or before b */
		int mid = (lo + hi + 1) / 2;

		if (o->runs[mid].dst <= b)
			lo = mid;
		else
			hi = mid - 1;
	}
	for (int r = lo; b < e; r++) {
		const struct qmv_run *u = &o->runs[r];
		int64_t s = b - u->dst, cnt = u->len - s < e - b ? u->len - s : e - b;
		const uint8_t *x = j->x[u->src] + u->off + s;

		if (o->deq) {
			const struct qact *a = &o->deq[u->src];

			mi_dequantize(x, a->dtype, cnt, a->scale, a->zp, (float *)j->y + b);
		} else if (o->ident[u->src])
			memcpy(j->y + b, x, cnt);
		else
			qmv_lut(o, u->src, x, cnt, j->y + b);
		b += cnt;
	}
}

/* 16 pixels of 4 channel rows into C4 quads (64 bytes). */
static inline void qmv_c4_16(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2,
			     const uint8_t *r3, uint8_t *y)
{
	__m128i a = _mm_loadu_si128((const __m128i *)r0), b = _mm_loadu_si128((const __m128i *)r1);
	__m128i c = _mm_loadu_si128((const __m128i *)r2), d = _mm_loadu_si128((const __m128i *)r3);
	__m128i abl = _mm_unpacklo_epi8(a, b), abh = _mm_unpackhi_epi8(a, b);
	__m128i cdl = _mm_unpacklo_epi8(c, d), cdh = _mm_unpackhi_epi8(c, d);

	_mm_storeu_si128((__m128i *)y, _mm_unpacklo_epi16(abl, cdl));
	_mm_storeu_si128((__m128i *)(y + 16), _mm_unpackhi_epi16(abl, cdl));
	_mm_storeu_si128((__m128i *)(y + 32), _mm_unpacklo_epi16(abh, cdh));
	_mm_storeu_si128((__m128i *)(y + 48), _mm_unpackhi_epi16(abh, cdh));
}

#define QMV_C4_PX 256 /* pixels per step: 4 rows of bytes on the stack */

/* C4 output: quads [b, e) of [n * c / 4], each 4 planes interleaved. */
static void qmv_c4_range(void *arg, int64_t b, int64_t e)
{
	const struct qmv_job *j = arg;
	const struct qmv_out *o = j->o;
	int64_t hw = o->hw;
	uint8_t tmp[4][QMV_C4_PX];

	if (qmv_aff_use(o)) { /* interleave, then requantize the quad in place */
		for (int64_t qd = b; qd < e; qd++) {
			uint8_t *y = j->y + qd * hw * 4;
			const uint8_t *row[4];
			int64_t p = 0;
			__m256i par[5];
			bool id = true;

			for (int k = 0; k < 4; k++) {
				row[k] = j->x[o->pl_src[qd * 4 + k]] + o->pl_off[qd * 4 + k];
				id &= o->ident[o->pl_src[qd * 4 + k]];
			}
			for (; p + 16 <= hw; p += 16)
				qmv_c4_16(row[0] + p, row[1] + p, row[2] + p, row[3] + p, y + p * 4);
			for (; p < hw; p++)
				for (int k = 0; k < 4; k++)
					y[p * 4 + k] = row[k][p];
			if (id)
				continue;
			qmv_aff_par(o, &o->pl_src[qd * 4], par);
			qmv_aff_avx2(y, hw * 4, par, o->s8y, y);
		}
		return;
	}
	for (int64_t qd = b; qd < e; qd++) {
		const uint8_t *row[4];
		uint8_t *y = j->y + qd * hw * 4;

		for (int64_t p0 = 0; p0 < hw; p0 += QMV_C4_PX) {
			int64_t np = hw - p0 < QMV_C4_PX ? hw - p0 : QMV_C4_PX, p = 0;

			for (int k = 0; k < 4; k++) {
				int s = o->pl_src[qd * 4 + k];
				const uint8_t *x = j->x[s] + o->pl_off[qd * 4 + k] + p0;

				if (o->ident[s]) {
					row[k] = x;
				} else {
					qmv_lut(o, s, x, np, tmp[k]);
					row[k] = tmp[k];
				}
			}
			for (; p + 16 <= np; p += 16)
				qmv_c4_16(row[0] + p, row[1] + p, row[2] + p, row[3] + p,
					  y + (p0 + p) * 4);
			for (; p < np; p++)
				for (int k = 0; k < 4; k++)
					y[(p0 + p) * 4 + k] = row[k][p];
		}
	}
}

int qmv_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	const struct qmove *m = q->mv;
	struct qmv_job j;

	for (int i = 0; i < n->ninputs; i++)
		j.x[i] = mi_in(g, n, i)->data;
	for (int k = 0; k < m->nout; k++) {
		j.o = &m->out[k];
		j.y = mi_out(g, n, k)->data;
		if (j.o->c4)
			qp_par_range(q->nthreads, j.o->numel / (4 * j.o->hw),
				  ((32 << 10) + 4 * j.o->hw - 1) / (4 * j.o->hw), qmv_c4_range, &j);
		else
			qp_par_range(q->nthreads, j.o->numel, 32 << 10, qmv_range, &j);
	}
	return 0;
}

/* Output o can write C4: 4-D, channels a multiple of 4, every channel
 * plane one run (of one source, consecutive bytes). */
static int qmv_planes(const struct mi_tensor *t, struct qmv_out *o)
{
	int64_t np, r = 0;

	if (t->ndim != 4 || t->dims[1] % 4 || t->dims[2] * t->dims[3] <= 0)
		return 0;
	o->c = t->dims[1];
	o->hw = t->dims[2] * t->dims[3];
	np = t->dims[0] * o->c;
	o->pl_src = malloc(np * sizeof(int));
	o->pl_off = malloc(np * sizeof(int64_t));
	if (!o->pl_src || !o->pl_off)
		return -ENOMEM;
	for (int64_t i = 0; i < np; i++) {
		int64_t d = i * o->hw;

		while (r < o->nruns && o->runs[r].dst + o->runs[r].len <= d)
			r++;
		if (r == o->nruns || o->runs[r].dst + o->runs[r].len < d + o->hw) {
			free(o->pl_src);
			free(o->pl_off);
			o->pl_src = NULL;
			o->pl_off = NULL;
			return 0;
		}
		o->pl_src[i] = o->runs[r].src;
		o->pl_off[i] = o->runs[r].off + (d - o->runs[r].dst);
	}
	return 0;
}

/* n (moves on bytes) can write its output in C4 layout. */
bool qmv_c4_writer(const struct mi_node *n)
{
	const struct qmove *m = ((const struct qnode *)n->priv)->mv;

	return m->nout == 1 && m->out[0].pl_src;
}

void qmove_free(struct qmove *m)
{
	if (!m)
		return;
	for (int k = 0; k < m->nout; k++) {
		free(m->out[k].runs);
		free(m->out[k].tab);
		free(m->out[k].tel);
		free(m->out[k].aff);
		free(m->out[k].ident);
		free(m->out[k].pl_src);
		free(m->out[k].pl_off);
		free(m->out[k].deq);
	}
	free(m->orig_in);
	free(m->orig_out);
	free(m->killed);
	free(m->consts);
	free(m);
}

void qmove_undo(struct mi_graph *g, struct mi_node *n, struct qmove *m)
{
	memcpy(n->inputs, m->orig_in, m->orig_nin * sizeof(int));
	n->ninputs = m->orig_nin;
	memcpy(n->outputs, m->orig_out, m->orig_nout * sizeof(int));
	n->noutputs = m->orig_nout;
	for (int i = 0; i < m->nconsts; i++)
		g->tensors[m->consts[i]].flags &= ~MI_TF_CONST;
	for (int i = 0; i < m->nkilled; i++) {
		struct mi_node *k = &g->nodes[m->killed[i]];

		k->dead = false;
		for (int o = 0; o < k->noutputs; o++)
			if (k->outputs[o] >= 0)
				g->tensors[k->outputs[o]].producer = m->killed[i];
	}
}

/* The sink's runs and tables; its sources get node inputs (ins). */
static int qmv_out_build(struct mvctx *c, const int64_t *org, int64_t numel, int *ins,
			 int *nin, struct qmv_out *o)
{
	int cap = 64, last = -1, loc = -1;

	o->numel = numel;
	o->runs = malloc(cap * sizeof(*o->runs));
	if (!o->runs)
		return -ENOMEM;
	for (int64_t i = 0; i < numel; i++) {
		int s = (int)(org[i] >> QMV_SHIFT);
		int64_t off = org[i] & (((int64_t)1 << QMV_SHIFT) - 1);
		struct qmv_run *u = o->nruns ? &o->runs[o->nruns - 1] : NULL;

		if (s != last) { /* at most QMV_MAXSRC (mv_nsrc_ok) */
			int k;

			for (k = 0; k < *nin && ins[k] != c->src_t[s]; k++)
				;
			if (k == *nin)
				ins[(*nin)++] = c->src_t[s];
			loc = k;
			last = s;
		}
		if (u && u->src == loc && u->off + u->len == off) {
			u->len++;
			continue;
		}
		if (o->nruns == cap) {
			struct qmv_run *nr = realloc(o->runs, 2 * cap * sizeof(*nr));

			if (!nr)
				return -ENOMEM;
			o->runs = nr;
			cap *= 2;
		}
		o->runs[o->nruns++] = (struct qmv_run){ i, off, 1, loc };
	}
	return 0;
}

/* Tables of output o for the node's inputs ins[0..nin) (sources). */
static int qmv_tables(struct mvctx *c, const int *ins, int nin, const struct qact *y,
		      struct qmv_out *o)
{
	o->tab = malloc((size_t)nin * 256);
	o->ident = calloc(nin, sizeof(bool));
	if (y)
		o->tel = malloc((size_t)nin * 256);
	if (!y)
		o->deq = malloc(nin * sizeof(*o->deq));
	if (!o->tab || !o->ident || (!y && !o->deq) || (y && !o->tel))
		return -ENOMEM;
	for (int k = 0; k < nin; k++) {
		const struct qact *a = NULL;
		uint8_t idx[256];
		float buf[256];

		for (int s = 0; s < c->nsrc; s++)
			if (c->src_t[s] == ins[k])
				a = &c->src_q[s];
		for (int b = 0; b < 256; b++)
			idx[b] = (uint8_t)b;
		if (!y) { /* the DequantizeLinear kernel's floats */
			o->deq[k] = *a;
			continue;
		}
		mi_dequantize(idx, a->dtype, 256, a->scale, a->zp, buf);
		mi_quantize_f32(buf, 256, y->scale, y->zp, y->dtype, o->tab + (size_t)k * 256);
		o->ident[k] = a->dtype == y->dtype;
		for (int b = 0; b < 256 && o->ident[k]; b++)
			o->ident[k] = o->tab[(size_t)k * 256 + b] == b;
		tel_make(o->tab + (size_t)k * 256, o->tel + (size_t)k * 256);
	}
	if (!y)
		return 0;
	o->s8y = y->dtype == MI_DT_INT8;
	o->aff = malloc(nin * sizeof(*o->aff));
	if (!o->aff)
		return -ENOMEM;
	for (int k = 0; k < nin; k++) {
		const struct qact *a = NULL;

		for (int s = 0; s < c->nsrc; s++)
			if (c->src_t[s] == ins[k])
				a = &c->src_q[s];
		if (!qmv_aff_fit(o->tab + (size_t)k * 256, a, y, &o->aff[k])) {
			free(o->aff);
			o->aff = NULL;
			break;
		}
	}
	return 0;
}

/* Move n's outputs come from at most QMV_MAXSRC sources (its inputs if it
 * writes a sink). */
static bool mv_nsrc_ok(const struct mvctx *c, const struct mi_node *n)
{
	int ids[QMV_MAXSRC], nid = 0, last = -1;

	for (int o = 0; o < n->noutputs; o++) {
		const struct mi_tensor *t = &c->g->tensors[n->outputs[o]];
		const int64_t *org = c->org[n->outputs[o]];

		for (int64_t i = 0, ne = mi_tensor_numel(t); i < ne; i++) {
			int s = (int)(org[i] >> QMV_SHIFT), k;

			if (s == last)
				continue;
			last = s;
			for (k = 0; k < nid && ids[k] != s; k++)
				;
			if (k < nid)
				continue;
			if (nid == QMV_MAXSRC)
				return false;
			ids[nid++] = s;
		}
	}
	return true;
}

/* Runs of consecutive source bytes shorter than QMV_MIN_RUN on average
 * (a Transpose of the last axis: runs of 1): a copy call per few bytes
 * costs more than DQ -> strided fp32 copy -> Q; those stay fp32. */
#define QMV_MIN_RUN 8

static bool mv_short_runs(const int64_t *org, int64_t n)
{
	int64_t runs = 1;

	for (int64_t i = 1; i < n; i++)
		runs += org[i] != org[i - 1] + 1;
	return runs * QMV_MIN_RUN > n;
}

/* A reader that needs no data (the shape only). */
static bool mv_shape_reader(const struct mi_node *n)
{
	return !n->domain[0] && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"));
}

/* ... whose value was computed at plan time. */
static bool mv_shape_only(struct mi_graph *g, struct mi_node *n)
{
	return mv_shape_reader(n) && (mi_out(g, n, 0)->flags & MI_TF_SHAPEVAL) &&
	       mi_out(g, n, 0)->data;
}

/* Live readers of tensor t (their node indices into r, at most max). */
static int mv_readers(struct mi_graph *g, int t, int *r, int max)
{
	int nr = 0;

	for (int i = 0; i < g->nnodes; i++) {
		const struct mi_node *n = &g->nodes[i];
		bool reads = false;

		for (int k = 0; k < n->ninputs && !n->dead; k++)
			reads |= n->inputs[k] == t;
		if (reads && nr < max)
			r[nr] = i;
		nr += reads;
	}
	return nr;
}

/*
 * Move output t's QuantizeLinear qi needs no bytes written: every reader
 * of its output is a DequantizeLinear that mv_through() looked through,
 * read only by moves that run on bytes.  qi and those DQs go into kl.
 */
static bool mv_thru_sink(struct mvctx *c, int t, int qi, const bool *mov, const bool *keep,
			 int *kl, int *nkl)
{
	struct mi_graph *g = c->g;
	struct mi_node *qn = &g->nodes[qi];
	int u = qn->outputs[0], rd[16], nr, n0 = *nkl;
	struct qact qa;

	if (!qp_q_params(g, qn, &qa) || qp_kept(&g->tensors[u]) ||
	    !mv_all_src(c, c->org[t], mi_tensor_numel(&g->tensors[t]), &qa))
		return false;
	nr = mv_readers(g, u, rd, 16);
	if (nr < 1 || nr > 16)
		return false;
	for (int k = 0; k < nr; k++) {
		struct mi_node *d = &g->nodes[rd[k]];
		int rr[16], m, y = d->outputs[0];
		struct qact a;

		if (strcmp(d->op_type, "DequantizeLinear") || d->domain[0] || d->priv ||
		    d->inputs[0] != u || !qp_act_params(g, d, 0, 1, 2, &a) || !qp_same_q(&a, &qa) ||
		    (g->tensors[y].flags & MI_TF_OUTPUT) || c->state[y] <= 0)
			return false;
		m = mv_readers(g, y, rr, 16);
		if (m < 1 || m > 16)
			return false;
		for (int j = 0; j < m; j++)
			if ((!mov[rr[j]] || keep[rr[j]]) && !mv_shape_only(g, &g->nodes[rr[j]]))
				return false;
	}
	kl[(*nkl)++] = qi;
	for (int k = 0; k < nr; k++)
		kl[(*nkl)++] = rd[k];
	(void)n0;
	return true;
}

int qp_plan_moves(struct mi_graph *g)
{
	struct mvctx c = { .g = g };
	int nt = g->ntensors, nn = g->nnodes, err = 0, nmv = 0, *sinkq = NULL;
	bool *keep = NULL, *mov = NULL;
	struct qnode *first = NULL;
	int *dead = NULL, ndead = 0, *thr = NULL, nthr = 0, nf32 = 0, naff = 0;

	c.org = calloc(nt, sizeof(*c.org));
	c.state = calloc(nt, 1);
	sinkq = malloc(nt * sizeof(int));
	keep = calloc(nn, sizeof(bool));
	mov = calloc(nn, sizeof(bool));
	dead = malloc(nn * sizeof(int));
	thr = malloc(nn * 17 * sizeof(int));
	if (!c.org || !c.state || !sinkq || !keep || !mov || !dead || !thr) {
		err = -ENOMEM;
		goto out;
	}
	/* moves whose every output comes from quantized sources */
	for (int p = 0; p < g->norder; p++) {
		struct mi_node *n = &g->nodes[g->order[p]];
		bool ok = mv_op(n);

		for (int o = 0; o < n->noutputs && ok; o++)
			ok = mv_origins(&c, n->outputs[o]) != NULL;
		mov[g->order[p]] = ok && mv_nsrc_ok(&c, n);
	}
	/* sinks: a move's output read by one per-tensor QuantizeLinear only
	 * (bytes), or by fp32 nodes / the graph's outputs (floats: the DQ's
	 * values; sinkq -2); with short runs the move keeps running in fp32,
	 * and so do the moves it reads */
	for (int t = 0; t < nt; t++)
		sinkq[t] = -1;
	for (int p = g->norder - 1; p >= 0; p--) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];

		if (!mov[ni])
			continue;
		for (int o = 0; o < n->noutputs; o++) {
			int t = n->outputs[o], nq = 0, qi = -1, other = 0;
			struct qact y;

			if (g->tensors[t].flags & MI_TF_OUTPUT)
				other++;
			for (int i = 0; i < nn; i++) {
				struct mi_node *r = &g->nodes[i];
				bool reads = false;

				for (int k = 0; k < r->ninputs && !r->dead; k++)
					reads |= r->inputs[k] == t;
				if (!reads || mv_shape_only(g, r))
					continue;
				if (mov[i] && !keep[i])
					continue;
				if (!strcmp(r->op_type, "QuantizeLinear") && !r->domain[0] &&
				    !r->priv && r->inputs[0] == t && qp_q_params(g, r, &y)) {
					nq++;
					qi = i;
				} else {
					other++;
				}
			}
			if ((nq || other) && mv_short_runs(c.org[t], mi_tensor_numel(&g->tensors[t])))
				keep[ni] = true;
			else if (nq == 1 && !other &&
				 mv_thru_sink(&c, t, qi, mov, keep, thr, &nthr))
				continue; /* nobody needs its bytes */
			else if (other || nq > 1)
				sinkq[t] = -2; /* fp32 readers: floats from the sources */
			else if (other || nq > 1)
				keep[ni] = true;
			else if (nq == 1)
				sinkq[t] = qi;
		}
		if (!keep[ni])
			continue;
		for (int k = 0; k < mv_ndata(n); k++) {
			int pr = g->tensors[n->inputs[k]].producer;

			if (pr >= 0 && mov[pr])
				keep[pr] = true;
		}
	}
	/* a kept move's sinks stay fp32 too (the node runs as it is) */
	for (int p = 0; p < g->norder; p++) {
		int ni = g->order[p];
		struct mi_node *n = &g->nodes[ni];

		if (!mov[ni] || !keep[ni])
			continue;
		for (int o = 0; o < n->noutputs; o++)
			sinkq[n->outputs[o]] = -1;
	}
	for (int p = 0; p < g->norder && !err; p++) {
		int ni = g->order[p], ins[QMV_MAXSRC], nin = 0, outs[MI_MAX_DIMS], nout = 0;
		struct mi_node *n = &g->nodes[ni];
		struct qnode *q;
		struct qmove *m;

		if (!mov[ni] || keep[ni])
			continue;
		for (int o = 0; o < n->noutputs; o++)
			if (sinkq[n->outputs[o]] != -1)
				outs[nout++] = o;
		if (!nout) {
			dead[ndead++] = ni;
			continue;
		}
		q = qnode_new(qmv_run);
		m = calloc(1, sizeof(*m));
		if (!q || !m) {
			free(q);
			free(m);
			err = -ENOMEM;
			break;
		}
		q->mv = m;
		m->orig_nin = n->ninputs;
		m->orig_nout = n->noutputs;
		m->orig_in = malloc(n->ninputs * sizeof(int));
		m->orig_out = malloc(n->noutputs * sizeof(int));
		m->killed = malloc(n->noutputs * sizeof(int));
		if (!m->orig_in || !m->orig_out || !m->killed) {
			qnode_free(q);
			err = -ENOMEM;
			break;
		}
		memcpy(m->orig_in, n->inputs, n->ninputs * sizeof(int));
		memcpy(m->orig_out, n->outputs, n->noutputs * sizeof(int));
		m->nout = nout;
		for (int k = 0; k < nout && !err; k++) {
			int t = n->outputs[outs[k]];
			err = qmv_out_build(&c, c.org[t], mi_tensor_numel(&g->tensors[t]), ins, &nin,
					    &m->out[k]);
		}
		for (int k = 0; k < nout && !err; k++) {
			int t = n->outputs[outs[k]];
			struct qact y;

			if (sinkq[t] < 0) {
				err = qmv_tables(&c, ins, nin, NULL, &m->out[k]);
				nf32++;
				continue;
			}
			qp_q_params(g, &g->nodes[sinkq[t]], &y);
			err = qmv_tables(&c, ins, nin, &y, &m->out[k]);
			if (!err)
				err = qmv_planes(&g->tensors[t], &m->out[k]);
			naff += m->out[k].aff != NULL;
		}
		if (!err && nin > n->ninputs) {
			int *ni2 = realloc(n->inputs, nin * sizeof(int));

			if (!ni2)
				err = -ENOMEM;
			else
				n->inputs = ni2;
		}
		if (err) {
			qnode_free(q);
			break;
		}
		/* rewire: inputs the sources, outputs the sinks' bytes */
		memcpy(n->inputs, ins, nin * sizeof(int));
		n->ninputs = nin;
		for (int k = 0; k < nout; k++) {
			int t = m->orig_out[outs[k]], qi = sinkq[t];
			struct mi_node *qn = qi >= 0 ? &g->nodes[qi] : NULL;

			n->outputs[k] = t;
			if (!qn)
				continue;
			n->outputs[k] = qn->outputs[0];
			g->tensors[qn->outputs[0]].producer = ni;
			qn->dead = true;
			m->killed[m->nkilled++] = qi;
		}
		n->noutputs = nout;
		n->priv = q;
		if (!first)
			first = q;
		nmv++;
	}
	/* the moves that only fed others, and the Q -> DQ pairs between moves
	 * that nobody needs: dead, revived with the first */
	if (!err && first && ndead + nthr) {
		int *k = realloc(first->mv->killed,
				 (first->mv->nkilled + ndead + nthr) * sizeof(int));

		if (!k) {
			err = -ENOMEM;
		} else {
			first->mv->killed = k;
			for (int i = 0; i < ndead + nthr; i++) {
				int x = i < ndead ? dead[i] : thr[i - ndead];

				if (g->nodes[x].dead)
					continue;
				g->nodes[x].dead = true;
				k[first->mv->nkilled++] = x;
			}
		}
	}
	/* Shape readers of tensors no longer written: their values were
	 * computed at plan time; dead, their outputs constants meanwhile */
	for (int i = 0; i < nn && !err && first; i++) {
		struct mi_node *r = &g->nodes[i];
		int t = r->ninputs ? r->inputs[0] : -1, pr;
		bool made = false;

		if (r->dead || !mv_shape_reader(r) || t < 0)
			continue;
		pr = g->tensors[t].producer;
		for (int o = 0; pr >= 0 && !g->nodes[pr].dead && o < g->nodes[pr].noutputs; o++)
			made |= g->nodes[pr].outputs[o] == t;
		if (made || pr < 0)
			continue;
		int *k = realloc(first->mv->killed, (first->mv->nkilled + 1) * sizeof(int));
		int *cs = realloc(first->mv->consts, (first->mv->nconsts + 1) * sizeof(int));

		if (k)
			first->mv->killed = k;
		if (cs)
			first->mv->consts = cs;
		if (!k || !cs) {
			err = -ENOMEM;
			break;
		}
		r->dead = true;
		k[first->mv->nkilled++] = i;
		if (!(mi_out(g, r, 0)->flags & MI_TF_CONST)) {
			mi_out(g, r, 0)->flags |= MI_TF_CONST;
			cs[first->mv->nconsts++] = r->outputs[0];
		}
	}
	if (nmv && mi_debug("quant"))
		fprintf(stderr, "metainfer: int8: %d moves on bytes (%d absorbed, %d Q/DQ between them, %d fp32 outputs)\n",
			nmv, first ? ndead : 0, first ? nthr : 0, nf32);
	if (nmv && mi_debug("quant"))
		fprintf(stderr, "metainfer: int8: %d move outputs requantized in fixed point\n", naff);
	if (!err)
		err = nmv;
out:
	for (int t = 0; t < nt && c.org; t++)
		free(c.org[t]);
	free(c.org);
	free(c.src_t);
	free(c.src_q);
	free(c.state);
	free(sinkq);
	free(keep);
	free(mov);
	free(dead);
	free(thr);
	return err;
}
