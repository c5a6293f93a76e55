/* Proof that a connection comes from a rank of this job (train/rendezvous uses it).
 *
 * The ranks share a secret that a stranger cannot guess: TUPE_JOB_SECRET, given by the
 * launcher, or 32 random bytes made by rank 0 and written into a file only this user can read
 * (the rendezvous file, or a private one for ranks on one machine), or sent through MPI. Each
 * side of a connection proves it holds the secret without sending it: an HMAC-SHA256 (OpenSSL's
 * libcrypto) of the other side's fresh random number and the hello, keyed by the secret, with
 * a label per direction so that no proof can be reflected or replayed. */
#ifndef TUPE_JOBAUTH_H
#define TUPE_JOBAUTH_H

#include <stddef.h>

#include "base/error.h"

#define TUPE_JOBKEY_BYTES 32
#define TUPE_JOBNONCE_BYTES 16
#define TUPE_JOBMAC_BYTES 32
/* TUPE_JOB_SECRET's shortest length: 16 characters. */
#define TUPE_JOBSECRET_MIN 16
/* A generated secret's text: 64 hexadecimal digits. */
#define TUPE_JOBSECRET_HEX 64

typedef struct tupe_jobkey {
    unsigned char k[TUPE_JOBKEY_BYTES];
} tupe_jobkey;

/* The key of a secret's text (SHA-256 of it). 0, or TUPE_EFAIL. */
int tupe_jobkey_from_text(tupe_jobkey *key, const char *text, size_t n, tupe_err *e);
/* A fresh secret: TUPE_JOBSECRET_HEX hexadecimal digits and a NUL into hex. */
int tupe_jobsecret_new(char hex[TUPE_JOBSECRET_HEX + 1], tupe_err *e);
/* n fresh random bytes. */
int tupe_jobauth_random(void *buf, size_t n, tupe_err *e);
/* HMAC-SHA256(key, label || a || b) into mac. */
int tupe_jobauth_mac(const tupe_jobkey *key, const char *label, const void *a, size_t na,
                     const void *b, size_t nb, unsigned char mac[TUPE_JOBMAC_BYTES], tupe_err *e);
/* Whether `got` is the mac of label || a || b (compared in constant time): 1 yes, 0 no. */
int tupe_jobauth_check(const tupe_jobkey *key, const char *label, const void *a, size_t na,
                       const void *b, size_t nb, const unsigned char got[TUPE_JOBMAC_BYTES]);
/* Overwrite a secret (or key) before its memory goes. */
void tupe_jobauth_wipe(void *p, size_t n);

#endif
