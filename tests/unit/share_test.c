/*
 * share_test.c -- the pool's turn as one process's threads see it when it
 * is taken over from another (share.c H2, H3): the taker holds it alone
 * until it has caught up, a taker that steps out first leaves the catch-up
 * (and a replay owed for a death) to the next, and none of it is lost; a
 * busy holder is taken over only once it is surely gone.
 */
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "ferrite.h"
#include "space/share_impl.h"
#include "unit.h"

static int shared_pool(struct pool *p)
{
	const char *path = unit_pool_path("share");
	unlink(path);
	struct ferrite_mkfs_opts o = {.size = 32 * FR_MIB};
	if (ferrite_mkfs(path, &o))
		return 1;
	memset(p, 0, sizeof(*p));
	if (pool_open(p, path, POOL_SHARED) != 0 || !p->share)
		return 1;
	share_attach_done(p);
	return 0;
}

static void shared_pool_close(struct pool *p)
{
	char path[128];
	snprintf(path, sizeof(path), "%s", p->path);
	pool_close(p);
	unlink(path);
}

struct joiner {
	struct pool_share *s;
	int entered, why;
};

static void *join_turn(void *arg)
{
	struct joiner *j = arg;
	j->why = share_enter(j->s);
	__atomic_store_n(&j->entered, 1, __ATOMIC_SEQ_CST);
	share_leave(j->s);
	return NULL;
}

/* A thread of the taker's process that comes while the taker catches up
 * waits until it has: it would run through windows not yet dropped. */
static int joiner_waits_for_catch_up(void)
{
	struct pool p;
	CHECK_EQ(shared_pool(&p), 0);
	struct pool_share *s = p.share;
	__atomic_store_n(&s->f->turn, 0, __ATOMIC_SEQ_CST); /* as if another had let it go */
	int why = share_enter(s);
	CHECK(why & SHARE_OTHER);
	CHECK_EQ(TURN_CALLS(s->f->turn), TURN_INSIDE);
	struct joiner j = {.s = s};
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, join_turn, &j), 0);
	usleep(100000); /* it would have joined by now, were it let in */
	int early = __atomic_load_n(&j.entered, __ATOMIC_SEQ_CST);
	share_caught_up(s, why);
	pthread_join(t, NULL);
	CHECK_EQ(early, 0);
	CHECK_EQ(j.entered, 1);
	CHECK_EQ(j.why & SHARE_OTHER, 0); /* joined: nothing left to catch up on */
	share_leave(s);
	CHECK_EQ(s->f->turn, s->pid << TURN_SHIFT);
	shared_pool_close(&p);
	return 0;
}

/* A call the taker makes while it catches up (a signal handler's write to
 * a pool file) runs in its turn: it neither waits for itself for good nor
 * changes the count. */
static int taker_nests(void)
{
	struct pool p;
	CHECK_EQ(shared_pool(&p), 0);
	struct pool_share *s = p.share;
	__atomic_store_n(&s->f->turn, 0, __ATOMIC_SEQ_CST);
	alarm(20); /* a wait for itself ends the test */
	int why = share_enter(s);
	CHECK(why & SHARE_OTHER);
	int inner = share_enter(s);
	CHECK_EQ(inner & SHARE_OTHER, 0);
	CHECK_EQ(TURN_CALLS(s->f->turn), TURN_INSIDE);
	share_leave(s);
	CHECK_EQ(TURN_CALLS(s->f->turn), TURN_INSIDE);
	share_caught_up(s, why);
	CHECK_EQ(s->f->turn, s->pid << TURN_SHIFT | 1);
	share_leave(s);
	alarm(0);
	CHECK_EQ(s->f->turn, s->pid << TURN_SHIFT);
	shared_pool_close(&p);
	return 0;
}

/* A taker that steps out before catching up (a fork being prepared) frees
 * the turn: the next call, this process's too, catches up instead. */
