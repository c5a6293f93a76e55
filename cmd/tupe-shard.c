/* tupe-shard: packed, shuffled, compressed training shards (write, info, verify, cat). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/checksum.h"
#include "base/fileio.h"
#include "base/progress.h"
#include "cli/cli.h"
#include "data/megatron.h"
#include "data/pack.h"
#include "data/shard.h"
#include "data/shardbuild.h"
#include "data/shardread.h"
#include "text/tokstream.h"
#include "text/vocab.h"

enum {
    O_OUT = 1, O_SEQLEN, O_BREAK, O_SEED, O_NOSHUF, O_VFRAC, O_VSEQ, O_SHARDS, O_VSHARDS,
    O_MEMORY, O_TEMP, O_NOCOMP, O_LEVEL, O_FRAME, O_EXPORT, O_PAD, O_UNK, O_CLS, O_SEP, O_MASK,
    O_SPLIT, O_FORMAT, O_VOCAB, O_EPOCH, O_RANK, O_WORLD
};

static const tupe_opt write_opts[] = {
    {O_OUT, "output", 'o', TUPE_REQARG, "DIR", "the shard directory to write (required)", "out:dir"},
    {O_SEQLEN, "seq-len", 0, TUPE_REQARG, "N", "ids per sequence, [CLS] included (default: 512)", NULL},
    {O_BREAK, "break", 0, TUPE_REQARG, "MODE",
     "full: sequences cross documents (FULL-SENTENCES,\ndefault); doc: one document per sequence",
     "list:full doc"},
    {O_SEED, "seed", 0, TUPE_REQARG, "N", "seed of the shuffle and of the validation split\n(default: 1)", NULL},
    {O_NOSHUF, "no-shuffle", 0, TUPE_NOARG, NULL, "keep the sequences in input order", NULL},
    {O_VFRAC, "valid-fraction", 0, TUPE_REQARG, "F",
     "hold out this fraction of the documents for\nvalidation", NULL},
    {O_VSEQ, "valid-sequences", 0, TUPE_REQARG, "N",
     "hold out whole documents for at least N\nvalidation sequences", NULL},
    {O_SHARDS, "shards", 0, TUPE_REQARG, "N", "training shard files (default: 16)", NULL},
    {O_VSHARDS, "valid-shards", 0, TUPE_REQARG, "N", "validation shard files (default: 1)", NULL},
    {O_MEMORY, "memory", 0, TUPE_REQARG, "SIZE",
     "memory budget, e.g. 256M or 2G (default: 1G);\nthe shuffle spills to temporary files beyond it", NULL},
    {O_TEMP, "temp-dir", 0, TUPE_REQARG, "DIR", "directory for spill files (default: $TMPDIR\nor /tmp)", "scratch:dir"},
    {O_NOCOMP, "no-compress", 0, TUPE_NOARG, NULL, "store frames uncompressed (the files can be\nmemory-mapped)", NULL},
    {O_LEVEL, "level", 0, TUPE_REQARG, "N", "zstd compression level, 1 to 19 (default: 3)", NULL},
    {O_FRAME, "frame-size", 0, TUPE_REQARG, "SIZE", "uncompressed bytes per frame (default: 4M)", NULL},
    {O_EXPORT, "export", 0, TUPE_REQARG, "FORMAT",
     "write another layout instead: megatron\n(.bin/.idx pairs)", "list:megatron"},
    {O_PAD, "pad", 0, TUPE_REQARG, "ID", "pad id (default: from the token stream)", NULL},
    {O_UNK, "unk", 0, TUPE_REQARG, "ID", "unknown-token id to record (default: from the\nstream)", NULL},
    {O_CLS, "cls", 0, TUPE_REQARG, "ID", "[CLS]/<s> id (default: from the token stream)", NULL},
    {O_SEP, "sep", 0, TUPE_REQARG, "ID", "[SEP]/</s> id (default: from the token stream)", NULL},
    {O_MASK, "mask", 0, TUPE_REQARG, "ID", "mask id to record (default: from the stream)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static const tupe_opt info_opts[] = {{0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt verify_opts[] = {{0, NULL, 0, 0, NULL, NULL, NULL}};

static const tupe_opt cat_opts[] = {
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "write here (default: -, standard output)", "out:file"},
    {O_SPLIT, "split", 0, TUPE_REQARG, "SPLIT", "train (default) or valid", "list:train valid"},
    {O_FORMAT, "format", 0, TUPE_REQARG, "FORMAT",
     "binary: a token stream (default); text: one\nsequence per line, ids or (with --vocab) tokens",
     "list:binary text"},
    {O_VOCAB, "vocab", 0, TUPE_REQARG, "PATH", "vocabulary for --format text: vocab.txt or a BPE\ndirectory (must be the shards')", "file"},
    {O_EPOCH, "epoch", 0, TUPE_REQARG, "N", "the trainer's order for epoch N (default: the\nstored order)", NULL},
    {O_SEED, "seed", 0, TUPE_REQARG, "N", "seed of the epoch order (default: 1)", NULL},
    {O_RANK, "rank", 0, TUPE_REQARG, "R", "only the sequences of rank R (default: 0)", NULL},
    {O_WORLD, "world", 0, TUPE_REQARG, "W", "out of W ranks (default: 1)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static int do_write(tupe_cli *c, void *opts);
static int do_info(tupe_cli *c, void *opts);
static int do_verify(tupe_cli *c, void *opts);
static int do_cat(tupe_cli *c, void *opts);

static const tupe_cmd cmds[] = {
    {"write", "[FILE]...", "pack token streams into shuffled, compressed shards",
     "Reads token streams (tupe-tokenize encode; '-' or none: standard input), packs\n"
     "the documents into sequences of --seq-len ids, holds out a validation split by\n"
     "whole documents, shuffles globally within --memory, and writes a shard directory\n"
     "atomically.",
     write_opts, "file", do_write},
    {"info", "DIR", "describe a shard directory", NULL, info_opts, "dir", do_info},
    {"verify", "DIR", "check every checksum and record of a shard directory", NULL, verify_opts, "dir",
     do_verify},
    {"cat", "DIR", "write the sequences back out as a token stream or text", NULL, cat_opts, "dir", do_cat},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

static const tupe_prog prog = {"tupe-shard",
                               "packed, shuffled, compressed training shards with random access",
                               cmds, "write"};

/* cat's options */
typedef struct catopts {
    const char *out, *vocab;
    int split, text;
    int has_epoch;
    uint64_t epoch, seed;
    uint32_t rank, world;
    int has_seed;
} catopts;

