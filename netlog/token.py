"""
The API's token: what a request that changes something (and, with
C{--api-token-reads}, any request) carries as C{Authorization: Bearer TOKEN}.

The proxy keeps it in a file only root reads (C{STATE/api-token} unless
C{--api-token-file} says otherwise), made at start when it is missing, before
privileges drop; a client (C{netlog session}, a grader's script) finds it
with L{findToken}: C{--token}, then C{NETLOG_API_TOKEN}, then the file.
"""

from __future__ import annotations

import errno
import hmac
import os
import secrets
import stat
from typing import Mapping, Sequence

from netlog.state import TOKEN_ENV, TOKEN_FILE

#: Random bytes in a new token (URL-safe base64 of them is the token).
TOKEN_BYTES = 32
#: The token file's mode: the unprivileged user the proxy serves as (and
#: the agent's code) can't read it.
TOKEN_MODE = 0o600
#: The mode of a state folder made for the token.
FOLDER_MODE = 0o755
#: The longest token read from a file or given, in characters.
MAX_TOKEN = 256
#: The characters of a token (URL-safe base64, as L{newToken} makes them).
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class TokenError(Exception):
    """
    The token file can't be made or read safely; the message says what to fix.
    """


def defaultTokenPath(stateDir: str) -> str:
    """
    Where the token lives for a proxy whose state folder is C{stateDir}.
    """
    return os.path.join(stateDir, TOKEN_FILE)


def newToken() -> str:
    """
    A new token: L{TOKEN_BYTES} random bytes, URL-safe base64.
    """
    return secrets.token_urlsafe(TOKEN_BYTES)


def validToken(text: str) -> bool:
    """
    Whether C{text} can be a token: 16 to L{MAX_TOKEN} URL-safe characters.
    """
    return 16 <= len(text) <= MAX_TOKEN and all(c in _TOKEN_CHARS for c in text)


def loadOrCreateToken(path: str) -> str:
    """
    The token in C{path}, made (with its folder) when the file is missing.

    Never through a symbolic link; the file must be a regular file of this
    process's user (root, at start) that nobody else may read or write.

    @raise TokenError: it can't be made or read, or is unsafe or not a token.
    """
    try:
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=FOLDER_MODE, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, TOKEN_MODE)
        except FileExistsError:
            return _readToken(path)
        token = newToken()
        try:
            os.fchmod(fd, TOKEN_MODE)
            os.write(fd, token.encode("ascii") + b"\n")
        finally:
            os.close(fd)
        return token
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TokenError(f"{path} is a symbolic link, which netlog never follows for its token; "
                             f"remove it and netlog makes a new token") from None
        raise TokenError(f"{path} can't be used as the API's token file: {e.strerror}") from None


def _readToken(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TokenError(f"{path} is not a regular file; remove it and netlog makes a new token")
        if st.st_uid != os.geteuid():
            raise TokenError(
                f"{path} belongs to uid {st.st_uid}, not to uid {os.geteuid()} that starts netlog; "
                f"remove it and netlog makes a new token"
            )
        if st.st_mode & 0o077:
            raise TokenError(
                f"{path} can be read or written by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                f"chmod 600 {path}"
            )
        data = os.read(fd, MAX_TOKEN + 2)
    finally:
        os.close(fd)
    token = data.decode("ascii", "replace").strip()
    if not validToken(token):
        raise TokenError(
            f"{path} holds no token (16 to {MAX_TOKEN} of A-Z a-z 0-9 - _); "
            f"remove it and netlog makes a new one"
        )
    return token


def findToken(given: str | None, path: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """
    The token a client sends: C{given} (its C{--token}), else
    C{NETLOG_API_TOKEN}, else the first line of the file at C{path} if this
    user can read it; None when none of them has one.

    @param environ: the environment (L{os.environ} as it is at the call).
    """
    if environ is None:
        environ = os.environ
    if given:
        return given.strip()
    if environ.get(TOKEN_ENV):
        return environ[TOKEN_ENV].strip()
    if path is None:
        return None
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            token = f.read(MAX_TOKEN + 2).strip()
    except OSError:
        return None
    return token or None


def bearerToken(values: Sequence[bytes] | None) -> bytes | None:
    """
    The token of a request's C{Authorization} header values: C{Bearer TOKEN}
    in exactly one header; None otherwise.
    """
    if not values or len(values) != 1:
        return None
    scheme, _, credentials = values[0].strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    credentials = credentials.strip()
    return credentials or None


def tokenMatches(offered: bytes | None, token: bytes) -> bool:
    """
    Whether C{offered} is C{token}, compared in constant time.
    """
    if offered is None:
        return False
    return hmac.compare_digest(offered, token)
