#!/usr/bin/env bash
# services.sh — make sure the servers the tests need are up on loopback, reusing
# running ones, and that the binaries the fault tests start themselves exist.
#
#   Redis       127.0.0.1:6379
#   PostgreSQL  postgres://postgres@127.0.0.1:5432/test?sslmode=disable (trust, no password)
#   NATS        127.0.0.1:4222 with JetStream
#   RabbitMQ    amqp://guest:guest@127.0.0.1:5672/
#   binaries    redis-server, redis-cli, /usr/lib/postgresql/*/bin/{initdb,pg_ctl}, etcd, etcdctl,
#               java + /usr/share/java/zookeeper.jar, nc, /usr/bin/python3 with kazoo,
#               javac + /usr/share/java/curator-recipes.jar (Apache Curator) and slf4j-nop.jar
#
# etcd runs no shared server: the etcd tests start their own private etcd
# processes (internal/testsvc.StartEtcd) on free ports with temp data dirs, so
# they can pause and restart them; only the binaries are installed here. The
# same goes for ZooKeeper (internal/testsvc.StartZooKeeper); kazoo is for the
# zklock interop tests, as is Curator.
#
# Idempotent and fast (well under 2 s) when everything is already there.
# apt-get update runs only when something must be installed. Debian, root (or sudo).
set -euo pipefail

# The ports and cluster name can be overridden only to try this script without
# disturbing the servers already running; the tests expect the defaults.
REDIS_HOST=127.0.0.1
REDIS_PORT=${LATCHKEY_SERVICES_REDIS_PORT:-6379}
PG_HOST=127.0.0.1
PG_PORT=${LATCHKEY_SERVICES_PG_PORT:-5432}
PG_CLUSTER=${LATCHKEY_SERVICES_PG_CLUSTER:-main}
PG_DB=test
PG_URL="postgres://postgres@${PG_HOST}:${PG_PORT}/${PG_DB}?sslmode=disable"
STATE_DIR=${LATCHKEY_SERVICES_DIR:-/tmp/latchkey-services}

export DEBIAN_FRONTEND=noninteractive
export PGCONNECT_TIMEOUT=2
unset PGPASSWORD PGUSER PGDATABASE PGHOST PGPORT PGSERVICE || true

SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=(sudo); fi

say() { printf '%-10s %s\n' "$1:" "$2"; }
die() { printf 'services.sh: %s\n' "$*" >&2; exit 1; }

apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    "${SUDO[@]}" apt-get update -qq >/dev/null
    apt_updated=1
  fi
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# ---------------------------------------------------------------- Redis
redis_ping() { [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

ensure_redis() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    say redis "installing redis-server redis-tools"
    apt_install redis-server redis-tools
  fi
  if redis_ping; then
    say redis "up at $REDIS_HOST:$REDIS_PORT (reused), $(redis-server --version | grep -o 'v=[^ ]*')"
    return
  fi
  mkdir -p "$STATE_DIR/redis"
  redis-server --port "$REDIS_PORT" --bind "$REDIS_HOST" --save "" --appendonly no \
    --daemonize yes --dir "$STATE_DIR/redis" \
    --pidfile "$STATE_DIR/redis/redis.pid" --logfile "$STATE_DIR/redis/redis.log"
  for _ in $(seq 200); do
    if redis_ping; then
      say redis "started at $REDIS_HOST:$REDIS_PORT (log $STATE_DIR/redis/redis.log)"
      return
    fi
    sleep 0.05
  done
  tail -n 20 "$STATE_DIR/redis/redis.log" >&2 || true
  die "redis did not answer PING on $REDIS_HOST:$REDIS_PORT"
}

# ----------------------------------------------------------- PostgreSQL
pg_bin_ok() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null; }
pg_version() { ls /usr/lib/postgresql | sort -n | tail -n 1; }
pg_ok() { psql -w -X -q -At "$PG_URL" -c 'select 1' >/dev/null 2>&1; }
pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" >/dev/null 2>&1; }
pg_wait_ready() {
  for _ in $(seq 300); do pg_ready && return 0; sleep 0.1; done
  return 1
}
# The Debian cluster listening on $PG_PORT, as "VERSION NAME STATUS", if any.
pg_cluster() { pg_lsclusters -h 2>/dev/null | awk -v p="$PG_PORT" '$3 == p { print $1, $2, $4; exit }'; }

