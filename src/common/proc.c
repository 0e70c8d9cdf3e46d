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
static uint32_t self_ns; /* gs_proc_self_ns(), once read */

void gs_proc_set_root(const char *root)
{
    proc_root = root && *root ? root : "/proc";
    __atomic_store_n(&self_ns, 0, __ATOMIC_RELAXED);
}

/* Reads /proc/PID/NAME (PID 0: self) into buf; its length, or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t len)
{
    char path[256];
    ssize_t n;
    int fd;

    if (pid > 0)
        snprintf(path, sizeof(path), "%s/%d/%s", proc_root, (int)pid, name);
    else
        snprintf(path, sizeof(path), "%s/self/%s", proc_root, name);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
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

uint32_t gs_proc_pid_ns(pid_t pid)
{
    char path[256], link[64];
    unsigned long long ino;
    ssize_t n;

    if (pid > 0)
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

pid_t gs_proc_inner_pid(pid_t pid)
{
    char buf[4096], *line, *end;
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

/* pid is the process of namespace ns known there as inner, started at start. */
static int is_that_process(pid_t pid, uint32_t ns, pid_t inner, uint64_t start)
{
    return gs_proc_start_time(pid) == start && gs_proc_pid_ns(pid) == ns &&
           gs_proc_inner_pid(pid) == inner;
}

pid_t gs_proc_find(uint32_t ns, pid_t inner, uint64_t start, pid_t hint)
{
    struct dirent *de;
    pid_t found = 0;
    DIR *d;

    if (hint > 0 && is_that_process(hint, ns, inner, start))
        return hint;
    if ((d = opendir(proc_root)) == NULL)
        return 0;
    while (found == 0 && (de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);

        if (*end == '\0' && pid > 0 && pid <= INT32_MAX &&
            is_that_process((pid_t)pid, ns, inner, start))
            found = (pid_t)pid;
    }
    closedir(d);
    return found;
}

uint32_t gs_proc_self_ns(void)
{
    uint32_t v = __atomic_load_n(&self_ns, __ATOMIC_RELAXED);

    if (v == 0 && (v = gs_proc_pid_ns(0)) != 0)
        __atomic_store_n(&self_ns, v, __ATOMIC_RELAXED);
    return v;
}
