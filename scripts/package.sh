#!/usr/bin/env bash
# Builds the Debian packages, release builds, into target/debian/:
#   postgresql-15-cortex-buffer_<version>_<arch>.deb   the extension (from `cargo pgrx package`):
#       the library, the control file, the install script of this version, the upgrade script
#       from the release before it, and that release's install script (so it can be created
#       and updated, as with a source install)
#   cortex-buffer-ship_<version>_<arch>.deb            the shipper, /usr/bin/cortex-buffer-ship
# The version is Cargo.toml's. Install with `apt install ./<file>.deb`; a server that preloads
# the library must be restarted to load a new one (dpkg writes a new file and renames it over
# the old, so a running server keeps its mapping and never crashes).
#   bash scripts/package.sh            build both
#   bash scripts/package.sh --print    print the two paths (after a build)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
ARCH="$(dpkg --print-architecture)"
OUT="${REPO_ROOT}/target/debian"
EXT_DEB="${OUT}/postgresql-${PG_MAJOR}-cortex-buffer_${VERSION}_${ARCH}.deb"
SHIP_DEB="${OUT}/cortex-buffer-ship_${VERSION}_${ARCH}.deb"
if [ "${1:-}" = "--print" ]; then
    printf '%s\n%s\n' "${EXT_DEB}" "${SHIP_DEB}"
    exit 0
fi

ensure_toolchain
MAINTAINER="cortex_buffer maintainers <maintainers@cortex-buffer.invalid>"
HOMEPAGE="https://github.com/cortex-buffer/cortex_buffer"

# control <dir> <package> <depends> <description> <long description>: DEBIAN/control, with the
# installed size and the md5sums dpkg --verify checks.
control() {
    local root="$1" size
    size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
    mkdir -p "${root}/DEBIAN"
    cat >"${root}/DEBIAN/control" <<CONTROL
Package: $2
Version: ${VERSION}
Architecture: ${ARCH}
Maintainer: ${MAINTAINER}
Installed-Size: ${size}
Depends: $3
Section: database
Priority: optional
Homepage: ${HOMEPAGE}
Description: $4
$(printf '%s\n' "$5" | fold -s -w 78 | sed 's/^/ /; s/ *$//')
CONTROL
    (cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
}

# The oldest glibc a binary runs on: the highest GLIBC_ symbol version it needs, so that apt
# refuses the package on a system whose libc6 is older than the build's.
libc_dep() {
    local v
    v="$(objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)"
    printf 'libc6 (>= %s)' "${v:-2.17}"
}

say "building the extension for PostgreSQL ${PG_MAJOR} (cargo pgrx package, release)"
STAGE="$(mktemp -d)"
trap 'rm -rf "${STAGE}"' EXIT
cargo pgrx package --pg-config "${PG_CONFIG}" --out-dir "${STAGE}/pgrx" >&2
EXT_ROOT="${STAGE}/ext"
mkdir -p "${EXT_ROOT}"
cp -a "${STAGE}/pgrx/." "${EXT_ROOT}/"
EXTDIR="${EXT_ROOT}$("${PG_CONFIG}" --sharedir)/extension"
LIBDIR="${EXT_ROOT}$("${PG_CONFIG}" --pkglibdir)"
[ -f "${LIBDIR}/cortex_buffer.so" ] || die "cargo pgrx package made no ${LIBDIR#"${EXT_ROOT}"}/cortex_buffer.so"
[ -f "${EXTDIR}/cortex_buffer--${VERSION}.sql" ] || die "cargo pgrx package made no install script for ${VERSION}"
for f in sql/released/cortex_buffer--*.sql; do
    [ "$(basename "$f")" = "cortex_buffer--${VERSION}.sql" ] || install -m 644 "$f" "${EXTDIR}/"
done
install -m 644 sql/cortex_buffer--*--*.sql "${EXTDIR}/"
DOCDIR="${EXT_ROOT}/usr/share/doc/postgresql-${PG_MAJOR}-cortex-buffer"
install -d "${DOCDIR}"
install -m 644 README.md UPDATING.md CHANGELOG.md "${DOCDIR}/"
install -m 644 LICENSE "${DOCDIR}/copyright"
find "${EXT_ROOT}" -type d -exec chmod 755 {} +
find "${EXT_ROOT}" -type f -exec chmod 644 {} +
strip --strip-unneeded "${LIBDIR}/cortex_buffer.so"
control "${EXT_ROOT}" "postgresql-${PG_MAJOR}-cortex-buffer" "postgresql-${PG_MAJOR}, $(libc_dep "${LIBDIR}/cortex_buffer.so"), libgcc-s1" \
    "durable, verifiable execution state for LLM-agent control planes" \
    "cortex_buffer is a PostgreSQL ${PG_MAJOR} extension: CRC-validated checkpoints with history and fencing, heartbeats and a zombie reaper, crash-aware retry decisions, a per-agent circuit breaker, exact token and cost accounting, and a background worker that indexes agents' JSONL session files exactly once, so that a restarted agent learns in one call where to resume. Add cortex_buffer to shared_preload_libraries, restart, and run CREATE EXTENSION cortex_buffer (docs/install.md)."
mkdir -p "${OUT}"
dpkg-deb --root-owner-group -Zxz --build "${EXT_ROOT}" "${EXT_DEB}" >&2

say "building the shipper (cortex-buffer-ship, release)"
cargo build --release -p cortex_buffer_ship >&2
SHIP_ROOT="${STAGE}/ship"
install -d "${SHIP_ROOT}/usr/bin" "${SHIP_ROOT}/usr/share/doc/cortex-buffer-ship"
install -m 755 "${CARGO_TARGET_DIR:-target}/release/cortex-buffer-ship" "${SHIP_ROOT}/usr/bin/"
strip --strip-unneeded "${SHIP_ROOT}/usr/bin/cortex-buffer-ship"
install -m 644 LICENSE "${SHIP_ROOT}/usr/share/doc/cortex-buffer-ship/copyright"
find "${SHIP_ROOT}" -type d -exec chmod 755 {} +
control "${SHIP_ROOT}" "cortex-buffer-ship" "$(libc_dep "${SHIP_ROOT}/usr/bin/cortex-buffer-ship"), libgcc-s1" \
    "pushes agents' session files to a cortex_buffer database" \
    "cortex-buffer-ship runs beside agent pods (a sidecar or a DaemonSet) where the database server cannot see their volume, and pushes every new byte of their JSONL session files over SQL to cortex_buffer, which indexes it exactly once. Stateless: it asks the server where each file stands."
dpkg-deb --root-owner-group -Zxz --build "${SHIP_ROOT}" "${SHIP_DEB}" >&2
say "built ${EXT_DEB#"${REPO_ROOT}/"} and ${SHIP_DEB#"${REPO_ROOT}/"}"
