/* SPDX-License-Identifier: MIT */
/* Private to lib/cpu/: conv algorithms implemented outside conv.c. */
#ifndef MI_CPU_CONV_IMPL_H
#define MI_CPU_CONV_IMPL_H

#include "cpu/cpu.h"

int mi_wino_supports(const struct mi_conv_shape *s);
/* Transform weights into cv->wt, set cv->ws_size. */
int mi_wino_init(struct mi_conv *cv, const float *w);
void mi_wino_run(const struct mi_conv *cv, const float *x, float *y,
		 const float *res, int act, float lo, float hi, void *ws);

#endif /* MI_CPU_CONV_IMPL_H */
