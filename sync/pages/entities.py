"""``Module:S3RM entities``: the codec's named references as a Lua data table.

``Module:S3RM values`` loads it with ``mw.loadData`` and resolves a named
reference only through it, so the module, ``codec.decode_value`` and the page
view resolve the same names (``docs/browser.md#values-in-smw``). The source is
:data:`gateway.domain.codec.NAMED_REFERENCES`; ``s3rm schema generate`` writes
it to ``schema/Modules/S3RM entities.lua`` and ``sync`` pushes it.

Every table entry is printable ASCII — any other byte is a ``\\ddd`` escape — so
MediaWiki's NFC normalisation of saved text cannot change a table entry (many
entries are combining marks or start with one).
"""
from __future__ import annotations

from gateway.domain.codec import NAMED_REFERENCES

#: Name of the data module ``Module:S3RM values`` loads (``mw.loadData``).
ENTITIES_MODULE = "S3RM entities"

_HEADER = """\
-- S3RM synced: 저장소에서 생성하는 모듈입니다. 위키에서 고치지 말고 저장소의
-- gateway/domain/codec.py NAMED_REFERENCES 를 고친 뒤 `s3rm schema generate` 와
-- `s3rm sync push` 를 하세요 (docs/browser.md#synced-pages).
--
-- Named character references Module:S3RM values resolves: name (without "&"
-- and ";") -> text, the same table as the page codec's decode_value and the
-- names MediaWiki's parser resolves (docs/browser.md#values-in-smw). Bytes
-- outside printable ASCII are written as decimal escapes.
return {
"""


def lua_string(text: str) -> str:
    """``text`` as a double-quoted Lua 5.1 string literal in printable ASCII (UTF-8 bytes as ``\\ddd``)."""
    out = []
    for byte in text.encode("utf-8"):
        if 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C):
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def render_entities_module() -> str:
    """Lua source of ``Module:S3RM entities``: ``return { [name] = text, … }``, names sorted."""
    rows = [f"\t[{lua_string(name)}] = {lua_string(text)},\n" for name, text in sorted(NAMED_REFERENCES.items())]
    return _HEADER + "".join(rows) + "}\n"