/* Every subcommand's options, as parsed. */
typedef struct args {
    tupe_shard_opts write;
    int explicit_comp, explicit_level, explicit_vshards; /* given on the command line */
    catopts cat;
} args;

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0; }

/* ---- write ------------------------------------------------------------------------------------ */

static int do_write(tupe_cli *c, void *opts)
{
    args *ar = opts;
    tupe_shard_opts *o = &ar->write;
    int explicit_comp = ar->explicit_comp, explicit_level = ar->explicit_level;
    int explicit_vshards = ar->explicit_vshards, explicit_seed = ar->cat.has_seed;
    if (!o->output)
        return tupe_cli_usage(c, "missing -o DIR (the shard directory to write)");
    if (strcmp(o->output, "-") == 0)
        return tupe_cli_usage(c, "-o -: a shard directory cannot go to standard output");
    if (o->layout == TUPE_LAYOUT_MEGATRON && explicit_comp)
        return tupe_cli_usage(c, "--no-compress, --level and --frame-size do not apply to "
                              "--export megatron");
    if (o->valid_fraction > 0 && o->valid_sequences > 0)
        return tupe_cli_usage(c, "--valid-fraction and --valid-sequences exclude each other");
    if (explicit_seed && !o->shuffle && o->valid_fraction == 0 && o->valid_sequences == 0)
        return tupe_cli_usage(c, "--seed applies to the shuffle and the validation split: "
                                 "with --no-shuffle and no split it would do nothing");
    if (explicit_vshards && o->valid_fraction == 0 && o->valid_sequences == 0)
        return tupe_cli_usage(c, "--valid-shards applies to a validation split (--valid-fraction "
                                 "or --valid-sequences)");
    if (o->layout == TUPE_LAYOUT_RAW && explicit_level)
        return tupe_cli_usage(c, "--level does not apply to --no-compress");
    o->inputs = (const char *const *)c->args;
    o->ninputs = c->nargs;
    o->quiet = c->quiet;
    o->threads = tupe_threads_apply(c->threads);
    /* By default, no more compression threads than leave half the budget to the shuffle. */
    while (c->threads == 0 && o->threads > 1 && tupe_shard_sort_memory(o) < o->memory / 2)
        o->threads--;
    tupe_err e;
    tupe_shard_meta m;
    tupe_shard_report rep;
    memset(&rep, 0, sizeof rep);
    int rc = tupe_shard_build(o, &m, &rep, &e);
    if (rc)
        return tupe_cli_error(c, &e);
    const tupe_split_meta *t = &m.split[TUPE_SPLIT_TRAIN], *v = &m.split[TUPE_SPLIT_VALID];
    char in[32], raw[32], st[32];
    tupe_fmt_amount(in, sizeof in, (double)rep.input_bytes, "B");
    tupe_fmt_amount(raw, sizeof raw, (double)(t->raw_bytes + v->raw_bytes), "B");
    tupe_fmt_amount(st, sizeof st, (double)(t->stored_bytes + v->stored_bytes), "B");
    tupe_cli_note(c, "%s: %" PRIu64 " training sequences in %u files, %" PRIu64
                  " validation sequences (%" PRIu64 " documents); padding %.2f%%; %s stored as %s"
                  " from %s of input in %.1f s", o->output, t->sequences, t->nfiles, v->sequences,
                  v->documents, pct(t->padding + v->padding, t->tokens + t->padding + v->tokens +
                                    v->padding), raw, st, in, rep.seconds);
    if (rep.framed && rep.framed == m.in_documents - m.in_empty)
        tupe_cli_note(c, "every document already begins with cls (%d) and ends with sep (%d), so "
                      "the sequences hold them twice: encode without --add-special",
                      m.special[TUPE_SP_CLS], m.special[TUPE_SP_SEP]);
    /* Said, not silent: a file per share however few the sequences (ranks read by position,
     * so an empty file costs nothing but a surprise). */
    for (int k = 0; k < 2; k++) {
        const tupe_split_meta *sp = k ? v : t;
        if (sp->sequences && sp->sequences < sp->nfiles)
            tupe_cli_note(c, "%s %u: only %" PRIu64 " %s sequences, so %" PRIu64 " of the files are "
                          "empty (give %s %" PRIu64 " or fewer to avoid them)",
                          k ? "--valid-shards" : "--shards", sp->nfiles, sp->sequences,
                          k ? "validation" : "training", (uint64_t)sp->nfiles - sp->sequences,
                          k ? "--valid-shards" : "--shards", sp->sequences);
    }
    if (o->valid_fraction > 0 && v->sequences == 0)
        tupe_cli_note(c, "--valid-fraction %g held out none of the %" PRIu64 " documents: there is "
                      "no validation split (--valid-sequences N holds out a set number)",
                      o->valid_fraction, m.in_documents - m.in_empty);
    if (c->verbose)
        tupe_cli_note(c, "shuffle: %" PRIu64 " sorted runs spilled (%" PRIu64
                      " bytes, %" PRIu64 " extra merge passes)", rep.runs, rep.spilled, rep.passes);
    tupe_shard_meta_free(&m);
    return 0;
}

