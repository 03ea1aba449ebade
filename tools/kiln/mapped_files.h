/* What the kiln command says when a file it reads through a memory mapping shrinks under it. */
#ifndef KILN_TOOLS_MAPPED_FILES_H
#define KILN_TOOLS_MAPPED_FILES_H

/* From now on, a SIGBUS (the kernel's answer to reading a mapped page past a file's new end)
 * prints "<command>: SIGBUS: ... <what> ..." on stderr, then ends the process by that signal
 * as before. The library sets no handler of its own: the process is its user's. */
void kiln_explain_sigbus(const char *command, const char *what);

#endif
