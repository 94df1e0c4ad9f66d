#!/usr/bin/env bash
# s3server.sh: a throw-away S3 server for the tests of stores kept in an
# object store (s3://bucket/prefix). It is a real one, Ceph's radosgw, so
# that requests are signed and checked (SigV4) and ranges, listings and
# errors are those of S3, not of a mock: a single-node cluster of one
# monitor and one OSD that keeps its objects in RAM (memstore), with no
# manager, every daemon bound to 127.0.0.1 only.
#
#   scripts/s3server.sh start   build and start a fresh server in the state
#                               folder, or reuse the one that answers there;
#                               print its environment (below)
#   scripts/s3server.sh stop    stop the daemons named by the folder's PID
#                               files, and nothing else; remove the folder
#   scripts/s3server.sh env     print the environment of the running server
#   scripts/s3server.sh status  exit 0 when the server answers a signed request
#
# The environment, printed by start and env and kept in $LOADERX_S3_DIR/env
# for `.`: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
# AWS_REGION (us-east-1), AWS_DEFAULT_REGION (for the boto3 of Debian 12,
# which reads no AWS_REGION) and S3CMD_CONFIG (a path-style s3cmd
# configuration). Progress and errors go to stderr.
#
# Knobs (environment):
#   LOADERX_S3_DIR          state folder (default /tmp/loaderx-s3): created,
#                           or an empty one, or one this script made; wiped
#                           by a fresh start and by stop
#   LOADERX_S3_PORT         radosgw's HTTP port
#   LOADERX_S3_MON_PORT     the monitor's msgr2 port; msgr1 takes the next
#   LOADERX_S3_MSGR_PORT    first of the 24 ports the OSD's messengers take.
#                           Unset ports are picked at random among free ones
#                           below the ephemeral range, so that two servers
#                           (a developer's and make check's) do not collide,
#                           and picked again if taken before the daemons
#                           bind; a port given and busy is refused.
#   LOADERX_S3_STORE_BYTES  memstore capacity (default 4 GiB); the OSD holds
#                           about 2.5 times the bytes stored in RAM. Past
#                           it, PUTs hang (Ceph makes clients of a full
#                           cluster wait) rather than fail: keep test data
#                           well below.
#   LOADERX_S3_ACCESS_KEY, LOADERX_S3_SECRET_KEY  the S3 user's keys
#                           (default: random for each start)
#   LOADERX_S3_TIMEOUT      seconds to wait for each stage (default 120)
#
# Needs the Debian packages ceph-mon, ceph-osd, radosgw, ceph-common and
# uuid-runtime (scripts/deps.sh), and curl. The tests run it as root only.
set -euo pipefail

DIR=${LOADERX_S3_DIR:-/tmp/loaderx-s3}
STORE_BYTES=${LOADERX_S3_STORE_BYTES:-4294967296}
TIMEOUT=${LOADERX_S3_TIMEOUT:-120}
REGION=us-east-1
MSGR_PORTS=24
CONF=$DIR/ceph.conf
MARK=$DIR/.loaderx-s3
# The daemons in the order they must stop: radosgw hangs on SIGTERM once
# the monitor is gone, and the OSD reports its shutdown to the monitor.
DAEMONS="client.rgw osd.0 mon.a"

T0=$(date +%s%N)
log() {
    local ms=$((($(date +%s%N) - T0) / 1000000))
    printf 's3server: %d.%01ds %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*" >&2
}

usage() {
    echo "usage: scripts/s3server.sh start|stop|env|status (knobs in the header)" >&2
    exit 2
}

# The folder is wiped, so it must be absolute, at least two levels deep,
# and either new, empty, or marked as made by this script.
check_dir() {
    case $DIR in
    /*/*) ;;
    *) echo "s3server: LOADERX_S3_DIR='$DIR' must be an absolute path two levels deep" >&2; exit 2 ;;
    esac
    # Unix socket paths (the admin sockets in run/) must fit in 107 bytes.
    if [ ${#DIR} -gt 64 ]; then
        echo "s3server: LOADERX_S3_DIR='$DIR' is longer than 64 bytes (admin socket paths)" >&2
        exit 2
    fi
    if [ -d "$DIR" ] && [ ! -e "$MARK" ] && [ -n "$(ls -A "$DIR")" ]; then
        echo "s3server: $DIR is not empty and was not made by s3server.sh; refusing to wipe it" >&2
        exit 2
    fi
}

# pid_of NAME: the PID in NAME's PID file, if that process is alive, not a
# zombie, and is a Ceph daemon started with this folder's ceph.conf.
pid_of() {
    local pid state argv
    pid=$(cat "$DIR/run/$1.pid" 2>/dev/null) || return 1
    case $pid in '' | *[!0-9]*) return 1 ;; esac
    state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ] || return 1
    argv=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    case ${argv%% *} in */ceph-mon | ceph-mon | */ceph-osd | ceph-osd | */radosgw | radosgw) ;; *) return 1 ;; esac
    case " $argv " in *" $CONF "*) ;; *) return 1 ;; esac
    echo "$pid"
}

