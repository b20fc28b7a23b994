// SPDX-License-Identifier: GPL-2.0-only
/*
 * mi_tracecount: attach an eBPF program to every metainfer: tracepoint
 * (libbpf skeleton of mi_tracecount.bpf.c), run a command, print how often
 * each fired.
 *
 *   mi_tracecount [--hold] -- COMMAND [ARGS...]
 *
 * Prints "count NAME N" lines after COMMAND exits and exits with COMMAND's
 * status.  Before them, "missed NAME N" for each program the kernel skipped
 * N times: a tracepoint that fires in an interrupt while another BPF
 * program runs on the same CPU does not run its program (recursion
 * protection), so the count alone can be short.  --hold keeps the
 * programs attached after COMMAND and waits for a line on stdin, so that
 * `bpftool prog show` can look at them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "mi_tracecount.h"
#include "mi_tracecount.skel.h"

static const char *const names[MI_TC_COUNT] = {
	[MI_TC_SUBMIT] = "submit",	   [MI_TC_RUN] = "run",
	[MI_TC_DONE] = "done",		   [MI_TC_TIMEOUT] = "timeout",
	[MI_TC_RESET] = "reset",	   [MI_TC_BO_CREATE] = "bo_create",
	[MI_TC_BO_DESTROY] = "bo_destroy",
};

/* how often the kernel skipped each program (bpf_prog_info.recursion_misses) */
static void print_misses(struct mi_tracecount_bpf *skel)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, skel->obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		const char *name = bpf_program__name(prog);

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
			continue;
		if (!strncmp(name, "mi_", 3))
			name += 3;
		if (info.recursion_misses)
			printf("missed %s %llu\n", name,
			       (unsigned long long)info.recursion_misses);
	}
}

int main(int argc, char **argv)
{
	struct mi_tracecount_bpf *skel;
	int hold = 0, i, status, err, rc = 1;
	pid_t pid;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--hold")) {
			hold = 1;
		} else {
			fprintf(stderr, "usage: mi_tracecount [--hold] -- COMMAND [ARGS...]\n");
			return 2;
		}
	}
	if (i + 1 >= argc) {
		fprintf(stderr, "usage: mi_tracecount [--hold] -- COMMAND [ARGS...]\n");
		return 2;
	}
	skel = mi_tracecount_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "mi_tracecount: cannot load the BPF programs: %s\n",
			strerror(errno));
		return 1;
	}
	err = mi_tracecount_bpf__attach(skel);
	if (err) {
		fprintf(stderr, "mi_tracecount: cannot attach to the metainfer tracepoints: %s\n",
			strerror(-err));
		goto cleanup;
	}
	pid = fork();
	if (pid < 0)
		goto cleanup;
	if (pid == 0) {
		execvp(argv[i + 1], argv + i + 1);
		fprintf(stderr, "mi_tracecount: %s: %s\n", argv[i + 1], strerror(errno));
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid)
		goto cleanup;
	print_misses(skel);
	for (i = 0; i < MI_TC_COUNT; i++)
		printf("count %s %llu\n", names[i], (unsigned long long)skel->bss->counts[i]);
	fflush(stdout);
	if (hold) {
		char line[16];

		if (!fgets(line, sizeof(line), stdin))
			line[0] = 0;
	}
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
cleanup:
	mi_tracecount_bpf__destroy(skel);
	return rc;
}
