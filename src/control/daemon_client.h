/*
 * Talking to gpusliced from the CLI: one HTTP/1.1 request at a time over
 * its unix socket (only in $GPUSLICE_DAEMON_DIR when that is set; else in
 * this user's own daemon's directory, gs_node_dir(), then in /run/gpuslice),
 * and the few JSON fields the commands read back. The CLI links no HTTP or
 * JSON library: the daemon's answers are small and of a known form.
 */
#ifndef GPUSLICE_CONTROL_DAEMON_CLIENT_H
#define GPUSLICE_CONTROL_DAEMON_CLIENT_H

#include <stddef.h>

/*
 * Sends METHOD PATH (with body as application/json when not NULL) and reads
 * the answer: returns its HTTP status, with the body (malloc'd, NUL-ended)
 * in *out; or -ENOENT (no daemon), -ECONNREFUSED (a socket no daemon serves),
 * -EACCES (a daemon this user may not ask), another negative errno on failure;
 * err then says why and what to do (the daemon's group to join, or start it).
 */
int gs_daemon_request(const char *method, const char *path, const char *body, char **out, char *err,
                      size_t errlen);

/* 1 when a daemon answers on its socket. */
int gs_daemon_running(void);

/*
 * The first string member named key of a JSON text (unescaped, at most len-1
 * bytes): 0, or -ENOENT. Good for the daemon's flat answers only.
 */
int gs_json_find_string(const char *json, const char *key, char *out, size_t len);

/* The daemon's error message of an answer body, or the body itself, into out. */
void gs_daemon_error_message(const char *body, char *out, size_t len);

#endif
