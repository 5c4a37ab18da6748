"""
Opening the network log's file safely: the checks on its folder and the
file itself, and the one open the LogWriter, the supervisor, sessions and
rotation share (a rotation opens the next live segment with it).
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat

#: Mode of the log file, whatever the umask.
FILE_MODE = 0o644
#: Mode of a folder the writer creates for it.
FOLDER_MODE = 0o755
#: Where a refused log is suggested to go instead, as root.
SAFER_ROOT_FOLDER = "/var/lib/netlog"


class UnsafeLogPath(Exception):
    """
    The log's path can't be used safely; the message says why and what to do.
    """


def _groupsOf(uid: int, gid: int | None) -> set[int]:
    """
    The groups a process running as C{uid} (and C{gid}) is in: the given
    group, the user's own and its supplementary groups.
    """
    groups: set[int] = set()
    if gid is not None:
        groups.add(gid)
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return groups
    groups.add(entry.pw_gid)
    try:
        groups.update(os.getgrouplist(entry.pw_name, entry.pw_gid))
    except OSError:
        groups.update(g.gr_gid for g in grp.getgrall() if entry.pw_name in g.gr_mem)
    return groups


def _writableBy(st: os.stat_result, uid: int, groups: set[int]) -> bool:
    mode = st.st_mode
    if st.st_uid == uid:
        return bool(mode & stat.S_IWUSR)
    if st.st_gid in groups:
        return bool(mode & stat.S_IWGRP)
    return bool(mode & stat.S_IWOTH)


def _checkFolder(folder: str, uid: int | None, gid: int | None) -> None:
    """
    Refuse a folder that the user the proxy drops to could write, since that
    user could then replace the log file; and likewise any folder above it
    where that user could move the log's folder away (a sticky folder, like
    C{/tmp}, lets it move only its own).
    """
    if uid is None or uid == 0:
        return
    groups = _groupsOf(uid, gid)
    st = os.stat(folder)
    if _writableBy(st, uid, groups):
        raise UnsafeLogPath(
            f"the log's folder {folder} can be written by uid {uid}, the user the "
            f"proxy runs as, who could then replace the log; make it root's and "
            f"not writable by others (chown root:root {folder}; chmod 755 {folder}) "
            f"or choose a --log in another folder"
        )
    child, childSt = folder, st
    parent = os.path.dirname(child)
    while parent != child:
        parentSt = os.stat(parent)
        sticky = parentSt.st_mode & stat.S_ISVTX
        if _writableBy(parentSt, uid, groups) and not (sticky and childSt.st_uid != uid):
            raise UnsafeLogPath(
                f"the folder {parent}, above the log's folder {folder}, can be "
                f"written by uid {uid}, the user the proxy runs as, who could then "
                f"move the log's folder away and put its own; make {parent} "
                f"root's and not writable by others (chmod 755 {parent}), or "
                f"choose a --log in another folder"
            )
        child, childSt = parent, parentSt
        parent = os.path.dirname(child)


def _userName(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _groupMembers(gid: int) -> set[int] | None:
    """
    The users in group C{gid}, by its entry and by their own primary group;
    None when there is no such group (who is in it can't be known).
    """
    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return None
    members = {entry.pw_uid for entry in pwd.getpwall() if entry.pw_gid == gid}
    for name in group.gr_mem:
        try:
            members.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    return members


def _otherWriters(st: os.stat_result, trusted: set[int]) -> str | None:
    """
    Who, besides the users in C{trusted}, can write a folder: None, or
    words naming them.
    """
    if st.st_uid not in trusted:
        return f"its owner {_userName(st.st_uid)}"
    if st.st_mode & stat.S_IWOTH:
        return "every user"
    if st.st_mode & stat.S_IWGRP:
        members = _groupMembers(st.st_gid)
        if members is None or members - trusted:
            try:
                name = grp.getgrgid(st.st_gid).gr_name
            except KeyError:
                name = str(st.st_gid)
            return f"the group {name}"
    return None


def _trustedWriters() -> str:
    """
    Who may write the log's folders, in words: root, and the user running
    netlog if that isn't root.
    """
    euid = os.geteuid()
    return "root" if euid == 0 else f"root and {_userName(euid)}"


def _safeFolder(folder: str) -> bool:
    """
    Whether a log in C{folder} would pass L{_checkStrict} (the folders that
    exist on the way, none sticky, written by root and us alone).
    """
    trusted = {0, os.geteuid()}
    path = folder
    while not os.path.isdir(path):
        if os.path.lexists(path):
            return False
        path = os.path.dirname(path)
    while True:
        if _otherWriters(os.stat(path), trusted) is not None:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def saferLogPath(path: str) -> str | None:
    """
    Where to put the log instead of C{path}, whose folders others can write:
    the same name in C{/var/lib/netlog} as root (root's own on every
    distribution, unlike C{/var/log}, which Ubuntu makes C{root:syslog
    0775}), else in C{~/.local/state/netlog}; None if that isn't safe either.
    """
    if os.geteuid() == 0:
        folder = SAFER_ROOT_FOLDER
    else:
        state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
        folder = os.path.join(state, "netlog")
    candidate = os.path.join(folder, os.path.basename(path))
    if os.path.abspath(candidate) == os.path.abspath(path) or not _safeFolder(folder):
        return None
    return candidate


def _checkStrict(folder: str, logPath: str | None = None) -> bool:
    """
    Refuse the log's folder, or any folder above it up to C{/}, that a user
    other than root and the one netlog runs as can write, since that user
    could rename the log or its folder away and put its own in its place
    (as C{sshd}'s C{StrictModes} does). A sticky folder (C{/tmp}) written by
    others is fine when the entry below it is root's or ours: others can't
    rename what isn't theirs there.

    @param logPath: the log file, for the words (C{folder} may be the
        nearest folder above the log's that exists, the log's made later).
    @return: whether the log's own folder is such a sticky folder, in which
        case the log file must be root's or ours too (see L{openLogFile}).
    """
    trusted = {0, os.geteuid()}
    logFolder = os.path.dirname(logPath) if logPath else folder
    shared = False
    path, below = folder, None
    while True:
        st = os.stat(path)
        writers = _otherWriters(st, trusted)
        if writers is not None:
            sticky = bool(st.st_mode & stat.S_ISVTX) and st.st_uid in trusted
            if not sticky or (below is not None and below.st_uid not in trusted):
                elsewhere = saferLogPath(logPath or os.path.join(folder, "network.jsonl"))
                instead = (
                    f"give a --log in a folder only {_trustedWriters()} can write, such as "
                    f"--log {elsewhere} (netlog makes the folder, 0755)"
                    if elsewhere is not None
                    else f"give a --log in a folder only {_trustedWriters()} can write"
                )
                if path == logFolder:
                    raise UnsafeLogPath(
                        f"the folder {path}, the log's folder, can be written by {writers}, "
                        f"not only by {_trustedWriters()} (who runs netlog), who could then "
                        f"rename the log away and put their own; make it writable by "
                        f"{_trustedWriters().replace(' and ', ' or ')} alone (chown root {path}; "
                        f"chmod go-w {path}) or {instead}"
                    )
                # A folder above the log's belongs to the system (Ubuntu's
                # /var/log is root:syslog 0775): changing it could break
                # what else writes there, so the way out is another --log.
                raise UnsafeLogPath(
                    f"the folder {path}, above the log's folder {logFolder}, can be written "
                    f"by {writers}, not only by {_trustedWriters()} (who runs netlog), who "
                    f"could then rename the log's folder away and put their own; {instead}"
                )
            if path == folder:
                shared = True
        parent = os.path.dirname(path)
        if parent == path:
            return shared
        path, below = parent, st


def _makeFolders(folder: str) -> None:
    """
    Create C{folder} and any missing folder above it, each C{0755} whatever
    the umask (a folder the umask left C{0700} would keep the unprivileged
    user from reading the log).
    """
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, FOLDER_MODE)
        except FileExistsError:
            continue
        os.chmod(path, FOLDER_MODE)


def _checkOurs(path: str, st: os.stat_result) -> None:
    """
    Refuse a log file that is neither root's nor ours, in a sticky folder
    others can write.
    """
    if st.st_uid not in (0, os.geteuid()):
        raise UnsafeLogPath(
            f"the log file {path} belongs to {_userName(st.st_uid)}, in a folder "
            f"others can write; netlog only writes a file of its own there: "
            f"remove it or choose a --log in another folder"
        )


def _checkFile(path: str, st: os.stat_result, shared: bool) -> None:
    """
    Refuse a log file that isn't a regular file, isn't ours in a shared
    (sticky) folder, or has another name.
    """
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeLogPath(f"the log path {path} is not a regular file; remove it or choose another --log")
    if shared:
        _checkOurs(path, st)
    if st.st_nlink != 1:
        # Another name for the same file (a hard link) could be any file
        # of root's; making it 0644 and root's would be a gift.
        raise UnsafeLogPath(
            f"the log file {path} has {st.st_nlink} names (hard links); "
            f"netlog only writes a file with one: remove the other names "
            f"or choose another --log"
        )


def checkLogPath(path: str, uid: int | None = None, gid: int | None = None, makeFolders: bool = True) -> None:
    """
    Check, without opening it, that the log can be opened safely at C{path}:
    what L{openLogFile} would refuse is refused here, first, with the same
    words. The missing folders are made (as L{openLogFile} would), once the
    folders above them are found safe; without C{makeFolders} (a path given
    by hand) a missing folder is refused instead.

    @raise UnsafeLogPath: the path can't be used; the message says why and
        what to do.
    """
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise UnsafeLogPath(
            f"the log path {path} is a folder; name a file in it, such as "
            f"{os.path.join(path, 'network.jsonl')}"
        )
    existing = folder
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UnsafeLogPath(
            f"the log path {path} is under {existing}, which is a file, not a "
            f"folder; choose a --log in a folder"
        )
    _checkFolder(existing, uid, gid)
    _checkStrict(existing, path)
    if not makeFolders and existing != folder:
        raise UnsafeLogPath(f"no such folder: {folder} (netlog makes folders only for its default log)")
    try:
        _makeFolders(folder)
    except OSError as e:
        raise UnsafeLogPath(
            f"the log's folder {folder} can't be made ({e.strerror or e}); make "
            f"it yourself or choose a --log elsewhere"
        ) from None
    _checkFolder(folder, uid, gid)
    shared = _checkStrict(folder, path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeLogPath(
            f"the log path {path} is a symbolic link; netlog never writes "
            f"through one: remove it or choose another --log"
        )
    _checkFile(path, st, shared)


def openLogFile(path: str, uid: int | None = None, gid: int | None = None) -> int:
    """
    Open (creating it if need be) the log file for appending, safely.

    Never through a symbolic link, nothing but a regular file, mode 0644
    whatever the umask, root's own when run as root.

    @param uid: the user the process will drop to, if any; its folder must not
        be writable by that user.
    @raise UnsafeLogPath: the path, its folder or one above it is unsafe
        (see L{_checkStrict}).
    @return: a file descriptor open for reading and appending.
    """
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    _makeFolders(folder)
    _checkFolder(folder, uid, gid)
    shared = _checkStrict(folder, path)
    if shared:
        # Opening another's file there may fail (fs.protected_regular) or
        # hand us a file its owner still holds open: refuse it first.
        try:
            _checkOurs(path, os.lstat(path))
        except FileNotFoundError:
            pass
    flags = (
        os.O_RDWR
        | os.O_APPEND
        | os.O_CREAT
        | os.O_NOFOLLOW
        | os.O_CLOEXEC
        | os.O_NONBLOCK
        | getattr(os, "O_NOCTTY", 0)
    )
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeLogPath(
                f"the log path {path} is a symbolic link; netlog never writes "
                f"through one: remove it or choose another --log"
            ) from None
        if e.errno == errno.ENXIO:
            raise UnsafeLogPath(
                f"the log path {path} is not a regular file; remove it or "
                f"choose another --log"
            ) from None
        raise
    try:
        st = os.fstat(fd)
        _checkFile(path, st, shared)
        os.set_blocking(fd, True)
        os.fchmod(fd, FILE_MODE)
        if os.geteuid() == 0:
            os.fchown(fd, 0, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd

