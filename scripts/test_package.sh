#!/usr/bin/env bash
# The Debian packages, as an operator installs them: builds both (scripts/package.sh), removes
# every file a source install (`cargo pgrx install`) put in PostgreSQL's directories, installs
# the packages with `apt-get install ./<file>.deb`, runs the golden-file suite against that
# install, checks that the shipper answers --help, then removes both packages and checks that
# nothing of them is left. scripts/test.sh runs it last; it leaves no cortex_buffer installed
# (scripts/run.sh installs a build again).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

bash scripts/package.sh
mapfile -t DEBS < <(bash scripts/package.sh --print)
EXT_PKG="postgresql-${PG_MAJOR}-cortex-buffer"
SHIP_PKG="cortex-buffer-ship"
LIBDIR="$("${PG_CONFIG}" --pkglibdir)"
EXTDIR="$("${PG_CONFIG}" --sharedir)/extension"

leftovers() {
    find "${LIBDIR}" "${EXTDIR}" -maxdepth 1 -name 'cortex_buffer*' 2>/dev/null
    [ ! -e /usr/bin/cortex-buffer-ship ] || echo /usr/bin/cortex-buffer-ship
}

say "removing the packages, if installed, and every file a source install left"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${EXT_PKG}" "${SHIP_PKG}" >/dev/null 2>&1 || true
leftovers | xargs -r rm -f
[ -z "$(leftovers)" ] || die "files left before installing the packages: $(leftovers | tr '\n' ' ')"

say "apt-get install ${DEBS[*]#"${REPO_ROOT}/"}"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${DEBS[@]}" >/dev/null
for pkg in "${EXT_PKG}" "${SHIP_PKG}"; do
    dpkg-query -W -f='${Status}' "${pkg}" | grep -q "install ok installed" || die "${pkg} is not installed"
    dpkg --verify "${pkg}" || die "${pkg}: installed files differ from the package's md5sums"
done
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
[ "$(dpkg-query -W -f='${Version}' "${EXT_PKG}")" = "${VERSION}" ] || die "${EXT_PKG}'s version is not ${VERSION}"
dpkg-query -W -f='${Depends}' "${EXT_PKG}" | grep -q "postgresql-${PG_MAJOR}" || die "${EXT_PKG} does not depend on postgresql-${PG_MAJOR}"

say "golden-file suite against the packaged extension"
bash scripts/regress.sh

say "the packaged shipper answers --help"
/usr/bin/cortex-buffer-ship --help | grep -q -- "--sessions-dir" || die "cortex-buffer-ship --help says nothing of --sessions-dir"

say "removing both packages"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${EXT_PKG}" "${SHIP_PKG}" >/dev/null
[ -z "$(leftovers)" ] || die "files left after removing the packages: $(leftovers | tr '\n' ' ')"
for pkg in "${EXT_PKG}" "${SHIP_PKG}"; do
    if dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q "installed"; then die "${pkg} is still installed"; fi
done
say "packages: built, installed, tested and removed cleanly"
