/* The shard directory written by tupe-shard (man tupe-formats(5), section SHARD DIRECTORY).
 *
 *   DIR/manifest.json          what the directory holds (written last; JSON, via jansson)
 *   DIR/train-00000.shard ...  the training sequences, N files of (almost) equal counts
 *   DIR/valid-00000.shard ...  the validation sequences (whole documents held out)
 *
 * A shard file, little-endian:
 *   0      4096  header (fields below; bytes 256..4095 are zero)
 *   4096   ...   frames: each holds up to frame_records consecutive records (pack.h), either
 *                one zstd frame or the records as they are (--no-compress: then record r of a
 *                file sits at byte 4096 + r * record_bytes and the file can be mmapped)
 *   I      24*F  frame index: per frame u64 offset, u32 stored bytes, u32 records, u64 check
 *                (XXH3-64 of the stored bytes)
 *
 * Header fields:
 *     0  8  magic "TUPESHRD"          64  4  split (0 train, 1 valid)
 *     8  4  version (1)                68  4  shard number within the split
 *    12  4  flags: 1 zstd, 2 shuffled  72  4  shards in the split
 *    16  4  bytes per id (2 or 4)      76  4  records per frame (all but the last)
 *    20  4  seq_len                    80  8  seed
 *    24  4  record bytes               88  8  set id (the same in every file of a directory)
 *    28  4  vocabulary size            96  8  records in this file
 *    32  8  vocabulary hash           104  8  index of its first record within the split
 *    40 20  special ids (int32, -1    112  8  tokens (non-pad ids) in this file
 *           none): pad unk cls sep    120  8  frame count F
 *           mask                      128  8  index offset I
 *    60  4  break (0 full, 1 doc)     136  8  file size (I + 24 F)
 *                                     144  8  check of the index
 *   248  8  check of bytes 0..247 */
#ifndef TUPE_SHARD_H
#define TUPE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "text/tokstream.h"

#define TUPE_SHARD_MAGIC "TUPESHRD"
#define TUPE_SHARD_VERSION 1
#define TUPE_SHARD_HEADER 4096
#define TUPE_SHARD_FRAME_ENTRY 24
#define TUPE_SHARD_ZSTD 1u
#define TUPE_SHARD_SHUFFLED 2u
#define TUPE_MANIFEST "manifest.json"
/* What a shard directory's .tupe-kind says (base/outdir.h). */
#define TUPE_SHARD_KIND "shard directory"
#define TUPE_MANIFEST_FORMAT "tupe-shards"

enum tupe_split { TUPE_SPLIT_TRAIN = 0, TUPE_SPLIT_VALID = 1, TUPE_SPLITS = 2 };
enum tupe_shard_layout { TUPE_LAYOUT_ZSTD = 0, TUPE_LAYOUT_RAW = 1, TUPE_LAYOUT_MEGATRON = 2 };

const char *tupe_split_name(int split);     /* "train", "valid" */
const char *tupe_layout_name(int layout);   /* "zstd", "raw", "megatron" */
const char *tupe_break_name(int brk);       /* "full", "doc" */
/* "train-00003.shard" (native) or "train-00003" (Megatron prefix: add .bin/.idx). */
void tupe_shard_file_name(char *dst, size_t cap, int split, uint32_t shard, int layout);

typedef struct tupe_shard_header {
    uint32_t version, flags, id_bytes, seq_len, rec_bytes, vocab_size;
    uint64_t vocab_hash;
    int32_t special[TUPE_SP_COUNT];
    uint32_t brk, split, shard, shards, frame_records;
    uint64_t seed, set_id, records, first, tokens, frames, index_offset, file_bytes, index_check;
} tupe_shard_header;

void tupe_shard_header_encode(const tupe_shard_header *h, unsigned char out[TUPE_SHARD_HEADER]);
/* Checks magic, version, check and internal consistency; path for messages. */
int tupe_shard_header_decode(tupe_shard_header *h, const unsigned char in[TUPE_SHARD_HEADER],
                             const char *path, tupe_err *e);

