"""A TLS 1.3 client driven through libssl itself (ctypes), for what Python's ssl module cannot
do: send KeyUpdate messages (SSL_key_update) after the handshake. TLS runs on two memory BIOs,
so the test decides exactly when bytes go to the socket and never has to read what comes
back. Nothing is verified: the tests using it are about what sluice does with the records,
not about whom it is talking to.
"""
import ctypes
import ctypes.util

_ssl = ctypes.CDLL(ctypes.util.find_library("ssl") or "libssl.so.3")

_vp = ctypes.c_void_p
for name, res, args in [
    ("TLS_client_method", _vp, []),
    ("SSL_CTX_new", _vp, [_vp]),
    ("SSL_CTX_free", None, [_vp]),
    ("SSL_CTX_ctrl", ctypes.c_long, [_vp, ctypes.c_int, ctypes.c_long, _vp]),
    ("SSL_new", _vp, [_vp]),
    ("SSL_free", None, [_vp]),
    ("SSL_ctrl", ctypes.c_long, [_vp, ctypes.c_int, ctypes.c_long, _vp]),
    ("SSL_set_alpn_protos", ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_uint]),
    ("SSL_set_connect_state", None, [_vp]),
    ("SSL_set_bio", None, [_vp, _vp, _vp]),
    ("SSL_do_handshake", ctypes.c_int, [_vp]),
    ("SSL_get_error", ctypes.c_int, [_vp, ctypes.c_int]),
    ("SSL_key_update", ctypes.c_int, [_vp, ctypes.c_int]),
    ("SSL_write_ex", ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_size_t,
                                    ctypes.POINTER(ctypes.c_size_t)]),
    ("SSL_read_ex", ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_size_t,
                                   ctypes.POINTER(ctypes.c_size_t)]),
    ("SSL_version", ctypes.c_int, [_vp]),
    ("BIO_s_mem", _vp, []),
    ("BIO_new", _vp, [_vp]),
    ("BIO_read", ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_int]),
    ("BIO_write", ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_int]),
    ("BIO_ctrl_pending", ctypes.c_size_t, [_vp]),
]:
    fn = getattr(_ssl, name)
    fn.restype = res
    fn.argtypes = args

_SSL_CTRL_SET_TLSEXT_HOSTNAME = 55
_SSL_CTRL_SET_MIN_PROTO_VERSION = 123
_TLS1_3_VERSION = 0x0304
_SSL_ERROR_WANT_READ = 2
_SSL_KEY_UPDATE_NOT_REQUESTED = 0
_SSL_KEY_UPDATE_REQUESTED = 1


class Tls13Client:
    """TLS 1.3 over a connected socket. handshake() reads the socket until it is done; after
    that nothing here reads the socket unless recv() is called."""

    def __init__(self, sock, sni):
        self.sock = sock
        self._ctx = _ssl.SSL_CTX_new(_ssl.TLS_client_method())
        _ssl.SSL_CTX_ctrl(self._ctx, _SSL_CTRL_SET_MIN_PROTO_VERSION, _TLS1_3_VERSION, None)
        self._ssl = _ssl.SSL_new(self._ctx)
        self._in = _ssl.BIO_new(_ssl.BIO_s_mem())
        self._out = _ssl.BIO_new(_ssl.BIO_s_mem())
        _ssl.SSL_set_bio(self._ssl, self._in, self._out)  # the SSL owns both BIOs now
        self._sni = ctypes.create_string_buffer(sni.encode())
        _ssl.SSL_ctrl(self._ssl, _SSL_CTRL_SET_TLSEXT_HOSTNAME, 0, ctypes.cast(self._sni, _vp))
        alpn = b"\x08http/1.1"
        _ssl.SSL_set_alpn_protos(self._ssl, alpn, len(alpn))
        _ssl.SSL_set_connect_state(self._ssl)
        self._buf = ctypes.create_string_buffer(1 << 16)

    def __del__(self):
        if getattr(self, "_ssl", None):
            _ssl.SSL_free(self._ssl)
        if getattr(self, "_ctx", None):
            _ssl.SSL_CTX_free(self._ctx)

    def take_output(self):
        """The ciphertext libssl has produced and not yet handed out."""
        chunks = []
        while _ssl.BIO_ctrl_pending(self._out):
            n = _ssl.BIO_read(self._out, self._buf, len(self._buf))
            if n <= 0:
                break
            chunks.append(ctypes.string_at(self._buf, n))
        return b"".join(chunks)

    def _feed(self, data):
        while data:
            n = _ssl.BIO_write(self._in, data, len(data))
            assert n > 0, "BIO_write failed"
            data = data[n:]

    def handshake(self):
        while True:
            rc = _ssl.SSL_do_handshake(self._ssl)
            out = self.take_output()
            if out:
                self.sock.sendall(out)
            if rc == 1:
                assert _ssl.SSL_version(self._ssl) == _TLS1_3_VERSION
                return
            err = _ssl.SSL_get_error(self._ssl, rc)
            if err != _SSL_ERROR_WANT_READ:
                raise ConnectionError("TLS handshake failed (SSL_get_error %d)" % err)
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("peer closed during the TLS handshake")
            self._feed(data)

    def seal(self, plaintext):
        """The records of `plaintext`, not sent."""
        written = ctypes.c_size_t(0)
        assert _ssl.SSL_write_ex(self._ssl, plaintext, len(plaintext), ctypes.byref(written))
        return self.take_output()

    def key_update_records(self, count, requested=True):
        """`count` KeyUpdate messages, each in its own record, not sent. With `requested`, each
        asks the peer to update its own keys too, which makes it send a KeyUpdate back."""
        kind = _SSL_KEY_UPDATE_REQUESTED if requested else _SSL_KEY_UPDATE_NOT_REQUESTED
        out = []
        for _ in range(count):
            assert _ssl.SSL_key_update(self._ssl, kind) == 1
            # After the handshake SSL_do_handshake only sends the pending KeyUpdate.
            assert _ssl.SSL_do_handshake(self._ssl) == 1
            out.append(self.take_output())
        return b"".join(out)

    def recv(self, n=65536):
        """Plaintext; reads the socket as needed. b"" at EOF or close_notify."""
        got = ctypes.c_size_t(0)
        while True:
            if _ssl.SSL_read_ex(self._ssl, self._buf, min(n, len(self._buf)), ctypes.byref(got)):
                out = self.take_output()
                if out:
                    self.sock.sendall(out)
                return ctypes.string_at(self._buf, got.value)
            err = _ssl.SSL_get_error(self._ssl, 0)
            out = self.take_output()
            if out:
                self.sock.sendall(out)
            if err != _SSL_ERROR_WANT_READ:
                return b""
            data = self.sock.recv(65536)
            if not data:
                return b""
            self._feed(data)

    def sendall(self, plaintext):
        self.sock.sendall(self.seal(plaintext))
