#!/bin/sh
# sandbox-netns.sh: make a network namespace a sandbox whose only way out is sluice.
#
#   sandbox-netns.sh up NAME --gateway 10.200.0.1/30 --sandbox 10.200.0.2
#                    [--transparent-port 3129] [--dns-port 53] [--tcp-ports "80 443"]
#                    [--gateway6 fd00:200::1/64 --sandbox6 fd00:200::2] [--print-nft]
#   sandbox-netns.sh down NAME
#   sandbox-netns.sh status NAME
#
# Run as root (CAP_NET_ADMIN, and write access to /etc/netns), on the gateway host, where sluice
# runs with, for the sandbox of this example:
#     transparent: 10.200.0.1:3129      # --gateway address, --transparent-port
#     dns_listen:  10.200.0.1:53        # --gateway address, --dns-port
# Needs iproute2 and nftables (Debian: iproute2, nftables), coreutils, nothing else.
#
# up NAME: creates (each step only when missing, so `up` again repairs, e.g. after an
#   `nft flush ruleset`, and changes nothing else):
#   - the nft table `inet sluice_NAME` in the gateway's (the current) namespace, loaded first
#     and atomically (never a moment with half the rules; `up` again replaces it, never
#     duplicates a rule). Its chains, for traffic from the host end of the veth only:
#       guard       (prerouting, raw): drop packets whose source is not the sandbox's address
#                   (no spoofed sources, so no reply can be faked to a host socket), and all
#                   IPv6 when no --gateway6 is given;
#       prerouting  (nat, dstnat): UDP and TCP 53 to the gateway -> --dns-port; TCP to
#                   --tcp-ports on ANY address -> --transparent-port on the gateway (sluice
#                   reads the dialled address with SO_ORIGINAL_DST);
#       input       (filter): accept established/related, and new connections only when
#                   prerouting redirected them to the transparent or DNS port; drop the rest
#                   (sluice's explicit proxy and admin ports, sshd, ... stay out of reach);
#       forward     (filter): drop everything from or to the veth, whatever ip_forward says.
#     The rules sit on the gateway side on purpose: root inside the sandbox could delete rules
#     kept there, and SO_ORIGINAL_DST can only be read in the namespace that did the NAT.
#   - the network namespace NAME;
#   - a veth pair slh-NAME (gateway side, --gateway address, alias "sluice-netns NAME") and
#     sls-NAME (moved into NAME, --sandbox address), lo up, default route via the gateway;
#     for a NAME longer than 11 characters the names are slh/sls + 12 hex digits of its SHA-256
#     (interface names have at most 15 characters);
#   - IPv6 likewise when --gateway6 and --sandbox6 are given (addresses without DAD; the
#     sandbox's address must lie in the gateway's prefix);
#   - /etc/netns/NAME/resolv.conf with the single line `nameserver <gateway IPv4>`, which
#     `ip netns exec NAME ...` bind-mounts over /etc/resolv.conf. (Processes that enter the
#     namespace another way, e.g. a container runtime, must be given that file themselves.)
#   An existing namespace NAME is used as it is (a container's, named with `ip netns attach
#   NAME PID`), unless NAME names the namespace the script runs in: that one is refused.
#   Refuses, changing nothing, when what exists contradicts the request (another address on
#   slh-NAME, the gateway address on another interface, a foreign resolv.conf): `down` first.
#   When a step fails, what this run created is removed again, and the message names the step.
#   --dns-port 53 is served without a redirect (a redirect to the same port is no NAT at all);
#   then the input chain accepts UDP and TCP 53 to the gateway directly.
#   --print-nft prints the nft script `up` would load, and changes nothing (no root needed).
#
# down NAME: deletes slh-NAME (and with it its peer), the namespace NAME, the table and
#   /etc/netns/NAME (resolv.conf; the directory only when nothing else is in it). A part that
#   is already gone is a note, not an error; nothing else is touched. Processes still running
#   in the namespace keep it alive, with no interface but lo.
#
# status NAME: prints what exists; exit 0 when everything is there, 3 when nothing is, 1 when
#   only some of it is.
#
# Exit codes: 0 success, 1 failure (the message says which step), 2 bad usage.
set -uf  # no globbing: nothing here wants it, and --tcp-ports "*" must not see files

