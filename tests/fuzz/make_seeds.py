#!/usr/bin/env python3
"""Writes the hand-made seeds of the fuzz targets that take structured input (DNS replies, HTTP
responses, chunked bodies, configurations) into tests/fuzz/corpus/<target>/, named for what
they hold. Run it again (with Debian's /usr/bin/python3: the HTTP/2 seeds need python3-h2) after
changing a seed here; what libFuzzer added (hash-named files) is
left alone."""
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("latin-1")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- fuzz_http_response: a control byte (bit i < 6: response i answers HEAD; bit 6: the GETs
# asked for a WebSocket), then the bytes ---
def responses():
    ok5 = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    chunked = ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
    seeds = {
        "content_length": "\x00" + ok5,
        "chunked_trailers": "\x00" + chunked,
        "continue_then_final": "\x00HTTP/1.1 100 Continue\r\n\r\n" + ok5,
        "early_hints_then_final": "\x00HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n"
                                  + chunked,
        "head_answer_with_length": "\x01HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + ok5,
        "no_content_and_not_modified":
            "\x00HTTP/1.1 204 No Content\r\n\r\n"
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n" + ok5,
        "until_close_http10": "\x00HTTP/1.0 200 OK\r\nServer: x\r\n\r\nread until the close",
        "until_close_http11": "\x00HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody",
        "keep_alive_three": "\x00" + ok5 + chunked + ok5,
        "cl_te": "\x00HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "0\r\n\r\n",
        "bare_lf_status_line": "\x00HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
        "switching_protocols": "\x00HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
        "websocket_switch": "\x40HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n"
                            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                            "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x02hi",
        "obs_fold": "\x00HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n",
        "status_999": "\x00HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n",
        "leading_crlf": "\x00\r\n\r\n" + ok5,
        "large_head": "\x00HTTP/1.1 200 OK\r\n" + "".join(
            "X-Field-%d: %s\r\n" % (i, "v" * 60) for i in range(110)) + "Content-Length: 0\r\n\r\n",
    }
    for name, data in seeds.items():
        write("fuzz_http_response", name, data)


# --- fuzz_http_chunked: a cut chooser byte, then a chunked body ---
def chunked():
    seeds = {
        "one_chunk": "5\r\nhello\r\n0\r\n\r\n",
        "two_chunks_upper_hex": "A\r\n0123456789\r\n1F\r\n" + "x" * 31 + "\r\n0\r\n\r\n",
        "leading_zeros": "0005\r\nhello\r\n000\r\n\r\n",
        "extensions": "5;a=b;c=\"q d\"\r\nhello\r\n0;last\r\n\r\n",
        "trailers": "3\r\nabc\r\n0\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
        "empty_body": "0\r\n\r\n",
        "bare_lf_after_data": "5\r\nhello\n0\r\n\r\n",
        "bare_lf_size_line": "5\nhello\r\n0\r\n\r\n",
        "size_overflow": "10000000000000000\r\nx\r\n0\r\n\r\n",
        "space_before_extension": "5 ;a\r\nhello\r\n0\r\n\r\n",
        "trailer_obs_fold": "0\r\nX: a\r\n b\r\n\r\n",
        "pipelined_after": "1\r\nx\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    }
    for i, (name, body) in enumerate(seeds.items()):
        write("fuzz_http_chunked", name, chr((i * 37) % 256) + body)


# --- fuzz_dns_answer: A length (2 bytes), max_ttl s (2 bytes), A reply, AAAA reply ---
def name(text):
    out = b""
    for label in text.split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\x00"


def reply(qname, qtype, answers, rcode=0, rid=0x1234):
    head = struct.pack(">HHHHHH", rid, 0x8180 | rcode, 1, len(answers), 0, 0)
    question = name(qname) + struct.pack(">HH", qtype, 1)
    body = b""
    for owner, rtype, ttl, rdata in answers:
        owner_bytes = b"\xc0\x0c" if owner == qname else name(owner)
        body += owner_bytes + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata
    return head + question + body


def v4(text):
    return bytes(int(x) for x in text.split("."))


def v6(last):
    return b"\x20\x01\x0d\xb8" + b"\x00" * 11 + bytes([last])


def dns_input(a, aaaa, max_ttl=300):
    return struct.pack(">HH", len(a), max_ttl) + a + aaaa


def dns_answers():
    q = "a.test"
    a1 = reply(q, 1, [(q, 1, 60, v4("93.184.216.34")), (q, 1, 30, v4("93.184.216.35"))])
    aaaa1 = reply(q, 28, [(q, 28, 120, v6(1))])
    nodata_aaaa = reply(q, 28, [])
    seeds = {
        "a_and_aaaa": dns_input(a1, aaaa1),
        "a_only_nodata_aaaa": dns_input(a1, nodata_aaaa),
        "ttl_zero": dns_input(reply(q, 1, [(q, 1, 0, v4("10.0.0.1"))]), nodata_aaaa),
        "ttl_top_bit": dns_input(reply(q, 1, [(q, 1, 0x80000001, v4("10.0.0.2"))]), aaaa1),
        "ttl_over_max": dns_input(reply(q, 1, [(q, 1, 86400, v4("10.0.0.3"))]), aaaa1, 5),
        "cname_chain": dns_input(reply(q, 1, [(q, 5, 50, name("b.test")),
                                             ("b.test", 1, 40, v4("10.0.0.4"))]),
                                 reply(q, 28, [(q, 5, 50, name("b.test")),
                                               ("b.test", 28, 20, v6(4))])),
        "duplicates": dns_input(reply(q, 1, [(q, 1, 60, v4("10.0.0.5"))] * 3),
                                reply(q, 28, [(q, 28, 60, v6(5))] * 2)),
        "seventy_records": dns_input(reply(q, 1, [(q, 1, 60 + i, v4("10.1.0.%d" % i))
                                                  for i in range(70)]), nodata_aaaa),
        "nxdomain": dns_input(reply(q, 1, [], rcode=3), reply(q, 28, [], rcode=3)),
        "servfail_and_nxdomain": dns_input(reply(q, 1, [], rcode=2), reply(q, 28, [], rcode=3)),
        "mapped_v4_in_aaaa": dns_input(nodata_aaaa.replace(b"\x00\x1c", b"\x00\x01", 1),
                                       reply(q, 28, [(q, 28, 60, b"\x00" * 10 + b"\xff\xff" +
                                                      v4("127.0.0.1"))])),
        "wrong_rdlength": dns_input(reply(q, 1, [(q, 1, 60, b"\x0a\x00\x00")]), aaaa1),
        "truncated": dns_input(a1[:-3], aaaa1[:20]),
        "other_owner": dns_input(reply(q, 1, [("c.test", 1, 60, v4("10.0.0.6"))]), aaaa1),
    }
    for n, data in seeds.items():
        write("fuzz_dns_answer", n, data)


# --- fuzz_config: the examples, and shapes the loader must refuse with a position ---
def configs():
    examples = os.path.join(ROOT, "examples")
    for f in sorted(os.listdir(examples)):
        if f.endswith(".yaml"):
            with open(os.path.join(examples, f), "rb") as fh:
                text = fh.read()
            if f == "fleet.yaml":
                with open(os.path.join(examples, "fleet.d", "agent-c.yaml"), "rb") as fh:
                    text += b"\x00" + fh.read()
            write("fuzz_config", "example_" + f[:-5].replace("-", "_"), text)
    minimal = ("version: 1\nsandboxes:\n  - name: s\n    listen: 127.0.0.1:3128\n    policy: p\n"
               "policies:\n  p:\n    rules:\n      - hosts: [a.test]\n")
    seeds = {
        "minimal": minimal,
        "octal_port": minimal.replace("3128", "03128"),
        "duplicate_key": minimal + "policies:\n  q: {}\n",
        "tab_indent": minimal.replace("    policy", "\tpolicy"),
        "two_documents": minimal + "---\nversion: 1\n",
        "anchors_aliases": "version: 1\nx: &a [1, 2]\ny: *a\n" + minimal[11:],
        "flow_style": "{version: 1, sandboxes: [{name: s, listen: '127.0.0.1:1', policy: p}], "
                      "policies: {p: {rules: [{hosts: [a.test], ips: [10.0.0.0/8]}]}}}\n",
        "secrets_inject": minimal + "        inject:\n          - header: authorization\n"
                          "            secret: k\nsecrets:\n  k: {env: KEY}\n",
        "sandboxes_dir": "version: 1\nsandboxes_dir: d\npolicies:\n  p:\n    rules:\n"
                         "      - hosts: [a.test]\n"
                         "\x00name: s\nlisten: 127.0.0.1:3129\npolicy: p\n",
        "unterminated_quote": minimal.replace("a.test", "\"a.test"),
    }
    for n, data in seeds.items():
        write("fuzz_config", n, data)


# --- fuzz_http2_frames: a sandbox's frames after the connection preface (python3-h2 writes
# them; the first byte also chooses where the input is cut in two reads) ---
def http2_frames():
    import h2.config
    import h2.connection
    cfg = h2.config.H2Configuration(client_side=True, validate_outbound_headers=False,
                                    normalize_outbound_headers=False)

    def frames(*requests):
        conn = h2.connection.H2Connection(config=cfg)
        conn.initiate_connection()
        for headers, body in requests:
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, headers, end_stream=body is None)
            if body is not None:
                conn.send_data(sid, body, end_stream=True)
        return conn.data_to_send()[24:]  # the preface is the target's own

    get = [(":method", "GET"), (":scheme", "https"), (":authority", "pkg.test"), (":path", "/")]
    seeds = {
        "get": frames((get, None)),
        "three_gets_cookies": frames((get + [("cookie", "a=1"), ("cookie", "b=2")], None),
                                     (get, None), (get + [("accept", "*/*")], None)),
        "post_with_length": frames(([(":method", "POST"), (":scheme", "https"),
                                     (":authority", "pkg.test"), (":path", "/up"),
                                     ("content-length", "5")], b"hello")),
        "post_chunked": frames(([(":method", "POST"), (":scheme", "https"),
                                 (":authority", "pkg.test"), (":path", "/up")], b"x" * 100)),
        "length_disagrees": frames(([(":method", "POST"), (":scheme", "https"),
                                     (":authority", "pkg.test"), (":path", "/up"),
                                     ("content-length", "50")], b"short")),
        "upper_case_name": frames((get + [("X-Test", "1")], None)),
        "connection_field": frames((get + [("connection", "close")], None)),
        "host_disagrees": frames((get + [("host", "evil.test")], None)),
        "scheme_http": frames(([(":method", "GET"), (":scheme", "http"),
                                (":authority", "pkg.test"), (":path", "/")], None)),
        "connect": frames(([(":method", "CONNECT"), (":authority", "evil.test:443")], None)),
        "grpc": frames(([(":method", "POST"), (":scheme", "https"), (":authority", "pkg.test"),
                         (":path", "/pkg.Service/Method"), ("content-type", "application/grpc"),
                         ("te", "trailers")], b"\x00\x00\x00\x00\x00")),
    }
    for n, data in seeds.items():
        write("fuzz_http2_frames", n, data)


# --- fuzz_http2_session: a sandbox's frames after the connection preface, inside a tunnel to
# origin.test whose TLS agreed h2. HPACK literals are written without Huffman coding, so that
# "00000" (where the target puts the origin's port) is found in them; the first byte also
# chooses where the input is cut in two writes. The origin answers by path: /big (more than a
# window), /chunked (with a trailer), /stall (never) ---
def http2_session():
    import h2.config
    import h2.connection
    cfg = h2.config.H2Configuration(client_side=True, validate_outbound_headers=False,
                                    normalize_outbound_headers=False)
    authority = "origin.test:00000"

    def connection():
        conn = h2.connection.H2Connection(config=cfg)
        encode = conn.encoder.encode
        conn.encoder.encode = lambda headers, huffman=True: encode(headers, huffman=False)
        conn.initiate_connection()
        return conn

    def head(method, path, *extra, authority=authority):
        return [(":method", method), (":scheme", "https"), (":authority", authority),
                (":path", path)] + list(extra)

    def wire(conn):
        return conn.data_to_send()[24:]  # the preface is the target's own

    def requests(*heads, window=False):
        conn = connection()
        for fields, body, trailers in heads:
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, fields, end_stream=body is None and trailers is None)
            if body is not None:
                conn.send_data(sid, body, end_stream=trailers is None)
            if trailers is not None:
                conn.send_headers(sid, trailers, end_stream=True)
            if window:
                conn.increment_flow_control_window(1 << 20, stream_id=sid)
        if window:
            conn.increment_flow_control_window(1 << 20)
        return wire(conn)

    grpc = head("POST", "/pkg.Service/Method", ("content-type", "application/grpc"),
                ("te", "trailers"))
    seeds = {
        "get": requests((head("GET", "/"), None, None)),
        "get_big_window": requests((head("GET", "/big"), None, None), window=True),
        "get_big_no_window": requests((head("GET", "/big"), None, None)),
        "get_chunked_trailer": requests((head("GET", "/chunked"), None, None)),
        "three_streams": requests((head("GET", "/"), None, None),
                                  (head("GET", "/chunked", ("cookie", "a=1"), ("cookie", "b=2")),
                                   None, None),
                                  (head("POST", "/up", ("content-length", "5")), b"hello", None)),
        "post_chunked_upstream": requests((head("POST", "/up"), b"x" * 3000, None)),
        "post_trailers": requests((head("POST", "/up"), b"body", [("x-sum", "1")])),
        "grpc": requests((grpc, b"\x00\x00\x00\x00\x00", [("grpc-timeout", "1S")])),
        "grpc_denied": requests((head("POST", "/pkg.Service/Method",
                                      ("content-type", "application/grpc"),
                                      authority="evil.test"), b"\x00" * 5, None)),
        "host_disagrees": requests((head("GET", "/", ("host", "evil.test")), None, None)),
        "claims_dropped": requests((head("GET", "/", ("x-forwarded-host", "evil.test"),
                                         ("proxy-foo", "x"), ("x-original-url", "/admin"),
                                         ("x-http-method-override", "DELETE")), None, None)),
        "stall_then_reset": (lambda conn: (conn.send_headers(1, head("GET", "/stall"),
                                                             end_stream=True),
                                           conn.reset_stream(1), wire(conn))[-1])(connection()),
        "websocket": requests(([(":method", "CONNECT"), (":protocol", "websocket"),
                                (":scheme", "https"), (":authority", authority),
                                (":path", "/ws"), ("sec-websocket-version", "13")],
                               b"\x81\x02hi", None)),
        "goaway": (lambda conn: (conn.send_headers(1, head("GET", "/"), end_stream=True),
                                 conn.close_connection(), wire(conn))[-1])(connection()),
    }
    def frame(ftype, flags, sid, payload=b""):
        return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
            struct.pack(">I", sid) + payload

    def wait():  # a PING ends a piece of the input: the target waits for quiet after it
        return frame(6, 0, 0, b"piece---")

    # Steps taken one piece at a time: each waits for the session to answer the last.
    def steps(*pieces):
        conn = connection()
        out = b""
        for piece in pieces:
            piece(conn)
            out += conn.data_to_send() + wait()
        return out[24:]

    def get(path, sid):
        return lambda conn: conn.send_headers(sid, head("GET", path), end_stream=True)

    def block(fields):
        import hpack
        return hpack.Encoder().encode(fields, huffman=False)

    seeds["requests_one_after_another"] = steps(get("/", 1), get("/chunked", 3), get("/", 5),
                                                get("/big", 7))
    seeds["reset_once_the_response_is_under_way"] = steps(
        get("/big", 1), lambda conn: conn.reset_stream(1), get("/", 3))
    seeds["window_once_the_response_is_under_way"] = steps(
        get("/big", 1),
        lambda conn: (conn.increment_flow_control_window(1 << 20, stream_id=1),
                      conn.increment_flow_control_window(1 << 20)),
        get("/", 3))
    seeds["body_to_a_stalled_origin"] = steps(
        lambda conn: conn.send_headers(1, head("POST", "/stall")),
        lambda conn: conn.send_data(1, b"x" * 16000),
        lambda conn: conn.send_data(1, b"y" * 16000, end_stream=True))
    settings = frame(4, 0, 0)  # the preface's SETTINGS, for the frames built by hand
    seeds["rapid_reset"] = settings + b"".join(
        frame(1, 0x5, sid, block(head("GET", "/stall"))) + frame(3, 0, sid, b"\x00\x00\x00\x08")
        for sid in range(1, 2 * 150, 2))
    pieces = block(head("GET", "/"))
    step = max(1, len(pieces) // 10)
    chunks = [pieces[i:i + step] for i in range(0, len(pieces), step)]
    seeds["continuation_flood"] = settings + frame(1, 0x1, 1, chunks[0]) + b"".join(
        frame(9, 0x4 if i == len(chunks) - 1 else 0, 1, c) for i, c in enumerate(chunks[1:], 1))
    seeds["settings_flood"] = frame(4, 0, 0, b"".join(struct.pack(">HI", 4, 65535 + i)
                                                     for i in range(33)))
    seeds["broken_hpack"] = settings + frame(1, 0x5, 1, b"\xff\xff\xff\xff\x0f")
    seeds["header_list_too_large"] = settings + frame(1, 0x5, 1, block(head("GET", "/") + [
        ("x-big-%d" % i, "v" * 1000) for i in range(10)]))
    pings = connection()
    for i in range(250):
        pings.ping(struct.pack(">Q", i))
    seeds["ping_flood"] = wire(pings)
    empty = connection()
    empty.send_headers(1, head("POST", "/up"))
    for _ in range(101):
        empty.send_data(1, b"")
    seeds["empty_data_flood"] = wire(empty)
    for n, data in seeds.items():
        write("fuzz_http2_session", n, data)


# --- fuzz_http2_origin_frames: an origin's frames to sluice's client session, which has opened
# streams 1 (GET), 3 (HEAD) and 5 (POST, its body half sent); a fourth (GET) opens as 7 between
# the two reads. Built frame by frame (one HPACK encoder per connection, as an origin has), so
# that what a real server library would refuse to send can be sent; the last byte chooses the
# cut between the reads, and cut_here() sets it with a PING at the end ---
def http2_origin_frames():
    import hpack

    DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = \
        0, 1, 3, 4, 6, 7, 8, 9
    END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4

    def frame(ftype, flags, sid, payload=b""):
        return (struct.pack(">I", len(payload))[1:] + bytes([ftype, flags])
                + struct.pack(">I", sid) + payload)

    class Origin:
        def __init__(self, settings=((3, 100), (4, 65535))):
            self.enc = hpack.Encoder()
            entries = b"".join(struct.pack(">HI", k, v) for k, v in settings)
            # Its SETTINGS first, then the ACK of sluice's.
            self.out = frame(SETTINGS, 0, 0, entries) + frame(SETTINGS, ACK, 0)

        def headers(self, sid, fields, end_stream=False, pieces=1):
            block = self.enc.encode(fields)
            flags = END_STREAM if end_stream else 0
            if pieces == 1:
                self.out += frame(HEADERS, flags | END_HEADERS, sid, block)
                return self
            step = max(1, len(block) // pieces)
            parts = [block[i:i + step] for i in range(0, len(block), step)]
            self.out += frame(HEADERS, flags, sid, parts[0])
            for i, part in enumerate(parts[1:], 2):
                self.out += frame(CONTINUATION, END_HEADERS if i == len(parts) else 0, sid, part)
            return self

        def data(self, sid, payload, end_stream=False):
            self.out += frame(DATA, END_STREAM if end_stream else 0, sid, payload)
            return self

        def raw(self, data):
            self.out += data
            return self

        def rst(self, sid, code):
            return self.raw(frame(RST_STREAM, 0, sid, struct.pack(">I", code)))

        def goaway(self, last, code=0):
            return self.raw(frame(GOAWAY, 0, 0, struct.pack(">II", last, code)))

        def window_update(self, sid, increment):
            return self.raw(frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", increment)))

        def cut_here(self):
            # The first read ends here: a PING ends the input, its last byte the cut.
            self.cut = len(self.out)
            assert self.cut < 256
            return self

        def wire(self):
            if getattr(self, "cut", None) is None:
                return self.out
            return self.out + frame(PING, 0, 0, b"\x00" * 7 + bytes([self.cut]))

    ok = [(":status", "200")]
    seeds = {
        "settings_only": Origin(),
        "get_200_content_length": Origin().headers(1, ok + [("content-length", "5")])
                                          .data(1, b"hello", True),
        "all_three_answered": Origin()
            .headers(1, ok + [("content-type", "text/plain")])
            .data(1, b"chunk one, ").data(1, b"chunk two", True)
            .headers(3, ok + [("content-length", "100")], True)
            .headers(5, [(":status", "201"), ("content-length", "2")]).data(5, b"ok", True),
        "interim_then_final": Origin()
            .headers(1, [(":status", "100")])
            .headers(1, [(":status", "103"), ("link", "</style.css>; rel=preload")])
            .headers(1, ok + [("content-length", "3"), ("x-final", "1")]).data(1, b"abc", True),
        "trailers": Origin()
            .headers(5, ok + [("content-type", "application/grpc")])
            .data(5, b"\x00\x00\x00\x00\x02hi")
            .headers(5, [("grpc-status", "0"), ("grpc-message", "ok")], True),
        "empty_trailers": Origin().headers(1, ok).data(1, b"body").headers(1, [], True),
        "grpc_trailers_only": Origin().headers(
            5, ok + [("content-type", "application/grpc"), ("grpc-status", "5"),
                     ("grpc-message", "not found")], True),
        "no_content_not_modified": Origin()
            .headers(1, [(":status", "204")], True)
            .headers(3, [(":status", "304"), ("content-length", "42"), ("etag", '"v1"')], True),
        "head_answer_with_length": Origin().headers(3, ok + [("content-length", "1000")], True),
        "rst_stream": Origin().headers(1, ok).data(1, b"partial")
            .rst(1, 8).rst(3, 7).headers(5, [(":status", "500")], True),
        "goaway": Origin().headers(1, ok + [("content-length", "2")]).goaway(1)
            .data(1, b"ok", True),
        "continuation": Origin()
            .headers(1, ok + [("x-field-%d" % i, "v" * 40) for i in range(20)], pieces=3)
            .data(1, b"x", True),
        "over_the_bound": Origin()
            .headers(1, ok + [("x-big", "b" * 5000)])
            .headers(3, ok, True),
        "trailers_without_end_stream": Origin().headers(1, ok).data(1, b"a")
            .headers(1, [("x-trailer", "t")]),
        "status_below_100": Origin().headers(1, [(":status", "042")]).data(1, b"a", True),
        "body_over_content_length": Origin().headers(1, ok + [("content-length", "2")])
            .data(1, b"abc", True),
        "fourth_stream": Origin().cut_here()
            .headers(7, ok + [("content-length", "4")]).data(7, b"four", True),
        "post_answered_early": Origin().headers(5, [(":status", "413")], True).cut_here()
            .window_update(5, 100),
        # A stream window of 4 bytes: the POST's rest waits for the origin's WINDOW_UPDATE.
        "post_window_opens": Origin(settings=((3, 100), (4, 4))).cut_here()
            .window_update(5, 100).headers(5, ok + [("content-length", "2")]).data(5, b"o"),
        "post_answered_while_window_closed": Origin(settings=((3, 100), (4, 4))).cut_here()
            .headers(5, ok + [("content-length", "0")], True),
    }
    for n, origin in seeds.items():
        write("fuzz_http2_origin_frames", n, origin.wire())
    # Regressions, as the fuzz target's reads found them: a POST whose body waits for the
    # origin's window is answered whole, then the window opens; nghttp2 must not pull the body
    # of a stream whose exchange is over (sluice resets it instead).
    regressions = {
        "post_answered_then_window_opens":
            "00000c040000000000000300000064000400000004000000040100000000000004010500000005885c8107"
            "00000408000000000500000064000008060000000000000000000000001e",
        "window_update_then_whole_answer":
            "00000c04000000000000030000006400040000000400000004010000000000000408000000000500000064"
            "000004010400000005885c81170000020001000000056f6b000008060000000000000000000000001e",
    }
    for n, wire in regressions.items():
        write("fuzz_http2_origin_frames", n, bytes.fromhex(wire))


# --- fuzz_gzip_inflate: a format byte (bits 0-1: identity, gzip, deflate, raw deflate; bits
# 2-5: level), max_output / 64, two bytes seeding the cuts, then the body ---
def gzip_inflate():
    import gzip
    import zlib
    doc = b'{"name":"left-pad","versions":{"1.0.0":{},"1.1.0":{}},"time":{"1.0.0":"2016-03-23"}}'

    def raw(data):
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()

    seeds = {
        "gzip": b"\x05\x10\x12\x34" + gzip.compress(doc, mtime=0),
        "gzip_two_members": b"\x01\x10\x00\x07" + gzip.compress(doc, mtime=0)
                            + gzip.compress(b"[]", mtime=0),
        "gzip_named": b"\x01\x10\x99\x01" + bytes.fromhex("1f8b08080000000000ff") + b"doc.json\0"
                      + raw(doc) + struct.pack("<II", zlib.crc32(doc), len(doc)),
        "gzip_bomb": b"\x01\x02\x00\x01" + gzip.compress(bytes(100000), mtime=0),
        "zlib": b"\x0a\x10\x00\x03" + zlib.compress(doc),
        "raw_deflate_as_deflate": b"\x02\x10\x50\x50" + raw(doc),
        "zip_member": b"\x03\x10\x00\x11" + raw(doc),
        "identity": b"\x00\x02\x00\x02" + doc,
    }
    for n, body in seeds.items():
        write("fuzz_gzip_inflate", n, body)


# --- fuzz_zip_reader: max_entries, max_member_size / 256, then the archive ---
def zip_reader():
    import io
    import zipfile
    when = (2025, 1, 1, 0, 0, 0)

    def info(name, method):
        zi = zipfile.ZipInfo(name, date_time=when)
        zi.compress_type = method
        return zi

    def osv(i):
        return b'{"id":"MAL-2025-%d","affected":[{"package":{"ecosystem":"npm","name":"p%d"}}]}' % (i, i)

    class Unseekable(io.RawIOBase):  # zipfile then writes data descriptors, as Go's writer does
        def __init__(self):
            self.buf = bytearray()

        def writable(self):
            return True

        def write(self, b):
            self.buf += b
            return len(b)

    def archive(members, streamed=False, comment=b""):
        out = Unseekable() if streamed else io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for name, method, data, zip64 in members:
                if zip64:
                    with z.open(info(name, method), "w", force_zip64=True) as f:
                        f.write(data)
                else:
                    z.writestr(info(name, method), data)
            z.comment = comment
        return bytes(out.buf) if streamed else out.getvalue()

    deflated, stored = zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED
    seeds = {
        "osv_like": archive([("npm/", stored, b"", False)] + [
            ("npm/MAL-2025-%d.json" % i, deflated, osv(i), False) for i in range(4)]),
        "stored_and_comment": archive([("GHSA-1.json", stored, osv(1), False)], comment=b"osv"),
        "zip64_member": archive([("PYSEC-1.json", deflated, osv(2), True)]),
        "data_descriptors": archive([("a.json", deflated, osv(3), False),
                                     ("b.json", deflated, b"", False)], streamed=True),
        "empty": archive([]),
    }
    for n, zipped in seeds.items():
        write("fuzz_zip_reader", n, b"\x10\x04" + zipped)
    # The ZIP64 end records (Python writes them only past 65,535 entries): one stored member,
    # then the ZIP64 end record and its locator, then an end record with saturated fields.
    data = b"{}"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, zlib_crc(data), 2, 2, 6, 0)
    member = local + b"x.json" + data
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, zlib_crc(data),
                          2, 2, 6, 0, 0, 0, 0, 0, 0) + b"x.json"
    record = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, 1, 1, len(central),
                         len(member))
    locator = struct.pack("<IIQI", 0x07064B50, 0, len(member) + len(central), 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    write("fuzz_zip_reader", "zip64_end_records", b"\x10\x04" + member + central + record
          + locator + end)


def zlib_crc(data):
    import zlib
    return zlib.crc32(data)


if __name__ == "__main__":
    responses()
    chunked()
    dns_answers()
    configs()
    http2_frames()
    http2_session()
    http2_origin_frames()
    gzip_inflate()
    zip_reader()
    sys.exit(0)
