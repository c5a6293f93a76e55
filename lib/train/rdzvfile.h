/* The job's file: where rank 0 writes its address and the job's secret for the other ranks
 * (TUPE_RENDEZVOUS_FILE, or a file in this user's private directory for ranks that meet on the
 * loopback; train/rendezvous uses it).
 *
 * It is an output like any other: rank 0 creates it (mode 0600, exclusively: never over
 * another file, a FIFO or a device), and removes it only while it is still the file it
 * created. An existing file is replaced only when it is a rendezvous file left by a rank 0 of
 * this machine that is gone; anything else there is refused (TUPE_ECANTCREAT), naming it. The
 * others read it only when it is a regular file of this user that no one else may read, and
 * never wait on a FIFO. Its text is lines "key value" between "tupe-rendezvous 2" and "end". */
#ifndef TUPE_RDZVFILE_H
#define TUPE_RDZVFILE_H

#include <stddef.h>
#include <sys/types.h>

#include "base/error.h"

#define TUPE_RDZVFILE_MAX 4096

typedef struct tupe_rdzvfile {
    char path[4096];
    dev_t dev;
    ino_t ino;
    int made;
} tupe_rdzvfile;

/* Rank 0: create path (named `what` in messages, e.g. "TUPE_RENDEZVOUS_FILE") holding the
 * lines of `body` (each "key value\n") between the header and "end". */
int tupe_rdzvfile_make(tupe_rdzvfile *f, const char *path, const char *what, const char *body,
                       tupe_err *e);
/* Remove it if it is still the file made (nothing if none was). */
void tupe_rdzvfile_remove(tupe_rdzvfile *f);
/* The others: the whole text into buf (cap bytes, NUL-terminated). TUPE_ENOINPUT while it does
 * not exist, TUPE_EDATA while it is incomplete (rank 0 is writing it), another code when it is
 * no file to trust; each with a message. */
int tupe_rdzvfile_read(const char *path, const char *what, char *buf, size_t cap, tupe_err *e);
/* The value of `key` in a file's text into val (cap bytes): 0, or -1 if absent. */
int tupe_rdzvfile_get(const char *text, const char *key, char *val, size_t cap);
/* This user's private directory for the files of ranks on one machine: $XDG_RUNTIME_DIR, or
 * /tmp/tupe-UID (made with mode 0700); refused unless it is a directory of this user that no
 * one else may enter. */
int tupe_rdzvfile_private_dir(char *dir, size_t cap, tupe_err *e);

#endif
