// SPDX-License-Identifier: MIT
/*
 * Planner step for int8 execution: Sigmoid / SiLU / HardSwish on a
 * quantized tensor as a 256-entry table, and the SE scaling (Mul) on a
 * table's output.
 */
#include "quant/qplan-impl.h"

/* ---- Sigmoid / SiLU on a quantized tensor --------------------------------- */

/*
 * DQ(xq) -> Sigmoid | HardSigmoid [-> Mul(DQ(xq), .)] (SiLU), HardSwish:
 * the input has 256 possible
 * values, so the node becomes a table lookup indexed by the quantized
 * byte.  The entries are the float operations of the unfused ops (the
 * DequantizeLinear kernel's (q - zp) * scale, 1 / (1 + exp(-x)) or
 * clamp(alpha * x + beta, 0, 1), x * s),
 * so the outputs do not change; exp runs 256 times per plan instead of
 * once per element.
 */
__attribute__((target("avx512f"))) static int64_t
lut_avx512(const uint8_t *x, const float *lut, int64_t n, float *y)
{
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512i k = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x + i)));

		_mm512_storeu_ps(y + i, _mm512_i32gather_ps(k, lut, 4));
	}
	return i;
}

/* The same with AVX2 gathers (~1.5x the scalar loop's rate on Zen 3). */
__attribute__((target("avx2"))) static int64_t
lut_avx2(const uint8_t *x, const float *lut, int64_t n, float *y)
{
	int64_t i = 0;

	for (; i + 16 <= n; i += 16) {
		_mm256_storeu_ps(y + i, lut8x_avx2(lut, x + i));
		_mm256_storeu_ps(y + i + 8, lut8x_avx2(lut, x + i + 8));
	}
	return i;
}

/* byte -> byte table: two 128-entry vpermi2b lookups, picked by bit 7 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
lut8_vbmi(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y)
{
	__m512i t0 = _mm512_loadu_si512(lut), t1 = _mm512_loadu_si512(lut + 64);
	__m512i t2 = _mm512_loadu_si512(lut + 128), t3 = _mm512_loadu_si512(lut + 192);
	int64_t i = 0;

	for (; i < n; i += 64) {
		__mmask64 m = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
		__m512i k = _mm512_maskz_loadu_epi8(m, x + i);
		__m512i lo = _mm512_permutex2var_epi8(t0, k, t1);
		__m512i hi = _mm512_permutex2var_epi8(t2, k, t3);

		_mm512_mask_storeu_epi8(y + i, m,
					_mm512_mask_blend_epi8(_mm512_movepi8_mask(k), lo, hi));
	}
	return i;
}

/*
 * The same on AVX2: each 16-entry slice of the table broadcast to both
 * lanes, looked up by the low nibble (vpshufb) and kept where the high
 * nibble is the slice's (vpcmpeqb + vpblendvb): 32 bytes per step,
 * ~2.5x the scalar loop on Zen 3.  Returns the bytes done (a multiple
 * of 32).
 */
/*
 * The same with a telescoping XOR instead of the compares and blends:
 * d[j] = slice j ^ slice j - 1 within each half (d[0], d[8]: slices 0
 * and 8).  For a byte x < 128 with high nibble h, a_j = x - 16j (wrapping)
 * lies in [0, 128) for j <= h, with x's low nibble, and in [144, 255] for
 * h < j <= 7, where vpshufb gives 0: XOR over j < 8 of vpshufb(d[j], a_j)
 * is d[0] ^ .. ^ d[h] = slice h at the low nibble.  The upper half does
 * the same on x ^ 0x80, and x's bit 7 picks the half (one vpblendvb).
 * 16 vpshufb, 14 vpsubb, 15 vpxor and a vpblendvb per 32 bytes, the
 * two halves independent chains; the same bytes as lut8_avx2.
 */

__attribute__((target("avx2"))) static int64_t
lut8x_tel_avx2(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y)
{
	__m256i d[16];
	int64_t i = 0;

	for (int c = 0; c < 16; c++) {
		__m128i t = _mm_loadu_si128((const __m128i *)(lut + 16 * c));

		if (c % 8)
			t = _mm_xor_si128(t, _mm_loadu_si128(
						     (const __m128i *)(lut + 16 * (c - 1))));
		d[c] = _mm256_broadcastsi128_si256(t);
	}
	for (; i + 32 <= n; i += 32)
		_mm256_storeu_si256((__m256i *)(y + i),
				    tel32_avx2(d, _mm256_loadu_si256((const __m256i *)(x + i))));
	return i;
}

__attribute__((target("avx2"))) static int64_t
lut8_avx2(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y)
{
	return lut8x_tel_avx2(x, lut, n, y);
}

bool qp_have_vbmi(void)
{
	static int v = -1;

	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx512vbmi");
	}
	return v;
}

/* y[i] = lut[x[i]] for i < n, on the best path of this CPU. */
void qp_lut8_any(const uint8_t *x, const uint8_t *lut, int64_t n, uint8_t *y)
{
	int64_t i = 0;

	if (mi_quant_isa() == MI_QISA_AVX512 && qp_have_vbmi())
		i = lut8_vbmi(x, lut, n, y);
	else if (mi_quant_isa() == MI_QISA_AVX2)
		i = lut8_avx2(x, lut, n, y);
	for (; i < n; i++)
		y[i] = lut[x[i]];
}