# gone PID: the process has exited (a zombie waiting for its reaper counts:
# it holds no port and no file).
gone() {
    local state
    state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 0
    [ -z "$state" ] || [ "$state" = Z ]
}

stop_daemons() {
    local name pid i
    for name in $DAEMONS; do
        pid=$(pid_of "$name") || { rm -f "$DIR/run/$name.pid"; continue; }
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 150; i++)); do
            gone "$pid" && break
            sleep 0.1
        done
        if ! gone "$pid"; then
            log "$name (pid $pid) still runs 15 s after SIGTERM: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                gone "$pid" && break
                sleep 0.1
            done
        fi
        log "stopped $name (pid $pid)"
        rm -f "$DIR/run/$name.pid"
    done
}

cmd_stop() {
    check_dir
    [ -d "$DIR" ] || return 0
    stop_daemons
    rm -rf "$DIR"
    log "removed $DIR"
}

# s3_ok: a signed ListBuckets answers 200, with the keys of the env file.
s3_ok() {
    [ -f "$DIR/env" ] || return 1
    local code
    code=$(. "$DIR/env" && curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
        --aws-sigv4 "aws:amz:$REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$AWS_ENDPOINT_URL/") || return 1
    [ "$code" = 200 ]
}

cmd_env() {
    check_dir
    if ! s3_ok; then
        echo "s3server: no server answers in $DIR (scripts/s3server.sh start)" >&2
        exit 1
    fi
    cat "$DIR/env"
}

# The local ports of every TCP socket, in any state, one a line.
used_ports() {
    local _sl addr _rest
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        while read -r _sl addr _rest; do
            case $addr in *:[0-9A-F][0-9A-F][0-9A-F][0-9A-F]) echo $((16#${addr##*:})) ;; esac
        done
}

# ports_free FIRST COUNT: none of the COUNT ports from FIRST is in use.
ports_free() {
    local p
    for ((p = $1; p < $1 + $2; p++)); do
        case $USED in *" $p "*) return 1 ;; esac
    done
}

# Sets RGW_PORT, MON_PORT and MSGR_PORT: those given, if free, and a free
# block of 27 consecutive ports, below the kernel's ephemeral range (where
# outgoing connections would take them), for the rest.
pick_ports() {
    local lo span base try
    USED=" $(used_ports | sort -un | tr '\n' ' ') "
    RGW_PORT=${LOADERX_S3_PORT:-}
    MON_PORT=${LOADERX_S3_MON_PORT:-}
    MSGR_PORT=${LOADERX_S3_MSGR_PORT:-}
    if [ -n "$RGW_PORT" ] && ! ports_free "$RGW_PORT" 1; then
        echo "s3server: LOADERX_S3_PORT $RGW_PORT is in use" >&2
        exit 1
    fi
    if [ -n "$MON_PORT" ] && ! ports_free "$MON_PORT" 2; then
        echo "s3server: LOADERX_S3_MON_PORT $MON_PORT or the next is in use" >&2
        exit 1
    fi
    if [ -n "$MSGR_PORT" ] && ! ports_free "$MSGR_PORT" $MSGR_PORTS; then
        echo "s3server: one of the $MSGR_PORTS ports from LOADERX_S3_MSGR_PORT $MSGR_PORT is in use" >&2
        exit 1
    fi
    [ -z "$RGW_PORT" ] || USED="$USED$RGW_PORT "
    [ -z "$MON_PORT" ] || USED="$USED$MON_PORT $((MON_PORT + 1)) "
    [ -z "$MSGR_PORT" ] || USED="$USED$(seq -s ' ' "$MSGR_PORT" $((MSGR_PORT + MSGR_PORTS - 1))) "
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
    span=$((lo - 10000 - 3 - MSGR_PORTS))
    [ "$span" -gt 1000 ] || span=1000
    for ((try = 0; try < 200; try++)); do
        base=$((10000 + (RANDOM * 32768 + RANDOM) % span))
        ports_free "$base" $((3 + MSGR_PORTS)) || continue
        RGW_PORT=${RGW_PORT:-$base}
        MON_PORT=${MON_PORT:-$((base + 1))}
        MSGR_PORT=${MSGR_PORT:-$((base + 3))}
        return 0
    done
    echo "s3server: found no free block of ports in 200 tries" >&2
    exit 1
}

die() {
    log "ERROR: $*"
    exit 1
}

