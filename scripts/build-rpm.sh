#!/usr/bin/env bash
# Builds the EL9 rpms of the agent and the collector with rpmbuild from binaries already built
# (deploy/packaging/rpm/*.spec):
#
#   scripts/build-rpm.sh                    # release build, then target/rpm/*.rpm
#   scripts/build-rpm.sh --bin DIR [--out DIR] [--fast] [agent|collector ...]
#                                           # package the binaries in DIR (no build); --fast:
#                                           # zstd level 1 instead of EL9's 19 (tests)
#
# Installs rpm (Debian package `rpm`, which carries rpmbuild) when missing. Build on EL9 (or a
# Rocky/Alma 9 container) for a binary that links the glibc it will run with; the packages only
# copy files, so rpmbuild from Debian makes the same package. Prints the path of each rpm.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bin=""
out=$root/target/rpm
pkgs=()
payload=()
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$(cd "$2" && pwd); shift 2 ;;
    --out) mkdir -p "$2"; out=$(cd "$2" && pwd); shift 2 ;;
    --fast) payload=(--define "_binary_payload w1.zstdio"); shift ;;
    agent|collector) pkgs+=("$1"); shift ;;
    *) echo "usage: $0 [--bin DIR] [--out DIR] [--fast] [agent|collector ...]" >&2; exit 2 ;;
  esac
done
[ ${#pkgs[@]} -gt 0 ] || pkgs=(agent collector)

if ! command -v rpmbuild >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends rpm >/dev/null
fi
if [ -z "$bin" ]; then
  args=()
  for p in "${pkgs[@]}"; do args+=(-p "storwatch-$p"); done
  cargo build --release --locked "${args[@]}"
  bin=$root/target/release
fi

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
mkdir -p "$out"
for p in "${pkgs[@]}"; do
  rpmbuild -bb --quiet \
    --define "_topdir $top" \
    --define "_rpmdir $out" \
    --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
    --define "swroot $root" \
    --define "swbin $bin" \
    --define "swversion $version" \
    "${payload[@]}" \
    "deploy/packaging/rpm/storwatch-$p.spec" >&2
  echo "$out/storwatch-$p-$version-1.el9.$(uname -m).rpm"
done