/* The 256-entry float table as four byte planes: plane k holds byte k of
 * every entry, looked up with vpermi2b (lut32_vbmi). NULL: no memory. */
static uint8_t *lut_planes(const float *lut)
{
	uint8_t *p = aligned_alloc(64, 1024);

	if (p)
		for (int b = 0; b < 256; b++)
			for (int k = 0; k < 4; k++)
				p[k * 256 + b] = ((const uint8_t *)&lut[b])[k];
	return p;
}

/* y[0..n) = lut[x[0..n)] from the table's byte planes: 64 bytes per
 * lut32_vbmi, the last partial step under masks (no gathers) */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
lut_f32_vbmi(const uint8_t *planes, const uint8_t *x, int64_t n, float *y)
{
	__m512i t[16];

	lut32_load(planes, t);
	for (int64_t i = 0; i < n; i += 64) {
		int64_t r = n - i;
		__mmask64 m = r >= 64 ? ~0ull : (1ull << r) - 1;
		__m512 v[4];

		lut32_vbmi(t, _mm512_maskz_loadu_epi8(m, x + i), v);
		if (r >= 64) {
			_mm512_storeu_ps(y + i, v[0]);
			_mm512_storeu_ps(y + i + 16, v[1]);
			_mm512_storeu_ps(y + i + 32, v[2]);
			_mm512_storeu_ps(y + i + 48, v[3]);
			continue;
		}
		for (int k = 0; k < 4 && r > 16 * k; k++) {
			int64_t c = r - 16 * k;

			_mm512_mask_storeu_ps(y + i + 16 * k,
					      c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << c) - 1),
					      v[k]);
		}
	}
}

/* y[0..n) = lut[x[0..n)]: the vbmi lookups where the node has byte planes,
 * else gathers / scalar (the same values) */
void qp_lut_f32(const struct qnode *q, const uint8_t *x, int64_t n, float *y)
{
	int64_t i = 0;

	if (mi_quant_isa() == MI_QISA_AVX512) {
		if (q->lutb && qp_have_vbmi()) {
			lut_f32_vbmi(q->lutb, x, n, y);
			return;
		}
		i = lut_avx512(x, q->lut, n, y);
	} else if (mi_quant_isa() == MI_QISA_AVX2) {
		i = lut_avx2(x, q->lut, n, y);
	}
	for (; i < n; i++)
		y[i] = q->lut[x[i]];
}

static void qlut_range(void *arg, int64_t b, int64_t e)
{
	const struct qlut_job *j = arg;
	const struct qnode *q = j->q;
	const uint8_t *x = j->x + b;
	int64_t cnt = e - b;

	if (q->lut8) {
		uint8_t *y8 = (uint8_t *)j->y + b;

		qp_lut8_any(x, q->lut8, cnt, y8);
		return;
	}
	qp_lut_f32(q, x, cnt, (float *)j->y + b);
}

int qlut_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	struct qlut_job j = { q, mi_in(g, n, 0)->data, mi_out(g, n, 0)->data };

	if (qdq_layout_run(q, j.x, j.y)) /* C4 input / blocked output */
		return 0;
	qp_par_rows(q->nthreads, mi_tensor_numel(mi_out(g, n, 0)), qp_px_row(mi_out(g, n, 0), q->px_c4),
		 q->lut8 ? 32 << 10 : 8 << 10, qlut_range, &j);
	return 0;
}

