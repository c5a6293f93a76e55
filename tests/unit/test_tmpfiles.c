/* Temporaries never outlive their work: removed on a caught signal (from the table of this
 * process), and swept by the next writer when their owner is gone, never while it lives. */
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/tmpfiles.h"
#include "unit.h"

static long dead_pid(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void names(void)
{
    long pid;
    int old;
    size_t bl;
    CHECK(tupe_tmp_parse(".model.safetensors.tmp.1234.0badf00d", &pid, &old, &bl));
    CHECK_INT(pid, 1234);
    CHECK_INT(old, 0);
    CHECK_INT(bl, strlen("model.safetensors"));
    CHECK(tupe_tmp_parse(".shards.old.7.deadbeef", &pid, &old, &bl));
    CHECK_INT(old, 1);
    CHECK(!tupe_tmp_parse("model.tmp.1234.0badf00d", &pid, &old, &bl));   /* no leading dot */
    CHECK(!tupe_tmp_parse(".model.tmp.1234.0BADF00D", &pid, &old, &bl));  /* upper case */
    CHECK(!tupe_tmp_parse(".model.tmp.x1.0badf00d", &pid, &old, &bl));
    CHECK(!tupe_tmp_parse(".tmp.1.0badf00d", &pid, &old, &bl));            /* no NAME */
    CHECK(!tupe_tmp_parse(".notes.txt", &pid, &old, &bl));
    /* what fileio names its temporaries parses back to this process */
    char t[256];
    CHECK_INT(tupe_tmp_sibling(t, sizeof t, "dir/out.bin", "tmp"), 0);
    CHECK(tupe_tmp_parse(strrchr(t, '/') + 1, &pid, &old, &bl));
    CHECK_INT(pid, (long)getpid());
}

static void sweep_takes_only_the_dead(void)
{
    const char *d = unit_path("sweep");
    mkdir(d, 0777);
    long gone = dead_pid();
    char stale[256], live[256], locked[256], old_alone[256], old_done[256], done[256], mine[256],
        user[256];
    snprintf(stale, sizeof stale, "%s/.a.bin.tmp.%ld.00000001", d, gone);
    snprintf(live, sizeof live, "%s/.b.bin.tmp.%ld.00000002", d, (long)getppid());
    snprintf(locked, sizeof locked, "%s/.c.bin.tmp.%ld.00000003", d, gone);
    snprintf(old_alone, sizeof old_alone, "%s/.gone.old.%ld.00000004", d, gone);
    snprintf(old_done, sizeof old_done, "%s/.there.old.%ld.00000005", d, gone);
    snprintf(done, sizeof done, "%s/there", d);
    snprintf(mine, sizeof mine, "%s/.d.bin.tmp.%ld.00000006", d, (long)getpid());
    snprintf(user, sizeof user, "%s/.e.bin.tmp.%ld.notahex", d, gone);
    unit_write(stale, "x", 1);
    unit_write(live, "x", 1);
    unit_write(locked, "x", 1);
    unit_write(mine, "x", 1);
    unit_write(user, "x", 1);
    mkdir(old_alone, 0777);
    mkdir(old_done, 0777);
    mkdir(done, 0777);
    char inner[300];
    snprintf(inner, sizeof inner, "%s/file", old_done);
    unit_write(inner, "x", 1);
    /* someone on another machine sharing the directory: a PID unknown here, but its lock held */
    int lfd = open(locked, O_RDONLY);
    CHECK_INT(flock(lfd, LOCK_EX), 0);
    pid_t holder = fork();
    if (holder == 0) {
        pause();
        _exit(0);
    }
    close(lfd); /* the child holds the lock now */
    CHECK_INT(tupe_tmp_sweep(d), 2);
    CHECK(!exists(stale));
    CHECK(!exists(old_done));
    CHECK(exists(live));
    CHECK(exists(locked));
    CHECK(exists(old_alone)); /* the only copy of "gone" */
    CHECK(exists(mine));
    CHECK(exists(user));
    CHECK(exists(done));
    /* once per directory per process */
    unit_write(stale, "x", 1);
    CHECK_INT(tupe_tmp_sweep(d), 0);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
}

static void a_killed_writer_is_cleaned_up_by_the_next(void)
{
    const char *d = unit_path("killed");
    mkdir(d, 0777);
    char out[256];
    snprintf(out, sizeof out, "%s/result.bin", d);
    pid_t p = fork();
    if (p == 0) {
        tupe_out *o;
        tupe_err e;
        if (tupe_out_open(&o, out, &e) || tupe_out_write(o, "partial", 7, &e))
            _exit(1);
        kill(getpid(), SIGKILL);
    }
    waitpid(p, NULL, 0);
    int n = 0;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -c '^\\.result\\.bin\\.tmp\\.'", d);
    FILE *fp = popen(cmd, "r");
    CHECK(fp && fscanf(fp, "%d", &n) == 1);
    if (fp)
        pclose(fp);
    CHECK_INT(n, 1);
    tupe_err e;
    CHECK_INT(tupe_write_file(out, "whole", 5, &e), 0);
    fp = popen(cmd, "r");
    CHECK(fp && fscanf(fp, "%d", &n) == 1);
    if (fp)
        pclose(fp);
    CHECK_INT(n, 0);
}

static void remove_all_takes_what_is_in_progress(void)
{
    const char *d = unit_path("progress");
    mkdir(d, 0777);
    char out[256], dir[256];
    snprintf(out, sizeof out, "%s/file.bin", d);
    snprintf(dir, sizeof dir, "%s/tree", d);
    pid_t p = fork();
    if (p == 0) {
        tupe_out *o;
        tupe_dirtx *tx;
        tupe_err e;
        if (tupe_out_open(&o, out, &e) || tupe_dirtx_begin(&tx, dir, "test directory", &e))
            _exit(1);
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/sub", tupe_dirtx_tmp(tx));
        mkdir(sub, 0777);
        snprintf(sub, sizeof sub, "%s/sub/deep.bin", tupe_dirtx_tmp(tx));
        if (tupe_write_file(sub, "x", 1, &e))
            _exit(1);
        tupe_tmp_remove_all(); /* as the signal handler does */
        _exit(0);
    }
    int st;
    waitpid(p, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", d);
    FILE *fp = popen(cmd, "r");
    int n = -1;
    CHECK(fp && fscanf(fp, "%d", &n) == 1);
    if (fp)
        pclose(fp);
    CHECK_INT(n, 0);
}

UNIT_MAIN(T(names), T(sweep_takes_only_the_dead), T(a_killed_writer_is_cleaned_up_by_the_next),
          T(remove_all_takes_what_is_in_progress))
