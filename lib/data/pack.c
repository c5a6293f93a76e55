#include "data/pack.h"

#include <string.h>

#include "base/byteorder.h"

/* ids[0..n) into the id area at position `at`. */
static void put_ids(unsigned char *area, uint32_t id_bytes, uint32_t at, const uint32_t *ids,
                    size_t n)
{
    if (id_bytes == 2) {
        unsigned char *q = area + 2 * (size_t)at;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* The host order is the file order: a plain narrowing copy, which compilers vectorize. */
        for (size_t i = 0; i < n; i++) {
            uint16_t v = (uint16_t)ids[i];
            memcpy(q + 2 * i, &v, 2);
        }
#else
        for (size_t i = 0; i < n; i++)
            q[2 * i] = (unsigned char)ids[i], q[2 * i + 1] = (unsigned char)(ids[i] >> 8);
#endif
    } else {
        unsigned char *q = area + 4 * (size_t)at;
        for (size_t i = 0; i < n; i++)
            tupe_put32le(q + 4 * i, ids[i]);
    }
}

void tupe_rec_decode(const void *recv, uint32_t seq_len, uint32_t id_bytes, uint32_t *ids,
                     uint32_t *length)
{
    const unsigned char *rec = recv, *q = rec + 4;
    if (length)
        *length = tupe_get32le(rec);
    if (id_bytes == 2) {
        for (uint32_t i = 0; i < seq_len; i++)
            ids[i] = (uint32_t)q[2 * i] | (uint32_t)q[2 * i + 1] << 8;
    } else {
        for (uint32_t i = 0; i < seq_len; i++)
            ids[i] = tupe_get32le(q + 4 * (size_t)i);
    }
}

uint32_t tupe_rec_length(const void *rec) { return tupe_get32le(rec); }

int tupe_packer_init(tupe_packer *p, uint32_t seq_len, uint32_t id_bytes, int brk, uint32_t cls,
                     uint32_t sep, uint32_t pad, tupe_pack_slot slot, void *ctx, tupe_err *e)
{
    memset(p, 0, sizeof *p);
    if (seq_len < 2)
        return tupe_fail(e, TUPE_EUSAGE, "sequence length %u is too short (at least 2)", seq_len);
    if (id_bytes != 2 && id_bytes != 4)
        return tupe_fail(e, TUPE_EFAIL, "id width %u is not 2 or 4", id_bytes);
    p->seq_len = seq_len;
    p->id_bytes = id_bytes;
    p->brk = brk;
    p->cls = cls;
    p->sep = sep;
    p->pad = pad;
    p->slot = slot;
    p->ctx = ctx;
    p->rec_bytes = tupe_rec_bytes(seq_len, id_bytes);
    return 0;
}

/* Pad, record the length and the zero tail: the record is complete. */
static void flush(tupe_packer *p)
{
    uint32_t len = p->fill, room = p->seq_len - len;
    if (room) {
        uint32_t padv[64];
        for (int i = 0; i < 64; i++)
            padv[i] = p->pad;
        for (uint32_t at = len; at < p->seq_len; at += 64) {
            uint32_t k = p->seq_len - at < 64 ? p->seq_len - at : 64;
            put_ids(p->rec + 4, p->id_bytes, at, padv, k);
        }
    }
    size_t used = 4 + (size_t)p->seq_len * p->id_bytes;
    memset(p->rec + used, 0, p->rec_bytes - used);
    tupe_put32le(p->rec, len);
    p->sequences++;
    p->tokens += len;
    p->padding += room;
    p->fill = 0;
    p->rec = NULL;
}

/* Append items, opening a sequence with [CLS] when none is open. */
static int append(tupe_packer *p, const uint32_t *ids, size_t n, tupe_err *e)
{
    while (n > 0) {
        if (!p->rec) {
            void *r;
            int rc = p->slot(p->ctx, &r, e);
            if (rc)
                return rc;
            p->rec = r;
            put_ids(p->rec + 4, p->id_bytes, 0, &p->cls, 1);
            p->fill = 1;
        }
        size_t k = p->seq_len - p->fill;
        if (k > n)
            k = n;
        put_ids(p->rec + 4, p->id_bytes, p->fill, ids, k);
        p->fill += (uint32_t)k;
        ids += k;
        n -= k;
        if (p->fill == p->seq_len)
            flush(p);
    }
    return 0;
}

int tupe_packer_doc(tupe_packer *p, const uint32_t *ids, size_t n, tupe_err *e)
{
    if (n == 0)
        return 0;
    p->documents++;
    int rc = append(p, ids, n, e);
    if (!rc)
        rc = append(p, &p->sep, 1, e);
    if (!rc && p->brk == TUPE_BREAK_DOC && p->rec)
        flush(p);
    return rc;
}

int tupe_packer_finish(tupe_packer *p, tupe_err *e)
{
    (void)e;
    if (p->rec)
        flush(p);
    return 0;
}
