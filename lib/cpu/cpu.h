/* SPDX-License-Identifier: MIT */
/*
 * Fast fp32 CPU kernels: internal API of lib/cpu/.  Private to
 * libmetainfer (the int8 kernels in lib/quant/ may use the thread pool,
 * the ISA query and the epilogue descriptor).
 *
 * Layers, bottom up:
 *  - ISA dispatch (mi_cpu_isa*): generic (portable C, GCC vector
 *    extensions), avx2 (AVX2+FMA), avx512 (F/BW/VL/DQ).  The CPU's own
 *    (cpuid), or lower per model: the planners take the ISA of
 *    struct mi_cpu_opts (mi_model_opts.isa, `metainfer run --isa`) and
 *    pick the kernel tables of that ISA; nothing is process-global.
 *  - Thread pool (mi_pool_*): one process-wide pool of pthreads that spin
 *    briefly, then sleep on a futex.  mi_pool_run() calls fn(ctx, t, nt)
 *    for t = 0..nt-1, the caller being t = 0.  A run issued while the pool
 *    is busy (another thread, or nested) executes serially in the caller.
 *  - Per-ISA kernel tables (struct mi_cpu_kern): the GEMM micro-kernel,
 *    the fused epilogue over a row, the depthwise conv row kernels.
 *  - SGEMM (mi_sgemm*): C = A*B (+ epilogue) with packed panels, cache
 *    blocking and thread splitting over M or N.  Either operand may be
 *    pre-packed once (weights) with mi_sgemm_pack_a()/mi_sgemm_pack_b();
 *    B may also be produced on the fly by a callback (im2col).
 *  - Conv2d (mi_conv*): 1x1 as GEMM, im2col+GEMM, depthwise, Winograd
 *    F(4x4,3x3), all NCHW fp32 with fused epilogues.
 *
 * Every function taking a workspace declares its size up front
 * (…_ws_size()); kernels never allocate at run time.
 */
#ifndef MI_CPU_H
#define MI_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- ISA ------------------------------------------------------------- */
enum mi_isa {
	MI_ISA_GENERIC = 0,
	MI_ISA_AVX2 = 1,
	MI_ISA_AVX512 = 2,
	MI_ISA_COUNT
};

/* Best ISA this CPU supports (cpuid). */
int mi_cpu_isa_native(void);
/* The same, cached: the ISA of a model planned without a cap. */
int mi_cpu_isa(void);
struct mi_cpu_opts;
/* The ISA a model's planners use: its cap (struct mi_cpu_opts.isa, from
 * mi_model_opts.isa), at most the CPU's own; NULL or -1: the CPU's. */
int mi_cpu_opts_isa(const struct mi_cpu_opts *o);
/* "generic", "avx2", "avx512". */
const char *mi_cpu_isa_name(int isa);

/* ---- thread pool ----------------------------------------------------- */
typedef void (*mi_pool_fn)(void *ctx, int t, int nt);

/* Number of online cores. */
int mi_cpu_ncores(void);
/* Run fn on nt threads (caller is t = 0); returns when all are done.
 * nt <= 1 runs inline.  Workers are created on first use. */
void mi_pool_run(int nt, mi_pool_fn fn, void *ctx);
/* How the calling thread waits past the short spin for workers that
 * joined a run: on (the default) it keeps spinning up to 100 us before
 * it sleeps on the futex; off it sleeps at once (MI_MODEL_NO_SPIN: each
 * model run sets its thread's mode). */
void mi_pool_caller_spin(bool on);
/* While on, the calling thread's mi_pool_run() calls run every chunk
 * inline, as on one thread (a node the plan gives 1 thread); returns the
 * previous mode. */
bool mi_pool_serial(bool on);
/* Element-wise fast paths (eltwise.c): claims unplanned live fp32 nodes
 * (unary activations, Pow by a constant, broadcasting Add/Sub/Mul/Div,
 * last-axis Softmax) with the kernels of ISA isa; node->priv starts with
 * mi_cpu_kernel_hdr. */
