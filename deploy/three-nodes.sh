#!/usr/bin/env bash
# README "Many nodes" on one machine: node 1 runs the embedded PostgreSQL (the main database and the control
# database beside it), nodes 2 and 3 use that same database, HAProxy (deploy/haproxy.cfg) sends each request
# to the next live node. Prints the proxy's URL, the management token and the keys; Ctrl-C stops everything
# (the proxy and nodes 2 and 3 first, then node 1 and its database).
#
# Run from anywhere: deploy/three-nodes.sh. Everything is optional in the environment:
#   STRATA_CLUSTER_DIR  the nodes' data directories, logs and generated secrets (.strata/three-nodes)
#   PROXY_PORT          where clients reach the installation (54321)
#   NODE_PORTS          the three nodes' own ports ("54331 54332 54333")
#   STRATA_PG_PORT      the embedded PostgreSQL's port (54322)
#   STORAGE_S3_*        one S3-compatible bucket for every node (README "Storage"); without it each node keeps
#                       the objects it receives on its own disk, and another node cannot serve them
#   HAPROXY, NODE       the haproxy and node executables
# Secrets (JWT_SECRET, AUTHENTICATOR_PASSWORD, STRATA_KEK, MANAGEMENT_TOKEN) are taken from the environment,
# else generated at the first start and kept in $STRATA_CLUSTER_DIR/secrets.env: every node gets the same.
set -euo pipefail
# Each process in its own process group: Ctrl-C reaches this script alone, which stops them in order.
set -m

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DIR=${STRATA_CLUSTER_DIR:-.strata/three-nodes}
PROXY_PORT=${PROXY_PORT:-54321}
read -r -a PORTS <<<"${NODE_PORTS:-54331 54332 54333}"
NODE=${NODE:-$ROOT/node_modules/.bin/node}
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
STRATA=("$NODE" --import tsx src/cli/main.ts)

# (Not owner-only: as root, the embedded PostgreSQL runs as the user postgres, which must enter node 1's.)
mkdir -p "$DIR"
random() { "$NODE" -e "console.log(require('node:crypto').randomBytes($1).toString('hex'))"; }
if [ ! -f "$DIR/secrets.env" ]; then
  (
    umask 077
    {
      echo "JWT_SECRET=${JWT_SECRET:-$(random 32)}"
      echo "AUTHENTICATOR_PASSWORD=${AUTHENTICATOR_PASSWORD:-$(random 24)}"
      echo "STRATA_KEK=${STRATA_KEK:-$(random 32)}"
      echo "MANAGEMENT_TOKEN=${MANAGEMENT_TOKEN:-sbp_$(random 20)}"
    } >"$DIR/secrets.env"
  )
fi
set -a
# shellcheck disable=SC1091
. "$DIR/secrets.env"
set +a
# The nodes trust the proxy's X-Forwarded-For (it runs here); the pooler port stays closed unless asked for.
export STRATA_TRUSTED_PROXIES=${STRATA_TRUSTED_PROXIES:-127.0.0.1}
export STRATA_DB_PORT=${STRATA_DB_PORT:-off}
export LOG_LEVEL=${LOG_LEVEL:-warn}

PIDS=()
stop_all() {
  trap - INT TERM EXIT
  echo "stopping..."
  # The proxy and the nodes on node 1's database, then node 1 (a fast shutdown of its PostgreSQL).
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${PIDS[$i]}" 2>/dev/null || true
    wait "${PIDS[$i]}" 2>/dev/null || true
  done
}
trap 'stop_all; exit 130' INT TERM
trap stop_all EXIT

# Waits until `url`/health answers 200 while process `pid` lives.
await_health() {
  local url=$1 pid=$2 log=$3
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true)" = 200 ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the process logging to $log stopped:" >&2
      tail -5 "$log" >&2
      exit 1
    fi
    sleep 0.5
  done
}

start_node() {
  local n=$1
  shift
  env "$@" STRATA_DATA_DIR="$DIR/node$n" PORT="${PORTS[$((n - 1))]}" "${STRATA[@]}" start >>"$DIR/node$n.log" 2>&1 &
  PIDS+=($!)
}

echo "starting node 1 (embedded PostgreSQL on ${STRATA_PG_PORT:-54322}), log $DIR/node1.log"
start_node 1
await_health "http://127.0.0.1:${PORTS[0]}" "${PIDS[0]}" "$DIR/node1.log"
KEYS=$(STRATA_DATA_DIR="$DIR/node1" PORT="${PORTS[0]}" "${STRATA[@]}" keys --json 2>/dev/null)
field() { echo "$KEYS" | "$NODE" -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log(JSON.parse(s).$1))"; }
DB_URL=$(field db_url)

for n in 2 3; do
  echo "starting node $n on the same database, log $DIR/node$n.log"
  start_node "$n" DATABASE_URL="$DB_URL"
done
await_health "http://127.0.0.1:${PORTS[1]}" "${PIDS[1]}" "$DIR/node2.log"
await_health "http://127.0.0.1:${PORTS[2]}" "${PIDS[2]}" "$DIR/node3.log"

STRATA_PROXY_BIND="127.0.0.1:$PROXY_PORT" STRATA_NODE1="127.0.0.1:${PORTS[0]}" \
  STRATA_NODE2="127.0.0.1:${PORTS[1]}" STRATA_NODE3="127.0.0.1:${PORTS[2]}" \
  "$HAPROXY" -f deploy/haproxy.cfg -db >>"$DIR/haproxy.log" 2>&1 &
PIDS+=($!)
await_health "http://127.0.0.1:$PROXY_PORT" "${PIDS[3]}" "$DIR/haproxy.log"

STORE="no S3: objects stay on the node that received them"
[ -n "${STORAGE_S3_BUCKET:-}" ] && STORE="S3 bucket $STORAGE_S3_BUCKET"
cat <<EOF

Three nodes behind HAProxy ($STORE).
         API URL: http://127.0.0.1:$PROXY_PORT
             ref: $(field ref)
        anon key: $(field anon_key)
service_role key: $(field service_role_key)
Management token: $MANAGEMENT_TOKEN
      JWT secret: $JWT_SECRET
          DB URL: $DB_URL
           nodes: http://127.0.0.1:${PORTS[0]} http://127.0.0.1:${PORTS[1]} http://127.0.0.1:${PORTS[2]}
Ctrl-C stops them.
EOF
wait -n "${PIDS[@]}" || true
echo "a process stopped; see the logs in $DIR" >&2