int try_qlut(struct mi_graph *g, struct mi_node *n)
{
	struct mi_node *dx, *mul = NULL;
	struct qact a;
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_out(g, n, 0);
	struct qnode *q;
	int mi;

	bool hsig = !strcmp(n->op_type, "HardSigmoid");
	bool hswish = !strcmp(n->op_type, "HardSwish");
	float alpha = hsig ? mi_attr_float(n, "alpha", 0.2f) : 0;
	float beta = hsig ? mi_attr_float(n, "beta", 0.5f) : 0;

	if ((!hsig && !hswish && strcmp(n->op_type, "Sigmoid")) || n->domain[0] || n->ninputs != 1 ||
	    n->noutputs != 1)
		return 0;
	dx = qp_producer(g, n->inputs[0], "DequantizeLinear");
	if (!dx || !qp_act_params(g, dx, 0, 1, 2, &a) || !x || !y || x->dtype != MI_DT_FLOAT ||
	    y->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(y) ||
	    mi_tensor_numel(mi_in(g, dx, 0)) != mi_tensor_numel(y))
		return qp_skip(n, "input is not a per-tensor uint8/int8 DequantizeLinear");
	/* SiLU: the Sigmoid's only reader is Mul(DQ output, Sigmoid output) */
	mi = hswish ? -1 : mi_graph_sole_consumer(g, n->outputs[0]);
	if (mi >= 0) {
		struct mi_node *m = &g->nodes[mi];
		struct mi_tensor *my = m->noutputs == 1 ? mi_out(g, m, 0) : NULL;

		if (!strcmp(m->op_type, "Mul") && !m->domain[0] && !m->dead && !m->priv &&
		    m->ninputs == 2 && my && my->dtype == MI_DT_FLOAT &&
		    mi_tensor_shape_known(my) && mi_tensor_numel(my) == mi_tensor_numel(y) &&
		    ((m->inputs[0] == n->outputs[0] && m->inputs[1] == dx->outputs[0]) ||
		     (m->inputs[1] == n->outputs[0] && m->inputs[0] == dx->outputs[0])))
			mul = m;
	}
	q = qnode_new(qlut_run);
	if (!q)
		return -ENOMEM;
	q->lut = malloc(256 * sizeof(float));
	if (!q->lut) {
		qnode_free(q);
		return -ENOMEM;
	}
	for (int i = 0; i < 256; i++) {
		int v = a.dtype == MI_DT_INT8 ? (int8_t)i : i;
		float d = (float)(v - a.zp) * a.scale;
		float sg;

		if (hswish) {
			float hv = d * (1.0f / 6) + 0.5f;

			sg = d * (hv < 0 ? 0 : hv > 1 ? 1 : hv);
		} else if (hsig) {
			float hv = alpha * d + beta;

			sg = hv < 0 ? 0 : hv > 1 ? 1 : hv;
		} else {
			sg = 1.0f / (1.0f + expf(-d));
		}

		q->lut[i] = mul ? d * sg : sg;
	}
	/* a QuantizeLinear as the result's only reader: quantize the 256
	 * entries instead of every element (same kernel, same bytes) */
	int yt = mul ? mul->outputs[0] : n->outputs[0];
	int qi = (g->tensors[yt].flags & MI_TF_OUTPUT) ? -1 : mi_graph_sole_consumer(g, yt);
	struct mi_node *qn = qi >= 0 ? &g->nodes[qi] : NULL;
	struct qact qa;

	if (qn && !strcmp(qn->op_type, "QuantizeLinear") && !qn->domain[0] && !qn->dead &&
	    !qn->priv && qn->ninputs >= 2 && qn->inputs[0] == yt && qn->noutputs == 1 &&
	    qp_q_params(g, qn, &qa) && mi_tensor_shape_known(mi_out(g, qn, 0)) &&
	    mi_tensor_numel(mi_out(g, qn, 0)) == mi_tensor_numel(y)) {
		q->lut8 = malloc(256);
		if (!q->lut8) {
			qnode_free(q);
			return -ENOMEM;
		}
		mi_quantize_f32(q->lut, 256, qa.scale, qa.zp, qa.dtype, q->lut8);
	} else {
		qn = NULL;
		q->lutb = lut_planes(q->lut); /* float output: vpermi2b lookups */
		if (!q->lutb) {
			qnode_free(q);
			return -ENOMEM;
		}
		q->qdq = a; /* float output: a DequantizeLinear's layouts */
		q->qdq_deq = true;
		qdq_dims(q, y);
	}
	n->priv = q;
	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = -1;
	q->orig_out0 = n->outputs[0];
	n->inputs[0] = a.t;
	if (mul) {
		qp_kill(g, q, mul);
		n->outputs[0] = mul->outputs[0];
		g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
	}
	if (qn) {
		qp_kill(g, q, qn);
		n->outputs[0] = qn->outputs[0];
		g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
	}
	return 0;
}

/* ---- SE scaling on a table's output ------------------------------------------ */

/*
 * Mul(T(xq), s) -> QuantizeLinear, T a fp32 table node (SiLU / HardSwish
 * on a quantized input), s one value per channel ([N, C, 1, 1], the SE
 * gate): y = Q(T[xq] * s[c]). Per channel the 256 possible products are
 * quantized once (the same float multiply and Q kernel as the unfused ops)
 * and looked up; small planes compute the products directly. T's own
 * output stays (the SE squeeze reads it).
 */
struct qse_job {
	const struct qnode *q;
	const uint8_t *x;
	const float *s;
	uint8_t *y;
	int nc, np; /* items: np pixel ranges (part-major) x nc channels / quads */
};

/* Item i's channel (or quad) and pixel range [*p0, *p1): ranges of whole
 * 64-pixel blocks, part-major so that a thread's block of items is one
 * pixel range of every channel (see qp_par_rows). */
static int qse_range(const struct qse_job *j, int i, int64_t *p0, int64_t *p1)
{
	int64_t hw = j->q->se_hw, p = i / j->nc;

	*p0 = p ? (hw * p / j->np + 32) & ~(int64_t)63 : 0;
	*p1 = p + 1 < j->np ? (hw * (p + 1) / j->np + 32) & ~(int64_t)63 : hw;
	return i % j->nc;
}

/*
 * y[i] = Q(lut[x[i]] * sv) for i < n, 16 pixels per step: the table
 * gathered, then the same float multiply, division, round-to-nearest-even
 * and clamp as the scalar product loop and mi_quantize_f32 (bit-identical
 * to them). Replaces a scalar product loop plus a quantize call per 64
 * pixels on the small planes of the SE path.
 */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
qse_direct_avx512(const float *lut, const uint8_t *x, int64_t n, float sv,
		  const struct qact *qy, uint8_t *y)
{
	bool u8 = qy->dtype == MI_DT_UINT8;
	__m512 m = _mm512_set1_ps(sv), sc = _mm512_set1_ps(qy->scale);
	__m512 z = _mm512_set1_ps((float)qy->zp);
	__m512 lo = _mm512_set1_ps(u8 ? 0.0f : -128.0f), hi = _mm512_set1_ps(u8 ? 255.0f : 127.0f);

	for (int64_t i = 0; i < n; i += 16) {
		__mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512i idx = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, x + i));
		__m512 v = _mm512_mul_ps(_mm512_i32gather_ps(idx, lut, 4), m);

		v = _mm512_div_ps(v, sc);
		v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		v = _mm512_add_ps(v, z);
		v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
		_mm_mask_storeu_epi8(y + i, k, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
	}
}

