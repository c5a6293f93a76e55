/* Output directories: replaced or written into only when they are the program's own kind,
 * and locked for the life of a run. */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/outdir.h"
#include "unit.h"

static void kinds(void)
{
    char *d = strdup(unit_path("run"));
    tupe_err e;
    char kind[64];
    /* absent, then empty: fine */
    CHECK_INT(tupe_outdir_check(d, "pre-training run", TUPE_OUTDIR_REPLACE, &e), 0);
    mkdir(d, 0777);
    CHECK_INT(tupe_outdir_check(d, "pre-training run", TUPE_OUTDIR_REPLACE, &e), 0);
    CHECK_INT(tupe_outdir_kind(d, kind, sizeof kind), 0);
    CHECK_INT(tupe_outdir_mark(d, "pre-training run", &e), 0);
    CHECK_INT(tupe_outdir_kind(d, kind, sizeof kind), 1);
    CHECK_STR(kind, "pre-training run");
    /* its own kind again; another kind: refused, naming both */
    CHECK_INT(tupe_outdir_check(d, "pre-training run", TUPE_OUTDIR_REPLACE, &e), 0);
    CHECK_INT(tupe_outdir_check(d, "Hugging Face model", TUPE_OUTDIR_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "is a pre-training run");
    CHECK_HAS(e.msg, "not a Hugging Face model");
    CHECK_INT(tupe_outdir_check(d, "figures directory", TUPE_OUTDIR_INTO, &e), TUPE_ECANTCREAT);
    free(d);
}

static void unmarked_directories(void)
{
    char *d = strdup(unit_path("mine"));
    mkdir(d, 0777);
    char f[4200];
    snprintf(f, sizeof f, "%s/config.json", d);
    unit_write(f, "{}\n", 3);
    tupe_err e;
    /* a directory of the user's (or from a tupe that did not mark it): not replaced ... */
    CHECK_INT(tupe_outdir_check(d, "checkpoint", TUPE_OUTDIR_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "has no .tupe-kind");
    /* ... but files may be added to it */
    CHECK_INT(tupe_outdir_check(d, "figures directory", TUPE_OUTDIR_INTO, &e), 0);
    /* a file is not a directory; a damaged marker is not a kind */
    CHECK_INT(tupe_outdir_check(f, "checkpoint", TUPE_OUTDIR_REPLACE, &e), TUPE_ECANTCREAT);
    snprintf(f, sizeof f, "%s/.tupe-kind", d);
    unit_write(f, "\x01\x02", 2);
    CHECK_INT(tupe_outdir_check(d, "checkpoint", TUPE_OUTDIR_INTO, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "unreadable or damaged");
    free(d);
}

static void one_writer_at_a_time(void)
{
    char *d = strdup(unit_path("locked"));
    mkdir(d, 0777);
    tupe_err e;
    tupe_dirlock *l;
    int ready[2], go[2];
    CHECK_INT(pipe(ready), 0);
    CHECK_INT(pipe(go), 0);
    pid_t child = fork();
    if (child == 0) {
        tupe_dirlock *cl;
        char c = tupe_dirlock_take(&cl, d, &e) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(1);
        _exit(0);
    }
    char c = 0;
    CHECK_INT(read(ready[0], &c, 1), 1);
    CHECK_INT(c, 'y');
    CHECK_INT(tupe_dirlock_take(&l, d, &e), TUPE_ECANTCREAT);
    char want[64];
    snprintf(want, sizeof want, "process %ld is writing it", (long)child);
    CHECK_HAS(e.msg, want);
    /* the lock goes with its process, however it ends */
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK_INT(tupe_dirlock_take(&l, d, &e), 0);
    tupe_dirlock_release(l);
    /* the lock file alone leaves a directory empty */
    CHECK_INT(tupe_outdir_check(d, "pre-training run", TUPE_OUTDIR_REPLACE, &e), 0);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
    free(d);
}

UNIT_MAIN(T(kinds), T(unmarked_directories), T(one_writer_at_a_time))
