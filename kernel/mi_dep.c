// SPDX-License-Identifier: GPL-2.0-only
/*
 * MetaInfer core: a job's in-fences behind one fence the driver owns.
 *
 * drm_sched waits for a job's dependencies as they are, and runs the job
 * even when one of them failed; at teardown (drm_sched_entity_fini()) it
 * waits uninterruptibly for each, so a job behind a fence that never
 * signals makes its file's close hang.  Instead, a job with in-fences has
 * one dependency, a struct mi_dep, that signals when every in-fence has
 * signalled, with -ECANCELED as soon as one of them fails, and with
 * -ECANCELED when its context is destroyed first (mi_dep_cancel()).
 * run_job() finishes a job whose mi_dep carries an error with that error,
 * without running its ops.
 *
 * References: the job holds one, drm_sched one (as a dependency) and each
 * armed in-fence callback one.  The in-fences are referenced until the
 * mi_dep is released.
 */

#include <linux/slab.h>

#include "mi_drv.h"

/**
 * struct mi_dep_cb - the callback on one in-fence
 * @cb: on @fence
 * @fence: the in-fence (referenced)
 * @dep: the mi_dep it belongs to
 */
struct mi_dep_cb {
	struct dma_fence_cb cb;
	struct dma_fence *fence;
	struct mi_dep *dep;
};

/**
 * struct mi_dep - the dependency fence of a job
 * @base: the fence (first: dma_fence_free() frees it)
 * @lock: the fence's lock
 * @link: in &mi_ctx.deps, for mi_ctx_teardown()
 * @pending: in-fences not signalled yet, plus one while arming
 * @count: entries in @cbs
 * @cbs: one per in-fence
 */
struct mi_dep {
	struct dma_fence base;
	spinlock_t lock;
	struct list_head link;
	atomic_t pending;
	u32 count;
	struct mi_dep_cb cbs[];
};

static const char *mi_dep_driver_name(struct dma_fence *f)
{
	return MI_DRIVER_NAME;
}

static const char *mi_dep_timeline_name(struct dma_fence *f)
{
	return "metainfer-in-fences";
}

static void mi_dep_release(struct dma_fence *f)
{
	struct mi_dep *dep = container_of(f, struct mi_dep, base);
	u32 i;

	for (i = 0; i < dep->count; i++)
		dma_fence_put(dep->cbs[i].fence);
	dma_fence_free(f);
}

static const struct dma_fence_ops mi_dep_ops = {
	.get_driver_name = mi_dep_driver_name,
	.get_timeline_name = mi_dep_timeline_name,
	.release = mi_dep_release,
};

/* Signal @dep with @error (0 or negative), once. */
static void mi_dep_complete(struct mi_dep *dep, int error)
{
	unsigned long fl;

	spin_lock_irqsave(&dep->lock, fl);
	if (!test_bit(DMA_FENCE_FLAG_SIGNALED_BIT, &dep->base.flags)) {
		if (error)
			dma_fence_set_error(&dep->base, error);
		dma_fence_signal_locked(&dep->base);
	}
	spin_unlock_irqrestore(&dep->lock, fl);
}

/* One in-fence signalled: a failure cancels the job at once. */
static void mi_dep_fence_done(struct mi_dep *dep, struct dma_fence *f)
{
	if (f->error)
		mi_dep_complete(dep, -ECANCELED);
	else if (atomic_dec_and_test(&dep->pending))
		mi_dep_complete(dep, 0);
}

static void mi_dep_cb_func(struct dma_fence *f, struct dma_fence_cb *cb)
{
	struct mi_dep *dep = container_of(cb, struct mi_dep_cb, cb)->dep;

	mi_dep_fence_done(dep, f);
	dma_fence_put(&dep->base);
}

/**
 * mi_dep_create() - a dependency fence for @count in-fences
 * @fences: the in-fences; their references move to the mi_dep, the
 *	entries are set to NULL
 * @count: entries in @fences, at least one
 *
 * Nothing waits on the in-fences until mi_dep_arm().  Drop it with
 * mi_dep_put().
 *
 * Return: the mi_dep or an ERR_PTR().
 */
struct mi_dep *mi_dep_create(struct dma_fence **fences, u32 count)
{
	struct mi_dep *dep;
	u32 i;

