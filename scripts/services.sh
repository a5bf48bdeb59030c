#!/usr/bin/env bash
# services.sh — make sure everything "go test -race ./..." needs is on this
# machine: the C toolchain of the race detector, the servers the tests share
# on loopback (reusing running ones), and the binaries of the servers that the
# fault tests start themselves.
#
#   cgo         gcc + libc6-dev, checked by building a -race binary
#   Redis       127.0.0.1:6379
#   PostgreSQL  postgres://postgres@127.0.0.1:5432/test?sslmode=disable (trust, no password)
#   MariaDB     root@tcp(127.0.0.1:3306)/test (root, no password over TCP)
#   NATS        127.0.0.1:4222 with JetStream
#   RabbitMQ    amqp://guest:guest@127.0.0.1:5672/
#   shells      zsh and fish, for the completion scripts' tests
#   binaries    redis-server, redis-cli, /usr/lib/postgresql/*/bin/{initdb,pg_ctl}, etcd, etcdctl,
#               prometheus, promtool,
#               java + /usr/share/java/zookeeper.jar, /usr/bin/python3 with kazoo,
#               javac + /usr/share/java/curator-recipes.jar (Apache Curator) and slf4j-nop.jar,
#               chromium + chromedriver (Debian's), for the demo's pictures in a real browser
#
# etcd runs no shared server: the etcd tests start their own private etcd
# processes (internal/testsvc.StartEtcd) on free ports with temp data dirs, so
# they can pause and restart them; only the binaries are installed here. The
# same goes for ZooKeeper (internal/testsvc.StartZooKeeper); kazoo is for the
# zklock interop tests, as is Curator.
#
# Idempotent and fast (well under 2 s) when everything is already there.
# apt-get update runs only when something must be installed, and apt's own
# output is shown. Debian 12, root (or sudo), Go on PATH (or $GO).
set -euo pipefail

# The ports, cluster name and MariaDB's directories can be overridden only to
# try this script without disturbing the servers already running (a second
# MariaDB needs its own data and run directories); the tests expect the
# defaults.
REDIS_HOST=127.0.0.1
REDIS_PORT=${LATCHKEY_SERVICES_REDIS_PORT:-6379}
PG_HOST=127.0.0.1
PG_PORT=${LATCHKEY_SERVICES_PG_PORT:-5432}
PG_CLUSTER=${LATCHKEY_SERVICES_PG_CLUSTER:-main}
PG_DB=test
PG_URL="postgres://postgres@${PG_HOST}:${PG_PORT}/${PG_DB}?sslmode=disable"
MARIADB_HOST=127.0.0.1
MARIADB_PORT=${LATCHKEY_SERVICES_MARIADB_PORT:-3306}
MARIADB_DATA=${LATCHKEY_SERVICES_MARIADB_DATA:-/var/lib/mysql}
MARIADB_RUN=${LATCHKEY_SERVICES_MARIADB_RUN:-/run/mysqld} # socket and pid file
MARIADB_DB=test
STATE_DIR=${LATCHKEY_SERVICES_DIR:-/tmp/latchkey-services}
GO=${GO:-go}

export DEBIAN_FRONTEND=noninteractive
export PGCONNECT_TIMEOUT=2
unset PGPASSWORD PGUSER PGDATABASE PGHOST PGPORT PGSERVICE || true

SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=(sudo); fi

say() { printf '%-10s %s\n' "$1:" "$2"; }
die() { printf 'services.sh: %s\n' "$*" >&2; exit 1; }

# apt_install WHAT PACKAGE... installs the packages for WHAT, with apt's own
# output, after one apt-get update per run.
apt_updated=0
apt_install() {
  local what=$1
  shift
  if [ "$(id -u)" -ne 0 ] && [ "${#SUDO[@]}" -eq 0 ]; then
    die "$what needs $* installed: run this as root, or install sudo"
  fi
  if [ "$apt_updated" -eq 0 ]; then
    say "$what" "apt-get update (once; this run installs packages)"
    "${SUDO[@]}" apt-get update
    apt_updated=1
  fi
  say "$what" "apt-get install $*"
  "${SUDO[@]}" apt-get install -y --no-install-recommends "$@"
}