struct mi_graph;
int mi_cpu_plan_eltwise(struct mi_graph *g, int nthreads, int isa);
/* Threads the planner was configured with (mi_cpu_plan's opts, default
 * online cores); int8 kernels in lib/quant use the same. */
int mi_cpu_nthreads(void);
void mi_cpu_set_nthreads(int nt);
/* fn(arg, i, tid) for i in [0, n), statically chunked over
 * mi_cpu_nthreads() threads (tid 0 = caller). */
void mi_cpu_parallel_for(int n, void (*fn)(void *arg, int i, int tid),
			 void *arg);
/* Split [0, n) into nt static chunks; chunk t of nt is [*b, *e). */
static inline void mi_chunk(int64_t n, int t, int nt, int64_t *b, int64_t *e)
{
	int64_t q = n / nt, r = n % nt;

	*b = t * q + (t < r ? t : r);
	*e = *b + q + (t < r);
}

/*
 * Dynamic work sharing inside one pool run: the participants claim
 * ranges of `grain` units from a shared counter until [0, n) is used up,
 * so a thread that starts late (descheduled on a loaded machine) leaves
 * its share to the others instead of stalling the run.
 */
struct mi_work {
	int64_t next; /* only through __atomic builtins */
	int64_t n, grain;
};

static inline void mi_work_init(struct mi_work *w, int64_t n, int64_t grain)
{
	__atomic_store_n(&w->next, 0, __ATOMIC_RELAXED);
	w->n = n;
	w->grain = grain < 1 ? 1 : grain;
}

/* Claim the next range [*b, *e); 0 when nothing is left. */
static inline int mi_work_claim(struct mi_work *w, int64_t *b, int64_t *e)
{
	int64_t s = __atomic_fetch_add(&w->next, w->grain,
				       __ATOMIC_RELAXED);

	if (s >= w->n)
		return 0;
	*b = s;
	*e = s + w->grain < w->n ? s + w->grain : w->n;
	return 1;
}

/* Grain giving each of nt threads about `per` ranges of [0, n). */
static inline int64_t mi_work_grain(int64_t n, int nt, int per)
{
	int64_t parts = (int64_t)(nt < 1 ? 1 : nt) * (per < 1 ? 1 : per);

	return (n + parts - 1) / parts;
}

/* ---- fused epilogue -------------------------------------------------- */
enum mi_act {
	MI_ACT_NONE = 0,
	MI_ACT_RELU,    /* max(x, 0) */
	MI_ACT_CLIP,    /* min(max(x, lo), hi) */
	MI_ACT_HSWISH,  /* x * clip(alpha*x + beta, 0, 1) (lo=alpha, hi=beta) */
	MI_ACT_SIGMOID, /* 1 / (1 + exp(-x)) */
	MI_ACT_SILU,    /* x * sigmoid(x) */
	MI_ACT_COUNT
};

enum mi_bias {
	MI_BIAS_NONE = 0,
	MI_BIAS_ROW, /* bias[i] added to row i of C (conv: per channel) */
	MI_BIAS_COL, /* bias[j] added to column j of C (Gemm) */
};

/*
 * y = act(acc + bias + res), applied where each output element is
 * produced.  res (residual Add) has C's layout with row stride ldr.
 */
struct mi_epi {
	int bias_kind;
	const float *bias;
	const float *res;
	ptrdiff_t ldr;
	int act;
	float lo, hi;
};

/* Scalar reference of the epilogue (tests, tails). */
float mi_epi_scalar(const struct mi_epi *e, float acc, int64_t row,
		    int64_t col);

/* ---- per-ISA kernels ------------------------------------------------- */
/* 2-D pooling window over one NCHW plane (strides equal, 1 or 2). */
struct mi_pool2d {
	int ih, iw, oh, ow;
	int kh, kw, s;
	int pt, pl, pb, pr;
	int avg;         /* 0: max, 1: average */
	int include_pad; /* average: count_include_pad */
};

