# shellcheck shell=bash
# Sessions of the bench orchestrators (scripts/bench.sh, bench-scale.sh);
# sourced, functions only.
#
# A session is one arm's `xensim run ... -- GUEST SDIR` kept alive for a
# repeat: GUEST (bench/guest.sh, bench/scale-guest.sh) makes the FIFO
# SDIR/cmd, writes SDIR/ready, then serves one command line at a time from
# the FIFO, writing SDIR/ID.done (the exit status) when a run is over, and
# leaves on "quit"; xensim tears the host down when GUEST exits or on
# SIGTERM.
#
# The caller provides, before calling any of these:
#   arm_args ARM          xensim run's arguments of ARM, one per line
#   session_exec ARM SDIR N ARGS...
#                         exec the session: `xensim run ARGS --log-dir
#                         SDIR/xensim-logs.N -- GUEST SDIR`, with whatever
#                         the arm needs around it (environment, taskset).
#                         Runs in a background subshell, stdout and stderr
#                         to SDIR/session.N.log, stdin /dev/null
#   session_ready_s       seconds a session may take to write SDIR/ready
#   warn MSG, die MSG     a warning line / a fatal one (exits 1), each with
#                         the script's prefix, on stderr
#   out                   the run's directory (out/raw/...: the SDIRs;
#                         out/crashes.txt)
#   declare -A sess_pid sess_starts; sessions=()   (at the top level)
# These set: sess_pid[ARM] (its session's `xensim run` pid), sess_starts[SDIR]
# (the starts of SDIR so far: N, naming the log files of each start),
# sessions (the SDIRs of this repeat), nap_fd (nap's pipe).

# send SDIR LINE: one line to a session's FIFO; fails (status 124 after
# 10 s, does not block) when the session is gone
send() {
    # shellcheck disable=SC2016  # $1 and $2: the inner bash's
    timeout 10 bash -c 'echo "$1" > "$2"' _ "$2" "$1/cmd"
}

# start_session ARM SDIR: ARM's session in SDIR; returns once it is ready
# (dies if it exits first or is not ready within session_ready_s). A
# restarted session (after a crash) keeps the directory; each start N
# logs to its own files (session.N.log, xensim-logs.N, pid.N).
start_session() {
    local a=$1 sdir=$2 args n
    mkdir -p "$sdir"
    n=$(( ${sess_starts[$sdir]:-0} + 1 ))
    # shellcheck disable=SC2004  # sess_starts, sess_pid: the caller's declare -A
    sess_starts[$sdir]=$n
    rm -f "$sdir/ready"
    mapfile -t args < <(arm_args "$a")
    # Not our child: the session is started from a subshell that exits at
    # once. With the sessions as children, bash once blocked for good in
    # wait4(-1) after a command substitution whose child it had already
    # reaped (two full grids and a quick one stalled so); liveness is
    # checked with kill -0 instead of wait.
    (
        [ -z "${nap_fd:-}" ] || exec {nap_fd}>&-     # nap's, not theirs
        session_exec "$a" "$sdir" "$n" "${args[@]}" \
            > "$sdir/session.$n.log" 2>&1 < /dev/null &
        echo $! > "$sdir/pid.$n"
    )
    # shellcheck disable=SC2004
    sess_pid[$a]=$(cat "$sdir/pid.$n")
    for _ in $(seq $((${session_ready_s:?} * 10))); do
        [ -f "$sdir/ready" ] && return 0
        kill -0 "${sess_pid[$a]}" 2>/dev/null || break
        sleep 0.1
    done
    cat "$sdir/session.$n.log" >&2
    die "session of arm $a did not start (see $sdir)"
}

# start_repeat RDIR ARM...: every ARM's session, in RDIR/ARM, for one repeat
start_repeat() {
    local rdir=$1 a
    shift
    sessions=()
    for a in "$@"; do
        start_session "$a" "$rdir/$a"
        sessions+=("$rdir/$a")
    done
}

