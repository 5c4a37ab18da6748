"""
C{--rules FILE}: the main listener's rules, from a file a user writes
(TOML, or JSON when its name ends in C{.json}); see C{docs/rules.rst}.
"""

from __future__ import annotations

from netlog.core.rules import BadRules, ReadFile, Rules, isTomlName, parseRulesText

#: The longest rules file read, in bytes.
MAX_RULES_FILE = 1024 * 1024


def readRulesText(path: str, name: str) -> str:
    """
    The text of the rules file C{path}, called C{name} in a mistake's line
    (C{--rules PATH} at start-up, C{the rules file PATH} for C{netlog
    session rules}).

    @raise BadRules: it can't be read, is too long, or is not UTF-8.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_RULES_FILE + 1)
    except OSError as e:
        raise BadRules(f"{name}: can't be read: {e.strerror or e}") from None
    if len(data) > MAX_RULES_FILE:
        raise BadRules(f"{name}: longer than {MAX_RULES_FILE} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRules(f"{name}: not UTF-8 text") from None


def readRulesFile(path: str, readFile: ReadFile | None = None) -> Rules:
    """
    The rules in C{path}, checked whole; C{readFile} reads the bodies its
    answer rules name in the state folder.

    @raise BadRules: it can't be read, or is wrong (one line, naming the
        file).
    """
    text = readRulesText(path, f"--rules {path}")
    try:
        return parseRulesText(text, toml=isTomlName(path), readFile=readFile)
    except BadRules as e:
        raise BadRules(f"--rules {path}: {e}") from None