typedef struct tupe_frame_entry {
    uint64_t offset;
    uint32_t stored, records;
    uint64_t check;
} tupe_frame_entry;

/* ---- writing one shard file ----------------------------------------------------------------- */

typedef struct tupe_shardw tupe_shardw;

/* h: everything but the counts, offsets and checks, which the writer fills in. */
int tupe_shardw_open(tupe_shardw **w, const char *path, const tupe_shard_header *h, tupe_err *e);
int tupe_shardw_frame(tupe_shardw *w, const void *stored, size_t n, uint64_t check,
                      uint32_t records, uint64_t tokens, tupe_err *e);
/* Index, header; *bytes receives the file size. Frees w. */
int tupe_shardw_close(tupe_shardw *w, uint64_t *bytes, tupe_err *e);
void tupe_shardw_abort(tupe_shardw *w);

/* ---- reading one shard file ----------------------------------------------------------------- */

typedef struct tupe_shardf {
    char *path;
    int fd;
    tupe_shard_header h;
    tupe_frame_entry *frames;
    const unsigned char *map;   /* whole file, for the uncompressed layout */
    uint64_t size;
} tupe_shardf;

/* Header, size (a truncated file is refused here), index and its check. */
int tupe_shardf_open(tupe_shardf *f, const char *path, tupe_err *e);
void tupe_shardf_close(tupe_shardf *f);

/* Decoding frames: one per thread. */
typedef struct tupe_fdec {
    void *dctx;
    unsigned char *zbuf, *out;
    size_t zcap, ocap;
} tupe_fdec;

void tupe_fdec_init(tupe_fdec *d);
void tupe_fdec_free(tupe_fdec *d);
/* Frame i of f, checked and decompressed: *recs points at records * rec_bytes bytes (into d
 * or into the file's mapping), valid until the next call with d. A bad check, a frame that
 * does not decompress to its records, or a record whose length is out of range is corruption
 * and named by file, frame and byte offset. */
int tupe_shardf_frame(tupe_shardf *f, uint64_t i, tupe_fdec *d, const unsigned char **recs,
                      tupe_err *e);

/* ---- the manifest ------------------------------------------------------------------------- */

typedef struct tupe_shard_file {
    char name[32];
    uint64_t sequences, first, tokens, bytes;
    uint64_t check;             /* Megatron layout: XXH3-64 of .bin then .idx; else 0 */
} tupe_shard_file;

typedef struct tupe_split_meta {
    uint64_t sequences, documents, tokens, padding;   /* tokens: non-pad ids incl. specials */
    uint64_t raw_bytes, stored_bytes;
    uint32_t nfiles;
    tupe_shard_file *files;
} tupe_split_meta;

typedef struct tupe_shard_meta {
    int layout;
    uint32_t seq_len, id_bytes, rec_bytes, vocab_size;
    uint64_t vocab_hash;
    int32_t special[TUPE_SP_COUNT];
    int brk, shuffled;
    uint64_t seed, set_id;
    int level;                        /* zstd level (zstd layout) */
    uint64_t frame_bytes;
    uint32_t frame_records;
    int megatron_dtype;               /* Megatron layout: the .idx dtype code (8 or 4) */
    uint64_t in_documents, in_empty, in_tokens, in_hash;
    tupe_split_meta split[TUPE_SPLITS];
} tupe_shard_meta;

int tupe_manifest_write(const char *path, const tupe_shard_meta *m, tupe_err *e);
/* DIR/manifest.json; a directory without one is not a (complete) shard directory. */
int tupe_manifest_read(const char *dir, tupe_shard_meta *m, tupe_err *e);
/* The same from the text of a manifest in memory; `name` stands for the file in messages. */
int tupe_manifest_parse(const char *text, size_t len, const char *name, tupe_shard_meta *m,
                        tupe_err *e);
void tupe_shard_meta_free(tupe_shard_meta *m);
/* Check a shard file's header against the manifest it is listed in. */
int tupe_shard_header_matches(const tupe_shard_header *h, const tupe_shard_meta *m, int split,
                              uint32_t shard, const char *path, tupe_err *e);

#endif