# nap SECONDS: wait without starting a process. run_in_session's loop runs
# while the guest measures: an external `sleep` there is a fork and an
# exec, 20 times a second, on the two CPUs the run is using, and it took
# 11-18% off a null-co 64k QD16 cell, more on the fork than on upstream
# (docs/benchmarks.rst, "The bench's own wake-ups"). A builtin read that
# times out does the same with one wake-up. It reads a pipe of its own,
# opened read-write: the open does not block, nobody writes, and with a
# writer open (itself) the read never sees EOF. Sets nap_fd (closed in
# the sessions, start_session). A read that fails otherwise than by its
# timeout (status > 128) dies rather than turn the wait into a spin.
nap() {
    [ -n "${nap_fd:-}" ] || exec {nap_fd}<> <(:)
    read -r -t "$1" -u "$nap_fd" _ || (($? > 128)) ||
        die "nap: cannot wait on fd $nap_fd"
}

# run_in_session ARM SDIR ID TRIES LINE: sends LINE (the GUEST's command of
# one run, ID) to ARM's session and waits for SDIR/ID.done, up to 2
# minutes. Returns 0 when the run's status is 0; dies when the session is
# alive but the run failed or gave no answer. If the session died (QEMU
# crashed: xensim tears the host down when the guest script fails), the
# crash is recorded in out/crashes.txt, the session restarted and the run
# done again, TRIES times in all; then it dies.
run_in_session() {
    local a=$1 sdir=$2 id=$3 tries=$4 line=$5 try rc
    for ((try = 1; try <= tries; try++)); do
        rm -f "$sdir/$id.done"
        if send "$sdir" "$line"; then
            for _ in $(seq 2400); do            # 2 minutes
                [ -f "$sdir/$id.done" ] && break
                kill -0 "${sess_pid[$a]}" 2>/dev/null || break
                nap 0.05
            done
        fi
        rc=$(cat "$sdir/$id.done" 2>/dev/null || echo none)
        [ "$rc" = 0 ] && return 0
        if kill -0 "${sess_pid[$a]}" 2>/dev/null; then
            [ "$rc" = none ] && die "no answer from $sdir for $id"
            die "fio failed in $sdir ($id): $(tail -n 5 "$sdir/$id.fio.log")"
        fi
        # no child of ours (start_session): returns at once
        wait "${sess_pid[$a]}" 2>/dev/null || true
        printf '%s %s %s try %d: session died (see %s/session.%s.log)\n' \
            "${sdir#"${out:?}"/raw/}" "$a" "$id" "$try" "$sdir" \
            "${sess_starts[$sdir]}" >> "${out:?}/crashes.txt"
        warn "arm $a died in $id (QEMU crash?), restarting its session;" \
            "see ${out:?}/crashes.txt"
        [ "$try" = "$tries" ] && break
        start_session "$a" "$sdir"
    done
    die "arm $a keeps dying in $id"
}

# stop_sessions ARM...: quit this repeat's sessions and reap each ARM's.
# A session still there after 60 s is sent SIGTERM (`xensim run` tears its
# host down on it): a bare `wait` here once hung a full grid for good.
# Never fails; empties sessions and sess_pid.
stop_sessions() {
    local s a
    for s in "${sessions[@]}"; do send "$s" quit || true; done
    for a in "$@"; do
        for _ in $(seq 600); do
            kill -0 "${sess_pid[$a]}" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "${sess_pid[$a]}" 2>/dev/null; then
            warn "session of arm $a did not quit; stopping it"
            kill "${sess_pid[$a]}" 2>/dev/null || true
        fi
        # no child of ours (start_session): returns at once
        wait "${sess_pid[$a]}" 2>/dev/null || true
    done
    sessions=()
    sess_pid=()
}

# kill_sessions: for the caller's EXIT trap; asks every session still there
# to quit and sends its `xensim run` SIGTERM (it tears its host down on
# it). Never fails, never waits.
kill_sessions() {
    local s
    for s in "${sessions[@]}"; do
        if [ -p "$s/cmd" ]; then send "$s" quit 2>/dev/null || true; fi
    done
    for s in "${sess_pid[@]}"; do kill "$s" 2>/dev/null || true; done
}
