#!/bin/sh
# The Debian package, installed on this machine as a user would (README "Install"), then removed:
#   tests/package/test-deb.sh build-release/sluice_VERSION_ARCH.deb
# Checks: `apt-get install ./sluice_*.deb` resolves its dependencies; the installed binary's
# version is the package's; the shipped /etc/sluice/sluice.yaml passes `sluice check`;
# systemd-analyze verifies the unit; the postinst made the sluice system user, /var/lib/sluice
# and /var/log/sluice with their modes, and enabled the unit; sluice runs the shipped config as
# that user with the unit's environment (answers /healthz, denies a request it must deny and
# records it, creates the sandbox CA); an admin's edit of the config survives a reinstall; a
# config that fails `sluice check` leaves the unit disabled; purge leaves nothing behind.
# Run by scripts/test as root. It will not touch a sluice installed by anything else: then it
# says so and exits 0 without testing.
set -eu

deb=$1
case $deb in
  /*) ;;
  *) deb=$(pwd)/$deb ;;
esac
[ -f "$deb" ] || { echo "FAIL: no package at $deb" >&2; exit 1; }

if dpkg-query -W -f='${Status}' sluice 2>/dev/null | grep -q installed ||
   [ -e /etc/sluice ] || [ -e /var/lib/sluice ] || [ -e /var/log/sluice ]; then
  echo "SKIP: sluice is already installed here (or its directories exist); not testing the .deb"
  exit 0
fi

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

apt_get() {
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -qq \
    -o Dpkg::Options::=--force-confold "$@"
}

user_existed=no
getent passwd sluice >/dev/null && user_existed=yes
scratch=$(mktemp -d)
run_pid=""
cleanup() {
  if [ -n "$run_pid" ]; then
    kill "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  apt_get purge -y sluice >/dev/null 2>&1 || true
  if [ $user_existed = no ] && getent passwd sluice >/dev/null; then
    userdel sluice 2>/dev/null || true
    groupdel sluice 2>/dev/null || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT

config=/etc/sluice/sluice.yaml
wants=/etc/systemd/system/multi-user.target.wants/sluice.service

# --- install
apt_get install -y "$deb" >"$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log"; fail "apt-get install $deb"; }
pass "apt-get install $(basename "$deb")"

version=$(dpkg-deb -f "$deb" Version)
/usr/bin/sluice version | head -n 1 | grep -qx "sluice $version" ||
  fail "sluice version is not $version: $(/usr/bin/sluice version | head -n 1)"
pass "sluice version: $version"

/usr/bin/sluice check -c "$config" || fail "the shipped $config does not pass sluice check"
pass "sluice check -c $config"

unit=$(dpkg -L sluice | grep '/systemd/system/sluice.service$') || fail "no unit installed"
systemd-analyze verify "$unit" >"$scratch/verify.log" 2>&1 ||
  { cat "$scratch/verify.log"; fail "systemd-analyze verify $unit"; }
[ ! -s "$scratch/verify.log" ] || { cat "$scratch/verify.log"; fail "systemd-analyze warns"; }
pass "systemd-analyze verify $unit"
grep -q "^ExecStart=/usr/bin/sluice run -c $config\$" "$unit" || fail "ExecStart in $unit"

uid=$(id -u sluice) || fail "no sluice user"
[ "$uid" -lt 1000 ] || fail "sluice is not a system user (uid $uid)"
[ "$(getent passwd sluice | cut -d: -f7)" = /usr/sbin/nologin ] || fail "sluice has a login shell"
pass "system user sluice (uid $uid)"

mode_owner() { stat -c '%a %U:%G' "$1"; }
[ "$(mode_owner /var/lib/sluice)" = "755 sluice:sluice" ] ||
  fail "/var/lib/sluice is $(mode_owner /var/lib/sluice)"
[ "$(mode_owner /var/log/sluice)" = "750 sluice:sluice" ] ||
  fail "/var/log/sluice is $(mode_owner /var/log/sluice)"
[ "$(mode_owner "$config")" = "644 root:root" ] || fail "$config is $(mode_owner "$config")"
pass "/var/lib/sluice 0755, /var/log/sluice 0750, owned by sluice; $config root's"

[ -L "$wants" ] || fail "the unit is not enabled ($wants missing)"
pass "sluice.service enabled"

man -w sluice >/dev/null || fail "man -w sluice"
MANWIDTH=80 man -P cat sluice 2>/dev/null | grep -q "sluice run" || fail "man sluice"
for doc in README.md docs/cli.md docs/policy.md; do
  [ -f "/usr/share/doc/sluice/$doc" ] || fail "no $doc in /usr/share/doc/sluice"
done
pass "man sluice; /usr/share/doc/sluice"

# --- the shipped config, run as the unit runs it (user, umask, XDG_STATE_HOME), when its ports
# are free here; /healthz, one request sluice must deny without resolving anything, SIGTERM.
if ss -Hltn 'sport = :3128 or sport = :9901' | grep -q .; then
  echo "note: 127.0.0.1:3128 or :9901 in use here: not running the shipped config"
else
  (umask 0077 && exec setpriv --reuid=sluice --regid=sluice --clear-groups \
     env XDG_STATE_HOME=/var/lib /usr/bin/sluice run -c "$config") >"$scratch/run.log" 2>&1 &
  run_pid=$!
  i=0
  until curl -sf http://127.0.0.1:9901/healthz >/dev/null; do
    i=$((i + 1))
    [ $i -lt 100 ] || { cat "$scratch/run.log"; fail "the shipped config: no /healthz"; }
    kill -0 "$run_pid" 2>/dev/null || { cat "$scratch/run.log"; fail "sluice run exited"; }
    sleep 0.1
  done
  status=$(curl -s -o /dev/null -w '%{http_code}' -x http://127.0.0.1:3128 \
    http://denied.example/) || true
  [ "$status" = 403 ] || fail "a host outside the shipped policy got $status, not 403"
  kill -TERM "$run_pid"
  wait "$run_pid" || { cat "$scratch/run.log"; fail "sluice run did not exit 0 on SIGTERM"; }
  run_pid=""
  [ "$(mode_owner /var/lib/sluice/default/ca.key)" = "600 sluice:sluice" ] ||
    fail "the sandbox CA key is not 0600 sluice's"
  [ -f /var/lib/sluice/default/ca.pem ] || fail "no sandbox CA certificate"
  # The sandbox's clients, of any user, open the certificate; nobody but sluice the key.
  for user in nobody _apt; do
    getent passwd "$user" >/dev/null || continue
    setpriv --reuid="$user" --regid=nogroup --clear-groups \
      cat /var/lib/sluice/default/ca.pem /var/lib/sluice/default/ca.p12 >/dev/null ||
      fail "$user cannot read the sandbox CA certificate"
    if setpriv --reuid="$user" --regid=nogroup --clear-groups \
      cat /var/lib/sluice/default/ca.key >/dev/null 2>&1; then
      fail "$user can read the sandbox CA key"
    fi
  done
  grep -q '"not_allowed_host"' /var/log/sluice/default.jsonl || fail "no audit record of the denial"
  /usr/bin/sluice audit verify /var/log/sluice/default.jsonl >/dev/null ||
    fail "the audit log does not verify"
  pass "the shipped config runs as sluice: CA in /var/lib/sluice, audit in /var/log/sluice"
fi

# --- an admin's edit survives a reinstall (dpkg keeps a changed conffile)
echo "# edited by the admin" >>"$config"
apt_get install --reinstall -y "$deb" >"$scratch/reinstall.log" 2>&1 ||
  { cat "$scratch/reinstall.log"; fail "reinstall"; }
grep -q "^# edited by the admin\$" "$config" || fail "a reinstall replaced the admin's $config"
pass "an edited $config survives a reinstall"

# --- remove: the program goes, the config, CAs and audit logs stay
apt_get remove -y sluice >"$scratch/remove.log" 2>&1 || { cat "$scratch/remove.log"; fail "remove"; }
[ ! -e /usr/bin/sluice ] || fail "/usr/bin/sluice is left after remove"
[ ! -e "$wants" ] || fail "the unit is still enabled after remove"
for kept in "$config" /var/lib/sluice /var/log/sluice; do
  [ -e "$kept" ] || fail "remove deleted $kept"
done
pass "apt-get remove keeps $config, /var/lib/sluice, /var/log/sluice"

# --- purge: nothing left
apt_get purge -y sluice >"$scratch/purge.log" 2>&1 || { cat "$scratch/purge.log"; fail "purge"; }
for path in /etc/sluice /var/lib/sluice /var/log/sluice /usr/bin/sluice "$unit" "$wants" \
            /etc/systemd/system/sluice.service /usr/share/doc/sluice \
            /usr/share/man/man1/sluice.1.gz; do
  if [ -e "$path" ] || [ -L "$path" ]; then
    fail "$path is left after purge"
  fi
done
if find /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
     -name '*sluice*' 2>/dev/null | grep -q .; then
  fail "deb-systemd-helper state is left after purge"
fi
pass "apt-get purge leaves nothing"

# --- a config that fails `sluice check` at install: installed, but not enabled, and says why
mkdir -p /etc/sluice
printf 'version: 1\nsandboxes:\n  - name: x\n    listen: nowhere\n' >"$config"
apt_get install -y "$deb" >"$scratch/broken.log" 2>&1 ||
  { cat "$scratch/broken.log"; fail "install over a bad config"; }
grep -q "does not pass 'sluice check'" "$scratch/broken.log" ||
  { cat "$scratch/broken.log"; fail "the install did not say the config fails sluice check"; }
grep -q "sluice.yaml:4:" "$scratch/broken.log" ||
  { cat "$scratch/broken.log"; fail "the install did not show where the config is wrong"; }
[ ! -e "$wants" ] || fail "the unit was enabled with a config that fails sluice check"
pass "a config that fails sluice check: installed, not enabled, FILE:LINE shown"

apt_get purge -y sluice >/dev/null 2>&1 || fail "purge"
[ ! -e /etc/sluice ] || fail "/etc/sluice is left after purge"
echo "package test passed"
