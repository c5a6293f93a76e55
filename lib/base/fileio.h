/* Checked I/O: buffered readers that know their byte offset and line number, and writers that
 * never leave a half-written file where a good one was (temporary name, fsync, rename).
 *
 * "-" means stdin for readers and stdout for writers. Every failure becomes a tupe_err that
 * names the file (and the offset or line where one applies). */
#ifndef TUPE_FILEIO_H
#define TUPE_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct tupe_in tupe_in;

/* Open a file (or "-" for stdin) for buffered reading. Missing or unreadable: TUPE_ENOINPUT. */
int tupe_in_open(tupe_in **in, const char *path, tupe_err *e);
/* tupe_in_open for a file read whole (a FIFO without a writer waited for 2 s, not 30). */
int tupe_in_open_whole(tupe_in **in, const char *path, tupe_err *e);
/* Open a file by name to read it (not "-"), never blocking in open(): a FIFO gets at most
 * fifo_wait_ms for a process to open it for writing (TUPE_ENOINPUT "a FIFO that no process
 * writes" then), and the bytes read while waiting (up to cap) go to first (*got, *eof at its
 * end). A directory is TUPE_ENOINPUT. The descriptor blocks, as usual, or -1 (e says why).
 * tupe_in_open gives a FIFO 30 s (a corpus may be started just before its producer),
 * tupe_read_file and tupe_read_text 2 s (a configuration is expected to be there). */
int tupe_open_input(const char *path, int fifo_wait_ms, void *first, size_t cap, size_t *got,
                    int *eof, tupe_err *e);
/* Wrap an open descriptor; `name` is used in messages; `own` closes fd on tupe_in_close. */
int tupe_in_fdopen(tupe_in **in, int fd, const char *name, int own, tupe_err *e);
/* Read up to n bytes; fewer only at end of input. *got receives the count. */
int tupe_in_read(tupe_in *in, void *dst, size_t n, size_t *got, tupe_err *e);
/* Read exactly n bytes or fail with TUPE_EDATA "truncated: expected N bytes of <what>". */
int tupe_in_read_exact(tupe_in *in, void *dst, size_t n, const char *what, tupe_err *e);
/* Append up to n bytes to a growing buffer (*len used of *cap allocated; *buf may be NULL),
 * allocating as the bytes arrive, so that an input that declares more than it holds never
 * costs what it declares. *got receives the count: fewer than n only at end of input. */
int tupe_in_append(tupe_in *in, unsigned char **buf, size_t *len, size_t *cap, size_t n,
                   size_t *got, tupe_err *e);
/* Next line without its '\n' (a trailing '\r' is kept; callers decide). Returns 1 with a line,
 * 0 at end of input, or -1 on error (e says why). The buffer belongs to `in` and is
 * valid until the next call. A last line without '\n' is returned as a line. */
int tupe_in_getline(tupe_in *in, char **line, size_t *len, tupe_err *e);
/* The longest line tupe_in_getline accepts before failing with TUPE_EDATA (default 2 GiB; at
 * least the 1 MiB buffer): a reader of short lines bounds what a device or a binary file
 * given by mistake can cost. */
void tupe_in_max_line(tupe_in *in, size_t bytes);
/* 1-based number of the line last returned by tupe_in_getline. */
uint64_t tupe_in_lineno(const tupe_in *in);
/* Bytes consumed so far (offset of the next byte to be read). */
uint64_t tupe_in_offset(const tupe_in *in);
const char *tupe_in_path(const tupe_in *in);
/* The descriptor (to fstat or map a regular file; nothing read through the buffer yet). */
int tupe_in_fileno(const tupe_in *in);
void tupe_in_close(tupe_in *in);

/* Whole file into memory (NUL-terminated for convenience; *len excludes the NUL). Files larger
 * than max_bytes are refused with TUPE_EDATA: a regular file by its size, before anything is
 * read; a pipe or device once it has given that many bytes. */
int tupe_read_file(const char *path, char **buf, size_t *len, size_t max_bytes, tupe_err *e);
/* The same for a text file: a NUL byte is refused (TUPE_EDATA "path: byte N: a NUL byte: not
 * text") as soon as it is read, so that a binary file or a device such as /dev/zero given
 * where text belongs fails at once rather than after max_bytes. */
int tupe_read_text(const char *path, char **buf, size_t *len, size_t max_bytes, tupe_err *e);

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct tupe_out tupe_out;

/* Open `path` for writing through a temporary file in the same directory
 * (".NAME.tmp.PID.RANDOM"); nothing appears at `path` until tupe_out_commit.
 * "-" writes to stdout directly (commit flushes), and so is an existing path that is not a
 * regular file (/dev/null, a FIFO), which a rename would replace. */
int tupe_out_open(tupe_out **out, const char *path, tupe_err *e);
int tupe_out_write(tupe_out *out, const void *buf, size_t n, tupe_err *e);
int tupe_out_printf(tupe_out *out, tupe_err *e, const char *fmt, ...) TUPE_PRINTF(3, 4);
/* Bytes written so far. */
uint64_t tupe_out_offset(const tupe_out *out);
/* Flush, fsync, rename over `path`, fsync the directory. Frees `out` whatever the result;
 * on failure the temporary file is removed and the old `path` (if any) is untouched. */
int tupe_out_commit(tupe_out *out, tupe_err *e);
/* Discard: remove the temporary file, leave `path` as it was. Frees `out`. NULL is a no-op. */
void tupe_out_abort(tupe_out *out);

/* One call: write buf to path atomically. */
int tupe_write_file(const char *path, const void *buf, size_t n, tupe_err *e);

/* ---- directories -------------------------------------------------------------------------- */

/* A directory built under a temporary name and swapped into place in one step, so that a
 * reader sees either the old complete directory or the new complete one. */
typedef struct tupe_dirtx tupe_dirtx;

/* Begin a directory of `kind` (outdir.h: "shard directory", "checkpoint"...) at path: an
 * existing directory there must be empty or of the same kind (else TUPE_ECANTCREAT, nothing
 * touched), and the new one records its kind. */
int tupe_dirtx_begin(tupe_dirtx **tx, const char *path, const char *kind, tupe_err *e);
/* The temporary directory to write into. */
const char *tupe_dirtx_tmp(const tupe_dirtx *tx);
/* Path of `name` inside the temporary directory (static buffer inside tx; copy it). */
const char *tupe_dirtx_file(tupe_dirtx *tx, const char *name);
/* fsync the temporary directory and its files, then put it at `path`: an existing directory
 * there is exchanged atomically (renameat2 RENAME_EXCHANGE where the file system has it) and
 * then removed. Frees tx. */
int tupe_dirtx_commit(tupe_dirtx *tx, tupe_err *e);
/* Remove the temporary directory and everything in it. Frees tx. NULL is a no-op. */
void tupe_dirtx_abort(tupe_dirtx *tx);

/* mkdir -p. */
int tupe_mkdir_p(const char *path, tupe_err *e);
/* rm -rf (best effort; returns 0 when nothing is left). */
int tupe_remove_tree(const char *path);
/* fsync a directory by path. */
int tupe_fsync_dir(const char *path, tupe_err *e);
/* 1 if path exists (any type). */
int tupe_path_exists(const char *path);
/* The temporary name tupe_out_open would use next to `path` (for tests and cleanup tools). */
int tupe_tmp_sibling(char *dst, size_t cap, const char *path, const char *tag);

#endif
