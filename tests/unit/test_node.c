/* The daemon's node segment: creation, the checks a reader makes, entries, members, lineage. */
#define _GNU_SOURCE /* setresuid */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/node.h"
#include "common/proc.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/gs-node-XXXXXX");
    assert_non_null(mkdtemp(dir));
    chmod(dir, 0755);
    return 0;
}

static int teardown(void **state)
{
    char path[128];

    (void)state;
    snprintf(path, sizeof(path), "%s/" GPUSLICE_NODE_FILE, dir);
    unlink(path);
    rmdir(dir);
    return 0;
}

static void put_tenant(struct gpuslice_node *n, int i, uint32_t id, const char *name)
{
    struct gpuslice_node_tenant *t = &n->tenant[i];

    gs_node_write_begin(n, i);
    t->id = id;
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->mem_default = 1ULL << 30;
    t->compute_default = 40;
    memset(t->dev[0].uuid, 0xab, 16);
    t->dev[0].mem_limit = 2ULL << 30;
    t->dev[0].compute_limit = 25;
    gs_node_write_end(n, i);
}

static void test_created_then_kept_with_its_tenants(void **state)
{
    struct gpuslice_node *n, *r;
    int created;

    (void)state;
    assert_int_equal(gs_node_create(dir, "/tmp/x", &n, &created), 0);
    assert_int_equal(created, 1);
    assert_int_equal(n->next_id, 1);
    put_tenant(n, 3, 7, "train");
    gs_node_close(n);
    assert_int_equal(gs_node_create(dir, "/tmp/y", &n, &created), 0);
    assert_int_equal(created, 0); /* a restart keeps the segment */
    assert_int_equal(gs_node_find_tenant(n, 7), 3);
    assert_string_equal(n->tenant_dir, "/tmp/y");
    assert_int_equal(gs_node_open(dir, &r), 0);
    assert_int_equal(gs_node_find_name(r, "train"), 3);
    assert_int_equal(gs_node_find_name(r, "other"), -ENOENT);
    assert_int_equal(gs_node_find_tenant(r, 8), -ENOENT);
    assert_int_equal(gs_node_find_tenant(r, 0), -ENOENT);
    gs_node_close(r);
    gs_node_close(n);
}

static void test_limits_by_uuid_else_defaults(void **state)
{
    struct gpuslice_node *n;
    uint8_t u[16], other[16];
    uint64_t mem = 5;
    uint32_t comp = 5;
    int created;

    (void)state;
    memset(u, 0xab, 16);
    memset(other, 0x11, 16);
    assert_int_equal(gs_node_create(dir, "/tmp/x", &n, &created), 0);
    put_tenant(n, 0, 9, "a");
    assert_int_equal(gs_node_limits(n, 0, 9, u, -1, &mem, &comp), 0);
    assert_int_equal(mem, 2ULL << 30);
    assert_int_equal(comp, 25);
    assert_int_equal(gs_node_limits(n, 0, 9, other, -1, &mem, &comp), 0);
    assert_int_equal(mem, 1ULL << 30);
    assert_int_equal(comp, 40);
    /* Another tenant in the entry now: the caller keeps what it had. */
    mem = 77;
    assert_int_equal(gs_node_limits(n, 0, 10, u, -1, &mem, &comp), -ESTALE);
    assert_int_equal(mem, 77);
    assert_int_equal(gs_node_limits(n, -1, 9, u, -1, &mem, &comp), -ESTALE);
    assert_int_equal(gs_node_limits(n, GPUSLICE_NODE_MAX_TENANTS, 9, u, -1, &mem, &comp), -ESTALE);
    gs_node_close(n);
}

