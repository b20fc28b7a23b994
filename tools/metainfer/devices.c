// SPDX-License-Identifier: GPL-2.0-only
/*
 * metainfer devices: every device libmetainfer can run on (the CPU and
 * each MetaInfer render node), as a table or as one JSON document.
 * Documented in Documentation/cli.rst and Documentation/devices.rst.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "metainfer/metainfer.h"
#include "drm/metainfer_accel.h"

static const char *const op_names[DRM_METAINFER_OP_COUNT] = {
	[DRM_METAINFER_OP_CONV2D] = "conv2d",
	[DRM_METAINFER_OP_GEMM] = "gemm",
	[DRM_METAINFER_OP_ADD] = "add",
	[DRM_METAINFER_OP_MUL] = "mul",
	[DRM_METAINFER_OP_RELU] = "relu",
	[DRM_METAINFER_OP_CLIP] = "clip",
	[DRM_METAINFER_OP_MAXPOOL] = "maxpool",
	[DRM_METAINFER_OP_AVGPOOL] = "avgpool",
	[DRM_METAINFER_OP_REQUANTIZE] = "requantize",
	[DRM_METAINFER_OP_COPY] = "copy",
	[DRM_METAINFER_OP_LUT] = "lut",
};

static const char *const dtype_names[DRM_METAINFER_DTYPE_COUNT] = {
	[DRM_METAINFER_DTYPE_INT8] = "int8",
	[DRM_METAINFER_DTYPE_UINT8] = "uint8",
	[DRM_METAINFER_DTYPE_INT16] = "int16",
	[DRM_METAINFER_DTYPE_INT32] = "int32",
};

/* Names of the set bits of mask, separated by sep ("" if none); JSON
 * quotes them when quote is set. */
static void mask_names(char *buf, size_t len, uint64_t mask,
		       const char *const *names, int count, const char *sep,
		       bool quote)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < count && off < len; i++) {
		if (!(mask & (1ull << i)) || !names[i])
			continue;
		off += snprintf(buf + off, len - off, "%s%s%s%s",
				off ? sep : "", quote ? "\"" : "", names[i],
				quote ? "\"" : "");
	}
}

static void json_str(const char *key, const char *s, bool comma)
{
	printf("\"%s\": \"", key);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	printf("\"%s", comma ? ", " : "");
}

static void print_json(const struct mi_device_info *v, bool last)
{
	char ops[256], dts[128];

	mask_names(ops, sizeof(ops), v->op_mask, op_names,
		   DRM_METAINFER_OP_COUNT, ", ", true);
	mask_names(dts, sizeof(dts), v->dtype_mask, dtype_names,
		   DRM_METAINFER_DTYPE_COUNT, ", ", true);
	printf("  {");
	json_str("name", v->name, true);
	json_str("driver", v->driver, true);
	json_str("backend", v->backend, true);
	json_str("node", v->node, true);
	json_str("kind", v->kind, true);
	json_str("personality", v->personality, true);
	printf("\"fw_version\": %" PRIu64 ", \"ops\": [%s], \"dtypes\": [%s], "
	       "\"op_mask\": %" PRIu64 ", \"dtype_mask\": %" PRIu64
	       ", \"layout_mask\": %" PRIu64 ", \"preferred_layout\": %u, "
	       "\"queues\": %u, \"macs_per_cycle\": %" PRIu64
	       ", \"clock_khz\": %" PRIu64 ", \"sram_bytes\": %" PRIu64
	       ", \"dma_bw\": %" PRIu64 ", \"dma_burst\": %" PRIu64 ", ",
	       v->fw_version, ops, dts, v->op_mask, v->dtype_mask,
	       v->layout_mask, v->preferred_layout, v->num_queues,
	       v->macs_per_cycle, v->clock_khz, v->sram_bytes, v->dma_bw,
	       v->dma_burst);
	if (v->temperature_mc == INT64_MIN)
		printf("\"temperature_mc\": null, ");
	else
		printf("\"temperature_mc\": %" PRId64 ", ", v->temperature_mc);
	if (v->power_mw == INT64_MIN)
		printf("\"power_mw\": null, ");
	else
		printf("\"power_mw\": %" PRId64 ", ", v->power_mw);
	printf("\"up\": %s}%s\n", v->up ? "true" : "false", last ? "" : ",");
}

static void print_row(const struct mi_device_info *v)
{
	char ops[256], dts[128], temp[32] = "-", pow[32] = "-";

	mask_names(ops, sizeof(ops), v->op_mask, op_names,
		   DRM_METAINFER_OP_COUNT, ",", false);
	mask_names(dts, sizeof(dts), v->dtype_mask, dtype_names,
		   DRM_METAINFER_DTYPE_COUNT, ",", false);
	if (v->temperature_mc != INT64_MIN)
		snprintf(temp, sizeof(temp), "%.1fC", v->temperature_mc / 1000.0);
	if (v->power_mw != INT64_MIN)
		snprintf(pow, sizeof(pow), "%" PRId64 "mW", v->power_mw);
	printf("%-6s %-10s %-20s %-4s %-5s %8" PRIu64 " %6" PRIu64
	       " %8" PRIu64 " %8.2f %7s %7s  %#" PRIx64 " %s\n",
	       v->name, v->driver, *v->node ? v->node : "-", v->kind,
	       v->up ? "up" : "down", v->macs_per_cycle,
	       v->clock_khz / 1000, v->sram_bytes / 1024, v->dma_bw / 1e9,
	       temp, pow, v->fw_version, v->personality);
	if (*ops || *dts)
		printf("       ops: %s  dtypes: %s\n", *ops ? ops : "-",
		       *dts ? dts : "-");
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s devices [--json]\n"
		"\n"
		"Every device models can run on: the CPU (always first) and each\n"
		"MetaInfer accelerator (a render node whose DRM driver is metainfer),\n"
		"with its capabilities (GET_PARAM) and live temperature and power\n"
		"('-' / null: no sensor).  The names are what --devices takes.\n"
		"\n"
		"  -j, --json   one JSON document: {\"devices\": [...]}\n"
		"  -h, --help   this text\n",
		prog);
}

int mi_cli_devices(int argc, char **argv, const char *prog)
{
	static const struct option lopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	int c, n;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", lopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout, prog);
			return 0;
		default:
			usage(stderr, prog);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s devices: unexpected argument '%s'\n", prog,
			argv[optind]);
		usage(stderr, prog);
		return 2;
	}
	n = mi_device_count();
	if (n < 0) {
		fprintf(stderr, "%s devices: %s\n", prog, mi_last_error());
		return 1;
	}
	if (json)
		printf("{\"devices\": [\n");
	else
		printf("%-6s %-10s %-20s %-4s %-5s %8s %6s %8s %8s %7s %7s  %s\n",
		       "NAME", "DRIVER", "NODE", "KIND", "STATE", "MACS/cy",
		       "MHz", "SRAM KiB", "DMA GB/s", "TEMP", "POWER",
		       "FIRMWARE PERSONALITY");
	for (int i = 0; i < n; i++) {
		struct mi_device_info v;

		if (mi_device_info(i, &v)) {
			fprintf(stderr, "%s devices: %s\n", prog, mi_last_error());
			return 1;
		}
		if (json)
			print_json(&v, i == n - 1);
		else
			print_row(&v);
	}
	if (json)
		printf("]}\n");
	return 0;
}
