/* tupe-convert: checkpoints in and out of the formats the field uses: Hugging Face BERT
 * directories, the authors' fairseq TUPE checkpoints, other precisions, NumPy .npy files.
 * The conversions live in lib/convert/: hfbert.c, fairseq.c, tensorfile.c and import.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/dtype.h"
#include "cli/cli.h"
#include "convert/fairseq.h"
#include "convert/hfbert.h"
#include "convert/tensorfile.h"

enum { O_FORMAT = 1, O_TO, O_FROM, O_OUT, O_VOCAB, O_DTYPE, O_CASED, O_UNCASED, O_SEED, O_HEADS,
       O_HEAD, O_TENSOR, O_RAWBF16 };

#define DTYPES "list:fp32 bf16 fp16"

static const tupe_opt info_opts[] = {
    TUPE_OPT_FORMAT_JSON(O_FORMAT),
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt export_opts[] = {
    {O_TO, "to", 0, TUPE_REQARG, "FORMAT", "hf: a Hugging Face transformers directory (required)", "list:hf"},
    {O_OUT, "output", 'o', TUPE_REQARG, "DIR", "the directory to write (required)", "out:dir"},
    {O_VOCAB, "vocab", 0, TUPE_REQARG, "PATH", "the checkpoint's vocabulary: vocab.txt or a BPE\ndirectory (required)", "file"},
    {O_DTYPE, "dtype", 0, TUPE_REQARG, "TYPE", "fp32 (default), bf16 or fp16", DTYPES},
    {O_CASED, "cased", 0, TUPE_NOARG, NULL, "tokenizer_config.json: do_lower_case false", NULL},
    {O_UNCASED, "uncased", 0, TUPE_NOARG, NULL, "do_lower_case true (default: the checkpoint's\nsetting, else true)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt import_opts[] = {
    {O_FROM, "from", 0, TUPE_REQARG, "FORMAT", "hf (a directory) or fairseq (a .safetensors file)\n(required)", "list:hf fairseq"},
    {O_OUT, "output", 'o', TUPE_REQARG, "DIR", "the checkpoint directory to write (required)", "out:dir"},
    {O_SEED, "seed", 0, TUPE_REQARG, "N", "initial values of a missing masked-LM head\n(default: 1)", NULL},
    {O_HEADS, "heads", 0, TUPE_REQARG, "N", "fairseq: attention heads of a TUPE-A model\n(default: the file's args, else 12)", NULL},
    {O_HEAD, "head", 0, TUPE_REQARG, "NAME", "fairseq: the classification head to take", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt cast_opts[] = {
    {O_DTYPE, "dtype", 0, TUPE_REQARG, "TYPE", "bf16, fp16 or fp32 (required)", DTYPES},
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "the file or directory to write (required)", "out:file"},
    {O_FORMAT, "format", 0, TUPE_REQARG, "FMT", "the error report: text (default) or json", "list:text json"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt npy_opts[] = {
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "a .npy file with --tensor ('-' is stdout), else\na directory (required)", "out:file"},
    {O_TENSOR, "tensor", 't', TUPE_REQARG, "NAME", "write this tensor only", NULL},
    {O_RAWBF16, "raw-bf16", 0, TUPE_NOARG, NULL, "BF16 tensors as their raw bits (<u2) instead of\nfloat32", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static int cmd_info(tupe_cli *c, void *opts);
static int cmd_export(tupe_cli *c, void *opts);
static int cmd_import(tupe_cli *c, void *opts);
static int cmd_cast(tupe_cli *c, void *opts);
static int cmd_npy(tupe_cli *c, void *opts);

static const tupe_cmd cmds[] = {
    {"info", "PATH", "tensors, shapes, dtypes, parameter count, configuration and training state",
     "PATH is a safetensors file, a checkpoint or Hugging Face directory, or a\n"
     "model.safetensors.index.json. Per-tensor hashes, where the file has them, are verified.",
     info_opts, "file", cmd_info},
    {"export", "CHECKPOINT", "write a checkpoint as a Hugging Face transformers directory",
     "Writes model.safetensors (BERT names and layouts), config.json, vocab.txt,\n"
     "tokenizer_config.json and tokenizer.json (WordPiece). BERT-A becomes model_type\n"
     "\"bert\" (BertForMaskedLM, or BertForSequenceClassification for a tupe-glue\n"
     "checkpoint); the other variants become model_type \"tupe\" with modeling_tupe.py\n"
     "beside, which transformers runs with trust_remote_code=True.",
     export_opts, "dir", cmd_export},
    {"import", "SOURCE", "read a Hugging Face BERT or a fairseq TUPE model into a checkpoint",
     "--from hf: SOURCE is a directory with config.json and model.safetensors (or shards);\n"
     "--from fairseq: SOURCE is the released TUPE checkpoint's state dict as safetensors\n"
     "(share/tupe/fairseq2safetensors.py makes it from the .pt file).", import_opts, "file",
     cmd_import},
    {"cast", "PATH", "change the precision of every floating-point tensor",
     "Rounds to nearest even and reports each tensor's largest absolute and relative error\n"
     "and the values that overflow fp16. A directory (checkpoint or Hugging Face model) gives\n"
     "a directory; a checkpoint's optimizer state is not carried over.", cast_opts, "file",
     cmd_cast},
    {"npy", "PATH", "tensors as NumPy .npy files",
     "Every tensor into the directory OUTPUT as NAME.npy, or one with --tensor. Floating-point\n"
     "tensors are written as float32 (float64 stays float64); integers keep their type.",
     npy_opts, "file", cmd_npy},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

static const tupe_prog prog = {"tupe-convert", "convert checkpoints to and from other formats",
                               cmds, NULL};

/* Every subcommand's options, as parsed. */
typedef struct args {
    const char *out, *vocab, *head, *tensor;
    int fmt, to, from, dtype, lower, rawbf16;
    long heads;
    uint64_t seed;
} args;

