# The node's table of tenants against one user who fills it (sourced by daemon.sh, which
# provides start_daemon, api, want, jq_py...): a quota per user, and room kept for pods.
case $CASE in
daemon_trust_room)
    # Issue 28.13: one user filled the node's 256-tenant table; a new GPU pod then got no
    # tenant, and stayed so after the tenants were deleted.
    . "$SRC/tests/k8s/lib.sh"
    make_ca ca srv || { bad "openssl"; exit 1; }
    printf 'tok-%s\n' "$$" >"$T/token"
    start_apiserver --tls "$T/srv.crt" "$T/srv.key" --token "tok-$$" || { bad "the stand-in did not start"; exit 1; }
    BG="$BG $APISERVER"
    # has_tenant NAME SECONDS [no]: pod NAME's tenant exists (or, with no, does not) within SECONDS.
    has_tenant() {
        i=0; while [ $i -lt $(($2 * 10)) ]; do
            api GET /v1/pods >/dev/null
            uid=$(jq_py "print([p['uid'] for p in d['pods'] if p['name'] == '$1'][0])" 2>/dev/null)
            if [ -n "$uid" ]; then
                c=$(api GET "/v1/tenants/pod-$uid")
                if [ "${3:-}" = no ]; then [ "$c" = 404 ] && return 0; else [ "$c" = 200 ] && return 0; fi
            fi
            sleep 0.1; i=$((i + 1))
        done
        return 1
    }
    start_daemon --kube-api "$KA" --kube-ca-file "$T/ca.crt" --kube-token-file "$T/token" --node-name node1 --sweep-ms 100 || exit 1
    # Room kept for pods (64 by default): API tenants stop at 192.
    n=0
    while [ $n -lt 200 ]; do
        code=$(api POST /v1/tenants "{\"name\":\"t$n\"}")
        [ "$code" = 201 ] || break
        n=$((n + 1))
    done
    [ "$n" = 192 ] && [ "$code" = 507 ] && ok "API tenants stop at 192: 507 (the last 64 places are the pods')" || { bad "stopped at $n with $code"; cat "$T/body"; }
    body_has "kept for pods"
    kctl -d "$(kpod p1 1G node1)" "$KC/pods" >/dev/null
    if has_tenant p1 10; then ok "a GPU pod still gets its tenant"; else bad "pod p1 has no tenant"; fi
    stop_daemon
    # With no room kept: a pod that finds the table full gets its tenant as soon as a place frees.
    rm -rf "$T/drun" "$T/drun/state"
    start_daemon --kube-api "$KA" --kube-ca-file "$T/ca.crt" --kube-token-file "$T/token" --node-name node1 --sweep-ms 100 --pod-reserve 0 --state-dir "$T/st2" || exit 1
    has_tenant p1 10
    n=0
    while [ $n -lt 300 ]; do
        code=$(api POST /v1/tenants "{\"name\":\"u$n\"}")
        [ "$code" = 201 ] || break
        n=$((n + 1))
    done
    [ "$code" = 507 ] && ok "the table full after $n more tenants (507)" || { bad "not full: $code"; }
    kctl -d "$(kpod p2 1G node1)" "$KC/pods" >/dev/null
    sleep 1
    if has_tenant p2 1 no; then ok "pod p2 finds the table full: no tenant"; else bad "p2 has a tenant in a full table"; fi
    want 204 "one tenant deleted" DELETE /v1/tenants/u0
    if has_tenant p2 3; then ok "p2 gets its tenant once a place frees, with no change to the pod"; else bad "p2 stayed without a tenant"; fi
    stop_daemon
    # A quota per user (16 by default): a user who is not an admin.
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        chmod 755 "$T"
        mkdir -m 777 "$T/nobody"
        rm -rf "$T/drun"
        start_daemon --socket-group nogroup --state-dir "$T/st3" || exit 1
        n=0
        while [ $n -lt 20 ]; do
            code=$(setpriv --reuid 65534 --regid 65534 --clear-groups curl -s -o "$T/nobody/body" -w '%{http_code}' --unix-socket "$SOCK" -H 'Content-Type: application/json' -d "{\"name\":\"n$n\"}" http://d/v1/tenants)
            [ "$code" = 201 ] || break
            n=$((n + 1))
        done
        cp "$T/nobody/body" "$T/body"
        [ "$n" = 16 ] && [ "$code" = 429 ] && ok "nobody stops at 16 tenants: 429" || { bad "nobody stopped at $n with $code"; cat "$T/body"; }
        err_code quota
        want 201 "an admin still makes one for nobody" POST /v1/tenants '{"name":"forn","owner":65534}'
    fi
    ;;
esac
