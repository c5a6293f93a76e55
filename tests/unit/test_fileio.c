/* Checked I/O: readers that know where they are, and writers that never replace a good file
 * with a partial one, including when the process is killed mid-write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "unit.h"

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    if (d)
        closedir(d);
    return n;
}

static void read_exact_and_offsets(void)
{
    const char *p = unit_path("a.bin");
    unit_write(p, "0123456789", 10);
    tupe_in *in;
    tupe_err e;
    CHECK_INT(tupe_in_open(&in, p, &e), 0);
    char buf[16];
    CHECK_INT(tupe_in_read_exact(in, buf, 4, "prefix", &e), 0);
    CHECK(memcmp(buf, "0123", 4) == 0);
    CHECK_U64(tupe_in_offset(in), 4);
    CHECK_INT(tupe_in_read_exact(in, buf, 8, "record", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "a.bin: byte 4: truncated: expected 8 bytes of record, found 6");
    tupe_in_close(in);
}

static void missing_input_is_named(void)
{
    tupe_in *in;
    tupe_err e;
    CHECK_INT(tupe_in_open(&in, unit_path("nope.txt"), &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "nope.txt: No such file or directory");
    CHECK_INT(tupe_in_open(&in, unit_tmpdir(), &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "is a directory");
}

static void getline_edge_cases(void)
{
    const char *p = unit_path("lines.txt");
    /* empty line, CRLF kept, a line longer than the 1 MiB buffer, last line without '\n' */
    size_t big = (3u << 20) + 17;
    size_t n = 0;
    char *buf = malloc(big + 64);
    n += (size_t)sprintf(buf + n, "first\n\nsecond\r\n");
    memset(buf + n, 'x', big);
    n += big;
    buf[n++] = '\n';
    n += (size_t)sprintf(buf + n, "last");
    unit_write(p, buf, n);
    tupe_in *in;
    tupe_err e;
    CHECK_INT(tupe_in_open(&in, p, &e), 0);
    char *line;
    size_t len;
    CHECK_INT(tupe_in_getline(in, &line, &len, &e), 1);
    CHECK_STR(line, "first");
    CHECK_INT(tupe_in_getline(in, &line, &len, &e), 1);
    CHECK_INT(len, 0);
    CHECK_INT(tupe_in_getline(in, &line, &len, &e), 1);
    CHECK_STR(line, "second\r");
    CHECK_INT(tupe_in_getline(in, &line, &len, &e), 1);
    CHECK_INT(len, big);
    CHECK(line[0] == 'x' && line[big - 1] == 'x' && line[big] == 0);
    CHECK_INT(tupe_in_getline(in, &line, &len, &e), 1);
    CHECK_STR(line, "last");
    CHECK_INT(tupe_in_lineno(in), 5);
    CHECK_INT(tupe_in_getline(in, &line, &len, &e), 0);
    CHECK_U64(tupe_in_offset(in), n);
    tupe_in_close(in);
    free(buf);
}

