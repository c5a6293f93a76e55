#include "train/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "base/byteorder.h"
#include "base/fault.h"
#include "base/fileio.h"
#include "base/progress.h"
#include "train/jobauth.h"
#include "train/rdzvfile.h"

/* Frames: a 16-byte header (type, sender's rank, payload length; little-endian) and the
 * payload. */
#define PROTO 0x45505554u /* "TUPE" */
#define PROTO_VERSION 2
enum { F_HELLO = 1, F_WELCOME, F_REFUSE, F_DATA, F_BEAT, F_TABLE, F_ABORT, F_BYE, F_CHALLENGE,
       F_PROOF, F_ADMIT };
enum { K_DATA = 0, K_CONTROL = 1, K_PEER = 2 };
#define HDR 16
#define HELLO_BYTES (24 + TUPE_JOBNONCE_BYTES)
#define TEXT_MAX 600
#define ADDR_MAX 1024 /* "HOST PORT" and rank 0's addresses */

struct tupe_rdzv {
    int rank, world;
    double timeout, beat;
    uint64_t job;
    char where[300];
    char file[4096];             /* the job's file: rank 0's address and the secret, or the secret */
    char what[64];               /* its name in messages */
    int file_addr;               /* whether the others take rank 0's address from it */
    tupe_rdzvfile rf;            /* rank 0: the file it made */
    tupe_jobkey key;             /* the job's key */
    int given_key, have_key;     /* the launcher's (TUPE_JOB_SECRET, MPI); known yet */
    int lfd;                     /* rank 0's listening socket */
    int *data, *ctl;             /* rank 0: one per rank (index 0 unused); others: [0] */
    int *peer;                   /* the mesh (tupe_rdzv_mesh): one per other rank, or -1 */
    int loop;                    /* the ranks met at a loopback MASTER_ADDR: peers listen there */
    int meshing;                 /* a listening rank takes the mesh's connections (K_PEER) */
    uint64_t sent, recvd;        /* bytes of host collectives' data frames, headers included */
    pthread_t th;
    int th_running;
    int wake[2];                 /* a byte here stops the watching thread */
    pthread_mutex_t mu;          /* what follows, and writes on the control connections */
    int failed;
    char fail[TEXT_MAX];
    tupe_rdzv_fail_fn fn;
    void *fn_ctx;
    int64_t step;
    int64_t *steps;              /* as last heard, per rank */
    double *heard;               /* rank 0: when each rank was last heard; others: [0] */
    int *bye;                    /* rank 0: the goodbyes received */
    volatile int closing;
};

/* ---- sockets -------------------------------------------------------------------------------- */

static void hdr_put(unsigned char *h, uint32_t type, int rank, uint64_t len)
{
    tupe_put32le(h, type);
    tupe_put32le(h + 4, (uint32_t)rank);
    tupe_put64le(h + 8, len);
}

/* Blocking send of everything (no SIGPIPE: a closed peer is an error here). */
static int send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int send_frame(int fd, uint32_t type, int rank, const void *payload, size_t len)
{
    unsigned char h[HDR];
    hdr_put(h, type, rank, len);
    return send_all(fd, h, HDR) || (len && send_all(fd, payload, len)) ? -1 : 0;
}

/* How long a data transfer waits without progress: TUPE_COMM_TIMEOUT, and once the watching
 * thread runs two beats more, so that a rank that went silent (stopped, its machine gone) is
 * named by the watcher, which hears every rank's beats, and this wait's message is only the
 * fallback. */
static double data_timeout(const tupe_rdzv *z)
{
    return z->timeout + (z->th_running ? 2 * z->beat : 0);
}

/* Moves n bytes through fd (sending or receiving) while watching for a failure and for
 * `timeout` seconds without progress; `peer` names the other end for the messages. */
static int move(tupe_rdzv *z, int fd, void *buf, size_t n, int out, const char *peer, tupe_err *e)
{
    char *p = buf;
    double last = tupe_now();
    while (n > 0) {
        struct pollfd pf = {fd, (short)(out ? POLLOUT : POLLIN), 0};
        int r = poll(&pf, 1, 100);
        if (r < 0 && errno != EINTR)
            return tupe_fail_errno(e, TUPE_EFAIL, errno, "rendezvous: poll");
        /* a failure ends only a wait: what a rank sent before it failed is still read (so that
         * every rank reaches the same conclusion of a collective, e.g. tupe_comm_agree's) */
        const char *why = r <= 0 && z ? tupe_rdzv_failure(z) : NULL;
        if (why)
            return tupe_fail(e, TUPE_EFAIL, "%s", why);
        if (r <= 0) {
            double t = z ? data_timeout(z) : 30;
            if (tupe_now() - last > t) {
                char behind[300] = "";
                if (z)
                    tupe_rdzv_behind(z, behind, sizeof behind);
                return tupe_fail(e, TUPE_EFAIL, "no word from %s for %.0f s (TUPE_COMM_TIMEOUT)%s%s",
                                 peer, t, behind[0] ? "; " : "", behind);
            }
            continue;
        }
        ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (k <= 0) {
            if (z) { /* the watching thread may know why */
                struct timespec ts = {0, 300 * 1000000L};
                nanosleep(&ts, NULL);
                if ((why = tupe_rdzv_failure(z)))
                    return tupe_fail(e, TUPE_EFAIL, "%s", why);
            }
            return tupe_fail(e, TUPE_EFAIL, "the connection to %s closed (it exited?)", peer);
        }
        p += k;
        n -= (size_t)k;
        last = tupe_now();
    }
    return 0;
}

