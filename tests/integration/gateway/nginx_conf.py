"""The nginx configuration of the bed: one nginx process, every origin as a server block.

  127.0.0.20  "shared CDN": allowed.test, api.allowed.test, other.test, evil.test, a.wild.test,
              mixed.wild.test, mixed6.wild.test, expired.wild.test (expired cert),
              wrongname.wild.test (a cert for another name), and a default server (IP
              certificate); routed by SNI
              for the certificate and by Host for the content, like a CDN. TLS on port T,
              plain HTTP on port P.
  127.0.0.21  second.test
  127.0.0.25  h2.test, TLS on port T only, with `http2` on its listen: the one origin that
              selects ALPN h2 (every other listen offers HTTP/1.1 only, so sluice speaks
              HTTP/1.1 to them whatever it offers); it also has /trailer/ (a response trailer)
              and /nocontent (204)
  127.0.0.66  the attacker: allowed.test, attacker.test, atk.wild.test, all from the
              attacker's CA
  127.0.0.1   the internal canary: anything reaching it is an SSRF into the host
  unix socket the sink that uploads are proxied to (so nginx reads and keeps the body)
"""

LOG_FIELDS = [
    ("remote_addr", "$remote_addr"), ("server_addr", "$server_addr"),
    ("server_port", "$server_port"), ("ssl_server_name", "$ssl_server_name"),
    ("server_name", "$server_name"), ("host", "$host"), ("http_host", "$http_host"),
    ("request", "$request"), ("method", "$request_method"), ("uri", "$request_uri"),
    ("status", "$status"), ("request_length", "$request_length"),
    ("body_file", "$request_body_file"), ("content_length", "$http_content_length"),
    ("transfer_encoding", "$http_transfer_encoding"), ("user_agent", "$http_user_agent"),
    ("x_test", "$http_x_test"), ("x_hop", "$http_x_hop"),
    ("proxy_authorization", "$http_proxy_authorization"), ("x_api_key", "$http_x_api_key"),
    ("proxy_connection", "$http_proxy_connection"), ("connection_hdr", "$http_connection"),
    ("upgrade", "$http_upgrade"), ("http2_settings", "$http_http2_settings"),
    ("bytes_sent", "$bytes_sent"), ("connection", "$connection"),
    ("connection_requests", "$connection_requests"),
    # "HTTP/1.1" or "HTTP/2.0"; and "h2" when the connection negotiated HTTP/2 over TLS
    ("protocol", "$server_protocol"), ("http2", "$http2"),
]


# Request headers through which origins, frameworks and CDNs let a request claim another host, path,
# scheme, port, method or client (docs/wire.md#headers-the-origin-never-gets-from-the-sandbox), and
# Proxy-*: sluice must drop every one. Requests to /claims/ log each of them (claims.log), as an
# origin that reads them would see them. nginx names a header's variable in lower case with '_' for
# '-', and (underscores_in_headers on) takes "X_Forwarded_Host" for that same variable, as CGI, WSGI
# and Rack do.
CLAIM_HEADERS = [
    "Forwarded", "X-Forwarded-Host", "X-Forwarded-Server", "X-Host", "X-HTTP-Host-Override",
    "X-Original-Host",
    "X-Original-URL", "X-Original-URI", "X-Rewrite-URL", "X-Forwarded-Prefix",
    "X-Forwarded-Path", "X-Forwarded-Uri", "X-Original-Prefix", "X-Replaced-Path",
    "X-Envoy-Original-Path",
    "X-Forwarded-Proto", "X-Forwarded-Protocol", "X-Forwarded-Scheme", "X-Forwarded-Ssl",
    "X-Forwarded-Port", "X-Original-Proto", "X-Url-Scheme", "X-Scheme", "Front-End-Https",
    "X-ARR-SSL", "CloudFront-Forwarded-Proto", "CF-Visitor", "Fastly-SSL",
    "X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "X-Original-Method",
    "X-Forwarded-Method",
    "X-Forwarded-For", "X-Forwarded", "Forwarded-For", "X-Original-For",
    "X-Original-Forwarded-For", "X-Real-IP", "X-Client-IP", "Client-IP", "True-Client-IP",
    "CF-Connecting-IP", "CF-Connecting-IPv6", "Fastly-Client-IP", "X-Cluster-Client-IP",
    "X-Originating-IP", "X-Remote-IP", "X-Remote-Addr", "X-ProxyUser-Ip",
    "CloudFront-Viewer-Address",
    "X-Middleware-Subrequest", "X-Envoy-Internal",
    "Proxy", "Proxy-Foo", "Proxy-Authorization",
]


def claim_variable(name):
    return name.lower().replace("-", "_")


def _log_format():
    body = ",".join('"%s":"%s"' % (k, v) for k, v in LOG_FIELDS)
    claims = ",".join('"%s":"$http_%s"' % (claim_variable(n), claim_variable(n))
                      for n in CLAIM_HEADERS)
    return ("log_format bed escape=json '{%s}';\n"
            "    log_format claims escape=json '{\"uri\":\"$request_uri\",\"host\":\"$host\","
            "\"x_test\":\"$http_x_test\",%s}';" % (body, claims))


