/* SPDX-License-Identifier: MIT */
/*
 * Random placement problems for the scheduler's tests and benchmark,
 * deterministic per seed.  Shaped like a CNN/transformer split across
 * one machine: layers in a chain with parallel branches and skip
 * connections; devices 0..D-2 accelerators (2-12x the CPU's speed, a
 * random subset of the 8 op kinds, memory for 30-80% of the model),
 * device D-1 the CPU (every op, all the memory, the most power);
 * transfers over a PCIe-like link (accelerator <-> CPU 12 GB/s + 10 us,
 * accelerator <-> accelerator through the host 8 GB/s + 15 us).
 */
#ifndef MI_SCHED_TEST_GEN_H
#define MI_SCHED_TEST_GEN_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"

struct gen_problem {
	struct mi_sched_problem p;
	struct mi_sched_layer *layers;
	uint32_t *preds;
	struct mi_sched_device *devices;
	double *lat, *power, *xb, *xf;
	uint64_t *mem;
	int32_t *device;	/* a plan array */
};

static inline uint64_t gen_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline double gen_unif(uint64_t *s)
{
	return (double)(gen_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* mem_tight in (0, 1]: share of the model an accelerator holds at most. */
static inline int gen_problem_make(struct gen_problem *g, uint32_t L,
				   uint32_t D, uint64_t seed, double mem_tight)
{
	uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
	double speed[MI_SCHED_MAX_DEVICES], pw[MI_SCHED_MAX_DEVICES];
	uint32_t kinds[MI_SCHED_MAX_DEVICES];
	uint64_t total_mem = 0;
	uint32_t np = 0;

	memset(g, 0, sizeof(*g));
	g->layers = calloc(L, sizeof(*g->layers));
	g->preds = calloc((size_t)L * 2, sizeof(*g->preds));
	g->devices = calloc(D, sizeof(*g->devices));
	g->lat = calloc((size_t)L * D, sizeof(double));
	g->power = calloc((size_t)L * D, sizeof(double));
	g->mem = calloc((size_t)L * D, sizeof(uint64_t));
	g->xb = calloc((size_t)D * D, sizeof(double));
	g->xf = calloc((size_t)D * D, sizeof(double));
	g->device = calloc(L, sizeof(int32_t));
	if (!g->layers || !g->preds || !g->devices || !g->lat || !g->power ||
	    !g->mem || !g->xb || !g->xf || !g->device)
		return -1;
	for (uint32_t d = 0; d < D; d++) {
		bool cpu = d == D - 1;

		speed[d] = cpu ? 1.0 : 2.0 + 10.0 * gen_unif(&s);
		pw[d] = cpu ? 15.0 : 2.0 + 6.0 * gen_unif(&s);
		kinds[d] = 0;
		for (int k = 0; k < 8; k++)
			if (cpu || gen_unif(&s) < 0.8)
				kinds[d] |= 1u << k;
	}
	for (uint32_t l = 0; l < L; l++) {
		struct mi_sched_layer *ly = &g->layers[l];
		double cpu_ns = 20e3 * pow(100.0, gen_unif(&s));	/* 20 us - 2 ms */
		uint64_t mem = (uint64_t)(65536 * pow(128.0, gen_unif(&s)));
		uint32_t kind = gen_next(&s) % 8;

		ly->preds = &g->preds[np];
		if (l > 0) {
			uint32_t a = l >= 2 && gen_unif(&s) < 0.15 ? l - 2 : l - 1;

			g->preds[np++] = a;
			ly->n_preds = 1;
			if (l >= 3 && gen_unif(&s) < 0.25) {
				uint32_t span = l - 1 < 6 ? l - 1 : 6;
				uint32_t b = l - 2 - gen_next(&s) % (span - 1 ? span - 1 : 1);

				if (b != a)
					g->preds[np++] = b, ly->n_preds++;
			}
		}
		ly->out_bytes = (uint64_t)(16384 * pow(128.0, gen_unif(&s)));
		total_mem += mem;
		for (uint32_t d = 0; d < D; d++) {
			double aff = 0.7 + 0.6 * gen_unif(&s);

			if (!(kinds[d] >> kind & 1)) {
				g->lat[l * D + d] = MI_SCHED_UNSUPPORTED;
			} else {
				g->lat[l * D + d] = cpu_ns / speed[d] * (d == D - 1 ? 1.0 : aff);
			}
			g->power[l * D + d] = pw[d] * (0.8 + 0.4 * gen_unif(&s));
			g->mem[l * D + d] = mem;
		}
	}
	for (uint32_t d = 0; d < D; d++) {
		g->devices[d].mem_bytes = d == D - 1 ? (64ull << 30) :
			(uint64_t)(total_mem * mem_tight * (0.375 + 0.625 * gen_unif(&s)));
	}
	for (uint32_t a = 0; a < D; a++)
		for (uint32_t b = 0; b < D; b++) {
			bool host = a == D - 1 || b == D - 1;

			if (a == b)
				continue;
			g->xb[a * D + b] = host ? 1.0 / 12.0 : 1.0 / 8.0;
			g->xf[a * D + b] = host ? 10e3 : 15e3;
		}
	g->p = (struct mi_sched_problem){
		.n_layers = L, .n_devices = D, .layers = g->layers,
		.devices = g->devices, .lat_ns = g->lat, .mem_bytes = g->mem,
		.power_w = g->power, .xfer_ns_per_byte = g->xb,
		.xfer_fixed_ns = g->xf,
	};
	return 0;
}

static inline void gen_problem_free(struct gen_problem *g)
{
	free(g->layers);
	free(g->preds);
	free(g->devices);
	free(g->lat);
	free(g->power);
	free(g->mem);
	free(g->xb);
	free(g->xf);
	free(g->device);
}

static inline struct mi_sched_plan gen_plan(struct gen_problem *g)
{
	return (struct mi_sched_plan){ .n_layers = g->p.n_layers,
				       .device = g->device };
}

#endif /* MI_SCHED_TEST_GEN_H */