struct mi_cpu_kern {
	int isa;
	int mr, nr; /* GEMM micro-tile */
	/*
	 * C[0:MR, 0:NR] = (acc ? C : 0) + A_panel * B_panel over kc steps;
	 * a advances MR floats per k, b ldb floats per k (NR for a packed
	 * panel, the row stride when B is read in place; ceil(nr/VW)
	 * vectors are read per k).  Only the top-left mr x nr of C is
	 * written.  If epi != NULL the epilogue is applied (row0/col0:
	 * position of C[0][0] in the whole output, for bias and residual
	 * indexing).
	 */
	void (*ukr)(int kc, const float *a, const float *b, ptrdiff_t ldb,
		    float *c, ptrdiff_t ldc, int mr, int nr, int acc,
		    const struct mi_epi *epi, int64_t row0, int64_t col0);
	/* y[0:n] = epilogue(x[0:n]) for output row `row`, columns col0.. */
	void (*epi_row)(const struct mi_epi *e, const float *x, float *y,
			int64_t n, int64_t row, int64_t col0);
	/*
	 * Depthwise conv of one channel plane, NCHW.  x: ih*iw input plane,
	 * w: k*k taps, out: oh*ow; pads pt/pl (bottom/right implied by
	 * oh/ow).  ws: mi_dw_ws_floats() floats.  The epilogue sees the
	 * output as a [channels][oh*ow] matrix: row c, columns oy*ow+ox.
	 */
	void (*dw)(const float *x, int ih, int iw, const float *w, int k,
		   int stride, int pt, int pl, float *out, int oh, int ow,
		   const struct mi_epi *e, int c, float *ws);
	/* One plane of MaxPool/AveragePool; ws: mi_pool_ws_floats(). */
	void (*pool)(const struct mi_pool2d *p, const float *x, float *y,
		     float *ws);
	/* sum / max of x[0:n] (global pooling) */
	float (*sum)(const float *x, int64_t n);
	float (*max)(const float *x, int64_t n);
	/* y[0:n] = x[0:n] * s (channel scaling, squeeze-excitation) */
	void (*scale)(const float *x, float s, float *y, int64_t n);
	/* Winograd F(4x4,3x3): input transform of one channel, output
	 * transform of one row of tiles (winograd.c) */
	void (*wino_in)(const float *x, int ih, int iw, int pt, int pl,
			int th, int tw, float *scratch, float *v, size_t xs,
			size_t ps, int nr, int c);
	void (*wino_out)(const float *m, size_t xs, int tw, int twv,
			 float *ostg);
};

const struct mi_cpu_kern *mi_cpu_kern_get(int isa);
/* Workspace (floats) of one dw() call for these output sizes. */
size_t mi_dw_ws_floats(int k, int stride, int oh, int ow);
size_t mi_pool_ws_floats(const struct mi_pool2d *p);
/* Is this window shape handled by pool()? */
int mi_pool_supports(const struct mi_pool2d *p);
/* Scalar reference with the ONNX semantics of lib/ops (tests). */
void mi_pool_ref(const struct mi_pool2d *p, const float *x, float *y);

/* ---- SGEMM ------------------------------------------------------------ */
/*
 * Pre-packed operand: panels of MR rows (A) or NR columns (B) over the
 * whole K, zero-padded; valid only with the kernel table it was made for.
 */
struct mi_packed {
	int isa;
	int64_t rows; /* M for A, N for B */
	int64_t k;
	float *data;  /* 64-byte aligned, owned */
};

/* A(i,k) = a[i*rs + k*cs]; B(k,j) = b[k*rs + j*cs]. */
int mi_sgemm_pack_a(int isa, int64_t m, int64_t k, const float *a,
		    ptrdiff_t rs, ptrdiff_t cs, struct mi_packed *out);