static int released_taker_leaves_catch_up(void)
{
	struct pool p;
	CHECK_EQ(shared_pool(&p), 0);
	struct pool_share *s = p.share;
	__atomic_store_n(&s->f->turn, 0, __ATOMIC_SEQ_CST);
	CHECK(share_turn_take(s, 0) & SHARE_OTHER);
	share_turn_release(s);
	CHECK_EQ(s->f->turn, 0);
	int why = share_enter(s);
	CHECK(why & SHARE_OTHER);
	share_caught_up(s, why);
	share_leave(s);
	/* a turn held after catching up is resumed without a catch-up */
	why = share_enter(s);
	CHECK_EQ(why & SHARE_OTHER, 0);
	share_turn_release(s); /* not at TURN_INSIDE: an ordinary leave */
	CHECK_EQ(s->f->turn, s->pid << TURN_SHIFT);
	shared_pool_close(&p);
	return 0;
}

/* A replay owed for a holder that died stays owed until a taker has done
 * it: takers that step out first pass it on. */
static int replay_owed_until_done(void)
{
	struct pool p;
	CHECK_EQ(shared_pool(&p), 0);
	struct pool_share *s = p.share;
	__atomic_store_n(&s->f->dead_pending, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->f->turn, 0, __ATOMIC_SEQ_CST);
	CHECK(share_turn_take(s, 0) & SHARE_DEAD);
	share_turn_release(s);
	int why = share_enter(s);
	CHECK(why & SHARE_DEAD);
	share_caught_up(s, why);
	CHECK_EQ(s->f->dead_pending, 0);
	share_leave(s);
	__atomic_store_n(&s->f->turn, 0, __ATOMIC_SEQ_CST);
	why = share_enter(s);
	CHECK_EQ(why & SHARE_DEAD, 0);
	share_caught_up(s, why);
	share_leave(s);
	shared_pool_close(&p);
	return 0;
}

static void *take_turn(void *arg)
{
	struct joiner *j = arg;
	j->why = share_enter(j->s);
	__atomic_store_n(&j->entered, 1, __ATOMIC_SEQ_CST);
	share_caught_up(j->s, j->why);
	share_leave(j->s);
	return NULL;
}

/* A holder busy inside a call is taken over only once it is gone (H3):
 * the waiter checks it each time its wait times out, and a live holder --
 * the process the holder word names, pid and start time -- keeps the turn
 * however long it takes. The same pid with another start time is another
 * process: the holder died, and the turn is taken with a replay. */
static int live_holder_kept(void)
{
	struct pool p;
	CHECK_EQ(shared_pool(&p), 0);
	struct pool_share *s = p.share;
	int ready[2];
	CHECK_EQ(pipe(ready), 0);
	pid_t child = fork();
	if (child == 0) { /* past its fork handlers, which look at the turn */
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	CHECK(child > 0);
	char c;
	CHECK_EQ(read(ready[0], &c, 1), 1);
	close(ready[0]);
	close(ready[1]);
	uint64_t start = 0;
	CHECK_EQ(share_proc_state((uint32_t)child, &start), 1);
	uint64_t holder = (uint64_t)child << 32 | (uint32_t)start;
	__atomic_store_n(&s->f->holder, holder, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->f->turn, (uint32_t)child << TURN_SHIFT | 1, __ATOMIC_SEQ_CST);
	struct joiner j = {.s = s};
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, take_turn, &j), 0);
	usleep(300000); /* six of the waiter's checks */
	int taken_from_live = __atomic_load_n(&j.entered, __ATOMIC_SEQ_CST);
	/* the pid is another process's now */
	__atomic_store_n(&s->f->holder, holder + 1, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	CHECK_EQ(taken_from_live, 0);
	CHECK(j.why & SHARE_DEAD);
	CHECK_EQ(s->f->dead_pending, 0);
	CHECK_EQ(s->f->turn, s->pid << TURN_SHIFT);
	shared_pool_close(&p);
	return 0;
}

/* A process out of descriptors cannot read /proc: it must not take that
 * for a dead process (H3), but a pid that is really gone still is. */
static int unreadable_proc_is_not_gone(void)
{
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	CHECK(gone > 0);
	waitpid(gone, NULL, 0);
	pid_t child = fork();
	if (child == 0) {
		struct rlimit rl = {16, 16};
		if (setrlimit(RLIMIT_NOFILE, &rl))
			_exit(2);
		while (dup(0) >= 0)
			;
		uint64_t start;
		int parent = share_proc_state((uint32_t)getppid(), &start);
		int dead = share_proc_state((uint32_t)gone, &start);
		_exit(parent != 0 && dead == 0 ? 0 : 1);
	}
	CHECK(child > 0);
	int st;
	CHECK_EQ(waitpid(child, &st, 0), child);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	return 0;
}

