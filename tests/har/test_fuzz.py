"""
Lines with odd and wrong values (seeded, so the same every run): the export
never fails, and every entry it makes passes the HAR 1.2 schema.
"""

from __future__ import annotations

import base64
import json
import random

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import encodeLine
from tests.har.support import T0, export, validate

#: Exchanges made up per run.
EXCHANGES = 400

ODD_STRINGS = ["", " ", "é", "日本", "\x00", "a b", '"q"', "<x>", "http://[bad", "host:99999", "::1", "%zz", "+", "=", ";"]
ODD_VALUES: list = [None, True, -1, 0, 2**70, 1.5, float(-1e12), "x", [], {}, ["a"], {"a": 1}]


def odd(rng: random.Random, usual):
    """
    Mostly the usual value, sometimes an odd one.
    """
    roll = rng.random()
    if roll < 0.7:
        return usual
    if roll < 0.85:
        return rng.choice(ODD_STRINGS)
    return rng.choice(ODD_VALUES)


def madeUpLog(seed: int) -> bytes:
    rng = random.Random(seed)
    lines: list[bytes] = []
    for _ in range(EXCHANGES):
        n = len(lines) + 1
        url = odd(rng, rng.choice(["https://shop.test/a?x=1&y=%C3%A9", "http://shop.test/é?q=a b", "blocked.test", "blocked.test:8443", ""]))
        method = odd(rng, rng.choice(["GET", "POST", "CONNECT"]))
        headers = odd(rng, [[odd(rng, "Content-Type"), odd(rng, rng.choice(["text/html; charset=latin1", "multipart/form-data; boundary=b", "application/json", "image/png"]))],
                            ["Cookie", odd(rng, "a=1; =2; b; c=%")], ["Content-Encoding", odd(rng, rng.choice(["gzip", "br", "zstd", "deflate", "x"]))]])
        lines.append(encodeLine(n, "open", n, 1, T0, {
            "kind": odd(rng, rng.choice(["exchange", "tunnel"])),
            "started": odd(rng, T0 + rng.random() * 100),
            "connection": odd(rng, "c1"),
            "request": odd(rng, {"method": method, "url": url, "version": odd(rng, "HTTP/1.1"), "headers": headers, "headers_size": odd(rng, 100)}),
            "server": odd(rng, {"host": odd(rng, "shop.test"), "port": odd(rng, 443), "address": odd(rng, rng.choice(["127.0.0.1", "::1", "[::1]:443", "1.2.3.4:80", None]))}),
        }))
        if rng.random() < 0.1:
            continue  # left open
        body = rng.choice([b"", b"a=1&b=%E9", b"--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x\"\r\n\r\n\xff\xfe\r\n--b--\r\n", bytes(rng.randrange(256) for _ in range(40))])
        lines.append(encodeLine(len(lines) + 1, "end", n, 1, T0, {
            "ended": odd(rng, T0 + 200),
            "times": odd(rng, {k: odd(rng, T0 + rng.random() * 200) for k in ("connected", "sent", "first_byte", "end")}),
            "request_body": odd(rng, {"size": odd(rng, len(body)), "data": odd(rng, base64.b64encode(body).decode()), "_truncated": odd(rng, False)}),
            "response": odd(rng, {
                "status": odd(rng, 200), "reason": odd(rng, "OK"), "version": odd(rng, "HTTP/1.1"),
                "headers": odd(rng, [["Set-Cookie", odd(rng, "s=1; Max-Age=99999999999; Expires=Fri, 31 Dec 9999 23:59:59 GMT")],
                                     ["Location", odd(rng, "../x")], ["Content-Type", odd(rng, "text/html")],
                                     ["Content-Encoding", odd(rng, "gzip")]]),
                "headers_size": odd(rng, 50),
                "body": odd(rng, {"size": odd(rng, len(body)), "data": odd(rng, base64.b64encode(body).decode()), "sha256": odd(rng, "ab"), "_truncated": odd(rng, True)}),
            }),
            "interim": odd(rng, [100]),
            "bytes": odd(rng, {"up": odd(rng, 1), "down": odd(rng, 2)}),
            "_failed": odd(rng, None), "_refused": odd(rng, None), "_unparsed": odd(rng, None),
            "_websocket": odd(rng, None), "closed_by": odd(rng, "client"),
        }))
    return b"".join(lines)


class FuzzTests(SynchronousTestCase):
    """
    Odd values in every field.
    """

    def test_oddValues(self) -> None:
        """
        Three seeded logs of odd values: the export finishes, every exchange
        still gets an entry (its lines are whole JSON), and the HAR passes
        the schema.
        """
        for seed in (1, 2, 3):
            har, raw, result = export(madeUpLog(seed))
            self.assertEqual(validate(raw), [], f"seed {seed}")
            self.assertEqual(result.entries, EXCHANGES, f"seed {seed}")
            self.assertEqual(result.unreadable, 0, f"seed {seed}")
            self.assertEqual(len(har["log"]["entries"]), result.entries)
            json.loads(raw.decode("utf-8", "strict"))
