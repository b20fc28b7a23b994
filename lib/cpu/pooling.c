// SPDX-License-Identifier: MIT
/* 2-D pooling helpers: workspace size, constraints, scalar reference. */
#include <math.h>

#include "cpu/cpu.h"

size_t mi_pool_ws_floats(const struct mi_pool2d *p)
{
	/* matches pool_plane() in kern_impl.h for any VW <= 16 */
	size_t owv = (size_t)(p->ow + 15) / 16 * 16;
	size_t rows = (size_t)(p->oh - 1) * p->s + p->kh;
	size_t hw = owv + p->kw / 2 + 32, pw = owv + p->kw - 1 + 16;

	return owv + (p->s == 1 ? rows * pw : 2 * rows * hw) + 16;
}

int mi_pool_supports(const struct mi_pool2d *p)
{
	if (p->s != 1 && p->s != 2)
		return 0;
	if (p->kh < 1 || p->kw < 1 || p->kh > 16 || p->kw > 16 ||
	    p->oh < 1 || p->ow < 1 || p->ih < 1 || p->iw < 1)
		return 0;
	/* every window must see at least one input element (a window
	 * entirely in padding or past a ceil_mode overhang gives 0 in the
	 * reference, -inf here) */
	if (p->pt >= p->kh || p->pl >= p->kw || p->pb >= p->kh ||
	    p->pr >= p->kw)
		return 0;
	if ((p->oh - 1) * p->s - p->pt >= p->ih ||
	    (p->ow - 1) * p->s - p->pl >= p->iw)
		return 0;
	return 1;
}

void mi_pool_ref(const struct mi_pool2d *p, const float *x, float *y)
{
	int oy, ox, ky, kx;

	for (oy = 0; oy < p->oh; oy++)
		for (ox = 0; ox < p->ow; ox++) {
			int sy = oy * p->s - p->pt, sx = ox * p->s - p->pl;
			int ey = sy + p->kh, ex = sx + p->kw, cnt = 0;
			double acc = p->avg ? 0 : -INFINITY;

			for (ky = sy; ky < ey; ky++)
				for (kx = sx; kx < ex; kx++) {
					double v;

					if (ky < 0 || ky >= p->ih || kx < 0 ||
					    kx >= p->iw)
						continue;
					v = x[ky * p->iw + kx];
					cnt++;
					if (p->avg)
						acc += v;
					else if (v > acc)
						acc = v;
				}
			if (p->avg) {
				if (p->include_pad) {
					int h = (ey < p->ih + p->pb ? ey : p->ih + p->pb) - sy;
					int w = (ex < p->iw + p->pr ? ex : p->iw + p->pr) - sx;

					cnt = h > 0 && w > 0 ? h * w : 0;
				}
				acc = cnt ? acc / cnt : 0;
			} else if (!cnt) {
				acc = 0;
			}
			y[oy * p->ow + ox] = (float)acc;
		}
}
