# SPDX-License-Identifier: GPL-2.0-only
# lib/device: the device interface (the CPU, MetaInfer render nodes through
# libdrm + liburing, the userspace emulation of the uapi) and the lowering
# of quantized ops to the command stream.  Objects go into libmetainfer.a
# through an extra prerequisite of $(LIB_A), as lib/plan/plan.mk does.

DEVICE_SRCS := $(wildcard lib/device/*.c)
DEVICE_OBJS := $(patsubst %.c,$(O)/%.o,$(DEVICE_SRCS))

$(DEVICE_OBJS): $(wildcard lib/device/*.h lib/*.h lib/include/metainfer/*.h) \
	uapi/drm/metainfer_accel.h
$(LIB_A): $(DEVICE_OBJS)
-include lib/device/tests/devices.mk

-include lib/device/tests/lower.mk
