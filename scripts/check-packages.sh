#!/usr/bin/env bash
# Builds the agent's and the collector's rpm (and, when cargo-deb is installed, deb) and checks
# that they own their directories with the right modes (docs/deploy.md, "1. Packages"):
#
#   scripts/check-packages.sh                # release build, then the packages
#   scripts/check-packages.sh --bin DIR      # package the binaries in DIR (e.g. target/debug)
#
# rpm: storwatch-agent owns /etc/storwatch (0755) and /var/lib/storwatch (0700),
# storwatch-collector /etc/storwatch (0755), all root:root. Both rpms are installed into a
# scratch root (files only, no scriptlets) where `rpm -qf` must name the owners and `rpm -V`
# must find nothing changed. deb: /etc/storwatch is in both packages' data (dpkg shares a
# directory between packages); /var/lib/storwatch is made by the agent's postinst (0700) and
# removed by its purge.
#
# Needs rpm (Debian package `rpm`; scripts/build-rpm.sh installs it when missing). Prints what it
# found; exits 1 when any package does not own what it should (after checking them all).
set -euo pipefail
cd "$(dirname "$0")/.."

build=()
bin=target/release
if [ "${1:-}" = --bin ]; then
  bin=$2
  build=(--bin "$2" --fast)
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

fail=0
# expect LISTING MODE PATH: the listing (rpm -qlvp or dpkg -c) has PATH as a directory with MODE
expect() {
  local listing=$1 mode=$2 path=$3
  if grep -Eq "^${mode} +[0-9]+ +root +root .* ${path}/?\$" <<<"$listing" \
     || grep -Eq "^${mode} root/root .* \.${path}/?\$" <<<"$listing"; then
    echo "ok   $mode $path"
  else
    echo "FAIL $path is not a directory with mode $mode in the package"
    fail=1
  fi
}

mapfile -t rpms < <(scripts/build-rpm.sh "${build[@]}" --out "$out/rpm")
for rpm_file in "${rpms[@]}"; do
  echo "== $(basename "$rpm_file")"
  listing=$(rpm -qlvp "$rpm_file" 2>/dev/null)
  expect "$listing" drwxr-xr-x /etc/storwatch
  case $rpm_file in
    */storwatch-agent-*) expect "$listing" drwx------ /var/lib/storwatch ;;
  esac
done

echo "== installed into a scratch root"
root=$out/root
rpm --root "$root" --initdb
rpm --root "$root" -i --nodeps --noscripts "${rpms[@]}" 2>/dev/null
for path in /etc/storwatch /var/lib/storwatch /etc/storwatch/agent.toml /etc/storwatch/collector.toml; do
  owners=$(rpm --root "$root" -qf --qf '%{NAME} ' "$path" 2>&1 || true)
  echo "rpm -qf $path: $owners"
  case $path in
    /etc/storwatch) want="storwatch-agent storwatch-collector" ;;
    /var/lib/storwatch|*/agent.toml) want=storwatch-agent ;;
    *) want=storwatch-collector ;;
  esac
  for w in $want; do
    grep -qw "$w" <<<"$owners" || { echo "FAIL $path is not owned by $w"; fail=1; }
  done
done
if verify=$(rpm --root "$root" -V --nodeps storwatch-agent storwatch-collector 2>&1); then
  echo "rpm -V: nothing changed"
else
  echo "FAIL rpm -V: $verify"
  fail=1
fi
stat -c '%A %U:%G %n' "$root/etc/storwatch" "$root/var/lib/storwatch" || true

if cargo deb --version >/dev/null 2>&1 && command -v dpkg >/dev/null; then
  for pkg in agent collector; do
    deb_file=$(cargo deb --no-build -p storwatch-"$pkg" 2>/dev/null | tail -1)
    echo "== $deb_file"
    listing=$(dpkg -c "$deb_file")
    expect "$listing" drwxr-xr-x /etc/storwatch
  done
else
  echo "== deb: cargo-deb not installed, not checked"
fi

if [ "$fail" -ne 0 ]; then
  echo "== packages do not own their directories"
  exit 1
fi
echo "== packages own their directories"
