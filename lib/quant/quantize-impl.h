/* SPDX-License-Identifier: MIT */
/* Private to the quantizer's files (quantize.c, qcalib.c, qequalize.c,
 * qrewrite.c, qmixed.c, qcost*.c): its context and the steps they share. */
#ifndef MI_QUANT_QUANTIZE_IMPL_H
#define MI_QUANT_QUANTIZE_IMPL_H

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cpu/cpu.h"
#include "gen/onnx.pb-c.h"
#include "internal.h"
#include "metainfer/metainfer.h"
#include "quant/quant.h"
#include "quant/quant-impl.h"
#include <stdarg.h>

/* the function the readers of a quantized tensor apply (act_fn()) */
enum { ACT_ID, ACT_RELU, ACT_HSIG, ACT_HSWISH, ACT_SIG, ACT_SILU };

struct qtensor {
	int t;          /* IR tensor index */
	double mn, mx;  /* calibrated range */
	float scale;
	int zp;
	bool seen;
	uint32_t *hist; /* percentile mode: |x| histogram; mse: signed */
	double hmax;    /* histogram range (|x| up to hmax; signed: hlo + hmax) */
	double hlo;     /* signed histogram: its lowest value */
	int fn;         /* mse: the function its readers apply (ACT_*) */
	float fa, fb;   /* HardSigmoid's alpha and beta */
	int caxis;      /* channel axis of the per-channel means, or -1 */
	int nch;        /* channels (caxis >= 0) */
	double *csum;   /* per-channel sums over the calibration runs */
	double *csq;    /* and sums of squares (the weight clipping's weights) */
	double ccount;  /* values summed per channel */
	bool fp32;      /* --min-cosine: left unquantized */
	bool qn_read;   /* --min-cosine: read only by quantizable nodes (as
			 * their activation; not a graph output) */
	double sens;    /* --min-cosine: error with only this tensor quantized */
};

struct qnode {
	int node;     /* IR node index */
	int act;      /* activation input tensor */
	int weight;   /* weight initializer */
	int bias;     /* bias initializer or -1 */
	int wkind;    /* 0 conv, 1 gemm, 2 matmul */
	int waxis;    /* axis of the output channels in the weight */
	int out;      /* output point tensor */
	int act_node; /* Relu/Clip node absorbed into the output point, or -1 */
	const char *oname; /* the node's output name (the planner may rewire
			    * the IR node during calibration) */
	bool wfp32;   /* --min-cosine: weight (so the node) left in fp32 */
	bool w8;      /* --min-cosine: 8-bit weights where qz_wqmax() gives 7 */
	float *wscale[2]; /* weight scales for qmax 63 / 127 (qz_weight_scales()) */
	double werr[2];   /* and their weighted squared rounding errors */
	bool fp32_out_slow; /* an fp32 output would run its activation
			     * (SiLU, HardSwish, ...) unfused: go fp32 whole */
	double sens;  /* --min-cosine: error with only this weight quantized */
};

struct qctx {
	struct mi_model *m;
	struct mi_graph *g;
	struct qnode *nodes;
	int nnodes;
	struct qtensor *qt;
	int nqt;
	int *qt_of; /* per IR tensor: index in qt or -1 */
	int orig_noutputs; /* graph outputs before calibration added more */
	bool per_channel, qlinear;
	bool bias_correct; /* fold the weight rounding's mean shift into the bias */
	bool equalize;     /* scale channels towards equal spread first */
	int wclip;         /* weight scales: 0 max|w| (default), 1 clipped where
			    * the squared rounding error is least, 2 that error
			    * weighted by the input channels' variances
			    * (--weight-clip) */
	int w8fb;          /* --min-cosine: 7-bit weights try 8 bits before
			    * fp32: 1 in the ranking (w8 units), 2 after the
			    * search (--w8-fallback; 0: off) */
	double percentile; /* 0 = min/max */
	bool mse;          /* ranges minimizing the quantization error */
	bool mse_act;      /* ... after the readers' function (--range mse-act) */
	double min_cos;    /* --min-cosine target (0 = all int8) */
	int wbits;         /* --weight-bits: 8, 7, WBITS_MIXED (qz_wqmax()) or WBITS_AUTO */
	double search_cos; /* the target of the search (before the final
			    * check on all inputs): min_cos, or for tests
			    * --search-target */
	const char *cost;  /* --min-cosine unit costs (--cost): "model" (the
			    * cost model, default), "profile" (timed steps),
			    * "steps" (print the steps for costfit.py, stop),
			    * "macs" (multiply-adds) */
	bool keep_rt;      /* --min-cosine: keep quantized the tensors only fp32
			    * nodes read (--keep-round-trips; default: fp32) */
	bool no_down;      /* --min-cosine: no refinement back to int8 after
			    * the search (--no-refine) */
	int isa_cap;       /* enum mi_isa_cap of every model the quantizer runs
			    * (--isa; the int8 kernels' ISA follows) */
	bool prefixes;     /* test hook: judge every prefix of the ranking
			    * (--list-prefixes) */
	int nthreads;
	const char *path;  /* the fp32 model */
	void *src;         /* its bytes (read once) */
	size_t srclen;
	float **ref;       /* fp32 outputs of each calibration run, concatenated */
	int64_t nref;      /* floats per run */
	int nrefruns;
	bool tag;          /* name every written node after its IR index (the
			    * --min-cosine profile maps times back by name) */
	struct evmemo *memo; /* --min-cosine: per-input cosines of the
			      * configurations evaluated so far */
	int nmemo, cmemo;
	const struct calib *memo_ev; /* the inputs they are of */
	long nruns_done, nruns_memo; /* runs made, cosines taken from the memo */
};