/* The first process to open the pool recovers it (log replay, orphan
 * release) outside the turn: no other process may attach until it says
 * it is done (H5), or its calls would run beside the recovery. */
static int joiner_waits_for_first_recovery(void)
{
	const char *path = unit_pool_path("share");
	unlink(path);
	struct ferrite_mkfs_opts o = {.size = 32 * FR_MIB};
	CHECK_EQ(ferrite_mkfs(path, &o), 0);
	int go[2], said[2];
	CHECK_EQ(pipe(go), 0);
	CHECK_EQ(pipe(said), 0);
	pid_t child = fork();
	if (child == 0) {
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		struct pool q;
		memset(&q, 0, sizeof(q));
		int rc = pool_open(&q, path, POOL_SHARED);
		c = rc == 0 && !q.share_first ? 'j' : 'x';
		if (write(said[1], &c, 1) != 1)
			_exit(3);
		if (!rc)
			pool_close(&q);
		_exit(0);
	}
	CHECK(child > 0);
	struct pool p;
	memset(&p, 0, sizeof(p));
	CHECK_EQ(pool_open(&p, path, POOL_SHARED), 0);
	CHECK(p.share_first);
	CHECK_EQ(write(go[1], "g", 1), 1);
	struct pollfd pf = {.fd = said[0], .events = POLLIN};
	int early = poll(&pf, 1, 300); /* it would have attached by now, were it let in */
	share_attach_done(&p);
	char c = 0;
	CHECK_EQ(read(said[0], &c, 1), 1);
	int st;
	CHECK_EQ(waitpid(child, &st, 0), child);
	pool_close(&p);
	unlink(path);
	CHECK_EQ(early, 0);
	CHECK_EQ(c, 'j');
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* A process whose main thread ended (pthread_exit) shows as a zombie in
 * /proc while its other threads run calls: it is not gone (H3); a zombie
 * with no thread left is. */
static int zombie_leader_is_alive(void)
{
	pid_t leader = fork();
	if (leader == 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, sleeper, NULL))
			_exit(1);
		pthread_exit(NULL);
	}
	CHECK(leader > 0);
	pid_t zombie = fork();
	if (zombie == 0)
		_exit(0);
	CHECK(zombie > 0);
	uint64_t start;
	char state = 0;
	for (int i = 0; i < 2000 && state != 'Z'; i++) { /* until the main thread has ended */
		usleep(1000);
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)leader);
		FILE *fp = fopen(path, "r");
		if (fp && fgets(buf, sizeof(buf), fp) && strrchr(buf, ')'))
			state = strrchr(buf, ')')[2];
		if (fp)
			fclose(fp);
	}
	int leader_state = share_proc_state((uint32_t)leader, &start);
	siginfo_t si;
	CHECK_EQ(waitid(P_PID, (id_t)zombie, &si, WEXITED | WNOWAIT), 0); /* a zombie now */
	int zombie_state = share_proc_state((uint32_t)zombie, &start);
	kill(leader, SIGKILL);
	waitpid(leader, NULL, 0);
	waitpid(zombie, NULL, 0);
	CHECK_EQ(state, 'Z');
	CHECK_EQ(leader_state, 1);
	CHECK_EQ(zombie_state, 0);
	return 0;
}

static const struct unit_case cases[] = {
    {"joiner_waits_for_catch_up", joiner_waits_for_catch_up},
    {"taker_nests", taker_nests},
    {"released_taker_leaves_catch_up", released_taker_leaves_catch_up},
    {"replay_owed_until_done", replay_owed_until_done},
    {"live_holder_kept", live_holder_kept},
    {"unreadable_proc_is_not_gone", unreadable_proc_is_not_gone},
    {"zombie_leader_is_alive", zombie_leader_is_alive},
    {"joiner_waits_for_first_recovery", joiner_waits_for_first_recovery},
};
UNIT_MAIN(cases)
