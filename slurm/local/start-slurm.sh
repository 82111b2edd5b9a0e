#!/usr/bin/env bash
# start-slurm.sh - single-node SLURM "cluster" on this machine for CI (no systemd, no cgroups).
#   munged + [mariadbd + slurmdbd] + slurmctld + slurmd, all on localhost.
# Tested: Debian 12 (bookworm) x86_64, slurm-wlm 22.05.8, munge 0.5.15, MariaDB 10.11, submitit 1.5.4.
#
#   sudo ./start-slurm.sh          install (if needed), configure, start, wait until the node is idle
#   sudo ./start-slurm.sh stop     stop ONLY the daemons this script started (by PID, reverse order)
#
# Env knobs:
#   SLURM_ACCOUNTING=1   (default) also run MariaDB + slurmdbd so `sacct` works. submitit polls job
#                        state with sacct; without it, happy-path results still arrive (result pickle)
#                        but cancelled/killed jobs make job.result() hang forever.
#   SLURM_ACCOUNTING=0   lighter: no DB, `sacct` prints "Slurm accounting storage is disabled".
#   SLURM_CPUS=N         CPUs advertised for each node (default: real count). If N > real CPUs,
#                        SlurmdParameters=config_overrides is set so slurmd accepts it (oversubscribe).
#   SLURM_NODES=2        two nodes on this machine: two slurmd (`slurmd -N <name>`, one port each), the
#                        host's name and `localhost` (both resolve to 127.0.0.1 without touching
#                        /etc/hosts, which multi-node rendezvous needs); memory split between them.
#                        Default 1.
#   SLURM_CI_STATE=/run/slurm-ci   where the PIDs of the started daemons are recorded.
set -euo pipefail

ACCT=${SLURM_ACCOUNTING:-1}
STATE=${SLURM_CI_STATE:-/run/slurm-ci}
ETC=/etc/slurm
LOG=/var/log/slurm
DB_PASS=${SLURM_DB_PASS:-slurmci}

