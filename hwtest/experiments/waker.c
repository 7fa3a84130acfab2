/*
 * waker.so: an LD_PRELOAD library for `make sysmon-vm` (hwtest/vm/sysmon-vm.sh).
 * It starts one thread that sleeps 10 ms at a time, forever: the wake-up rate of
 * the Go runtime's sysmon thread while a goroutine runs (runtime/proc.go: sysmon's
 * delay is capped at 10 ms and it does not sleep deeply while a P is busy).
 * Preloaded into Debian's C perftest, it asks what that one extra thread costs a
 * program that has none. Built on the host by the make target, never linked
 * into ibgo.
 */
#include <pthread.h>
#include <unistd.h>

static void *wake(void *arg)
{
	(void)arg;
	for (;;)
		usleep(10000);
	return 0;
}

__attribute__((constructor)) static void start(void)
{
	pthread_t t;

	if (pthread_create(&t, 0, wake, 0) == 0)
		pthread_detach(t);
}
