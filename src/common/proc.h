/*
 * What /proc says about a process. A process in a container's PID namespace
 * is known there by one PID and outside by another: its namespace (the inode
 * of /proc/PID/ns/pid) and its PID inside it name it everywhere, and a reader
 * in an enclosing namespace finds the PID it sees it by (gs_proc_find).
 */
#ifndef GPUSLICE_COMMON_PROC_H
#define GPUSLICE_COMMON_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* The kernel's initial PID namespace (PROC_PID_INIT_INO): its readers see every process. */
#define GS_PID_NS_INIT 0xEFFFFFFCu

/* Reads the file at path into buf (at most len - 1 bytes, then a NUL); its length, or -1. */
ssize_t gs_read_text(const char *path, char *buf, size_t len);

/*
 * /proc/PID/stat start time (clock ticks since boot), or 0 if it does not
 * exist or is a zombie. This process's own is read through /proc/self.
 */
uint64_t gs_proc_start_time(pid_t pid);

/* /proc/PID/stat's parent PID (PID 0: this process's own), or 0 if it does not exist. */
pid_t gs_proc_parent(pid_t pid);

/* The inode of PID's PID namespace (0: this process's own is asked for with pid 0); 0 if unknown. */
uint32_t gs_proc_pid_ns(pid_t pid);

/* This process's PID namespace, read once; 0 if unknown. */
uint32_t gs_proc_self_ns(void);

/* This process's user namespace (the inode of /proc/self/ns/user); 0 if unknown. */
uint32_t gs_proc_user_ns(void);

/* PID's PID in its own, innermost namespace (the last NSpid field); 0 if unknown. */
pid_t gs_proc_inner_pid(pid_t pid);

/*
 * Whether PID is the process known as inner in namespace ns, started at
 * start: 1 yes, 0 no (gone, or another process), -1 this reader cannot tell
 * (the namespace or NSpid does not show, as for another user's process).
 */
int gs_proc_is(pid_t pid, uint32_t ns, pid_t inner, uint64_t start);

/*
 * The PID this process sees for the process known as inner in namespace ns
 * and started at start (hint is tried first): 0 where no such process is
 * visible from here, -1 where some process's answer could not be told.
 */
pid_t gs_proc_find(uint32_t ns, pid_t inner, uint64_t start, pid_t hint);

/* One process looked for by gs_proc_find_all; found as gs_proc_find answers. */
struct gs_proc_want {
    uint32_t ns;
    pid_t inner;
    uint64_t start;
    pid_t found;
};

/* gs_proc_find for each of n processes, in one pass over /proc. */
void gs_proc_find_all(struct gs_proc_want *w, int n);

/* For tests: read ROOT instead of /proc (NULL: /proc again). */
void gs_proc_set_root(const char *root);

#endif
