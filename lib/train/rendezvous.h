/* The ranks of a job meeting without MPI, and watching each other (train/comm uses it).
 *
 * Rank 0 listens on TCP; every other rank connects to it twice: a data connection for the
 * host collectives (through rank 0, in rank order) and a control connection for liveness;
 * and, once met, every pair of ranks may connect directly (tupe_rdzv_mesh).
 * Where rank 0 is comes from the launcher's environment (MASTER_ADDR and MASTER_PORT, as
 * torchrun and Slurm scripts set them), or from a file on a shared file system that rank 0
 * writes (its host name, a free port and its IPv4 addresses), or from the caller (under MPI,
 * rank 0's address goes to the others through MPI). The others try the host name first, then
 * those addresses: a name need not resolve where every rank runs (containers, chroots).
 *
 * Only the job's ranks are let in: every connection proves, both ways, that it holds the job's
 * secret (train/jobauth.h) before anything else is read or sent. The secret is the launcher's
 * (TUPE_JOB_SECRET, or MPI's broadcast: `key`), or rank 0 makes one and writes it into the
 * job's file (train/rdzvfile.h: the rendezvous file, or `keyfile`), removed as soon as every
 * rank has come, when the listening socket closes too. A connection has a few seconds to prove
 * itself, a bounded number may wait, and one that fails is dropped without harm to the job.
 * Then the handshake checks that every rank was started with the same world size and job
 * token, and that no rank number comes twice; a rank that does not come within the timeout is
 * named.
 *
 * Liveness: on every rank a thread sends a heartbeat with the rank's step to rank 0 every
 * second, and rank 0 sends the table of all steps back. A rank whose connection closes without
 * a goodbye (it exited or was killed), that says it failed, or that is silent for the timeout
 * (stopped, or its machine gone) is a failure: rank 0 tells every rank why, and each rank's
 * failure function is called once, from that thread (the collectives then abort NCCL). The
 * waits of the host collectives end too, with that reason. */
#ifndef TUPE_RENDEZVOUS_H
#define TUPE_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "train/jobauth.h"

typedef struct tupe_rdzv tupe_rdzv;

/* Called on every rank once: on rank 0 after it listens, with addr ("HOST PORT") to pass on;
 * on the others before they connect, to fill addr (cap bytes). 0 or an error (e set). */
typedef int (*tupe_rdzv_exchange_fn)(void *ctx, char *addr, size_t cap, tupe_err *e);

typedef struct tupe_rdzv_opts {
    int rank, world;
    const char *host;            /* rank 0's host for the others (MASTER_ADDR), or NULL */
    int port;                    /* rank 0's port (MASTER_PORT); 0: a free one */
    const char *file;            /* or: a shared file naming rank 0's address, or NULL */
    tupe_rdzv_exchange_fn exchange; /* or: the caller passes the address on */
    void *exchange_ctx;
    double timeout;              /* seconds for the others to come, for a host collective to
                                    move, and of a rank's silence */
    uint64_t job;                /* the job's token: ranks of another job are turned away */
    const tupe_jobkey *key;      /* the job's key, or NULL: rank 0 makes a secret and writes it
                                    into `file` or `keyfile`, where the others read it */
    const char *keyfile;         /* with host: a file that carries only the secret, or NULL */
    const char *file_what;       /* the file's name in messages (default TUPE_RENDEZVOUS_FILE) */
} tupe_rdzv_opts;

/* The most ranks a job may have (before anything is allocated for them). */
#define TUPE_RDZV_MAX_WORLD 65536

/* Whether host (MASTER_ADDR) names the loopback only: then rank 0 is reached from its own
 * machine alone. */
int tupe_rdzv_loopback(const char *host);

int tupe_rdzv_open(tupe_rdzv **z, const tupe_rdzv_opts *o, tupe_err *e);
/* "HOST:PORT" of rank 0, for messages. */
const char *tupe_rdzv_where(const tupe_rdzv *z);

/* Host collectives (every rank calls the same ones in the same order). Gather: rank 0's `all`
 * receives every rank's `bytes` in rank order (others' `all` is not touched); broadcast: rank
 * 0's buf to every rank. */
int tupe_rdzv_gather(tupe_rdzv *z, const void *mine, size_t bytes, void *all, tupe_err *e);
int tupe_rdzv_bcast(tupe_rdzv *z, void *buf, size_t bytes, tupe_err *e);

/* The mesh: a direct connection between every pair of ranks, for collectives that pass no rank
 * in the middle (train/comm's on CPU ranks). Every rank calls it once, after open: each listens
 * on a free port (on the loopback when MASTER_ADDR is the loopback), the addresses go round
 * through rank 0, each rank connects to every lower rank, and every connection proves both ways
 * that it comes from a rank of this job, as the connections to rank 0 do. A rank that does not
 * connect within the timeout is named. */
int tupe_rdzv_mesh(tupe_rdzv *z, tupe_err *e);
/* At once: nout bytes to rank `to` and nin bytes from rank `from` over the mesh (to and from
 * other ranks; the same one or not), with the waits of the collectives above. */
int tupe_rdzv_sendrecv(tupe_rdzv *z, int to, const void *out, size_t nout, int from, void *in,
                       size_t nin, tupe_err *e);
/* The bytes this rank's host collectives sent and received (frames' headers included). */
void tupe_rdzv_bytes(const tupe_rdzv *z, uint64_t *sent, uint64_t *recvd);

typedef void (*tupe_rdzv_fail_fn)(void *ctx, const char *why);
void tupe_rdzv_on_failure(tupe_rdzv *z, tupe_rdzv_fail_fn fn, void *ctx);
/* The failure's reason once one is known, else NULL. */
const char *tupe_rdzv_failure(tupe_rdzv *z);
/* This rank's progress (its step), sent with its heartbeats. */
void tupe_rdzv_progress(tupe_rdzv *z, int64_t step);
/* The ranks behind this one, as last heard: "rank 2 is at step 5" (or ""), for a message. */
void tupe_rdzv_behind(tupe_rdzv *z, char *buf, size_t cap);
/* This rank stops with an error: every rank is told (rank 0 relays) why. */
void tupe_rdzv_abort(tupe_rdzv *z, const char *why);
/* The end: a goodbye to rank 0 (rank 0 waits for every rank's, briefly), the watching thread
 * stopped, the connections closed, rank 0's file removed if it is still there. */
void tupe_rdzv_close(tupe_rdzv *z);

#endif
