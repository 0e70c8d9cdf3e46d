/*
 * Talking to gpusliced from the CLI: one HTTP/1.1 request at a time over
 * its unix socket (in gs_node_dir(), or $GPUSLICE_DAEMON_DIR), and the few
 * JSON fields the commands read back. The CLI links no HTTP or JSON library:
 * the daemon's answers are small and of a known form.
 */
#ifndef GPUSLICE_CONTROL_DAEMON_CLIENT_H
#define GPUSLICE_CONTROL_DAEMON_CLIENT_H

#include <stddef.h>

/* The daemon's socket path into buf; 0 or a negative errno. */
int gs_daemon_socket(char *buf, size_t len);

/*
 * Sends METHOD PATH (with body as application/json when not NULL) and reads
 * the answer: returns its HTTP status, with the body (malloc'd, NUL-ended)
 * in *out; or -ECONNREFUSED/-ENOENT when no daemon answers, another negative
 * errno on failure (said in err).
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
