#include "train/jobauth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

int tupe_jobkey_from_text(tupe_jobkey *key, const char *text, size_t n, tupe_err *e)
{
    unsigned int len = 0;
    if (!EVP_Digest(text, n, key->k, &len, EVP_sha256(), NULL) || len != TUPE_JOBKEY_BYTES)
        return tupe_fail(e, TUPE_EFAIL, "the job's secret: SHA-256 failed (libcrypto)");
    return 0;
}

int tupe_jobauth_random(void *buf, size_t n, tupe_err *e)
{
    if (RAND_bytes(buf, (int)n) != 1)
        return tupe_fail(e, TUPE_EFAIL, "no random numbers from libcrypto's generator");
    return 0;
}

int tupe_jobsecret_new(char hex[TUPE_JOBSECRET_HEX + 1], tupe_err *e)
{
    unsigned char raw[TUPE_JOBSECRET_HEX / 2];
    int rc = tupe_jobauth_random(raw, sizeof raw, e);
    if (rc)
        return rc;
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 15];
    }
    hex[TUPE_JOBSECRET_HEX] = 0;
    OPENSSL_cleanse(raw, sizeof raw);
    return 0;
}

int tupe_jobauth_mac(const tupe_jobkey *key, const char *label, const void *a, size_t na,
                     const void *b, size_t nb, unsigned char mac[TUPE_JOBMAC_BYTES], tupe_err *e)
{
    size_t nl = strlen(label) + 1; /* the NUL too: no label is a prefix of another's message */
    unsigned char msg[512];
    if (nl + na + nb > sizeof msg)
        return tupe_fail(e, TUPE_EFAIL, "the job's proof: %zu bytes to sign", nl + na + nb);
    memcpy(msg, label, nl);
    memcpy(msg + nl, a, na);
    memcpy(msg + nl + na, b, nb);
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), key->k, TUPE_JOBKEY_BYTES, msg, nl + na + nb, mac, &len) ||
        len != TUPE_JOBMAC_BYTES)
        return tupe_fail(e, TUPE_EFAIL, "the job's proof: HMAC-SHA256 failed (libcrypto)");
    return 0;
}

int tupe_jobauth_check(const tupe_jobkey *key, const char *label, const void *a, size_t na,
                       const void *b, size_t nb, const unsigned char got[TUPE_JOBMAC_BYTES])
{
    unsigned char want[TUPE_JOBMAC_BYTES];
    tupe_err e;
    if (tupe_jobauth_mac(key, label, a, na, b, nb, want, &e))
        return 0;
    return CRYPTO_memcmp(want, got, TUPE_JOBMAC_BYTES) == 0;
}

void tupe_jobauth_wipe(void *p, size_t n) { OPENSSL_cleanse(p, n); }
