#include "glue/ftsettings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checksum.h"
#include "base/fileio.h"
#include "model/checkpoint.h"
#include "text/vocab.h"

/* The hash of files' contents, in order (a missing one counts as empty: reading it later
 * reports it). */
static int hash_files(const char *const *paths, int n, char hex[22], tupe_err *e)
{
    tupe_hasher *h = tupe_hasher_new();
    unsigned char *buf = malloc(1 << 20);
    int rc = h && buf ? 0 : tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        if (!tupe_path_exists(paths[i]))
            continue;
        tupe_in *in;
        if ((rc = tupe_in_open(&in, paths[i], e)))
            break;
        size_t got;
        do {
            if (!(rc = tupe_in_read(in, buf, 1 << 20, &got, e)))
                tupe_hasher_update(h, buf, got);
        } while (!rc && got);
        tupe_in_close(in);
    }
    if (!rc)
        tupe_hash_hex(tupe_hasher_digest(h), hex);
    tupe_hasher_free(h);
    free(buf);
    return rc;
}

json_t *tupe_ft_settings(const tupe_ft_opts *o, const tupe_glue_task *t, const char *precision,
                         tupe_err *e)
{
    char ck[4200], hex[22];
    struct stat sb;
    if (stat(o->checkpoint, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(ck, sizeof ck, "%s/%s", o->checkpoint, TUPE_CKPT_MODEL_FILE);
    else
        snprintf(ck, sizeof ck, "%s", o->checkpoint);
    json_t *s = json_object();
    const char *one[1] = {ck};
    if (!s || hash_files(one, 1, hex, e)) {
        json_decref(s);
        return NULL;
    }
    json_object_set_new(s, "checkpoint", json_string(o->checkpoint));
    json_object_set_new(s, "checkpoint_hash", json_string(hex));
    tupe_vocab *v;
    if (tupe_vocab_load(&v, o->vocab, e)) {
        json_decref(s);
        return NULL;
    }
    tupe_hash_hex(v->hash, hex);
    tupe_vocab_free(v);
    json_object_set_new(s, "vocab", json_string(o->vocab));
    json_object_set_new(s, "vocab_hash", json_string(hex));
    /* the labelled files: what is trained on and what selects the best checkpoint */
    char files[4][4200];
    const char *fp[4];
    int nf = 0;
    for (int i = 0; i < t->nsplits && nf < 4; i++)
        if (t->splits[i].kind != TUPE_GLUE_TEST) {
            snprintf(files[nf], sizeof files[nf], "%s/%s", o->data, t->splits[i].file);
            fp[nf] = files[nf];
            nf++;
        }
    if (hash_files(fp, nf, hex, e)) {
        json_decref(s);
        return NULL;
    }
    json_object_set_new(s, "data", json_string(o->data));
    json_object_set_new(s, "data_hash", json_string(hex));
    json_object_set_new(s, "recipe", json_string(o->recipe == TUPE_RECIPE_BERT      ? "bert"
                                                 : o->recipe == TUPE_RECIPE_ROBERTA ? "roberta"
                                                 : o->recipe == TUPE_RECIPE_ELECTRA ? "electra"
                                                                                    : "tupe"));
    if (o->layer_decay > 0 && o->layer_decay != 1) /* absent otherwise: as earlier records */
        json_object_set_new(s, "layer_decay", json_real(o->layer_decay));
    json_object_set_new(s, "epochs", json_integer(o->epochs));
    json_object_set_new(s, "batch", json_integer(o->batch));
    json_object_set_new(s, "max_len", json_integer(o->max_len));
    json_object_set_new(s, "warmup_ratio", json_real(o->warmup_ratio));
    json_object_set_new(s, "dropout", json_real(o->dropout));
    json_object_set_new(s, "weight_decay", json_real(o->adam.weight_decay));
    json_object_set_new(s, "clip", json_real(o->adam.clip));
    json_object_set_new(s, "adam_eps", json_real(o->adam.eps));
    json_object_set_new(s, "beta2", json_real(o->adam.beta2));
    json_object_set_new(s, "cased", json_boolean(!o->lowercase));
    json_object_set_new(s, "max_train", json_integer((json_int_t)o->max_train));
    json_object_set_new(s, "max_dev", json_integer((json_int_t)o->max_dev));
    json_object_set_new(s, "evals_per_epoch", json_integer(o->evals_per_epoch));
    json_object_set_new(s, "precision", json_string(precision));
    return s;
}

static void show(const json_t *v, char *dst, size_t cap)
{
    if (json_is_string(v))
        snprintf(dst, cap, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(dst, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(dst, cap, "%g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(dst, cap, "%s", json_is_true(v) ? "on" : "off");
    else
        snprintf(dst, cap, "(none)");
}

int tupe_ft_settings_compare(const json_t *rec, const json_t *now, const char *where, tupe_err *e)
{
    /* the setting, its option, and the key to show instead (a path rather than a hash) */
    static const struct { const char *key, *opt, *shown; } f[] = {
        {"checkpoint_hash", "--checkpoint", "checkpoint"}, {"vocab_hash", "--vocab", "vocab"},
        {"data_hash", "--data", "data"}, {"recipe", "--recipe", NULL}, {"epochs", "--epochs", NULL},
        {"batch", "--batch", NULL}, {"max_len", "--max-len", NULL},
        {"warmup_ratio", "--warmup-ratio", NULL}, {"dropout", "--dropout", NULL},
        {"weight_decay", "--weight-decay", NULL}, {"clip", "--clip", NULL},
        {"adam_eps", "--adam-eps", NULL}, {"beta2", "--beta2", NULL}, {"cased", "--cased", NULL},
        {"max_train", "--max-train", NULL}, {"max_dev", "--max-dev", NULL},
        {"evals_per_epoch", "--evals-per-epoch", NULL}, {"precision", "--precision", NULL},
        {"layer_decay", "--layer-decay", NULL}};
    if (!json_is_object(rec))
        return tupe_fail(e, TUPE_EUSAGE, "%s: made without a record of its settings (an older "
                         "tupe-glue): its results cannot be taken as this run's; choose another "
                         "-o, or remove it", where);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const json_t *a = json_object_get(rec, f[i].key), *b = json_object_get(now, f[i].key);
        if ((!a && !b) || json_equal((json_t *)a, (json_t *)b)) /* absent from both: as set */
            continue;
        char old[512], cur[512];
        show(json_object_get(rec, f[i].shown ? f[i].shown : f[i].key), old, sizeof old);
        show(json_object_get(now, f[i].shown ? f[i].shown : f[i].key), cur, sizeof cur);
        return tupe_fail(e, TUPE_EUSAGE, "%s: made with %s %s, not %s%s: its results are not "
                         "this run's; choose another -o, or remove it", where, f[i].opt, old, cur,
                         f[i].shown && strcmp(old, cur) == 0 ? " (its contents have changed)" : "");
    }
    return 0;
}
