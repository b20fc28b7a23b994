// SPDX-License-Identifier: MIT
/*
 * Elementwise operators: unary math and activations, binary arithmetic and
 * comparisons with ONNX multidirectional broadcasting, logical ops, Where,
 * Clip, variadic Sum/Mean/Max/Min, PRelu, Cast/CastLike.
 *
 * Typed kernels are generated per dtype for the binary ops so that integer
 * arithmetic is exact; unary math runs on a float fast path or through
 * double for every other dtype.  float16/bfloat16 binary ops compute in
 * float32 temporaries.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"

typedef float f32;
typedef double f64;
typedef int8_t i8;
typedef int16_t i16;
typedef int32_t i32;
typedef int64_t i64;
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;

#define DT_COUNT 17

/* ======================================================================
 * Unary
 * ==================================================================== */

struct uparams {
	double alpha, beta, gamma;
};

typedef double (*ufn)(double x, const struct uparams *p);
typedef int64_t (*uifn)(int64_t x, const struct uparams *p);

enum {
	U_FLOAT = 1, /* float dtypes */
	U_INT = 2,   /* integer dtypes too (int fn or through double) */
};

static int unary_check(struct mi_graph *g, struct mi_node *n, int types)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret = mi_ops_same_as(g, n, 0, 0);

	if (ret)
		return ret;
	if (mi_ops_is_float(x->dtype) && (types & U_FLOAT))
		return 0;
	if (mi_ops_is_int(x->dtype) && (types & U_INT))
		return 0;
	return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s is not supported",
			    mi_dtype_name(x->dtype));
}

static int unary_run(struct mi_graph *g, struct mi_node *n, ufn f, uifn fi,
		     const struct uparams *p)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t cnt = mi_tensor_numel(y);

	if (x->dtype == MI_DT_FLOAT) {
		const float *a = x->data;
		float *o = y->data;

		for (int64_t i = 0; i < cnt; i++)
			o[i] = (float)f((double)a[i], p);
	} else if (fi && mi_ops_is_int(x->dtype)) {
		for (int64_t i = 0; i < cnt; i++)
			mi_ops_set_i64(y, i, fi(mi_ops_get_i64(x, i), p));
	} else {
		for (int64_t i = 0; i < cnt; i++)
			mi_ops_set_f64(y, i, f(mi_ops_get_f64(x, i), p));
	}
	return 0;
}

