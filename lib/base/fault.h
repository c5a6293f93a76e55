/* Fault injection for the "nothing is lost" tests: named points in the write paths where a
 * test can have the process killed with SIGKILL, as a power cut or `kill -9` would.
 *
 * TUPE_FAULT=point       kill at the first time `point` is reached
 * TUPE_FAULT=point:N     kill at the N-th time (1-based)
 *
 * Unset (the normal case) costs one getenv per call. */
#ifndef TUPE_FAULT_H
#define TUPE_FAULT_H

void tupe_fault_point(const char *point);
/* The same selection, for faults that are not a kill (e.g. a non-finite loss): returns 1 when
 * this hit is the selected one, 0 otherwise. */
int tupe_fault_hit(const char *point);

#endif
