// SPDX-License-Identifier: MIT
/* Winograd F(2x2,3x3) for 3x3 stride-1 convolutions (not yet enabled). */
#include <errno.h>

#include "cpu/conv_impl.h"

int mi_wino_supports(const struct mi_conv_shape *s)
{
	(void)s;
	return 0;
}

int mi_wino_init(struct mi_conv *cv, const float *w)
{
	(void)cv;
	(void)w;
	return -EOPNOTSUPP;
}

void mi_wino_run(const struct mi_conv *cv, const float *x, float *y,
		 const float *res, int act, float lo, float hi, void *ws)
{
}
