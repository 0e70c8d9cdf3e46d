# What the Kubernetes tests share (sourced): ok/bad with a count of failures, the tests' CA and
# a server certificate for 127.0.0.1 signed by it, and the stand-in API server started in the
# background (tests/k8s/apiserver.py). Expects SRC and T (a scratch directory).
fails=${fails:-0}
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# make_ca NAME: $T/NAME.crt and .key, a CA of its own; with a second argument SERVER, also
# $T/SERVER.crt and .key for IP 127.0.0.1 and kubernetes.default.svc signed by it.
make_ca() {
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/$1.key" -out "$T/$1.crt" -days 1 \
        -subj "/CN=gpuslice-test-$1" >/dev/null 2>&1 || return 1
    [ -n "${2:-}" ] || return 0
    openssl req -newkey rsa:2048 -nodes -keyout "$T/$2.key" -out "$T/$2.csr" \
        -subj "/CN=kubernetes" >/dev/null 2>&1 &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n' >"$T/$2.ext" &&
    openssl x509 -req -in "$T/$2.csr" -CA "$T/$1.crt" -CAkey "$T/$1.key" -CAcreateserial \
        -out "$T/$2.crt" -days 1 -extfile "$T/$2.ext" >/dev/null 2>&1
}
# start_apiserver [ARGS...]: the stand-in in the background ($APISERVER its PID), $KA its API's
# base URL (https:// with --tls, else http://) and $KC its control listener's, once they listen.
start_apiserver() {
    rm -f "$T/kport" "$T/kcport"
    python3 "$SRC/tests/k8s/apiserver.py" --port-file "$T/kport" --control-port-file "$T/kcport" "$@" &
    APISERVER=$!
    i=0
    while { [ ! -s "$T/kport" ] || [ ! -s "$T/kcport" ]; } && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    case " $* " in *" --tls "*) KA="https://127.0.0.1:$(cat "$T/kport")" ;; *) KA="http://127.0.0.1:$(cat "$T/kport")" ;; esac
    KC="http://127.0.0.1:$(cat "$T/kcport")"
    [ -s "$T/kport" ]
}
# tls_apiserver [OPTIONS...]: start_apiserver over TLS with the tests' CA ($T/ca.crt, make_ca)
# and a token ($T/token), OPTIONS after; stopped with the case ($BG). A case that cannot start
# it fails and ends (run.sh's bad).
tls_apiserver() {
    make_ca ca srv || { bad "openssl"; exit 1; }
    printf 'tok-%s\n' "$$" >"$T/token"
    start_apiserver --tls "$T/srv.crt" "$T/srv.key" --token "tok-$$" "$@" || { bad "the stand-in did not start"; exit 1; }
    BG="$BG $APISERVER"
}
# kctl CURL-ARGS...: a request to the control listener.
kctl() { curl -sS -H 'Content-Type: application/json' "$@"; }
# kpod NAME MEMORY NODE: a pod of namespace ns1 asking gpuslice.io/memory MEMORY, on NODE.
kpod() { printf '{"metadata":{"name":"%s","namespace":"ns1","annotations":{"gpuslice.io/memory":"%s"}},"spec":{"nodeName":"%s","containers":[{"name":"c"}]}}' "$1" "$2" "$3"; }
