/* Temporaries: the files and directories an output is built in before it is renamed into place
 * (fileio.h), named ".NAME.tmp.PID.RANDOM" next to the final NAME (".NAME.old.PID.RANDOM" for a
 * replaced directory on its way out, on file systems without RENAME_EXCHANGE).
 *
 * While one exists its owner holds an exclusive flock on it and lists it in a table of this
 * process, so that none outlives the work it was for:
 *   - a caught signal removes them: tupe_tmp_remove_all() uses only system calls (it is
 *     async-signal-safe) and is what the programs' SIGINT/SIGTERM/SIGHUP handler calls;
 *   - a process killed outright (SIGKILL, power cut) leaves them behind, and the next program
 *     that writes into the same directory removes them: tupe_tmp_sweep() takes a temporary
 *     whose PID is no process on this machine and whose lock is free (both, so that a writer on
 *     another machine sharing the directory over NFS keeps its own).
 * A ".old." directory is removed only when NAME exists: without NAME it is the only copy. */
#ifndef TUPE_TMPFILES_H
#define TUPE_TMPFILES_H

#include <stddef.h>

/* List a temporary (a path as the process will still find it: the working directory does not
 * change). Returns a slot for tupe_tmp_untrack, or -1 when the table is full: the temporary
 * is then left to the next sweep if the process dies. */
int tupe_tmp_track(const char *path);
/* Drop it from the table (it was renamed into place or removed). -1 is a no-op. */
void tupe_tmp_untrack(int slot);
/* Remove every listed temporary, directories with their contents. Async-signal-safe. */
void tupe_tmp_remove_all(void);

/* Remove the stale temporaries directly in `dir` (see above). Each directory is swept once per
 * process (its device and inode remembered). Returns how many were removed. */
int tupe_tmp_sweep(const char *dir);

/* Whether a file name (no directory) has the form of a temporary: ".NAME.tmp.PID.HHHHHHHH" or
 * ".NAME.old.PID.HHHHHHHH" (8 hex digits). Then *pid receives PID, *old whether it is ".old.",
 * and *base_len the length of NAME (starting at name + 1). */
int tupe_tmp_parse(const char *name, long *pid, int *old, size_t *base_len);

#endif
