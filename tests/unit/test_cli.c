/* Option values and the option table machinery (the programs' own behaviour is tested by
 * tests/cli/ shell scripts). */
#include "cli/cli.h"
#include "unit.h"

static void numbers(void)
{
    long v;
    CHECK_INT(tupe_parse_long("42", 0, 100, &v), 0);
    CHECK_INT(v, 42);
    CHECK_INT(tupe_parse_long("-3", -5, 5, &v), 0);
    CHECK_INT(tupe_parse_long("101", 0, 100, &v), -1);
    CHECK_INT(tupe_parse_long("4x", 0, 100, &v), -1);
    CHECK_INT(tupe_parse_long("", 0, 100, &v), -1);
    CHECK_INT(tupe_parse_long(" 4", 0, 100, &v), -1);
    uint64_t u;
    CHECK_INT(tupe_parse_u64("18446744073709551615", &u), 0);
    CHECK_U64(u, UINT64_MAX);
    CHECK_INT(tupe_parse_u64("18446744073709551616", &u), -1);
    CHECK_INT(tupe_parse_u64("-1", &u), -1);
    double d;
    CHECK_INT(tupe_parse_double("1e-4", &d), 0);
    CHECK_NEAR(d, 1e-4, 0);
    CHECK_INT(tupe_parse_double("nan", &d), -1);
    CHECK_INT(tupe_parse_double("1.5.", &d), -1);
}

static void sizes(void)
{
    uint64_t s;
    CHECK_INT(tupe_parse_size("512M", &s), 0);
    CHECK_U64(s, 512ULL << 20);
    CHECK_INT(tupe_parse_size("2G", &s), 0);
    CHECK_U64(s, 2ULL << 30);
    CHECK_INT(tupe_parse_size("1.5GiB", &s), 0);
    CHECK_U64(s, 3ULL << 29);
    CHECK_INT(tupe_parse_size("64k", &s), 0);
    CHECK_U64(s, 65536);
    CHECK_INT(tupe_parse_size("1000", &s), 0);
    CHECK_U64(s, 1000);
    CHECK_INT(tupe_parse_size("10X", &s), -1);
    CHECK_INT(tupe_parse_size("G", &s), -1);
    CHECK_INT(tupe_parse_size("-1G", &s), -1);
}

static void choices(void)
{
    CHECK_INT(tupe_parse_choice("line", "blank|line|wiki"), 1);
    CHECK_INT(tupe_parse_choice("wiki", "blank|line|wiki"), 2);
    CHECK_INT(tupe_parse_choice("lin", "blank|line|wiki"), -1);
    CHECK_INT(tupe_parse_choice("blank|line", "blank|line|wiki"), -1);
}

