/* Command-line conventions shared by every tupe program.
 *
 * Each program declares its options once, as a table (tupe_opt); the same table drives
 * getopt_long parsing, --help, and shell completion (the hidden --completion-helper option
 * prints what completions/tupe.bash and completions/_tupe need), so help and completion
 * cannot drift from the code.
 *
 * Common options every command accepts, handled here:
 *   -h, --help        usage on stdout, exit 0          --version   version on stdout, exit 0
 *   -q, --quiet       no progress or notes             -v, --verbose  more detail (repeatable)
 *   --threads N       CPU threads (default: all cores, or OMP_NUM_THREADS)
 *
 * Exit codes (identical in every man page): 0 success, 1 failure, 2 usage error, 65 bad input
 * data, 66 missing input, 73 cannot create output, 74 I/O error, 130 interrupted.
 *
 * This module prints (help, usage errors) but never exits: it returns the exit code. */
#ifndef TUPE_CLI_H
#define TUPE_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "base/note.h"
#include "base/version.h"

enum tupe_arg { TUPE_NOARG = 0, TUPE_REQARG = 1, TUPE_OPTARG = 2 };

typedef struct tupe_opt {
    int id;               /* returned by tupe_cli_next; > 0 and < 1000 */
    const char *lng;      /* long name without dashes (required) */
    int shrt;             /* short option letter, or 0 */
    int arg;              /* enum tupe_arg */
    const char *metavar;  /* shown in help: "PATH", "N" */
    const char *help;     /* help text; "\n" starts a continuation line */
    /* Completion of the value: "file", "dir", "list:a b c", or NULL. A file or directory is
     * also what the program does with it, for the rules of tupe(7) OUTPUTS (base/pathguard):
     * "file" or "dir" alone is an input; "out:file" or "out:dir" an output put in place as a
     * whole; "into:dir" a directory that files are added to; "scratch:dir" neither. */
    const char *complete;
} tupe_opt;

struct tupe_cli;

typedef struct tupe_cmd {
    const char *name;         /* subcommand, or NULL for a program without subcommands */
    const char *args;         /* synopsis of positional arguments, e.g. "[FILE]..." */
    const char *summary;      /* one line, lower case, no period */
    const char *description;  /* paragraph printed under the usage line */
    const tupe_opt *opts;     /* terminated by an entry with id 0 */
    const char *args_complete;/* completion of positional arguments: "file", "dir", ... (inputs) */
    /* What the subcommand does, given the program's parsed options (tupe_cli_run): its exit
     * status. One row per subcommand with its function, as git's builtins table. */
    int (*run)(struct tupe_cli *c, void *opts);
} tupe_cmd;

typedef struct tupe_prog {
    const char *name;         /* "tupe-tokenize" (a constant, not argv[0]) */
    const char *summary;
    const tupe_cmd *cmds;     /* terminated by an entry with summary NULL */
    const char *default_cmd;  /* subcommand used when argv[1] names none, or NULL */
} tupe_prog;

/* The --format row of a program that writes text or JSON, defined once for every program (the
 * id is the program's own). */
#define TUPE_OPT_FORMAT_JSON(id) {(id), "format", 0, TUPE_REQARG, "FMT", "text (default) or json", "list:text json"}

/* The --tensorboard DIR and --no-tensorboard rows of a training program (the TensorBoard copy of
 * a run's metrics.jsonl, train/rundir.h), defined once (the ids are the program's own). */
#define TUPE_OPT_TENSORBOARD(dir_id, off_id)                                                       \
    {(dir_id), "tensorboard", 0, TUPE_REQARG, "DIR", "TensorBoard event files of the metrics here\n" \
     "(default: OUTPUT/tensorboard)", "into:dir"},                                                 \
    {(off_id), "no-tensorboard", 0, TUPE_NOARG, NULL, "metrics.jsonl only", NULL}

/* Ids of the common options (never returned to the caller). */
enum { TUPE_OPT_HELP = 1000, TUPE_OPT_VERSION, TUPE_OPT_QUIET, TUPE_OPT_VERBOSE,
       TUPE_OPT_THREADS, TUPE_OPT_COMPLETION };

