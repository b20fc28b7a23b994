/* SPDX-License-Identifier: GPL-2.0-only */
/* User-side helpers shared by the eBPF tools (mistall, milat). */
#ifndef MI_BPF_UTIL_H
#define MI_BPF_UTIL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Set by SIGINT/SIGTERM once mi_bpf_signals() ran. */
extern volatile sig_atomic_t mi_bpf_stop;
void mi_bpf_signals(void);

/*
 * Check that the metainfer: tracepoints have the fields, in the order,
 * the BPF side assumes (mi_job.h), as tracefs shows them on this kernel.  Returns 0, or
 * -errno after printing one line naming the first mismatch.
 */
int mi_bpf_check_formats(const char *prog);

/* libbpf's messages: warnings and errors only, all with @verbose. */
void mi_bpf_libbpf_output(bool verbose);

/* Fork and exec argv[0]; returns the pid or -errno. */
pid_t mi_bpf_spawn(const char *prog, char **argv);
/*
 * Non-blocking: 1 if @pid exited (its exit code, or 128 + signal, in
 * *code), 0 if it is still running.
 */
int mi_bpf_reaped(pid_t pid, int *code);

/* CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns(). */
uint64_t mi_bpf_now_ns(void);
/* Parse a non-negative integer (base 10) into *v; -EINVAL if malformed. */
int mi_bpf_parse_u64(const char *s, uint64_t *v);
/* "0" or "-ETIMEDOUT" for a job status. */
const char *mi_bpf_status_str(int status, char *buf, size_t len);

#endif
