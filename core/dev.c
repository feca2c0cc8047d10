/*
 * core/dev.c - RDMA devices: discovery, and the opened ones.
 *
 * Owns the question "is there a device xsock may use" and, per verbs
 * context, the opened device (PD and registered pool). Devices are probed
 * lazily, on the first socket that the rules let use RDMA, never at load
 * time: LD_PRELOAD is inherited by every child, sh and ls included.
 * Context: any thread; the probe runs once per process image (again in a
 * forked child, which must not trust the parent's verbs context).
 */
#include <infiniband/verbs.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "core_int.h"

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static int dev_count = -1;	/* protected by dev_lock; -1: not probed yet */
static struct xs_dev *dev_list; /* protected by dev_lock */
/* librdmacm opened device contexts in this process image (its own, or an
 * ancestor's, inherited across fork): see xs_dev_fork_child() */
static bool dev_ctx_opened, dev_ctx_inherited;

int xs_dev_available(void)
{
	const struct xs_config *cfg = xs_core_cfg();
	struct ibv_device **list;
	int i, n = 0, usable = 0;
	XS_INSIDE(); /* rdma-core loads its providers: their files are theirs */

	pthread_mutex_lock(&dev_lock);
	if (dev_count >= 0)
		goto out_unlock;
	list = ibv_get_device_list(&n);
	if (!list) {
		xs_info("dev", "ibv_get_device_list: %s", strerror(errno));
		dev_count = 0;
		goto out_unlock;
	}
	for (i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);

		if (cfg->device[0] && strcmp(cfg->device, name) != 0)
			continue;
		xs_dbg("dev", "device %s usable", name);
		usable++;
	}
	ibv_free_device_list(list);
	dev_count = usable;
	if (!usable)
		xs_info("dev", "no RDMA device%s%s: sockets use kernel TCP",
			cfg->device[0] ? " named " : "", cfg->device);
out_unlock:
	usable = dev_count;
	pthread_mutex_unlock(&dev_lock);
	return usable;
}

struct xs_dev *xs_dev_open(struct ibv_context *verbs, size_t pool_bytes,
			   int *rc)
{
	struct ibv_device_attr attr;
	struct xs_dev *d;

	pthread_mutex_lock(&dev_lock);
	for (d = dev_list; d; d = d->next)
		if (d->verbs == verbs)
			goto out_unlock;
	d = calloc(1, sizeof(*d));
	if (!d) {
		*rc = -ENOMEM;
		goto out_unlock;
	}
	d->verbs = verbs;
	d->pd = ibv_alloc_pd(verbs);
	if (!d->pd) {
		*rc = errno ? -errno : -ENOMEM; /* libibverbs: NULL, errno */
		goto out_free;
	}
	/* READ depths for rdma_cm's responder_resources/initiator_depth */
	if (ibv_query_device(verbs, &attr) == 0) {
		d->max_rd_atom = (uint8_t)(attr.max_qp_rd_atom > 255
						   ? 255
						   : attr.max_qp_rd_atom);
		d->max_init_rd_atom =
			(uint8_t)(attr.max_qp_init_rd_atom > 255
					  ? 255
					  : attr.max_qp_init_rd_atom);
	}
	*rc = xs_pool_init(&d->pool, &xs_pool_verbs_ops, d->pd, pool_bytes);
	if (*rc)
		goto out_dealloc_pd;
	d->next = dev_list;
	dev_list = d;
	xs_dbg("dev", "device %s opened, pool limit %zu bytes",
	       ibv_get_device_name(verbs->device), pool_bytes);
	goto out_unlock;

out_dealloc_pd:
	ibv_dealloc_pd(d->pd);
out_free:
	free(d);
	d = NULL;
out_unlock:
	pthread_mutex_unlock(&dev_lock);
	return d;
}

bool xs_dev_inherited(void)
{
	return dev_ctx_inherited;
}

void xs_dev_note_rdma_cm(void)
{
	dev_ctx_opened = true;
}

void xs_dev_lock(void)
{
	pthread_mutex_lock(&dev_lock);
}

void xs_dev_unlock(void)
{
	pthread_mutex_unlock(&dev_lock);
}

void xs_dev_fork_child(void)
{
	/* librdmacm's opened contexts are the parent's: the kernel refuses
	 * their write() commands here (EACCES), and librdmacm keeps using
	 * them for every id of this process */
	if (dev_ctx_opened)
		dev_ctx_inherited = true;
	dev_count = -1;
	dev_list = NULL;    /* the parent's verbs objects are not ours to use */
	xs_cm_fork_child(); /* nor its CM channel to read */
}