/* One frame's header from fd, and its payload into buf (cap bytes; a longer one is an error). */
static int recv_frame(tupe_rdzv *z, int fd, uint32_t *type, int *rank, void *buf, size_t cap,
                      size_t *len, const char *peer, tupe_err *e)
{
    unsigned char h[HDR];
    int rc = move(z, fd, h, HDR, 0, peer, e);
    if (rc)
        return rc;
    *type = tupe_get32le(h);
    *rank = (int)tupe_get32le(h + 4);
    uint64_t n = tupe_get64le(h + 8);
    if (n > cap)
        return tupe_fail(e, TUPE_EFAIL, "%s sent %llu bytes where at most %zu were expected (ranks "
                         "that disagree on what comes next?)", peer, (unsigned long long)n, cap);
    *len = (size_t)n;
    return n ? move(z, fd, buf, (size_t)n, 0, peer, e) : 0;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- failures --------------------------------------------------------------------------------- */

/* The first failure wins: kept, told to the other ranks (by rank 0), given to fn. */
static void failure(tupe_rdzv *z, const char *why)
{
    pthread_mutex_lock(&z->mu);
    if (z->failed || z->closing) {
        pthread_mutex_unlock(&z->mu);
        return;
    }
    z->failed = 1;
    snprintf(z->fail, sizeof z->fail, "%s", why);
    tupe_rdzv_fail_fn fn = z->fn;
    void *ctx = z->fn_ctx;
    if (z->rank == 0)
        for (int k = 1; k < z->world; k++)
            if (z->ctl[k] >= 0)
                send_frame(z->ctl[k], F_ABORT, 0, why, strlen(why));
    pthread_mutex_unlock(&z->mu);
    if (fn)
        fn(ctx, why);
}

static void lost(tupe_rdzv *z, int k)
{
    int *fd = z->rank == 0 ? &z->ctl[k] : &z->ctl[0];
    int said_bye = z->rank == 0 && z->bye[k];
    pthread_mutex_lock(&z->mu);
    close(*fd);
    *fd = -1;
    pthread_mutex_unlock(&z->mu);
    if (said_bye || z->closing)
        return;
    char why[200];
    snprintf(why, sizeof why, "rank %d exited or was killed (its connection %s closed without a "
             "goodbye)", k, z->rank == 0 ? "to rank 0" : "from this rank");
    failure(z, why);
}

/* ---- the watching thread ------------------------------------------------------------------ */

static void beat(tupe_rdzv *z)
{
    unsigned char b[8];
    pthread_mutex_lock(&z->mu);
    if (z->rank != 0) {
        tupe_put64le(b, (uint64_t)z->step);
        if (z->ctl[0] >= 0)
            send_frame(z->ctl[0], F_BEAT, z->rank, b, 8);
    } else {
        z->steps[0] = z->step;
        unsigned char *t = malloc((size_t)z->world * 8);
        if (t) {
            for (int k = 0; k < z->world; k++)
                tupe_put64le(t + 8 * k, (uint64_t)z->steps[k]);
            for (int k = 1; k < z->world; k++)
                if (z->ctl[k] >= 0)
                    send_frame(z->ctl[k], F_TABLE, 0, t, (size_t)z->world * 8);
            free(t);
        }
    }
    pthread_mutex_unlock(&z->mu);
}

static void *watch(void *arg)
{
    tupe_rdzv *z = arg;
    int n = z->rank == 0 ? z->world : 2;
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    int *who = calloc((size_t)n, sizeof *who);
    size_t cap = 16 + (size_t)z->world * 8 + TEXT_MAX;
    unsigned char *buf = malloc(cap);
    if (!pf || !who || !buf) {
        free(pf), free(who), free(buf);
        failure(z, "rendezvous: out of memory");
        return NULL;
    }
    double next = 0;
    for (;;) {
        int m = 0;
        pf[m++] = (struct pollfd){z->wake[0], POLLIN, 0};
        for (int k = 0; k < (z->rank == 0 ? z->world : 1); k++)
            if ((z->rank != 0 || k > 0) && z->ctl[k] >= 0) {
                who[m] = z->rank == 0 ? k : 0;
                pf[m++] = (struct pollfd){z->ctl[k], POLLIN, 0};
            }
        int r = poll(pf, (nfds_t)m, 200);
        if (r > 0 && (pf[0].revents & POLLIN))
            break;
        double now = tupe_now();
        for (int i = 1; r > 0 && i < m; i++) {
            if (!pf[i].revents)
                continue;
            int k = who[i];
            uint32_t type;
            int from;
            size_t len;
            tupe_err e;
            if (recv_frame(NULL, pf[i].fd, &type, &from, buf, cap - 1, &len, "a rank", &e)) {
                lost(z, k);
                continue;
            }
            buf[len] = 0;
            pthread_mutex_lock(&z->mu);
            z->heard[z->rank == 0 ? k : 0] = now;
            if (type == F_BEAT && z->rank == 0 && len == 8)
                z->steps[k] = (int64_t)tupe_get64le(buf);
            else if (type == F_TABLE && z->rank != 0 && len == (size_t)z->world * 8)
                for (int q = 0; q < z->world; q++)
                    if (q != z->rank)
                        z->steps[q] = (int64_t)tupe_get64le(buf + 8 * q);
            if (type == F_BYE && z->rank == 0)
                z->bye[k] = 1;
            pthread_mutex_unlock(&z->mu);
            if (type == F_ABORT)
                failure(z, (const char *)buf);
        }
        if (now >= next) {
            next = now + z->beat;
            beat(z);
        }
        /* silence is looked for at every wake-up (200 ms), not only at a beat: the watcher,
         * which hears every rank, must name a silent rank before a data wait gives up */
        for (int k = z->rank == 0 ? 1 : 0; k < (z->rank == 0 ? z->world : 1); k++) {
            pthread_mutex_lock(&z->mu);
            int silent = z->ctl[k] >= 0 && !(z->rank == 0 && z->bye[k]) &&
                         now - z->heard[k] > z->timeout;
            pthread_mutex_unlock(&z->mu);
            if (silent) {
                char why[200];
                snprintf(why, sizeof why, "rank %d stopped responding: not a word from it "
                         "for %.0f s (TUPE_COMM_TIMEOUT; stopped, or its machine gone?)",
                         z->rank == 0 ? k : 0, z->timeout);
                failure(z, why);
            }
        }
    }
    free(pf), free(who), free(buf);
    return NULL;
}

/* ---- meeting ------------------------------------------------------------------------------ */

/* A connection's first words, the hello (HELLO_BYTES): magic, version, rank, world, kind,
 * job token, the sender's random number. Rank 0 answers with its own random number and its
 * proof (HMAC of the hello and that number, labelled rank 0's); the rank with its proof
 * (labelled the others'); only then does rank 0 read what the hello says, and admits the
 * connection or refuses it, saying why. */
static int hello_put(unsigned char *h, const tupe_rdzv *z, int kind, tupe_err *e)
{
    tupe_put32le(h, PROTO);
    tupe_put32le(h + 4, PROTO_VERSION);
    tupe_put32le(h + 8, (uint32_t)z->rank);
    tupe_put32le(h + 12, (uint32_t)z->world);
    tupe_put32le(h + 16, (uint32_t)kind);
    tupe_put32le(h + 20, (uint32_t)(z->job ^ (z->job >> 32)));
    return tupe_jobauth_random(h + 24, TUPE_JOBNONCE_BYTES, e);
}

static const char LABEL0[] = "tupe rendezvous: rank 0", LABELN[] = "tupe rendezvous: a rank";

/* Whether MASTER_ADDR names only the loopback (it may then be reached from this machine
 * alone). */
int tupe_rdzv_loopback(const char *host)
{
    size_t hl = strlen(host);
    if (strcasecmp(host, "localhost") == 0 || (hl > 10 && strcasecmp(host + hl - 10, ".localhost") == 0))
        return 1; /* RFC 6761 6.3, resolved or not */
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    int loop = res != NULL;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET)
            loop &= (ntohl(((struct sockaddr_in *)(void *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
        else if (a->ai_family == AF_INET6) {
            const struct in6_addr *s = &((struct sockaddr_in6 *)(void *)a->ai_addr)->sin6_addr;
            loop &= IN6_IS_ADDR_LOOPBACK(s) || (IN6_IS_ADDR_V4MAPPED(s) && s->s6_addr[12] == 127);
        } else
            loop = 0;
    }
    freeaddrinfo(res);
    return loop;
}

/* Rank 0 listens at host (MASTER_ADDR: only there, as the man page promises), or on every
 * interface when the address travels another way (a rendezvous file, MPI). */
static int listen_on(tupe_rdzv *z, const char *host, int port, tupe_err *e)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host, ps, &hints, &res);
    size_t hl = host ? strlen(host) : 0;
    if (g && host && (strcasecmp(host, "localhost") == 0 ||
                      (hl > 10 && strcasecmp(host + hl - 10, ".localhost") == 0)))
        g = getaddrinfo("127.0.0.1", ps, &hints, &res);
    if (g)
        return tupe_fail(e, TUPE_EFAIL, "rendezvous: %s%sport %d: %s", host ? host : "",
                         host ? " " : "", port, gai_strerror(g));
    int err = 0;
    /* any address: IPv6 first where it also takes IPv4; a named one: IPv4 first (what
     * "localhost" means to most) */
    for (int pass = 0; pass < 2 && z->lfd < 0; pass++)
        for (struct addrinfo *a = res; a && z->lfd < 0; a = a->ai_next) {
            if ((pass == 0) != ((a->ai_family == AF_INET6) == !host))
                continue;
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
            if (fd < 0)
                continue;
            int one = 1, zero = 0;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (a->ai_family == AF_INET6 && !host)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 256) == 0)
                z->lfd = fd;
            else {
                err = errno;
                close(fd);
            }
        }
    freeaddrinfo(res);
    if (z->lfd < 0)
        return tupe_fail_errno(e, TUPE_EFAIL, err, "rendezvous: rank %d cannot listen at %s%sport %d%s",
                               z->rank, host ? host : "", host ? " " : "", port,
                               err == EADDRINUSE ? " (another job there? choose another MASTER_PORT)"
                               : err == EADDRNOTAVAIL ? " (MASTER_ADDR is not an address of rank 0's "
                               "machine)" : "");
    return 0;
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return -1;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

