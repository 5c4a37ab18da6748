"""
Files only root may read that a supervised worker needs, and what the
supervisor made for it in the privileged step (the site proxy's
certificates, see L{netlog.site.ca.mintInChild}).

The supervisor opens a proxy's C{privilegedFiles} in twistd's privileged
step, writes its C{handedData} to anonymous files, and hands them all to
each worker; the worker records them here with
L{inheritPrivilegedFiles} before it builds the proxy, and the proxy opens
them with L{openPrivileged}. The record lives in this module, not in
L{netlog.supervise.worker}, because the worker runs as C{__main__}: state
kept there would not be the state a proxy importing it by name sees.
"""

from __future__ import annotations

import os

#: Files a supervised worker inherited open from its supervisor: path -> fd.
_inherited: dict[str, int] = {}


def inheritPrivilegedFiles(files: dict[str, int]) -> None:
    """
    Record the files the supervisor opened for this worker (called by the
    worker before it parses its options).
    """
    _inherited.update({os.path.abspath(path): fd for path, fd in files.items()})


def inherited(path: str) -> bool:
    """
    Whether this process is a worker its supervisor handed C{path} to.
    """
    return os.path.abspath(path) in _inherited


def openPrivileged(path: str, flags: int = os.O_RDONLY) -> int:
    """
    Open a file only root may read, or what the supervisor made for the
    worker, also in a supervised worker that runs unprivileged.

    A proxy lists such paths in its C{privilegedFiles} attribute (and its
    C{handedData}); the supervisor opens them (read-only) in twistd's
    privileged step (or writes them to anonymous files) and hands them to
    each worker, where this returns a copy of the inherited
    descriptor, at offset 0. Elsewhere (C{--no-supervise}, tests) it is
    C{os.open(path, flags)}.
    """
    fd = _inherited.get(os.path.abspath(path))
    if fd is None:
        return os.open(path, flags)
    copy = os.dup(fd)
    os.lseek(copy, 0, os.SEEK_SET)
    return copy
