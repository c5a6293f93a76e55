#include "cli/process.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
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
