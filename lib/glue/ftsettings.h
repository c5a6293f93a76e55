/* What determines a fine-tuning run's results besides its learning rate and seed: the
 * checkpoint, vocabulary and task files it reads (by the hash of their contents, with their
 * paths for messages), the recipe and every setting of the schedule, optimizer, dropout and
 * input, and the precision. Recorded as "settings" in each run's results.json, so that a
 * sweep rerun into the same directory with other settings is refused instead of reporting
 * the earlier runs' scores as its own. */
#ifndef TUPE_FTSETTINGS_H
#define TUPE_FTSETTINGS_H

#include <jansson.h>

#include "base/error.h"
#include "glue/finetune.h"
#include "glue/glue.h"

/* The settings of runs made with o on task t at `precision` ("fp32", "bf16"); NULL with e
 * set when a file cannot be read. */
json_t *tupe_ft_settings(const tupe_ft_opts *o, const tupe_glue_task *t, const char *precision,
                         tupe_err *e);
/* 0 when `recorded` (a results.json's "settings") equals `now`; otherwise TUPE_EUSAGE: "where:
 * made with --OPTION OLD, not NEW ...", for the first option that differs. A record without
 * settings (NULL) differs from any. */
int tupe_ft_settings_compare(const json_t *recorded, const json_t *now, const char *where,
                             tupe_err *e);

#endif
