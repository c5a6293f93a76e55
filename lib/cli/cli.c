#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/pathguard.h"
#include "cli/process.h"

static const tupe_opt common_opts[] = {
    {TUPE_OPT_QUIET, "quiet", 'q', TUPE_NOARG, NULL, "no progress or informational messages", NULL},
    {TUPE_OPT_VERBOSE, "verbose", 'v', TUPE_NOARG, NULL, "more detail on stderr (repeat for more)", NULL},
    {TUPE_OPT_THREADS, "threads", 0, TUPE_REQARG, "N", "CPU threads (default: all cores)", NULL},
    {TUPE_OPT_HELP, "help", 'h', TUPE_NOARG, NULL, "display this help and exit", NULL},
    {TUPE_OPT_VERSION, "version", 0, TUPE_NOARG, NULL, "output version information and exit", NULL},
    {TUPE_OPT_COMPLETION, "completion-helper", 0, TUPE_NOARG, NULL, NULL, NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static const char *exit_text =
    "Exit status: 0 success, 1 failure, 2 usage error, 65 bad input data,\n"
    "66 missing input, 73 cannot create output, 74 I/O error, 130 interrupted.\n";

static int nopts(const tupe_opt *o)
{
    int n = 0;
    while (o && o[n].id)
        n++;
    return n;
}

static int has_subcommands(const tupe_prog *p) { return p->cmds[0].name != NULL; }

static const tupe_cmd *find_cmd(const tupe_prog *p, const char *name)
{
    for (const tupe_cmd *c = p->cmds; c->summary; c++)
        if (c->name && strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

/* ---- help, version, completion --------------------------------------------------------- */

static void print_opt(FILE *fp, const tupe_opt *o)
{
    if (!o->help)
        return; /* hidden */
    char left[96];
    int n;
    if (o->shrt)
        n = snprintf(left, sizeof left, "  -%c, --%s", o->shrt, o->lng);
    else
        n = snprintf(left, sizeof left, "      --%s", o->lng);
    if (o->arg == TUPE_REQARG && n > 0 && (size_t)n < sizeof left)
        snprintf(left + n, sizeof left - (size_t)n, "=%s", o->metavar ? o->metavar : "ARG");
    else if (o->arg == TUPE_OPTARG && n > 0 && (size_t)n < sizeof left)
        snprintf(left + n, sizeof left - (size_t)n, "[=%s]", o->metavar ? o->metavar : "ARG");
    const int col = 30;
    fputs(left, fp);
    int len = (int)strlen(left);
    if (len >= col - 1) {
        fputc('\n', fp);
        len = 0;
    }
    const char *h = o->help;
    for (;;) {
        fprintf(fp, "%*s", col - len, "");
        const char *nl = strchr(h, '\n');
        if (!nl) {
            fprintf(fp, "%s\n", h);
            break;
        }
        fprintf(fp, "%.*s\n", (int)(nl - h), h);
        h = nl + 1;
        len = 0;
    }
}

void tupe_cli_help(const tupe_prog *p, const tupe_cmd *cmd, FILE *fp)
{
    if (!cmd && !has_subcommands(p))
        cmd = &p->cmds[0];
    if (!cmd) {
        fprintf(fp, "Usage: %s COMMAND [OPTION]... [ARG]...\n", p->name);
        fprintf(fp, "%c%s.\n\nCommands:\n", toupper((unsigned char)p->summary[0]), p->summary + 1);
        for (const tupe_cmd *c = p->cmds; c->summary; c++)
            fprintf(fp, "  %-12s%s%s\n", c->name, c->summary,
                    p->default_cmd && strcmp(p->default_cmd, c->name) == 0 ? " (default)" : "");
        fprintf(fp, "\nRun '%s COMMAND --help' for the options of a command.\n", p->name);
        fprintf(fp, "\nCommon options:\n");
        for (const tupe_opt *o = common_opts; o->id; o++)
            print_opt(fp, o);
        fprintf(fp, "\n%s", exit_text);
        fprintf(fp, "\nFull documentation: man %s\n", p->name);
        return;
    }
    fprintf(fp, "Usage: %s%s%s [OPTION]...%s%s\n", p->name, cmd->name ? " " : "",
            cmd->name ? cmd->name : "", cmd->args ? " " : "", cmd->args ? cmd->args : "");
    fprintf(fp, "%c%s.\n", toupper((unsigned char)cmd->summary[0]), cmd->summary + 1);
    if (cmd->description)
        fprintf(fp, "\n%s\n", cmd->description);
    if (nopts(cmd->opts)) {
        fprintf(fp, "\nOptions:\n");
        for (const tupe_opt *o = cmd->opts; o->id; o++)
            print_opt(fp, o);
    }
    fprintf(fp, "\nCommon options:\n");
    for (const tupe_opt *o = common_opts; o->id; o++)
        print_opt(fp, o);
    fprintf(fp, "\nA file argument of '-' means standard input (or output for -o).\n");
    fprintf(fp, "\n%s", exit_text);
    fprintf(fp, "\nFull documentation: man %s\n", p->name);
}

void tupe_cli_version(const tupe_prog *p, FILE *fp)
{
    fprintf(fp, "%s (tupe) %s\n", p->name, tupe_version());
    fprintf(fp, "Copyright (C) 2026 the tupe authors.\n"
                "License MIT: <https://opensource.org/license/mit>.\n"
                "This is free software: you are free to change and redistribute it.\n"
                "There is NO WARRANTY, to the extent permitted by law.\n");
    fprintf(fp, "Built with: %s\n", tupe_features());
}

static int path_role(const char *complete, const char **shown);

static void completion_opt(FILE *fp, const tupe_opt *o)
{
    if (!o->help)
        return;
    const char *shown;
    path_role(o->complete, &shown);
    char sh[4] = "";
    if (o->shrt)
        snprintf(sh, sizeof sh, "-%c", o->shrt);
    const char *nl = strchr(o->help, '\n');
    int hl = nl ? (int)(nl - o->help) : (int)strlen(o->help);
    fprintf(fp, "opt\t--%s\t%s\t%s\t%s\t%.*s\n", o->lng, sh,
            o->arg == TUPE_REQARG ? "arg" : o->arg == TUPE_OPTARG ? "optarg" : "noarg",
            shown ? shown : "", hl, o->help);
}

void tupe_cli_completion(const tupe_prog *p, const tupe_cmd *cmd, FILE *fp)
{
    if (!cmd && !has_subcommands(p))
        cmd = &p->cmds[0];
    if (!cmd) {
        for (const tupe_cmd *c = p->cmds; c->summary; c++)
            fprintf(fp, "cmd\t%s\t%s\n", c->name, c->summary);
        if (p->default_cmd) {
            fprintf(fp, "default\t%s\n", p->default_cmd);
            const tupe_cmd *d = find_cmd(p, p->default_cmd);
            if (d)
                for (const tupe_opt *o = d->opts; o && o->id; o++)
                    completion_opt(fp, o);
        }
        for (const tupe_opt *o = common_opts; o->id; o++)
            completion_opt(fp, o);
        return;
    }
    for (const tupe_opt *o = cmd->opts; o && o->id; o++)
        completion_opt(fp, o);
    for (const tupe_opt *o = common_opts; o->id; o++)
        completion_opt(fp, o);
    fprintf(fp, "args\t%s\n", cmd->args_complete ? cmd->args_complete : "");
}

/* ---- parsing ---------------------------------------------------------------------------- */

static const tupe_opt *opt_at(const tupe_cli *c, int i)
{
    int n = nopts(c->cmd->opts);
    return i < n ? &c->cmd->opts[i] : &common_opts[i - n];
}

static int setup(tupe_cli *c)
{
    int n = nopts(c->cmd->opts), m = nopts(common_opts);
    c->lopts = calloc((size_t)(n + m + 1), sizeof *c->lopts);
    if (!c->lopts) {
        fprintf(stderr, "%s: out of memory\n", c->prog->name);
        return TUPE_EFAIL;
    }
    size_t k = 0;
    c->shorts[k++] = ':'; /* report missing arguments as ':' so we word the message */
    for (int i = 0; i < n + m; i++) {
        const tupe_opt *o = opt_at(c, i);
        c->lopts[i].name = o->lng;
        c->lopts[i].has_arg = o->arg == TUPE_REQARG ? required_argument
                            : o->arg == TUPE_OPTARG ? optional_argument : no_argument;
        c->lopts[i].flag = NULL;
        c->lopts[i].val = 256 + i;
        if (o->shrt && k + 3 < sizeof c->shorts) {
            c->shorts[k++] = (char)o->shrt;
            if (o->arg == TUPE_REQARG)
                c->shorts[k++] = ':';
            else if (o->arg == TUPE_OPTARG)
                c->shorts[k++] = ':', c->shorts[k++] = ':';
        }
    }
    c->shorts[k] = 0;
    return 0;
}

/* -h/--help anywhere on the line wins, even after a bad option (clig.dev): scan the words,
 * skipping values of options that take one, up to "--". */
static int wants_help(const tupe_cli *c)
{
    int n = nopts(c->cmd->opts) + nopts(common_opts);
    for (int i = 1; i < c->argc; i++) {
        const char *w = c->argv[i];
        if (strcmp(w, "--") == 0)
            return 0;
        if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0)
            return 1;
        if (w[0] != '-' || w[1] == 0)
            continue;
        int takes = 0;
        if (w[1] == '-') {
            if (strchr(w, '='))
                continue;
            for (int k = 0; k < n; k++)
                if (strcmp(opt_at(c, k)->lng, w + 2) == 0)
                    takes = opt_at(c, k)->arg == TUPE_REQARG;
        } else {
            for (const char *p = w + 1; *p; p++) {
                for (int k = 0; k < n; k++)
                    if (opt_at(c, k)->shrt == *p) {
                        takes = opt_at(c, k)->arg == TUPE_REQARG && p[1] == 0;
                        if (opt_at(c, k)->arg == TUPE_REQARG)
                            p = p + strlen(p) - 1; /* the rest of the cluster is the value */
                    }
            }
        }
        if (takes)
            i++;
    }
    return 0;
}

/* Stop parsing: record the exit code and release what setup() allocated. */
static int stop(tupe_cli *c, int code)
{
    c->exit_code = code;
    free(c->lopts);
    c->lopts = NULL;
    return -1;
}

int tupe_cli_begin(tupe_cli *c, const tupe_prog *p, int argc, char **argv)
{
    tupe_process_start(p->name);
    memset(c, 0, sizeof *c);
    c->prog = p;
    c->argc = argc;
    c->argv = argv;
    if (has_subcommands(p)) {
        const char *a1 = argc > 1 ? argv[1] : NULL;
        const tupe_cmd *cmd = a1 ? find_cmd(p, a1) : NULL;
        if (cmd) {
            c->cmd = cmd;
            c->argc = argc - 1;
            c->argv = argv + 1;
        } else if (a1 && (strcmp(a1, "--help") == 0 || strcmp(a1, "-h") == 0)) {
            tupe_cli_help(p, NULL, stdout);
            return stop(c, fflush(stdout) == 0 ? TUPE_OK : TUPE_EIO);
        } else if (a1 && strcmp(a1, "--version") == 0) {
            tupe_cli_version(p, stdout);
            return stop(c, fflush(stdout) == 0 ? TUPE_OK : TUPE_EIO);
        } else if (a1 && strcmp(a1, "--completion-helper") == 0) {
            tupe_cli_completion(p, NULL, stdout);
            return stop(c, TUPE_OK);
        } else if (a1 && strcmp(a1, "help") == 0) {
            const tupe_cmd *h = argc > 2 ? find_cmd(p, argv[2]) : NULL;
            if (argc > 2 && !h) {
                fprintf(stderr, "%s: unknown command '%s'\nTry '%s --help' for the list.\n",
                        p->name, argv[2], p->name);
                return stop(c, TUPE_EUSAGE);
            }
            tupe_cli_help(p, h, stdout);
            return stop(c, TUPE_OK);
        } else if (p->default_cmd && (!a1 || a1[0] == '-' || !isalpha((unsigned char)a1[0]) ||
                                      strchr(a1, '/') || strchr(a1, '.'))) {
            /* Not a word that looks like a command: arguments of the default command. */
            c->cmd = find_cmd(p, p->default_cmd);
        } else if (!a1) {
            fprintf(stderr, "Usage: %s COMMAND [OPTION]... [ARG]...\nTry '%s --help' for more information.\n",
                    p->name, p->name);
            return stop(c, TUPE_EUSAGE);
        } else {
            fprintf(stderr, "%s: unknown command '%s'\nTry '%s --help' for the list of commands.\n",
                    p->name, a1, p->name);
            return stop(c, TUPE_EUSAGE);
        }
    } else {
        c->cmd = &p->cmds[0];
    }
    if (setup(c))
        return stop(c, TUPE_EFAIL);
    if (wants_help(c)) {
        tupe_cli_help(c->prog, c->cmd, stdout);
        return stop(c, fflush(stdout) == 0 ? TUPE_OK : TUPE_EIO);
    }
    optind = 0; /* GNU: full re-initialization, so a process may parse more than once */
    opterr = 0;
    return 0;
}

static const char *cmd_label(const tupe_cli *c, char *buf, size_t cap)
{
    if (c->cmd && c->cmd->name)
        snprintf(buf, cap, "%s %s", c->prog->name, c->cmd->name);
    else
        snprintf(buf, cap, "%s", c->prog->name);
    return buf;
}

int tupe_cli_usage(tupe_cli *c, const char *fmt, ...)
{
    char lbl[128];
    fprintf(stderr, "%s: ", c->prog->name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", cmd_label(c, lbl, sizeof lbl));
    c->exit_code = TUPE_EUSAGE;
    return TUPE_EUSAGE;
}

int tupe_report(const char *prog, const tupe_err *e)
{
    int code = e && e->code ? e->code : TUPE_EFAIL;
    fprintf(stderr, "%s: %s\n", prog, e && e->msg[0] ? e->msg : tupe_status_name(code));
    return code;
}

int tupe_cli_error(const tupe_cli *c, const tupe_err *e) { return tupe_report(c->prog->name, e); }

void tupe_cli_note(const tupe_cli *c, const char *fmt, ...)
{
    if (c->quiet)
        return;
    fprintf(stderr, "%s: ", c->prog->name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- paths: the rules of tupe(7) OUTPUTS ---------------------------------------------------- */

enum { PATH_NONE, PATH_IN, PATH_OUT, PATH_INTO };

/* What a completion string says of its value, and the completion itself without the role. */
static int path_role(const char *complete, const char **shown)
{
    static const struct { const char *prefix; int role; } pre[] = {
        {"out:", PATH_OUT}, {"into:", PATH_INTO}, {"scratch:", PATH_NONE}};
    if (shown)
        *shown = complete;
    if (!complete)
        return PATH_NONE;
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        size_t n = strlen(pre[i].prefix);
        if (strncmp(complete, pre[i].prefix, n) == 0) {
            if (shown)
                *shown = complete + n;
            return pre[i].role;
        }
    }
    return strcmp(complete, "file") == 0 || strcmp(complete, "dir") == 0 ? PATH_IN : PATH_NONE;
}

static void remember_path(tupe_cli *c, const tupe_opt *o, const char *value)
{
    int role = path_role(o->complete, NULL);
    if (role == PATH_NONE || !value || c->npaths == (int)(sizeof c->paths / sizeof c->paths[0]))
        return;
    c->paths[c->npaths].opt = o->lng;
    c->paths[c->npaths].path = value;
    c->paths[c->npaths].role = role;
    c->npaths++;
}

void tupe_cli_default(tupe_cli *c, const char *lng, const char *value)
{
    for (int i = 0; i < c->npaths; i++)
        if (strcmp(c->paths[i].opt, lng) == 0)
            return;
    for (const tupe_opt *o = c->cmd->opts; o && o->id; o++)
        if (strcmp(o->lng, lng) == 0)
            remember_path(c, o, value);
}

/* A guard holding every input of the command line (standard input too). */
static int guard_inputs(tupe_cli *c, tupe_guard **gp, tupe_err *e)
{
    char what[64];
    tupe_guard *g = *gp = tupe_guard_new();
    if (!g)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int rc = 0;
    for (int i = 0; i < c->npaths && !rc; i++)
        if (c->paths[i].role == PATH_IN) {
            snprintf(what, sizeof what, "--%s", c->paths[i].opt);
            rc = tupe_guard_input(g, c->paths[i].path, what, e);
        }
    if (path_role(c->cmd->args_complete, NULL) == PATH_IN)
        for (int i = 0; i < c->nargs && !rc; i++)
            rc = tupe_guard_input(g, c->args[i], NULL, e);
    /* Standard input too, read by default when no file is named. */
    if (!rc)
        rc = tupe_guard_input(g, "-", NULL, e);
    return rc;
}

int tupe_cli_env_output(tupe_cli *c, const char *var)
{
    const char *path = getenv(var);
    if (!path || !*path)
        return 0;
    tupe_guard *g;
    tupe_err e;
    int rc = guard_inputs(c, &g, &e);
    if (!rc && (rc = tupe_guard_output(g, path, var, TUPE_GUARD_REPLACE, &e))) {
        char msg[TUPE_ERR_MSG];
        snprintf(msg, sizeof msg, "%s", e.msg);
        tupe_fail(&e, rc, "%s %.*s", var, (int)(sizeof msg - 64), msg); /* the name of the path */
    }
    tupe_guard_free(g);
    return rc ? tupe_cli_error(c, &e) : 0;
}

static int check_paths(tupe_cli *c)
{
    tupe_err e;
    char what[64];
    for (int i = 0; i < c->npaths; i++)
        if (!c->paths[i].path[0])
            return tupe_cli_usage(c, "--%s: an empty path is no file", c->paths[i].opt);
    for (int i = 0; i < c->nargs; i++)
        if (!c->args[i][0])
            return tupe_cli_usage(c, "%s: an empty path is no file", c->cmd->args ? c->cmd->args : "argument");
    tupe_guard *g;
    int rc = guard_inputs(c, &g, &e);
    for (int i = 0; i < c->npaths && !rc; i++)
        if (c->paths[i].role == PATH_OUT || c->paths[i].role == PATH_INTO) {
            snprintf(what, sizeof what, "--%s", c->paths[i].opt);
            rc = tupe_guard_output(g, c->paths[i].path, what,
                                   c->paths[i].role == PATH_OUT ? TUPE_GUARD_REPLACE : TUPE_GUARD_INTO,
                                   &e);
        }
    /* Standard output, which every program may write: never onto an input. */
    if (!rc)
        rc = tupe_guard_output(g, "-", NULL, TUPE_GUARD_SAME, &e);
    tupe_guard_free(g);
    return rc ? tupe_cli_error(c, &e) : 0;
}

int tupe_cli_run(tupe_cli *c, void *opts)
{
    int rc = check_paths(c);
    return rc ? rc : c->cmd->run(c, opts);
}

void tupe_cli_on_note(void *ctx, int kind, const char *msg)
{
    const tupe_cli *c = ctx;
    if (kind == TUPE_NOTE_STATUS) {
        if (!c->quiet)
            fprintf(stderr, "%s\n", msg);
    } else if (kind == TUPE_NOTE_INFO || c->verbose) {
        tupe_cli_note(c, "%s", msg);
    }
}

int tupe_cli_next(tupe_cli *c, const char **arg)
{
    for (;;) {
        int idx = -1;
        int r = getopt_long(c->argc, c->argv, c->shorts, c->lopts, &idx);
        if (r == -1) {
            c->args = c->argv + optind;
            c->nargs = c->argc - optind;
            return 0;
        }
        if (r == '?') {
            const char *bad = c->argv[optind - 1];
            if (optopt && optopt < 256)
                tupe_cli_usage(c, "invalid option -- '%c'", optopt);
            else
                tupe_cli_usage(c, "unrecognized option '%s'", bad ? bad : "?");
            return stop(c, TUPE_EUSAGE);
        }
        if (r == ':') {
            if (optopt >= 256)
                tupe_cli_usage(c, "option '--%s' requires an argument", opt_at(c, optopt - 256)->lng);
            else
                tupe_cli_usage(c, "option requires an argument -- '%c'", optopt);
            return stop(c, TUPE_EUSAGE);
        }
        const tupe_opt *o = NULL;
        if (r >= 256) {
            o = opt_at(c, r - 256);
        } else {
            int n = nopts(c->cmd->opts) + nopts(common_opts);
            for (int i = 0; i < n; i++)
                if (opt_at(c, i)->shrt == r) {
                    o = opt_at(c, i);
                    break;
                }
        }
        if (!o) {
            tupe_cli_usage(c, "invalid option");
            return stop(c, TUPE_EUSAGE);
        }
        c->cur = o->lng;
        switch (o->id) {
        case TUPE_OPT_HELP:
            tupe_cli_help(c->prog, c->cmd, stdout);
            return stop(c, fflush(stdout) == 0 ? 0 : TUPE_EIO);
        case TUPE_OPT_VERSION:
            tupe_cli_version(c->prog, stdout);
            return stop(c, fflush(stdout) == 0 ? 0 : TUPE_EIO);
        case TUPE_OPT_COMPLETION:
            tupe_cli_completion(c->prog, c->cmd, stdout);
            return stop(c, 0);
        case TUPE_OPT_QUIET:
            c->quiet = 1;
            continue;
        case TUPE_OPT_VERBOSE:
            c->verbose++;
            continue;
        case TUPE_OPT_THREADS: {
            long t;
            if (tupe_cli_long(c, optarg, 1, 4096, &t))
                return stop(c, TUPE_EUSAGE);
            c->threads = (int)t;
            continue;
        }
        default:
            remember_path(c, o, optarg);
            *arg = optarg;
            return o->id;
        }
    }
}

void tupe_cli_end(tupe_cli *c)
{
    free(c->lopts);
    c->lopts = NULL;
}

/* ---- values ------------------------------------------------------------------------------- */

int tupe_parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int tupe_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int tupe_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int tupe_parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || v < 0)
        return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'B': end++; break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: return -1;
    }
    if (mul > 1) {
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'B' || *end == 'b')
            end++;
    }
    if (*end)
        return -1;
    double b = v * mul;
    if (b >= 1.8e19)
        return -1;
    *out = (uint64_t)b;
    return 0;
}

int tupe_parse_choice(const char *s, const char *choices)
{
    if (!s)
        return -1;
    size_t n = strlen(s);
    int idx = 0;
    for (const char *p = choices;; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, s, n) == 0)
            return idx;
        if (!bar)
            return -1;
        p = bar + 1;
    }
}