# ------------------------------------------------------- cgo and -race
# go test -race needs cgo, so a C compiler and libc's headers: gcc alone
# (without its recommends) is not enough, os/user's cgo code includes grp.h
# from libc6-dev. Go turns cgo off by itself when it finds no C compiler, so
# the check is the real thing: build a -race binary that compiles the cgo
# parts of net and os/user, with CGO_ENABLED=1 as the Makefile runs the tests.
race_out=
race_ok() {
  local d
  d=$(mktemp -d)
  printf 'package main\n\nimport (\n\t_ "net"\n\t_ "os/user"\n)\n\nfunc main() {}\n' >"$d/main.go"
  if race_out=$(cd "$d" && CGO_ENABLED=1 "$GO" build -race -o /dev/null main.go 2>&1); then
    rm -rf "$d"
    return 0
  fi
  rm -rf "$d"
  return 1
}

ensure_race() {
  command -v "$GO" >/dev/null 2>&1 || die "$GO not on PATH: install Go (see go.mod for the version) first"
  if [ "$(CGO_ENABLED= "$GO" env CGO_ENABLED)" != 1 ] && command -v gcc >/dev/null 2>&1; then
    say race "note: go env has CGO_ENABLED=0 (go env -w?); make test sets CGO_ENABLED=1 for -race"
  fi
  if race_ok; then
    say race "cgo and go build -race work ($("$GO" env CC))"
    return
  fi
  local pkgs=()
  command -v gcc >/dev/null 2>&1 || pkgs+=(gcc)
  dpkg -s libc6-dev >/dev/null 2>&1 || pkgs+=(libc6-dev)
  [ "${#pkgs[@]}" -gt 0 ] || die "go build -race fails with gcc and libc6-dev installed:
$race_out"
  apt_install race "${pkgs[@]}"
  say race "checking that go build -race works (the first build compiles the race runtime)"
  race_ok || die "go build -race still fails after installing ${pkgs[*]}:
$race_out"
  say race "cgo and go build -race work ($("$GO" env CC))"
}

# CA certificates for the Go module proxy: a minimal Debian has none, and the
# tests' dependencies are downloaded over HTTPS.
ensure_certs() {
  if [ -s /etc/ssl/certs/ca-certificates.crt ]; then return; fi
  apt_install certs ca-certificates
}

# The shells whose completion scripts latchkey completion prints: the CLI's
# tests load each script into its shell and ask it to complete.
ensure_shells() {
  local missing=()
  command -v zsh >/dev/null 2>&1 || missing+=(zsh)
  command -v fish >/dev/null 2>&1 || missing+=(fish)
  if [ "${#missing[@]}" -gt 0 ]; then apt_install shells "${missing[@]}"; fi
  say shells "bash, zsh and fish for the completion tests"
}

