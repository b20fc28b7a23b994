// SPDX-License-Identifier: MIT
/*
 * `metainfer quantize`: the command line of the post-training quantizer
 * (lib/quant/quantize.c, mi_quantize()).  Parses the options into
 * struct mi_quant_opts; everything else is the library's.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metainfer/metainfer.h"
#include "quant/quant.h"

/* One-line error on stderr; returns 1 (the exit status). */
__attribute__((format(printf, 1, 2))) static int qerr(const char *fmt, ...)
{
	va_list ap;

	fputs("metainfer quantize: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: metainfer quantize MODEL.onnx (--calib DIR | --calib-random N) -o OUT.onnx\n"
		"                          [--format qdq|qlinear] [--per-channel|--per-tensor]\n"
		"                          [--range mse|mse-act|minmax | --percentile P] [--no-bias-correction]\n"
		"                          [--no-equalize] [--weight-bits 7|8|mixed|auto]\n"
		"                          [--min-cosine C] [--seed S] [--threads N]\n"
		"                          [--isa generic|avx2|avx512]\n"
		"\n"
		"Post-training static int8 quantization: uint8 asymmetric activations\n"
		"(ranges calibrated by running the fp32 model), int8 symmetric weights of\n"
		"Conv/Gemm/MatMul (per output channel unless --per-tensor), int32 biases.\n"
		"\n"
		"  --calib DIR          calibration inputs: every DIR/*.npy (one-input models)\n"
		"  --calib-random N     N seeded random inputs, uniform in [-1, 1)\n"
		"  -o, --output FILE    the quantized model\n"
		"  --format qdq         QuantizeLinear/DequantizeLinear pairs (default)\n"
		"  --format qlinear     QLinearConv/QLinearMatMul where possible\n"
		"  --per-channel        per output channel weight scales (default)\n"
		"  --per-tensor         one weight scale per tensor\n"
		"  --range mse          activation ranges clipped where the quantization error\n"
		"                       (clipping + rounding) of the calibration values is\n"
		"                       smallest (default)\n"
		"  --range mse-act      the same, measured after the readers' HardSigmoid,\n"
		"                       HardSwish, Sigmoid or SiLU where they apply one\n"
		"  --range minmax       activation ranges = calibration min/max\n"
		"  --percentile P       clip activation ranges at the P-th percentile of |x|\n"
		"                       (e.g. 99.99) instead of min/max\n"
		"  --no-bias-correction keep biases as they are (default: add the mean output\n"
		"                       shift that weight rounding causes, from calibration)\n"
		"  --no-equalize        keep the channels as they are (default: where Relu,\n"
		"                       pooling and Add between Conv/Gemm layers allow, scale\n"
		"                       each channel towards equal spread, an fp32-equivalent\n"
		"                       rewrite that lowers the per-tensor activation error)\n"
		"  --weight-bits B      8: weights in [-127, 127]; 7: in [-63, 63], where\n"
		"                       the AVX2 int8 kernels (hosts without VNNI) multiply\n"
		"                       them by vpmaddubsw, exactly and ~1.2-1.3x faster on\n"
		"                       dense convs (twice the weight rounding error);\n"
		"                       mixed: 7 bits where the AVX2 kernels take that route\n"
		"                       (dense convs, Gemm/MatMul on 5+ rows), 8 for depthwise\n"
		"                       convs, 3x3 stride-1 convs (Winograd) and GEMVs;\n"
		"                       auto (default): mixed where this host's int8 kernels\n"
		"                       are the AVX2 ones (MI_CPU_ISA=avx2 selects them on\n"
		"                       any x86 host), else 8.  So by default the file\n"
		"                       depends on the host's ISA; VNNI kernels run any of\n"
		"                       them at the same speed; with --min-cosine, the 7-bit\n"
		"                       weights the search leaves in fp32 try 8 bits\n"
		"  --min-cosine C       mixed precision: leave in fp32 the tensors and weights\n"
		"                       whose quantization costs most accuracy per unit of\n"
		"                       time (a cost model of the planned kernels at 1\n"
		"                       thread, nothing timed: the same model and options\n"
		"                       give the same file), as few as give an output\n"
		"                       cosine similarity >= C with the fp32 model (e.g. 0.99)\n"
		"                       on the evaluation inputs (the calibration inputs; with\n"
		"                       --calib-random at least 200 drawn alike for the search\n"
		"                       and 100 more for a final check, which must also pass\n"
		"                       on those 100 alone): both their minimum and a tail\n"
		"                       estimate (normal fit of the upper half of the log\n"
		"                       errors 1 - cosine: the minimum a fresh draw of 100\n"
		"                       inputs keeps with probability 0.9, plus 1.28 jackknife\n"
		"                       standard errors) must reach C\n"
		"  --seed S             seed of --calib-random (default 1234)\n"
		"  --threads N          threads for the calibration runs; --min-cosine runs\n"
		"                       N evaluation inputs at a time (default: the cores)\n"
		"  --isa ISA            run every model (calibration, search) with the int8\n"
		"                       and fp32 kernels of ISA generic, avx2 or avx512 at\n"
		"                       most (default: the CPU's); --weight-bits auto and\n"
		"                       the cost model follow it\n"
		"\n"
		"Search and test options (defaults are the tuned ones):\n"
		"  --weight-clip 0|1|2  weight scales: max|w| (0, default), clipped where the\n"
		"                       rounding error is least (1), that error weighted by\n"
		"                       the input channels' variances (2)\n"
		"  --w8-fallback 0|1|2  --min-cosine: 7-bit weights try 8 bits before fp32\n"
		"                       after the search (2, default), as units of the\n"
		"                       ranking (1), or not (0)\n"
		"  --cost MODE          --min-cosine unit costs: model (default), profile\n"
		"                       (timed steps), macs, steps (print the planned steps\n"
		"                       for tools/quant/costfit.py and stop)\n"
		"  --keep-round-trips   keep quantized the tensors only fp32 nodes read\n"
		"  --no-refine          no refinement back to int8 after the search\n"
		"  --search-target C    search for C, check the result for --min-cosine\n"
		"  --list-prefixes      judge every prefix of the ranking (tests)\n"
		"  --all-fp32           write every unit fp32 (tests)\n"
		"  --decompose[=2]      print the error of each class of tensors, write\n"
		"                       nothing\n");
}