/* the same, the table looked up from its byte planes (no gathers), 64
 * pixels per step */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
qse_direct_vbmi(const uint8_t *planes, const uint8_t *x, int64_t n, float sv,
		const struct qact *qy, uint8_t *y)
{
	bool u8 = qy->dtype == MI_DT_UINT8;
	__m512 m = _mm512_set1_ps(sv), sc = _mm512_set1_ps(qy->scale);
	__m512 z = _mm512_set1_ps((float)qy->zp);
	__m512 lo = _mm512_set1_ps(u8 ? 0.0f : -128.0f), hi = _mm512_set1_ps(u8 ? 255.0f : 127.0f);
	__m512 rc = _mm512_set1_ps(1.0f / qy->scale);
	bool mul = mi_rcp_ok(qy->scale);
	__m512i t[16];

	lut32_load(planes, t);
	for (int64_t i = 0; i < n; i += 64) {
		__mmask64 k = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
		__m512 v[4];
		__m128i b[4];

		lut32_vbmi(t, _mm512_maskz_loadu_epi8(k, x + i), v);
		for (int c = 0; c < 4; c++) {
			__m512 w = _mm512_mul_ps(v[c], m);

			if (mul)
				w = mi_rne_div_avx512(w, sc, rc);
			else
				w = _mm512_roundscale_ps(_mm512_div_ps(w, sc),
							 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
			w = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(w, z), lo), hi);
			b[c] = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(w));
		}
		__m512i r = _mm512_inserti32x4(_mm512_castsi128_si512(b[0]), b[1], 1);

		r = _mm512_inserti32x4(_mm512_inserti32x4(r, b[2], 2), b[3], 3);
		_mm512_mask_storeu_epi8(y + i, k, r);
	}
}

/* Q(v[0..3] * sv) as 64 bytes in lane_perm order (what the 32 -> 16 -> 8
 * bit packs give): ready for qse_quad_vbmi's interleave */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512i
qse_q64(const __m512 v[4], float sv, const struct qact *qy, bool mul)
{
	bool u8 = qy->dtype == MI_DT_UINT8;
	__m512 sc = _mm512_set1_ps(qy->scale), rc = _mm512_set1_ps(1.0f / qy->scale);
	__m512 z = _mm512_set1_ps((float)qy->zp), m = _mm512_set1_ps(sv);
	__m512 lo = _mm512_set1_ps(u8 ? 0.0f : -128.0f), hi = _mm512_set1_ps(u8 ? 255.0f : 127.0f);
	__m512i b[4];

#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m512 w = _mm512_mul_ps(v[c], m);

		if (mul)
			w = mi_rne_div_avx512(w, sc, rc);
		else
			w = _mm512_roundscale_ps(_mm512_div_ps(w, sc),
						 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		w = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(w, z), lo), hi);
		b[c] = _mm512_cvttps_epi32(w);
	}
	__m512i w01 = _mm512_packs_epi32(b[0], b[1]), w23 = _mm512_packs_epi32(b[2], b[3]);

	return u8 ? _mm512_packus_epi16(w01, w23) : _mm512_packs_epi16(w01, w23);
}

/* n <= 64 pixels of four channels (each 64 bytes in lane_perm order)
 * interleaved into C4 bytes at dst */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline void
qse_c4_store(const __m512i part[4], int64_t n, uint8_t *dst)
{
	__m512i w0 = _mm512_unpacklo_epi8(part[0], part[1]);
	__m512i w1 = _mm512_unpackhi_epi8(part[0], part[1]);
	__m512i w2 = _mm512_unpacklo_epi8(part[2], part[3]);
	__m512i w3 = _mm512_unpackhi_epi8(part[2], part[3]);
	__m512i o[4] = { _mm512_unpacklo_epi16(w0, w2), _mm512_unpackhi_epi16(w0, w2),
			 _mm512_unpacklo_epi16(w1, w3), _mm512_unpackhi_epi16(w1, w3) };

#pragma GCC unroll 4
	for (int j = 0; j < 4; j++) {
		int64_t nb = 4 * n - 64 * j;

		if (nb >= 64)
			_mm512_storeu_si512(dst + 64 * j, o[j]);
		else if (nb > 0)
			_mm512_mask_storeu_epi8(dst + 64 * j, (1ull << nb) - 1, o[j]);
	}
}

