# SPDX-License-Identifier: GPL-2.0-only
# libmetainfer: static + shared library from lib/*.c, lib/ops/*.c, lib/cpu/*.c
# (new files in those directories are picked up automatically).

LIB_SRCS := $(wildcard lib/*.c lib/ops/*.c lib/cpu/*.c)
LIB_OBJS := $(patsubst %.c,$(O)/%.o,$(LIB_SRCS))
LIB_CFLAGS := $(CFLAGS_COMMON) -pthread
LIB_A := $(O)/libmetainfer.a

$(O)/lib/%.o: lib/%.c $(wildcard lib/*.h lib/ops/*.h lib/cpu/*.h lib/include/metainfer/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

$(LIB_A): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

ALL += $(LIB_A)