static double u_abs(double x, const struct uparams *p) { return fabs(x); }
static int64_t ui_abs(int64_t x, const struct uparams *p)
{
	return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
}
static double u_neg(double x, const struct uparams *p) { return -x; }
static int64_t ui_neg(int64_t x, const struct uparams *p)
{
	return (int64_t)(0 - (uint64_t)x);
}
static double u_sign(double x, const struct uparams *p)
{
	return x > 0 ? 1 : x < 0 ? -1 : 0;
}
static int64_t ui_sign(int64_t x, const struct uparams *p)
{
	return x > 0 ? 1 : x < 0 ? -1 : 0;
}
static double u_relu(double x, const struct uparams *p) { return x > 0 ? x : 0; }
static int64_t ui_relu(int64_t x, const struct uparams *p) { return x > 0 ? x : 0; }
static double u_sqrt(double x, const struct uparams *p) { return sqrt(x); }
static double u_exp(double x, const struct uparams *p) { return exp(x); }
static double u_log(double x, const struct uparams *p) { return log(x); }
static double u_erf(double x, const struct uparams *p) { return erf(x); }
static double u_tanh(double x, const struct uparams *p) { return tanh(x); }
static double u_sigmoid(double x, const struct uparams *p)
{
	return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
}
static double u_hardsigmoid(double x, const struct uparams *p)
{
	double v = p->alpha * x + p->beta;

	return v < 0 ? 0 : v > 1 ? 1 : v;
}
static double u_hardswish(double x, const struct uparams *p)
{
	double v = x / 6 + 0.5;

	return x * (v < 0 ? 0 : v > 1 ? 1 : v);
}
static double u_leakyrelu(double x, const struct uparams *p)
{
	return x >= 0 ? x : p->alpha * x;
}
static double u_elu(double x, const struct uparams *p)
{
	return x >= 0 ? x : p->alpha * (exp(x) - 1);
}
static double u_selu(double x, const struct uparams *p)
{
	return p->gamma * (x > 0 ? x : p->alpha * (exp(x) - 1));
}
static double u_celu(double x, const struct uparams *p)
{
	return (x > 0 ? x : 0) +
	       fmin(0, p->alpha * (exp(x / p->alpha) - 1));
}
static double u_thresholdedrelu(double x, const struct uparams *p)
{
	return x > p->alpha ? x : 0;
}
static double u_softplus(double x, const struct uparams *p)
{
	return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
static double u_softsign(double x, const struct uparams *p)
{
	return x / (1 + fabs(x));
}
static double u_mish(double x, const struct uparams *p)
{
	return x * tanh(u_softplus(x, p));
}
static double u_reciprocal(double x, const struct uparams *p) { return 1 / x; }
static double u_floor(double x, const struct uparams *p) { return floor(x); }
static double u_ceil(double x, const struct uparams *p) { return ceil(x); }
static double u_round(double x, const struct uparams *p)
{
	return nearbyint(x); /* default rounding mode: half to even */
}
static double u_sin(double x, const struct uparams *p) { return sin(x); }
static double u_cos(double x, const struct uparams *p) { return cos(x); }
static double u_tan(double x, const struct uparams *p) { return tan(x); }
static double u_asin(double x, const struct uparams *p) { return asin(x); }
static double u_acos(double x, const struct uparams *p) { return acos(x); }
static double u_atan(double x, const struct uparams *p) { return atan(x); }
static double u_sinh(double x, const struct uparams *p) { return sinh(x); }
static double u_cosh(double x, const struct uparams *p) { return cosh(x); }
static double u_asinh(double x, const struct uparams *p) { return asinh(x); }
static double u_acosh(double x, const struct uparams *p) { return acosh(x); }
static double u_atanh(double x, const struct uparams *p) { return atanh(x); }
static double u_shrink(double x, const struct uparams *p)
{
	/* alpha = lambd, beta = bias */
	if (x < -p->alpha)
		return x + p->beta;
	if (x > p->alpha)
		return x - p->beta;
	return 0;
}
static int64_t ui_shrink(int64_t x, const struct uparams *p)
{
	return mi_ops_f64_to_i64(u_shrink((double)x, p));
}

/* Parameters for a unary op from its attributes. */
static void uparams_get(const struct mi_node *n, struct uparams *p)
{
	const char *t = n->op_type;

	p->alpha = p->beta = p->gamma = 0;
	if (!strcmp(t, "HardSigmoid")) {
		p->alpha = mi_attr_float(n, "alpha", 0.2f);
		p->beta = mi_attr_float(n, "beta", 0.5f);
	} else if (!strcmp(t, "LeakyRelu")) {
		p->alpha = mi_attr_float(n, "alpha", 0.01f);
	} else if (!strcmp(t, "Elu") || !strcmp(t, "Celu") ||
		   !strcmp(t, "ThresholdedRelu")) {
		p->alpha = mi_attr_float(n, "alpha", 1.0f);
	} else if (!strcmp(t, "Selu")) {
		p->alpha = mi_attr_float(n, "alpha", 1.67326319217681884765625f);
		p->gamma = mi_attr_float(n, "gamma", 1.05070102214813232421875f);
	} else if (!strcmp(t, "Shrink")) {
		p->alpha = mi_attr_float(n, "lambd", 0.5f);
		p->beta = mi_attr_float(n, "bias", 0.0f);
	}
}

#define UNARY(NAME, FN, IFN, TYPES)                                         \
	static int infer_##FN(struct mi_graph *g, struct mi_node *n)        \
	{                                                                    \
		return unary_check(g, n, TYPES);                             \
	}                                                                    \
	static int run_##FN(struct mi_graph *g, struct mi_node *n)          \
	{                                                                    \
		struct uparams p;                                            \
		uparams_get(n, &p);                                          \
		return unary_run(g, n, FN, IFN, &p);                         \
	}

UNARY("Abs", u_abs, ui_abs, U_FLOAT | U_INT)
UNARY("Neg", u_neg, ui_neg, U_FLOAT | U_INT)
UNARY("Sign", u_sign, ui_sign, U_FLOAT | U_INT)
UNARY("Relu", u_relu, ui_relu, U_FLOAT | U_INT)
UNARY("Sqrt", u_sqrt, NULL, U_FLOAT)
UNARY("Exp", u_exp, NULL, U_FLOAT)
UNARY("Log", u_log, NULL, U_FLOAT)
UNARY("Erf", u_erf, NULL, U_FLOAT | U_INT)
UNARY("Tanh", u_tanh, NULL, U_FLOAT)
UNARY("Sigmoid", u_sigmoid, NULL, U_FLOAT)
UNARY("HardSigmoid", u_hardsigmoid, NULL, U_FLOAT)
UNARY("HardSwish", u_hardswish, NULL, U_FLOAT)
UNARY("LeakyRelu", u_leakyrelu, NULL, U_FLOAT)
UNARY("Elu", u_elu, NULL, U_FLOAT)
UNARY("Selu", u_selu, NULL, U_FLOAT)
UNARY("Celu", u_celu, NULL, U_FLOAT)
UNARY("ThresholdedRelu", u_thresholdedrelu, NULL, U_FLOAT)
UNARY("Softplus", u_softplus, NULL, U_FLOAT)
UNARY("Softsign", u_softsign, NULL, U_FLOAT)
UNARY("Mish", u_mish, NULL, U_FLOAT)
UNARY("Reciprocal", u_reciprocal, NULL, U_FLOAT)
UNARY("Floor", u_floor, NULL, U_FLOAT)
UNARY("Ceil", u_ceil, NULL, U_FLOAT)
UNARY("Round", u_round, NULL, U_FLOAT)
UNARY("Sin", u_sin, NULL, U_FLOAT)
UNARY("Cos", u_cos, NULL, U_FLOAT)
UNARY("Tan", u_tan, NULL, U_FLOAT)
UNARY("Asin", u_asin, NULL, U_FLOAT)
UNARY("Acos", u_acos, NULL, U_FLOAT)
UNARY("Atan", u_atan, NULL, U_FLOAT)
UNARY("Sinh", u_sinh, NULL, U_FLOAT)
UNARY("Cosh", u_cosh, NULL, U_FLOAT)
UNARY("Asinh", u_asinh, NULL, U_FLOAT)
UNARY("Acosh", u_acosh, NULL, U_FLOAT)
UNARY("Atanh", u_atanh, NULL, U_FLOAT)
UNARY("Shrink", u_shrink, ui_shrink, U_FLOAT | U_INT)

/* Elu/Celu with alpha 0 would divide by zero in Celu: reject. */
static int infer_celu(struct mi_graph *g, struct mi_node *n)
{
	if (mi_attr_float(n, "alpha", 1.0f) == 0)
		return mi_graph_err(g, n, -EINVAL, "alpha must not be 0");
	return infer_u_celu(g, n);
}

/* IsNaN / IsInf / Not: bool outputs. */
static int infer_isx(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret = mi_ops_need_rank(g, n, 0);

	if (ret)
		return ret;
	if (!mi_ops_is_float(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	return mi_ops_set_out(g, n, 0, MI_DT_BOOL, x->ndim, x->dims);
}

static int run_isx(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t cnt = mi_tensor_numel(y);
	uint8_t *o = y->data;
	int isnan_op = !strcmp(n->op_type, "IsNaN");
	int pos = (int)mi_attr_int(n, "detect_positive", 1);
	int neg = (int)mi_attr_int(n, "detect_negative", 1);

	for (int64_t i = 0; i < cnt; i++) {
		double v = mi_ops_get_f64(x, i);

		if (isnan_op)
			o[i] = isnan(v);
		else
			o[i] = isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
	}
	return 0;
}

static int infer_not(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret = mi_ops_same_as(g, n, 0, 0);

	if (!ret && x->dtype != MI_DT_BOOL)
		return mi_graph_err(g, n, -EINVAL, "input must be bool");
	return ret;
}

static int run_not(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t cnt = mi_tensor_numel(y);
	const uint8_t *a = x->data;
	uint8_t *o = y->data;

	for (int64_t i = 0; i < cnt; i++)
		o[i] = !a[i];
	return 0;
}

/* ======================================================================
 * Binary with broadcasting: typed row kernels
 * ==================================================================== */

typedef void (*bkern)(const void *pa, int64_t sa, const void *pb, int64_t sb,
		      void *po, int64_t cnt);

#define KDEF(OP, T, OT, EXPR)                                                \
	static void k_##OP##_##T(const void *pa, int64_t sa, const void *pb, \
				 int64_t sb, void *po, int64_t cnt)          \
	{                                                                    \
		const T *A = pa, *B = pb;                                    \
		OT *O = po;                                                  \
		for (int64_t i = 0; i < cnt; i++) {                          \
			T a = A[i * sa], b = B[i * sb];                      \
			O[i] = (OT)(EXPR);                                   \
		}                                                            \
	}

/* Float types use plain arithmetic, integers wrap through uint64. */
#define KDEF_FLOAT(OP, EXPR) KDEF(OP, f32, f32, EXPR) KDEF(OP, f64, f64, EXPR)
#define KDEF_INTS(OP, EXPR)                                                   \
	KDEF(OP, i8, i8, EXPR) KDEF(OP, i16, i16, EXPR)                      \
	KDEF(OP, i32, i32, EXPR) KDEF(OP, i64, i64, EXPR)                    \
	KDEF(OP, u8, u8, EXPR) KDEF(OP, u16, u16, EXPR)                      \
	KDEF(OP, u32, u32, EXPR) KDEF(OP, u64, u64, EXPR)
#define KDEF_ALL_TO(OP, OT, EXPR)                                             \
	KDEF(OP, f32, OT, EXPR) KDEF(OP, f64, OT, EXPR)                      \
	KDEF(OP, i8, OT, EXPR) KDEF(OP, i16, OT, EXPR)                       \
	KDEF(OP, i32, OT, EXPR) KDEF(OP, i64, OT, EXPR)                      \
	KDEF(OP, u8, OT, EXPR) KDEF(OP, u16, OT, EXPR)                       \
	KDEF(OP, u32, OT, EXPR) KDEF(OP, u64, OT, EXPR)

#define KTAB_FLOAT(OP) [MI_DT_FLOAT] = k_##OP##_f32, [MI_DT_DOUBLE] = k_##OP##_f64
#define KTAB_INTS(OP)                                                        \
	[MI_DT_INT8] = k_##OP##_i8, [MI_DT_INT16] = k_##OP##_i16,            \
	[MI_DT_INT32] = k_##OP##_i32, [MI_DT_INT64] = k_##OP##_i64,          \
	[MI_DT_UINT8] = k_##OP##_u8, [MI_DT_UINT16] = k_##OP##_u16,          \
	[MI_DT_UINT32] = k_##OP##_u32, [MI_DT_UINT64] = k_##OP##_u64
#define KTAB_ALL(OP) KTAB_FLOAT(OP), KTAB_INTS(OP)

#define WRAP(EXPR) ((uint64_t)(a)EXPR(uint64_t)(b))

KDEF_FLOAT(add, a + b)
KDEF_INTS(add, WRAP(+))
KDEF_FLOAT(sub, a - b)
KDEF_INTS(sub, WRAP(-))
KDEF_FLOAT(mul, a * b)
KDEF_INTS(mul, WRAP(*))
KDEF_FLOAT(div, a / b)
/* integer division: x/0 -> 0, MIN/-1 wraps (never traps) */
KDEF(div, i8, i8, b == 0 ? 0 : b == -1 ? 0 - (uint64_t)a : a / b)
KDEF(div, i16, i16, b == 0 ? 0 : b == -1 ? 0 - (uint64_t)a : a / b)
KDEF(div, i32, i32, b == 0 ? 0 : b == -1 ? 0 - (uint64_t)a : a / b)
KDEF(div, i64, i64, b == 0 ? 0 : b == -1 ? 0 - (uint64_t)a : a / b)
KDEF(div, u8, u8, b == 0 ? 0 : a / b)
KDEF(div, u16, u16, b == 0 ? 0 : a / b)
KDEF(div, u32, u32, b == 0 ? 0 : a / b)
KDEF(div, u64, u64, b == 0 ? 0 : a / b)
KDEF_FLOAT(max, (a != a || a >= b) ? a : b)
KDEF_INTS(max, a >= b ? a : b)
KDEF_FLOAT(min, (a != a || a <= b) ? a : b)
KDEF_INTS(min, a <= b ? a : b)
KDEF_FLOAT(prelu, a < 0 ? a * b : a)
KDEF_ALL_TO(eq, u8, a == b)
KDEF_ALL_TO(lt, u8, a < b)
KDEF_ALL_TO(gt, u8, a > b)
KDEF_ALL_TO(le, u8, a <= b)
KDEF_ALL_TO(ge, u8, a >= b)
KDEF(and, u8, u8, a && b)
KDEF(or, u8, u8, a || b)
KDEF(xor, u8, u8, !a != !b)

static const bkern tab_add[DT_COUNT] = { KTAB_ALL(add) };
static const bkern tab_sub[DT_COUNT] = { KTAB_ALL(sub) };
static const bkern tab_mul[DT_COUNT] = { KTAB_ALL(mul) };
static const bkern tab_div[DT_COUNT] = { KTAB_ALL(div) };
static const bkern tab_max[DT_COUNT] = { KTAB_ALL(max) };
static const bkern tab_min[DT_COUNT] = { KTAB_ALL(min) };
static const bkern tab_prelu[DT_COUNT] = { KTAB_FLOAT(prelu) };
static const bkern tab_eq[DT_COUNT] = { KTAB_ALL(eq), [MI_DT_BOOL] = k_eq_u8 };
static const bkern tab_lt[DT_COUNT] = { KTAB_ALL(lt) };
static const bkern tab_gt[DT_COUNT] = { KTAB_ALL(gt) };
static const bkern tab_le[DT_COUNT] = { KTAB_ALL(le) };
static const bkern tab_ge[DT_COUNT] = { KTAB_ALL(ge) };
static const bkern tab_and[DT_COUNT] = { [MI_DT_BOOL] = k_and_u8 };
static const bkern tab_or[DT_COUNT] = { [MI_DT_BOOL] = k_or_u8 };
static const bkern tab_xor[DT_COUNT] = { [MI_DT_BOOL] = k_xor_u8 };

struct binop {
	const char *name;
	const bkern *tab;
	int cmp; /* output is bool */
};

static const struct binop binops[] = {
	{ "Add", tab_add, 0 },	     { "Sub", tab_sub, 0 },
	{ "Mul", tab_mul, 0 },	     { "Div", tab_div, 0 },
	{ "Max", tab_max, 0 },	     { "Min", tab_min, 0 },
	{ "Sum", tab_add, 0 },	     { "Mean", tab_add, 0 },
	{ "PRelu", tab_prelu, 0 },   { "Equal", tab_eq, 1 },
	{ "Less", tab_lt, 1 },	     { "Greater", tab_gt, 1 },
	{ "LessOrEqual", tab_le, 1 }, { "GreaterOrEqual", tab_ge, 1 },
	{ "And", tab_and, 1 },	     { "Or", tab_or, 1 },
	{ "Xor", tab_xor, 1 },
};

static const struct binop *binop_find(const char *name)
{
	for (size_t i = 0; i < sizeof(binops) / sizeof(binops[0]); i++)
		if (!strcmp(binops[i].name, name))
			return &binops[i];
	return NULL;
}

static int half_type(int dt)
{
	return dt == MI_DT_FLOAT16 || dt == MI_DT_BFLOAT16;
}

static int binop_supported(const struct binop *op, int dt)
{
	if (half_type(dt))
		return op->tab[MI_DT_FLOAT] != NULL;
	return dt >= 0 && dt < DT_COUNT && op->tab[dt];
}

/*
 * Legacy (opset < 7) broadcasting of input B onto A: PRelu broadcast a 1-D
 * slope of length C along axis 1, and the arithmetic/logic ops with
 * broadcast=1 and an explicit axis placed B's dims at A's dim `axis`.
 * Present such a B as right-aligned ([C, 1, ..., 1]).
 */
static void legacy_view(const struct mi_graph *g, const struct mi_node *n,
			const struct mi_tensor *x, struct mi_tensor *b)
{
	const struct mi_attr *ax = mi_attr_get(n, "axis");

	if (!strcmp(n->op_type, "PRelu")) {
		if (b->ndim == 1 && x->ndim >= 3 && b->dims[0] > 1 &&
		    b->dims[0] != x->dims[x->ndim - 1] &&
		    b->dims[0] == x->dims[1]) {
			int64_t c = b->dims[0];

			b->ndim = x->ndim - 1;
			b->dims[0] = c;
			for (int i = 1; i < b->ndim; i++)
				b->dims[i] = 1;
		}
		return;
	}
	if (g->opset >= 7 || !mi_attr_int(n, "broadcast", 0) || !ax ||
	    ax->type != MI_ATTR_INT || b->ndim < 0 || x->ndim < 0)
		return;
	{
		int64_t a = ax->i < 0 ? ax->i + x->ndim : ax->i;
		int trail = x->ndim - (int)a - b->ndim;

		if (a < 0 || trail <= 0 || b->ndim + trail > MI_MAX_DIMS)
			return;
		for (int i = 0; i < trail; i++)
			b->dims[b->ndim + i] = 1;
		b->ndim += trail;
	}
}

static int binary_infer(struct mi_graph *g, struct mi_node *n)
{
	const struct binop *op = binop_find(n->op_type);
	struct mi_tensor *ins[64];
	struct mi_tensor slope;
	int64_t dims[MI_MAX_DIMS];
	int ndim, ret, nin = n->ninputs;

	if (nin < 1 || nin > 64)
		return mi_graph_err(g, n, -EINVAL, "%d inputs not supported",
				    nin);
	for (int k = 0; k < nin; k++) {
		ins[k] = mi_in(g, n, k);
		if (!ins[k])
			return mi_graph_err(g, n, -EINVAL,
					    "input %d is required", k);
		if (ins[k]->ndim >= 0 && ins[k]->dtype != ins[0]->dtype)
			return mi_graph_err(g, n, -EINVAL,
					    "input dtypes differ (%s, %s)",
					    mi_dtype_name(ins[0]->dtype),
					    mi_dtype_name(ins[k]->dtype));
	}
	if (nin == 2 && ins[0]->ndim >= 0 && ins[1]->ndim >= 0) {
		slope = *ins[1];
		legacy_view(g, n, ins[0], &slope);
		ins[1] = &slope;
	}
	ret = mi_bcast_infer(g, n, nin, ins, &ndim, dims);
	if (ret)
		return ret;
	if (!binop_supported(op, ins[0]->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "dtype %s is not supported",
				    mi_dtype_name(ins[0]->dtype));
	if (!strcmp(n->op_type, "Mean") && !mi_ops_is_float(ins[0]->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "dtype %s is not supported",
				    mi_dtype_name(ins[0]->dtype));
	return mi_ops_set_out(g, n, 0, op->cmp ? MI_DT_BOOL : ins[0]->dtype,
			      ndim, dims);
}

/* float16/bfloat16 -> float32 copy (caller frees). */
static float *to_f32(const struct mi_tensor *t)
{
	int64_t cnt = mi_tensor_numel(t);
	float *f = malloc((cnt ? cnt : 1) * sizeof(float));

	if (f)
		for (int64_t i = 0; i < cnt; i++)
			f[i] = (float)mi_ops_get_f64(t, i);
	return f;
}

/* out = op(a, b) with broadcasting; a/b/out may alias out's data only
 * when they have out's shape. */
static void bin_apply(bkern k, const struct mi_tensor *a, const void *adata,
		      const struct mi_tensor *b, const void *bdata,
		      const struct mi_tensor *out, void *odata, size_t esz,
		      size_t osz)
{
	struct mi_tensor *ins[2] = { (struct mi_tensor *)a,
				     (struct mi_tensor *)b };
	struct mi_bcast bc;
	int64_t offs[2];

	mi_bcast_init(&bc, 2, ins, out);
	if (mi_tensor_numel(out) == 0)
		return;
	for (int64_t r = 0; r < bc.rows; r++) {
		mi_bcast_row(&bc, r, offs);
		k((const char *)adata + offs[0] * esz, bc.step[0],
		  (const char *)bdata + offs[1] * esz, bc.step[1],
		  (char *)odata + r * bc.inner * osz, bc.inner);
	}
}

static int binary_run(struct mi_graph *g, struct mi_node *n)
{
	const struct binop *op = binop_find(n->op_type);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	struct mi_tensor *x0 = mi_in(g, n, 0);
	int dt = x0->dtype, half = half_type(dt), nin = n->ninputs;
	int kdt = half ? MI_DT_FLOAT : dt;
	bkern k = op->tab[kdt];
	size_t esz = mi_dtype_size(kdt), osz = op->cmp ? 1 : esz;
	int64_t cnt = mi_tensor_numel(y);
	void *odata = y->data;
	float *tmp_out = NULL;
	int ret = 0;

	if (half && !op->cmp) {
		tmp_out = malloc((cnt ? cnt : 1) * sizeof(float));
		if (!tmp_out)
			return -ENOMEM;
		odata = tmp_out;
	}
	if (nin == 1) {
		/* Sum/Max/Min/Mean of one input: a copy */
		if (half) {
			for (int64_t i = 0; i < cnt; i++)
				((float *)odata)[i] =
					(float)mi_ops_get_f64(x0, i);
		} else {
			memcpy(odata, x0->data, cnt * esz);
		}
	}
	for (int k2 = 1; k2 < nin; k2++) {
		struct mi_tensor *b = mi_in(g, n, k2);
		struct mi_tensor slope;
		const struct mi_tensor *a = k2 == 1 ? x0 : y;
		const void *ad = k2 == 1 ? x0->data : odata;
		void *af = NULL, *bf = NULL;

		if (nin == 2) {
			slope = *b;
			legacy_view(g, n, x0, &slope);
			b = &slope;
		}
		if (half) {
			if (k2 == 1) {
				af = to_f32(x0);
				ad = af;
			}
			bf = to_f32(b);
			if ((k2 == 1 && !af) || !bf) {
				free(af);
				free(bf);
				ret = -ENOMEM;
				break;
			}
		}
		bin_apply(k, a, ad, b, bf ? bf : b->data, y, odata, esz, osz);
		free(af);
		free(bf);
	}
	if (!ret && !strcmp(n->op_type, "Mean") && nin > 1) {
		for (int64_t i = 0; i < cnt; i++) {
			if (kdt == MI_DT_DOUBLE)
				((double *)odata)[i] /= nin;
			else
				((float *)odata)[i] /= nin;
		}
	}
	if (tmp_out) {
		for (int64_t i = 0; i < cnt && !ret; i++)
			mi_ops_set_f64(y, i, tmp_out[i]);
		free(tmp_out);
	}
	return ret;
}

/* ---- Pow, Mod, BitShift: through double / int64 ---------------------- */

static int gen_binary_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *ins[2] = { mi_in(g, n, 0), mi_in(g, n, 1) };
	struct mi_tensor bv;
	int64_t dims[MI_MAX_DIMS];
	int ndim, ret;

	if (ins[0] && ins[1]) {
		bv = *ins[1];
		legacy_view(g, n, ins[0], &bv);
		ins[1] = &bv;
	}
	ret = mi_bcast_infer(g, n, 2, ins, &ndim, dims);
	if (ret)
		return ret;
	if (strcmp(n->op_type, "Pow") && ins[0]->dtype != ins[1]->dtype)
		return mi_graph_err(g, n, -EINVAL, "input dtypes differ");
	if (!mi_ops_is_float(ins[0]->dtype) && !mi_ops_is_int(ins[0]->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(ins[0]->dtype));
	if (!strcmp(n->op_type, "Pow") && !mi_ops_is_float(ins[1]->dtype) &&
	    !mi_ops_is_int(ins[1]->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(ins[1]->dtype));
	if (!strcmp(n->op_type, "BitShift")) {
		const char *d = mi_attr_string(n, "direction", "");

		if (strcmp(d, "LEFT") && strcmp(d, "RIGHT"))
			return mi_graph_err(g, n, -EINVAL,
					    "direction '%s' is not valid", d);
		if (!mi_ops_is_int(ins[0]->dtype))
			return mi_graph_err(g, n, -EINVAL,
					    "BitShift needs integers");
	}
	if (!strcmp(n->op_type, "Mod") && mi_ops_is_float(ins[0]->dtype) &&
	    !mi_attr_int(n, "fmod", 0))
		return mi_graph_err(g, n, -EINVAL,
				    "fmod must be 1 for float inputs");
	return mi_ops_set_out(g, n, 0, ins[0]->dtype, ndim, dims);
}

static int64_t imod(int64_t a, int64_t b, int fm)
{
	int64_t r;

	if (b == 0)
		return 0;
	if (b == -1)
		return 0;
	r = a % b;
	if (!fm && r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}

static int gen_binary_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *a = mi_in(g, n, 0), *b = mi_in(g, n, 1);
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	struct mi_tensor bv = *b;
	struct mi_tensor *ins[2] = { a, &bv };
	struct mi_bcast bc;
	int64_t offs[2];
	int pow_op = !strcmp(n->op_type, "Pow");
	int mod_op = !strcmp(n->op_type, "Mod");
	int fm = (int)mi_attr_int(n, "fmod", 0);
	int left = !strcmp(mi_attr_string(n, "direction", ""), "LEFT");
	int isint = mi_ops_is_int(a->dtype);
	int isu64 = a->dtype == MI_DT_UINT64;

	legacy_view(g, n, a, &bv);
	if (mi_tensor_numel(y) == 0)
		return 0;
	mi_bcast_init(&bc, 2, ins, y);
	for (int64_t r = 0; r < bc.rows; r++) {
		mi_bcast_row(&bc, r, offs);
		for (int64_t j = 0; j < bc.inner; j++) {
			int64_t ia = offs[0] + j * bc.step[0];
			int64_t ib = offs[1] + j * bc.step[1];
			int64_t io = r * bc.inner + j;

			if (pow_op) {
				double v = pow(mi_ops_get_f64(a, ia),
					       mi_ops_get_f64(b, ib));
				mi_ops_set_f64(y, io, v);
			} else if (mod_op && isint) {
				if (isu64) {
					uint64_t x = ((uint64_t *)a->data)[ia];
					uint64_t m = ((uint64_t *)b->data)[ib];

					((uint64_t *)y->data)[io] =
						m ? x % m : 0;
				} else {
					mi_ops_set_i64(
						y, io,
						imod(mi_ops_get_i64(a, ia),
						     mi_ops_get_i64(b, ib), fm));
				}
			} else if (mod_op) {
				mi_ops_set_f64(y, io,
					       fmod(mi_ops_get_f64(a, ia),
						    mi_ops_get_f64(b, ib)));
			} else {
				uint64_t x = (uint64_t)mi_ops_get_i64(a, ia);
				uint64_t s = (uint64_t)mi_ops_get_i64(b, ib);
				uint64_t v = s >= 64 ? 0 : left ? x << s : x >> s;

				if (isu64)
					((uint64_t *)y->data)[io] = v;
				else
					mi_ops_set_i64(y, io, (int64_t)v);
			}
		}
	}
	return 0;
}

/* ======================================================================
 * Where
 * ==================================================================== */

static int where_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *ins[3] = { mi_in(g, n, 0), mi_in(g, n, 1),
				     mi_in(g, n, 2) };
	int64_t dims[MI_MAX_DIMS];
	int ndim, ret = mi_bcast_infer(g, n, 3, ins, &ndim, dims);

	if (ret)
		return ret;
	if (ins[0]->dtype != MI_DT_BOOL)
		return mi_graph_err(g, n, -EINVAL, "condition must be bool");
	if (ins[1]->dtype != ins[2]->dtype || !mi_dtype_size(ins[1]->dtype))
		return mi_graph_err(g, n, -EINVAL, "X/Y dtypes differ");
	return mi_ops_set_out(g, n, 0, ins[1]->dtype, ndim, dims);
}

static int where_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *ins[3] = { mi_in(g, n, 0), mi_in(g, n, 1),
				     mi_in(g, n, 2) };
	struct mi_tensor *y = mi_ops_out(g, n, 0);
	size_t es = mi_dtype_size(y->dtype);
	struct mi_bcast bc;
	int64_t offs[3];
	const uint8_t *c = ins[0]->data;

	if (mi_tensor_numel(y) == 0)
		return 0;
	mi_bcast_init(&bc, 3, ins, y);
	for (int64_t r = 0; r < bc.rows; r++) {
		mi_bcast_row(&bc, r, offs);
		for (int64_t j = 0; j < bc.inner; j++) {
			int64_t ic = offs[0] + j * bc.step[0];
			const struct mi_tensor *src = c[ic] ? ins[1] : ins[2];
			int64_t is = c[ic] ? offs[1] + j * bc.step[1] :
					     offs[2] + j * bc.step[2];

			memcpy((char *)y->data + (r * bc.inner + j) * es,
			       (const char *)src->data + is * es, es);
		}
	}
	return 0;
}

/* ======================================================================
 * Clip
 * ==================================================================== */

static int clip_bound(struct mi_graph *g, struct mi_node *n, int idx,
		      const char *attr, double def, double *v)
{
	struct mi_tensor *t = mi_in(g, n, idx);

	*v = def;
	if (t) {
		if (!t->data)
			return -EAGAIN;
		if (mi_tensor_numel(t) != 1)
			return mi_graph_err(g, n, -EINVAL,
					    "%s must be a scalar", attr);
		*v = mi_ops_get_f64(t, 0);
	} else if (mi_attr_get(n, attr)) {
		*v = mi_attr_float(n, attr, (float)def);
	}
	return 0;
}

static int clip_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret = mi_ops_same_as(g, n, 0, 0);

	if (ret)
		return ret;
	if (!mi_ops_is_float(x->dtype) && !mi_ops_is_int(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP, "dtype %s unsupported",
				    mi_dtype_name(x->dtype));
	for (int i = 1; i < 3; i++) {
		struct mi_tensor *t = mi_in(g, n, i);

		if (t && t->ndim >= 0 && mi_tensor_numel(t) > 1)
			return mi_graph_err(g, n, -EINVAL,
					    "min/max must be scalars");
	}
	return 0;
}

static int clip_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t cnt = mi_tensor_numel(y);
	double lo, hi;
	int ret;

	ret = clip_bound(g, n, 1, "min", -INFINITY, &lo);
	if (!ret)
		ret = clip_bound(g, n, 2, "max", INFINITY, &hi);
	if (ret == -EAGAIN)
		return mi_graph_err(g, n, -EINVAL, "min/max have no data");
	if (ret)
		return ret;
	if (x->dtype == MI_DT_FLOAT) {
		const float *a = x->data;
		float *o = y->data, l = (float)lo, h = (float)hi;

		for (int64_t i = 0; i < cnt; i++) {
			float v = a[i] < l ? l : a[i];

			o[i] = v > h ? h : v;
		}
		return 0;
	}
	for (int64_t i = 0; i < cnt; i++) {
		double v = mi_ops_get_f64(x, i);

		v = v < lo ? lo : v;
		v = v > hi ? hi : v;
		mi_ops_set_f64(y, i, v); /* saturating for integers */
	}
	return 0;
}

/* ======================================================================
 * Cast / CastLike
 * ==================================================================== */

static int cast_ok(int dt)
{
	return mi_ops_is_float(dt) || mi_ops_is_int(dt) || dt == MI_DT_BOOL;
}

static int cast_infer(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0);
	int ret = mi_ops_need_rank(g, n, 0);
	int to;

	if (ret)
		return ret;
	if (!strcmp(n->op_type, "CastLike")) {
		struct mi_tensor *l = mi_in(g, n, 1);

		if (!l)
			return mi_graph_err(g, n, -EINVAL,
					    "target_type input is required");
		to = l->dtype;
		if (!to)
			return -EAGAIN;
	} else {
		const struct mi_attr *a = mi_attr_get(n, "to");

		static const struct {
			const char *name;
			int dt;
		} legacy[] = {
			/* opset 1-5 spelled 'to' as a string */
			{ "FLOAT", MI_DT_FLOAT },   { "UINT8", MI_DT_UINT8 },
			{ "INT8", MI_DT_INT8 },	    { "UINT16", MI_DT_UINT16 },
			{ "INT16", MI_DT_INT16 },   { "INT32", MI_DT_INT32 },
			{ "INT64", MI_DT_INT64 },   { "BOOL", MI_DT_BOOL },
			{ "FLOAT16", MI_DT_FLOAT16 }, { "DOUBLE", MI_DT_DOUBLE },
			{ "UINT32", MI_DT_UINT32 }, { "UINT64", MI_DT_UINT64 },
		};

		if (a && a->type == MI_ATTR_STRING) {
			to = -1;
			for (size_t i = 0; i < sizeof(legacy) / sizeof(legacy[0]); i++)
				if (!strcmp(a->s, legacy[i].name))
					to = legacy[i].dt;
		} else if (!a || a->type != MI_ATTR_INT) {
			return mi_graph_err(g, n, -EINVAL,
					    "attribute 'to' is required");
		} else {
			to = (int)a->i;
			if (a->i != to)
				to = -1;
		}
	}
	if (!cast_ok(to) || !cast_ok(x->dtype))
		return mi_graph_err(g, n, -EOPNOTSUPP,
				    "cast from %s to %s is not supported",
				    mi_dtype_name(x->dtype), mi_dtype_name(to));
	return mi_ops_set_out(g, n, 0, to, x->ndim, x->dims);
}

static int cast_run(struct mi_graph *g, struct mi_node *n)
{
	struct mi_tensor *x = mi_in(g, n, 0), *y = mi_ops_out(g, n, 0);
	int64_t cnt = mi_tensor_numel(y);

	if (x->dtype == y->dtype)
		return mi_ops_copy_data(g, n, 0, 0);
	if (x->dtype == MI_DT_UINT64 && !mi_ops_is_float(y->dtype)) {
		for (int64_t i = 0; i < cnt; i++)
			mi_ops_set_i64(y, i,
				       (int64_t)((uint64_t *)x->data)[i]);
	} else if (mi_ops_is_float(x->dtype) || mi_ops_is_float(y->dtype)) {
		for (int64_t i = 0; i < cnt; i++)
			mi_ops_set_f64(y, i, mi_ops_get_f64(x, i));
	} else {
		for (int64_t i = 0; i < cnt; i++)
			mi_ops_set_i64(y, i, mi_ops_get_i64(x, i));
	}
	return 0;
}

/* ====================================================================== */

#define U(NAME, FN) { NAME, "", 1, 1, 1, 1, infer_##FN, run_##FN }
#define B(NAME, MINI, MAXI) { NAME, "", MINI, MAXI, 1, 1, binary_infer, binary_run }

const struct mi_op_def mi_ops_elementwise[] = {
	U("Abs", u_abs),
	U("Neg", u_neg),
	U("Sign", u_sign),
	U("Relu", u_relu),
	U("Sqrt", u_sqrt),
	U("Exp", u_exp),
	U("Log", u_log),
	U("Erf", u_erf),
	U("Tanh", u_tanh),
	U("Sigmoid", u_sigmoid),
	U("HardSigmoid", u_hardsigmoid),
	U("HardSwish", u_hardswish),
	U("LeakyRelu", u_leakyrelu),
	U("Elu", u_elu),
	U("Selu", u_selu),
	{ "Celu", "", 1, 1, 1, 1, infer_celu, run_u_celu },
	U("ThresholdedRelu", u_thresholdedrelu),
	U("Softplus", u_softplus),
	U("Softsign", u_softsign),
	U("Mish", u_mish),
	U("Reciprocal", u_reciprocal),
	U("Floor", u_floor),
	U("Ceil", u_ceil),
	U("Round", u_round),
	U("Sin", u_sin),
	U("Cos", u_cos),
	U("Tan", u_tan),
	U("Asin", u_asin),
	U("Acos", u_acos),
	U("Atan", u_atan),
	U("Sinh", u_sinh),
	U("Cosh", u_cosh),
	U("Asinh", u_asinh),
	U("Acosh", u_acosh),
	U("Atanh", u_atanh),
	U("Shrink", u_shrink),
	{ "IsNaN", "", 1, 1, 1, 1, infer_isx, run_isx },
	{ "IsInf", "", 1, 1, 1, 1, infer_isx, run_isx },
	{ "Not", "", 1, 1, 1, 1, infer_not, run_not },
	B("Add", 2, 2),
	B("Sub", 2, 2),
	B("Mul", 2, 2),
	B("Div", 2, 2),
	B("PRelu", 2, 2),
	B("Equal", 2, 2),
	B("Less", 2, 2),
	B("Greater", 2, 2),
	B("LessOrEqual", 2, 2),
	B("GreaterOrEqual", 2, 2),
	B("And", 2, 2),
	B("Or", 2, 2),
	B("Xor", 2, 2),
	B("Max", 1, 64),
	B("Min", 1, 64),
	B("Sum", 1, 64),
	B("Mean", 1, 64),
	{ "Pow", "", 2, 2, 1, 1, gen_binary_infer, gen_binary_run },
	{ "Mod", "", 2, 2, 1, 1, gen_binary_infer, gen_binary_run },
	{ "BitShift", "", 2, 2, 1, 1, gen_binary_infer, gen_binary_run },
	{ "Where", "", 3, 3, 1, 1, where_infer, where_run },
	{ "Clip", "", 1, 3, 1, 1, clip_infer, clip_run },
	{ "Cast", "", 1, 1, 1, 1, cast_infer, cast_run },
	{ "CastLike", "", 2, 2, 1, 1, cast_infer, cast_run },
	{ NULL }
};