/*
 * C4 output of four channels (planar input x, channel stride hw) straight
 * from registers: per 64 pixels each channel looked up and quantized (its
 * bytes in lane_perm order), then interleaved into 4 x 64 bytes.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
qse_quad_vbmi(const uint8_t *planes, const uint8_t *x, int64_t hw, int64_t pa, int64_t pb,
	      const float *sv, const struct qact *qy, uint8_t *y)
{
	bool mul = mi_rcp_ok(qy->scale);
	__m512i t[16];

	lut32_load(planes, t);
	for (int64_t p0 = pa; p0 < pb; p0 += 64) {
		int64_t n = pb - p0 < 64 ? pb - p0 : 64;
		__mmask64 k = n == 64 ? ~0ull : (1ull << n) - 1;
		__m512i part[4];
		__m512 v[4];

#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			lut32_vbmi(t, _mm512_maskz_loadu_epi8(k, x + c * hw + p0), v);
			part[c] = qse_q64(v, sv[c], qy, mul);
		}
		qse_c4_store(part, n, y + p0 * 4);
	}
}

/*
 * The same through per-channel byte tables (planes of 128+ pixels): each
 * channel's 256 products quantized once (qse_q64 on the table itself, put
 * back in order: lane_perm is its own inverse) into four registers, then
 * per 64 pixels two vpermi2b and a blend per channel, the indices taken in
 * lane_perm order so that the interleave writes pixels in order.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void
qse_quad_tab_vbmi(const float *lut, const uint8_t *x, int64_t hw, int64_t pa, int64_t pb,
		  const float *sv, const struct qact *qy, uint8_t *y)
{
	bool mul = mi_rcp_ok(qy->scale);
	__m512i perm = lane_perm(), tab[4][4];

#pragma GCC unroll 4
	for (int c = 0; c < 4; c++)
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			__m512 v[4] = { _mm512_loadu_ps(lut + 64 * k), _mm512_loadu_ps(lut + 64 * k + 16),
					_mm512_loadu_ps(lut + 64 * k + 32),
					_mm512_loadu_ps(lut + 64 * k + 48) };

			tab[c][k] = _mm512_permutexvar_epi8(perm, qse_q64(v, sv[c], qy, mul));
		}
	for (int64_t p0 = pa; p0 < pb; p0 += 64) {
		int64_t n = pb - p0 < 64 ? pb - p0 : 64;
		__mmask64 k = n == 64 ? ~0ull : (1ull << n) - 1;
		__m512i part[4];

#pragma GCC unroll 4
		for (int c = 0; c < 4; c++) {
			__m512i i = _mm512_permutexvar_epi8(perm,
							    _mm512_maskz_loadu_epi8(k, x + c * hw + p0));

			part[c] = _mm512_mask_blend_epi8(
				_mm512_movepi8_mask(i), _mm512_permutex2var_epi8(tab[c][0], i, tab[c][1]),
				_mm512_permutex2var_epi8(tab[c][2], i, tab[c][3]));
		}
		qse_c4_store(part, n, y + p0 * 4);
	}
}

/*
 * tab[b] = Q(lut[b] * sv) for the 256 bytes: the products by vmulps, then
 * mi_quantize_f32; the same floats as the scalar loop, which gcc leaves
 * scalar here (~6 cycles a product on Zen 3 in qse_item_c4, subnormal
 * products of SiLU's far negative entries slowing it further).
 */
__attribute__((target("avx2"))) static void
qse_tab_avx2(const float *lut, float sv, const struct qact *qy, uint8_t *tab)
{
	float v[256] __attribute__((aligned(32)));
	__m256 m = _mm256_set1_ps(sv);

	for (int b = 0; b < 256; b += 8)
		_mm256_store_ps(v + b, _mm256_mul_ps(_mm256_loadu_ps(lut + b), m));
	mi_quantize_f32(v, 256, qy->scale, qy->zp, qy->dtype, tab);
}

/*
 * v[k] = lut[x[k]] * sv for k < n: the entries copied, then multiplied
 * by vmulps (the same floats as the scalar mulss loop, several times
 * faster on Zen 3, more so on subnormal products).
 */
__attribute__((target("avx2"))) static void
qse_prod_avx2(const float *lut, const uint8_t *x, int64_t n, float sv, float *v)
{
	__m256 m = _mm256_set1_ps(sv);
	int64_t k = 0;

	for (int64_t i = 0; i < n; i++)
		v[i] = lut[x[i]];
	for (; k + 8 <= n; k += 8)
		_mm256_storeu_ps(v + k, _mm256_mul_ps(_mm256_loadu_ps(v + k), m));
	if (k < n) {
		__m256i msk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - k)),
						 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));

		_mm256_maskstore_ps(v + k, msk, _mm256_mul_ps(_mm256_maskload_ps(v + k, msk), m));
	}
}

/*
 * y[i] = Q(lut[x[i]] * m[i % 8]) for i < n (a multiple of 8) on AVX2,
 * 8 pixels per step in registers: the entries looked up by lut8x_avx2,
 * the product by vmulps, then quant_avx2's operations (division, round to
 * nearest even, + zp, clamps, truncation, packs), so the bytes are those
 * of qse_prod_avx2 + mi_quantize_f32, without the float buffer between
 * them, whose scalar stores and vector reloads stalled on store
 * forwarding.  (A multiply by the reciprocal with a division only near
 * ties, as mi_rne_div_avx512, measured ~4% slower here on Zen 3: the
 * division is not the bottleneck.)
 */
__attribute__((target("avx2"), always_inline)) static inline void
qse_direct8_avx2(const float *lut, const uint8_t *x, int64_t n, __m256 m,
		 const struct qact *qy, uint8_t *y)
{
	bool u8 = qy->dtype == MI_DT_UINT8;
	__m256 sc = _mm256_set1_ps(qy->scale), z = _mm256_set1_ps((float)qy->zp);
	__m256 lo = _mm256_set1_ps(u8 ? 0.0f : -128.0f);
	__m256 hi = _mm256_set1_ps(u8 ? 255.0f : 127.0f);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 p = _mm256_mul_ps(lut8x_avx2(lut, x + i), m);
		__m256 r = _mm256_round_ps(_mm256_div_ps(p, sc),
					   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);

		r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, z), lo), hi);
		__m256i q = _mm256_cvttps_epi32(r);
		__m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q),
					    _mm256_extracti128_si256(q, 1));

		_mm_storel_epi64((__m128i *)(y + i),
				 u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w));
	}
}