int mi_sgemm_pack_b(int isa, int64_t k, int64_t n, const float *b,
		    ptrdiff_t rs, ptrdiff_t cs, struct mi_packed *out);
void mi_packed_free(struct mi_packed *p);

/*
 * Producer of B panels: write B(k0:k0+kc, n0:n0+nc) into dst as
 * ceil(nc/NR) panels, panel p at dst + p*kc*NR, each row of NR floats
 * (zero past nc).
 */
typedef void (*mi_packb_fn)(const void *ctx, int64_t k0, int kc, int64_t n0,
			    int nc, int nr, float *dst);

struct mi_sgemm_args {
	int isa;
	int64_t m, n, k;
	/* A: pre-packed (pa) or strided (a, a_rs, a_cs) */
	const struct mi_packed *pa;
	const float *a;
	ptrdiff_t a_rs, a_cs;
	/* B: pre-packed (pb), producer (packb) or strided (b, b_rs, b_cs) */
	const struct mi_packed *pb;
	mi_packb_fn packb;
	const void *packb_ctx;
	const float *b;
	ptrdiff_t b_rs, b_cs;
	float *c;
	ptrdiff_t ldc;
	struct mi_epi epi;
	int nthreads;
};

/* Bytes of workspace mi_sgemm() needs for these args (64-aligned). */
size_t mi_sgemm_ws_size(const struct mi_sgemm_args *a);
/* Run; ws must hold mi_sgemm_ws_size() bytes, 64-byte aligned. */
void mi_sgemm(const struct mi_sgemm_args *a, void *ws);

/* ---- Conv2d (NCHW, fp32) --------------------------------------------- */
enum mi_conv_algo {
	MI_CONV_GEMM = 0,   /* 1x1 stride 1 pad 0: GEMM directly on the input */
	MI_CONV_IM2COL,     /* general: im2col fused into B packing */
	MI_CONV_DEPTHWISE,  /* groups == C == M, k 3/5, stride 1/2 */
	MI_CONV_WINOGRAD,   /* F(4x4,3x3), stride 1, dilation 1, group 1 */
	MI_CONV_COUNT
};

struct mi_conv_shape {
	int n, c, h, w;     /* input */
	int m, kh, kw;      /* output channels, kernel */
	int group;
	int sh, sw, dh, dw;
	int pt, pl, pb, pr; /* pads top/left/bottom/right */
	int oh, ow;
};

/* Does algo support this shape? */
int mi_conv_supports(int algo, const struct mi_conv_shape *s);

struct mi_conv {
	int algo, isa, nthreads;
	struct mi_conv_shape s;
	struct mi_packed *wp; /* packed weights: per group (GEMM algos) or
			       * per Winograd point (36) */
	int nwp;
	float *wt;            /* depthwise taps / winograd transformed */
	float *bias;          /* m floats or NULL (owned copy) */
	size_t ws_size;
	size_t ws_split; /* im2col stride 2: offset of the column phases */
};

/*
 * Prepare: pack or transform w (m x c/group x kh x kw) and copy bias.
 * act/lo/hi: fused activation; residual is given per run.
 */
int mi_conv_init(struct mi_conv *cv, int algo, int isa, int nthreads,
		 const struct mi_conv_shape *s, const float *w,
		 const float *bias);
void mi_conv_fini(struct mi_conv *cv);
/* y = act(conv(x) + bias + res); res may be NULL; ws: cv->ws_size bytes. */
void mi_conv_run(const struct mi_conv *cv, const float *x, float *y,
		 const float *res, int act, float lo, float hi, void *ws);

/* Scalar reference (tests): same semantics, straightforward loops. */
void mi_conv_ref(const struct mi_conv_shape *s, const float *x, const float *w,
		 const float *bias, const float *res, int act, float lo,
		 float hi, float *y);

/* Aligned allocation helpers (64 bytes). */
void *mi_cpu_alloc(size_t bytes);
void mi_cpu_free(void *p);

#endif /* MI_CPU_H */
