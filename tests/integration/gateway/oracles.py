"""Small oracles shared by the tests of docs/threat-model.md: markers, "nothing reached the origin
or a canary", and "dnsmasq was (not) asked about exactly this name since a mark"."""
import uuid

from http1 import request_bytes


def marker():
    return uuid.uuid4().hex[:12]


def get(path, host="allowed.test", **kw):
    return request_bytes("GET", path, host, **kw)


def cdn_hits(bed, m, role="cdn"):
    """Requests of `role` whose URI carries marker `m` (after a barrier)."""
    bed.nginx.barrier()
    return [e for e in bed.nginx.access(role) if m in e["uri"]]


class DnsMark:
    """What dnsmasq was asked after this point (exact names, lower-case, no trailing dot)."""

    def __init__(self, bed):
        self.bed = bed
        self.start = len(bed.dns.queried_names())

    def names(self):
        self.bed.dns.barrier()
        return [n for n in self.bed.dns.queried_names()[self.start:]
                if not n.startswith("barrier-")]

    def asked(self, name):
        name = name.lower().rstrip(".")
        return [n for n in self.names() if n == name]

    def asked_containing(self, fragment):
        return [n for n in self.names() if fragment.lower() in n]


class Canaries:
    """Nothing may reach the attacker or the internal canary between mark and check()."""

    ROLES = ("attacker", "internal")

    def __init__(self, bed):
        self.bed = bed
        self.marks = {role: bed.nginx.canary_mark(role) for role in self.ROLES}

    def hits(self):
        self.bed.nginx.barrier()
        return {role: self.bed.nginx.canary_hits_since(role, mark)
                for role, mark in self.marks.items()}

    def assert_untouched(self):
        hits = self.hits()
        assert hits == {role: [] for role in self.ROLES}, "a canary was reached: %r" % hits