/* the same for one channel (any n: the tail by the old pair) */
__attribute__((target("avx2"))) static void
qse_direct_avx2(const float *lut, const uint8_t *x, int64_t n, float sv,
		const struct qact *qy, uint8_t *y)
{
	int64_t i = n & ~(int64_t)7;

	qse_direct8_avx2(lut, x, i, _mm256_set1_ps(sv), qy, y);
	if (i < n) {
		float v[8];

		for (int64_t k = i; k < n; k++)
			v[k - i] = lut[x[k]] * sv;
		mi_quantize_f32(v, n - i, qy->scale, qy->zp, qy->dtype, y + i);
	}
}

/*
 * A C4 quad in and out (n >= 2 pixels of [n][4] bytes): its bytes are
 * one array whose multipliers repeat every 4 (s[0..3] twice per vector),
 * so qse_direct8_avx2 runs over it as it is, with no taking apart into
 * planes and no interleave; the last vector moves back onto the one
 * before it (the same bytes written twice).  Per byte the same product
 * and quantization as the planes' path.
 */
__attribute__((target("avx2"))) static void
qse_quad_direct_avx2(const float *lut, const uint8_t *x, int64_t n, const float *sv,
		     const struct qact *qy, uint8_t *y)
{
	__m256 m = _mm256_setr_ps(sv[0], sv[1], sv[2], sv[3], sv[0], sv[1], sv[2], sv[3]);
	int64_t nb = 4 * n, i = nb & ~(int64_t)7;

	qse_direct8_avx2(lut, x, i, m, qy, y);
	if (i < nb)
		qse_direct8_avx2(lut, x + nb - 8, 8, m, qy, y + nb - 8);
}

static void qse_item(void *arg, int item, int tid)
{
	const struct qse_job *j = arg;
	const struct qnode *q = j->q;
	int64_t pa, pb, hw;
	int c = qse_range(j, item, &pa, &pb);
	const uint8_t *x = j->x + (size_t)c * q->se_hw + pa;
	uint8_t *y = j->y + (size_t)c * q->se_hw + pa;
	float sv = j->s[c], v[256];

	hw = pb - pa;
	if (q->se_hw >= 256) { /* the whole plane's choice: the same bytes */
		uint8_t tab[256];

		if (mi_quant_isa() == MI_QISA_AVX2) {
			qse_tab_avx2(q->lut, sv, &q->se_y, tab);
		} else {
			for (int b = 0; b < 256; b++)
				v[b] = q->lut[b] * sv;
			mi_quantize_f32(v, 256, q->se_y.scale, q->se_y.zp, q->se_y.dtype, tab);
		}
		qp_lut8_any(x, tab, hw, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX512 && qp_have_vbmi()) {
		qse_direct_vbmi(q->lutb, x, hw, sv, &q->se_y, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX512) {
		qse_direct_avx512(q->lut, x, hw, sv, &q->se_y, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX2) {
		qse_direct_avx2(q->lut, x, hw, sv, &q->se_y, y);
		return;
	}
	for (int64_t i = 0; i < hw; i += 256) {
		int64_t n = hw - i < 256 ? hw - i : 256;

		if (mi_quant_isa() == MI_QISA_AVX2)
			qse_prod_avx2(q->lut, x + i, n, sv, v);
		else
			for (int64_t k = 0; k < n; k++)
				v[k] = q->lut[x[i + k]] * sv;
		mi_quantize_f32(v, n, q->se_y.scale, q->se_y.zp, q->se_y.dtype, y + i);
	}
}

/* n <= 64 outputs of channel c from pixel p0 (tab: its table or NULL) */
static void qse_part(const struct qnode *q, const uint8_t *x, float sv, const uint8_t *tab,
		     int n, uint8_t *y)
{
	int i = 0;

	if (tab) {
		if (mi_quant_isa() == MI_QISA_AVX512 && qp_have_vbmi())
			i = (int)lut8_vbmi(x, tab, n, y);
		else if (mi_quant_isa() == MI_QISA_AVX2)
			i = (int)lut8_avx2(x, tab, n, y);
		for (; i < n; i++)
			y[i] = tab[x[i]];
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX512 && qp_have_vbmi()) {
		qse_direct_vbmi(q->lutb, x, n, sv, &q->se_y, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX512) {
		qse_direct_avx512(q->lut, x, n, sv, &q->se_y, y);
		return;
	}
	if (mi_quant_isa() == MI_QISA_AVX2) {
		qse_direct_avx2(q->lut, x, n, sv, &q->se_y, y);
		return;
	}
	float v[64];

	if (mi_quant_isa() == MI_QISA_AVX2)
		qse_prod_avx2(q->lut, x, n, sv, v);
	else
		for (int k = 0; k < n; k++)
			v[k] = q->lut[x[k]] * sv;
	mi_quantize_f32(v, n, q->se_y.scale, q->se_y.zp, q->se_y.dtype, y);
}

/* n pixels of a C4 quad ([n][4] bytes at src) apart into 4 rows of ds
 * bytes' stride at d; AVX2: 8 pixels a step (vpshufb, vpermd) */
__attribute__((target("avx2"))) static int64_t c4_apart_avx2(const uint8_t *src, int64_t n,
							     uint8_t *d, int64_t ds)
{
	const __m256i sh = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
					    0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	const __m256i pm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(src + 4 * i));

		v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, sh), pm);
		_mm_storel_epi64((__m128i *)(d + i), _mm256_castsi256_si128(v));
		_mm_storeh_pd((double *)(d + ds + i), _mm_castsi128_pd(_mm256_castsi256_si128(v)));
		_mm_storel_epi64((__m128i *)(d + 2 * ds + i), _mm256_extracti128_si256(v, 1));
		_mm_storeh_pd((double *)(d + 3 * ds + i),
			      _mm_castsi128_pd(_mm256_extracti128_si256(v, 1)));
	}
	return i;
}

