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

/* No output inside another that cannot hold it, found through every parent. */
static void nested_outputs(void)
{
    char run[4200], ck[4400], p[4600];
    snprintf(run, sizeof run, "%s", unit_path("nest-run"));
    snprintf(ck, sizeof ck, "%s/checkpoints/step-00000002", run);
    tupe_err e;
    mkdir(run, 0777);
    CHECK_INT(tupe_outdir_mark(run, "pre-training run", &e), 0);
    snprintf(p, sizeof p, "%s/checkpoints", run);
    mkdir(p, 0777);
    mkdir(ck, 0777);
    CHECK_INT(tupe_outdir_mark(ck, "checkpoint", &e), 0);
    /* a run holds its checkpoints, event files, figures */
    CHECK_INT(tupe_outdir_check(ck, "checkpoint", TUPE_OUTDIR_REPLACE, &e), 0);
    snprintf(p, sizeof p, "%s/tb", run);
    CHECK_INT(tupe_outdir_check(p, "TensorBoard events", TUPE_OUTDIR_INTO, &e), 0);
    /* nothing inside a checkpoint, at any depth, even through a directory not made yet */
    snprintf(p, sizeof p, "%s/tb", ck);
    CHECK_INT(tupe_outdir_check(p, "TensorBoard events", TUPE_OUTDIR_INTO, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "lies inside");
    CHECK_HAS(e.msg, "a checkpoint");
    snprintf(p, sizeof p, "%s/a/b/c", ck);
    CHECK_INT(tupe_outdir_check(p, "figures directory", TUPE_OUTDIR_INTO, &e), TUPE_ECANTCREAT);
    /* through a link to it, too */
    char link[4200];
    snprintf(link, sizeof link, "%s", unit_path("nest-link"));
    CHECK_INT(symlink(ck, link), 0);
    snprintf(p, sizeof p, "%s/tb", link);
    CHECK_INT(tupe_outdir_check(p, "TensorBoard events", TUPE_OUTDIR_INTO, &e), TUPE_ECANTCREAT);
    /* a run not inside another run; a sweep holds fine-tuning runs */
    snprintf(p, sizeof p, "%s/other", run);
    CHECK_INT(tupe_outdir_check(p, "pre-training run", TUPE_OUTDIR_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "one run inside another");
    char sw[4200];
    snprintf(sw, sizeof sw, "%s", unit_path("nest-sweep"));
    mkdir(sw, 0777);
    CHECK_INT(tupe_outdir_mark(sw, "GLUE sweep", &e), 0);
    snprintf(p, sizeof p, "%s/lr-1e-05/seed-1", sw);
    CHECK_INT(tupe_outdir_check(p, "fine-tuning run", TUPE_OUTDIR_REPLACE, &e), 0);
    char where[4200], kind[64];
    CHECK_INT(tupe_outdir_enclosing(p, where, sizeof where, kind, sizeof kind), 1);
    CHECK_STR(kind, "GLUE sweep");
}

UNIT_MAIN(T(kinds), T(unmarked_directories), T(one_writer_at_a_time), T(nested_outputs))