def _server(d, names, listens, cert, root, role, extra=""):
    lines = ["server {"]
    lines += ["    listen %s;" % l for l in listens]
    lines.append("    server_name %s;" % " ".join(names))
    if cert is not None:
        lines += ["    ssl_certificate %s;" % cert.cert, "    ssl_certificate_key %s;" % cert.key]
    lines += ["    root %s;" % root, "    access_log %s/%s.log bed;" % (d, role)]
    if role in ("attacker", "internal"):
        # Connection-level events (handshakes, closes) of a canary, to tell "never connected".
        lines.append("    error_log %s/%s.err info;" % (d, role))
    lines.append("    location /upload/ {\n"
                 "        client_body_in_file_only on;\n"
                 "        proxy_http_version 1.1;\n"
                 "        proxy_set_header Host sink;\n"
                 "        proxy_pass http://unix:%s/sink.sock:/;\n"
                 "    }" % d)
    # An upstream that closes idle keep-alive connections almost at once (after answering a
    # request here), to test what sluice does with an upstream connection that died idle.
    lines.append("    location /brief/ {\n"
                 "        keepalive_timeout 300ms;\n"
                 "        return 200 \"brief\\n\";\n"
                 "    }")
    # Echoes the x-api-key the request carried, in a header and in the body (an upstream that
    # would hand an injected secret back to the sandbox).
    lines.append("    location = /echo-key {\n"
                 "        add_header X-Echo-Key $http_x_api_key always;\n"
                 "        return 200 \"key=$http_x_api_key\\n\";\n"
                 "    }")
    # What an origin that reads routing headers would be told (CLAIM_HEADERS).
    lines.append("    location /claims/ {\n"
                 "        access_log %s/claims.log claims;\n"
                 "        return 200 \"claims\\n\";\n"
                 "    }" % d)
    # A static npm registry under /npm/ (test_npm_scope.py). nginx decodes "%2f" before it maps
    # a URI to a file, so the packument "/npm/@s%2fpkg" and the tarball "/npm/@s/pkg/-/x.tgz"
    # share the directory npm/@s/pkg: the packument is its index.json.
    lines.append("    location /npm/ {\n"
                 "        try_files $uri $uri/index.json =404;\n"
                 "    }")
    lines.append("    location = /chunked.html {\n"
                 "        sub_filter 'SLUICE-MARK' 'replaced-by-nginx';\n"
                 "        sub_filter_once off;\n"
                 "    }")
    if extra:
        lines.append(extra)
    lines.append("}")
    return "\n".join(lines)


# What only h2.test serves: a response trailer after the body (sent as a HEADERS frame that ends
# the stream over HTTP/2), after a body of known length (/trailer/data.txt) or of none
# (/trailer/page.html, which sub_filter rewrites), and a 204.
H2_EXTRA = """\
    location /trailer/ {
        add_trailer x-trailer "trailer-value" always;
        sub_filter 'SLUICE-MARK' 'replaced-by-nginx';
    }
    location = /nocontent {
        return 204;
    }"""


def render(d, www, pki, tls_port, plain_port, as_root):
    """The whole nginx.conf; `d` is the nginx directory (logs, pid, temp, sink socket)."""
    t, p = tls_port, plain_port
    servers = []
    cdn = ["127.0.0.20:%d ssl" % t, "127.0.0.20:%d" % p]
    servers.append(_server(d, ["_"], [l + " default_server" for l in cdn], pki.cdn_ip,
                           "%s/allowed.test" % www, "cdn"))
    for name in pki.CDN_NAMES:
        servers.append(_server(d, [name], cdn, pki.cdn[name], "%s/%s" % (www, name), "cdn"))
    servers.append(_server(d, ["expired.wild.test"], cdn, pki.expired,
                           "%s/expired.wild.test" % www, "cdn"))
    servers.append(_server(d, ["wrongname.wild.test"], cdn, pki.wrong_name,
                           "%s/wrongname.wild.test" % www, "cdn"))
    second = ["127.0.0.21:%d ssl default_server" % t, "127.0.0.21:%d default_server" % p]
    servers.append(_server(d, ["second.test"], second, pki.cdn["second.test"],
                           "%s/second.test" % www, "second"))
    servers.append(_server(d, ["h2.test"], ["127.0.0.25:%d ssl http2 default_server" % t],
                           pki.h2, "%s/h2.test" % www, "h2", extra=H2_EXTRA))
    atk = ["127.0.0.66:%d ssl" % t, "127.0.0.66:%d" % p]
    servers.append(_server(d, ["allowed.test"], [l + " default_server" for l in atk],
                           pki.attacker["allowed.test"], "%s/attacker" % www, "attacker"))
    for name in ("attacker.test", "atk.wild.test"):
        servers.append(_server(d, [name], atk, pki.attacker[name], "%s/attacker" % www,
                               "attacker"))
    internal = ["127.0.0.1:%d ssl default_server" % t, "127.0.0.1:%d default_server" % p]
    servers.append(_server(d, ["_"], internal, pki.internal, "%s/internal" % www, "internal"))
    return wrap(d, servers, as_root)


def wrap(d, servers, as_root):
    """The whole nginx.conf around `servers` (server blocks from _server), with the sink that
    /upload/ is proxied to."""
    sink = ("server {\n    listen unix:%s/sink.sock;\n    access_log %s/sink.log bed;\n"
            "    location / { return 200 \"stored\\n\"; }\n}" % (d, d))
    return """\
%(user)s
daemon off;
master_process on;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log info;
events { worker_connections 1024; }
http {
    types { text/html html; text/plain txt; application/octet-stream bin whl; }
    default_type application/octet-stream;
    server_tokens off;
    sendfile on;
    keepalive_requests 1000;
    client_max_body_size 512m;
    client_body_temp_path %(d)s/tmp/body;
    proxy_temp_path %(d)s/tmp/proxy;
    fastcgi_temp_path %(d)s/tmp/fastcgi;
    uwsgi_temp_path %(d)s/tmp/uwsgi;
    scgi_temp_path %(d)s/tmp/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    underscores_in_headers on;
    %(log_format)s
    access_log off;
%(servers)s
%(sink)s
}
""" % {"user": "user root root;" if as_root else "", "d": d, "log_format": _log_format(),
       "servers": "\n".join(servers), "sink": sink}