void qp_c4_apart(const uint8_t *src, int64_t n, uint8_t *d, int64_t ds)
{
	int64_t i = mi_quant_isa() >= MI_QISA_AVX2 ? c4_apart_avx2(src, n, d, ds) : 0;

	for (; i < n; i++)
		for (int k = 0; k < 4; k++)
			d[k * ds + i] = src[4 * i + k];
}

/* C4 output: channels 4c4..4c4+3 interleaved ([C/4][H*W][4] per image) */
static void qse_item_c4(void *arg, int item, int tid)
{
	const struct qse_job *j = arg;
	const struct qnode *q = j->q;
	int64_t hw = q->se_hw, pa, pb;
	int c4 = qse_range(j, item, &pa, &pb);
	uint8_t tabs[4][256], part[4][64] __attribute__((aligned(16))), out[64 * 4], xin[4][64];
	bool use_tab = hw >= 256;
	bool vtab = use_tab && mi_quant_isa() == MI_QISA_AVX2;

	if (mi_quant_isa() == MI_QISA_AVX512 && qp_have_vbmi()) {
		if (hw >= 128)
			qse_quad_tab_vbmi(q->lut, j->x + (size_t)4 * c4 * hw, hw, pa, pb,
					  j->s + 4 * c4, &q->se_y, j->y + (size_t)c4 * hw * 4);
		else
			qse_quad_vbmi(q->lutb, j->x + (size_t)4 * c4 * hw, hw, pa, pb, j->s + 4 * c4,
				      &q->se_y, j->y + (size_t)c4 * hw * 4);
		return;
	}

	if (!use_tab && q->se_in_c4 && pb - pa >= 2 && mi_quant_isa() == MI_QISA_AVX2) {
		size_t o = ((size_t)c4 * hw + pa) * 4;

		qse_quad_direct_avx2(q->lut, j->x + o, pb - pa, j->s + 4 * c4, &q->se_y,
				     j->y + o);
		return;
	}
	for (int k = 0; k < 4 && use_tab; k++) {
		float v[256], sv = j->s[4 * c4 + k];

		if (vtab) {
			qse_tab_avx2(q->lut, sv, &q->se_y, tabs[k]);
			continue;
		}

		for (int b = 0; b < 256; b++)
			v[b] = q->lut[b] * sv;
		mi_quantize_f32(v, 256, q->se_y.scale, q->se_y.zp, q->se_y.dtype, tabs[k]);
	}
	for (int64_t p0 = pa; p0 < pb; p0 += 64) {
		int n = pb - p0 < 64 ? (int)(pb - p0) : 64;
		uint8_t *dst = j->y + ((size_t)c4 * hw + p0) * 4;

		if (q->se_in_c4) /* C4 input: the quad's 4 channels apart */
			qp_c4_apart(j->x + ((size_t)c4 * hw + p0) * 4, n, xin[0], 64);
		for (int k = 0; k < 4; k++)
			qse_part(q, q->se_in_c4 ? xin[k] : j->x + (size_t)(4 * c4 + k) * hw + p0,
				 j->s[4 * c4 + k], use_tab ? tabs[k] : NULL, n, part[k]);
		/* 16 pixels x 4 channels per round: byte, then word interleave */
		for (int x = 0; x < n; x += 16) {
			__m128i c0 = _mm_load_si128((const __m128i *)(part[0] + x));
			__m128i c1 = _mm_load_si128((const __m128i *)(part[1] + x));
			__m128i c2 = _mm_load_si128((const __m128i *)(part[2] + x));
			__m128i c3 = _mm_load_si128((const __m128i *)(part[3] + x));
			__m128i a0 = _mm_unpacklo_epi8(c0, c1), a1 = _mm_unpackhi_epi8(c0, c1);
			__m128i b0 = _mm_unpacklo_epi8(c2, c3), b1 = _mm_unpackhi_epi8(c2, c3);

			_mm_storeu_si128((__m128i *)(out + x * 4), _mm_unpacklo_epi16(a0, b0));
			_mm_storeu_si128((__m128i *)(out + x * 4 + 16), _mm_unpackhi_epi16(a0, b0));
			_mm_storeu_si128((__m128i *)(out + x * 4 + 32), _mm_unpacklo_epi16(a1, b1));
			_mm_storeu_si128((__m128i *)(out + x * 4 + 48), _mm_unpackhi_epi16(a1, b1));
		}
		memcpy(dst, out, (size_t)n * 4);
	}
}

