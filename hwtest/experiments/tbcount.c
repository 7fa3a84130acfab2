/*
 * tbcount.so: a qemu TCG plugin for `make tbcount-vm` (hwtest/vm/tbcount-vm.sh).
 * It counts how often each translated block of the guest runs. The guest
 * steers it through a file on the shared /out directory: "reset" zeroes the
 * counts, "dump NAME" writes DIR/NAME.tbc, one line per block that ran:
 * "vaddr instructions executions". Arguments: ctl=FILE dir=DIR.
 *
 * The counts are bumped by the generated code without atomics, as the API's
 * inline add does; the vCPUs run in threads of their own, so two vCPUs
 * running one block at the same instant can lose an increment: the counts
 * may be slightly low, never high. A reset never writes the counters (a vCPU
 * in the middle of its add would write the old count back); it records
 * them as the base that a dump subtracts.
 *
 * Written for qemu 7.2's plugin API, version 1; the few declarations it
 * needs are restated here from the API's documented signatures. Built on
 * the host by the make target, never linked into ibgo.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef uint64_t plugin_id;
struct qemu_info;
struct qemu_plugin_tb;
typedef void (*tb_trans_cb)(plugin_id, struct qemu_plugin_tb *);
extern void qemu_plugin_register_vcpu_tb_trans_cb(plugin_id, tb_trans_cb);
extern void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, int op, void *ptr, uint64_t imm);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);

enum { INLINE_ADD_U64 = 0 };

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* One record per translation; blocks translated again get another. */
struct block {
	uint64_t execs; /* bumped inline by the generated code, not atomically */
	uint64_t base;  /* execs at the last reset */
	uint64_t vaddr;
	uint64_t insns;
	struct block *next;
};

static struct block *blocks;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const char *ctl, *dir;

static void translated(plugin_id id, struct qemu_plugin_tb *tb)
{
	struct block *b = calloc(1, sizeof *b);

	(void)id;
	if (!b)
		return;
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->insns = qemu_plugin_tb_n_insns(tb);
	pthread_mutex_lock(&mu);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&mu);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, INLINE_ADD_U64, &b->execs, 1);
}

static void dump(const char *name, struct block *head)
{
	char path[1024];
	FILE *o;

	if (strchr(name, '/'))
		return;
	snprintf(path, sizeof path, "%s/%s.tbc", dir, name);
	o = fopen(path, "w");
	if (!o)
		return;
	for (struct block *b = head; b; b = b->next) {
		uint64_t n = __atomic_load_n(&b->execs, __ATOMIC_RELAXED) - b->base;

		if (n)
			fprintf(o, "%llx %llu %llu\n", (unsigned long long)b->vaddr,
				(unsigned long long)b->insns, (unsigned long long)n);
	}
	fclose(o);
}

static void *control(void *arg)
{
	char cmd[256];

	for (;;) {
		FILE *f;
		size_t n;
		struct block *head;

		usleep(20000);
		f = fopen(ctl, "r");
		if (!f)
			continue;
		n = fread(cmd, 1, sizeof cmd - 1, f);
		fclose(f);
		cmd[n] = 0;
		while (n && (cmd[n - 1] == '\n' || cmd[n - 1] == ' '))
			cmd[--n] = 0;
		pthread_mutex_lock(&mu);
		head = blocks;
		pthread_mutex_unlock(&mu);
		if (strcmp(cmd, "reset") == 0) {
			for (struct block *b = head; b; b = b->next)
				b->base = __atomic_load_n(&b->execs, __ATOMIC_RELAXED);
		} else if (strncmp(cmd, "dump ", 5) == 0) {
			dump(cmd + 5, head);
		} else if (n == 0) {
			continue; /* caught the file half written */
		}
		unlink(ctl); /* the guest waits for this */
	}
	return arg;
}

__attribute__((visibility("default"))) int qemu_plugin_install(plugin_id id, const struct qemu_info *info, int argc, char **argv)
{
	pthread_t t;

	(void)info;
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "ctl=", 4) == 0)
			ctl = argv[i] + 4;
		else if (strncmp(argv[i], "dir=", 4) == 0)
			dir = argv[i] + 4;
	}
	if (!ctl || !dir)
		return 1;
	if (pthread_create(&t, NULL, control, NULL) != 0)
		return 1;
	pthread_detach(t);
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	return 0;
}
