/*
 * pause: the process that holds a pod sandbox's namespaces open.
 *
 * kubelet-labs builds it offline (gcc -static) into the pause image that
 * containerd's CRI plugin starts first in every pod ("sandbox_image"). It
 * does the same three jobs as upstream's build/pause/linux/pause.c:
 *
 *   1. sleep forever, so the pod's network/IPC/PID namespaces stay alive
 *      while app containers come and go;
 *   2. reap zombies: with a shared PID namespace it is PID 1 for the pod,
 *      and orphans are re-parented to it;
 *   3. exit 0 on SIGTERM/SIGINT, so StopPodSandbox is quick and clean
 *      (PID 1 ignores signals it has no handler for).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define VERSION "kubelet-labs-pause 1.0"

static void on_stop(int sig)
{
	/* async-signal-safe only: no stdio here */
	(void)sig;
	_exit(0);
}

static void on_child(int sig)
{
	(void)sig;
	/* several children may exit behind one SIGCHLD: reap them all */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void must_handle(int sig, void (*fn)(int), int flags)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) < 0) {
		perror("pause: sigaction");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
		puts(VERSION);
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not PID 1, zombies of others are not mine to reap\n");

	must_handle(SIGTERM, on_stop, 0);
	must_handle(SIGINT, on_stop, 0);
	must_handle(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART);

	for (;;)
		pause();
	return 42; /* not reached */
}