#define HIST_BINS 2048

/* Calibration inputs: a list of per-input arrays (one run each). */
struct calib {
	int nruns;
	struct mi_value **runs; /* [nruns][ninputs] */
	struct mi_tensor *owned; /* npy tensors to free */
	int nowned;
};

#define WBITS_MIXED MI_QUANT_WBITS_MIXED

/* the default: mixed where the int8 kernels are the AVX2 ones (no VNNI:
 * mi_quant_isa(), so MI_CPU_ISA=avx2 gives an AVX2 host's file anywhere),
 * else 8 */
#define WBITS_AUTO MI_QUANT_WBITS_AUTO

#define MINCOS_PROF_RUNS 10 /* timed runs per profile (min per node) */

/* time of a dense conv / Gemm on 8-bit weights (the AVX2 int16 tiles)
 * over its time on 7-bit ones (vpmaddubsw; the profiles' and the cost
 * model's): Documentation/quantization.rst */
#define MINCOS_W8_RATE 1.25

/*
 * A configuration evaluated before: the fp32/int8 flags of every tensor
 * and weight (what qz_rewrite() writes depends on nothing else while the
 * search runs), the written model's length and hash (a check), and the
 * cosine of each evaluation input run on it so far (NaN: not run).  The
 * search meets configurations again (the check on all inputs after the
 * refinement runs the last configuration that passed on the search's
 * inputs, undoing a refinement returns to one), and a run's outputs depend
 * on the model and the input only, so the cosines are taken from here
 * instead of running again: the same numbers, in the same order.
 * MI_MINCOS_MEMO=0 turns it off.
 */
struct evmemo {
	uint8_t *flags;
	size_t len;
	uint64_t hash;
	double *cos;
};

/* A unit of --min-cosine's search: an activation tensor or a weight. */
struct unit {
	bool weight; /* c->nodes[idx]'s weight, else c->qt[idx] */
	bool w8;     /* (a weight) its 8-bit step: "fp" = 8 bits, not 7 */
	int idx;
	bool fp;     /* in fp32 in the configuration at hand */
	double sens; /* error (1 - mean cosine) with only this unit in int8 */
	double cost; /* ns per inference it adds when it alone goes fp32 */
	double rank;
};

/*
 * The time model of a configuration, from five models planned on the real
 * kernels (1 thread; each step costed by the cost model, or with
 * MI_MINCOS_COST=profile timed, min over runs per step):
 *  - all int8 and all fp32: each node's time inside a run of its own kind;
 *  - every activation quantized, every weight fp32: each fp32 node alone
 *    between int8 data (reading a DequantizeLinear, writing a
 *    QuantizeLinear: planar data, layout conversions, nothing fused), and
 *    each quantized tensor's standalone QuantizeLinear and DequantizeLinear;
 *  - every activation quantized, the weights of every other quantizable
 *    node (in execution order) fp32, and the same with the others: each
 *    int8 node between fp32 nodes.
 * A configuration runs each node as in the all-int8 model (a quantizable
 * node with its input and weight quantized, another node with every input
 * on the int8 side) or as in the fp32 one; a node whose inputs or outputs
 * cross to the other kind costs its "alone" time (half of the difference
 * per side); each quantized tensor an fp32 node writes adds a
 * QuantizeLinear, each one an fp32 node reads a DequantizeLinear.
 */
struct qtime {
	double *n8, *n32; /* per IR node: ns in the all-int8 / all-fp32 model */
	double *a8, *a32; /* per IR node: ns alone between the other kind */
	double *q, *dq;   /* per quantized tensor: standalone Q / DQ ns */
	int *kq;          /* per IR node: quantizable node index or -1 */
	int *prod;        /* per IR tensor: producing node or -1 */
	int *cstart, *cons; /* per IR tensor: its consumer nodes are
			     * cons[cstart[t] .. cstart[t + 1] - 1] */
	bool *mode;       /* scratch, per node: runs as in the all-int8 model */
	double *pt;       /* scratch, per node: its predicted time */
	bool *side;       /* scratch, per tensor: readable by an int8 node */
	bool ok;          /* profiles taken (else costs are multiply-adds) */
	bool timed;       /* the profiles' steps timed (MI_MINCOS_COST=profile),
			   * else costed by the model (cm_rate) */
};

