# gpuslice mps past case mps's tour (sourced by run.sh, which provides T, B, GS, expect, ok, bad,
# stderr_has), against the stand-in nvidia-cuda-mps-control: which GPU --device names, at
# both ends of what it takes; what start, status and stop print, to the character; each mode bit
# of the private directories, their longest paths, and where they go without XDG_RUNTIME_DIR; how
# nvidia-cuda-mps-control is found in PATH and the environment it is given.
U0=GPU-5ac1ce00-0000-4000-8000-000000000000
U1=GPU-5ac1ce00-0000-4000-8000-000000000001
U9=GPU-5ac1ce00-0000-4000-8000-000000000009
export GPUSLICE_SIM_DEVICES=2 XDG_RUNTIME_DIR="$T/xdg" GPUSLICE_MPS_TIMEOUT=3
export CUDA_MPS_PIPE_DIRECTORY="$T/default-mps"
mkdir -p "$T/bin"
chmod 700 "$T/xdg"
cp "$SRC/tests/integration/fake-mps-control" "$T/bin/nvidia-cuda-mps-control"
export PATH="$T/bin:$PATH"
BASE="$T/xdg/gpuslice-mps"
D0="$BASE/$U0" P0="$BASE/$U0/pipe" D1="$BASE/$U1" P1="$BASE/$U1/pipe"
# out_is WHAT LINE...: the last expect's stdout is exactly these lines; err_is: its stderr.
out_is() {
    local what=$1
    shift
    if [ "$(cat "$T/out")" = "$(printf '%s\n' "$@")" ]; then ok "$what"; else
        bad "$what"; echo "got:"; cat "$T/out"; echo "want:"; printf '%s\n' "$@"; cat "$T/err"; fi
}
err_is() {
    local what=$1
    shift
    if [ "$(cat "$T/err")" = "$(printf '%s\n' "$@")" ]; then ok "$what"; else
        bad "$what"; echo "got:"; cat "$T/err"; echo "want:"; printf '%s\n' "$@"; fi
}
lines_of() { if [ -e "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# GPUSLICE_MPS_TIMEOUT at both ends of (0, 600], and the timeout given is the one used.
for v in 600.1 600.0001 00 0.000 1000; do
    GPUSLICE_MPS_TIMEOUT=$v expect 2 "GPUSLICE_MPS_TIMEOUT='$v' is refused" -- "$GS" mps status
    err_is "the message names '$v'" "gpuslice: GPUSLICE_MPS_TIMEOUT: \"$v\" is not a number of seconds above 0 and at most 600 (e.g. 10 or 2.5; unset it for the default, 10)"
done
for v in 600.0 599.999 0.001; do
    GPUSLICE_MPS_TIMEOUT=$v expect 0 "GPUSLICE_MPS_TIMEOUT='$v' is accepted" -- "$GS" mps status
done

# One subcommand, nothing after it (options aside).
expect 2 "mps status -d 0 extra" -- "$GS" mps status -d 0 extra
err_is "the extra argument named" 'gpuslice: mps: unexpected argument "extra" (see gpuslice mps --help)'

# Nothing started yet: status and stop say so, naming where they looked.
expect 0 "status with no directory" -- "$GS" mps status
out_is "status names the base directory" "no gpuslice MPS daemons (none started in $BASE)"
expect 0 "status --json with no directory" -- "$GS" mps status --json
out_is "status --json: no GPUs" '{"gpus":[]}'
expect 0 "status -d 1 with no directory" -- "$GS" mps status -d 1
out_is "status -d: for this GPU" "no gpuslice MPS daemon for this GPU (none started in $BASE)"
expect 0 "stop with no directory" -- "$GS" mps stop
out_is "stop: GPU 0 runs none" "$U0: no gpuslice MPS daemon is running"
expect 0 "stop --json -d UUID with no directory" -- "$GS" mps stop --json -d "$U1"
out_is "stop --json: not running, not stopped" '{"uuid":"'"$U1"'","running":false,"stopped":false,"clients":[]}'
if [ ! -e "$BASE" ]; then ok "status and stop make no directory"; else bad "$BASE was made"; fi

# --device: an index 0..1023 or a UUID; an index or UUID the driver does not know is named.
for v in 1024 99999 -1 1x "" " 1" +1 0x1 GPU-5ac1ce00-0000-4000-8000-00000000000 \
    GPU-5ac1ce00-0000-4000-8000-0000000000000 MIG-5ac1ce00-0000-4000-8000-000000000000; do
    expect 2 "mps start -d '$v' is bad usage" -- "$GS" mps start -d "$v"
    err_is "-d '$v' named" "gpuslice: mps: --device: \"$v\" is not a GPU (use a CUDA index such as 0, or a UUID GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
done
expect 1 "mps start -d 1023 (in range, no such GPU)" -- "$GS" mps start -d 1023
err_is "-d 1023: the count the machine shows" "gpuslice: mps: --device 1023: no such GPU (this machine shows 2)"
expect 1 "mps start -d 2 on two GPUs" -- "$GS" mps start -d 2
err_is "-d 2: no such GPU" "gpuslice: mps: --device 2: no such GPU (this machine shows 2)"
expect 1 "mps status -d 2 on two GPUs" -- "$GS" mps status -d 2
err_is "status -d 2 asks the driver too" "gpuslice: mps: --device 2: no such GPU (this machine shows 2)"
expect 1 "mps start -d gpu-…09 (no such UUID)" -- "$GS" mps start -d gpu-5AC1CE00-0000-4000-8000-000000000009
err_is "the UUID named as GPU-… in lower-case hex" "gpuslice: mps: --device $U9: no GPU has this UUID"
if [ ! -e "$BASE" ]; then ok "a refused start makes no directory"; else bad "$BASE was made"; fi
# By UUID: that GPU, whatever its index; the environment's own settings are not the daemon's.
CUDA_VISIBLE_DEVICES="$U1,$U0" LD_PRELOAD="libc.so.6:$B/lib/libgpuslice.so" \
    expect 0 "mps start --json -d GPU 0's UUID" -- "$GS" mps start --json -d "$U0"
out_is "start --json: the GPU, its directories, started" \
    '{"uuid":"'"$U0"'","pipe_dir":"'"$P0"'","log_dir":"'"$D0/log"'","started":true}'
if [ "$(cat "$P0/fake.starts" 2>/dev/null)" = "CUDA_VISIBLE_DEVICES=$U0 CUDA_MPS_LOG_DIRECTORY=$D0/log LD_PRELOAD=libc.so.6" ]; then
    ok "the daemon sees only its GPU, its log directory and the other preloaded library"
else bad "the daemon's environment"; cat "$P0/fake.starts"; fi
if [ "$(cat "$P0/fake.percentage" 2>/dev/null)" = 100 ]; then ok "its default percentage is 100"; else bad "percentage"; fi
# status -d for a GPU without a directory, beside one with: that GPU's, none, not the others'.
expect 0 "status -d 1 while only GPU 0 has a directory" -- "$GS" mps status -d 1
out_is "status -d 1: none for this GPU" "no gpuslice MPS daemon for this GPU (none started in $BASE)"
expect 0 "status --json -d GPU 1's UUID while only GPU 0 has a directory" -- "$GS" mps status --json -d "$U1"
out_is "status --json -d: no GPUs" '{"gpus":[]}'
expect 0 "mps start -d GPU 1's UUID" -- "$GS" mps start -d "$U1"
out_is "start: GPU 1 by its UUID" "$U1: MPS control daemon started" "  clients use it with CUDA_MPS_PIPE_DIRECTORY=$P1"
if grep -q "^CUDA_VISIBLE_DEVICES=$U1 " "$P1/fake.starts" 2>/dev/null; then ok "GPU 1's daemon is for GPU 1"; else bad "GPU 1's daemon"; cat "$P1/fake.starts"; fi
expect 0 "mps start -d gpu-5AC1CE00-…-01 (any case)" -- "$GS" mps start --json -d gpu-5AC1CE00-0000-4000-8000-000000000001
out_is "the same daemon, reused" '{"uuid":"'"$U1"'","pipe_dir":"'"$P1"'","log_dir":"'"$D1/log"'","started":false}'
expect 0 "mps start -d 1 (its index)" -- "$GS" mps start -d 1
out_is "reused, said so" "$U1: MPS control daemon already running (reused)" "  clients use it with CUDA_MPS_PIPE_DIRECTORY=$P1"
if [ "$(lines_of "$P1/fake.starts")" = 1 ]; then ok "GPU 1's daemon started once"; else bad "GPU 1's daemon started again"; fi
# run --gpu-share: -d picks from the caller's CUDA_VISIBLE_DEVICES (1,0: -d 0 is the machine's
# GPU 1), and that entry is a GPU of the machine, whose daemon the program is given.
CUDA_VISIBLE_DEVICES=1,0 expect 0 "run --gpu-share -d 0 under CUDA_VISIBLE_DEVICES=1,0" -- \
    "$GS" run -q --gpu-share 25 -d 0 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY"'
out_is "the machine's GPU 1 and its daemon's pipe directory" "1 $P1"
if [ "$(lines_of "$P0/fake.starts")" = 1 ] && [ "$(lines_of "$P1/fake.starts")" = 1 ]; then
    ok "no daemon started anew"; else bad "daemons started: $(cat "$P0/fake.starts" "$P1/fake.starts")"; fi

# status: every GPU with a directory, in order, its servers and their clients, to the character;
# only directories named GPU-UUID count.
printf '4242\n4343\n' >"$P0/fake.servers"
echo 100 >"$P0/fake.clients.4242"
: >"$P0/fake.clients.4343"
: >"$P1/fake.servers"
mkdir -m 700 "$BASE/$U9" "$BASE/junk" "$BASE/gpu-5ac1ce00-0000-4000-8000-00000000000a"
expect 0 "mps status" -- "$GS" mps status
out_is "status: both daemons, a server without clients, a GPU without a daemon" \
    "$U0  running" "  pipe dir  $P0" "  server 4242: client 100" "  server 4343: no clients" \
    "$U1  running" "  pipe dir  $P1" "  no MPS server yet (one starts with the first client)" \
    "$U9  not running" "  pipe dir  $BASE/$U9/pipe"
expect 0 "mps status --json" -- "$GS" mps status --json
g0='{"uuid":"'"$U0"'","pipe_dir":"'"$P0"'","log_dir":"'"$D0/log"'","running":true,"servers":[{"pid":4242,"clients":[100]},{"pid":4343,"clients":[]}]}'
g1='{"uuid":"'"$U1"'","pipe_dir":"'"$P1"'","log_dir":"'"$D1/log"'","running":true,"servers":[]}'
g9='{"uuid":"'"$U9"'","pipe_dir":"'"$BASE/$U9/pipe"'","log_dir":"'"$BASE/$U9/log"'","running":false,"servers":[]}'
out_is "status --json: each GPU whole" '{"gpus":['"$g0,$g1,$g9"']}'
expect 0 "mps status -d UUID" -- "$GS" mps status -d "$U9"
out_is "status -d: that GPU only" "$U9  not running" "  pipe dir  $BASE/$U9/pipe"
rmdir "$BASE/$U9" "$BASE/junk" "$BASE/gpu-5ac1ce00-0000-4000-8000-00000000000a"
# What nvidia-cuda-mps-control lists is read as PIDs: 1 to 2^31-1, in decimal, blank-separated.
printf '4242 0 -5 abc 12x +7 2147483647 2147483648\n' >"$P0/fake.servers"
printf '100\t101\r\n102\n' >"$P0/fake.clients.4242"
expect 0 "mps status --json -d 0 with odd lists" -- "$GS" mps status --json -d 0
out_is "only the PIDs are taken" '{"gpus":[{"uuid":"'"$U0"'","pipe_dir":"'"$P0"'","log_dir":"'"$D0/log"'","running":true,"servers":[{"pid":4242,"clients":[100,101,102]},{"pid":2147483647,"clients":[]}]}]}'
# A daemon that does not answer in GPUSLICE_MPS_TIMEOUT: that timeout, named.
touch "$P0/fake.hang"
start=$(date +%s%N)
GPUSLICE_MPS_TIMEOUT=0.5 expect 1 "status with a daemon that does not answer in 0.5 s" -- "$GS" mps status -d 0
stderr_has "gpuslice: mps: $U0: get_server_list did not answer within 0.5 s (pipe dir $P0)"
took=$((($(date +%s%N) - start) / 1000000))
if [ $took -lt 5000 ]; then ok "gave up after 0.5 s ($took ms)"; else bad "took $took ms"; fi
rm -f "$P0/fake.hang"

# stop: refused with clients, one or several, each named; the count in words.
echo 4242 >"$P0/fake.servers"
echo 100 >"$P0/fake.clients.4242"
expect 1 "mps stop with one client" -- "$GS" mps stop
err_is "one client, named" "gpuslice: mps: stop: $U0 has 1 client connected (PID 100); stop them first, or use --force"
printf '4242\n4343\n' >"$P0/fake.servers"
echo "200 201" >"$P0/fake.clients.4343"
expect 1 "mps stop with clients of two servers" -- "$GS" mps stop --json
err_is "three clients of two servers" "gpuslice: mps: stop: $U0 has 3 clients connected (PIDs 100 200 201); stop them first, or use --force"
if [ ! -s "$T/out" ] && [ "$(lines_of "$P0/fake.quits")" = 0 ]; then ok "refused: nothing printed, no quit sent"; else bad "refused stop"; cat "$T/out"; fi
# --force while the clients run: quit is sent and the daemon runs on until they end (each call
# given 2 s, which the stand-in needs on a loaded machine; stop waits that long for the exit).
touch "$P0/fake.linger"
GPUSLICE_MPS_TIMEOUT=2 expect 0 "mps stop --force --json while clients run on" -- "$GS" mps stop --force --json
out_is "still running, not stopped, its clients named" '{"uuid":"'"$U0"'","running":true,"stopped":false,"clients":[100,200,201]}'
rm -f "$P0/fake.quitting"
GPUSLICE_MPS_TIMEOUT=2 expect 0 "mps stop --force while clients run on" -- "$GS" mps stop --force
out_is "quit sent, said so" "$U0: quit sent; MPS accepts no new clients and the daemon exits once its clients end (PIDs 100 200 201)"
rm -f "$P0/fake.quitting"
: >"$P0/fake.servers"
GPUSLICE_MPS_TIMEOUT=2 expect 1 "mps stop: a daemon without clients that does not exit" -- "$GS" mps stop
err_is "named, with the timeout" "gpuslice: mps: $U0: the daemon did not exit within 2 s of quit (pipe dir $P0)"
if [ "$(lines_of "$P0/fake.quits")" = 3 ]; then ok "one quit each"; else bad "quits: $(lines_of "$P0/fake.quits")"; fi
rm -f "$P0/fake.quitting" "$P0/fake.linger"
expect 0 "mps stop --json" -- "$GS" mps stop --json
out_is "stopped: not running" '{"uuid":"'"$U0"'","running":false,"stopped":true,"clients":[]}'
if [ ! -e "$P0/control" ]; then ok "the daemon is gone"; else bad "the control pipe is left"; fi
expect 0 "mps stop -d GPU 1's UUID" -- "$GS" mps stop -d "$U1"
out_is "stop: said so" "$U1: MPS control daemon stopped"
# The control pipe a stopped daemon leaves behind, which no daemon answers on
# (nvidia-cuda-mps-control exits 1: "Cannot find MPS control daemon process"): not running.
mkfifo -m 600 "$P0/control"
expect 0 "status with a stale control pipe" -- "$GS" mps status --json -d 0
out_is "not running" '{"gpus":[{"uuid":"'"$U0"'","pipe_dir":"'"$P0"'","log_dir":"'"$D0/log"'","running":false,"servers":[]}]}'
expect 0 "stop with a stale control pipe" -- "$GS" mps stop
out_is "stop: none runs" "$U0: no gpuslice MPS daemon is running"
if [ "$(lines_of "$P0/fake.quits")" = 4 ]; then ok "no quit sent to the stale pipe"; else bad "quit sent"; fi
rm -f "$P0/control"
# -d fails: what it said, and where its log is.
echo "fake: cannot start the daemon" >"$P0/fake.start-fails"
expect 1 "mps start when -d fails" -- "$GS" mps start
stderr_has "gpuslice: mps: nvidia-cuda-mps-control -d failed: fake: cannot start the daemon"
stderr_has " (log dir $D0/log)"
rm -f "$P0/fake.start-fails"
# -d returns, but the daemon never answers (it fails every command, as one stopping does).
touch "$P0/fake.quitting"
GPUSLICE_MPS_TIMEOUT=2 expect 1 "mps start: a daemon that never answers" -- "$GS" mps start
err_is "named, with where its log is" "gpuslice: mps: the daemon for $U0 did not answer on $P0 within 2 s (see $D0/log/control.log)"
rm -f "$P0/fake.quitting" "$P0/control"
# A refused directory fails status (exit 1) but the other GPUs are still listed.
expect 0 "mps start -d 1" -- "$GS" mps start -d 1
chmod 710 "$D1"
expect 1 "mps status with GPU 1's directory open to others" -- "$GS" mps status
err_is "GPU 1's directory named" "gpuslice: mps: $D1 has mode 0710, open to other users; refusing to use it (chmod 700 it, or remove it)"
out_is "GPU 0 still listed" "$U0  not running" "  pipe dir  $P0"
chmod 700 "$D1"
expect 0 "mps stop -d 1" -- "$GS" mps stop -d 1

# Each group and other bit of each directory is refused, with the mode named; 0700 is taken.
for m in 750 705 710 701 740 704 720 702 755 777; do
    chmod "$m" "$BASE"
    expect 1 "a base directory of mode 0$m" -- "$GS" mps stop
    err_is "mode 0$m named" "gpuslice: mps: $BASE has mode 0$m, open to other users; refusing to use it (chmod 700 it, or remove it)"
done
chmod 700 "$BASE"
for d in "$D0" "$P0" "$D0/log"; do
    chmod 710 "$d"
    expect 1 "${d#$T/} of mode 0710" -- "$GS" mps stop
    err_is "${d#$T/} named" "gpuslice: mps: $d has mode 0710, open to other users; refusing to use it (chmod 700 it, or remove it)"
    chmod 700 "$d"
done
expect 0 "mode 0700 everywhere" -- "$GS" mps stop
# Made 0700 whatever the umask took from the owner.
mkdir -m 700 "$T/xdg3"
XDG_RUNTIME_DIR="$T/xdg3" expect 0 "mps start under umask 277" -- sh -c 'umask 277; exec "$@"' sh "$GS" mps start
for d in "$T/xdg3/gpuslice-mps" "$T/xdg3/gpuslice-mps/$U0" "$T/xdg3/gpuslice-mps/$U0/pipe" "$T/xdg3/gpuslice-mps/$U0/log"; do
    m=$(stat -c %a "$d" 2>/dev/null)
    if [ "$m" = 700 ]; then ok "${d#$T/} is 0700"; else bad "${d#$T/} is ${m:-missing} under umask 277"; fi
done
XDG_RUNTIME_DIR="$T/xdg3" "$GS" mps stop >/dev/null 2>&1
# A file where the base would be; an XDG_RUNTIME_DIR that does not exist.
mkdir -m 700 "$T/xdg2"
: >"$T/xdg2/gpuslice-mps"
XDG_RUNTIME_DIR="$T/xdg2" expect 1 "a file where the base directory would be" -- "$GS" mps start
err_is "not a directory" "gpuslice: mps: $T/xdg2/gpuslice-mps is not a directory (a link or a file); remove it or set XDG_RUNTIME_DIR elsewhere"
XDG_RUNTIME_DIR="$T/nope" expect 1 "an XDG_RUNTIME_DIR that does not exist" -- "$GS" mps start
err_is "cannot open it" "gpuslice: mps: cannot open $T/nope: No such file or directory"
# The pipe directory at the longest a socket path allows (107 characters less "/control": 99),
# and one character more: refused before anything is made.
pad=$((40 - ${#T} - 1))
X40="$T/$(printf "%${pad}s" "" | tr ' ' x)"
mkdir -m 700 "$X40" "${X40}y"
XDG_RUNTIME_DIR="$X40" expect 0 "a pipe directory of 99 characters" -- "$GS" mps start
p="$X40/gpuslice-mps/$U0/pipe"
if [ ${#p} = 99 ] && [ -p "$p/control" ]; then ok "its daemon runs (${#p} characters)"; else bad "pipe directory of ${#p}"; cat "$T/err"; fi
XDG_RUNTIME_DIR="$X40" "$GS" mps stop >/dev/null 2>&1
XDG_RUNTIME_DIR="${X40}y" expect 1 "a pipe directory of 100 characters" -- "$GS" mps start
err_is "too long, the limit named" "gpuslice: mps: the pipe directory ${X40}y/gpuslice-mps/$U0/pipe is too long for a socket path (at most 99 characters); set XDG_RUNTIME_DIR to a shorter directory"
if [ -z "$(ls -A "${X40}y")" ]; then ok "nothing made"; else bad "made: $(ls -A "${X40}y")"; fi
# A GPU's directory of at most 4079 characters (room left for "/pipe" in 4096): XDG_RUNTIME_DIR
# of 4025 (+ "/gpuslice-mps/" and the UUID), then 4026.
long=$(python3 -c 'import sys; p = sys.argv[1] + "/nope"
while len(p) < 4025 - 11: p += "/aaaaaaaaa"
print(p + "/" + "b" * (4025 - len(p) - 1))' "$T")
XDG_RUNTIME_DIR="$long" expect 0 "XDG_RUNTIME_DIR of 4025 characters" -- "$GS" mps stop -d "$U0"
out_is "it does not exist: none runs" "$U0: no gpuslice MPS daemon is running"
XDG_RUNTIME_DIR="${long}c" expect 1 "XDG_RUNTIME_DIR of 4026 characters" -- "$GS" mps stop -d "$U0"
if [ "$(cat "$T/err")" = "gpuslice: mps: the directory for $U0 would be too long (XDG_RUNTIME_DIR is ${long}c)" ]; then
    ok "too long, named"; else bad "4026 characters: $(cut -c 1-200 "$T/err")"; fi

# nvidia-cuda-mps-control: the first executable file of that name in PATH, an empty entry being
# the current directory.
mkdir -p "$T/noexec" "$T/isdir/nvidia-cuda-mps-control"
printf '#!/bin/sh\nexit 0\n' >"$T/noexec/nvidia-cuda-mps-control"
chmod 644 "$T/noexec/nvidia-cuda-mps-control"
n=$(lines_of "$P0/fake.starts")
PATH="$T/noexec:$T/isdir:$T/bin:/usr/bin:/bin" expect 0 "mps start past a file that is not executable and a directory" -- "$GS" mps start
if [ "$(lines_of "$P0/fake.starts")" = $((n + 1)) ] && [ -p "$P0/control" ]; then ok "the executable one was run"; else bad "daemon not started"; cat "$T/err"; fi
PATH="$T/noexec:$T/isdir:/usr/bin:/bin" expect 1 "only a non-executable file and a directory in PATH" -- "$GS" mps stop
err_is "not in PATH" "gpuslice: mps: nvidia-cuda-mps-control is not in PATH; MPS ships with the NVIDIA driver (its utilities package, e.g. nvidia-compute-utils or nvidia-utils): install it or add its directory to PATH"
expect 0 "an empty PATH entry first: the current directory" -- env -C "$T/bin" PATH=":/usr/bin:/bin" "$GS" mps stop
out_is "stopped through ./nvidia-cuda-mps-control" "$U0: MPS control daemon stopped"
expect 0 "an empty PATH entry between two" -- env -C "$T/bin" PATH="$T/nobin::/usr/bin:/bin" "$GS" mps start
out_is "started through ./nvidia-cuda-mps-control" "$U0: MPS control daemon started" "  clients use it with CUDA_MPS_PIPE_DIRECTORY=$P0"
if [ ! -e /usr/bin/nvidia-cuda-mps-control ] && [ ! -e /bin/nvidia-cuda-mps-control ]; then
    expect 0 "an empty PATH entry last" -- env -C "$T/bin" PATH="/usr/bin:/bin:" "$GS" mps stop
    out_is "stopped" "$U0: MPS control daemon stopped"
else
    "$GS" mps stop >/dev/null 2>&1
fi

# run --gpu-share whose program cannot connect stops the daemon it started again, and waits for
# it to exit when quit (which returns once the daemon is gone) does not return in time: here the
# daemon exits 2.1 s after quit, always past the 2 s quit is given (counted from before the
# client starts), well within the 2 s more allowed for the exit (a loaded machine's margin).
n=$(lines_of "$P0/fake.quits")
echo 2.1 >"$P0/fake.quit-slow"
GPUSLICE_MPS_TIMEOUT=2 GPUSLICE_REAL_LIBCUDA="$T/nonexistent.so" expect 1 "run --gpu-share: no CUDA, a daemon slow to quit" -- \
    "$GS" run --gpu-share 25 -d "$U0" -- touch "$T/started"
if [ "$(tail -n 1 "$T/err")" = "gpuslice: stopped the MPS control daemon for $U0 again" ] &&
    [ "$(lines_of "$P0/fake.quits")" = $((n + 1)) ] && [ ! -e "$P0/control" ] && [ ! -e "$T/started" ]; then
    ok "one quit; stopped once it exited"; else bad "the slow quit"; cat "$T/err"; fi
rm -f "$P0/fake.quit-slow"

# Without an absolute XDG_RUNTIME_DIR: /tmp/gpuslice-mps-EUID (in a mount namespace whose /tmp is
# a directory of the case's, holding copies of gpuslice and the simulated driver, which may be
# under /tmp themselves: root only).
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    mkdir -p "$T/tmpns/bin" "$T/tmpns/lib"
    chmod 1777 "$T/tmpns"
    cp "$SRC/tests/integration/fake-mps-control" "$T/tmpns/bin/nvidia-cuda-mps-control"
    cp "$GS" "$T/tmpns/bin/gpuslice"
    cp -P "$B"/lib/sim/libcuda.so* "$B"/lib/sim/libnvidia-ml.so* "$T/tmpns/lib/"
    in_tmp() { # in_tmp XDG gpuslice ARGS...: with /tmp being $T/tmpns, XDG_RUNTIME_DIR=XDG (- unset)
        unshare -m sh -c 'mount --bind "$1" /tmp || exit 99; x=$2; shift 3
            if [ "$x" = - ]; then unset XDG_RUNTIME_DIR; else export XDG_RUNTIME_DIR="$x"; fi
            PATH=/tmp/bin:/usr/bin:/bin LD_LIBRARY_PATH=/tmp/lib GPUSLICE_SIM_STATE=/tmp/sim.state exec /tmp/bin/gpuslice "$@"' sh "$T/tmpns" "$@"
    }
    TP="/tmp/gpuslice-mps-$(id -u)/$U0/pipe"
    expect 0 "mps start without XDG_RUNTIME_DIR" -- in_tmp - "$GS" mps start
    out_is "its pipe directory in /tmp, named by the effective UID" "$U0: MPS control daemon started" "  clients use it with CUDA_MPS_PIPE_DIRECTORY=$TP"
    m=$(stat -c %a "$T/tmpns/gpuslice-mps-$(id -u)" 2>/dev/null)
    if [ "$m" = 700 ]; then ok "/tmp/gpuslice-mps-$(id -u) is 0700"; else bad "/tmp/gpuslice-mps-$(id -u): ${m:-missing}"; fi
    expect 0 "mps status with a relative XDG_RUNTIME_DIR" -- in_tmp relative/dir "$GS" mps status
    out_is "the same directory" "$U0  running" "  pipe dir  $TP" "  no MPS server yet (one starts with the first client)"
    expect 0 "mps stop with an empty XDG_RUNTIME_DIR" -- in_tmp "" "$GS" mps stop
    out_is "the same daemon" "$U0: MPS control daemon stopped"
else
    echo "skip: no mount namespace here for a /tmp of the case's own"
fi