static void refuse_all(tupe_rdzv *z, const char *why)
{
    if (z->meshing) /* the others hear of it as of any failure */
        return;
    for (int k = 1; k < z->world; k++)
        if (z->data[k] >= 0)
            send_frame(z->data[k], F_REFUSE, 0, why, strlen(why));
}

/* A connection that has not yet proven it is a rank of this job: it has PEND_SECS to do so,
 * and at most PEND_MAX wait at once (a new one pushes out the oldest), so that strangers that
 * connect and say nothing neither lock the ranks out nor keep rank 0 busy. */
#define PEND_MAX 64
#define PEND_SECS 5.0
typedef struct pend {
    int fd, stage; /* 0: its hello is coming; 1: its proof */
    double until;
    size_t have;
    unsigned char in[HDR + HELLO_BYTES];
    unsigned char hello[HELLO_BYTES], nonce[TUPE_JOBNONCE_BYTES];
} pend;

/* Where a connection of `kind` is kept, by the other end's rank. */
static int *conn_of(tupe_rdzv *z, int kind)
{
    return kind == K_DATA ? z->data : kind == K_CONTROL ? z->ctl : z->peer;
}

static void drop(pend *p, int *npend, int i)
{
    close(p[i].fd);
    p[i] = p[--*npend];
}

/* Rank 0 takes in what came on pending connection p: *gone when it is to be dropped, *in when
 * it is a rank of this job, admitted; 0, or an error that ends the rendezvous. */