/*
 * The cost model (the default; MI_MINCOS_COST=profile times the steps
 * instead): the five models of qtime_init() are planned and run once,
 * which tells which steps the planner made (fused nodes leave no step of
 * their own, a fused activation runs inside its convolution); each step's
 * time is then a fixed function of its kind and sizes:
 *   ns = a * multiply-adds (a step without weights: output channels)
 *        + b * elements read and written + c * weight elements + d
 *        + e * elements read and written beyond CM_BIG
 * with a, b, c, d, e per context (the step in the all-fp32 model, an fp32 step
 * alone between int8 data, in the all-int8 model, an int8 step alone
 * between fp32 data, a standalone QuantizeLinear or DequantizeLinear) and
 * per class of the step's operator (below), fitted by least squares
 * (relative error) to the per-step minima of timed runs of MobileNetV2,
 * EfficientNet-B0, MobileNetV3-Small, ShuffleNetV2 and ResNet-50 at 1
 * thread by tools/quant/costfit.py (Documentation/quantization.rst: refit
 * after kernel changes), one table per int8 ISA: cm_rate_avx512 on an
 * Emerald Rapids core (AVX-512 VNNI; also the generic kernels' table),
 * cm_rate_avx2 on a Zen 3 core (AVX2 + FMA).  No time is measured, so the
 * choice depends on the model, the flags and mi_quant_isa() only (the
 * same on every machine of an int8 ISA; MI_CPU_ISA=avx2 gives an AVX2
 * host's choice on an AVX-512 one).
 */
enum { CM_N32, CM_A32, CM_N8, CM_A8, CM_Q, CM_DQ, CM_NCTX };

enum { CC_CONV, CC_CONV1, CC_DW, CC_DW3S2, CC_DW5, CC_DW5S2, CC_GEMM, CC_POOL, CC_GAP, CC_ADD,
       CC_MUL, CC_SEMUL, CC_SIGM, CC_HSWISH, CC_RELU, CC_MOVE, CC_CONCAT, CC_VIEW, CC_OTHER,
       CC_CONV3W, CC_GEMV, CC_CONV8, CC_CONV1_8, CC_NCLS };

/* elements (read and written) past which a step's data leave the 2 MB L2
 * cache (fp32: 1 MB each side): each one beyond costs e more */
#define CM_BIG 262144.0

extern const char *const cm_ctx_name[];
extern const char *const cm_cls_name[];
extern const double cm_rate_avx512[CM_NCTX][CC_NCLS][5];
extern const double cm_rate_avx2[CM_NCTX][CC_NCLS][5];

__attribute__((format(printf, 1, 2))) int qz_err(const char *fmt, ...);
int qz_consumers(const struct mi_graph *g, int t, int *only);
bool qz_is_graph_output(const struct mi_graph *g, int t);
bool qz_is_weight(const struct mi_graph *g, int t, int ndim_min, int ndim_max);
int qz_calib_random(struct qctx *c, int count, uint64_t seed, struct calib *cal);
int qz_calib_dir(struct qctx *c, const char *dir, struct calib *cal);
void qz_calib_free(struct calib *cal, bool own_data);
void qz_mse_range(const struct qtensor *q, double *lo_out, double *hi_out);
int qz_calibrate(struct qctx *c, struct calib *cal);
int qz_equalize(struct qctx *c, struct calib *cal);
void qz_bias_correction(struct qctx *c, const struct qnode *qn, const float *scale,
			    int axis, const int8_t *wq, double *bias, int64_t nb);
bool qz_unit_stride(const struct mi_node *n);
int qz_wqmax_plain(const struct qctx *c, const struct qnode *qn);
int qz_wqmax(const struct qctx *c, const struct qnode *qn);
const float *qz_weight_scales(struct qctx *c, struct qnode *qn, int qmax, double *err);
int qz_rewrite(struct qctx *c, const char *in_path, const char *out_path,
		   uint8_t **bufp, size_t *lenp);
void qz_memo_free(struct qctx *c);
int qz_eval_model(struct qctx *c, struct calib *ev, int nruns, const int *sel,
		      double stop, double *cmin, double *cmean, double *per);
double qz_judged(const double *per, int n, double *tail, double *se);
void qz_set_unit(struct qctx *c, const struct unit *u, bool fp32);
double qz_node_macs(const struct qctx *c, int k);
void qtime_free(struct qtime *tm);
double qz_predict_time(const struct qctx *c, struct qtime *tm);
int qtime_init(struct qctx *c, struct calib *ev, struct unit *u, int nu,
		      struct qtime *tm);
int qz_mixed_precision(struct qctx *c, struct calib *ev, int n);

#endif /* MI_QUANT_QUANTIZE_IMPL_H */