# ---------------------------------------------------------------- Redis
redis_ping() { [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

ensure_redis() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    apt_install redis redis-server redis-tools
  fi
  if redis_ping; then
    say redis "up at $REDIS_HOST:$REDIS_PORT (reused), $(redis-server --version | grep -o 'v=[^ ]*')"
    return
  fi
  say redis "starting redis-server on $REDIS_HOST:$REDIS_PORT"
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
    apt_install postgres postgresql
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
      say postgres "creating cluster $ver/$PG_CLUSTER on port $PG_PORT"
      "${SUDO[@]}" pg_createcluster "$ver" "$PG_CLUSTER" -p "$PG_PORT" --start -- --auth-host=trust --auth-local=peer >/dev/null
      what="created cluster $ver/$PG_CLUSTER"
    else
      read -r ver name status <<<"$cluster"
      say postgres "starting cluster $ver/$name"
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
    apt_install etcd etcd-server etcd-client
  fi
  command -v etcd >/dev/null 2>&1 || die "etcd not on PATH after installing etcd-server"
  say etcd "binaries only, tests start their own ($(etcd --version 2>/dev/null | head -n 1))"
}

# ----------------------------------------------------------- Prometheus
# Binaries only: promtool checks and unit-tests the rules in deploy/prometheus,
# and the scrape test starts its own prometheus (internal/testsvc.StartPrometheus)
# on a free port with a temp data dir.
ensure_prometheus() {
  if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    apt_install prometheus prometheus
  fi
  command -v promtool >/dev/null 2>&1 || die "promtool not on PATH after installing prometheus"
  say prom "binaries only, tests start their own ($(prometheus --version 2>&1 | head -n 1))"
}

# --------------------------------------------------------------- browser
# Debian's Chromium and its ChromeDriver: the demo's pictures (latchkey demo
# --html) are checked in a real headless browser, over WebDriver on loopback.
ensure_chromium() {
  local pkgs=()
  command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || pkgs+=(chromium-driver)
  if [ "${#pkgs[@]}" -gt 0 ]; then
    apt_install chromium "${pkgs[@]}" fonts-dejavu-core
  fi
  command -v chromedriver >/dev/null 2>&1 || die "chromedriver not on PATH after installing chromium-driver"
  say chromium "binaries only, tests start their own ($(chromium --version 2>/dev/null | head -n 1))"
}

# ------------------------------------------------------------ ZooKeeper
ZK_JAR=/usr/share/java/zookeeper.jar
CURATOR_JAR=/usr/share/java/curator-recipes.jar
SLF4J_NOP_JAR=/usr/share/java/slf4j-nop.jar
kazoo_ok() { /usr/bin/python3 -c 'import kazoo' >/dev/null 2>&1; }

ensure_zookeeper() {
  local pkgs=()
  { command -v java >/dev/null 2>&1 && [ -f "$ZK_JAR" ]; } || pkgs+=(zookeeper)
  kazoo_ok || pkgs+=(python3-kazoo)
  command -v javac >/dev/null 2>&1 || pkgs+=(openjdk-17-jdk-headless)
  [ -f "$CURATOR_JAR" ] || pkgs+=(libcurator-recipes-java)
  [ -f "$SLF4J_NOP_JAR" ] || pkgs+=(libslf4j-java)
  if [ "${#pkgs[@]}" -gt 0 ]; then
    apt_install zookeeper "${pkgs[@]}"
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

# NATS with JetStream on 127.0.0.1:4222, for the dedup/natsconsumer tests.
ensure_nats() {
  if tcp_open 127.0.0.1 4222; then say nats "up at 127.0.0.1:4222 (reused)"; return; fi
  if ! command -v nats-server >/dev/null 2>&1; then
    apt_install nats nats-server
  fi
  say nats "starting nats-server on 127.0.0.1:4222 with JetStream (data $STATE_DIR/nats)"
  mkdir -p "$STATE_DIR/nats"
  nohup nats-server -a 127.0.0.1 -p 4222 -js -sd "$STATE_DIR/nats" -P "$STATE_DIR/nats.pid" \
    >"$STATE_DIR/nats.log" 2>&1 </dev/null &
  wait_tcp 127.0.0.1 4222 20 || die "nats-server did not start; see $STATE_DIR/nats.log"
  say nats "started at 127.0.0.1:4222 (log $STATE_DIR/nats.log)"
}

# RabbitMQ on 127.0.0.1:5672 (guest/guest from loopback), for dedup/amqpconsumer.
ensure_rabbitmq() {
  if tcp_open 127.0.0.1 5672; then say rabbitmq "up at 127.0.0.1:5672 (reused)"; return; fi
  if ! command -v rabbitmq-server >/dev/null 2>&1; then
    apt_install rabbitmq rabbitmq-server
    # Its package may have started it.
    if wait_tcp 127.0.0.1 5672 5; then say rabbitmq "up at 127.0.0.1:5672 (started by its package)"; return; fi
  fi
  say rabbitmq "starting rabbitmq-server (takes 5-30 s; log in /var/log/rabbitmq)"
  "${SUDO[@]}" rabbitmq-server -detached
  wait_tcp 127.0.0.1 5672 90 || die "rabbitmq-server did not start within 90 s; see /var/log/rabbitmq"
  say rabbitmq "started at 127.0.0.1:5672"
}

# -------------------------------------------------------------- MariaDB
mariadb_tcp() { mariadb --protocol=TCP -h "$MARIADB_HOST" -P "$MARIADB_PORT" -u root --connect-timeout=2 -N -B "$@"; }
mariadb_socket() { "${SUDO[@]}" mariadb --protocol=SOCKET -S "$MARIADB_RUN/mysqld.sock" -u root --connect-timeout=2 -N -B "$@"; }
mariadb_root_ok() { mariadb_tcp -e 'select 1' >/dev/null 2>&1; }
mariadb_db_ok() { mariadb_tcp -D "$MARIADB_DB" -e 'select 1' >/dev/null 2>&1; }

# mariadb_start starts mariadbd on the package's data directory (made first
# if the package left none), bound to loopback only, detached, as the mysql
# user. The server's own error log is $STATE_DIR/mariadb.log.
mariadb_start() {
  local log=$STATE_DIR/mariadb.log
  mkdir -p "$STATE_DIR"
  "${SUDO[@]}" install -d -o mysql -g mysql "$MARIADB_RUN"
  "${SUDO[@]}" touch "$log"
  "${SUDO[@]}" chown mysql:mysql "$log"
  if [ ! -d "$MARIADB_DATA/mysql" ]; then
    say mariadb "initialising $MARIADB_DATA (mariadb-install-db)"
    "${SUDO[@]}" install -d -o mysql -g mysql "$MARIADB_DATA"
    "${SUDO[@]}" mariadb-install-db --user=mysql --datadir="$MARIADB_DATA" --skip-test-db >>"$log" 2>&1 ||
      { tail -n 20 "$log" >&2; die "mariadb-install-db failed; see $log"; }
  fi
  # A server its package started may still be on its way to TCP: the
  # socket answers first. Never a second server on the same data.
  if mariadb_socket -e 'select 1' >/dev/null 2>&1; then return 0; fi
  say mariadb "starting mariadbd on $MARIADB_HOST:$MARIADB_PORT (data $MARIADB_DATA, log $log)"
  "${SUDO[@]}" start-stop-daemon --start --oknodo --background --pidfile "$MARIADB_RUN/mysqld.pid" \
    --exec /usr/sbin/mariadbd -- --user=mysql --datadir="$MARIADB_DATA" \
    --bind-address="$MARIADB_HOST" --port="$MARIADB_PORT" --socket="$MARIADB_RUN/mysqld.sock" \
    --pid-file="$MARIADB_RUN/mysqld.pid" --log-error="$log"
  for _ in $(seq 300); do
    mariadb_socket -e 'select 1' >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  tail -n 20 "$log" >&2 || true
  die "mariadbd did not answer on $MARIADB_RUN/mysqld.sock within 30 s; see $log"
}

ensure_mariadb() {
  local what=reused
  if ! tcp_open "$MARIADB_HOST" "$MARIADB_PORT" && [ ! -x /usr/sbin/mariadbd ]; then
    apt_install mariadb mariadb-server
    # Its package may have started it.
    if wait_tcp "$MARIADB_HOST" "$MARIADB_PORT" 5; then what="started by its package"; fi
  fi
  command -v mariadb >/dev/null 2>&1 || apt_install mariadb mariadb-client
  if mariadb_db_ok; then
    say mariadb "up at root@tcp($MARIADB_HOST:$MARIADB_PORT)/$MARIADB_DB ($what)"
    return
  fi
  if ! tcp_open "$MARIADB_HOST" "$MARIADB_PORT"; then
    mariadb_start
    what=started
  fi

  # root without a password over TCP from 127.0.0.1? A fresh install lets
  # root in only through the socket (unix_socket), so allow an empty
  # password too. Both accounts: with name resolution on, 127.0.0.1 is
  # matched as localhost.
  if ! mariadb_root_ok; then
    mariadb_socket -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
      GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
      ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');" ||
      die "mariadb on $MARIADB_HOST:$MARIADB_PORT refuses root without a password over TCP, and root over $MARIADB_RUN/mysqld.sock cannot change that"
    mariadb_root_ok || die "mariadb on $MARIADB_HOST:$MARIADB_PORT still refuses root without a password over TCP"
    what="$what, root without a password from 127.0.0.1"
  fi
  if ! mariadb_db_ok; then
    mariadb_tcp -e "CREATE DATABASE IF NOT EXISTS \`$MARIADB_DB\`"
    what="$what, created database $MARIADB_DB"
  fi
  mariadb_db_ok || die "cannot use database $MARIADB_DB on $MARIADB_HOST:$MARIADB_PORT as root"
  say mariadb "up at root@tcp($MARIADB_HOST:$MARIADB_PORT)/$MARIADB_DB ($what)"
}

ensure_certs
ensure_race
ensure_shells
ensure_redis
ensure_postgres
ensure_mariadb
ensure_etcd
ensure_prometheus
ensure_zookeeper
ensure_chromium
ensure_nats
ensure_rabbitmq
