/* The gradient of a data-parallel step: summed over micro-batches and ranks in one fixed order,
 * sent in buckets while the backward pass still runs, the optimizer sharded over the ranks
 * (ZeRO-1) or not, and its global norm.
 *
 * Order. The global batch is cut into n micro-batches, the rank of slot s of W (train/comm.h:
 * slot = node + place * nodes) holding those numbered j = s, s + W, ...; each micro-batch's
 * gradient is computed alone (into a buffer of its own), and the n of them are added by the
 * tree of tupe_tree_sum_f (backend/pointwise.h): each rank adds its own by that tree
 * (computing them in the order that needs the fewest buffers, post-order: 0 4 2 6 1 5 3 7 for
 * eight), then the ranks' sums are added within each node by the same tree over the places,
 * and the nodes' sums by the tree over the nodes (tupe_comm_dev_reduce). With W a power of
 * two, N nodes of L ranks, the tree over slots node + place * N is the tree over the places
 * then the nodes, and that is exactly the sum one process computes: the weights do not depend
 * on the number of ranks or nodes, on which rank is on which node, nor on the timing, bit for
 * bit (fp32 and bf16 alike). Otherwise they depend on W and N (the trees' shapes), and still
 * on nothing else. NCCL's own reduction (TUPE_REDUCE_NCCL) sums in its order.
 *
 * Buckets. The flat gradient buffer is cut at layer boundaries into buckets of about
 * bucket_bytes; as the backward pass finishes each (it goes from the heads down to the
 * embeddings, model.h's grad-ready calls), the bucket's last micro-batch sums are added and it
 * is sent (tupe_comm_dev_reduce: on GPUs an all-to-all and a tree-sum kernel on a second
 * stream, while the compute stream goes on with the layers below). Only the last
 * micro-batch of a step communicates. Every rank ends with its piece (1/W of each bucket, that
 * of its slot) of the summed gradient; without sharding, the pieces are then gathered, so that every rank
 * updates everything alike; with ZeRO-1, each rank updates the parameters, fp32 master and
 * moments of its pieces only, and the parameters are gathered after the update, bucket by
 * bucket from the embeddings up, while the next forward pass runs: each of its layers waits
 * for the gathers of its own parameters only (model.h's params-need calls).
 *
 * Norm. The squares are summed per run of TUPE_GRADSYNC_RUN elements, each rank those of its
 * pieces, the runs' sums added by tupe_tree_sum_d's tree (tupe_comm_dev_sums): the same on one
 * rank or many, sharded or not; on GPUs the device sums them, combined by NCCL with the
 * step's losses, and the host reads the norm and the losses at once. */
#ifndef TUPE_GRADSYNC_H
#define TUPE_GRADSYNC_H

#include <stddef.h>

#include "base/error.h"
#include "model/model.h"
#include "model/optim.h"
#include "train/comm.h"

#define TUPE_GRADSYNC_RUN 4096

typedef struct tupe_gradsync tupe_gradsync;

typedef struct tupe_gradsync_opts {
    int micro;                   /* micro-batches per rank per step */
    int zero;                    /* shard the optimizer (ZeRO-1) */
    size_t bucket_bytes;         /* a bucket's size, about (0: 25 MiB) */
} tupe_gradsync_opts;

/* The multiple the model's flat buffers need (tupe_capacity.flat_multiple): buckets and their
 * pieces are whole runs. */
size_t tupe_gradsync_flat_multiple(int world);

/* For model m (made with that flat_multiple) on comm c, after tupe_comm_dev_open. */
int tupe_gradsync_create(tupe_gradsync **g, tupe_model *m, tupe_comm *c,
                         const tupe_gradsync_opts *o, tupe_err *e);
void tupe_gradsync_free(tupe_gradsync *g);
/* The elements this rank updates, as ranges [r[2i], r[2i+1]) (its pieces under ZeRO-1, else
 * everything): for tupe_adamw_create_ranges. */
const size_t *tupe_gradsync_ranges(const tupe_gradsync *g, size_t *nranges);
int tupe_gradsync_buckets(const tupe_gradsync *g);

/* A step: for i = 0 .. micro-1, the micro-batch numbered tupe_gradsync_order(g, i) of this
 * rank: tupe_gradsync_begin, its backward pass (or none, when it has nothing to learn from:
 * its gradient is zero), tupe_gradsync_end. Then tupe_gradsync_finish: the summed gradient
 * (this rank's pieces of it under ZeRO-1) is in tupe_model_grads, *norm its norm, and the nvals
 * values of vals (each given by one rank, zeros on the others: the micro-batches' losses; or
 * integers: the next step's counts) their sums over the ranks, the first ndv of them given as
 * device doubles at dvals (the losses the forward passes left there, model.h), the others in
 * vals[ndv..nvals); then the optimizer; then tupe_gradsync_share. */
int tupe_gradsync_order(const tupe_gradsync *g, int i);
int tupe_gradsync_begin(tupe_gradsync *g, int i, tupe_err *e);
int tupe_gradsync_end(tupe_gradsync *g, int i, tupe_err *e);
int tupe_gradsync_finish(tupe_gradsync *g, const tupe_dev *dvals, size_t ndv, double *vals,
                         size_t nvals, double *norm, tupe_err *e);
/* Queues the gathers (ZeRO-1); they are waited for by the forward passes that need them, by
 * the next tupe_gradsync_finish, and by tupe_gradsync_gather_state. Anything else that reads
 * the parameters first calls tupe_gradsync_join. */
int tupe_gradsync_share(tupe_gradsync *g, tupe_err *e);
int tupe_gradsync_join(tupe_gradsync *g, tupe_err *e);

/* Under ZeRO-1, before a checkpoint: the fp32 master weights made whole on every rank, and
 * *moments (malloc'd: exp_avg then exp_avg_sq, the layout's total floats each) the whole
 * moments of optimizer o. NULL *moments without sharding (the optimizer has them all). */
int tupe_gradsync_gather_state(tupe_gradsync *g, tupe_adamw *o, float **moments, tupe_err *e);

#endif