/* A pod's limits keyed by a process's own CUDA index: after the UUID's entry, before defaults. */
static void test_limits_by_index_after_uuid(void **state)
{
    struct gpuslice_node *n;
    uint8_t u[16], other[16], k[16];
    uint64_t mem = 0;
    uint32_t comp = 0;
    int created;

    (void)state;
    memset(u, 0xab, 16);
    memset(other, 0x11, 16);
    assert_int_equal(gs_node_create(dir, "/tmp/x", &n, &created), 0);
    put_tenant(n, 0, 9, "pod-x");
    gs_node_write_begin(n, 0);
    gs_node_index_key(n->tenant[0].dev[1].uuid, 1);
    n->tenant[0].dev[1].mem_limit = 3ULL << 30;
    n->tenant[0].dev[1].compute_limit = 60;
    n->tenant[0].flags = GPUSLICE_NODE_POD;
    gs_node_write_end(n, 0);
    assert_int_equal(gs_node_key_index(n->tenant[0].dev[1].uuid), 1);
    assert_int_equal(gs_node_key_index(n->tenant[0].dev[0].uuid), -1);
    gs_node_index_key(k, 254);
    assert_int_equal(gs_node_key_index(k), 254);
    k[15] = 255;
    assert_int_equal(gs_node_key_index(k), -1);
    /* Another GPU that this process numbers 1: the index entry. */
    assert_int_equal(gs_node_limits(n, 0, 9, other, 1, &mem, &comp), 0);
    assert_int_equal(mem, 3ULL << 30);
    assert_int_equal(comp, 60);
    /* Numbered 0, or unnumbered: the defaults. */
    assert_int_equal(gs_node_limits(n, 0, 9, other, 0, &mem, &comp), 0);
    assert_int_equal(mem, 1ULL << 30);
    assert_int_equal(gs_node_limits(n, 0, 9, other, -1, &mem, &comp), 0);
    assert_int_equal(mem, 1ULL << 30);
    /* The UUID's own entry wins over the index. */
    assert_int_equal(gs_node_limits(n, 0, 9, u, 1, &mem, &comp), 0);
    assert_int_equal(mem, 2ULL << 30);
    assert_int_equal(comp, 25);
    assert_int_equal(gs_node_flags(n, 0, 9), GPUSLICE_NODE_POD);
    assert_int_equal(gs_node_flags(n, 0, 10), 0);
    assert_int_equal(gs_node_flags(n, -1, 9), 0);
    gs_node_close(n);
}

static void test_entry_left_odd_by_a_killed_writer_is_still_read(void **state)
{
    struct gpuslice_node *n;
    struct gpuslice_node_tenant t;
    int created;

    (void)state;
    assert_int_equal(gs_node_create(dir, "/tmp/x", &n, &created), 0);
    put_tenant(n, 1, 4, "half");
    gs_node_write_begin(n, 1); /* and never ended */
    assert_true(n->tenant[1].seq & 1);
    gs_node_read_tenant(n, 1, &t); /* bounded: returns */
    assert_int_equal(t.id, 4);
    assert_string_equal(t.name, "half");
    gs_node_write_end(n, 1);
    assert_false(n->tenant[1].seq & 1);
    gs_node_close(n);
}

/*
 * A reader never takes a half-written entry for a whole one: the daemon rewrites an entry
 * with one of two whole versions (every field of A, or every field of B) from a copy it read
 * (whose sequence word is even), while a reader copies it over and over. The entry's first
 * word holds the sequence: written from the copy, it would read even in the middle of the
 * write. Up to 2 s, or 2 000 000 reads.
 */
static struct gpuslice_node *torn_n;
static volatile int torn_stop;

static void *torn_writer(void *arg)
{
    struct gpuslice_node_tenant p;
    struct timespec pause = { 0, 5000 };
    unsigned v = 0;

    (void)arg;
    while (!torn_stop) {
        uint64_t x = (++v & 1) ? 0x1111111111111111ULL : 0x2222222222222222ULL;
        int d;

        gs_node_read_tenant(torn_n, 2, &p); /* as gd_tenant_preview: even seq in p */
        p.mem_default = x;
        p.created_unix_ns = x;
        for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
            p.dev[d].mem_limit = x;
        memset(p.name, (v & 1) ? 'a' : 'b', sizeof(p.name) - 1);
        gs_node_write_tenant(torn_n, 2, &p);
        nanosleep(&pause, NULL); /* a daemon's changes come apart: readers are not starved */
    }
    return NULL;
}