PROG=sandbox-netns.sh

usage() {  # the synopsis, to stderr: a mistake
  {
    echo "usage:"
    sed -n '4,8s/^#//p' "$0"
    echo "'$PROG --help' says what each does."
  } >&2
  exit 2
}

show_help() {  # the header comment, to stdout
  sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"
  exit 0
}

say() { printf '%s: %s\n' "$PROG" "$*"; }
warn() { printf '%s: %s\n' "$PROG" "$*" >&2; }
bad_usage() {
  warn "$*"
  warn "usage: $PROG up|down|status NAME [options]; $PROG --help"
  exit 2
}

# --- values --------------------------------------------------------------------------------

valid_name() {
  case $1 in
    '' | [!A-Za-z0-9]* | *[!A-Za-z0-9_.-]*) return 1 ;;
  esac
  [ "${#1}" -le 64 ]
}

valid_port() {
  case $1 in
    '' | 0* | *[!0-9]*) return 1 ;;
  esac
  [ "${#1}" -le 5 ] && [ "$1" -le 65535 ]
}

# ipv4_int A.B.C.D: prints the address as an integer, fails on anything else.
ipv4_int() {
  case $1 in
    '' | *[!0-9.]* | .* | *. | *..*) return 1 ;;
  esac
  old_ifs=$IFS
  IFS=.
  # shellcheck disable=SC2086 # split on dots on purpose; only digits and dots are left
  set -- $1
  IFS=$old_ifs
  [ $# -eq 4 ] || return 1
  value=0
  for octet in "$@"; do
    case $octet in
      0?* | ????*) return 1 ;;
    esac
    [ "$octet" -le 255 ] || return 1
    value=$((value * 256 + octet))
  done
  echo "$value"
}

valid_ipv6() {
  case $1 in
    *:*) ;;
    *) return 1 ;;
  esac
  case $1 in
    *[!0-9A-Fa-f:.]*) return 1 ;;
  esac
  # iproute2 parses it (no root needed, nothing changes): the only full IPv6 parser at hand.
  ip -6 -o addr show to "$1/128" >/dev/null 2>&1
}

valid_plen() {  # prefix length $1 within 0..$2
  case $1 in
    '' | 0?* | *[!0-9]*) return 1 ;;
  esac
  [ "$1" -le "$2" ]
}

# --- names derived from NAME ------------------------------------------------------------------

derive_names() {
  if [ "${#NAME}" -le 11 ]; then
    HOST_IF="slh-$NAME"
    SBX_IF="sls-$NAME"
  else
    hash=$(printf '%s' "$NAME" | sha256sum | cut -c1-12)
    HOST_IF="slh$hash"
    SBX_IF="sls$hash"
  fi
  TABLE="sluice_$NAME"
  ALIAS="sluice-netns $NAME"
  ETC_DIR="/etc/netns/$NAME"
  RESOLV="$ETC_DIR/resolv.conf"
}

# --- options of `up` ------------------------------------------------------------------------