int mi_quant_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "calib", required_argument, NULL, 'c' },
		{ "calib-random", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "per-channel", no_argument, NULL, 'P' },
		{ "per-tensor", no_argument, NULL, 'T' },
		{ "percentile", required_argument, NULL, 'p' },
		{ "no-bias-correction", no_argument, NULL, 'B' },
		{ "no-equalize", no_argument, NULL, 'E' },
		{ "range", required_argument, NULL, 'R' },
		{ "seed", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "min-cosine", required_argument, NULL, 'm' },
		{ "weight-bits", required_argument, NULL, 'W' },
		{ "isa", required_argument, NULL, 'I' },
		{ "weight-clip", required_argument, NULL, 'C' },
		{ "w8-fallback", required_argument, NULL, 'F' },
		{ "cost", required_argument, NULL, 'K' },
		{ "keep-round-trips", no_argument, NULL, 'X' },
		{ "no-refine", no_argument, NULL, 'N' },
		{ "search-target", required_argument, NULL, 'S' },
		{ "list-prefixes", no_argument, NULL, 'L' },
		{ "all-fp32", no_argument, NULL, 'A' },
		{ "decompose", optional_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL;
	struct mi_quant_opts o;
	long v;
	int opt;
	char *end;

	mi_quant_opts_default(&o);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'c':
			o.calib = optarg;
			break;
		case 'r':
			v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 100000)
				return qerr("--calib-random: '%s' is not a count in 1..100000", optarg);
			o.nrandom = (int)v;
			break;
		case 'o':
			out = optarg;
			break;
		case 'f':
			if (!strcmp(optarg, "qdq"))
				o.qlinear = false;
			else if (!strcmp(optarg, "qlinear"))
				o.qlinear = true;
			else
				return qerr("--format: '%s' is not qdq or qlinear", optarg);
			break;
		case 'P':
			o.per_channel = true;
			break;
		case 'T':
			o.per_channel = false;
			break;
		case 'B':
			o.bias_correct = false;
			break;
		case 'E':
			o.equalize = false;
			break;
		case 'R':
			o.percentile = 0;
			o.mse = false;
			o.mse_act = false;
			if (!strcmp(optarg, "mse") || !strcmp(optarg, "mse-act"))
				o.mse = true;
			else if (strcmp(optarg, "minmax"))
				return qerr("--range: '%s' is not minmax, mse or mse-act", optarg);
			o.mse_act = !strcmp(optarg, "mse-act");
			break;
		case 'p':
			o.mse = false;
			o.percentile = strtod(optarg, &end);
			if (*end || !(o.percentile > 50 && o.percentile <= 100))
				return qerr("--percentile: '%s' is not in (50, 100]", optarg);
			break;
		case 's':
			o.seed = strtol(optarg, &end, 10);
			if (*end || o.seed < 0)
				return qerr("--seed: '%s' is not a non-negative number", optarg);
			break;
		case 't':
			v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > 1024)
				return qerr("--threads: '%s' is not a thread count", optarg);
			o.nthreads = (int)v;
			break;
		case 'm':
			o.min_cos = strtod(optarg, &end);
			if (*end || !(o.min_cos > 0 && o.min_cos <= 1))
				return qerr("--min-cosine: '%s' is not in (0, 1]", optarg);
			break;
		case 'W':
			if (strcmp(optarg, "7") && strcmp(optarg, "8") && strcmp(optarg, "mixed") &&
			    strcmp(optarg, "auto"))
				return qerr("--weight-bits: '%s' is not 7, 8, mixed or auto", optarg);
			o.wbits = optarg[0] == '7' ? 7 : optarg[0] == '8' ? 8 :
				  optarg[0] == 'm' ? MI_QUANT_WBITS_MIXED : MI_QUANT_WBITS_AUTO;
			break;
		case 'I':
			if (!strcmp(optarg, "generic"))
				o.isa = MI_ISA_CAP_GENERIC;
			else if (!strcmp(optarg, "avx2"))
				o.isa = MI_ISA_CAP_AVX2;
			else if (!strcmp(optarg, "avx512"))
				o.isa = MI_ISA_CAP_AVX512;
			else
				return qerr("--isa: '%s' is not generic, avx2 or avx512", optarg);
			break;
		case 'C':
			if (strcmp(optarg, "0") && strcmp(optarg, "1") && strcmp(optarg, "2"))
				return qerr("--weight-clip: '%s' is not 0, 1 or 2", optarg);
			o.wclip = optarg[0] - '0';
			break;
		case 'F':
			if (strcmp(optarg, "0") && strcmp(optarg, "1") && strcmp(optarg, "2"))
				return qerr("--w8-fallback: '%s' is not 0, 1 or 2", optarg);
			o.w8fb = optarg[0] - '0';
			break;
		case 'K':
			if (strcmp(optarg, "model") && strcmp(optarg, "profile") &&
			    strcmp(optarg, "macs") && strcmp(optarg, "steps"))
				return qerr("--cost: '%s' is not model, profile, macs or steps", optarg);
			o.cost = optarg;
			break;
		case 'X':
			o.keep_round_trips = true;
			break;
		case 'N':
			o.no_refine = true;
			break;
		case 'S':
			o.search_cos = strtod(optarg, &end);
			if (*end || !(o.search_cos > 0 && o.search_cos <= 1))
				return qerr("--search-target: '%s' is not in (0, 1]", optarg);
			break;
		case 'L':
			o.list_prefixes = true;
			break;
		case 'A':
			o.all_fp32 = true;
			break;
		case 'D':
			o.decompose = optarg && !strcmp(optarg, "2") ? 2 : 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc || !out || (!o.calib == !o.nrandom)) {
		usage(stderr);
		return 2;
	}
	return mi_quantize(argv[optind], out, &o);
}
