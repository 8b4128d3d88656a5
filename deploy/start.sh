#!/usr/bin/env bash
# Start a team's Dagster on one machine: the daemon (queue, sensor, schedule, automation,
# run monitoring) and the webserver (the UI), both on the PostgreSQL instance of
# deploy/dagster.yaml. Stops both when either stops or on Ctrl-C / SIGTERM.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: deploy/start.sh [--host HOST] [--port PORT] [--gpus N] [--migrate]

  --host HOST   address the webserver listens on (default 127.0.0.1; 0.0.0.0 for the team)
  --port PORT   webserver port (default 3000)
  --gpus N      slots of the Dagster pool "gpu" (default: $TUNESMITH_GPU_SLOTS, else the
                number of GPUs nvidia-smi lists, else 1)
  --migrate     first bring the database schema up to date (`dagster instance migrate`):
                once after upgrading Dagster; a new database gets its tables by itself

Environment (required):
  DAGSTER_HOME          the instance folder; deploy/dagster.yaml is copied there if it has none
  DAGSTER_PG_HOST, DAGSTER_PG_PORT, DAGSTER_PG_DB, DAGSTER_PG_USERNAME, DAGSTER_PG_PASSWORD
Environment (optional):
  TUNESMITH_DATASETS, TUNESMITH_OUT, TUNESMITH_STORE, TUNESMITH_MODELS   data roots
  TUNESMITH_VENV        the virtualenv with tunesmith installed (default: .venv in the repo)
  TUNESMITH_STOP_GRACE  seconds the two get to stop after Ctrl-C / SIGTERM before they are
                        killed (default 60)
USAGE
}

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
host=127.0.0.1
port=3000
gpus="${TUNESMITH_GPU_SLOTS:-}"
migrate=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --host) host="${2:?--host needs a value}"; shift 2 ;;
    --port) port="${2:?--port needs a value}"; shift 2 ;;
    --gpus) gpus="${2:?--gpus needs a value}"; shift 2 ;;
    --migrate) migrate=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "start.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done

missing=()
for name in DAGSTER_HOME DAGSTER_PG_HOST DAGSTER_PG_PORT DAGSTER_PG_DB DAGSTER_PG_USERNAME \
  DAGSTER_PG_PASSWORD; do
  [[ -n "${!name:-}" ]] || missing+=("$name")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "start.sh: set ${missing[*]} first" >&2
  usage >&2
  exit 2
fi

if [[ -z "$gpus" ]]; then
  gpus=1
  if command -v nvidia-smi >/dev/null 2>&1; then
    count="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
    if [[ "$count" -gt 0 ]]; then gpus="$count"; fi
  fi
fi
if ! [[ "$gpus" =~ ^[0-9]+$ ]]; then
  echo "start.sh: --gpus must be a whole number, got '$gpus'" >&2
  exit 2
fi

bin="${TUNESMITH_VENV:-$repo/.venv}/bin"
[[ -x "$bin/dagster-daemon" ]] || bin="$(dirname "$(command -v dagster-daemon)")"
for tool in dagster dagster-daemon dagster-webserver; do
  if [[ ! -x "$bin/$tool" ]]; then
    echo "start.sh: $tool not found in $bin; install with: pip install -e '.[deploy]'" >&2
    exit 2
  fi
done

mkdir -p "$DAGSTER_HOME"
if [[ ! -f "$DAGSTER_HOME/dagster.yaml" ]]; then
  cp "$repo/deploy/dagster.yaml" "$DAGSTER_HOME/dagster.yaml"
  echo "start.sh: wrote $DAGSTER_HOME/dagster.yaml from deploy/dagster.yaml"
fi
cd "$repo"  # workspace.yaml names the code location by module, relative to the repo

if [[ "$migrate" -eq 1 ]]; then
  "$bin/dagster" instance migrate
fi
# The pool's limit lives in the database: this machine's count replaces the last one set.
"$bin/dagster" instance concurrency set gpu "$gpus"

# Seconds the daemon and the webserver get to stop after SIGTERM before they are killed, as
# systemd's TimeoutStopSec does: dagster-daemon joins each of its threads for up to 30 s, and
# under load one has been seen to outlast 90 s. Their state is in the database; a kill loses
# nothing a run needs.
grace="${TUNESMITH_STOP_GRACE:-60}"
pids=()
stop() {
  trap - INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  local alive=("${pids[@]}") deadline=$((SECONDS + grace))
  # counted by the clock, not by turns of the loop: under load each `sleep` starts late
  while ((SECONDS < deadline)); do
    alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [[ ${#alive[@]} -gt 0 ]] || break
    sleep 0.1
  done
  for pid in "${alive[@]}"; do
    echo "start.sh: process $pid did not stop within $grace s of SIGTERM; killing it" >&2
    pkill -KILL -P "$pid" 2>/dev/null || true  # its code servers
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait || true
}
trap 'stop; exit 0' INT TERM

"$bin/dagster-daemon" run -w workspace.yaml &
pids+=("$!")
"$bin/dagster-webserver" -h "$host" -p "$port" -w workspace.yaml &
pids+=("$!")
echo "start.sh: daemon pid ${pids[0]}, webserver pid ${pids[1]} on http://$host:$port" \
  "(pool gpu: $gpus)"

# Either one ending ends both: a daemon-less webserver would queue runs nobody starts.
status=0
wait -n || status=$?
echo "start.sh: a process exited (status $status); stopping the other" >&2
stop
exit "$status"