parse_up_options() {
  GW4="" SBX4="" GW6="" SBX6="" TPORT=3129 DPORT=53 TCP_PORTS="80 443" PRINT_NFT=0
  while [ $# -gt 0 ]; do
    opt=$1
    case $opt in
      --print-nft) PRINT_NFT=1; shift; continue ;;
      --gateway | --sandbox | --gateway6 | --sandbox6 | --transparent-port | --dns-port | \
        --tcp-ports) ;;
      --*=*) bad_usage "write '${opt%%=*} ${opt#*=}', not '$opt'" ;;
      *) bad_usage "unknown option '$opt'" ;;
    esac
    [ $# -ge 2 ] || bad_usage "$opt needs a value"
    case $opt in
      --gateway) GW4=$2 ;;
      --sandbox) SBX4=$2 ;;
      --gateway6) GW6=$2 ;;
      --sandbox6) SBX6=$2 ;;
      --transparent-port) TPORT=$2 ;;
      --dns-port) DPORT=$2 ;;
      --tcp-ports) TCP_PORTS=$2 ;;
    esac
    shift 2
  done

  [ -n "$GW4" ] || bad_usage "up needs --gateway ADDRESS/PREFIX (e.g. 10.200.0.1/30)"
  [ -n "$SBX4" ] || bad_usage "up needs --sandbox ADDRESS (e.g. 10.200.0.2)"
  case $GW4 in
    */*) ;;
    *) bad_usage "--gateway $GW4: give the prefix length too, e.g. $GW4/30" ;;
  esac
  GW4_ADDR=${GW4%/*}
  PLEN4=${GW4#*/}
  gw_int=$(ipv4_int "$GW4_ADDR") || bad_usage "--gateway $GW4: not an IPv4 address"
  if ! valid_plen "$PLEN4" 31 || [ "$PLEN4" -lt 8 ]; then
    bad_usage "--gateway $GW4: the prefix length must be 8 to 31"
  fi
  case $SBX4 in
    */*) bad_usage "--sandbox $SBX4: give the address alone (it takes the gateway's prefix)" ;;
  esac
  sbx_int=$(ipv4_int "$SBX4") || bad_usage "--sandbox $SBX4: not an IPv4 address"
  size=$((1 << (32 - PLEN4)))
  net=$((gw_int / size * size))
  [ $((sbx_int / size * size)) -eq "$net" ] ||
    bad_usage "--sandbox $SBX4 is not inside --gateway $GW4"
  [ "$sbx_int" -ne "$gw_int" ] || bad_usage "--sandbox and --gateway are the same address"
  if [ "$PLEN4" -le 30 ]; then
    for a in "$gw_int" "$sbx_int"; do
      if [ "$a" -eq "$net" ] || [ "$a" -eq $((net + size - 1)) ]; then
        bad_usage "--gateway $GW4 / --sandbox $SBX4:" \
          "the network or broadcast address of the /$PLEN4"
      fi
    done
  fi

  if [ -n "$GW6" ] || [ -n "$SBX6" ]; then
    if [ -z "$GW6" ] || [ -z "$SBX6" ]; then
      bad_usage "--gateway6 and --sandbox6 go together"
    fi
    case $GW6 in
      */*) ;;
      *) bad_usage "--gateway6 $GW6: give the prefix length too, e.g. $GW6/64" ;;
    esac
    GW6_ADDR=${GW6%/*}
    PLEN6=${GW6#*/}
    valid_ipv6 "$GW6_ADDR" || bad_usage "--gateway6 $GW6: not an IPv6 address"
    if ! valid_plen "$PLEN6" 127 || [ "$PLEN6" -lt 8 ]; then
      bad_usage "--gateway6 $GW6: the prefix length must be 8 to 127"
    fi
    case $SBX6 in
      */*) bad_usage "--sandbox6 $SBX6: give the address alone (it takes the gateway's prefix)" ;;
    esac
    valid_ipv6 "$SBX6" || bad_usage "--sandbox6 $SBX6: not an IPv6 address"
    case $GW6_ADDR$SBX6 in
      *.*) bad_usage "--gateway6/--sandbox6: write IPv6 addresses without embedded IPv4" ;;
    esac
  fi

  valid_port "$TPORT" || bad_usage "--transparent-port $TPORT: not a port number (1-65535)"
  valid_port "$DPORT" || bad_usage "--dns-port $DPORT: not a port number (1-65535)"
  [ "$TPORT" != "$DPORT" ] ||
    bad_usage "--transparent-port and --dns-port must differ (both take TCP)"
  ports=""
  for p in $(printf '%s' "$TCP_PORTS" | tr ',' ' '); do
    valid_port "$p" || bad_usage "--tcp-ports: '$p' is not a port number (1-65535)"
    case " $ports " in
      *" $p "*) ;;
      *) ports="${ports:+$ports }$p" ;;
    esac
  done
  [ -n "$ports" ] || bad_usage "--tcp-ports: give at least one port"
  TCP_PORTS=$ports
}

# --- the ruleset ----------------------------------------------------------------------------

# Prints the nft script `up` loads: it creates the table if missing and deletes it in the same
# transaction before defining it anew, so loading it again replaces the table atomically.
ruleset() {
  i="iifname \"$HOST_IF\""
  port_set=$(printf '%s' "$TCP_PORTS" | sed 's/ /, /g')
  [ "$TCP_PORTS" = "${TCP_PORTS#* }" ] || port_set="{ $port_set }"
  v4_only=""
  [ -n "$GW6" ] || v4_only="meta nfproto ipv4 "
  cat <<EOF
# sluice examples/sandbox-netns.sh: sandbox netns "$NAME", gateway side of veth $HOST_IF.
# Loaded in one transaction: create the table if missing, delete it, define it anew.
table inet $TABLE
delete table inet $TABLE
table inet $TABLE {
	comment "sluice sandbox-netns.sh: netns $NAME via $HOST_IF"

	# Before conntrack: the sandbox speaks only from its own address (a spoofed source could
	# forge replies to the host's sockets, or make sluice answer a third party).
	chain guard {
		type filter hook prerouting priority raw; policy accept;
		$i ip saddr != $SBX4 counter drop
EOF
  if [ -n "$GW6" ]; then
    printf '\t\t%s ip6 saddr != { %s, fe80::/10 } counter drop\n' "$i" "$SBX6"
  else
    printf '\t\t# no --gateway6: no IPv6 at all, whatever the sandbox configures\n'
    printf '\t\t%s meta nfproto ipv6 counter drop\n' "$i"
  fi
  printf '\t}\n\n'

  cat <<EOF
	# The sandbox's resolver is sluice's dns_listen; its web traffic, to any address, goes to
	# sluice's transparent listener (on the gateway address: redirect picks the primary
	# address of $HOST_IF).
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
EOF
  if [ "$DPORT" = 53 ]; then
    printf '\t\t# dns_listen is on port 53 itself: no NAT (and TCP 53 stays out of the redirect)\n'
    printf '\t\t%s ip daddr %s meta l4proto { tcp, udp } th dport 53 accept\n' "$i" "$GW4_ADDR"
    [ -z "$GW6" ] ||
      printf '\t\t%s ip6 daddr %s meta l4proto { tcp, udp } th dport 53 accept\n' "$i" "$GW6_ADDR"
  else
    printf '\t\t%s ip daddr %s meta l4proto { tcp, udp } th dport 53 counter redirect to :%s\n' \
      "$i" "$GW4_ADDR" "$DPORT"
    [ -z "$GW6" ] ||
      printf '\t\t%s ip6 daddr %s meta l4proto { tcp, udp } th dport 53 counter redirect to :%s\n' \
        "$i" "$GW6_ADDR" "$DPORT"
  fi
  printf '\t\t%s %stcp dport %s counter redirect to :%s\n' "$i" "$v4_only" "$port_set" "$TPORT"
  printf '\t}\n\n'

  cat <<EOF
	# Only what prerouting redirected reaches a socket on this host: not sluice's explicit
	# proxy or admin port, not sshd, not the transparent port dialled directly.
	chain input {
		type filter hook input priority filter; policy accept;
		$i ct state established,related accept
		$i ip daddr $GW4_ADDR tcp dport $TPORT ct status dnat accept
EOF
  if [ "$DPORT" = 53 ]; then
    printf '\t\t%s ip daddr %s meta l4proto { tcp, udp } th dport 53 accept\n' "$i" "$GW4_ADDR"
  else
    printf '\t\t%s ip daddr %s meta l4proto { tcp, udp } th dport %s ct status dnat accept\n' \
      "$i" "$GW4_ADDR" "$DPORT"
  fi
  if [ -n "$GW6" ]; then
    printf '\t\t%s ip6 daddr %s tcp dport %s ct status dnat accept\n' "$i" "$GW6_ADDR" "$TPORT"
    if [ "$DPORT" = 53 ]; then
      printf '\t\t%s ip6 daddr %s meta l4proto { tcp, udp } th dport 53 accept\n' "$i" "$GW6_ADDR"
    else
      printf '\t\t%s ip6 daddr %s meta l4proto { tcp, udp } th dport %s ct status dnat accept\n' \
        "$i" "$GW6_ADDR" "$DPORT"
    fi
    printf '\t\t# neighbour discovery (conntrack does not track it), or IPv6 has no link\n'
    printf '\t\t%s icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } %s\n' \
      "$i" "ip6 hoplimit 255 accept"
  fi
  printf '\t\t%s counter drop\n' "$i"
  printf '\t}\n\n'

  cat <<EOF
	# Nothing is routed to or from the sandbox (UDP/QUIC, ICMP, other ports, IPv6), even with
	# ip_forward=1. Policy accept: other interfaces are not this table's business.
	chain forward {
		type filter hook forward priority filter; policy accept;
		$i counter drop
		oifname "$HOST_IF" counter drop
	}
}
EOF
}

# --- state ----------------------------------------------------------------------------------

netns_exists() {
  ip netns list 2>/dev/null | awk -v n="$NAME" '$1 == n { found = 1 } END { exit !found }'
}

link_exists() { ip link show dev "$HOST_IF" >/dev/null 2>&1; }

peer_exists() { ip -n "$NAME" link show dev "$SBX_IF" >/dev/null 2>&1; }

# The host end is ours when it carries our alias (a name could be taken by someone else).
link_is_ours() {
  line=$(ip -o link show dev "$HOST_IF" 2>/dev/null) || return 1
  line=$(printf '%s' "$line" | sed 's/[[:space:]]*$//')
  case $line in
    *"alias $ALIAS") return 0 ;;
  esac
  return 1
}

table_exists() {
  nft list tables inet 2>/dev/null | grep -qx "table inet $TABLE"
}

# global_addrs [-n NS] FAMILY DEV: the addresses (with prefix length) on DEV, one per line.
global_addrs() {
  if [ "$1" = -n ]; then
    ip -n "$2" -o "$3" addr show dev "$4" scope global 2>/dev/null | awk '{ print $4 }'
  else
    ip -o "$1" addr show dev "$2" scope global 2>/dev/null | awk '{ print $4 }'
  fi
}

# addrs_match FAMILY WANT DEV [NETNS]: DEV has no global address of FAMILY (-4 or -6), or
# exactly WANT (address/prefix length), compared by value: fd00:200:0::1 equals fd00:200::1.
addrs_match() {
  fam=$1
  want=$2
  dev=$3
  if [ -n "${4:-}" ]; then set -- ip -n "$4"; else set -- ip; fi
  list=$("$@" -o "$fam" addr show dev "$dev" scope global 2>/dev/null | awk '{ print $4 }')
  [ -n "$list" ] || return 0
  [ -n "$want" ] || return 1
  [ "$(printf '%s\n' "$list" | wc -l)" -eq 1 ] || return 1
  [ "${list#*/}" = "${want#*/}" ] || return 1
  full=32
  [ "$fam" = -4 ] || full=128
  [ -n "$("$@" -o "$fam" addr show dev "$dev" to "${want%/*}/$full" 2>/dev/null)" ]
}

# --- up -------------------------------------------------------------------------------------

CREATED=""  # what this run created, most recent first: undone in this order on failure

created() { CREATED="$1 $CREATED"; }

undo() {
  for what in $CREATED; do
    case $what in
      resolv) rm -f "$RESOLV" ;;
      etcdir) rmdir "$ETC_DIR" 2>/dev/null ;;
      link) ip link del dev "$HOST_IF" 2>/dev/null ;;
      netns) ip netns del "$NAME" 2>/dev/null ;;
      table) nft delete table inet "$TABLE" 2>/dev/null ;;
    esac || warn "undo: could not remove $what; run: $PROG down $NAME"
  done
  [ -z "$CREATED" ] || warn "undone: $CREATED"
  CREATED=""
}

fail() {
  warn "up $NAME: $*"
  undo
  exit 1
}

# step WHAT COMMAND...: runs the command; on failure names the step, undoes this run, exits 1.
step() {
  what=$1
  shift
  "$@" && return 0
  case $1 in
    load_ruleset | write_resolv) fail "$what failed" ;;
    *) fail "$what failed: $*" ;;
  esac
}

write_resolv() {
  tmp="$RESOLV.tmp.$$"
  if printf 'nameserver %s\n' "$GW4_ADDR" >"$tmp" && chmod 644 "$tmp" && mv -f "$tmp" "$RESOLV"
  then
    return 0
  fi
  rm -f "$tmp"
  return 1
}

load_ruleset() {
  ruleset | nft -f -
}

conflict() {  # conflict WHAT-EXISTS WHAT-WAS-ASKED
  fail "already up with other addresses: $(printf '%s' "$1" | tr '\n' ' '), asked for $2:" \
    "run '$PROG down $NAME' first"
}

# What exists must agree with the request; checked before anything changes.
preflight() {
  # A name attached to this very namespace (`ip netns attach NAME <a host PID>`) would have
  # the sandbox's addresses and default route put on the gateway itself.
  if netns_exists && ip netns identify "$$" 2>/dev/null | grep -qx "$NAME"; then
    fail "netns $NAME is the namespace this script runs in (the gateway's own): refusing"
  fi
  if link_exists; then
    link_is_ours ||
      fail "interface $HOST_IF exists and is not ours (no alias '$ALIAS'); pick another NAME"
    if ! netns_exists || ! peer_exists; then
      fail "$HOST_IF exists but its peer $SBX_IF is not in netns $NAME:" \
        "run '$PROG down $NAME' first"
    fi
    addrs_match -4 "$GW4" "$HOST_IF" ||
      conflict "$HOST_IF has $(global_addrs -4 "$HOST_IF")" "$GW4"
    addrs_match -6 "$GW6" "$HOST_IF" ||
      conflict "$HOST_IF has $(global_addrs -6 "$HOST_IF")" "${GW6:-no IPv6}"
    addrs_match -4 "$SBX4/$PLEN4" "$SBX_IF" "$NAME" ||
      conflict "$SBX_IF in $NAME has $(global_addrs -n "$NAME" -4 "$SBX_IF")" "$SBX4/$PLEN4"
    want6=""
    [ -z "$SBX6" ] || want6="$SBX6/$PLEN6"
    addrs_match -6 "$want6" "$SBX_IF" "$NAME" ||
      conflict "$SBX_IF in $NAME has $(global_addrs -n "$NAME" -6 "$SBX_IF")" "${want6:-no IPv6}"
  else
    if netns_exists && peer_exists; then
      fail "netns $NAME has $SBX_IF but $HOST_IF is missing: run '$PROG down $NAME' first"
    fi
    other=$(ip -o -4 addr show to "$GW4_ADDR/32" | awk '{ print $2 }' | head -n 1)
    [ -z "$other" ] || fail "$GW4_ADDR is already an address of $other"
    if [ -n "$GW6" ]; then
      other=$(ip -o -6 addr show to "$GW6_ADDR/128" | awk '{ print $2 }' | head -n 1)
      [ -z "$other" ] || fail "$GW6_ADDR is already an address of $other"
    fi
  fi
  if [ -e "$RESOLV" ] && [ "$(cat "$RESOLV")" != "nameserver $GW4_ADDR" ]; then
    fail "$RESOLV exists with other content; not overwriting it (remove it, or '$PROG down $NAME')"
  fi
}

cmd_up() {
  parse_up_options "$@"
  if [ "$PRINT_NFT" = 1 ]; then
    ruleset
    exit 0
  fi
  trap 'warn "interrupted"; undo; exit 130' INT TERM HUP

  command -v nft >/dev/null 2>&1 || fail "nft not found (Debian: apt-get install nftables)"
  command -v ip >/dev/null 2>&1 || fail "ip not found (Debian: apt-get install iproute2)"
  nft list tables >/dev/null 2>&1 ||
    fail "cannot read the nft ruleset: $(nft list tables 2>&1 | head -n 1)" \
      "(root / CAP_NET_ADMIN needed)"
  preflight

  # 1. The rules first: they are in place before the sandbox has a link.
  had_table=0
  table_exists && had_table=1
  step "loading nft table inet $TABLE" load_ruleset
  [ "$had_table" = 1 ] || created table

  # 2. The namespace and the veth pair, the sandbox end created inside it.
  if ! netns_exists; then
    step "creating netns $NAME" ip netns add "$NAME"
    created netns
  fi
  if ! link_exists; then
    step "creating veth $HOST_IF (peer $SBX_IF in netns $NAME)" \
      ip link add "$HOST_IF" type veth peer name "$SBX_IF" netns "$NAME"
    created link
    step "naming $HOST_IF as ours" ip link set dev "$HOST_IF" alias "$ALIAS"
  fi

  # 3. Addresses, links up, routes (replace: no error when already there).
  step "adding $GW4 to $HOST_IF" ip addr replace "$GW4" dev "$HOST_IF"
  [ -z "$GW6" ] || step "adding $GW6 to $HOST_IF" ip addr replace "$GW6" dev "$HOST_IF" nodad
  step "setting $HOST_IF up" ip link set dev "$HOST_IF" up
  step "setting lo up in $NAME" ip -n "$NAME" link set dev lo up
  step "adding $SBX4/$PLEN4 to $SBX_IF in $NAME" \
    ip -n "$NAME" addr replace "$SBX4/$PLEN4" dev "$SBX_IF"
  [ -z "$GW6" ] || step "adding $SBX6/$PLEN6 to $SBX_IF in $NAME" \
    ip -n "$NAME" addr replace "$SBX6/$PLEN6" dev "$SBX_IF" nodad
  step "setting $SBX_IF up in $NAME" ip -n "$NAME" link set dev "$SBX_IF" up
  step "default route via $GW4_ADDR in $NAME" \
    ip -n "$NAME" -4 route replace default via "$GW4_ADDR" dev "$SBX_IF"
  [ -z "$GW6" ] || step "default route via $GW6_ADDR in $NAME" \
    ip -n "$NAME" -6 route replace default via "$GW6_ADDR" dev "$SBX_IF"

  # 4. The sandbox's resolver.
  if [ ! -d "$ETC_DIR" ]; then
    step "creating $ETC_DIR" mkdir -p "$ETC_DIR"
    created etcdir
  fi
  if [ ! -e "$RESOLV" ]; then
    step "writing $RESOLV" write_resolv
    created resolv
  fi

  trap - INT TERM HUP
  v6note=""
  [ -z "$GW6" ] || v6note=" (and [$GW6_ADDR])"
  say "up $NAME: $SBX_IF $SBX4 -> $HOST_IF $GW4_ADDR$v6note;" \
    "TCP ports $TCP_PORTS -> :$TPORT, DNS -> :$DPORT, everything else dropped"
  say "sluice: transparent: $GW4_ADDR:$TPORT  dns_listen: $GW4_ADDR:$DPORT"
  say "run the sandbox with: ip netns exec $NAME COMMAND"
}

# --- down -----------------------------------------------------------------------------------

cmd_down() {
  [ $# -eq 0 ] || bad_usage "down takes only NAME"
  rc=0
  nft list tables >/dev/null 2>&1 ||
    { warn "cannot read the nft ruleset: $(nft list tables 2>&1 | head -n 1)"; exit 1; }
  if link_exists; then
    if link_is_ours; then
      if ip link del dev "$HOST_IF"; then say "deleted link $HOST_IF (and $SBX_IF)"; else rc=1; fi
    else
      warn "interface $HOST_IF is not ours (no alias '$ALIAS'): left alone"
      rc=1
    fi
  else
    say "note: no link $HOST_IF (already gone)"
  fi
  if netns_exists; then
    if ip netns del "$NAME"; then say "deleted netns $NAME"; else rc=1; fi
  else
    say "note: no netns $NAME (already gone)"
  fi
  if table_exists; then
    if nft delete table inet "$TABLE"; then say "deleted nft table inet $TABLE"; else rc=1; fi
  else
    say "note: no nft table inet $TABLE (already gone)"
  fi
  if [ -e "$RESOLV" ]; then
    if rm -f "$RESOLV"; then say "deleted $RESOLV"; else rc=1; fi
  fi
  if [ -d "$ETC_DIR" ]; then
    if rmdir "$ETC_DIR" 2>/dev/null; then
      say "deleted $ETC_DIR"
    else
      warn "$ETC_DIR holds other files: left in place"
      rc=1
    fi
  else
    say "note: no $ETC_DIR (already gone)"
  fi
  [ "$rc" = 0 ] || warn "down $NAME: some parts could not be removed (see above)"
  exit "$rc"
}

# --- status ---------------------------------------------------------------------------------

cmd_status() {
  [ $# -eq 0 ] || bad_usage "status takes only NAME"
  have=0
  missing=0
  if netns_exists; then
    echo "netns $NAME: present"
    have=$((have + 1))
  else
    echo "netns $NAME: absent"
    missing=$((missing + 1))
  fi
  if link_exists; then
    ours=" (not ours: no alias '$ALIAS')"
    link_is_ours && ours=""
    echo "link $HOST_IF: present$ours"
    ip -br addr show dev "$HOST_IF" | sed 's/^/  /'
    have=$((have + 1))
  else
    echo "link $HOST_IF: absent"
    missing=$((missing + 1))
  fi
  if netns_exists && peer_exists; then
    echo "link $SBX_IF in netns $NAME: present"
    ip -n "$NAME" -br addr show dev "$SBX_IF" | sed 's/^/  /'
    ip -n "$NAME" -4 route show default | sed 's/^/  route: /'
    ip -n "$NAME" -6 route show default | sed 's/^/  route: /'
  elif netns_exists; then
    echo "link $SBX_IF in netns $NAME: absent"
  fi
  if table_exists; then
    echo "nft table inet $TABLE: present"
    nft list table inet "$TABLE" | sed 's/^/  /'
    have=$((have + 1))
  else
    echo "nft table inet $TABLE: absent"
    missing=$((missing + 1))
  fi
  if [ -e "$RESOLV" ]; then
    echo "$RESOLV: present"
    sed 's/^/  /' "$RESOLV"
    have=$((have + 1))
  else
    echo "$RESOLV: absent"
    missing=$((missing + 1))
  fi
  [ "$missing" = 0 ] && exit 0
  [ "$have" = 0 ] && exit 3
  exit 1
}

# --- main -----------------------------------------------------------------------------------

[ $# -ge 1 ] || usage
case $1 in
  -h | --help | help) show_help ;;
esac
[ $# -ge 2 ] || bad_usage "$1: NAME missing"
COMMAND=$1
NAME=$2
shift 2
valid_name "$NAME" ||
  bad_usage "NAME '$NAME': use letters, digits, '.', '_' and '-'," \
    "starting with a letter or digit, at most 64"
derive_names
case $COMMAND in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  *) bad_usage "unknown command '$COMMAND'" ;;
esac
