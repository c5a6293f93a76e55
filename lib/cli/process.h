/* What every tupe program does at its start and at its end, set up by tupe_cli_begin, so that
 * no program and no subcommand can forget it:
 *   - standard output is flushed and closed when the process exits, and a write that failed
 *     (a full disk, /dev/full, a closed descriptor) is reported as "(stdout): write failed"
 *     with exit status 74 where the program would otherwise have exited 0 (its own error
 *     code stands when it had one): every printf of every program is checked by this one
 *     place, as gnulib's close_stdout does for the GNU tools;
 *   - SIGINT, SIGTERM and SIGHUP (unless ignored, as under nohup) remove the temporaries of
 *     the outputs in progress (base/tmpfiles.h) and end the process with status 130. They
 *     are blocked in every thread and taken by a thread of their own (sigwait), so that no
 *     handler runs on a computing thread's stack (oneDNN's JIT kernels do not survive it).
 * A program with its own handler (tupe-pretrain finishes its step first) calls
 * tupe_process_interrupted() where it ends the process.
 *
 * This is the one place where the library ends a process: in a signal handler, and at exit. */
#ifndef TUPE_PROCESS_H
#define TUPE_PROCESS_H

#include <signal.h>

/* Install both (once per process; later calls do nothing). prog names the program in the
 * message about standard output. */
void tupe_process_start(const char *prog);
/* Remove the temporaries and _exit(130). Async-signal-safe. */
void tupe_process_interrupted(void) __attribute__((noreturn));

/* For a program that finishes its work on a signal (tupe-pretrain: its step, then a
 * checkpoint): SIGINT and SIGTERM set *flag, and write `msg` (if not NULL) to standard error;
 * a later one ends the process at once (tupe_process_interrupted). One signal counts once,
 * however it is delivered: timeout(1) sends its SIGTERM to the process and then to its whole
 * process group, Slurm to every process of the step, a terminal's ^C to the foreground group
 * and a script's trap to its children again, so that copies of one signal arrive within
 * moments of each other: a signal less than TUPE_SIGNAL_SAME seconds after the first is
 * taken for a copy of it. */
#define TUPE_SIGNAL_SAME 1.0
void tupe_process_graceful(volatile sig_atomic_t *flag, const char *msg);

#endif