log() { printf '[start-slurm %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { log "ERROR: $*"; sinfo -N -o '%N %T %E' 2>/dev/null || true; squeue 2>/dev/null || true; for f in $LOG/*.log /var/log/mariadb-ci.log; do [ -f "$f" ] && { echo "== $f"; tail -n 30 "$f"; }; done; exit 1; }
# wait_for <seconds> <description> <command...>
wait_for() { local t=$1 what=$2; shift 2; local end=$((SECONDS + t));
  until "$@" >/dev/null 2>&1; do [ $SECONDS -ge $end ] && die "timeout waiting for $what"; sleep 0.2; done; }
# start_daemon <name> <pidfile> <command...> : run (daemonizing) command, record its PID in $STATE
# the daemon truncates then writes its pid file: wait for a pid that is alive, not just a non-empty file (callers remove
# a stale pid file before starting the daemon, so an old pid is never recorded)
live_pid() { local pid; pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }
# stop_pid <pidfile>: SIGTERM the daemon it names, SIGKILL after 10 s
stop_pid() { local pid; pid=$(cat "$1" 2>/dev/null) || return 0; kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done; kill -KILL "$pid" 2>/dev/null || true; }
record_pid() { local name=$1 pidfile=$2; wait_for 20 "$pidfile" live_pid "$pidfile"; cp "$pidfile" "$STATE/$name.pid"; log "$name pid $(cat "$STATE/$name.pid")"; }

# ---------------------------------------------------------------------------------- stop
if [ "${1:-}" = "stop" ]; then
  for name in $(cd "$STATE" 2>/dev/null && ls slurmd*.pid 2>/dev/null | sed 's/\.pid$//') slurmctld slurmdbd mariadbd munged; do
    f=$STATE/$name.pid; [ -s "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"; for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && { log "$name ($pid) did not stop, SIGKILL"; kill -KILL "$pid"; }
      log "stopped $name ($pid)"
    fi
    rm -f "$f"
  done
  exit 0
fi

[ "$(id -u)" = 0 ] || { echo "run as root (sudo)"; exit 1; }
mkdir -p "$STATE"
T0=$SECONDS

# ---------------------------------------------------------------------------------- 1. install
PKGS="slurmctld slurmd slurm-client munge"
[ "$ACCT" = 1 ] && PKGS="$PKGS slurmdbd mariadb-server"
missing=""; for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  log "installing:$missing"
  # Keep apt postinst from starting services itself (no systemd here; on a systemd host it would
  # start munge/mariadb/slurm with package defaults and fight with the daemons started below).
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; added_policy=1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
  [ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  log "install done ($((SECONDS - T0))s)"
fi
log "$(slurmd -V), munge $(munged --version 2>&1 | awk '{print $1}' | head -1)"

# ---------------------------------------------------------------------------------- 2. configure
HOST=$(hostname -s)
HW_CPUS=$(nproc)
CPUS=${SLURM_CPUS:-$HW_CPUS}
NODES=${SLURM_NODES:-1}
MEM_MB=$(( ($(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo) - 1024) / NODES ))  # a bit below real
if [ "$NODES" = 1 ]; then
  NODE_NAMES="$HOST"
  PID_FILE=/run/slurmd.pid; SPOOL=/var/spool/slurmd; DLOG=${LOG}/slurmd.log
  NODE_LINES="NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN"
elif [ "$NODES" = 2 ]; then
  [ "$HOST" != localhost ] || die "SLURM_NODES=2 names its second node 'localhost': this host is called that already"
  NODE_NAMES="$HOST localhost"
  # several slurmd on one host: per-node pid file, spool and log (%n = node name), a port each
  PID_FILE=/run/slurmd-%n.pid; SPOOL=/var/spool/slurmd-%n; DLOG=${LOG}/slurmd-%n.log
  NODE_LINES="NodeName=${HOST} NodeAddr=127.0.0.1 Port=6821 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN
NodeName=localhost NodeHostname=${HOST} NodeAddr=127.0.0.1 Port=6822 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN"
else
  die "SLURM_NODES must be 1 or 2, got $NODES"
fi
OVERRIDE=""; [ "$CPUS" -gt "$HW_CPUS" ] && OVERRIDE="SlurmdParameters=config_overrides"
if [ "$ACCT" = 1 ]; then
  ACCT_CONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819"
else
  ACCT_CONF="AccountingStorageType=accounting_storage/none"
fi

mkdir -p $ETC $LOG /var/spool/slurmctld /run/munge
for n in $NODE_NAMES; do mkdir -p "${SPOOL//%n/$n}"; done
# CPU binding as production clusters run it (tasks pinned to their CPUs with sched_setaffinity; no cgroups needed),
# so a task that srun gives too few CPUs shows it here; SLURM_TASK_AFFINITY=0 turns it off
TASK_PLUGIN=task/affinity; [ "${SLURM_TASK_AFFINITY:-1}" = 0 ] && TASK_PLUGIN=task/none
OLD_CONF=$(md5sum < $ETC/slurm.conf 2>/dev/null || true)
cat > $ETC/slurm.conf <<EOF
# generated by start-slurm.sh
ClusterName=localci
SlurmctldHost=${HOST}(127.0.0.1)
AuthType=auth/munge
CryptoType=crypto/munge
# requeued jobs are held for cred_expire+1 s before they may restart (default 120 s!)
AuthInfo=cred_expire=10
MpiDefault=none
MailProg=/bin/true
# container-friendly: no cgroups anywhere
ProctrackType=proctrack/linuxproc
TaskPlugin=${TASK_PLUGIN}
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
${ACCT_CONF}
SlurmUser=root
SlurmdUser=root
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=${PID_FILE}
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=${SPOOL}
SlurmctldLogFile=${LOG}/slurmctld.log
SlurmdLogFile=${DLOG}
SlurmctldDebug=info
SlurmdDebug=info
ReturnToService=2
# submitit jobs ignore SIGTERM, so a cancelled job lingers KillWait s (default 30) before SIGKILL,
# and slurmctld schedules nothing new while a job is COMPLETING -> keep it short
KillWait=5
# fast turnaround: schedule batch jobs immediately, rescan pending jobs every 2 s
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without this a job with no --mem gets the WHOLE node's memory -> jobs run one at a time
DefMemPerCPU=1024
${OVERRIDE}
${NODE_LINES}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

# Slurm 22.05 (Debian 12) needs no cgroup.conf with the plugins above: verified here.
# Slurm >= 23.02 sets up a cgroup plugin in slurmd anyway (fails in many containers); 24.05+
# accepts CgroupPlugin=disabled. NOT exercised on this machine (only matters on newer distros).
SLURM_VER=$(slurmd -V | awk '{print $2}'); V_MAJ=${SLURM_VER%%.*}; V_MIN=$(echo "$SLURM_VER" | cut -d. -f2)
if [ "$V_MAJ" -gt 24 ] || { [ "$V_MAJ" -eq 24 ] && [ "$((10#$V_MIN))" -ge 5 ]; }; then
  echo "CgroupPlugin=disabled" > $ETC/cgroup.conf
fi

# ---------------------------------------------------------------------------------- 3. munge
if [ ! -s /etc/munge/munge.key ]; then
  log "creating munge key"; mkdir -p /etc/munge
  mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key; chmod 0755 /run/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "munged already running, reusing it"
else
  rm -f /run/munge/munged.pid; runuser -u munge -- /usr/sbin/munged
  wait_for 20 munged sh -c 'munge -n | unmunge'
  record_pid munged /run/munge/munged.pid
fi

# ---------------------------------------------------------------------------------- 4. accounting (optional)
if [ "$ACCT" = 1 ]; then
  mkdir -p /run/mysqld && chown mysql:root /run/mysqld
  if [ ! -d /var/lib/mysql/mysql ]; then
    log "initialising MariaDB datadir"; mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
  fi
  if mariadb-admin ping >/dev/null 2>&1; then
    log "MariaDB already running, reusing it"
  else
    rm -f /run/mysqld/mysqld.pid
    setsid /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 --pid-file=/run/mysqld/mysqld.pid \
      --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 >/var/log/mariadb-ci.log 2>&1 < /dev/null &
    wait_for 60 mariadb mariadb-admin ping
    record_pid mariadbd /run/mysqld/mysqld.pid
  fi
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '${DB_PASS}';
    ALTER USER 'slurm'@'localhost' IDENTIFIED BY '${DB_PASS}';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  cat > $ETC/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=${LOG}/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=${DB_PASS}
StorageLoc=slurm_acct_db
EOF
  chmod 600 $ETC/slurmdbd.conf   # slurmdbd refuses a world-readable config
  if [ -s /run/slurmdbd.pid ] && kill -0 "$(cat /run/slurmdbd.pid)" 2>/dev/null; then
    log "slurmdbd already running, reusing it"
  else
    rm -f /run/slurmdbd.pid; /usr/sbin/slurmdbd
    wait_for 60 slurmdbd sacctmgr -n list cluster
    record_pid slurmdbd /run/slurmdbd.pid
  fi
fi

# ---------------------------------------------------------------------------------- 5. slurmctld + slurmd
if [ -s /run/slurmctld.pid ] && kill -0 "$(cat /run/slurmctld.pid)" 2>/dev/null && [ "$OLD_CONF" != "$(md5sum < $ETC/slurm.conf)" ]; then
  log "slurm.conf changed: restarting slurmctld"   # new nodes need a restart, not a reconfigure
  stop_pid /run/slurmctld.pid
fi
CTLD_STARTED=0
if [ -s /run/slurmctld.pid ] && kill -0 "$(cat /run/slurmctld.pid)" 2>/dev/null; then
  log "slurmctld already running: scontrol reconfigure"; scontrol reconfigure
else
  rm -f /run/slurmctld.pid; /usr/sbin/slurmctld
  wait_for 30 slurmctld sh -c 'scontrol ping | grep -q UP'
  record_pid slurmctld /run/slurmctld.pid
  CTLD_STARTED=1
fi
# slurmd of the other layout (one node <-> two) are stopped first
if [ "$NODES" = 1 ]; then stale=$(ls /run/slurmd-*.pid 2>/dev/null || true); else stale=$(ls /run/slurmd.pid 2>/dev/null || true); fi
for f in $stale; do stop_pid "$f"; rm -f "$f" "$STATE/$(basename "$f")"; done
for n in $NODE_NAMES; do
  pidfile=${PID_FILE//%n/$n}
  if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    # a slurmd left by a stopped controller registers with the new one only at its next ping (minutes): restart it
    if [ $CTLD_STARTED = 1 ]; then log "restarting slurmd $n for the new slurmctld"; stop_pid "$pidfile"
    else log "slurmd $n already running"; continue; fi
  fi
  rm -f "$pidfile"
  if [ "$NODES" = 1 ]; then /usr/sbin/slurmd; record_pid slurmd "$pidfile"
  else /usr/sbin/slurmd -N "$n"; record_pid "slurmd-$n" "$pidfile"; fi
done
if [ $CTLD_STARTED = 1 ]; then
  # a controller stopped while jobs ran recovers them as running, and their nodes stay allocated until each job's time
  # limit; this cluster is CI's own, so jobs left by an earlier run are cancelled
  leftover=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ')
  if [ -n "${leftover// /}" ]; then log "cancelling jobs left by an earlier run: $leftover"; scancel $leftover || true; fi
fi
for n in $NODE_NAMES; do
  wait_for 120 "node $n idle" sh -c "sinfo -h -n $n -o %T | grep -qx idle"
done
log "cluster ready in $((SECONDS - T0))s"
sinfo
