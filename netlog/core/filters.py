"""
The filter language: one expression that picks exchanges, read the same by
C{GET .../exchanges?filter=}, C{netlog.client}'s C{find} and C{wait_for},
C{netlog mcp} and the live view's filter box (docs/agents.rst documents it).

An expression is terms joined by C{and} (or only by spaces), C{or} and
C{not} (or C{-} before a term), with parentheses::

    method:POST url:/api/order status:2xx
    host:shop.test (status:4xx or status:5xx or is:failed)
    reqheader:authorization -url:/static/

A term is C{field:value}; a bare word is C{url:word}. Values hold no spaces
unless quoted (C{"..."} with C{\\"} and C{\\\\}); a value that begins with
C{~} is a regular expression (C{url:~^https://[^/]*/api/}), where a field
takes text. Pure: L{parseFilter} turns text into a
L{Filter}, whose C{matches} asks an L{ExchangeFacts} only what it needs (a
body is decoded only for a term that reads it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Protocol

#: The longest expression read, in characters.
MAX_FILTER = 2000
#: The most terms one expression may hold.
MAX_TERMS = 64


class BadFilter(ValueError):
    """
    The expression can't be read; the message says where and why, in one line.
    """


class ExchangeFacts(Protocol):
    """
    What a filter may ask of an exchange (see L{netlog.core.finding}).
    """

    @property
    def method(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def host(self) -> str: ...

    @property
    def status(self) -> int | None:
        """
        The status the browser got (netlog's own for a refusal), or None.
        """

    @property
    def contentType(self) -> str:
        """
        The answer's C{Content-Type}, or C{""}.
        """

    @property
    def websocket(self) -> bool: ...

    @property
    def failed(self) -> bool: ...

    @property
    def refused(self) -> bool: ...

    @property
    def tunnel(self) -> bool: ...

    def requestHeaders(self) -> list[tuple[str, str]]: ...

    def responseHeaders(self) -> list[tuple[str, str]]: ...

    def requestText(self) -> str: ...

    def responseText(self) -> str: ...


Predicate = Callable[[ExchangeFacts], bool]


@dataclass(frozen=True)
class Filter:
    """
    A parsed expression: C{text} as given, C{matches} its test.
    """

    text: str
    matches: Predicate


#: A filter that lets every exchange through (an empty expression).
EVERYTHING = Filter("", lambda facts: True)


class _Text:
    """
    A value that text is tested against: a substring (case-insensitive), or
    a regular expression written C{~...}.
    """

    def __init__(self, value: str, where: int, exact: bool = False) -> None:
        self.regex: re.Pattern[str] | None = None
        self.value = value
        self.exact = exact
        if value.startswith("~"):
            try:
                self.regex = re.compile(value[1:])
            except re.error as e:
                raise BadFilter(f"at {where + 1}: {value!r} is not a regular expression: {e}") from None
        self.lower = value.lower()

    def found(self, text: str) -> bool:
        if self.regex is not None:
            return self.regex.search(text) is not None
        if self.exact:
            return text.lower() == self.lower
        return self.lower in text.lower()


def _status(value: str, where: int) -> Predicate:
    """
    C{200}, C{4xx}, or C{400-499}.
    """
    low: int
    high: int
    if re.fullmatch(r"[1-5]xx", value, re.IGNORECASE):
        low = int(value[0]) * 100
        high = low + 99
    elif re.fullmatch(r"\d{3}", value):
        low = high = int(value)
    elif re.fullmatch(r"\d{3}-\d{3}", value):
        low, high = int(value[:3]), int(value[4:])
        if low > high:
            raise BadFilter(f"at {where + 1}: status range {value!r} runs backwards")
    else:
        raise BadFilter(f"at {where + 1}: status takes 200, 4xx or 400-499, not {value!r}")
    return lambda facts: facts.status is not None and low <= facts.status <= high


def _header(side: str, value: str, where: int) -> Predicate:
    """
    C{NAME} (present) or C{NAME=VALUE} (a value equal, or C{~regex}).
    """
    name, equals, wanted = value.partition("=")
    name = name.strip().lower()
    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9a-z:-]+", name):
        raise BadFilter(f"at {where + 1}: {side}header takes NAME or NAME=VALUE, not {value!r}")
    test = _Text(wanted, where, exact=True) if equals else None

    def matches(facts: ExchangeFacts) -> bool:
        headers = facts.requestHeaders() if side == "req" else facts.responseHeaders()
        return any(n.lower() == name and (test is None or test.found(v)) for n, v in headers)

    return matches


def _host(value: str, where: int) -> Predicate:
    """
    A host exactly, or C{*.NAME} for it and every name under it.
    """
    wanted = value.lower().rstrip(".")
    if wanted.startswith("*."):
        base = wanted[2:]
        return lambda facts: facts.host == base or facts.host.endswith("." + base)
    return lambda facts: facts.host == wanted


_IS = {
    "websocket": lambda facts: facts.websocket,
    "failed": lambda facts: facts.failed,
    "refused": lambda facts: facts.refused,
    "tunnel": lambda facts: facts.tunnel,
}


def _is(value: str, where: int) -> Predicate:
    test = _IS.get(value.lower())
    if test is None:
        raise BadFilter(f"at {where + 1}: is: takes {', '.join(sorted(_IS))}, not {value!r}")
    return test


def _textField(get: Callable[[ExchangeFacts], str]) -> Callable[[str, int], Predicate]:
    def build(value: str, where: int) -> Predicate:
        test = _Text(value, where)
        return lambda facts: test.found(get(facts))

    return build


def _method(value: str, where: int) -> Predicate:
    wanted = value.upper()
    return lambda facts: facts.method.upper() == wanted


def _body(value: str, where: int) -> Predicate:
    test = _Text(value, where)
    return lambda facts: test.found(facts.requestText()) or test.found(facts.responseText())


#: Each field's name and how a value of it becomes a test.
FIELDS: dict[str, Callable[[str, int], Predicate]] = {
    "method": _method,
    "url": _textField(lambda facts: facts.url),
    "host": _host,
    "status": _status,
    "type": _textField(lambda facts: facts.contentType),
    "reqheader": lambda value, where: _header("req", value, where),
    "resheader": lambda value, where: _header("res", value, where),
    "body": _body,
    "reqbody": _textField(lambda facts: facts.requestText()),
    "resbody": _textField(lambda facts: facts.responseText()),
    "is": _is,
}

_WORDS = frozenset({"and", "or", "not"})


@dataclass(frozen=True)
class _Token:
    kind: str  # "(", ")", "-", "and", "or", "not", "term"
    text: str
    where: int


def _value(text: str, start: int) -> tuple[str, int]:
    """
    The value at C{start}: quoted, or up to a space or an unmatched C{)}.
    """
    if start < len(text) and text[start] == '"':
        out: list[str] = []
        i = start + 1
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                return "".join(out), i + 1
            out.append(c)
            i += 1
        raise BadFilter(f"at {start + 1}: a quote that is never closed")
    i = start
    depth = 0
    while i < len(text) and not text[i].isspace():
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            if depth == 0:
                break
            depth -= 1
        i += 1
    return text[start:i], i


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c in "()":
            tokens.append(_Token(c, c, i))
            i += 1
            continue
        if c == "-" and i + 1 < len(text) and not text[i + 1].isspace():
            tokens.append(_Token("-", c, i))
            i += 1
            continue
        field = re.match(r"([a-z]+):", text[i:], re.IGNORECASE)
        if field is not None and field.group(1).lower() in FIELDS:
            value, end = _value(text, i + field.end())
            tokens.append(_Token("term", field.group(1).lower() + ":" + value, i))
            i = end
            continue
        if field is not None and not text[i:].lower().startswith(("http:", "https:", "ws:", "wss:")):
            raise BadFilter(
                f"at {i + 1}: unknown field {field.group(1)!r} (fields: {', '.join(FIELDS)})"
            )
        word, end = _value(text, i)
        if text[i] != '"' and word.lower() in _WORDS:
            tokens.append(_Token(word.lower(), word, i))
        else:
            tokens.append(_Token("term", "url:" + word, i))
        i = end
    return tokens


class _Parser:
    """
    Recursive descent: C{or} binds loosest, then C{and} (or juxtaposition),
    then C{not}/C{-}.
    """

    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.at = 0
        self.terms = 0

    def _peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _where(self) -> int:
        token = self._peek()
        return token.where + 1 if token is not None else len(self.text) + 1

    def parse(self) -> Predicate:
        result = self._or()
        token = self._peek()
        if token is not None:
            raise BadFilter(f"at {token.where + 1}: unexpected {token.text!r}")
        return result

    def _or(self) -> Predicate:
        parts = [self._and()]
        while (token := self._peek()) is not None and token.kind == "or":
            self.at += 1
            parts.append(self._and())
        if len(parts) == 1:
            return parts[0]
        return lambda facts: any(p(facts) for p in parts)

    def _and(self) -> Predicate:
        parts = [self._not()]
        while (token := self._peek()) is not None and token.kind not in ("or", ")"):
            if token.kind == "and":
                self.at += 1
            parts.append(self._not())
        if len(parts) == 1:
            return parts[0]
        return lambda facts: all(p(facts) for p in parts)

    def _not(self) -> Predicate:
        token = self._peek()
        if token is not None and token.kind in ("not", "-"):
            self.at += 1
            inner = self._not()
            return lambda facts: not inner(facts)
        return self._atom()

    def _atom(self) -> Predicate:
        token = self._peek()
        if token is None:
            raise BadFilter(f"at {self._where()}: the expression ends where a term was expected")
        if token.kind == "(":
            self.at += 1
            inner = self._or()
            closing = self._peek()
            if closing is None or closing.kind != ")":
                raise BadFilter(f"at {token.where + 1}: a parenthesis that is never closed")
            self.at += 1
            return inner
        if token.kind != "term":
            raise BadFilter(f"at {token.where + 1}: {token.text!r} where a term was expected")
        self.at += 1
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise BadFilter(f"at {token.where + 1}: more than {MAX_TERMS} terms")
        name, _, value = token.text.partition(":")
        if value == "":
            raise BadFilter(f"at {token.where + 1}: {name}: needs a value")
        return FIELDS[name](value, token.where)


def parseFilter(text: str) -> Filter:
    """
    Read an expression; an empty one matches every exchange.

    @raise BadFilter: it can't be read (one line saying where and why).
    """
    if len(text) > MAX_FILTER:
        raise BadFilter(f"the expression is longer than {MAX_FILTER} characters")
    if not text.strip():
        return Filter(text, EVERYTHING.matches)
    return Filter(text, _Parser(text, _tokens(text)).parse())