static int pend_step(tupe_rdzv *z, pend *p, int *gone, int *in, tupe_err *e)
{
    int rc;
    size_t want = p->stage == 0 ? HDR + HELLO_BYTES : HDR + TUPE_JOBMAC_BYTES;
    ssize_t k = recv(p->fd, p->in + p->have, want - p->have, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    *gone = 1;
    if (k <= 0)
        return 0;
    p->have += (size_t)k;
    *gone = 0;
    if (p->have < want)
        return 0;
    *gone = 1; /* unless all is well below */
    const unsigned char *h = p->in, *b = p->in + HDR;
    if (p->stage == 0) {
        /* not one of ours (a port scan, a stray client): dropped, without a word */
        if (tupe_get32le(h) != F_HELLO || tupe_get64le(h + 8) != HELLO_BYTES || tupe_get32le(b) != PROTO)
            return 0;
        if (tupe_get32le(b + 4) != PROTO_VERSION) { /* told, but the job goes on */
            char why[200];
            snprintf(why, sizeof why, "rank 0 runs another version of tupe's rendezvous (%d, this "
                     "rank %u)", PROTO_VERSION, tupe_get32le(b + 4));
            unsigned char f[HDR + sizeof why];
            size_t n = strlen(why);
            hdr_put(f, F_REFUSE, 0, n);
            memcpy(f + HDR, why, n);
            ssize_t w = send(p->fd, f, HDR + n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            return 0;
        }
        unsigned char f[HDR + TUPE_JOBNONCE_BYTES + TUPE_JOBMAC_BYTES];
        memcpy(p->hello, b, HELLO_BYTES);
        if ((rc = tupe_jobauth_random(p->nonce, sizeof p->nonce, e)) ||
            (rc = tupe_jobauth_mac(&z->key, LABEL0, p->hello, HELLO_BYTES, p->nonce, sizeof p->nonce,
                                   f + HDR + TUPE_JOBNONCE_BYTES, e)))
            return rc;
        hdr_put(f, F_CHALLENGE, 0, TUPE_JOBNONCE_BYTES + TUPE_JOBMAC_BYTES);
        memcpy(f + HDR, p->nonce, sizeof p->nonce);
        if (send(p->fd, f, sizeof f, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof f)
            return 0;
        p->stage = 1;
        p->have = 0;
        *gone = 0;
        return 0;
    }
    if (tupe_get32le(h) != F_PROOF || tupe_get64le(h + 8) != TUPE_JOBMAC_BYTES ||
        !tupe_jobauth_check(&z->key, LABELN, p->hello, HELLO_BYTES, p->nonce, sizeof p->nonce, b))
        return 0; /* no proof: not of this job */
    /* a rank of this job: what its hello says is true of it */
    const unsigned char *q = p->hello;
    int rank = (int)tupe_get32le(q + 8), world = (int)tupe_get32le(q + 12);
    int kind = (int)tupe_get32le(q + 16);
    uint32_t job = tupe_get32le(q + 20);
    char why[TEXT_MAX] = "";
    if (job != (uint32_t)(z->job ^ (z->job >> 32))) {
        const char *no = "rank 0 belongs to another job (TUPE_JOB_ID, SLURM_JOB_ID)";
        send_frame(p->fd, F_REFUSE, 0, no, strlen(no));
        return 0;
    } else if (world != z->world)
        snprintf(why, sizeof why, "ranks disagree on the world size: rank %d was started "
                 "as one of %d ranks, rank 0 as one of %d", rank, world, z->world);
    else if (rank <= z->rank || rank >= z->world)
        snprintf(why, sizeof why, "a rank %d came to rank %d of a world of %d", rank, z->rank,
                 z->world);
    else if (z->meshing ? kind != K_PEER : kind != K_DATA && kind != K_CONTROL)
        snprintf(why, sizeof why, "rank %d opened a connection of kind %d to rank %d", rank, kind,
                 z->rank);
    else if (conn_of(z, kind)[rank] >= 0)
        snprintf(why, sizeof why, "rank %d came twice (two processes were given the same "
                 "RANK)", rank);
    if (why[0]) {
        send_frame(p->fd, F_REFUSE, 0, why, strlen(why));
        refuse_all(z, why);
        return tupe_fail(e, TUPE_EUSAGE, "rendezvous at %s: %s", z->where, why);
    }
    int fl = fcntl(p->fd, F_GETFL);
    if (fl < 0 || fcntl(p->fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        return 0;
    nodelay(p->fd);
    if (send_frame(p->fd, F_ADMIT, 0, NULL, 0))
        return 0;
    conn_of(z, kind)[rank] = p->fd;
    *gone = 0;
    *in = 1;
    return 0;
}

/* Whether rank k's connections to this rank are all there (rank 0: data and control; in the
 * mesh, a higher rank's one). */
static int came(const tupe_rdzv *z, int k)
{
    return z->meshing ? k <= z->rank || z->peer[k] >= 0 : z->data[k] >= 0 && z->ctl[k] >= 0;
}

/* Rank 0: every other rank's two connections; in the mesh, every rank: the connection of every
 * higher rank. Or an error naming who did not come. */
static int accept_all(tupe_rdzv *z, tupe_err *e)
{
    double end = tupe_now() + z->timeout;
    int have = 0, need = z->meshing ? z->world - 1 - z->rank : 2 * (z->world - 1), npend = 0, rc = 0;
    pend *p = calloc(PEND_MAX, sizeof *p);
    if (!p)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    while (have < need && !rc) {
        struct pollfd pf[PEND_MAX + 1];
        double now = tupe_now(), wake = end;
        for (int i = npend - 1; i >= 0; i--)
            if (p[i].until <= now)
                drop(p, &npend, i); /* silent for too long */
        int m = 0;
        pf[m++] = (struct pollfd){z->lfd, POLLIN, 0};
        for (int i = 0; i < npend; i++) {
            pf[m++] = (struct pollfd){p[i].fd, POLLIN, 0};
            if (p[i].until < wake)
                wake = p[i].until;
        }
        const char *failed = z->meshing ? tupe_rdzv_failure(z) : NULL; /* the watch runs by then */
        if (failed) {
            rc = tupe_fail(e, TUPE_EFAIL, "%s", failed);
            break;
        }
        if (now >= end) {
            char who[300] = "";
            size_t at = 0;
            for (int k = 1; k < z->world && at < sizeof who - 16; k++)
                if (!came(z, k))
                    at += (size_t)snprintf(who + at, sizeof who - at, "%s%d", at ? ", " : "", k);
            if (z->meshing)
                rc = tupe_fail(e, TUPE_EFAIL, "rendezvous: rank%s %s of %d did not connect to rank "
                               "%d within %.0f s (TUPE_COMM_TIMEOUT)", strchr(who, ',') ? "s" : "",
                               who, z->world, z->rank, z->timeout);
            else
                rc = tupe_fail(e, TUPE_EFAIL, "rendezvous at %s: rank%s %s of %d did not come within "
                               "%.0f s (TUPE_COMM_TIMEOUT; were they started, with the same "
                               "MASTER_ADDR/MASTER_PORT or rendezvous file and secret?)", z->where,
                               strchr(who, ',') ? "s" : "", who, z->world, z->timeout);
            refuse_all(z, e->msg);
            break;
        }
        double left = wake - now;
        int r = poll(pf, (nfds_t)m, left < 0.2 ? (int)(left * 1000) + 1 : 200);
        if (r <= 0)
            continue;
        for (int i = npend - 1; i >= 0 && !rc; i--) {
            if (!pf[i + 1].revents)
                continue;
            int gone = 0, in = 0;
            rc = pend_step(z, &p[i], &gone, &in, e);
            if (rc)
                break;
            if (in) {
                have++;
                p[i] = p[--npend]; /* its descriptor is the rank's now */
            } else if (gone)
                drop(p, &npend, i);
        }
        /* every waiting connection, each at once: the listening socket never stays ready */
        for (int n = 0; !rc && (pf[0].revents & POLLIN) && n < PEND_MAX; n++) {
            int fd = accept4(z->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0)
                break;
            if (npend == PEND_MAX) {
                int old = 0;
                for (int i = 1; i < npend; i++)
                    if (p[i].until < p[old].until)
                        old = i;
                drop(p, &npend, old);
            }
            p[npend] = (pend){.fd = fd, .until = tupe_now() + (z->timeout < PEND_SECS ? z->timeout : PEND_SECS)};
            npend++;
        }
    }
    for (int i = 0; i < npend; i++)
        close(p[i].fd);
    free(p);
    if (rc || z->meshing)
        return rc;
    for (int k = 1; k < z->world; k++)
        if (send_frame(z->data[k], F_WELCOME, 0, NULL, 0))
            return tupe_fail(e, TUPE_EFAIL, "rendezvous at %s: rank %d left during the handshake",
                             z->where, k);
    return 0;
}

/* Exactly n bytes from fd before `until` (a time of tupe_now): 0, or -1 (why says what). */
static int recv_until(int fd, int to, void *buf, size_t n, double until, char *why, size_t cap)
{
    char *p = buf;
    while (n > 0) {
        double left = until - tupe_now();
        if (left <= 0) { /* a reason from an earlier try, if any, says more */
            if (!why[0] || strstr(why, "did not answer"))
                snprintf(why, cap, "rank %d did not answer the hello", to);
            return -1;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, left < 0.2 ? (int)(left * 1000) + 1 : 200);
        if (r <= 0)
            continue;
        ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (k <= 0) {
            snprintf(why, cap, "the connection closed during the handshake (rank %d did not take "
                     "this rank for one of its job's: another job's rank %d there, or another "
                     "secret?)", to, to);
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Rank 0's refusal of n bytes after its header in a: -2 with its words in why (-1 if they do
 * not come); fd closed. */
static int refused(int fd, int to, unsigned char *a, size_t n, double until, char *why, size_t cap)
{
    int rc = recv_until(fd, to, a + HDR, n, until, why, cap);
    a[HDR + (rc ? 0 : n)] = 0;
    close(fd);
    if (rc)
        return -1;
    snprintf(why, cap, "%s", (char *)a + HDR);
    return -2;
}

/* One connection to rank 0 at host:port, proven both ways: its descriptor, or -1 (retry; why
 * says why), or -2 when rank 0 refused this rank (why holds its words). */
static int dial(tupe_rdzv *z, int to, const char *host, const char *port, int kind, double end, char *why,
                size_t cap)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, port, &hints, &res);
    /* "localhost" names the loopback (RFC 6761 6.3), also where nothing resolves it (a root
     * without /etc/hosts) */
    size_t hl = strlen(host);
    if (g && (strcasecmp(host, "localhost") == 0 ||
              (hl > 10 && strcasecmp(host + hl - 10, ".localhost") == 0)))
        g = getaddrinfo("127.0.0.1", port, &hints, &res);
    if (g) {
        snprintf(why, cap, "%s: %s", host, gai_strerror(g));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            snprintf(why, cap, "%s", strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return -1;
    unsigned char h[HDR + HELLO_BYTES], a[HDR + TEXT_MAX], proof[HDR + TUPE_JOBMAC_BYTES];
    tupe_err e;
    hdr_put(h, F_HELLO, z->rank, HELLO_BYTES);
    if (hello_put(h + HDR, z, kind, &e)) {
        snprintf(why, cap, "%.250s", e.msg);
        close(fd);
        return -1;
    }
    if (send_all(fd, h, sizeof h)) {
        snprintf(why, cap, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    double until = tupe_now() + PEND_SECS;
    if (until > end) /* the rank's own deadline comes first */
        until = end;
    if (recv_until(fd, to, a, HDR, until, why, cap)) {
        close(fd);
        return -1;
    }
    uint32_t type = tupe_get32le(a);
    uint64_t n = tupe_get64le(a + 8);
    if (type == F_REFUSE && n < TEXT_MAX)
        return refused(fd, to, a, (size_t)n, until, why, cap);
    const unsigned char *nonce = a + HDR, *mac = a + HDR + TUPE_JOBNONCE_BYTES;
    int bad = type != F_CHALLENGE || n != TUPE_JOBNONCE_BYTES + TUPE_JOBMAC_BYTES;
    if (!bad && recv_until(fd, to, a + HDR, (size_t)n, until, why, cap)) {
        close(fd);
        return -1;
    }
    if (bad || !tupe_jobauth_check(&z->key, LABEL0, h + HDR, HELLO_BYTES, nonce, TUPE_JOBNONCE_BYTES, mac)) {
        snprintf(why, cap, "what answers at %s:%s did not prove it is this job's rank %d (another "
                 "job's there, or another TUPE_JOB_SECRET?)", host, port, to);
        close(fd);
        return -1;
    }
    hdr_put(proof, F_PROOF, z->rank, TUPE_JOBMAC_BYTES);
    if (tupe_jobauth_mac(&z->key, LABELN, h + HDR, HELLO_BYTES, nonce, TUPE_JOBNONCE_BYTES,
                         proof + HDR, &e) || send_all(fd, proof, sizeof proof)) {
        snprintf(why, cap, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    /* admitted, or refused with the reason (another world size, a rank that came twice) */
    if (recv_until(fd, to, a, HDR, until, why, cap)) {
        close(fd);
        return -1;
    }
    type = tupe_get32le(a);
    n = tupe_get64le(a + 8);
    if (type == F_REFUSE && n < TEXT_MAX)
        return refused(fd, to, a, (size_t)n, until, why, cap);
    if (type != F_ADMIT || n != 0) {
        snprintf(why, cap, "rank %d answered the proof with frame %u", to, type);
        close(fd);
        return -1;
    }
    nodelay(fd);
    return fd;
}

/* "HOST PORT [ADDR...]" into host, port and the numeric addresses that follow (alts; "" if
 * none). */
static int parse_addr(const char *s, char *host, size_t hcap, char *port, size_t pcap, char *alts,
                      size_t acap)
{
    char h[256], p[32];
    int used = 0;
    if (sscanf(s, "%255s %31s%n", h, p, &used) != 2)
        return -1;
    snprintf(host, hcap, "%s", h);
    snprintf(port, pcap, "%s", p);
    if (alts)
        snprintf(alts, acap, "%s", s + used);
    return 0;
}

/* Rank 0's IPv4 addresses, " A.B.C.D" each, the loopback last: the others try them when rank
 * 0's host name does not resolve where they are (a container or chroot without /etc/hosts,
 * a cluster whose names are not in DNS). Nothing when the interfaces cannot be listed. */
static void own_addrs(char *buf, size_t cap)
{
    struct ifaddrs *ifs = NULL;
    size_t at = 0;
    buf[0] = 0;
    if (getifaddrs(&ifs) != 0)
        return;
    for (int loop = 0; loop < 2; loop++)
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            char a[INET_ADDRSTRLEN];
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
                !(i->ifa_flags & IFF_LOOPBACK) != !loop ||
                !inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, a, sizeof a) ||
                at + strlen(a) + 2 > cap)
                continue;
            at += (size_t)snprintf(buf + at, cap - at, " %s", a);
        }
    freeifaddrs(ifs);
}

/* The job's file as the others read it: rank 0's address (when the file carries it) and the
 * secret (unless the launcher gave it). 0; -1 while it is not there yet (why says so); or an
 * error when it is no file to trust. */
static int read_jobfile(tupe_rdzv *z, char *host, size_t hcap, char *port, size_t pcap, char *alts,
                        size_t acap, char *why, size_t wcap, tupe_err *e)
{
    char txt[TUPE_RDZVFILE_MAX], addr[ADDR_MAX], secret[TUPE_JOBSECRET_HEX + 8];
    tupe_err fe;
    int rc = tupe_rdzvfile_read(z->file, z->what, txt, sizeof txt, &fe);
    if (rc == TUPE_ENOINPUT || rc == TUPE_EDATA) {
        snprintf(why, wcap, "%.250s", fe.msg);
        return -1;
    }
    if (rc)
        return tupe_fail(e, TUPE_EUSAGE, "rendezvous: %s", fe.msg);
    if (z->file_addr) {
        if (tupe_rdzvfile_get(txt, "addr", addr, sizeof addr) ||
            parse_addr(addr, host, hcap, port, pcap, alts, acap))
            return tupe_fail(e, TUPE_EUSAGE, "rendezvous: %s %s names no address", z->what, z->file);
        snprintf(z->where, sizeof z->where, "%s:%s", host, port);
    }
    if (!z->given_key) {
        if (tupe_rdzvfile_get(txt, "secret", secret, sizeof secret) || strlen(secret) != TUPE_JOBSECRET_HEX)
            return tupe_fail(e, TUPE_EUSAGE, "rendezvous: %s %s holds no secret (and TUPE_JOB_SECRET "
                             "is not set on this rank: is it on rank 0?)", z->what, z->file);
        if ((rc = tupe_jobkey_from_text(&z->key, secret, strlen(secret), e)))
            return rc;
        tupe_jobauth_wipe(secret, sizeof secret);
    }
    z->have_key = 1;
    return 0;
}

/* The others: both connections and rank 0's welcome, retrying until the timeout. */
static int join(tupe_rdzv *z, const char *host0, const char *port0, const char *alts0,
                tupe_err *e)
{
    double end = tupe_now() + z->timeout;
    char host[256] = "", port[32] = "", alts[ADDR_MAX] = "";
    if (alts0)
        snprintf(alts, sizeof alts, "%s", alts0);
    if (host0) {
        snprintf(host, sizeof host, "%s", host0);
        snprintf(port, sizeof port, "%s", port0);
    }
    char why[300] = "";
    for (int tries = 0;; tries++) {
        if (z->file[0]) { /* rank 0 (re)writes it when it starts: read it again each time */
            int rc = read_jobfile(z, host, sizeof host, port, sizeof port, alts, sizeof alts, why,
                                  sizeof why, e);
            if (rc > 0)
                return rc;
        }
        /* the host name first, then rank 0's own addresses */
        char cand[256];
        const char *at = host, *next = alts;
        int d = -1, c = -1;
        while (host[0] && z->have_key && (d = dial(z, 0, at, port, K_DATA, end, why, sizeof why)) == -1) {
            int used = 0;
            if (sscanf(next, "%255s%n", cand, &used) != 1)
                break;
            next += used;
            at = cand;
        }
        if (d >= 0 && (c = dial(z, 0, at, port, K_CONTROL, end, why, sizeof why)) >= 0) {
            /* admitted: rank 0 welcomes every rank once all have come, or refuses them, within
             * its TUPE_COMM_TIMEOUT, which began before this rank came */
            uint32_t type = 0;
            int from;
            size_t len = 0;
            char text[TEXT_MAX];
            tupe_err re;
            int rc = recv_frame(z, d, &type, &from, text, sizeof text - 1, &len, "rank 0", &re);
            text[rc ? 0 : len] = 0;
            if (!rc && type == F_WELCOME) {
                z->data[0] = d;
                z->ctl[0] = c;
                return 0;
            }
            close(d);
            close(c);
            if (!rc && type == F_REFUSE)
                return tupe_fail(e, TUPE_EUSAGE, "rendezvous at %s: rank 0 turned rank %d away: %s",
                                 z->where, z->rank, text);
            return tupe_fail(e, TUPE_EFAIL, "rendezvous at %s: rank %d was admitted, but rank 0's "
                             "welcome did not come: %s", z->where, z->rank, rc ? re.msg : "another frame");
        }
        if (d >= 0)
            close(d);
        if (d == -2 || c == -2)
            return tupe_fail(e, TUPE_EUSAGE, "rendezvous at %s: rank 0 turned rank %d away: %s",
                             z->where, z->rank, why);
        if (tupe_now() > end)
            return tupe_fail(e, TUPE_EFAIL, "rendezvous: rank %d could not reach rank 0 at %s within "
                             "%.0f s (TUPE_COMM_TIMEOUT): %s", z->rank, host[0] ? z->where : z->file,
                             z->timeout, why[0] ? why : "no address in the rendezvous file yet");
        struct timespec ts = {0, (tries < 10 ? 50 : 200) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int tupe_rdzv_open(tupe_rdzv **out, const tupe_rdzv_opts *o, tupe_err *e)
{
    *out = NULL;
    if (o->world < 2 || o->rank < 0 || o->rank >= o->world || o->world > TUPE_RDZV_MAX_WORLD)
        return tupe_fail(e, TUPE_EUSAGE, "rendezvous: rank %d of %d (at most %d ranks)", o->rank,
                         o->world, TUPE_RDZV_MAX_WORLD);
    if (!o->host && !o->file && !o->exchange)
        return tupe_fail(e, TUPE_EUSAGE, "rendezvous: no address for rank 0 (MASTER_ADDR and "
                         "MASTER_PORT, or TUPE_RENDEZVOUS_FILE)");
    if (!o->key && !o->file && !o->keyfile)
        return tupe_fail(e, TUPE_EUSAGE, "rendezvous: no way to share the job's secret");
    tupe_rdzv *z = calloc(1, sizeof *z);
    int n = o->world;
    if (!z || !(z->data = malloc((size_t)n * sizeof *z->data)) ||
        !(z->ctl = malloc((size_t)n * sizeof *z->ctl)) || !(z->peer = malloc((size_t)n * sizeof *z->peer)) ||
        !(z->steps = calloc((size_t)n, sizeof *z->steps)) ||
        !(z->heard = calloc((size_t)n, sizeof *z->heard)) || !(z->bye = calloc((size_t)n, sizeof *z->bye))) {
        if (z)
            free(z->data), free(z->ctl), free(z->peer), free(z->steps), free(z->heard);
        free(z);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    pthread_mutex_init(&z->mu, NULL);
    z->rank = o->rank;
    z->world = n;
    z->timeout = o->timeout > 0 ? o->timeout : 600;
    z->beat = z->timeout / 4 < 1 ? z->timeout / 4 : 1;
    z->job = o->job;
    z->lfd = -1;
    z->wake[0] = z->wake[1] = -1;
    for (int k = 0; k < n; k++)
        z->data[k] = z->ctl[k] = z->peer[k] = -1;
    z->loop = o->host && tupe_rdzv_loopback(o->host);
    if (o->key) {
        z->key = *o->key;
        z->given_key = z->have_key = 1;
    }
    const char *jf = o->file ? o->file : o->keyfile;
    if (jf) {
        snprintf(z->file, sizeof z->file, "%s", jf);
        snprintf(z->what, sizeof z->what, "%s", o->file_what ? o->file_what : "TUPE_RENDEZVOUS_FILE");
        z->file_addr = o->file && !o->host;
    }
    snprintf(z->where, sizeof z->where, "%s:%d", o->host ? o->host : "?", o->port);
    int rc = 0;
    if (z->rank == 0) {
        char secret[TUPE_JOBSECRET_HEX + 1] = "";
        if (!z->have_key && !(rc = tupe_jobsecret_new(secret, e)))
            rc = tupe_jobkey_from_text(&z->key, secret, strlen(secret), e);
        if (!rc)
            rc = listen_on(z, o->host, o->port, e);
        if (!rc) {
            char me[256], alts[ADDR_MAX - 300], addr[ADDR_MAX];
            if (gethostname(me, sizeof me) != 0)
                snprintf(me, sizeof me, "localhost");
            me[sizeof me - 1] = 0;
            own_addrs(alts, sizeof alts);
            int port = bound_port(z->lfd);
            snprintf(addr, sizeof addr, "%s %d%s", me, port, alts);
            if (o->host)
                snprintf(z->where, sizeof z->where, "%s:%d", o->host, port);
            else
                snprintf(z->where, sizeof z->where, "%s:%d", me, port);
            if (jf) {
                char body[ADDR_MAX + 2 * TUPE_JOBSECRET_HEX];
                snprintf(body, sizeof body, "addr %s\n%s%s%s", addr, secret[0] ? "secret " : "",
                         secret, secret[0] ? "\n" : "");
                rc = tupe_rdzvfile_make(&z->rf, jf, z->what, body, e);
                tupe_jobauth_wipe(body, sizeof body);
            } else if (o->exchange)
                rc = o->exchange(o->exchange_ctx, addr, sizeof addr, e);
            if (!rc)
                rc = accept_all(z, e);
            /* every rank has come (or the rendezvous failed): the secret's file and the door go */
            tupe_rdzvfile_remove(&z->rf);
            close(z->lfd);
            z->lfd = -1;
        }
        tupe_jobauth_wipe(secret, sizeof secret);
    } else {
        char addr[ADDR_MAX] = "", host[256] = "", port[32] = "", alts[ADDR_MAX] = "";
        if (o->exchange && !o->host && !o->file) {
            rc = o->exchange(o->exchange_ctx, addr, sizeof addr, e);
            if (!rc && parse_addr(addr, host, sizeof host, port, sizeof port, alts, sizeof alts))
                rc = tupe_fail(e, TUPE_EFAIL, "rendezvous: rank 0's address '%s' is not HOST PORT", addr);
            snprintf(z->where, sizeof z->where, "%s:%s", host, port);
        } else if (o->host) {
            snprintf(host, sizeof host, "%s", o->host);
            snprintf(port, sizeof port, "%d", o->port);
        }
        if (!rc)
            rc = join(z, host[0] ? host : NULL, port, alts, e);
    }
    if (!rc && pipe(z->wake) != 0)
        rc = tupe_fail_errno(e, TUPE_EFAIL, errno, "rendezvous: pipe");
    if (!rc) {
        double now = tupe_now();
        for (int k = 0; k < n; k++)
            z->heard[k] = now;
        if (pthread_create(&z->th, NULL, watch, z) != 0)
            rc = tupe_fail(e, TUPE_EFAIL, "rendezvous: cannot start the watching thread");
        else
            z->th_running = 1;
    }
    if (rc) {
        z->closing = 1;
        tupe_rdzv_close(z);
        return rc;
    }
    *out = z;
    return 0;
}

const char *tupe_rdzv_where(const tupe_rdzv *z) { return z->where; }

/* ---- host collectives ------------------------------------------------------------------------- */

static int data_in(tupe_rdzv *z, int fd, void *buf, size_t bytes, int from, tupe_err *e)
{
    char peer[32];
    snprintf(peer, sizeof peer, "rank %d", from);
    uint32_t type;
    int who;
    size_t len;
    int rc = recv_frame(z, fd, &type, &who, buf, bytes, &len, peer, e);
    if (rc)
        return rc;
    if (type != F_DATA || len != bytes)
        return tupe_fail(e, TUPE_EFAIL, "rank %d sent %zu bytes where %zu were expected (the ranks "
                         "disagree on what comes next)", from, len, bytes);
    z->recvd += HDR + bytes;
    return 0;
}

static int data_out(tupe_rdzv *z, int fd, const void *buf, size_t bytes, int to, tupe_err *e)
{
    char peer[32];
    snprintf(peer, sizeof peer, "rank %d", to);
    unsigned char h[HDR];
    hdr_put(h, F_DATA, z->rank, bytes);
    int rc = move(z, fd, h, HDR, 1, peer, e);
    if (!rc && !(rc = move(z, fd, (void *)buf, bytes, 1, peer, e)))
        z->sent += HDR + bytes;
    return rc;
}

int tupe_rdzv_gather(tupe_rdzv *z, const void *mine, size_t bytes, void *all, tupe_err *e)
{
    if (z->rank != 0)
        return data_out(z, z->data[0], mine, bytes, 0, e);
    memmove(all, mine, bytes);
    for (int k = 1; k < z->world; k++) {
        int rc = data_in(z, z->data[k], (char *)all + (size_t)k * bytes, bytes, k, e);
        if (rc)
            return rc;
    }
    return 0;
}

int tupe_rdzv_bcast(tupe_rdzv *z, void *buf, size_t bytes, tupe_err *e)
{
    if (z->rank != 0)
        return data_in(z, z->data[0], buf, bytes, 0, e);
    for (int k = 1; k < z->world; k++) {
        int rc = data_out(z, z->data[k], buf, bytes, k, e);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- the mesh ------------------------------------------------------------------------------- */

/* This rank's connection to rank j (j lower) at its published address "HOST PORT [ADDR...]":
 * the host name first, then the numeric addresses, retried until `end`. */
static int dial_peer(tupe_rdzv *z, int j, const char *addr, double end, tupe_err *e)
{
    char host[256], port[32], alts[ADDR_MAX], why[300] = "";
    if (parse_addr(addr, host, sizeof host, port, sizeof port, alts, sizeof alts))
        return tupe_fail(e, TUPE_EFAIL, "rendezvous: rank %d's address '%.200s' is not HOST PORT", j,
                         addr);
    for (int tries = 0;; tries++) {
        char cand[256];
        const char *at = host, *next = alts;
        int d;
        while ((d = dial(z, j, at, port, K_PEER, end, why, sizeof why)) == -1) {
            int used = 0;
            if (sscanf(next, "%255s%n", cand, &used) != 1)
                break;
            next += used;
            at = cand;
        }
        if (d >= 0) {
            z->peer[j] = d;
            return 0;
        }
        if (d == -2)
            return tupe_fail(e, TUPE_EUSAGE, "rendezvous: rank %d turned rank %d away: %s", j,
                             z->rank, why);
        const char *f = tupe_rdzv_failure(z);
        if (f)
            return tupe_fail(e, TUPE_EFAIL, "%s", f);
        if (tupe_now() > end)
            return tupe_fail(e, TUPE_EFAIL, "rendezvous: rank %d could not connect to rank %d at "
                             "%s:%s within %.0f s (TUPE_COMM_TIMEOUT): %s", z->rank, j, host, port,
                             z->timeout, why);
        struct timespec ts = {0, (tries < 10 ? 20 : 200) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int tupe_rdzv_mesh(tupe_rdzv *z, tupe_err *e)
{
    int W = z->world, rc;
    char *all = malloc((size_t)W * ADDR_MAX);
    if (!all)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    /* loopback ranks stay on the loopback; the others listen everywhere (every connection
     * still proves itself before it is used) */
    char *mine = all + (size_t)z->rank * ADDR_MAX;
    memset(mine, 0, ADDR_MAX);
    if (!(rc = listen_on(z, z->loop ? "127.0.0.1" : NULL, 0, e))) {
        char me[256], alts[ADDR_MAX - 300];
        if (z->loop)
            snprintf(me, sizeof me, "127.0.0.1");
        else if (gethostname(me, sizeof me) != 0)
            snprintf(me, sizeof me, "localhost");
        me[sizeof me - 1] = 0;
        alts[0] = 0;
        if (!z->loop)
            own_addrs(alts, sizeof alts);
        snprintf(mine, ADDR_MAX, "%s %d%s", me, bound_port(z->lfd), alts);
    }
    /* a rank that cannot listen stops here: the others hear of its failure in the gather */
    if (!rc && !(rc = tupe_rdzv_gather(z, mine, ADDR_MAX, all, e)))
        rc = tupe_rdzv_bcast(z, all, (size_t)W * ADDR_MAX, e);
    /* each rank dials the lower ranks, then takes the higher ranks' calls: rank j answers
     * once it has dialed all below it, so no rank waits in a circle */
    tupe_fault_point("rdzv.mesh"); /* a rank killed while the others connect (comm.sh) */
    double end = tupe_now() + z->timeout;
    for (int j = 0; j < z->rank && !rc; j++) {
        all[(size_t)j * ADDR_MAX + ADDR_MAX - 1] = 0;
        rc = dial_peer(z, j, all + (size_t)j * ADDR_MAX, end, e);
    }
    if (!rc) {
        z->meshing = 1;
        rc = accept_all(z, e);
        z->meshing = 0;
    }
    if (z->lfd >= 0)
        close(z->lfd);
    z->lfd = -1;
    free(all);
    return rc;
}

/* The other end of a mesh transfer closed: the watching thread may know why. */
static int peer_closed(tupe_rdzv *z, int k, tupe_err *e)
{
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    const char *why = tupe_rdzv_failure(z);
    if (why)
        return tupe_fail(e, TUPE_EFAIL, "%s", why);
    return tupe_fail(e, TUPE_EFAIL, "the connection to rank %d closed (it exited?)", k);
}

int tupe_rdzv_sendrecv(tupe_rdzv *z, int to, const void *out, size_t nout, int from, void *in,
                       size_t nin, tupe_err *e)
{
    int fo = z->peer[to], fi = z->peer[from];
    if (fo < 0 || fi < 0)
        return tupe_fail(e, TUPE_EFAIL, "rendezvous: no mesh connection to rank %d",
                         fo < 0 ? to : from);
    unsigned char ho[HDR], hi[HDR];
    hdr_put(ho, F_DATA, z->rank, nout);
    size_t so = 0, si = 0, to_n = HDR + nout, ti_n = HDR + nin;
    double last = tupe_now();
    while (so < to_n || si < ti_n) {
        struct pollfd pf[2];
        int m = 0, io = -1, ii = -1;
        if (so < to_n) {
            pf[m] = (struct pollfd){fo, POLLOUT, 0};
            io = m++;
        }
        if (si < ti_n) {
            if (io >= 0 && fi == fo)
                pf[ii = io].events |= POLLIN;
            else {
                pf[m] = (struct pollfd){fi, POLLIN, 0};
                ii = m++;
            }
        }
        int r = poll(pf, (nfds_t)m, 100);
        if (r < 0 && errno != EINTR)
            return tupe_fail_errno(e, TUPE_EFAIL, errno, "rendezvous: poll");
        const char *why = r <= 0 ? tupe_rdzv_failure(z) : NULL;
        if (why)
            return tupe_fail(e, TUPE_EFAIL, "%s", why);
        if (r <= 0) {
            if (tupe_now() - last > data_timeout(z)) {
                char behind[300] = "";
                tupe_rdzv_behind(z, behind, sizeof behind);
                return tupe_fail(e, TUPE_EFAIL, "no word from rank %d for %.0f s (TUPE_COMM_TIMEOUT)%s%s",
                                 so < to_n ? to : from, data_timeout(z), behind[0] ? "; " : "", behind);
            }
            continue;
        }
        if (io >= 0 && (pf[io].revents & (POLLOUT | POLLERR | POLLHUP))) {
            const char *p = so < HDR ? (const char *)ho + so : (const char *)out + (so - HDR);
            size_t n = so < HDR ? HDR - so : to_n - so;
            ssize_t k = send(fo, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
                return peer_closed(z, to, e);
            if (k > 0) {
                so += (size_t)k;
                last = tupe_now();
            }
        }
        if (ii >= 0 && (pf[ii].revents & (POLLIN | POLLERR | POLLHUP))) {
            char *p = si < HDR ? (char *)hi + si : (char *)in + (si - HDR);
            size_t n = si < HDR ? HDR - si : ti_n - si;
            ssize_t k = recv(fi, p, n, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
                return peer_closed(z, from, e);
            if (k > 0) {
                si += (size_t)k;
                last = tupe_now();
                if (si == HDR && (tupe_get32le(hi) != F_DATA || tupe_get64le(hi + 8) != nin ||
                                  (int)tupe_get32le(hi + 4) != from))
                    return tupe_fail(e, TUPE_EFAIL, "rank %d sent %llu bytes where %zu were expected "
                                     "(the ranks disagree on what comes next)", from,
                                     (unsigned long long)tupe_get64le(hi + 8), nin);
            }
        }
    }
    z->sent += to_n;
    z->recvd += ti_n;
    return 0;
}

void tupe_rdzv_bytes(const tupe_rdzv *z, uint64_t *sent, uint64_t *recvd)
{
    *sent = z->sent;
    *recvd = z->recvd;
}

/* ---- liveness ------------------------------------------------------------------------------- */

void tupe_rdzv_on_failure(tupe_rdzv *z, tupe_rdzv_fail_fn fn, void *ctx)
{
    pthread_mutex_lock(&z->mu);
    z->fn = fn;
    z->fn_ctx = ctx;
    pthread_mutex_unlock(&z->mu);
}

const char *tupe_rdzv_failure(tupe_rdzv *z)
{
    pthread_mutex_lock(&z->mu);
    int f = z->failed;
    pthread_mutex_unlock(&z->mu);
    return f ? z->fail : NULL; /* written once, before `failed` */
}

void tupe_rdzv_progress(tupe_rdzv *z, int64_t step)
{
    pthread_mutex_lock(&z->mu);
    z->step = step;
    pthread_mutex_unlock(&z->mu);
}

void tupe_rdzv_behind(tupe_rdzv *z, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    pthread_mutex_lock(&z->mu);
    for (int k = 0; k < z->world && at + 48 < cap; k++)
        if (k != z->rank && z->steps[k] < z->step)
            at += (size_t)snprintf(buf + at, cap - at, "%srank %d is at step %lld", at ? ", " : "",
                                   k, (long long)z->steps[k]);
    if (at && at + 48 < cap)
        snprintf(buf + at, cap - at, " (this rank: step %lld)", (long long)z->step);
    pthread_mutex_unlock(&z->mu);
}

void tupe_rdzv_abort(tupe_rdzv *z, const char *why)
{
    char text[TEXT_MAX];
    snprintf(text, sizeof text, "rank %d failed: %s", z->rank, why);
    pthread_mutex_lock(&z->mu);
    int first = !z->failed;
    if (first) {
        z->failed = 1;
        snprintf(z->fail, sizeof z->fail, "%s", text);
    }
    z->closing = 1;
    for (int k = 0; k < (z->rank == 0 ? z->world : 1); k++)
        if ((z->rank != 0 || k > 0) && z->ctl[k] >= 0 && first)
            send_frame(z->ctl[k], F_ABORT, z->rank, text, strlen(text));
    pthread_mutex_unlock(&z->mu);
}

void tupe_rdzv_close(tupe_rdzv *z)
{
    if (!z)
        return;
    pthread_mutex_lock(&z->mu);
    int failed = z->failed;
    z->closing = 1;
    if (z->rank != 0 && z->ctl[0] >= 0 && !failed)
        send_frame(z->ctl[0], F_BYE, z->rank, NULL, 0);
    pthread_mutex_unlock(&z->mu);
    if (z->rank == 0 && z->th_running && !failed) {
        /* the others' goodbyes, so that none sees rank 0 leave first */
        double end = tupe_now() + 5;
        for (;;) {
            int all = 1;
            pthread_mutex_lock(&z->mu);
            for (int k = 1; k < z->world; k++)
                all &= z->bye[k] || z->ctl[k] < 0;
            pthread_mutex_unlock(&z->mu);
            if (all || tupe_now() > end)
                break;
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (z->th_running) {
        char c = 1;
        ssize_t w = write(z->wake[1], &c, 1);
        (void)w;
        pthread_join(z->th, NULL);
    }
    for (int k = 0; k < z->world; k++) {
        if (z->data[k] >= 0)
            close(z->data[k]);
        if (z->ctl[k] >= 0)
            close(z->ctl[k]);
        if (z->peer[k] >= 0)
            close(z->peer[k]);
    }
    if (z->lfd >= 0)
        close(z->lfd);
    if (z->wake[0] >= 0)
        close(z->wake[0]), close(z->wake[1]);
    tupe_rdzvfile_remove(&z->rf);
    tupe_jobauth_wipe(&z->key, sizeof z->key);
    pthread_mutex_destroy(&z->mu);
    free(z->data), free(z->ctl), free(z->peer), free(z->steps), free(z->heard), free(z->bye);
    free(z);
}
