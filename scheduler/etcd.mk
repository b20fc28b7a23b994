# SPDX-License-Identifier: GPL-2.0-only
# The registry's etcd backend (scheduler/etcd*.c, in libmisched.a) and its
# test: etcd on 127.0.0.1 with a temporary data dir, two node processes,
# one killed, its streams re-planned onto the other.
#
#   make check-etcd   about 9 s; skips (passing) when etcd is not installed

ETCD_BINS := $(O)/scheduler/tests/etcd-node $(O)/scheduler/tests/etcd-test

ALL += $(ETCD_BINS)
CHECKS += check-etcd

.PHONY: check-etcd
check-etcd: $(ETCD_BINS)
	$(O)/scheduler/tests/etcd-test --node-bin $(O)/scheduler/tests/etcd-node
