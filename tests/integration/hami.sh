# HAMi's contract (sourced by run.sh, which provides T, B, LIB, IT, CL, expect, ok, bad...):
# processes naming one CUDA_DEVICE_MEMORY_SHARED_CACHE path share one limit, as one tenant whose
# state file is that path; a path that cannot be that file is refused, named, never ignored.
# Every path is under $T. The simulator's contexts cost 64 MiB each, so two 600 MiB holders
# of a 1 GiB tenant cannot both fit, and one of 600 MiB fits alone.
M600=629145600
V="$T/vgpu" # as HAMi's device plugin mounts a directory per container at /usr/local/vgpu
mkdir -p "$V"
# hami_env VAR=VALUE... -- CMD...: CMD under HAMi's variables with the interposer preloaded.
hami() { env LD_PRELOAD="${HAMI_LIB:-$LIB}" "$@"; }
# hold_bg NAME CACHE VAR=VALUE...: a process holding 600 MiB through CACHE until $T/NAME.go.
hold_bg() {
    local n=$1 c=$2
    shift 2
    hami CUDA_DEVICE_MEMORY_SHARED_CACHE="$c" "$@" "$IT" hold $M600 "$T/$n.go" >"$T/$n.out" 2>"$T/$n.err" &
    BG="$BG $!"
    for i in $(seq 200); do grep -q "^hold" "$T/$n.out" 2>/dev/null && break; sleep 0.05; done
    if grep -q "^hold $M600 -> 0" "$T/$n.out"; then ok "$n holds 600 MiB"; else bad "$n: $(cat "$T/$n.out" "$T/$n.err")"; fi
}
release() { touch "$T/$1.go"; wait; BG=; }
case "$CASE" in
hami)
    # 1. Two processes naming one path share 1 GiB; a third with another path has its own.
    hold_bg first "$V/a.cache" CUDA_DEVICE_MEMORY_LIMIT=1g
    expect 3 "a second process of the same file is refused the other 600 MiB" -- \
        hami CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/a.cache" "$IT" try $M600
    expect 0 "a process of another file has 1 GiB of its own" -- \
        hami CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/b.cache" "$IT" try $M600
    # A later process with other limits gets the file's (the first user's), and is told so.
    expect 3 "a later process's own 2 GiB do not raise the file's 1 GiB" -- \
        hami CUDA_DEVICE_MEMORY_LIMIT=2g CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/a.cache" "$IT" try $M600
    stderr_has "device 0: the limits recorded in $V/a.cache apply (memory 1073741824 bytes"
    # Without the variable nothing is shared, as before: each process its own 1 GiB.
    expect 0 "no shared file: a process's limit is its own" -- hami CUDA_DEVICE_MEMORY_LIMIT=1g "$IT" try $M600
    release first
    expect 0 "the first gone, its usage is given back to the file's tenant" -- \
        hami CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/a.cache" "$IT" try $M600
    # The file: a regular file of this user's, mode 0600, at the very path; nothing else left.
    if [ "$(stat -c '%F %a %u' "$V/a.cache")" = "regular file 600 $(id -u)" ]; then ok "the file is this user's, mode 0600"
    else bad "the file: $(stat -c '%F %a %u' "$V/a.cache")"; fi
    if [ "$(ls "$V")" = "$(printf 'a.cache\nb.cache')" ]; then ok "no temporary file left beside it"; else bad "files: $(ls "$V")"; fi
    # 2. HAMi's per-device variable (what its device plugin sets), shared alike.
    hold_bg dev0 "$V/c.cache" CUDA_DEVICE_MEMORY_LIMIT_0=1024m
    expect 3 "CUDA_DEVICE_MEMORY_LIMIT_0: a second process of the file is refused" -- \
        hami CUDA_DEVICE_MEMORY_LIMIT_0=1024m CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/c.cache" "$IT" try $M600
    release dev0
    # 3. Loaded as HAMi's library, by path, from a copy named libvgpu.so (as ld.so.preload names it).
    mkdir -p "$T/usr-local-vgpu"
    cp "$LIB" "$T/usr-local-vgpu/libvgpu.so"
    HAMI_LIB="$T/usr-local-vgpu/libvgpu.so"
    hold_bg vgpu "$V/d.cache" CUDA_DEVICE_MEMORY_LIMIT=1g
    expect 3 "as libvgpu.so: the file's processes share 1 GiB" -- \
        hami CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/d.cache" "$IT" try $M600
    release vgpu
    HAMI_LIB=
    # 4. Many processes making one file at once: one file, whole, and all of them in it.
    mkdir -p "$T/race"
    for i in 1 2 3 4 5 6; do
        hami CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$T/race/r.cache" "$IT" init >"$T/race$i.out" 2>&1 &
    done
    wait
    if [ "$(cat "$T"/race?.out | grep -c '^cuInit=0$')" = 6 ] && [ "$(ls "$T/race")" = r.cache ]; then
        ok "six processes racing to make the file: one file, all joined"
    else bad "racing makers: $(ls "$T/race"); $(cat "$T"/race?.out)"; fi
    # 5. Paths that cannot be the file: each refused with its reason (cuInit fails, allocations too).
    refused() { # refused PATH REASON
        expect 4 "$2: cuInit fails" -- hami CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$1" "$IT" init
        stderr_has "CUDA_DEVICE_MEMORY_SHARED_CACHE: cannot use $1"
        stderr_has "$2"
    }
    refused "$T/nowhere/x.cache" "its directory does not exist"
    # A "directory" that is a regular file (ENOTDIR) is one that does not exist, said alike.
    refused "$V/a.cache/x.cache" "its directory does not exist (HAMi's device plugin mounts one per container"
    mkdir "$V/dir.cache"
    refused "$V/dir.cache" "it is a directory, not a regular file"
    mkfifo "$V/fifo.cache"
    refused "$V/fifo.cache" "it is not a regular file"
    ln -s "$V/a.cache" "$V/link.cache"
    refused "$V/link.cache" "it is a symbolic link"
    ln -s "$V/none.cache" "$V/dangling.cache"
    refused "$V/dangling.cache" "it is a symbolic link"
    if [ ! -e "$V/none.cache" ]; then ok "nothing made through a dangling link"; else bad "a file made through a link"; fi
    # HAMi-core's own region: its int32 magic 19920718 first, then version 1.2, at its size.
    python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<iII", 19920718, 1, 2) + bytes(1197897 - 12))' "$V/hamicore.cache"
    chmod 666 "$V/hamicore.cache" # as HAMi-core makes it (umask 0)
    refused "$V/hamicore.cache" "it holds HAMi-core's shared region"
    head -c 200000 /dev/urandom >"$V/other.cache"
    chmod 600 "$V/other.cache"
    refused "$V/other.cache" "it is not gpuslice's tenant state"
    : >"$V/empty.cache"
    refused "$V/empty.cache" "it is an empty file"
    # gpuslice's own tenant state of another ABI version (a newer or older gpuslice made it):
    # named as such, with both versions, never taken for another program's file. Major 3 for
    # this gpuslice's 4, then a size smaller than the layout of the major it names.
    python3 - "$V/a.cache" "$V/v3.cache" "$V/short.cache" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
