// SPDX-License-Identifier: GPL-2.0-only
/*
 * User-side helpers shared by the eBPF tools: the tracepoint layout check,
 * signals, running a command under the tool, small parsers.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/libbpf.h>

#include "mi_bpf_util.h"
#include "mi_job.h"

volatile sig_atomic_t mi_bpf_stop;

static void on_signal(int sig)
{
	mi_bpf_stop = 1;
}

void mi_bpf_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

struct tp_field {
	const char *event; /* system/event */
	const char *name;
	unsigned int offset, size;
};

#define F(ev, st, fld, name)                          \
	{                                             \
		ev, name, offsetof(struct st, fld),   \
			sizeof(((struct st *)0)->fld) \
	}
static const struct tp_field fields[] = {
	F("metainfer/submit", mi_tp_submit, job.dev, "dev"),
	F("metainfer/submit", mi_tp_submit, job.ctx, "ctx"),
	F("metainfer/submit", mi_tp_submit, job.queue, "queue"),
	F("metainfer/submit", mi_tp_submit, job.seqno, "seqno"),
	F("metainfer/submit", mi_tp_submit, job.fence_ctx, "fence_ctx"),
	F("metainfer/submit", mi_tp_submit, job.fence_seqno, "fence_seqno"),
	F("metainfer/run", mi_tp_job, dev, "dev"),
	F("metainfer/run", mi_tp_job, ctx, "ctx"),
	F("metainfer/run", mi_tp_job, seqno, "seqno"),
	F("metainfer/run", mi_tp_job, fence_ctx, "fence_ctx"),
	F("metainfer/run", mi_tp_job, fence_seqno, "fence_seqno"),
	F("metainfer/done", mi_tp_done, job.dev, "dev"),
	F("metainfer/done", mi_tp_done, job.ctx, "ctx"),
	F("metainfer/done", mi_tp_done, job.seqno, "seqno"),
	F("metainfer/done", mi_tp_done, job.fence_ctx, "fence_ctx"),
	F("metainfer/done", mi_tp_done, job.fence_seqno, "fence_seqno"),
	F("metainfer/done", mi_tp_done, status, "status"),
	F("metainfer/done", mi_tp_done, busy_ns, "busy_ns"),
};
#undef F

/* offset and size of field @name in a tracefs format file; -ENOENT if absent */
static int format_field(FILE *f, const char *name, unsigned int *off,
			unsigned int *size)
{
	char line[512];

	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		char *decl = strstr(line, "field:"), *semi, *p;

		if (!decl)
			continue;
		decl += 6;
		semi = strchr(decl, ';');
		if (!semi)
			continue;
		*semi = 0;
		p = strchr(decl, '[');
		if (p)
			*p = 0;
		p = decl + strlen(decl);
		while (p > decl &&
		       (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
			(p[-1] >= 'A' && p[-1] <= 'Z') ||
			(p[-1] >= '0' && p[-1] <= '9')))
			p--;
		if (strcmp(p, name))
			continue;
		p = strstr(semi + 1, "offset:");
		if (!p || sscanf(p, "offset:%u;", off) != 1)
			return -EINVAL;
		p = strstr(p, "size:");
		if (!p || sscanf(p, "size:%u;", size) != 1)
			return -EINVAL;
		return 0;
	}
	return -ENOENT;
}

/*
 * A raw tracepoint is found by its event name alone, built-in ones first:
 * another subsystem's event of the same name would be attached instead.
 */
static int check_names_unique(const char *prog, const char *root)
{
	static const char *const mine[] = { "metainfer:submit", "metainfer:run",
					    "metainfer:done",
					    "gpu_scheduler:drm_sched_job",
					    "gpu_scheduler:drm_run_job" };
	char path[256], line[256];
	size_t i;
	FILE *f;

	snprintf(path, sizeof(path), "%.*s/available_events",
		 (int)(strlen(root) - strlen("/events")), root);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *ev = strchr(line, ':');

		line[strcspn(line, "\n")] = 0;
		if (!ev)
			continue;
		for (i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
			if (strcmp(ev, strchr(mine[i], ':')) ||
			    !strcmp(line, mine[i]))
				continue;
			fprintf(stderr,
				"%s: tracepoint %s has the name of %s: cannot attach to it by name\n",
				prog, line, mine[i]);
			fclose(f);
			return -EEXIST;
		}
	}
	fclose(f);
	return 0;
}

int mi_bpf_check_formats(const char *prog)
{
	static const char *const roots[] = {
		"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"
	};
	const char *root = NULL;
	char path[256];
	size_t i;

	for (i = 0; i < 2 && !root; i++) {
		snprintf(path, sizeof(path), "%s/metainfer", roots[i]);
		if (!access(path, F_OK))
			root = roots[i];
	}
	if (!root) {
		fprintf(stderr,
			"%s: no metainfer tracepoints in tracefs: is metainfer.ko loaded (and tracefs mounted)?\n",
			prog);
		return -ENOENT;
	}
	if (check_names_unique(prog, root))
		return -EEXIST;
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const struct tp_field *t = &fields[i];
		unsigned int off, size;
		FILE *f;
		int ret;

		snprintf(path, sizeof(path), "%s/%s/format", root, t->event);
		f = fopen(path, "r");
		if (!f) {
			fprintf(stderr, "%s: tracepoint %s: %s\n", prog,
				t->event, strerror(errno));
			return -errno;
		}
		ret = format_field(f, t->name, &off, &size);
		fclose(f);
		if (ret || off != t->offset || size != t->size) {
			fprintf(stderr,
				"%s: tracepoint %s field %s is not at offset %u size %u on this kernel\n",
				prog, t->event, t->name, t->offset, t->size);
			return -EPROTO;
		}
	}
	return 0;
}

static bool libbpf_verbose;

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	if (level == LIBBPF_DEBUG && !libbpf_verbose)
		return 0;
	if (level == LIBBPF_INFO && !libbpf_verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

void mi_bpf_libbpf_output(bool verbose)
{
	libbpf_verbose = verbose;
	libbpf_set_print(libbpf_print);
}

pid_t mi_bpf_spawn(const char *prog, char **argv)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s: %s\n", prog, argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

int mi_bpf_reaped(pid_t pid, int *code)
{
	int status;

	if (waitpid(pid, &status, WNOHANG) != pid)
		return 0;
	if (WIFEXITED(status))
		*code = WEXITSTATUS(status);
	else
		*code = 128 + WTERMSIG(status);
	return 1;
}

uint64_t mi_bpf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int mi_bpf_parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

const char *mi_bpf_status_str(int status, char *buf, size_t len)
{
	const char *name = status < 0 ? strerrorname_np(-status) : NULL;

	if (!status)
		snprintf(buf, len, "0");
	else if (name)
		snprintf(buf, len, "-%s", name);
	else
		snprintf(buf, len, "%d", status);
	return buf;
}