enum { O_OUT = 1, O_SEQ, O_DOCS, O_FLAG };
static const tupe_opt opts[] = {
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "write here", "file"},
    {O_SEQ, "seq-len", 0, TUPE_REQARG, "N", "sequence length", NULL},
    {O_DOCS, "docs", 0, TUPE_REQARG, "MODE", "document boundaries", "list:blank line wiki"},
    {O_FLAG, "flag", 'f', TUPE_NOARG, NULL, "a switch\nwith a second line", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
/* The subcommands' functions record which ran, with what. */
static int ran_encode(tupe_cli *c, void *which) { return (void)c, *(int *)which = 1, 10; }
static int ran_info(tupe_cli *c, void *which) { return (void)c, *(int *)which = 2, 20; }
static const tupe_cmd cmds[] = {
    {"encode", "[FILE]...", "encode text", "Longer words.", opts, "file", ran_encode},
    {"info", "FILE", "describe a file", NULL, NULL, "file", ran_info},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};
static const tupe_prog prog = {"tupe-test", "a test program", cmds, "encode"};

static void parses_options_and_arguments(void)
{
    char *argv[] = {"tupe-test", "encode", "a.txt", "-o", "out", "--seq-len=128", "-qf",
                    "--threads", "3", "b.txt", NULL};
    tupe_cli c;
    CHECK_INT(tupe_cli_begin(&c, &prog, 10, argv), 0);
    const char *arg;
    int id, seen = 0;
    while ((id = tupe_cli_next(&c, &arg)) > 0) {
        if (id == O_OUT) {
            CHECK_STR(arg, "out");
            seen |= 1;
        }
        if (id == O_SEQ) {
            long v;
            CHECK_INT(tupe_cli_long(&c, arg, 1, 4096, &v), 0);
            CHECK_INT(v, 128);
            seen |= 2;
        }
        if (id == O_FLAG)
            seen |= 4;
    }
    CHECK_INT(id, 0);
    CHECK_INT(seen, 7);
    CHECK_INT(c.quiet, 1);
    CHECK_INT(c.threads, 3);
    CHECK_INT(c.nargs, 2);
    if (c.nargs == 2) {
        CHECK_STR(c.args[0], "a.txt");
        CHECK_STR(c.args[1], "b.txt");
    }
    CHECK(strcmp(c.cmd->name, "encode") == 0);
    tupe_cli_end(&c);
}

static void default_command(void)
{
    char *argv[] = {"tupe-test", "-o", "x", "in.tok", NULL};
    tupe_cli c;
    CHECK_INT(tupe_cli_begin(&c, &prog, 4, argv), 0);
    CHECK_STR(c.cmd->name, "encode");
    const char *arg;
    while (tupe_cli_next(&c, &arg) > 0)
        ;
    CHECK_INT(c.nargs, 1);
    tupe_cli_end(&c);
}

static void help_and_completion_come_from_the_table(void)
{
    const char *p = unit_path("help.txt");
    FILE *f = fopen(p, "w");
    tupe_cli_help(&prog, &cmds[0], f);
    fclose(f);
    char *s = unit_slurp(p, NULL);
    CHECK_HAS(s, "Usage: tupe-test encode [OPTION]... [FILE]...\nEncode text.\n");
    CHECK_HAS(s, "  -o, --output=PATH");
    CHECK_HAS(s, "      --seq-len=N");
    CHECK_HAS(s, "  -f, --flag                  a switch\n                              with a second line\n");
    CHECK_HAS(s, "      --threads=N");
    CHECK_HAS(s, "Exit status: 0 success");
    CHECK(strstr(s, "completion-helper") == NULL);
    free(s);
    f = fopen(p, "w");
    tupe_cli_completion(&prog, &cmds[0], f);
    fclose(f);
    s = unit_slurp(p, NULL);
    CHECK_HAS(s, "opt\t--output\t-o\targ\tfile\twrite here\n");
    CHECK_HAS(s, "opt\t--docs\t\targ\tlist:blank line wiki\tdocument boundaries\n");
    CHECK_HAS(s, "opt\t--quiet\t-q\tnoarg\t\tno progress or informational messages\n");
    CHECK_HAS(s, "args\tfile\n");
    free(s);
    f = fopen(p, "w");
    tupe_cli_completion(&prog, NULL, f);
    fclose(f);
    s = unit_slurp(p, NULL);
    CHECK_HAS(s, "cmd\tencode\tencode text\ncmd\tinfo\tdescribe a file\n");
    CHECK_HAS(s, "default\tencode\n");
    free(s);
}

/* tupe_cli_run calls the chosen row's function with the program's options. */
static void the_table_dispatches_subcommands(void)
{
    char *argv[] = {"tupe-test", "info", "x", NULL};
    tupe_cli c;
    CHECK_INT(tupe_cli_begin(&c, &prog, 3, argv), 0);
    const char *arg;
    while (tupe_cli_next(&c, &arg) > 0)
        ;
    int which = 0;
    CHECK_INT(tupe_cli_run(&c, &which), 20);
    CHECK_INT(which, 2);
    tupe_cli_end(&c);
    char *argv2[] = {"tupe-test", "a.txt", NULL}; /* the default subcommand */
    CHECK_INT(tupe_cli_begin(&c, &prog, 2, argv2), 0);
    while (tupe_cli_next(&c, &arg) > 0)
        ;
    which = 0;
    CHECK_INT(tupe_cli_run(&c, &which), 10);
    CHECK_INT(which, 1);
    tupe_cli_end(&c);
}

UNIT_MAIN(T(numbers), T(sizes), T(choices), T(parses_options_and_arguments), T(default_command),
          T(help_and_completion_come_from_the_table), T(the_table_dispatches_subcommands))
