/* Run directories: check, lock, check again. What a run found before its lock was held (no
 * run there, the checkpoint it resumes, a directory that is no input) is asked again once the
 * lock is held, before anything is written. */
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/outdir.h"
#include "base/pathguard.h"
#include "train/rundir.h"
#include "unit.h"

/* A complete checkpoint of step `step` in run dir (what tupe_rundir_latest counts). */
static void fake_checkpoint(const char *dir, int step)
{
    char p[4400];
    tupe_err e;
    tupe_rundir_checkpoint(p, sizeof p, dir, step);
    CHECK_INT(tupe_mkdir_p(p, &e), 0);
    strcat(p, "/model.safetensors");
    unit_write(p, "x", 1);
}

static void another_run_in_between(void)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", unit_path("run"));
    tupe_rundir_spec s = {dir, &tupe_run_pretrain, 0, NULL, 1, NULL};
    tupe_rundir *rd;
    tupe_err e;
    /* absent: claimed without being made */
    CHECK_INT(tupe_rundir_claim(&rd, &s, &e), 0);
    CHECK(!rd && !tupe_path_exists(dir));
    /* another run is written there before this one takes the lock */
    fake_checkpoint(dir, 4);
    CHECK_INT(tupe_outdir_mark(dir, "pre-training run", &e), 0);
    CHECK_INT(tupe_rundir_begin(&rd, &s, -1, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "holds a run now (checkpoints up to step 4)");
    CHECK(!tupe_path_exists(unit_path("run/metrics.jsonl")));
    tupe_rundir_end(rd, &e);
    /* resuming step 4 while another process writes step 6 */
    rd = NULL;
    s.adopt = 1;
    CHECK_INT(tupe_rundir_claim(&rd, &s, &e), 0);
    fake_checkpoint(dir, 6);
    CHECK_INT(tupe_rundir_begin(&rd, &s, 4, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "latest checkpoint is step 6 now, not step 4");
    tupe_rundir_end(rd, &e);
    /* what it found: fine */
    rd = NULL;
    CHECK_INT(tupe_rundir_claim(&rd, &s, &e), 0);
    CHECK_INT(tupe_rundir_begin(&rd, &s, 6, &e), 0);
    CHECK_INT(tupe_rundir_end(rd, &e), 0);
}

static void output_swapped_for_a_link(void)
{
    char in[4200], out[4200], f[4400];
    snprintf(in, sizeof in, "%s", unit_path("inputs"));
    snprintf(out, sizeof out, "%s", unit_path("out"));
    mkdir(in, 0777);
    snprintf(f, sizeof f, "%s/shard.tps", in);
    unit_write(f, "x", 1);
    tupe_guard *g = tupe_guard_new();
    tupe_err e;
    CHECK_INT(tupe_guard_input(g, in, "--data", &e), 0);
    CHECK_INT(tupe_guard_output(g, out, "-o", TUPE_GUARD_INTO, &e), 0);
    tupe_rundir_spec s = {out, &tupe_run_pretrain, 0, NULL, 1, g};
    tupe_rundir *rd;
    CHECK_INT(tupe_rundir_claim(&rd, &s, &e), 0);
    /* between the command line and the lock, -o becomes a link into the input */
    snprintf(f, sizeof f, "%s/sub", in);
    mkdir(f, 0777);
    CHECK_INT(symlink(f, out), 0);
    CHECK_INT(tupe_rundir_begin(&rd, &s, -1, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "lies inside the input --data");
    snprintf(f, sizeof f, "%s/sub/metrics.jsonl", in);
    CHECK(!tupe_path_exists(f));
    tupe_rundir_end(rd, &e);
    tupe_guard_free(g);
}

static void tensorboard_checked_before_anything_is_made(void)
{
    char dir[4200], tb[4200];
    snprintf(dir, sizeof dir, "%s", unit_path("tbrun"));
    snprintf(tb, sizeof tb, "%s", unit_path("events"));
    unit_write(tb, "a file", 6);
    tupe_rundir_spec s = {dir, &tupe_run_pretrain, 0, tb, 0, NULL};
    tupe_rundir *rd;
    tupe_err e;
    CHECK_INT(tupe_rundir_claim(&rd, &s, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "not a directory");
    CHECK(!tupe_path_exists(dir));
}

UNIT_MAIN(T(another_run_in_between), T(output_swapped_for_a_link),
          T(tensorboard_checked_before_anything_is_made))