ensure_postgres() {
  if ! pg_bin_ok || ! command -v psql >/dev/null 2>&1 || ! command -v pg_lsclusters >/dev/null 2>&1; then
    say postgres "installing postgresql"
    apt_install postgresql
  fi
  if pg_ok; then
    say postgres "up at $PG_URL (reused)"
    return
  fi

  local what=reused cluster ver name status
  cluster=$(pg_cluster)
  if ! pg_ready; then
    if [ -z "$cluster" ]; then
      ver=$(pg_version)
      if pg_lsclusters -h 2>/dev/null | awk '{print $1, $2}' | grep -qx "$ver $PG_CLUSTER"; then
        die "cluster $ver/$PG_CLUSTER exists but does not use port $PG_PORT (see pg_lsclusters)"
      fi
      "${SUDO[@]}" pg_createcluster "$ver" "$PG_CLUSTER" -p "$PG_PORT" --start -- --auth-host=trust --auth-local=peer >/dev/null
      what="created cluster $ver/$PG_CLUSTER"
    else
      read -r ver name status <<<"$cluster"
      "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start
      what="started cluster $ver/$name"
    fi
    pg_wait_ready || die "postgresql did not become ready on $PG_HOST:$PG_PORT"
    cluster=$(pg_cluster)
  fi

  # Reachable without a password from 127.0.0.1? If not, trust 127.0.0.1 in pg_hba.conf.
  if ! psql -w -X -q -At -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -c 'select 1' >/dev/null 2>&1; then
    [ -n "$cluster" ] || die "postgresql on $PG_HOST:$PG_PORT is not a Debian cluster and refuses passwordless postgres@127.0.0.1"
    read -r ver name status <<<"$cluster"
    local hba=/etc/postgresql/$ver/$name/pg_hba.conf
    "${SUDO[@]}" sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
    "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" reload
    for _ in $(seq 50); do
      psql -w -X -q -At -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -c 'select 1' >/dev/null 2>&1 && break
      sleep 0.1
    done
    what="$what, trusted 127.0.0.1 in $hba"
  fi

  if ! pg_ok; then
    psql -w -X -q -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -c "create database $PG_DB" >/dev/null
    what="$what, created database $PG_DB"
  fi
  pg_ok || die "cannot connect to $PG_URL"
  say postgres "up at $PG_URL ($what)"
}

# ---------------------------------------------------------------- etcd
ensure_etcd() {
  if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
    say etcd "installing etcd-server etcd-client"
    apt_install etcd-server etcd-client
  fi
  command -v etcd >/dev/null 2>&1 || die "etcd not on PATH after installing etcd-server"
  say etcd "binaries only, tests start their own ($(etcd --version 2>/dev/null | head -n 1))"
}

# ------------------------------------------------------------ ZooKeeper
ZK_JAR=/usr/share/java/zookeeper.jar
CURATOR_JAR=/usr/share/java/curator-recipes.jar
SLF4J_NOP_JAR=/usr/share/java/slf4j-nop.jar
kazoo_ok() { /usr/bin/python3 -c 'import kazoo' >/dev/null 2>&1; }

ensure_zookeeper() {
  local pkgs=()
  { command -v java >/dev/null 2>&1 && [ -f "$ZK_JAR" ]; } || pkgs+=(zookeeper)
  command -v nc >/dev/null 2>&1 || pkgs+=(netcat-openbsd)
  kazoo_ok || pkgs+=(python3-kazoo)
  command -v javac >/dev/null 2>&1 || pkgs+=(openjdk-17-jdk-headless)
  [ -f "$CURATOR_JAR" ] || pkgs+=(libcurator-recipes-java)
  [ -f "$SLF4J_NOP_JAR" ] || pkgs+=(libslf4j-java)
  if [ "${#pkgs[@]}" -gt 0 ]; then
    say zookeeper "installing ${pkgs[*]}"
    apt_install "${pkgs[@]}"
  fi
  [ -f "$ZK_JAR" ] || die "$ZK_JAR missing after installing zookeeper"
  kazoo_ok || die "/usr/bin/python3 cannot import kazoo after installing python3-kazoo"
  [ -f "$CURATOR_JAR" ] || die "$CURATOR_JAR missing after installing libcurator-recipes-java"
  command -v javac >/dev/null 2>&1 || die "javac not on PATH after installing openjdk-17-jdk-headless"
  say zookeeper "binaries only, tests start their own ($(basename "$(readlink -f "$ZK_JAR")"), kazoo, $(basename "$(readlink -f "$CURATOR_JAR")"))"
}

# ---------------------------------------------------------------- brokers
tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
wait_tcp() { # host port seconds
  local i
  for i in $(seq $(($3 * 10))); do tcp_open "$1" "$2" && return 0; sleep 0.1; done
  return 1
}

# NATS with JetStream on 127.0.0.1:4222, for the dedup/natsdedup tests.
ensure_nats() {
  if tcp_open 127.0.0.1 4222; then say nats "up at 127.0.0.1:4222 (reused)"; return; fi
  if ! command -v nats-server >/dev/null 2>&1; then
    say nats "installing nats-server"
    apt_install nats-server
  fi
  mkdir -p "$STATE_DIR/nats"
  nohup nats-server -a 127.0.0.1 -p 4222 -js -sd "$STATE_DIR/nats" \
    >"$STATE_DIR/nats.log" 2>&1 </dev/null &
  wait_tcp 127.0.0.1 4222 20 || die "nats-server did not start; see $STATE_DIR/nats.log"
  say nats "started at 127.0.0.1:4222 with JetStream"
}

# RabbitMQ on 127.0.0.1:5672 (guest/guest from loopback), for dedup/amqpdedup.
ensure_rabbitmq() {
  if tcp_open 127.0.0.1 5672; then say rabbitmq "up at 127.0.0.1:5672 (reused)"; return; fi
  if ! command -v rabbitmq-server >/dev/null 2>&1; then
    say rabbitmq "installing rabbitmq-server"
    apt_install rabbitmq-server
  fi
  "${SUDO[@]}" rabbitmq-server -detached
  wait_tcp 127.0.0.1 5672 90 || die "rabbitmq-server did not start within 90 s"
  say rabbitmq "started at 127.0.0.1:5672"
}

ensure_redis
ensure_postgres
ensure_etcd
ensure_zookeeper
ensure_nats
ensure_rabbitmq
say bins "redis-server, redis-cli, $(ls -d /usr/lib/postgresql/"$(pg_version)"/bin)/{initdb,pg_ctl}, etcd, etcdctl, java+zookeeper.jar, nc"