static void read_file_limit(void)
{
    const char *p = unit_path("small.txt");
    unit_write(p, "hello", 5);
    char *b;
    size_t n;
    tupe_err e;
    CHECK_INT(tupe_read_file(p, &b, &n, 100, &e), 0);
    CHECK_INT(n, 5);
    CHECK_STR(b, "hello");
    free(b);
    CHECK_INT(tupe_read_file(p, &b, &n, 4, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "larger than the 4-byte limit");
}

static void atomic_replace_commit_and_abort(void)
{
    const char *p = unit_path("out.txt");
    tupe_err e;
    CHECK_INT(tupe_write_file(p, "old\n", 4, &e), 0);
    tupe_out *o;
    CHECK_INT(tupe_out_open(&o, p, &e), 0);
    CHECK_INT(tupe_out_printf(o, &e, "new %d\n", 1), 0);
    /* Not visible before commit. */
    size_t n;
    char *s = unit_slurp(p, &n);
    CHECK_STR(s, "old\n");
    free(s);
    CHECK_INT(count_entries(unit_tmpdir()), 2); /* out.txt and its temporary */
    CHECK_INT(tupe_out_commit(o, &e), 0);
    s = unit_slurp(p, &n);
    CHECK_STR(s, "new 1\n");
    free(s);
    CHECK_INT(count_entries(unit_tmpdir()), 1);
    CHECK_INT(tupe_out_open(&o, p, &e), 0);
    tupe_out_write(o, "junk", 4, &e);
    tupe_out_abort(o);
    s = unit_slurp(p, &n);
    CHECK_STR(s, "new 1\n");
    free(s);
    CHECK_INT(count_entries(unit_tmpdir()), 1);
}

/* Run `fn` in a child with TUPE_FAULT set; the child must die of SIGKILL. */
static int run_killed(const char *fault, void (*fn)(const char *), const char *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TUPE_FAULT", fault, 1);
        fn(arg);
        _exit(0); /* reached only if the fault point was not hit */
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static void child_big_write(const char *path)
{
    tupe_out *o;
    tupe_err e;
    if (tupe_out_open(&o, path, &e))
        _exit(3);
    char *chunk = malloc(1 << 20);
    memset(chunk, 'N', 1 << 20);
    for (int i = 0; i < 8; i++)
        tupe_out_write(o, chunk, 1 << 20, &e);
    tupe_out_commit(o, &e);
    _exit(0);
}

static void crash_mid_write_keeps_old_file(void)
{
    const char *p = unit_path("model.bin");
    tupe_err e;
    CHECK_INT(tupe_write_file(p, "complete old file\n", 18, &e), 0);
    /* Killed after the 3rd buffer reached the disk, then just before the rename. */
    CHECK(run_killed("out.flush:3", child_big_write, p));
    size_t n;
    char *s = unit_slurp(p, &n);
    CHECK_STR(s, "complete old file\n");
    free(s);
    CHECK(run_killed("out.commit", child_big_write, p));
    s = unit_slurp(p, &n);
    CHECK_STR(s, "complete old file\n");
    free(s);
    /* Without a fault the new file lands whole. */
    pid_t pid = fork();
    if (pid == 0)
        child_big_write(p);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    s = unit_slurp(p, &n);
    CHECK_INT(n, 8 << 20);
    CHECK(s[0] == 'N' && s[n - 1] == 'N');
    free(s);
}

static void write_error_is_reported(void)
{
    /* stdout on /dev/full: ENOSPC at flush becomes TUPE_EIO naming the output. */
    int full = open("/dev/full", O_WRONLY);
    if (full < 0) {
        printf("# /dev/full not available\n");
        return;
    }
    int saved = dup(STDOUT_FILENO);
    fflush(stdout);
    dup2(full, STDOUT_FILENO);
    tupe_out *o;
    tupe_err e;
    int rc = tupe_out_open(&o, "-", &e);
    if (!rc) {
        tupe_out_write(o, "data", 4, &e);
        rc = tupe_out_commit(o, &e);
    }
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(full);
    CHECK_INT(rc, TUPE_EIO);
    CHECK_HAS(e.msg, "(stdout): write failed: No space left on device");
}

static void cannot_create_output(void)
{
    tupe_out *o;
    tupe_err e;
    CHECK_INT(tupe_out_open(&o, unit_path("no/such/dir/file"), &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "no/such/dir/file: cannot create");
}

static void write_dir(const char *path, const char *content)
{
    tupe_dirtx *tx;
    tupe_err e;
    if (tupe_dirtx_begin(&tx, path, "test directory", &e))
        _exit(3);
    tupe_write_file(tupe_dirtx_file(tx, "a"), content, strlen(content), &e);
    tupe_write_file(tupe_dirtx_file(tx, "b"), content, strlen(content), &e);
    if (tupe_dirtx_commit(tx, &e))
        _exit(4);
}

static void child_dir(const char *path)
{
    write_dir(path, "second");
    _exit(0);
}

static void directory_commit_is_atomic(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/shards", unit_tmpdir());
    write_dir(dir, "first");
    size_t n;
    char path[4200];
    snprintf(path, sizeof path, "%s/a", dir);
    char *s = unit_slurp(path, &n);
    CHECK_STR(s, "first");
    free(s);
    /* Killed before the swap: the old directory stays, complete. */
    CHECK(run_killed("dirtx.commit", child_dir, dir));
    s = unit_slurp(path, &n);
    CHECK_STR(s, "first");
    free(s);
    /* Killed right after the swap: the new directory is complete. */
    CHECK(run_killed("dirtx.exchanged", child_dir, dir));
    s = unit_slurp(path, &n);
    CHECK_STR(s, "second");
    free(s);
    /* A replacement leaves exactly the directory: its two files, its kind and the list of
     * what it wrote. */
    write_dir(dir, "third");
    s = unit_slurp(path, &n);
    CHECK_STR(s, "third");
    free(s);
    CHECK_INT(count_entries(dir), 4);
    snprintf(path, sizeof path, "%s/.tupe-kind", dir);
    s = unit_slurp(path, &n);
    CHECK_STR(s, "test directory\n");
    free(s);
    /* Another kind of directory is not replaced. */
    tupe_dirtx *other;
    tupe_err oe;
    CHECK_INT(tupe_dirtx_begin(&other, dir, "shard directory", &oe), TUPE_ECANTCREAT);
    CHECK_HAS(oe.msg, "is a test directory");
    /* Abort removes everything it wrote. */
    tupe_dirtx *tx;
    tupe_err e;
    CHECK_INT(tupe_dirtx_begin(&tx, dir, "test directory", &e), 0);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", tupe_dirtx_tmp(tx));
    tupe_write_file(tupe_dirtx_file(tx, "x"), "x", 1, &e);
    tupe_dirtx_abort(tx);
    CHECK(!tupe_path_exists(tmp));
    /* A file in the way is an error, not a silent replacement. */
    const char *f = unit_path("plainfile");
    unit_write(f, "x", 1);
    CHECK_INT(tupe_dirtx_begin(&tx, f, "test directory", &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "exists and is not a directory");
}

static void mkdir_p_and_remove_tree(void)
{
    char d[4096];
    snprintf(d, sizeof d, "%s/x/y/z", unit_tmpdir());
    tupe_err e;
    CHECK_INT(tupe_mkdir_p(d, &e), 0);
    CHECK_INT(tupe_mkdir_p(d, &e), 0);
    char top[4096];
    snprintf(top, sizeof top, "%s/x", unit_tmpdir());
    CHECK_INT(tupe_remove_tree(top), 0);
    CHECK(!tupe_path_exists(top));
}

/* Replacing a directory keeps what its writer did not write (the user's README, a folder of
 * theirs) and refuses to delete one that the new directory would write over. */
static void replace_keeps_the_users_files(void)
{
    char dir[4200], f[4400];
    snprintf(dir, sizeof dir, "%s/export", unit_tmpdir());
    write_dir(dir, "one");
    snprintf(f, sizeof f, "%s/README.md", dir);
    unit_write(f, "mine\n", 5);
    snprintf(f, sizeof f, "%s/extra", dir);
    mkdir(f, 0777);
    snprintf(f, sizeof f, "%s/extra/notes", dir);
    unit_write(f, "n", 1);
    write_dir(dir, "two");
    size_t n;
    snprintf(f, sizeof f, "%s/a", dir);
    char *s = unit_slurp(f, &n);
    CHECK_STR(s, "two");
    free(s);
    snprintf(f, sizeof f, "%s/README.md", dir);
    s = unit_slurp(f, &n);
    CHECK_STR(s, "mine\n");
    free(s);
    snprintf(f, sizeof f, "%s/extra/notes", dir);
    CHECK(tupe_path_exists(f));
    /* what the writer wrote, and only that, is listed */
    snprintf(f, sizeof f, "%s/.tupe-files", dir);
    s = unit_slurp(f, &n);
    CHECK(strstr(s, "a\n") && strstr(s, "b\n") && !strstr(s, "README") && !strstr(s, "extra"));
    free(s);
    /* a file of the user's that the new directory writes too: refused, both kept */
    snprintf(f, sizeof f, "%s/c", dir);
    unit_write(f, "user", 4);
    tupe_dirtx *tx;
    tupe_err e;
    CHECK_INT(tupe_dirtx_begin(&tx, dir, "test directory", &e), 0);
    tupe_write_file(tupe_dirtx_file(tx, "c"), "new", 3, &e);
    CHECK_INT(tupe_dirtx_commit(tx, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "/c: not written by tupe");
    s = unit_slurp(f, &n);
    CHECK_STR(s, "user");
    free(s);
}

/* A FIFO where a file is read never blocks forever: without a writer, reading it whole fails
 * within its bound (2 s), naming it; with one, it is read as any pipe. */
static void fifo_without_writer(void)
{
    char f[4200];
    snprintf(f, sizeof f, "%s/config.json", unit_tmpdir());
    CHECK_INT(mkfifo(f, 0666), 0);
    char *buf;
    size_t n;
    tupe_err e;
    CHECK_INT(tupe_read_text(f, &buf, &n, 1 << 20, &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "config.json: a FIFO that no process writes");
    pid_t w = fork();
    if (w == 0) {
        int fd = open(f, O_WRONLY);
        _exit(fd >= 0 && write(fd, "{}\n", 3) == 3 ? 0 : 1);
    }
    CHECK_INT(tupe_read_text(f, &buf, &n, 1 << 20, &e), 0);
    CHECK_STR(buf, "{}\n");
    free(buf);
    waitpid(w, NULL, 0);
}

UNIT_MAIN(T(read_exact_and_offsets), T(missing_input_is_named), T(getline_edge_cases),
          T(read_file_limit), T(atomic_replace_commit_and_abort),
          T(crash_mid_write_keeps_old_file), T(write_error_is_reported), T(cannot_create_output),
          T(directory_commit_is_atomic), T(mkdir_p_and_remove_tree),
          T(replace_keeps_the_users_files), T(fifo_without_writer))
