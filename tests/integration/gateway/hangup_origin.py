"""An origin that answers the first request on each connection (keep-alive), then reads the
next one whole and closes without answering: what an origin does that acted on a request and
then went away (a crash, a restart, a keep-alive timeout that met the request on the wire).
Every request it read is recorded, with the connection it came on, before it answers or hangs
up, so a test can count how often sluice sent each one.
"""
from dataclasses import dataclass
import socket
import threading

ADDRESS = "127.0.0.24"  # probe.test in the bed's zone (peers.Dnsmasq.ZONE)


@dataclass
class Seen:
    connection: int  # 1, 2, ... in the order the origin accepted them
    index: int       # 1 for the first request on its connection
    method: str
    target: str


class HangUpOrigin:
    def __init__(self, port):
        self.port = port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((ADDRESS, port))
        self.sock.listen(64)
        self.seen = []
        self._lock = threading.Lock()
        self._connections = 0
        self._threads = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    def requests(self, target):
        with self._lock:
            return [s for s in self.seen if s.target == target]

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed by stop()
            with self._lock:
                self._connections += 1
                number = self._connections
            t = threading.Thread(target=self._serve, args=(conn, number), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn, number):
        conn.settimeout(30)
        buf = b""
        index = 0
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                while len(buf) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                buf = buf[length:]
                index += 1
                with self._lock:
                    self.seen.append(Seen(number, index, method, target))
                if index > 1:
                    return  # read it whole, acted on it, and hang up without a word
                body = b"answered on connection %d\n" % number
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                             b"Content-Type: text/plain\r\n\r\n%s" % (len(body), body))
        except OSError:
            return
        finally:
            conn.close()

    def stop(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() (a close alone may not)
        except OSError:
            pass
        self.sock.close()
        self._accepter.join(timeout=5)
        for t in self._threads:
            t.join(timeout=5)