typedef struct tupe_cli {
    const tupe_prog *prog;
    const tupe_cmd *cmd;
    int quiet, verbose, threads;   /* threads 0 = default */
    int exit_code;                 /* meaningful when tupe_cli_next returned -1 */
    char **args;                   /* positional arguments after parsing */
    int nargs;
    /* private */
    int argc;
    char **argv;
    const char *cur;               /* "--name" of the option being handled, for messages */
    struct option *lopts;
    char shorts[160];
    struct { const char *opt, *path; int role; } paths[32]; /* file and directory values */
    int npaths;
} tupe_cli;

/* Pick the subcommand. Returns 0 to go on, or -1 when the program must stop with
 * c->exit_code (program-level --help/--version, "help SUB": 0; unknown subcommand: 2). */
int tupe_cli_begin(tupe_cli *c, const tupe_prog *p, int argc, char **argv);
/* Next option: its id (> 0); 0 when options are done (positional arguments are then in
 * c->args); -1 when the program must stop with c->exit_code (help printed: 0; usage error
 * printed: 2). Common options are consumed here. */
int tupe_cli_next(tupe_cli *c, const char **arg);
/* Run the chosen subcommand's function with the program's parsed options; its exit status.
 * First, the rules of tupe(7) OUTPUTS over every file and directory of the command line (the
 * options' roles in the table, the positional arguments as inputs, standard input and
 * output): an output that is, lies inside or (replaced as a whole) contains an input is
 * refused with 73 before the subcommand starts; an empty path is a usage error. */
int tupe_cli_run(tupe_cli *c, void *opts);
/* The same check for an output named by the environment variable var (when it is set), e.g. the
 * rendezvous file of a job's ranks: every path a program writes is an output, however it was
 * named. 0, or the exit status with the error printed. */
int tupe_cli_env_output(tupe_cli *c, const char *var);
/* The value an option of the command's table has when it is not given (e.g. --data
 * glue_data), so that the rules see it too. Nothing when the option was given. */
void tupe_cli_default(tupe_cli *c, const char *lng, const char *value);
/* Release the parser (safe to call more than once, and after -1). */
void tupe_cli_end(tupe_cli *c);

/* Print "prog: message" and the hint to --help; returns TUPE_EUSAGE. */
int tupe_cli_usage(tupe_cli *c, const char *fmt, ...) TUPE_PRINTF(2, 3);
/* Print "prog: <e->msg>"; returns e->code (TUPE_EFAIL if unset). */
int tupe_cli_error(const tupe_cli *c, const tupe_err *e);
/* Same, without a tupe_cli (e.g. before parsing). */
int tupe_report(const char *prog, const tupe_err *e);
/* A warning or note on stderr as "prog: message" (suppressed by -q when quiet != 0). */
void tupe_cli_note(const tupe_cli *c, const char *fmt, ...) TUPE_PRINTF(2, 3);

/* The note function every program gives the library (base/note.h); ctx is its tupe_cli. */
void tupe_cli_on_note(void *ctx, int kind, const char *msg);

/* Option values: each returns 0, or prints a usage error naming the option and returns 2. */
int tupe_cli_long(tupe_cli *c, const char *s, long min, long max, long *out);
int tupe_cli_u64(tupe_cli *c, const char *s, uint64_t min, uint64_t max, uint64_t *out);
int tupe_cli_double(tupe_cli *c, const char *s, double min, double max, double *out);
/* Sizes such as 512M, 2G, 1.5GiB, 1000 (bytes): K/M/G/T are powers of 1024. */
int tupe_cli_size(tupe_cli *c, const char *s, uint64_t *out);
/* One of a '|'-separated list ("blank|line|wiki"): returns its index in *out. */
int tupe_cli_choice(tupe_cli *c, const char *s, const char *choices, int *out);

/* Plain parsers behind the above (0 ok, -1 malformed or out of range). */
int tupe_parse_long(const char *s, long min, long max, long *out);
int tupe_parse_u64(const char *s, uint64_t *out);
int tupe_parse_double(const char *s, double *out);
int tupe_parse_size(const char *s, uint64_t *out);
int tupe_parse_choice(const char *s, const char *choices);

/* Print help for a command (or the program overview when cmd is NULL) to fp. */
void tupe_cli_help(const tupe_prog *p, const tupe_cmd *cmd, FILE *fp);
void tupe_cli_version(const tupe_prog *p, FILE *fp);
/* The completion data (the format is documented in completions/tupe.bash). */
void tupe_cli_completion(const tupe_prog *p, const tupe_cmd *cmd, FILE *fp);

/* Apply --threads (or the default) to OpenMP; returns the thread count in effect. */
int tupe_threads_apply(int threads);

#endif