# A start that fails, at any step: show the ends of the daemons' logs, stop
# what started, and keep the folder for a look.
start_failed() {
    local f
    for f in "$DIR"/log/*; do
        [ -s "$f" ] || continue
        echo "--- last lines of $f" >&2
        tail -n 20 "$f" >&2
    done
    stop_daemons
    log "start failed; the logs stay in $DIR (scripts/s3server.sh stop removes it)"
}

# The EXIT trap of a fresh start. A port picked at random that another
# process took between the check and the bind (two starts at once, say)
# ends the attempt with 75, and cmd_start tries other ports.
on_start_exit() {
    local status=$1
    if [ "$status" = 0 ]; then
        exit 0
    fi
    await_launching
    if [ "$status" -ge 128 ]; then
        stop_daemons
    elif [ -z "${LOADERX_S3_PORT:-}${LOADERX_S3_MON_PORT:-}" ] && [ "$LAST_TRY" = 0 ] &&
        grep -qs "Address already in use" "$DIR/log/client.rgw.log" "$DIR/log/mon.a.log"; then
        stop_daemons
        status=75
    else
        start_failed
    fi
    exit "$status"
}

# wait_for WHAT COMMAND...: run COMMAND every 0.2 s until it succeeds;
# fail at the timeout or as soon as a daemon that was started has died.
wait_for() {
    local what=$1 end name
    shift
    end=$(($(date +%s) + TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || die "no $what after $TIMEOUT s"
        for name in $STARTED; do
            pid_of "$name" >/dev/null || die "$name exited while waiting for $what"
        done
        sleep 0.2
    done
}

# start_daemon NAME COMMAND...: run a daemon (it forks into the background
# and writes its PID file), and count it as started once the PID file names it.
start_daemon() {
    local name=$1 end
    shift
    LAUNCHING=$name
    "$@" 2>>"$DIR/log/$name.stderr" || die "$name did not start"
    end=$(($(date +%s) + TIMEOUT))
    until pid_of "$name" >/dev/null; do
        [ "$(date +%s)" -lt "$end" ] || die "$name wrote no PID file"
        sleep 0.1
    done
    STARTED="$STARTED $name"
    LAUNCHING=""
}

# A daemon that forks at once (radosgw) leaves its launcher before writing
# its PID file: a start stopped in between gives it 3 s to write it, so
# that it is stopped too.
await_launching() {
    local i
    [ -n "$LAUNCHING" ] || return 0
    for ((i = 0; i < 30; i++)); do
        pid_of "$LAUNCHING" >/dev/null && return 0
        sleep 0.1
    done
}

write_conf() {
    cat >"$CONF" <<EOF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MON_PORT,v1:127.0.0.1:$((MON_PORT + 1))]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
public network = 127.0.0.1/32
cluster network = 127.0.0.1/32
ms bind ipv4 = true
ms bind ipv6 = false
ms bind port min = $MSGR_PORT
ms bind port max = $((MSGR_PORT + MSGR_PORTS - 1))
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $DIR/keys/admin.keyring
run dir = $DIR/run
crash dir = $DIR/crash
log file = $DIR/log/\$name.log
mon cluster log file = $DIR/log/cluster.log
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.pid
# One OSD: every pool keeps one copy, and the seven pools radosgw makes
# would pass the monitor's limit of PGs per OSD at the default pg num.
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
# /tmp may be nearly full on a CI machine; the monitor would stop at 5%.
mon data avail warn = 2
mon data avail crit = 1

[mon]
mon data = $DIR/mon.\$id
# radosgw's first start changes the OSD map a dozen times (pools made and
# tagged); committing changes every 0.1 s instead of every second takes
# about 10 s off the start.
paxos propose interval = 0.1

[osd]
osd data = $DIR/osd.\$id
keyring = $DIR/keys/osd.keyring
osd objectstore = memstore
memstore device bytes = $STORE_BYTES
osd crush update on start = true
osd crush initial weight = 1

[client.rgw]
keyring = $DIR/keys/rgw.keyring
rgw data = $DIR/rgw
# Without tcp_nodelay, small responses on a kept-alive connection wait 40 ms
# for Nagle's algorithm.
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw dns name = localhost
EOF
}

write_env() {
    cat >"$DIR/s3cfg" <<EOF
[default]
access_key = $ACCESS_KEY
secret_key = $SECRET_KEY
host_base = 127.0.0.1:$RGW_PORT
host_bucket = 127.0.0.1:$RGW_PORT
bucket_location = $REGION
use_https = False
signature_v2 = False
EOF
    cat >"$DIR/env.tmp" <<EOF
# The S3 server of scripts/s3server.sh in $DIR
export AWS_ENDPOINT_URL=http://127.0.0.1:$RGW_PORT
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=$REGION
export AWS_DEFAULT_REGION=$REGION
export S3CMD_CONFIG=$DIR/s3cfg
EOF
    mv "$DIR/env.tmp" "$DIR/env"
}

random_hex() {
    od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'
}

cmd_start() {
    local tool
    for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool uuidgen curl; do
        command -v "$tool" >/dev/null ||
            { echo "s3server: $tool is missing (bash scripts/deps.sh)" >&2; exit 1; }
    done
    check_dir
    if s3_ok; then
        log "a server already answers in $DIR"
        cat "$DIR/env"
        return 0
    fi
    [ ! -d "$DIR" ] || stop_daemons
    local try rc child
    for try in 1 2 3; do
        LAST_TRY=$((try == 3))
        # In a subshell, whose EXIT trap stops what it started, and in the
        # background, so that a signal to this script reaches it at once.
        (fresh_start) &
        child=$!
        trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 143' INT TERM HUP
        rc=0
        wait "$child" || rc=$?
        trap - INT TERM HUP
        [ "$rc" = 75 ] || break
        log "a port was taken while the server started: again on other ports"
    done
    [ "$rc" = 0 ] || exit "$rc"
    cat "$DIR/env"
}

fresh_start() {
    local osd_uuid admin
    pick_ports
    rm -rf "$DIR"
    mkdir -p "$DIR"
    : >"$MARK"
    mkdir "$DIR"/{run,log,crash,keys,mon.a,osd.0,rgw}
    STARTED=""
    LAUNCHING=""
    trap 'on_start_exit $?' EXIT
    trap 'log "interrupted"; exit 143' INT TERM HUP
    FSID=$(uuidgen)
    ACCESS_KEY=${LOADERX_S3_ACCESS_KEY:-$(random_hex 10 | tr a-f A-F)}
    SECRET_KEY=${LOADERX_S3_SECRET_KEY:-$(random_hex 20)}
    write_conf
    export CEPH_CONF=$CONF
    admin=(ceph --conf "$CONF" --connect-timeout 10)
    log "ports: S3 $RGW_PORT, monitor $MON_PORT-$((MON_PORT + 1)), OSD $MSGR_PORT-$((MSGR_PORT + MSGR_PORTS - 1))"

    # Every key is made here and given to the monitor's first keyring, so
    # the OSD's key is known before its mkfs (which fetches its
    # configuration from the monitor and fails without it) and no
    # `ceph auth` round trip is needed.
    local k=$DIR/keys key
    {
        ceph-authtool --create-keyring "$k/mon.keyring" --gen-key -n mon. --cap mon 'allow *'
        ceph-authtool --create-keyring "$k/admin.keyring" --gen-key -n client.admin \
            --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *'
        ceph-authtool --create-keyring "$k/osd.keyring" --gen-key -n osd.0 \
            --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd'
        ceph-authtool --create-keyring "$k/rgw.keyring" --gen-key -n client.rgw \
            --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw'
        for key in admin osd rgw; do
            ceph-authtool "$k/mon.keyring" --import-keyring "$k/$key.keyring"
        done
    } >/dev/null
    monmaptool --create --fsid "$FSID" \
        --addv a "[v2:127.0.0.1:$MON_PORT,v1:127.0.0.1:$((MON_PORT + 1))]" "$DIR/monmap" >/dev/null
    ceph-mon --conf "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$k/mon.keyring" \
        2>>"$DIR/log/mon.a.stderr" || die "the monitor's mkfs failed"
    start_daemon mon.a ceph-mon --conf "$CONF" -i a
    wait_for "monitor" "${admin[@]}" mon stat
    log "monitor up"

    osd_uuid=$(uuidgen)
    [ "$("${admin[@]}" osd new "$osd_uuid" 2>>"$DIR/log/admin.stderr")" = 0 ] || die "ceph osd new did not give osd.0"
    ceph-osd --conf "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$DIR/log/osd.0.mkfs" 2>&1 ||
        die "the OSD's mkfs failed"
    start_daemon osd.0 ceph-osd --conf "$CONF" -i 0
    # radosgw waits for the OSD by itself: starting it now overlaps the
    # two starts.
    start_daemon client.rgw radosgw --conf "$CONF" -n client.rgw
    wait_for "answer on port $RGW_PORT" curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$RGW_PORT/"
    log "radosgw answers; making the S3 user"
    radosgw-admin --conf "$CONF" user create --uid=loaderx --display-name=loaderx \
        --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >/dev/null 2>>"$DIR/log/admin.stderr" ||
        die "radosgw-admin user create failed"
    write_env
    # radosgw caches the user table for a moment: wait for a signed request.
    wait_for "signed request to succeed" s3_ok
    trap - EXIT INT TERM HUP
    log "S3 ready at http://127.0.0.1:$RGW_PORT ($DIR/env)"
}

[ $# -eq 1 ] || usage
case $1 in
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
status) check_dir && s3_ok ;;
*) usage ;;
esac