static int dtype_of(int choice)
{
    return choice == 1 ? TUPE_BF16 : choice == 2 ? TUPE_F16 : TUPE_F32;
}

static void print_shape(FILE *fp, json_t *shape)
{
    size_t i;
    json_t *d;
    fputc('[', fp);
    json_array_foreach(shape, i, d)
        fprintf(fp, "%s%lld", i ? ", " : "", (long long)json_integer_value(d));
    fputc(']', fp);
}

static int cmd_info(tupe_cli *c, void *opts)
{
    int json = ((const args *)opts)->fmt == 1;
    if (c->nargs != 1)
        return tupe_cli_usage(c, "expected one PATH");
    tupe_err e;
    json_t *j;
    if (tupe_tf_info(c->args[0], &j, &e))
        return tupe_cli_error(c, &e);
    if (json) {
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(j);
        return 0;
    }
    json_t *tensors = json_object_get(j, "tensors"), *meta = json_object_get(j, "metadata");
    printf("path        %s\n", json_string_value(json_object_get(j, "path")));
    printf("files       %lld (%lld bytes)\n", (long long)json_integer_value(json_object_get(j, "files")),
           (long long)json_integer_value(json_object_get(j, "bytes")));
    printf("tensors     %zu\n", json_array_size(tensors));
    printf("parameters  %lld (", (long long)json_integer_value(json_object_get(j, "parameters")));
    const char *k;
    json_t *v;
    int first = 1;
    json_object_foreach(json_object_get(j, "dtypes"), k, v) {
        printf("%s%s %lld", first ? "" : ", ", k, (long long)json_integer_value(v));
        first = 0;
    }
    printf(" elements)\n");
    printf("hashes      %s\n", json_string_value(json_object_get(j, "hashes")));
    if (json_is_true(json_object_get(j, "optimizer")))
        printf("optimizer   optimizer.safetensors present\n");
    json_object_foreach(meta, k, v) {
        char *s = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(15));
        printf("%-11s %s\n", k, s ? s : json_string_value(v));
        free(s);
    }
    json_t *hc = json_object_get(j, "hf_config");
    if (hc) {
        char *s = json_dumps(hc, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
        printf("config.json %s\n", s ? s : "");
        free(s);
    }
    size_t w = 4, i;
    json_array_foreach(tensors, i, v) {
        size_t n = strlen(json_string_value(json_object_get(v, "name")));
        w = n > w ? n : w;
    }
    printf("\n%-*s  %-5s  %s\n", (int)w, "name", "dtype", "shape");
    json_array_foreach(tensors, i, v) {
        printf("%-*s  %-5s  ", (int)w, json_string_value(json_object_get(v, "name")),
               json_string_value(json_object_get(v, "dtype")));
        print_shape(stdout, json_object_get(v, "shape"));
        printf("\n");
    }
    json_decref(j);
    return 0;
}