/* ---- info ------------------------------------------------------------------------------------ */

static int do_info(tupe_cli *c, void *opts)
{
    (void)opts;
    if (c->nargs != 1)
        return tupe_cli_usage(c, "expected one DIR");
    const char *dir = c->args[0];
    tupe_err e;
    tupe_shard_meta m;
    if (tupe_manifest_read(dir, &m, &e))
        return tupe_cli_error(c, &e);
    char h[22], a[32], b[32];
    printf("directory:   %s\n", dir);
    if (m.layout == TUPE_LAYOUT_ZSTD)
        printf("layout:      zstd frames, level %d, %u records (%" PRIu64 " bytes) per frame\n",
               m.level, m.frame_records, (uint64_t)m.frame_records * m.rec_bytes);
    else if (m.layout == TUPE_LAYOUT_RAW)
        printf("layout:      uncompressed (mmap-able), %u records per frame\n", m.frame_records);
    else
        printf("layout:      Megatron .bin/.idx, %s ids (dtype code %d)\n",
               m.megatron_dtype == TUPE_MEGATRON_UINT16 ? "uint16" : "int32", m.megatron_dtype);
    printf("sequences:   %u ids (%u-byte ids, %u-byte records)\n", m.seq_len, m.id_bytes,
           m.rec_bytes);
    tupe_hash_hex(m.vocab_hash, h);
    printf("vocabulary:  %u ids, %s\n", m.vocab_size, h);
    printf("special ids: pad %d, unk %d, cls %d, sep %d, mask %d\n", m.special[TUPE_SP_PAD],
           m.special[TUPE_SP_UNK], m.special[TUPE_SP_CLS], m.special[TUPE_SP_SEP],
           m.special[TUPE_SP_MASK]);
    printf("packing:     %s, %s\n", m.brk == TUPE_BREAK_DOC ? "doc (DOC-SENTENCES)" : "full (FULL-SENTENCES)",
           m.shuffled ? "shuffled" : "input order");
    printf("seed:        %" PRIu64 "\n", m.seed);
    tupe_hash_hex(m.set_id, h);
    printf("set id:      %s\n", h);
    printf("input:       %" PRIu64 " documents (%" PRIu64 " empty), %" PRIu64 " ids\n",
           m.in_documents, m.in_empty, m.in_tokens);
    uint64_t raw = 0, stored = 0;
    for (int s = 0; s < TUPE_SPLITS; s++) {
        const tupe_split_meta *sm = &m.split[s];
        printf("%s:       %" PRIu64 " sequences in %u files, %" PRIu64 " documents, %" PRIu64
               " tokens, padding %.2f%%\n", tupe_split_name(s), sm->sequences, sm->nfiles,
               sm->documents, sm->tokens, pct(sm->padding, sm->tokens + sm->padding));
        raw += sm->raw_bytes;
        stored += sm->stored_bytes;
        if (c->verbose)
            for (uint32_t i = 0; i < sm->nfiles; i++)
                printf("  %s  %" PRIu64 " sequences from %" PRIu64 ", %" PRIu64 " tokens, %" PRIu64
                       " bytes\n", sm->files[i].name, sm->files[i].sequences, sm->files[i].first,
                       sm->files[i].tokens, sm->files[i].bytes);
    }
    tupe_fmt_amount(a, sizeof a, (double)raw, "B");
    tupe_fmt_amount(b, sizeof b, (double)stored, "B");
    printf("size:        %s of records, %s on disk, compression ratio %.3f\n", a, b,
           raw ? (double)stored / (double)raw : 0.0);
    tupe_shard_meta_free(&m);
    return 0; /* a failed write to standard output is reported at exit (cli/process.h) */
}

