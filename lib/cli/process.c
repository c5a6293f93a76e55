#include "cli/process.h"

#include <errno.h>
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

static void on_signal(int sig)
{
    (void)sig;
    tupe_process_interrupted();
}

static volatile sig_atomic_t *grace_flag;
static const char *grace_msg;
static struct timespec grace_first;

static void on_graceful(int sig)
{
    (void)sig;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe (POSIX) */
    if (*grace_flag) {
        double dt = (double)(now.tv_sec - grace_first.tv_sec) +
                    1e-9 * (double)(now.tv_nsec - grace_first.tv_nsec);
        if (dt < TUPE_SIGNAL_SAME)
            return; /* a copy of the first (the process and its group, both signalled) */
        tupe_process_interrupted();
    }
    grace_first = now;
    *grace_flag = 1;
    if (grace_msg) {
        ssize_t n = write(STDERR_FILENO, grace_msg, strlen(grace_msg));
        (void)n;
    }
}

void tupe_process_graceful(volatile sig_atomic_t *flag, const char *msg)
{
    grace_flag = flag;
    grace_msg = msg;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_graceful;
    sigemptyset(&sa.sa_mask);
    /* the other one waits while the first is handled */
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
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
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}