/* What the subcommands that write share: -o and the one input; a directory is not '-'. */
static int need_output(tupe_cli *c, const args *a, int dir)
{
    if (!a->out)
        return tupe_cli_usage(c, "--output is required");
    if (c->nargs != 1)
        return tupe_cli_usage(c, "expected one %s", c->cmd->args);
    if (dir && strcmp(a->out, "-") == 0)
        return tupe_cli_usage(c, "%s writes a directory, not '-'", c->cmd->name);
    return 0;
}

static int cmd_export(tupe_cli *c, void *opts)
{
    const args *a = opts;
    int rc = need_output(c, a, 1);
    if (rc)
        return rc;
    if (a->to < 0)
        return tupe_cli_usage(c, "--to is required (hf)");
    if (!a->vocab)
        return tupe_cli_usage(c, "--vocab is required: the directory needs the vocabulary");
    tupe_hf_export_opts o = {a->vocab, dtype_of(a->dtype), a->lower, tupe_cli_on_note, c};
    tupe_err e;
    return tupe_hf_export(c->args[0], a->out, &o, &e) ? tupe_cli_error(c, &e) : 0;
}

static int cmd_import(tupe_cli *c, void *opts)
{
    const args *a = opts;
    int rc = need_output(c, a, 1);
    if (rc)
        return rc;
    if (a->from < 0)
        return tupe_cli_usage(c, "--from is required (hf or fairseq)");
    if (a->from == 0 && (a->heads || a->head))
        return tupe_cli_usage(c, "--heads and --head apply to --from fairseq");
    tupe_err e;
    if (a->from == 0) {
        tupe_hf_import_opts o = {a->seed, tupe_cli_on_note, c};
        return tupe_hf_import(c->args[0], a->out, &o, &e) ? tupe_cli_error(c, &e) : 0;
    }
    tupe_fairseq_opts o = {(int)a->heads, a->head, a->seed, tupe_cli_on_note, c};
    return tupe_fairseq_import(c->args[0], a->out, &o, &e) ? tupe_cli_error(c, &e) : 0;
}

static int cmd_npy(tupe_cli *c, void *opts)
{
    const args *a = opts;
    int rc = need_output(c, a, 0);
    if (rc)
        return rc;
    if (a->out && strcmp(a->out, "-") == 0 && isatty(STDOUT_FILENO))
        return tupe_cli_usage(c, "a .npy file is binary: not written to a terminal (give -o FILE "
                                 "or a pipe)");
    size_t n;
    tupe_err e;
    if (tupe_tf_npy(c->args[0], a->tensor, a->out, a->rawbf16, &n, &e))
        return tupe_cli_error(c, &e);
    if (c->verbose)
        tupe_cli_note(c, "%zu .npy file%s written to %s", n, n == 1 ? "" : "s", a->out);
    return 0;
}

