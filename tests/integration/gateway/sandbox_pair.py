"""Two sandboxes in one sluice over the same CDN address (docs/configuration.md#sandboxes): `alpha`
(the bed's first listener, the global audit log) allows allowed.test over https; `beta` (a second
listener, its own CA and audit file) allows other.test over https and plain http. Used where what
belongs to one sandbox must be told from what belongs to the other (test_sandboxes, the admin
metrics)."""
import os

from netutil import free_port
from sluice_proc import PROXY_ADDRESS

A, B = "alpha", "beta"


def two_sandboxes(bed):
    """An `edit=` for make_config: the bed's config made into alpha and beta."""
    t, p = bed.tls_port, bed.plain_port

    def edit(config, workdir):
        alpha = config["sandboxes"][0]
        alpha.update(name=A, ca=os.path.join(workdir, "ca-" + A), policy="pa")
        beta = {"name": B, "listen": "%s:%d" % (PROXY_ADDRESS, free_port((PROXY_ADDRESS,))),
                "ca": os.path.join(workdir, "ca-" + B), "policy": "pb", "mode": "enforce",
                "audit": os.path.join(workdir, "audit-" + B + ".jsonl")}
        config["sandboxes"].append(beta)
        config["policies"] = {
            "pa": {"rules": [{"name": "a-allowed", "hosts": ["allowed.test"], "ports": [t],
                              "ips": ["127.0.0.20/32"]}]},
            "pb": {"rules": [{"name": "b-other", "hosts": ["other.test"], "ports": [t],
                              "ips": ["127.0.0.20/32"]},
                             {"name": "b-other-plain", "hosts": ["other.test"],
                              "schemes": ["http"], "ports": [p], "ips": ["127.0.0.20/32"]}]},
        }
    return edit
