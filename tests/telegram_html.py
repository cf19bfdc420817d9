"""Telegram's HTML parse mode for the fake Bot API (``fake_telegram``) and for tests that
check what the bot sends: the same tags, attributes, entity decoding, error texts and
UTF-16 offsets as Telegram (modelled on tdlib's ``parse_html``), the ``entities`` of the
resulting message, and Telegram's stripping of leading and trailing whitespace."""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "TelegramHTMLError",
    "parse_telegram_html",
    "strip_message_text",
    "utf16_len",
    "validate_telegram_html",
]


class TelegramHTMLError(ValueError):
    """Raised by :func:`parse_telegram_html`; ``str(exc)`` is Telegram's description."""


_HTML_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "s",
        "strike",
        "del",
        "u",
        "ins",
        "tg-spoiler",
        "tg-emoji",
        "span",
        "pre",
        "code",
        "blockquote",
    }
)
_SIMPLE_ENTITY_TYPES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "u": "underline",
    "ins": "underline",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
}
# tdlib's MessageEntity::get_type_priority, used as the last sort key.
_ENTITY_PRIORITY = {
    "bold": 90,
    "italic": 91,
    "underline": 92,
    "strikethrough": 93,
    "spoiler": 94,
    "custom_emoji": 99,
    "code": 20,
    "pre": 11,
    "text_link": 49,
    "text_mention": 49,
    "blockquote": 0,
    "expandable_blockquote": 0,
}
_SPACES = frozenset(" \t\r\n\0\v")  # tdlib's is_space() - note that NUL counts as space
_SPECIAL_RE = re.compile(r"[<&]")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")
_ALPHA = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NAME_TOKEN = _ALPHA | _DIGITS | frozenset(".-")
_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_FAST_ENTITY_RE = re.compile(r"&(lt|gt|amp|quot);")
_TG_USER_RE = re.compile(r"tg://user\?id=(\d+)$")


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, the unit Telegram counts lengths/offsets in."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) >> 1


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8", "surrogatepass"))


def _decode_entity(t: str, pos: int) -> tuple[int, int]:
    """tdlib's decode_html_entity: ``(code point, end index)`` or ``(0, pos)`` if none."""
    fast = _FAST_ENTITY_RE.match(t, pos)
    if fast is not None:
        return ord(_NAMED_ENTITIES[fast.group(1)]), fast.end()
    end = pos + 1
    res = 0
    if t[end] == "#":
        end += 1
        if t[end] == "x":
            end += 1
            while t[end] in _HEX:
                res = res * 16 + int(t[end], 16)
                end += 1
        else:
            while t[end] in _DIGITS:
                res = res * 10 + ord(t[end]) - 48
                end += 1
        if res == 0 or res >= 0x10FFFF or end - pos >= 10:
            return 0, pos
    else:
        while t[end] in _ALPHA:
            end += 1
        named = _NAMED_ENTITIES.get(t[pos + 1 : end])
        if named is None:
            return 0, pos
        res = ord(named)
    if t[end] == ";":
        end += 1
    return res, end


def _checked_link(url: str) -> str:
    """A much simplified LinkManager::get_checked_link: '' means 'drop the entity'."""
    url = url.strip()
    if not url or any(c.isspace() for c in url):
        return ""
    if "://" not in url and not url.startswith(("tg:", "mailto:")):
        url = "http://" + url
    return url


def _sort_entities(entities: list[dict[str, Any]]) -> None:
    entities.sort(key=lambda e: (e["offset"], -e["length"], _ENTITY_PRIORITY.get(e["type"], 50)))