static int cmd_cast(tupe_cli *c, void *opts)
{
    const args *o = opts;
    int rc = need_output(c, o, 0);
    if (rc)
        return rc;
    if (o->dtype < 0)
        return tupe_cli_usage(c, "--dtype is required (bf16, fp16 or fp32)");
    const char *out = o->out;
    int dtype = dtype_of(o->dtype), json = o->fmt == 1;
    tupe_err e;
    tupe_cast_report r;
    if (tupe_tf_cast(c->args[0], out, dtype, &r, &e))
        return tupe_cli_error(c, &e);
    /* The report goes where the data does not. */
    FILE *fp = strcmp(out, "-") == 0 ? stderr : stdout;
    double mabs = 0, mrel = 0;
    uint64_t over = 0, under = 0, cast = 0;
    size_t w = 6;
    for (size_t i = 0; i < r.n; i++) {
        const tupe_cast_stat *s = &r.t[i];
        mabs = s->max_abs > mabs ? s->max_abs : mabs;
        mrel = s->max_rel > mrel ? s->max_rel : mrel;
        over += s->overflow, under += s->underflow, cast += s->from != s->to;
        w = strlen(s->name) > w ? strlen(s->name) : w;
    }
    if (json) {
        json_t *a = json_array();
        for (size_t i = 0; i < r.n; i++) {
            const tupe_cast_stat *s = &r.t[i];
            json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I, s:f, s:f, s:I, s:I}", "name",
                                               s->name, "from", tupe_dtype_name(s->from), "to",
                                               tupe_dtype_name(s->to), "numel", (json_int_t)s->numel,
                                               "max_abs_error", s->max_abs, "max_rel_error", s->max_rel,
                                               "overflow", (json_int_t)s->overflow,
                                               "underflow", (json_int_t)s->underflow));
        }
        json_t *j = json_pack("{s:s, s:s, s:o, s:f, s:f, s:I, s:I, s:b}", "output", out, "dtype",
                              tupe_dtype_name(dtype), "tensors", a, "max_abs_error", mabs,
                              "max_rel_error", mrel, "overflow", (json_int_t)over, "underflow",
                              (json_int_t)under, "optimizer_left", r.optimizer_left);
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        fprintf(fp, "%s\n", s ? s : "{}");
        free(s);
        json_decref(j);
    } else if (!c->quiet) {
        fprintf(fp, "%-*s  %-4s  %-4s  %12s  %12s  %8s  %9s\n", (int)w, "tensor", "from", "to",
                "max abs err", "max rel err", "overflow", "underflow");
        for (size_t i = 0; i < r.n; i++) {
            const tupe_cast_stat *s = &r.t[i];
            fprintf(fp, "%-*s  %-4s  %-4s  %12.4g  %12.4g  %8llu  %9llu\n", (int)w, s->name,
                    tupe_dtype_name(s->from), tupe_dtype_name(s->to), s->max_abs, s->max_rel,
                    (unsigned long long)s->overflow, (unsigned long long)s->underflow);
        }
        fprintf(fp, "%llu of %zu tensors cast to %s: max abs error %.4g, max rel error %.4g, "
                "%llu overflowed, %llu underflowed to zero\n", (unsigned long long)cast, r.n,
                tupe_dtype_name(dtype), mabs, mrel, (unsigned long long)over,
                (unsigned long long)under);
    }
    if (r.optimizer_left)
        tupe_cli_note(c, "%s: the optimizer state is not carried over", out);
    if (over)
        tupe_cli_note(c, "%llu values overflowed to infinity in %s", (unsigned long long)over,
                      tupe_dtype_name(dtype));
    tupe_cast_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    args a = {.to = -1, .from = -1, .dtype = -1, .lower = -1, .seed = 1};
    const char *arg;
    int id, rc = 0;
    while ((id = tupe_cli_next(&c, &arg)) > 0) {
        switch (id) {
        case O_FORMAT: rc = tupe_cli_choice(&c, arg, "text|json", &a.fmt); break;
        case O_TO: rc = tupe_cli_choice(&c, arg, "hf", &a.to); break;
        case O_FROM: rc = tupe_cli_choice(&c, arg, "hf|fairseq", &a.from); break;
        case O_OUT: a.out = arg; break;
        case O_VOCAB: a.vocab = arg; break;
        case O_DTYPE: rc = tupe_cli_choice(&c, arg, "fp32|bf16|fp16", &a.dtype); break;
        case O_CASED: a.lower = 0; break;
        case O_UNCASED: a.lower = 1; break;
        case O_SEED: rc = tupe_cli_u64(&c, arg, 0, UINT64_MAX, &a.seed); break;
        case O_HEADS: rc = tupe_cli_long(&c, arg, 1, 4096, &a.heads); break;
        case O_HEAD: a.head = arg; break;
        case O_TENSOR: a.tensor = arg; break;
        case O_RAWBF16: a.rawbf16 = 1; break;
        }
        if (rc) {
            tupe_cli_end(&c);
            return rc;
        }
    }
    if (id < 0) {
        tupe_cli_end(&c);
        return c.exit_code;
    }
    tupe_threads_apply(c.threads);
    rc = tupe_cli_run(&c, &a);
    tupe_cli_end(&c);
    return rc;
}