magic, ver, size = struct.unpack_from("<QII", b, 0)
assert magic == 0x544e455453504753, hex(magic)
v3 = bytearray(b); struct.pack_into("<I", v3, 8, (ver & 0xffff0000) | 3)
open(sys.argv[2], "wb").write(v3)
short = bytearray(b); struct.pack_into("<I", short, 12, 4096)
open(sys.argv[3], "wb").write(short)
PY
    chmod 600 "$V/v3.cache" "$V/short.cache"
    refused "$V/v3.cache" "$V/v3.cache: another major ABI version (tenant ABI 3\.[0-9]*, [0-9]* of [0-9]* bytes; this gpuslice reads tenant ABI 4\.x"
    if grep -q "a file of another program" "$T/err"; then bad "gpuslice's state of ABI 3 called another program's"; cat "$T/err"; else ok "ABI 3: not called another program's"; fi
    refused "$V/short.cache" "$V/short.cache: smaller than its ABI version's layout (tenant ABI 4\.[0-9]*, 4096 of"
    cp "$V/a.cache" "$V/shared.cache"
    chmod 660 "$V/shared.cache"
    refused "$V/shared.cache" "mode 0660; it must be this user's"
    expect 5 "a refused file: allocations are refused too, never unlimited" -- \
        hami CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/hamicore.cache" "$IT" try 1048576
    expect 4 "a relative path is refused" -- hami CUDA_DEVICE_MEMORY_SHARED_CACHE=x.cache "$IT" init
    stderr_has '"x.cache" is not a file'"'"'s absolute path'
    # Of another user: root acts as nobody against root's file (else skipped: no second user here).
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
        chmod 755 "$T" "$V"
        cp "$LIB" "$T/usr-local-vgpu/libvgpu-any.so" && chmod 755 "$T/usr-local-vgpu" && chmod 644 "$T/usr-local-vgpu/libvgpu-any.so"
        expect 4 "another user's file is refused" -- setpriv --reuid=65534 --regid=65534 --clear-groups \
            env LD_PRELOAD="$T/usr-local-vgpu/libvgpu-any.so" CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/a.cache" \
            GPUSLICE_SIM_STATE="$T/nobody.state" "$IT" init
        stderr_has "permission denied: it is owned by uid 0 with mode 0600"
        expect 4 "a new file in a directory this user cannot write is refused" -- setpriv --reuid=65534 --regid=65534 --clear-groups \
            env LD_PRELOAD="$T/usr-local-vgpu/libvgpu-any.so" CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/new.cache" \
            GPUSLICE_SIM_STATE="$T/nobody.state" "$IT" init
        stderr_has "there is no such file, and this user (uid 65534) cannot make one in its directory"
    else echo "skip: another user's file (needs root and setpriv)"; fi
    # A new file on a read-only mount (EROFS): the same reason as a directory this user may not
    # write, with the error (a tmpfs mounted read-only in a mount namespace of its own; skipped
    # where none may be made).
    mkdir -p "$T/ro"
    if [ "$(id -u)" = 0 ] && unshare -m --propagation private sh -c 'mount -t tmpfs -o ro none "$1"' sh "$T/ro" 2>/dev/null; then
        expect 4 "a new file on a read-only mount is refused" -- unshare -m --propagation private sh -c \
            'mount -t tmpfs -o ro none "$1" && shift && exec "$@"' sh "$T/ro" \
            env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$T/ro/new.cache" "$IT" init
        stderr_has "CUDA_DEVICE_MEMORY_SHARED_CACHE: cannot use $T/ro/new.cache"
        stderr_has "there is no such file, and this user (uid 0) cannot make one in its directory (Read-only file system)"
    else echo "skip: a read-only mount (needs root and a mount namespace)"; fi ;;
compute_hami)
    # HAMi's CUDA_DEVICE_SM_LIMIT through one file: the ceiling holds for the two together.
    for p in a b; do
        env LD_PRELOAD="$LIB" CUDA_DEVICE_SM_LIMIT=50 CUDA_DEVICE_MEMORY_SHARED_CACHE="$V/sm.cache" "$CL" stream 2 500 >"$T/$p" 2>"$T/$p.err" &
    done
    wait
    a=$(awk '/^share/ {print $2}' "$T/a"); b=$(awk '/^share/ {print $2}' "$T/b")
    if awk -v a="$a" -v b="$b" 'BEGIN { exit !(a + b >= 0.42 && a + b <= 0.53) }'; then ok "two processes of one file at 50%: $a + $b"
    else bad "two processes of one file at 50%: $a + $b"; cat "$T/a.err" "$T/b.err"; fi ;;
esac
