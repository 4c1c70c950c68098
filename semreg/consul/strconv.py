"""Go's strconv, as Consul reads the values clients write: `Unquote` (a double-quoted literal's escapes),
`ParseInt` with base 0 and `ParseBool`. Consul is written in Go, so its clients write what Go reads: py-consul
sends `enable=True`, a filter compares `Service.Port == "0x50"`."""
from __future__ import annotations

TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(raw: str) -> bool:
    if raw in TRUE:
        return True
    if raw in FALSE:
        return False
    raise ValueError("not a boolean (true, false, 1, 0, t, f, ...)")


def parse_int(raw: str) -> int:
    """Go's strconv.ParseInt(raw, 0, 64): a sign, then decimal, `0x`, `0o`, `0b` or a leading-0 octal, with `_`
    between digits."""
    body = raw.lstrip("+-")
    if not raw.isascii() or len(raw) - len(body) > 1 or not body or body != body.strip():
        raise ValueError("not a whole number")
    sign = -1 if raw.startswith("-") else 1
    legacy_octal = len(body) > 1 and body[0] == "0" and body[1] not in "xXoObB"
    try:
        value = int("0o" + body[1:] if legacy_octal else body, 0)
    except ValueError:
        raise ValueError("not a whole number") from None
    if not -(2**63) <= sign * value < 2**63:
        raise ValueError("out of range of a 64-bit whole number")
    return sign * value


_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}
_HEX = frozenset("0123456789abcdefABCDEF")


def unquote(body: str) -> str:
    """The text of a Go double-quoted literal's `body` (strconv.Unquote): Go's escapes, no newline. Bytes written
    as `\\xHH` or octal that are not UTF-8 read as U+FFFD."""
    if "\n" in body:
        raise ValueError("a newline inside a double-quoted string")
    if "\\" not in body:
        return body
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogatepass")
            i += 1
            continue
        if i + 1 >= len(body):
            raise ValueError("a backslash at the end")
        e = body[i + 1]
        if e in _SIMPLE:
            out += _SIMPLE[e].encode()
            i += 2
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            digits = body[i + 2:i + 2 + width]
            if len(digits) != width or not set(digits) <= _HEX:
                raise ValueError(f"\\{e} takes {width} hexadecimal digits")
            code = int(digits, 16)
            if e == "x":
                out.append(code)
            elif code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise ValueError(f"\\{e}{digits} is not a character")
            else:
                out += chr(code).encode()
            i += 2 + width
        elif e in "01234567":
            digits = body[i + 1:i + 4]
            if len(digits) != 3 or not set(digits) <= set("01234567") or int(digits, 8) > 255:
                raise ValueError("an octal escape takes three digits, at most \\377")
            out.append(int(digits, 8))
            i += 4
        else:
            raise ValueError(f"unknown escape \\{e}")
    return out.decode("utf-8", "replace")