/* ---- verify ---------------------------------------------------------------------------------- */

static void report_problem(void *ctx, const tupe_err *p) { tupe_cli_error(ctx, p); }

static int do_verify(tupe_cli *c, void *opts)
{
    (void)opts;
    if (c->nargs != 1)
        return tupe_cli_usage(c, "expected one DIR");
    tupe_err e;
    tupe_verify_stats st;
    int rc = tupe_shard_verify(c->args[0], report_problem, c, &st, &e);
    if (rc)
        return tupe_cli_error(c, &e);
    if (!c->quiet)
        printf("%s: OK (%" PRIu64 " files, %" PRIu64 " frames, %" PRIu64 " sequences)\n",
               c->args[0], st.files, st.frames, st.sequences);
    return 0;
}

/* ---- cat ------------------------------------------------------------------------------------- */

/* The vocabulary (vocab.txt or a BPE directory) must be the one the shards were made with. */
static int load_vocab(const char *path, const tupe_shard_meta *m, tupe_vocab **v, tupe_err *e)
{
    int rc = tupe_vocab_load(v, path, e);
    if (rc)
        return rc;
    if (tupe_vocab_size(*v) != m->vocab_size || (*v)->hash != m->vocab_hash) {
        char a[22], b[22];
        tupe_hash_hex((*v)->hash, a);
        tupe_hash_hex(m->vocab_hash, b);
        rc = tupe_fail(e, TUPE_EDATA, "%s: this vocabulary (%u tokens, %s) is not the one the "
                       "shards were made with (%u tokens, %s)", path, tupe_vocab_size(*v), a,
                       m->vocab_size, b);
        tupe_vocab_free(*v);
        *v = NULL;
    }
    return rc;
}