int tupe_cli_long(tupe_cli *c, const char *s, long min, long max, long *out)
{
    if (tupe_parse_long(s, min, max, out) == 0)
        return 0;
    return tupe_cli_usage(c, "--%s: expected an integer from %ld to %ld, got '%s'",
                          c->cur ? c->cur : "?", min, max, s ? s : "");
}

int tupe_cli_u64(tupe_cli *c, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    if (tupe_parse_u64(s, &v) == 0 && v >= min && v <= max) {
        *out = v;
        return 0;
    }
    return tupe_cli_usage(c, "--%s: expected an integer from %llu to %llu, got '%s'",
                          c->cur ? c->cur : "?", (unsigned long long)min,
                          (unsigned long long)max, s ? s : "");
}

int tupe_cli_double(tupe_cli *c, const char *s, double min, double max, double *out)
{
    double v;
    if (tupe_parse_double(s, &v) == 0 && v >= min && v <= max) {
        *out = v;
        return 0;
    }
    return tupe_cli_usage(c, "--%s: expected a number from %g to %g, got '%s'",
                          c->cur ? c->cur : "?", min, max, s ? s : "");
}

int tupe_cli_size(tupe_cli *c, const char *s, uint64_t *out)
{
    if (tupe_parse_size(s, out) == 0)
        return 0;
    return tupe_cli_usage(c, "--%s: expected a size such as 512M or 2G, got '%s'",
                          c->cur ? c->cur : "?", s ? s : "");
}

int tupe_cli_choice(tupe_cli *c, const char *s, const char *choices, int *out)
{
    int i = tupe_parse_choice(s, choices);
    if (i >= 0) {
        *out = i;
        return 0;
    }
    char list[256];
    snprintf(list, sizeof list, "%s", choices);
    for (char *q = list; *q; q++)
        if (*q == '|')
            *q = ',';
    return tupe_cli_usage(c, "--%s: expected one of %s, got '%s'", c->cur ? c->cur : "?", list,
                          s ? s : "");
}

int tupe_threads_apply(int threads)
{
    if (threads > 0)
        omp_set_num_threads(threads);
    return omp_get_max_threads();
}