int qse_run(struct mi_graph *g, struct mi_node *n)
{
	const struct qnode *q = n->priv;
	struct qse_job j = { q, mi_in(g, n, 0)->data, mi_in(g, n, 1)->data,
			     mi_out(g, n, 0)->data, 0, 0 };

	qp_cur_threads = q->nthreads;
	j.nc = (int)(q->se_c4 ? q->se_c / 4 : q->se_c);
	/* maps of 512+ pixels: one pixel range per thread (see qp_par_rows) */
	j.np = qp_cur_threads > 1 && q->se_hw >= 512 ?
		       qp_cur_threads : 1;
	qp_pool_for(j.np * j.nc, q->se_c4 ? qse_item_c4 : qse_item, &j);
	return 0;
}

/* A node reading the bytes of a quantized tensor through a 256-entry float
 * table (and its byte planes for the vpermi2b lookups): a copy of the fp32
 * table node's map @lut, or with @lut NULL the DequantizeLinear map of @a. */
struct qnode *qnode_new_lut(int (*run)(struct mi_graph *, struct mi_node *),
				   const float *lut, const struct qact *a)
{
	struct qnode *q = qnode_new(run);

	if (!q)
		return NULL;
	q->lut = malloc(256 * sizeof(float));
	if (!q->lut) {
		qnode_free(q);
		return NULL;
	}
	if (lut) {
		memcpy(q->lut, lut, 256 * sizeof(float));
	} else {
		uint8_t b[256];

		for (int i = 0; i < 256; i++)
			b[i] = (uint8_t)i;
		mi_dequantize(b, a->dtype, 256, a->scale, a->zp, q->lut);
	}
	q->lutb = lut_planes(q->lut);
	if (!q->lutb) {
		qnode_free(q);
		return NULL;
	}
	return q;
}

int try_qse(struct mi_graph *g, struct mi_node *n)
{
	if (strcmp(n->op_type, "Mul") || n->domain[0] || n->ninputs != 2 || n->noutputs != 1 ||
	    n->inputs[0] < 0 || n->inputs[1] < 0)
		return 0;
	struct mi_tensor *y = mi_out(g, n, 0);

	if (!y || y->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(y) || y->ndim != 4 ||
	    (y->flags & MI_TF_OUTPUT))
		return 0;
	/* which input is the table's output or a DequantizeLinear's (full
	 * size), which the gate */
	int xi = -1;
	bool dq = false;
	struct qact da;

	for (int i = 0; i < 2; i++) {
		struct mi_tensor *t = mi_in(g, n, i);
		int p = t->producer;

		if (p < 0 || t->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(t) || t->ndim != 4 ||
		    memcmp(t->dims, y->dims, sizeof(t->dims[0]) * 4) || g->nodes[p].dead)
			continue;
		if (qnode_is(&g->nodes[p]) && ((struct qnode *)g->nodes[p].priv)->lut &&
		    !((struct qnode *)g->nodes[p].priv)->lut8 &&
		    g->nodes[p].outputs[0] == n->inputs[i]) {
			xi = i;
			dq = false;
		} else if (xi < 0 && !strcmp(g->nodes[p].op_type, "DequantizeLinear") &&
			   !g->nodes[p].domain[0] && qp_act_params(g, &g->nodes[p], 0, 1, 2, &da)) {
			xi = i;
			dq = true;
		}
	}
	if (xi < 0)
		return 0;
	struct mi_tensor *st = mi_in(g, n, 1 - xi);
	struct mi_node *tn = &g->nodes[mi_in(g, n, xi)->producer];
	struct mi_tensor *xq = dq ? &g->tensors[da.t] : mi_in(g, tn, 0);

	if (st->dtype != MI_DT_FLOAT || !mi_tensor_shape_known(st) || st->ndim != 4 ||
	    st->dims[0] != y->dims[0] || st->dims[1] != y->dims[1] || st->dims[2] != 1 ||
	    st->dims[3] != 1 || !xq || (xq->dtype != MI_DT_UINT8 && xq->dtype != MI_DT_INT8) ||
	    mi_tensor_numel(xq) != mi_tensor_numel(y))
		return qp_skip(n, "not Mul(table output, per-channel gate)");
	int qi = mi_graph_sole_consumer(g, n->outputs[0]);
	struct mi_node *qn = qi >= 0 ? &g->nodes[qi] : NULL;
	struct qact qa;

	if (!qn || strcmp(qn->op_type, "QuantizeLinear") || qn->domain[0] || qn->dead ||
	    qn->priv || qn->ninputs < 2 || qn->inputs[0] != n->outputs[0] || qn->noutputs != 1 ||
	    !qp_q_params(g, qn, &qa) || !mi_tensor_shape_known(mi_out(g, qn, 0)) ||
	    mi_tensor_numel(mi_out(g, qn, 0)) != mi_tensor_numel(y))
		return qp_skip(n, "SE Mul output is not quantized");
	struct qnode *q = qnode_new_lut(qse_run, dq ? NULL : ((struct qnode *)tn->priv)->lut, &da);

	if (!q)
		return -ENOMEM;
	q->se_y = qa;
	q->se_c = y->dims[0] * y->dims[1];
	q->se_hw = y->dims[2] * y->dims[3];
	n->priv = q;
	q->orig_ninputs = n->ninputs;
	q->orig_in0 = n->inputs[0];
	q->orig_in1 = n->inputs[1];
	q->orig_out0 = n->outputs[0];
	n->inputs[1] = n->inputs[1 - xi];
	n->inputs[0] = dq ? da.t : tn->inputs[0];
	qp_kill(g, q, qn);
	n->outputs[0] = qn->outputs[0];
	g->tensors[n->outputs[0]].producer = (int)(n - g->nodes);
	return 0;
}
