/* What every tupe program does at its start and at its end, set up by tupe_cli_begin, so that
 * no program and no subcommand can forget it:
 *   - standard output is flushed and closed when the process exits, and a write that failed
 *     (a full disk, /dev/full, a closed descriptor) is reported as "(stdout): write failed"
 *     with exit status 74 where the program would otherwise have exited 0 (its own error
 *     code stands when it had one): every printf of every program is checked by this one
 *     place, as gnulib's close_stdout does for the GNU tools;
 *   - SIGINT, SIGTERM and SIGHUP (unless ignored, as under nohup) remove the temporaries of
 *     the outputs in progress (base/tmpfiles.h) and end the process with status 130.
 * A program with its own handler (tupe-pretrain finishes its step first) calls
 * tupe_process_interrupted() where it ends the process.
 *
 * This is the one place where the library ends a process: in a signal handler, and at exit. */
#ifndef TUPE_PROCESS_H
#define TUPE_PROCESS_H

/* Install both (once per process; later calls do nothing). prog names the program in the
 * message about standard output. */
void tupe_process_start(const char *prog);
/* Remove the temporaries and _exit(130). Async-signal-safe. */
void tupe_process_interrupted(void) __attribute__((noreturn));

#endif