	dep = kzalloc(struct_size(dep, cbs, count), GFP_KERNEL);
	if (!dep)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&dep->lock);
	dma_fence_init(&dep->base, &mi_dep_ops, &dep->lock,
		       dma_fence_context_alloc(1), 1);
	INIT_LIST_HEAD(&dep->link);
	atomic_set(&dep->pending, count + 1);
	dep->count = count;
	for (i = 0; i < count; i++) {
		dep->cbs[i].fence = fences[i];
		dep->cbs[i].dep = dep;
		INIT_LIST_HEAD(&dep->cbs[i].cb.node);
		fences[i] = NULL;
	}
	return dep;
}

/**
 * mi_dep_arm() - start waiting for the in-fences
 * @dep: from mi_dep_create()
 *
 * @dep may be signalled when this returns (in-fences already signalled).
 */
void mi_dep_arm(struct mi_dep *dep)
{
	u32 i;

	for (i = 0; i < dep->count; i++) {
		struct mi_dep_cb *c = &dep->cbs[i];

		dma_fence_get(&dep->base);
		if (!dma_fence_add_callback(c->fence, &c->cb, mi_dep_cb_func))
			continue;
		/* already signalled */
		dma_fence_put(&dep->base);
		mi_dep_fence_done(dep, c->fence);
	}
	if (atomic_dec_and_test(&dep->pending))
		mi_dep_complete(dep, 0);
}

/**
 * mi_dep_cancel() - stop waiting: signal @dep with -ECANCELED
 * @dep: armed mi_dep (a signalled one stays as it is)
 *
 * Process context; callable with no lock of the in-fences held.
 */
void mi_dep_cancel(struct mi_dep *dep)
{
	u32 i;

	for (i = 0; i < dep->count; i++)
		/* false: the callback ran or runs, and drops its reference */
		if (dma_fence_remove_callback(dep->cbs[i].fence,
					      &dep->cbs[i].cb))
			dma_fence_put(&dep->base);
	mi_dep_complete(dep, -ECANCELED);
}

/**
 * mi_dep_fence() - the fence of a mi_dep
 * @dep: mi_dep
 *
 * Return: @dep's fence (not referenced).
 */
struct dma_fence *mi_dep_fence(struct mi_dep *dep)
{
	return &dep->base;
}

/**
 * mi_dep_put() - drop a reference
 * @dep: mi_dep or NULL
 */
void mi_dep_put(struct mi_dep *dep)
{
	if (dep)
		dma_fence_put(&dep->base);
}

/**
 * mi_ctx_track_dep() - list @dep in its context for mi_ctx_cancel_deps()
 * @ctx: the job's context
 * @dep: the job's mi_dep
 */
void mi_ctx_track_dep(struct mi_ctx *ctx, struct mi_dep *dep)
{
	spin_lock_irq(&ctx->deps_lock);
	list_add_tail(&dep->link, &ctx->deps);
	spin_unlock_irq(&ctx->deps_lock);
}

/**
 * mi_ctx_untrack_dep() - take @dep off its context's list (job release)
 * @ctx: the job's context
 * @dep: the job's mi_dep
 */
void mi_ctx_untrack_dep(struct mi_ctx *ctx, struct mi_dep *dep)
{
	unsigned long fl;

	spin_lock_irqsave(&ctx->deps_lock, fl);
	list_del_init(&dep->link);
	spin_unlock_irqrestore(&ctx->deps_lock, fl);
}

/**
 * mi_ctx_cancel_deps() - cancel every job of @ctx still waiting for an
 *	in-fence (context teardown)
 * @ctx: context, closed to new submits
 *
 * Return: how many mi_deps were cancelled (signalled ones included).
 */
unsigned int mi_ctx_cancel_deps(struct mi_ctx *ctx)
{
	unsigned int n = 0;
	struct mi_dep *dep;

	spin_lock_irq(&ctx->deps_lock);
	while ((dep = list_first_entry_or_null(&ctx->deps, struct mi_dep,
					       link))) {
		list_del_init(&dep->link);
		dma_fence_get(&dep->base);
		spin_unlock_irq(&ctx->deps_lock);
		mi_dep_cancel(dep);
		dma_fence_put(&dep->base);
		n++;
		spin_lock_irq(&ctx->deps_lock);
	}
	spin_unlock_irq(&ctx->deps_lock);
	return n;
}
