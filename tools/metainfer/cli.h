/* SPDX-License-Identifier: GPL-2.0-only */
/* Subcommands of the metainfer CLI that live in their own files. */
#ifndef MI_CLI_H
#define MI_CLI_H

#include <stdint.h>
#include <stdio.h>

struct mi_model;

/* metainfer plan (plan.c) */
int mi_cli_plan(int argc, char **argv, const char *prog);
void mi_cli_device_stats(struct mi_model *m, FILE *f);
/* "native", "generic", "avx2", "avx512" -> enum mi_isa_cap */
int mi_cli_parse_isa(const char *s, int *isa);
/* -t / --isa option values: 0 or a one-line error on stderr */
int mi_cli_threads_opt(const char *prog, const char *arg, int32_t *n);
int mi_cli_isa_opt(const char *prog, const char *arg, int32_t *isa);

/* metainfer health (health.c) */
int mi_cli_health(int argc, char **argv, const char *prog);

/* metainfer fingerprint (fingerprint.c) */
int mi_cli_fingerprint(int argc, char **argv, const char *prog);

/* metainfer switch (switch.c) */
int mi_cli_switch(int argc, char **argv, const char *prog);

/* metainfer serve (serve.c) */
int mi_cli_serve(int argc, char **argv, const char *prog);

/* metainfer devices (devices.c) */
int mi_cli_devices(int argc, char **argv, const char *prog);

/* metainfer adapt (adapt.c) */
int mi_cli_adapt(int argc, char **argv, const char *prog);

#endif /* MI_CLI_H */
