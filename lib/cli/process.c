#include "cli/process.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/tmpfiles.h"

static const char *prog_name = "tupe";
static pid_t started_by;

void tupe_process_interrupted(void)
{
    tupe_tmp_remove_all();
    _exit(TUPE_EINTR);
}

/* The signals are taken by one thread of their own (sigwait), never by a handler on a
 * computing thread: a handler's frame is written below the interrupted thread's stack
 * pointer, and oneDNN's JIT-generated sgemm kernels were seen to lose their heap to it
 * (a SIGTERM during a product gave "free(): invalid pointer" in dnnl_sgemm's scratch, about
 * one stop in 200). tupe_process_start blocks them before any thread of ours, OpenMP's,
 * oneDNN's or CUDA's exists, and every thread inherits the block. */
static sigset_t taken;    /* SIGINT, SIGTERM, SIGHUP */
static atomic_uint active; /* of those, the ones acted on (bit `sig`): not ignored at the start */
static pthread_t taker;   /* the thread that takes them */
static atomic_int have_taker;

static _Atomic(volatile sig_atomic_t *) grace_flag;
static const char *_Atomic grace_msg;
static struct timespec grace_first;

/* What a signal does, on the taking thread (or in a handler where there is none). */
static void deliver(int sig)
{
    if (!(atomic_load(&active) & 1u << sig))
        return; /* ignored (nohup's SIGHUP): a blocked signal is queued all the same */
    volatile sig_atomic_t *flag = atomic_load(&grace_flag);
    if (!flag)
        tupe_process_interrupted();
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe (POSIX) */
    if (*flag) {
        double dt = (double)(now.tv_sec - grace_first.tv_sec) +
                    1e-9 * (double)(now.tv_nsec - grace_first.tv_nsec);
        if (dt < TUPE_SIGNAL_SAME)
            return; /* a copy of the first (the process and its group, both signalled) */
        tupe_process_interrupted();
    }
    grace_first = now;
    *flag = 1;
    const char *msg = atomic_load(&grace_msg);
    if (msg) {
        ssize_t n = write(STDERR_FILENO, msg, strlen(msg));
        (void)n;
    }
}

static void *take_signals(void *arg)
{
    (void)arg;
    for (;;) {
        int sig;
        if (sigwait(&taken, &sig) == 0)
            deliver(sig);
    }
    return NULL;
}

/* Only a thread that existed before the block (OpenBLAS starts its pool when it is loaded)
 * can be handed one: it passes the signal on to the taking thread. */
static void on_signal(int sig)
{
    int saved = errno;
    if (atomic_load(&have_taker))
        pthread_kill(taker, sig); /* async-signal-safe (POSIX.1-2008) */
    else
        deliver(sig);
    errno = saved;
}

/* A forked child has no taking thread: it takes its signals by the handler. */
static void after_fork_child(void)
{
    atomic_store(&have_taker, 0);
    pthread_sigmask(SIG_UNBLOCK, &taken, NULL);
}

static void take(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
    atomic_fetch_or(&active, 1u << sig);
}

void tupe_process_graceful(volatile sig_atomic_t *flag, const char *msg)
{
    atomic_store(&grace_msg, msg);
    atomic_store(&grace_flag, flag);
    /* even where they were ignored at the start (a background job's SIGINT): a stop asked
     * for is a stop */
    take(SIGINT);
    take(SIGTERM);
}

/* Close standard output as gnulib's close_stream does: a failed write (the error flag), or a
 * close that fails with bytes still pending or for any reason but a descriptor closed from
 * the start with nothing written. */
static int close_stdout(int *err)
{
    int prev_fail = ferror(stdout) != 0;
    int pending = __fpending(stdout) != 0;
    errno = 0;
    int close_fail = fclose(stdout) != 0;
    *err = errno;
    if (prev_fail || (close_fail && (pending || *err != EBADF))) {
        if (!close_fail)
            *err = 0;
        return -1;
    }
    return 0;
}

static void at_exit(int status, void *arg)
{
    (void)arg;
    if (getpid() != started_by)
        return; /* a child that inherited the handler */
    int err;
    if (close_stdout(&err) == 0)
        return;
    fprintf(stderr, "%s: (stdout): write failed%s%s\n", prog_name, err ? ": " : "",
            err ? strerror(err) : "");
    if (status == 0) {
        fflush(NULL);
        _exit(TUPE_EIO);
    }
}

void tupe_process_start(const char *prog)
{
    if (started_by == getpid())
        return;
    started_by = getpid();
    prog_name = prog;
    on_exit(at_exit, NULL);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    sigemptyset(&taken);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        sigaddset(&taken, sigs[i]);
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        take(sigs[i]);
    }
    sigset_t before;
    if (pthread_sigmask(SIG_BLOCK, &taken, &before) != 0)
        return;
    if (pthread_create(&taker, NULL, take_signals, NULL) != 0) {
        pthread_sigmask(SIG_SETMASK, &before, NULL); /* the handler alone, as a fallback */
        return;
    }
    pthread_detach(taker);
    atomic_store(&have_taker, 1);
    pthread_atfork(NULL, NULL, after_fork_child);
}
