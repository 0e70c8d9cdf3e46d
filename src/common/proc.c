/*
 * What /proc says about a process: its start time (against a recycled PID),
 * its PID namespace, its PID inside that namespace, and where a process of
 * another namespace is seen from this one.
 */
#include "common/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *proc_root = "/proc";
static uint64_t self_ns; /* gs_proc_self_ns(): the namespace in the low 32 bits, the PID above */

void gs_proc_set_root(const char *root)
{
    proc_root = root && *root ? root : "/proc";
    __atomic_store_n(&self_ns, 0, __ATOMIC_RELAXED);
}

ssize_t gs_read_text(const char *path, char *buf, size_t len)
{
    ssize_t n, got = 0;
    int fd;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    while ((size_t)got < len - 1 && (n = read(fd, buf + got, len - 1 - (size_t)got)) > 0)
        got += n;
    close(fd);
    buf[got] = '\0';
    return got;
}

/*
 * Reads /proc/PID/NAME (PID 0, or this process's own: self, which is right
 * even where /proc is another namespace's) into buf; its length, or -1.
 */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t len)
{
    char path[256];

    if (pid > 0 && pid != getpid())
        snprintf(path, sizeof(path), "%s/%d/%s", proc_root, (int)pid, name);
    else
        snprintf(path, sizeof(path), "%s/self/%s", proc_root, name);
    return gs_read_text(path, buf, len);
}

uint64_t gs_proc_start_time(pid_t pid)
{
    char buf[1024], *p, *state;
    unsigned long long v = 0;
    int field;

    if (pid <= 0 || read_proc(pid, "stat", buf, sizeof(buf)) <= 0)
        return 0;
    /* The command name may hold spaces and parentheses: count from the last ')'. */
    if ((p = state = strrchr(buf, ')')) == NULL)
        return 0;
    /* A zombie has exited: its memory is gone, treat it as dead. */
    if (state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X'))
        return 0;
    p++;
    for (field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL || sscanf(p + 1, "%llu", &v) != 1)
        return 0;
    return v ? v : 1;
}

pid_t gs_proc_parent(pid_t pid)
{
    char buf[1024], *p;
    long v = 0;

    if (pid < 0 || read_proc(pid, "stat", buf, sizeof(buf)) <= 0 || (p = strrchr(buf, ')')) == NULL)
        return 0;
    /* ") S PPID ...": the state, then the parent. */
    if (sscanf(p + 1, " %*c %ld", &v) != 1 || v < 0 || v > INT32_MAX)
        return 0;
    return (pid_t)v;
}

uint32_t gs_proc_pid_ns(pid_t pid)
{
    char path[256], link[64];
    unsigned long long ino;
    ssize_t n;

    if (pid > 0 && pid != getpid())
        snprintf(path, sizeof(path), "%s/%d/ns/pid", proc_root, (int)pid);
    else
        snprintf(path, sizeof(path), "%s/self/ns/pid", proc_root);
    if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
        return 0;
    link[n] = '\0';
    if (sscanf(link, "pid:[%llu]", &ino) != 1 || ino == 0 || ino > UINT32_MAX)
        return 0;
    return (uint32_t)ino;
}

uint32_t gs_proc_user_ns(void)
{
    char path[256], link[64];
    unsigned long long ino;
    ssize_t n;

    snprintf(path, sizeof(path), "%s/self/ns/user", proc_root);
    if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
        return 0;
    link[n] = '\0';
    if (sscanf(link, "user:[%llu]", &ino) != 1 || ino == 0 || ino > UINT32_MAX)
        return 0;
    return (uint32_t)ino;
}

pid_t gs_proc_inner_pid(pid_t pid)
{
    char buf[16384], *line, *end; /* whole: a long Groups: line comes before NSpid */
    long last = 0;

    if (read_proc(pid, "status", buf, sizeof(buf)) <= 0 || (line = strstr(buf, "\nNSpid:")) == NULL)
        return 0;
    line += 7;
    for (;;) {
        long v = strtol(line, &end, 10);
        if (end == line)
            break;
        last = v;
        line = end;
    }
    return last > 0 && last <= INT32_MAX ? (pid_t)last : 0;
}

int gs_proc_is(pid_t pid, uint32_t ns, pid_t inner, uint64_t start)
{
    uint32_t its_ns;
    pid_t its_inner;

    if (pid <= 0 || gs_proc_start_time(pid) != start)
        return 0; /* gone, or another process now has the PID */
    /* Another user's process, or a non-dumpable one, may not show its namespace. */
    if ((its_ns = gs_proc_pid_ns(pid)) == 0)
        return -1;
    if (its_ns != ns)
        return 0;
    if ((its_inner = gs_proc_inner_pid(pid)) == 0)
        return -1; /* no NSpid (a kernel before 4.1) */
    return its_inner == inner;
}

void gs_proc_find_all(struct gs_proc_want *w, int n)
{
    struct dirent *de;
    int k, left = n;
    DIR *d;

    for (k = 0; k < n; k++)
        w[k].found = 0;
    if (n == 0)
        return;
    if ((d = opendir(proc_root)) == NULL) {
        for (k = 0; k < n; k++)
            w[k].found = -1;
        return;
    }
    while (left > 0 && (de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        uint64_t st;

        if (*end != '\0' || pid <= 0 || pid > INT32_MAX ||
            (st = gs_proc_start_time((pid_t)pid)) == 0)
            continue;
        /* The start time sorts out nearly every process before its namespace is read. */
        for (k = 0; k < n; k++) {
            int r;

            if (w[k].found > 0 || w[k].start != st)
                continue;
            if ((r = gs_proc_is((pid_t)pid, w[k].ns, w[k].inner, w[k].start)) > 0) {
                w[k].found = (pid_t)pid;
                left--;
            } else if (r < 0) {
                w[k].found = -1;
            }
        }
    }
    closedir(d);
}

pid_t gs_proc_find(uint32_t ns, pid_t inner, uint64_t start, pid_t hint)
{
    struct gs_proc_want w = { ns, inner, start, 0 };
    int r;

    if (hint > 0 && (r = gs_proc_is(hint, ns, inner, start)) != 0)
        return r > 0 ? hint : -1;
    gs_proc_find_all(&w, 1);
    return w.found;
}

uint32_t gs_proc_self_ns(void)
{
    uint64_t v = __atomic_load_n(&self_ns, __ATOMIC_RELAXED);
    uint32_t ns;

    /* Keyed by PID: a child forked after unshare(CLONE_NEWPID) is in another namespace. */
    if (v != 0 && (pid_t)(v >> 32) == getpid())
        return (uint32_t)v;
    if ((ns = gs_proc_pid_ns(0)) != 0)
        __atomic_store_n(&self_ns, (uint64_t)(uint32_t)getpid() << 32 | ns, __ATOMIC_RELAXED);
    return ns;
}