static void test_entry_never_read_half_written(void **state)
{
    struct gpuslice_node_tenant t;
    struct timespec t0, now;
    pthread_t w;
    int created, d;
    long reads = 0, torn = 0;

    (void)state;
    assert_int_equal(gs_node_create(dir, "/tmp/x", &torn_n, &created), 0);
    memset(&t, 0, sizeof(t));
    t.id = 9;
    memset(t.name, 'b', sizeof(t.name) - 1); /* whole version B, as the writer makes it */
    t.mem_default = t.created_unix_ns = 0x2222222222222222ULL;
    for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
        t.dev[d].mem_limit = t.mem_default;
    gs_node_write_tenant(torn_n, 2, &t);
    torn_stop = 0;
    assert_int_equal(pthread_create(&w, NULL, torn_writer, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        gs_node_read_tenant(torn_n, 2, &t);
        reads++;
        if ((t.seq & 1) || t.id != 9)
            continue; /* the 64 tries spent (a writer gone): not taken for whole */
        for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
            torn += t.dev[d].mem_limit != t.mem_default;
        torn += t.created_unix_ns != t.mem_default || t.name[0] != t.name[62];
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (!torn && reads < 2000000 && now.tv_sec - t0.tv_sec < 2);
    torn_stop = 1;
    pthread_join(w, NULL);
    assert_int_equal(torn, 0);
    gs_node_close(torn_n);
}

static void test_member_and_lineage(void **state)
{
    struct gpuslice_node *n;
    struct gpuslice_node_member *m;
    uint32_t ns = gs_proc_self_ns();
    pid_t child;
    int created, status;

    (void)state;
    assert_int_equal(gs_node_create(dir, "/tmp/x", &n, &created), 0);
    assert_int_equal(gs_node_lineage_tenant(n), 0);
    m = &n->member[17];
    m->pid_ns = ns;
    m->pid = getpid();
    m->start_time = gs_proc_start_time(getpid()) + 1; /* another process that had the PID */
    m->tenant = 5;
    assert_int_equal(gs_node_lineage_tenant(n), 0);
    m->start_time = gs_proc_start_time(getpid());
    assert_int_equal(gs_node_member_tenant(n, ns, getpid(), m->start_time), 5);
    assert_int_equal(gs_node_member_tenant(n, ns + 1, getpid(), m->start_time), 0);
    assert_int_equal(gs_node_lineage_tenant(n), 5);
    /* A child, and its child, find it through their parents. */
    if ((child = fork()) == 0) {
        pid_t g = fork();

        if (g == 0)
            _exit(gs_node_lineage_tenant(n) == 5 ? 0 : 1);
        waitpid(g, &status, 0);
        _exit(WIFEXITED(status) && WEXITSTATUS(status) == 0 && gs_node_lineage_tenant(n) == 5 ? 0
                                                                                              : 1);
    }
    waitpid(child, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    m->tenant = 0; /* removed */
    assert_int_equal(gs_node_lineage_tenant(n), 0);
    gs_node_close(n);
}

static void test_reader_refuses_what_others_could_write(void **state)
{
    struct gpuslice_node *n;
    char path[128];
    int created;

    (void)state;
    assert_int_equal(gs_node_open(dir, &n), -ENOENT);
    assert_int_equal(gs_node_create(dir, "/tmp/x", &n, &created), 0);
    gs_node_close(n);
    snprintf(path, sizeof(path), "%s/" GPUSLICE_NODE_FILE, dir);
    chmod(path, 0664);
    assert_int_equal(gs_node_open(dir, &n), GS_EUNSAFE);
    chmod(path, 0644);
    chmod(dir, 0777);
    assert_int_equal(gs_node_open(dir, &n), GS_EUNSAFE);
    chmod(dir, 01777); /* sticky, as /tmp: others cannot replace our file */
    assert_int_equal(gs_node_open(dir, &n), 0);
    gs_node_close(n);
    chmod(dir, 0755);
    /* Another layout. */
    truncate(path, 100);
    assert_int_equal(gs_node_open(dir, &n), GS_EABI);
    /* ... which the daemon replaces with a fresh segment. */
    assert_int_equal(gs_node_create(dir, "/tmp/x", &n, &created), 0);
    assert_int_equal(created, 1);
    gs_node_close(n);
}

static void test_compute_any_reads_the_flag(void **state)
{
    struct gpuslice_node *n;
    int created;

    (void)state;
    assert_int_equal(gs_node_create(dir, "/tmp/x", &n, &created), 0);
    assert_int_equal(gs_node_compute_any(n, 2), 0);
    n->tenant[2].flags = GPUSLICE_NODE_COMPUTE_ANY;
    assert_int_equal(gs_node_compute_any(n, 2), 1);
    assert_int_equal(gs_node_compute_any(n, -1), 0);
    assert_int_equal(gs_node_compute_any(n, GPUSLICE_NODE_MAX_TENANTS), 0);
    gs_node_close(n);
}

/*
 * Where this user's daemon is looked for (gs_node_dir), as the daemon's own defaults
 * (options.c): GPUSLICE_DAEMON_DIR when set, else /run/gpuslice for root, else
 * $XDG_RUNTIME_DIR/gpuslice when that is absolute, else /tmp/gpuslice-UID. A relative
 * GPUSLICE_DAEMON_DIR is refused (-EINVAL, as the daemon refuses it): it would name a
 * directory under each process's working directory, and no other place may stand for it.
 * Returns the first case (from 1) that differs, else 0.
 */
static int node_dir_cases(int root)
{
    static const struct {
        /* NULL: unset; user's "": /tmp; "!": refused with -EINVAL */
        const char *daemon_dir, *xdg, *root_want, *user_want;
    } cases[] = {
        { NULL, "/xdg", GS_NODE_SYSTEM_DIR, "/xdg/gpuslice" },
        { NULL, "xdg-rel", GS_NODE_SYSTEM_DIR, "" },
        { NULL, "./xdg", GS_NODE_SYSTEM_DIR, "" },
        { NULL, "", GS_NODE_SYSTEM_DIR, "" },
        { NULL, NULL, GS_NODE_SYSTEM_DIR, "" },
        { "/gd", "/xdg", "/gd", "/gd" },
        { "", "/xdg", GS_NODE_SYSTEM_DIR, "/xdg/gpuslice" },
        { "relative", "/xdg", "!", "!" },
        { "./gd", "xdg-rel", "!", "!" },
    };
    char buf[256], tmp[64];
    size_t i;

    snprintf(tmp, sizeof(tmp), "/tmp/gpuslice-%u", (unsigned)geteuid());
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *want = root ? cases[i].root_want : cases[i].user_want;

        if (cases[i].daemon_dir)
            setenv("GPUSLICE_DAEMON_DIR", cases[i].daemon_dir, 1);
        else
            unsetenv("GPUSLICE_DAEMON_DIR");
        if (cases[i].xdg)
            setenv("XDG_RUNTIME_DIR", cases[i].xdg, 1);
        else
            unsetenv("XDG_RUNTIME_DIR");
        memset(buf, 'x', sizeof(buf));
        if (strcmp(want, "!") == 0) {
            if (gs_node_dir(buf, sizeof(buf)) != -EINVAL) {
                fprintf(stderr, "uid %u, GPUSLICE_DAEMON_DIR %s: not refused\n",
                        (unsigned)geteuid(), cases[i].daemon_dir);
                return (int)i + 1;
            }
            continue;
        }
        if (gs_node_dir(buf, sizeof(buf)) != 0 || strcmp(buf, *want ? want : tmp) != 0) {
            fprintf(stderr,
                    "uid %u, GPUSLICE_DAEMON_DIR %s, XDG_RUNTIME_DIR %s: \"%.*s\", want %s\n",
                    (unsigned)geteuid(), cases[i].daemon_dir ? cases[i].daemon_dir : "unset",
                    cases[i].xdg ? cases[i].xdg : "unset", (int)sizeof(buf) - 1, buf,
                    *want ? want : tmp);
            return (int)i + 1;
        }
    }
    /* A directory that does not fit is refused, never cut short; one that just fits is kept. */
    setenv("GPUSLICE_DAEMON_DIR", "/gd", 1);
    if (gs_node_dir(buf, 3) != -ENAMETOOLONG || gs_node_dir(buf, 4) != 0 || strcmp(buf, "/gd") != 0)
        return 100;
    return 0;
}

static void test_node_dir_is_absolute_and_per_user(void **state)
{
    pid_t child;
    int status;

    (void)state;
    /* In a child: the environment and, as root, the user are changed there only. */
    if ((child = fork()) == 0) {
        int r = node_dir_cases(geteuid() == 0);

        if (r == 0 && geteuid() == 0) {
            /* nobody's, as the daemon's tests check its own defaults (daemon_options) */
            if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                _exit(101);
            r = node_dir_cases(0);
        }
        _exit(r);
    }
    assert_true(child > 0);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_created_then_kept_with_its_tenants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits_by_uuid_else_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits_by_index_after_uuid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entry_left_odd_by_a_killed_writer_is_still_read, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_entry_never_read_half_written, setup, teardown),
        cmocka_unit_test_setup_teardown(test_member_and_lineage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_refuses_what_others_could_write, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_compute_any_reads_the_flag, setup, teardown),
        cmocka_unit_test(test_node_dir_is_absolute_and_per_user),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
