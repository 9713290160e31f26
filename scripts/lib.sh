# shellcheck shell=bash
# Shared by the run and test commands: installs what is missing (idempotent) and picks a work
# directory the postgres OS user can reach. Source it; do not run it.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR=15
PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config"
PGRX_VERSION=0.18.0
export PG_CONFIG

say() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31merror:\033[0m %s\n' "$*" >&2; exit 1; }

ensure_apt_packages() {
    # pg_cron: the docs' scheduling examples run in the golden-file tests, and the schedules for
    # real in the end-to-end suite; the exporter and Prometheus (promtool) test the monitoring
    # examples (examples/monitoring/); PgBouncer, job tokens behind a transaction pooler; openssl,
    # the test CA of the shipper's TLS test.
    local wanted=("postgresql-${PG_MAJOR}" "postgresql-server-dev-${PG_MAJOR}" "postgresql-${PG_MAJOR}-cron" "postgresql-${PG_MAJOR}-partman" libclang-dev clang
                  sudo shellcheck prometheus prometheus-postgres-exporter pgbouncer openssl)
    local missing=()
    for p in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    # Node runs the control plane's own CRC code as the test oracle; any node will do.
    command -v node >/dev/null || missing+=(nodejs)
    if ((${#missing[@]})); then
        [ "$(id -u)" = 0 ] || die "need root to install ${missing[*]}"
        say "installing Debian packages: ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
    # Debian's postgresql package starts a system cluster on 5432; nothing here uses it.
}

ensure_cargo_pgrx() {
    command -v cargo >/dev/null || die "cargo not found (the machine's Rust toolchain is required)"
    if [ "$(cargo pgrx --version 2>/dev/null)" != "cargo-pgrx ${PGRX_VERSION}" ]; then
        say "installing cargo-pgrx ${PGRX_VERSION} (about 12 minutes)"
        cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked
    fi
    local cfg="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
    if ! grep -qs "pg${PG_MAJOR} = \"${PG_CONFIG}\"" "$cfg"; then
        say "pointing pgrx at Debian's PostgreSQL ${PG_MAJOR} (never downloads one)"
        cargo pgrx init --pg${PG_MAJOR} "${PG_CONFIG}"
    fi
}

PGSPOT_VERSION=0.9.4

# pgspot (PyPI) checks the install and upgrade scripts for search-path hazards.
ensure_pgspot() {
    if [ "$(pgspot --version 2>/dev/null)" != "pgspot ${PGSPOT_VERSION}" ]; then
        say "installing pgspot ${PGSPOT_VERSION}"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "pgspot==${PGSPOT_VERSION}"
        hash -r
    fi
}

ensure_toolchain() {
    ensure_apt_packages
    ensure_cargo_pgrx
}

# The Node client example (examples/node/) and its one dependency, pg, at the locked version;
# the TypeScript client (clients/node/) and the JSON Schemas' tools (schemas/); and Graphile
# Worker for the cron example (examples/graphile/).
ensure_node_example() {
    if [ ! -d "${REPO_ROOT}/examples/node/node_modules/pg" ]; then
        say "installing the Node example's dependencies (npm ci)"
        (cd "${REPO_ROOT}/examples/node" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    if [ ! -d "${REPO_ROOT}/clients/node/node_modules/pg" ]; then
        say "installing the TypeScript client's dependencies (npm ci)"
        (cd "${REPO_ROOT}/clients/node" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    if [ ! -d "${REPO_ROOT}/schemas/node_modules/ajv" ]; then
        say "installing the JSON Schemas' validator and type generator (npm ci)"
        (cd "${REPO_ROOT}/schemas" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    if [ ! -x "${REPO_ROOT}/examples/graphile/node_modules/.bin/graphile-worker" ]; then
        say "installing Graphile Worker for the cron example (npm ci)"
        (cd "${REPO_ROOT}/examples/graphile" && npm ci --no-audit --no-fund --loglevel=error)
    fi
}

# A directory for clusters and scratch files that the postgres user can traverse: .work in the
# repository when its path is reachable, otherwise a per-repository directory in /var/tmp.
work_dir() {
    local dir="${CORTEX_WORK_DIR:-}"
    if [ -z "$dir" ]; then
        if runuser -u postgres -- test -r "${REPO_ROOT}/Cargo.toml" 2>/dev/null; then
            dir="${REPO_ROOT}/.work"
        else
            dir="/var/tmp/cortex_buffer-$(printf '%s' "${REPO_ROOT}" | md5sum | cut -c1-8)"
        fi
    fi
    mkdir -p "$dir"
    chmod 755 "$dir"
    printf '%s\n' "$dir"
}

# cargo pgrx writes the shared library in place (same inode). A running server that preloads
# it would then execute the new bytes through its old mapping and crash (SIGILL seen here).
# Unlinking first gives the new build a new inode; running servers keep the old one.
unlink_installed_library() {
    rm -f "$("${PG_CONFIG}" --pkglibdir)/cortex_buffer.so"
}

# install_extension [--release]: a debug build unless --release is passed.
install_extension() {
    local build="debug build"
    [ "${1:-}" = "--release" ] && build="release build"
    say "building and installing the extension (${build})"
    unlink_installed_library
    (cd "${REPO_ROOT}" && cargo pgrx install --pg-config "${PG_CONFIG}" "$@")
    install_released_scripts
}

# Install scripts of earlier versions (sql/released/), so `CREATE EXTENSION ... VERSION` of an
# older release followed by `ALTER EXTENSION ... UPDATE` works (and is tested). The current
# version's script is always the one cargo pgrx generated.
install_released_scripts() {
    local current extdir f
    current="$(sed -n 's/^version = "\(.*\)"/\1/p' "${REPO_ROOT}/Cargo.toml" | head -1)"
    extdir="$("${PG_CONFIG}" --sharedir)/extension"
    for f in "${REPO_ROOT}"/sql/released/cortex_buffer--*.sql; do
        [ -e "$f" ] || continue
        [ "$(basename "$f")" = "cortex_buffer--${current}.sql" ] && continue
        install -m 644 "$f" "${extdir}/"
    done
}
