/* Model configurations (config.h, JSON). What is accepted passes tupe_config_check, its JSON
 * reads back as the same configuration, and the model it describes stays inside what the
 * backend handles: every tensor's element count within 32-bit BLAS dimensions. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "fuzz.h"
#include "model/params.h"

static void same(const tupe_config *a, const tupe_config *b)
{
    FUZZ_CHECK(a->position == b->position && a->untie_cls == b->untie_cls &&
               a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
               a->num_layers == b->num_layers && a->num_heads == b->num_heads &&
               a->intermediate_size == b->intermediate_size && a->max_position == b->max_position &&
               a->type_vocab_size == b->type_vocab_size && a->rel_pos_buckets == b->rel_pos_buckets &&
               a->max_rel_pos == b->max_rel_pos && a->num_labels == b->num_labels);
    FUZZ_CHECK(a->hidden_dropout == b->hidden_dropout && a->attention_dropout == b->attention_dropout &&
               a->activation_dropout == b->activation_dropout &&
               a->classifier_dropout == b->classifier_dropout && a->layer_norm_eps == b->layer_norm_eps &&
               a->initializer_range == b->initializer_range);
    char what[64];
    FUZZ_CHECK(tupe_config_same_encoder(a, b, what, sizeof what));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tupe_config c, c2;
    tupe_err e;
    if (tupe_config_parse(&c, (const char *)data, size, "model.json", &e) != 0) {
        FUZZ_ERR(&e);
        return 0;
    }
    FUZZ_CHECK(tupe_config_check(&c, 0, &e) == 0);
    for (int indent = 0; indent <= 2; indent += 2) {
        char *js = tupe_config_json(&c, indent);
        FUZZ_CHECK(js != NULL);
        FUZZ_CHECK(tupe_config_parse(&c2, js, strlen(js), "round trip", &e) == 0);
        same(&c, &c2);
        free(js);
    }
    if (c.vocab_size > 0) {
        tupe_layout lay;
        FUZZ_CHECK(tupe_layout_build(&lay, &c, &e) == 0);
        for (size_t i = 0; i < lay.count; i++)
            FUZZ_CHECK(lay.t[i].numel <= INT_MAX);
        tupe_layout_free(&lay);
    }
    return 0;
}