typedef struct catout {
    tupe_out *o;
    tupe_tokw *w;
    tupe_vocab *vocab;
} catout;

static int put_seq(catout *co, const uint32_t *ids, uint32_t n, tupe_err *e)
{
    if (co->w)
        return tupe_tokw_doc(co->w, ids, n, e);
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++)
        rc = co->vocab ? tupe_out_printf(co->o, e, i ? " %s" : "%s", tupe_vocab_token(co->vocab, ids[i]))
                     : tupe_out_printf(co->o, e, i ? " %u" : "%u", ids[i]);
    return rc ? rc : tupe_out_write(co->o, "\n", 1, e);
}

static int cat_native(const char *dir, const catopts *a, catout *co, tupe_err *e)
{
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    ro.split = a->split;
    ro.rank = a->rank;
    ro.world = a->world;
    ro.shuffle = a->has_epoch;
    ro.seed = a->seed;
    tupe_shardr *r;
    int rc = tupe_shardr_open(&r, dir, &ro, e);
    if (rc)
        return rc;
    uint32_t *ids = malloc((size_t)tupe_shardr_meta(r)->seq_len * sizeof *ids);
    if (!ids) {
        tupe_shardr_close(r);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    rc = tupe_shardr_seek(r, a->epoch, 0, e);
    uint32_t len;
    int got = 0;
    while (!rc && (got = tupe_shardr_next(r, ids, &len, NULL, e)) == 1)
        rc = put_seq(co, ids, len, e);
    if (!rc && got < 0)
        rc = e->code;
    free(ids);
    tupe_shardr_close(r);
    return rc;
}

static int cat_megatron(const char *dir, const tupe_shard_meta *m, const catopts *a, catout *co,
                        tupe_err *e)
{
    uint32_t *ids = malloc((size_t)m->seq_len * sizeof *ids);
    if (!ids)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    const tupe_split_meta *sm = &m->split[a->split];
    int rc = 0;
    uint64_t g = 0;
    for (uint32_t i = 0; i < sm->nfiles && !rc; i++) {
        char prefix[PATH_MAX];
        snprintf(prefix, sizeof prefix, "%s/%s", dir, sm->files[i].name);
        tupe_megar mr;
        if ((rc = tupe_megar_open(&mr, prefix, e)))
            break;
        for (uint64_t q = 0; q < mr.sequences && !rc; q++, g++) {
            uint32_t n;
            if (g % a->world != a->rank)
                continue;
            if (!(rc = tupe_megar_seq(&mr, q, ids, m->seq_len, &n, e)))
                rc = put_seq(co, ids, n, e);
        }
        tupe_megar_close(&mr);
    }
    free(ids);
    return rc;
}

static int do_cat(tupe_cli *c, void *opts)
{
    const catopts *a = &((const args *)opts)->cat;
    if (c->nargs != 1)
        return tupe_cli_usage(c, "expected one DIR");
    if (a->rank >= a->world)
        return tupe_cli_usage(c, "--rank %u is not below --world %u", a->rank, a->world);
    if (a->vocab && !a->text)
        return tupe_cli_usage(c, "--vocab applies to --format text");
    if (!a->text && strcmp(a->out, "-") == 0 && isatty(STDOUT_FILENO))
        return tupe_cli_usage(c, "a token stream is binary: not written to a terminal (give -o "
                                 "FILE, a pipe, or --format text)");
    if (a->has_seed && !a->has_epoch)
        return tupe_cli_usage(c, "--seed applies to --epoch (the stored order has no seed)");
    if (a->has_epoch && a->split == TUPE_SPLIT_VALID)
        return tupe_cli_usage(c, "--epoch applies to the training split (tupe-pretrain reads the "
                                 "validation split in stored order)");
    const char *dir = c->args[0];
    tupe_err e;
    tupe_shard_meta m;
    if (tupe_manifest_read(dir, &m, &e))
        return tupe_cli_error(c, &e);
    if (m.layout == TUPE_LAYOUT_MEGATRON && a->has_epoch) {
        tupe_shard_meta_free(&m);
        return tupe_cli_usage(c, "--epoch needs tupe shards, not a Megatron export");
    }
    catout co = {NULL, NULL, NULL};
    int rc = 0;
    if (a->vocab)
        rc = load_vocab(a->vocab, &m, &co.vocab, &e);
    if (!rc && a->text) {
        rc = tupe_out_open(&co.o, a->out, &e);
    } else if (!rc) {
        tupe_tok_header h;
        tupe_tok_header_init(&h, m.vocab_size, m.vocab_hash);
        memcpy(h.special, m.special, sizeof h.special);
        rc = tupe_tokw_open(&co.w, a->out, &h, &e);
    }
    if (!rc)
        rc = m.layout == TUPE_LAYOUT_MEGATRON ? cat_megatron(dir, &m, a, &co, &e)
                                              : cat_native(dir, a, &co, &e);
    if (co.w) {
        if (rc)
            tupe_tokw_abort(co.w);
        else
            rc = tupe_tokw_close(co.w, &e);
    }
    if (co.o) {
        if (rc)
            tupe_out_abort(co.o);
        else
            rc = tupe_out_commit(co.o, &e);
    }
    tupe_vocab_free(co.vocab);
    tupe_shard_meta_free(&m);
    return rc ? tupe_cli_error(c, &e) : 0;
}

/* ---- main ------------------------------------------------------------------------------------ */

static int special_id(tupe_cli *c, const char *arg, int32_t *out)
{
    long v;
    if (tupe_cli_long(c, arg, 0, INT32_MAX, &v))
        return -1;
    *out = (int32_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    args ar = {.cat = {"-", NULL, TUPE_SPLIT_TRAIN, 0, 0, 0, 1, 0, 1, 0}};
    tupe_shard_opts_init(&ar.write);
    int id, bad = 0, choice;
    long lv;
    uint64_t u;
    const char *arg;
    while (!bad && (id = tupe_cli_next(&c, &arg)) > 0) {
        switch (id) {
        case O_OUT:
            ar.write.output = arg;
            ar.cat.out = arg;
            break;
        case O_SEQLEN:
            bad = tupe_cli_long(&c, arg, 2, 1L << 20, &lv);
            ar.write.seq_len = (uint32_t)lv;
            break;
        case O_BREAK:
            bad = tupe_cli_choice(&c, arg, "full|doc", &choice);
            ar.write.brk = choice;
            break;
        case O_SEED:
            bad = tupe_cli_u64(&c, arg, 0, INT64_MAX, &u);
            ar.write.seed = ar.cat.seed = u;
            ar.cat.has_seed = 1;
            break;
        case O_NOSHUF: ar.write.shuffle = 0; break;
        case O_VFRAC: bad = tupe_cli_double(&c, arg, 0, 0.999999, &ar.write.valid_fraction); break;
        case O_VSEQ: bad = tupe_cli_u64(&c, arg, 1, INT64_MAX, &ar.write.valid_sequences); break;
        case O_SHARDS:
            bad = tupe_cli_long(&c, arg, 1, 1000000, &lv);
            ar.write.shards = (uint32_t)lv;
            break;
        case O_VSHARDS:
            bad = tupe_cli_long(&c, arg, 1, 1000000, &lv);
            ar.write.valid_shards = (uint32_t)lv;
            ar.explicit_vshards = 1;
            break;
        case O_MEMORY: bad = tupe_cli_size(&c, arg, &ar.write.memory); break;
        case O_TEMP: ar.write.tmpdir = arg; break;
        case O_NOCOMP:
            ar.write.layout = ar.write.layout == TUPE_LAYOUT_MEGATRON ? ar.write.layout : TUPE_LAYOUT_RAW;
            ar.explicit_comp = 1;
            break;
        case O_LEVEL:
            bad = tupe_cli_long(&c, arg, 1, 19, &lv);
            ar.write.level = (int)lv;
            ar.explicit_comp = ar.explicit_level = 1;
            break;
        case O_FRAME:
            bad = tupe_cli_size(&c, arg, &ar.write.frame_bytes);
            if (!bad && (ar.write.frame_bytes < 4096 || ar.write.frame_bytes > ((uint64_t)256 << 20)))
                bad = tupe_cli_usage(&c, "--frame-size: expected 4K to 256M, got '%s'", arg);
            ar.explicit_comp = 1;
            break;
        case O_EXPORT:
            bad = tupe_cli_choice(&c, arg, "megatron", &choice);
            ar.write.layout = TUPE_LAYOUT_MEGATRON;
            break;
        case O_PAD: bad = special_id(&c, arg, &ar.write.special[TUPE_SP_PAD]); break;
        case O_UNK: bad = special_id(&c, arg, &ar.write.special[TUPE_SP_UNK]); break;
        case O_CLS: bad = special_id(&c, arg, &ar.write.special[TUPE_SP_CLS]); break;
        case O_SEP: bad = special_id(&c, arg, &ar.write.special[TUPE_SP_SEP]); break;
        case O_MASK: bad = special_id(&c, arg, &ar.write.special[TUPE_SP_MASK]); break;
        case O_SPLIT:
            bad = tupe_cli_choice(&c, arg, "train|valid", &ar.cat.split);
            break;
        case O_FORMAT:
            bad = tupe_cli_choice(&c, arg, "binary|text", &ar.cat.text);
            break;
        case O_VOCAB: ar.cat.vocab = arg; break;
        case O_EPOCH:
            bad = tupe_cli_u64(&c, arg, 0, UINT32_MAX, &ar.cat.epoch);
            ar.cat.has_epoch = 1;
            break;
        case O_RANK:
            bad = tupe_cli_long(&c, arg, 0, 1000000, &lv);
            ar.cat.rank = (uint32_t)lv;
            break;
        case O_WORLD:
            bad = tupe_cli_long(&c, arg, 1, 1000000, &lv);
            ar.cat.world = (uint32_t)lv;
            break;
        }
    }
    if (bad || id < 0) {
        tupe_cli_end(&c);
        return bad ? TUPE_EUSAGE : c.exit_code;
    }
    int rc = tupe_cli_run(&c, &ar);
    tupe_cli_end(&c);
    return rc;
}
