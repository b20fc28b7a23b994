// SPDX-License-Identifier: MIT
/* The thread's last error (mi_last_error) and the library version: the
 * bottom of the core, used by the executor and the public API alike. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static __thread char last_error[768];

const char *mi_last_error(void)
{
	return last_error;
}

const char *mi_version(void)
{
	return "0.1.0";
}

int mi_set_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	for (char *c = last_error; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return err;
}

void mi_clear_error(void)
{
	last_error[0] = 0;
}