def parse_telegram_html(
    text: str, *, strict_entities: bool = True
) -> tuple[str, list[dict[str, Any]]]:
    """Parse Telegram-flavoured HTML like the Bot API does.

    Returns ``(visible_text, entities)`` with Bot API ``MessageEntity`` dicts (offsets and
    lengths in UTF-16 code units).  Raises :class:`TelegramHTMLError` whose message is the part
    Telegram puts after ``"Bad Request: can't parse entities: "``.

    ``strict_entities`` rejects a ``&`` that does not start a supported entity; tdlib (and so
    Telegram) would keep it literally.
    """
    if "<" not in text and "&" not in text:
        return text, []
    t = text + "\0"  # sentinel, tdlib relies on the terminating NUL the same way
    n = len(text)
    out: list[str] = []
    out_len = 0  # number of pieces in ``out`` (index for <a> without href)
    u16 = 0
    need_recheck = False
    entities: list[dict[str, Any]] = []
    # (tag name, argument, utf16 offset, index into ``out``)
    stack: list[tuple[str, str, int, int]] = []

    def fail(message: str) -> TelegramHTMLError:
        return TelegramHTMLError(message)

    i = 0
    while i < n:
        m = _SPECIAL_RE.search(t, i, n)
        j = m.start() if m else n
        if j > i:
            seg = t[i:j]
            out.append(seg)
            out_len += 1
            u16 += utf16_len(seg)
            i = j
            continue
        c = t[i]
        if c == "&":
            code, end = _decode_entity(t, i)
            if code:
                out.append(chr(code))
                out_len += 1
                u16 += 1 + (code > 0xFFFF)
                if 0xD800 <= code <= 0xDFFF:
                    need_recheck = True
                i = end
                continue
            if strict_entities:
                raise fail(
                    'Unsupported HTML entity or unescaped "&" at byte offset '
                    f'{_byte_offset(text, i)} (escape it as "&amp;")'
                )
            out.append("&")
            out_len += 1
            u16 += 1
            i += 1
            continue

        # c == "<"
        begin = i
        i += 1
        if t[i] != "/":
            # start tag
            while t[i] not in _SPACES and t[i] != ">":
                i += 1
            if t[i] == "\0":
                raise fail(f"Unclosed start tag at byte offset {_byte_offset(text, begin)}")
            tag = t[begin + 1 : i].translate(_ASCII_LOWER)
            if tag not in _HTML_TAGS:
                raise fail(
                    f'Unsupported start tag "{tag}" at byte offset {_byte_offset(text, begin)}'
                )
            argument = ""
            while t[i] != ">":
                while t[i] != "\0" and t[i] in _SPACES:
                    i += 1
                if t[i] == ">":
                    break
                attr_begin = i
                while t[i] not in _SPACES and t[i] not in "=>/\"'":
                    i += 1
                attr_name = t[attr_begin:i]
                if not attr_name:
                    raise fail(
                        f'Empty attribute name in the tag "{tag}" at byte offset '
                        f"{_byte_offset(text, begin)}"
                    )
                while t[i] != "\0" and t[i] in _SPACES:
                    i += 1
                if t[i] != "=":
                    if t[i] == "\0":
                        raise fail(
                            f'Unclosed start tag "{tag}" at byte offset {_byte_offset(text, begin)}'
                        )
                    if tag == "blockquote" and attr_name == "expandable":
                        argument = "1"
                    continue
                i += 1
                while t[i] != "\0" and t[i] in _SPACES:
                    i += 1
                if t[i] == "\0":
                    raise fail(
                        f'Unclosed start tag "{tag}" at byte offset {_byte_offset(text, begin)}'
                    )
                if t[i] not in "'\"":
                    token_begin = i
                    while t[i] in _NAME_TOKEN:
                        i += 1
                    value = t[token_begin:i].translate(_ASCII_LOWER)
                    if t[i] not in _SPACES and t[i] != ">":
                        raise fail(
                            "Unexpected end of name token at byte offset "
                            f"{_byte_offset(text, token_begin)}"
                        )
                else:
                    quote = t[i]
                    i += 1
                    chars: list[str] = []
                    while t[i] != quote and t[i] != "\0":
                        if t[i] == "&":
                            code, end = _decode_entity(t, i)
                            if code:
                                chars.append(chr(code))
                                i = end
                                continue
                            if strict_entities:
                                raise fail(
                                    'Unsupported HTML entity or unescaped "&" at byte offset '
                                    f'{_byte_offset(text, i)} (escape it as "&amp;")'
                                )
                        chars.append(t[i])
                        i += 1
                    if t[i] == quote:
                        i += 1
                    value = "".join(chars)
                if t[i] == "\0":
                    raise fail(f"Unclosed start tag at byte offset {_byte_offset(text, begin)}")
                if tag == "a" and attr_name == "href":
                    argument = value
                elif tag == "code" and attr_name == "class" and value.startswith("language-"):
                    argument = value[9:]
                elif tag == "span" and attr_name == "class" and value.startswith("tg-"):
                    argument = value[3:]
                elif tag == "tg-emoji" and attr_name == "emoji-id":
                    argument = value
                elif tag == "blockquote" and attr_name == "expandable":
                    argument = "1"
            if tag == "span" and argument != "spoiler":
                raise fail(
                    'Tag "span" must have class "tg-spoiler" at byte offset '
                    f"{_byte_offset(text, begin)}"
                )
            stack.append((tag, argument, u16, out_len))
            i += 1  # skip '>'
            continue

        # end tag
        if not stack:
            raise fail(f"Unexpected end tag at byte offset {_byte_offset(text, begin)}")
        while t[i] not in _SPACES and t[i] != ">":
            i += 1
        end_tag = t[begin + 2 : i].translate(_ASCII_LOWER)
        while t[i] in _SPACES and t[i] != "\0":
            i += 1
        if t[i] != ">":
            raise fail(f"Unclosed end tag at byte offset {_byte_offset(text, begin)}")
        tag, argument, start_u16, start_piece = stack[-1]
        if end_tag and end_tag != tag:
            raise fail(
                f"Unmatched end tag at byte offset {_byte_offset(text, begin)}, "
                f'expected "</{tag}>", found "</{end_tag}>"'
            )
        if u16 > start_u16:
            offset, length = start_u16, u16 - start_u16
            simple = _SIMPLE_ENTITY_TYPES.get(tag)
            if simple is not None:
                entities.append({"type": simple, "offset": offset, "length": length})
            elif tag == "tg-emoji":
                if not argument.isdigit() or int(argument) == 0:
                    raise fail("Invalid custom emoji identifier specified")
                entities.append(
                    {
                        "type": "custom_emoji",
                        "offset": offset,
                        "length": length,
                        "custom_emoji_id": argument,
                    }
                )
            elif tag == "a":
                url = argument or "".join(out[start_piece:])
                user = _TG_USER_RE.match(url)
                if user:
                    uid = int(user.group(1))
                    entities.append(
                        {
                            "type": "text_mention",
                            "offset": offset,
                            "length": length,
                            "user": {"id": uid, "is_bot": False, "first_name": f"User {uid}"},
                        }
                    )
                else:
                    url = _checked_link(url)
                    if url:
                        entities.append(
                            {"type": "text_link", "offset": offset, "length": length, "url": url}
                        )
            elif tag == "pre":
                last = entities[-1] if entities else None
                if (
                    last is not None
                    and last["type"] == "code"
                    and last["offset"] == offset
                    and last["length"] == length
                ):
                    # <pre><code class="language-x">...</code></pre> is one "pre" entity
                    last["type"] = "pre"
                    language = last.pop("_language", None)
                    if language:
                        last["language"] = language
                else:
                    entities.append({"type": "pre", "offset": offset, "length": length})
            elif tag == "code":
                last = entities[-1] if entities else None
                if (
                    last is not None
                    and last["type"] == "pre"
                    and last["offset"] == offset
                    and last["length"] == length
                    and argument
                ):
                    last["language"] = argument
                else:
                    entity: dict[str, Any] = {"type": "code", "offset": offset, "length": length}
                    if argument:
                        entity["_language"] = argument
                    entities.append(entity)
            elif tag == "blockquote":
                entities.append(
                    {
                        "type": "expandable_blockquote" if argument else "blockquote",
                        "offset": offset,
                        "length": length,
                    }
                )
        stack.pop()
        i += 1  # skip '>'

    if stack:
        raise fail(f'Can\'t find end tag corresponding to start tag "{stack[-1][0]}"')
    for entity in entities:
        entity.pop("_language", None)
    _sort_entities(entities)
    visible = "".join(out)
    if need_recheck:
        try:
            visible.encode("utf-8")
        except UnicodeEncodeError:
            raise fail(
                "Text contains invalid Unicode characters after decoding HTML entities, check "
                "for unmatched surrogate code units"
            ) from None
    return visible, entities


def validate_telegram_html(text: str, *, strict_entities: bool = True) -> tuple[bool, str, int]:
    """Validate ``text`` as Telegram HTML.

    Returns ``(ok, error_description, visible_length)``: the description is what Telegram puts
    after ``"can't parse entities: "`` (empty when ok) and the length is the visible text in
    UTF-16 code units (0 when not ok).  Length *limits* are not checked here.
    """
    try:
        visible, _ = parse_telegram_html(text, strict_entities=strict_entities)
    except TelegramHTMLError as exc:
        return False, str(exc), 0
    return True, "", utf16_len(visible)


def strip_message_text(
    text: str, entities: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """Strip surrounding whitespace like Telegram does and clip entities accordingly."""
    stripped = text.strip()
    if stripped == text:
        return text, entities
    if not stripped:
        return "", []
    lead = utf16_len(text[: len(text) - len(text.lstrip())])
    total = utf16_len(stripped)
    clipped: list[dict[str, Any]] = []
    for entity in entities:
        start = max(entity["offset"] - lead, 0)
        end = min(entity["offset"] + entity["length"] - lead, total)
        if end > start:
            clipped.append({**entity, "offset": start, "length": end - start})
    return stripped, clipped
